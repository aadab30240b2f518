//! The page's HTML: a whole page ([`page`]) whose `<main>` holds a
//! fragment ([`fleet_fragment`], [`node_fragment`]) that the page's own
//! script replaces when the server has a newer one. Everything the page
//! needs is in it (style, script, pictures inline): nothing is loaded from
//! elsewhere.
//!
//! Elements tests and people can find: `section.node[data-node]`, inside
//! it the picture (`.picture svg`, CPU cells `g#cpu-N`, device chips
//! `g#pci-RESOURCE/ID`) and the pods (`tr.pod[data-pod][data-colour]
//! [data-cpus]`); `section.waiting[data-pod]` for waiting pods, with
//! `li.verdict[data-node][data-admitted]`; `[data-stranded]` on stranded
//! nodes and zones; a node's DRA devices `tr.dra-device[data-device]
//! [data-numa][data-pods][data-stranded]` (their chips `g#pci-DRIVER/POOL/DEVICE`).
//!
//! Pure: text from a [`Page`]. Must not touch: what is shown (the model's).

use std::fmt::Write as _;

use crate::model::{DraDeviceView, ExactView, NodeView, Page, PodView, WaitingView, ZoneView};

/// Which fragment a page shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum View {
    /// Every node and every waiting pod.
    Fleet,
    /// One node, and the waiting pods.
    Node(String),
}

impl View {
    /// The fragment's address, as the page's script asks for it.
    fn fragment_path(&self) -> String {
        match self {
            View::Fleet => "/fragment/fleet".to_owned(),
            View::Node(name) => format!("/fragment/node/{}", url_segment(name)),
        }
    }
}

const STYLE: &str = r#"
body{font-family:"DejaVu Sans",sans-serif;margin:0;color:#111827;background:#f9fafb}
header{background:#111827;color:#f9fafb;padding:8px 16px;display:flex;gap:16px;align-items:baseline}
header a{color:#f9fafb}
#live{font-size:12px;padding:2px 6px;border-radius:4px;background:#16a34a}
#live.down{background:#dc2626}
main{padding:8px 16px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #d1d5db;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f4f6}
section.node,section.waiting{background:#fff;border:1px solid #d1d5db;border-radius:6px;margin:12px 0;padding:8px 12px}
section.node[data-stranded="true"]{border-color:#f87171;border-width:2px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:middle;margin-right:4px}
.picture{overflow:auto;max-width:100%}
.picture svg{width:100%;max-width:960px;height:auto}
.muted{color:#6b7280}
.stranded{color:#b91c1c;font-weight:bold}
.admitted{color:#15803d}
.refused{color:#b91c1c}
.notice{background:#fef3c7;border:1px solid #f59e0b;padding:6px;border-radius:4px}
"#;

/// Replaces `<main>`'s fragment when the server has a newer one: asks
/// `FRAGMENT?since=VERSION`, which answers when the version moves (or
/// 204 after a while); shows whether the page is live.
const SCRIPT: &str = r#"
(function(){
  var main=document.getElementById('content');
  var live=document.getElementById('live');
  function mark(up){live.textContent=up?'live':'disconnected';live.className=up?'':'down';}
  function next(delay){setTimeout(poll,delay);}
  function poll(){
    fetch(main.dataset.fragment+'?since='+encodeURIComponent(main.dataset.version),{cache:'no-store'})
      .then(function(r){
        if(r.status===200){
          var v=r.headers.get('X-Topoalign-Version');
          return r.text().then(function(t){main.innerHTML=t;main.dataset.version=v;mark(true);next(0);});
        }
        if(r.status===204){mark(true);next(0);return;}
        mark(false);next(2000);
      })
      .catch(function(){mark(false);next(2000);});
  }
  next(0);
})();
"#;

/// A whole page showing `view`'s `fragment` at `version`.
pub fn page(view: &View, title: &str, fragment: &str, version: u64) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{STYLE}</style></head>
<body><header><strong>topoalign</strong><a href="/">fleet</a><span id="live">live</span></header>
<main id="content" data-fragment="{fragment_path}" data-version="{version}">{fragment}</main>
<script>{SCRIPT}</script></body></html>
"#,
        title = escape(title),
        fragment_path = escape(&view.fragment_path()),
    )
}

/// The fleet: a summary table, the waiting pods, every node.
pub fn fleet_fragment(page: &Page, notice: Option<&str>) -> String {
    let mut out = String::new();
    header(&mut out, page, notice);
    let _ = write!(
        out,
        "<h2>Nodes</h2><table id=\"nodes\"><tr><th>node</th><th>state</th><th>policy</th><th>pods</th>\
         <th>free CPU</th><th>free memory</th><th>stranded</th></tr>"
    );
    for node in &page.nodes {
        let (pods, cpu, memory, stranded) = match &node.exact {
            Some(exact) => (
                exact.pods.len().to_string(),
                cpus_text(exact.free_milli_cpu),
                bytes_text(exact.free_memory),
                if exact.stranded_for.is_empty() {
                    "no".to_owned()
                } else {
                    "<span class=\"stranded\">yes</span>".to_owned()
                },
            ),
            None => ("?".into(), "?".into(), "?".into(), "?".into()),
        };
        let _ = write!(
            out,
            "<tr data-node=\"{name}\"><td><a href=\"/node/{link}\">{name}</a></td><td>{state}</td><td>{policy}</td>\
             <td>{pods}</td><td>{cpu}</td><td>{memory}</td><td>{stranded}</td></tr>",
            name = escape(&node.name),
            link = escape(&url_segment(&node.name)),
            state = escape(&node.source),
            policy = escape(&policy_text(node)),
        );
    }
    out.push_str("</table>");
    waiting_section(&mut out, page);
    for node in &page.nodes {
        node_section(&mut out, node);
    }
    out
}

/// One node, and the waiting pods; `None` when the page has no such node.
pub fn node_fragment(page: &Page, name: &str, notice: Option<&str>) -> Option<String> {
    let node = page.node(name)?;
    let mut out = String::new();
    header(&mut out, page, notice);
    node_section(&mut out, node);
    waiting_section(&mut out, page);
    Some(out)
}

fn header(out: &mut String, page: &Page, notice: Option<&str>) {
    let _ = write!(
        out,
        "<p class=\"muted\">last change read at <span id=\"taken-at\">{}</span> · {} nodes · {} waiting pods</p>",
        escape(&page.taken_at),
        page.nodes.len(),
        page.waiting.len()
    );
    if let Some(notice) = notice {
        let _ = write!(out, "<p class=\"notice\" id=\"notice\">{}</p>", escape(notice));
    }
}

fn policy_text(node: &NodeView) -> String {
    node.policy
        .as_ref()
        .map_or_else(|| "?".to_owned(), |(policy, scope)| format!("{policy} / {scope}"))
}

fn waiting_section(out: &mut String, page: &Page) {
    let _ = write!(out, "<h2>Waiting pods ({})</h2>", page.waiting.len());
    if page.waiting.is_empty() {
        out.push_str("<p class=\"muted\">none</p>");
    }
    for pod in &page.waiting {
        waiting_pod(out, pod);
    }
}

fn waiting_pod(out: &mut String, pod: &WaitingView) {
    let _ = write!(
        out,
        "<section class=\"waiting\" data-pod=\"{key}\"><h3>{key} <span class=\"muted\">{state}</span></h3>",
        key = escape(&pod.key),
        state = escape(&pod.state)
    );
    if let Some(message) = &pod.message {
        let _ = write!(out, "<p class=\"muted\">{}</p>", escape(message));
    }
    let _ = write!(out, "<p class=\"summary\">{}</p><ul>", escape(&pod.summary));
    for verdict in &pod.verdicts {
        let _ = write!(
            out,
            "<li class=\"verdict {class}\" data-node=\"{node}\" data-admitted=\"{admitted}\"><b>{node}</b>: {words}</li>",
            class = if verdict.admitted { "admitted" } else { "refused" },
            node = escape(&verdict.node),
            admitted = verdict.admitted,
            words = escape(&verdict.words)
        );
    }
    out.push_str("</ul>");
    for explanation in &pod.explanations {
        let _ = write!(
            out,
            "<div class=\"explanation\" data-node=\"{node}\"><p><b>on {node}</b>: {summary}</p>",
            node = escape(&explanation.node),
            summary = escape(&explanation.summary)
        );
        if !explanation.fixes.is_empty() {
            out.push_str("<p>Verified fixes:</p><ul>");
            for fix in &explanation.fixes {
                let _ = write!(out, "<li class=\"fix\">{}</li>", escape(fix));
            }
            out.push_str("</ul>");
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");
}

fn node_section(out: &mut String, node: &NodeView) {
    let stranded = node.exact.as_ref().is_some_and(|e| !e.stranded_for.is_empty());
    let _ = write!(
        out,
        "<section class=\"node\" id=\"node-{id}\" data-node=\"{name}\" data-stranded=\"{stranded}\">\
         <h2><a href=\"/node/{link}\">{name}</a></h2><p>state: <span class=\"source\">{source}</span> · policy {policy}{ready}{cordoned}</p>",
        id = escape(&url_segment(&node.name)),
        name = escape(&node.name),
        link = escape(&url_segment(&node.name)),
        source = escape(&node.source),
        policy = escape(&policy_text(node)),
        ready = if node.ready { "" } else { " · <b>not Ready</b>" },
        cordoned = if node.unschedulable { " · <b>cordoned</b>" } else { "" },
    );
    if !node.taints.is_empty() {
        let _ = write!(
            out,
            "<p class=\"muted\">taints: {}</p>",
            escape(&node.taints.join(", "))
        );
    }
    if let Some(exact) = &node.exact {
        exact_section(out, exact);
    } else if !node.zones_only.is_empty() {
        out.push_str("<table class=\"zones-only\"><tr><th>zone</th><th>resource</th><th>capacity</th><th>allocatable</th><th>available</th></tr>");
        for zone in &node.zones_only {
            for (resource, capacity, allocatable, available) in &zone.resources {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(&zone.name),
                    escape(resource),
                    escape(capacity),
                    escape(allocatable),
                    escape(available)
                );
            }
        }
        out.push_str("</table>");
    }
    if !node.dra.is_empty() {
        dra_table(out, &node.dra);
    }
    out.push_str("</section>");
}

/// The node's DRA devices: NUMA node, held by which claim and pods, or
/// free (red when stranded).
fn dra_table(out: &mut String, devices: &[DraDeviceView]) {
    out.push_str(
        "<h3>DRA devices</h3><table class=\"dra\"><tr><th>device</th><th>NUMA</th><th>claim</th><th>pods</th></tr>",
    );
    for device in devices {
        let numa = device.numa.map_or_else(|| "?".to_owned(), |n| n.to_string());
        let (claim, pods) = match &device.claim {
            Some(claim) => (
                escape(claim),
                if device.pods.is_empty() {
                    "<span class=\"muted\">reserved for no pod</span>".to_owned()
                } else {
                    escape(&device.pods.join(", "))
                },
            ),
            None if device.stranded => (
                "<span class=\"stranded\">free (stranded)</span>".to_owned(),
                String::new(),
            ),
            None => ("<span class=\"muted\">free</span>".to_owned(), String::new()),
        };
        let _ = write!(
            out,
            "<tr class=\"dra-device\" data-device=\"{address}\" data-numa=\"{numa}\" data-pods=\"{pod_list}\" data-stranded=\"{stranded}\">\
             <td>{address}</td><td>{numa}</td><td>{claim}</td><td>{pods}</td></tr>",
            address = escape(&device.address),
            pod_list = escape(&device.pods.join(",")),
            stranded = device.stranded,
        );
    }
    out.push_str("</table>");
}

fn exact_section(out: &mut String, exact: &ExactView) {
    if !exact.stranded_for.is_empty() {
        let dra: usize = exact.zones.iter().map(|z| z.free_dra.len()).sum();
        let dra = if dra == 0 {
            String::new()
        } else {
            format!(" and {dra} DRA device{}", if dra == 1 { "" } else { "s" })
        };
        let _ = write!(
            out,
            "<p class=\"stranded\">Stranded: {} CPU, {}{dra} free here, wanted by {} (an empty node of this shape admits them), and none fits now.</p>",
            cpus_text(exact.free_milli_cpu),
            bytes_text(exact.free_memory),
            escape(&exact.stranded_for.join(", "))
        );
    }
    // The picture is discovery's SVG, its text escaped there.
    let _ = write!(out, "<div class=\"picture\">{}</div>", exact.picture);
    out.push_str(
        "<table class=\"pods\"><tr><th>pod</th><th>priority</th><th>exclusive CPUs</th><th>pinned memory</th><th>devices</th><th>NUMA</th></tr>",
    );
    for pod in &exact.pods {
        pod_row(out, pod);
    }
    out.push_str("</table>");
    out.push_str(
        "<table class=\"zones\"><tr><th>NUMA</th><th>CPUs</th><th>free exclusive CPUs</th><th>free CPU</th><th>memory</th><th>free devices</th></tr>",
    );
    for zone in &exact.zones {
        zone_row(out, zone, &exact.pods);
    }
    out.push_str("</table>");
}

fn pod_row(out: &mut String, pod: &PodView) {
    let memory: Vec<String> = pod
        .memory
        .iter()
        .flat_map(|(numa, resources)| {
            resources
                .iter()
                .map(move |(resource, bytes)| format!("NUMA {numa}: {resource} {}", bytes_text(*bytes)))
        })
        .collect();
    let mut devices: Vec<String> = pod
        .devices
        .iter()
        .map(|(resource, ids)| format!("{resource}: {}", ids.join(", ")))
        .collect();
    if !pod.dra_devices.is_empty() {
        devices.push(format!("DRA: {}", pod.dra_devices.join(", ")));
    }
    let numa: Vec<String> = pod.numa.iter().map(ToString::to_string).collect();
    let _ = write!(
        out,
        "<tr class=\"pod\" data-pod=\"{key}\" data-colour=\"{colour}\" data-cpus=\"{cpus}\"><td><span class=\"swatch\" style=\"background:{colour}\"></span>{key}</td>\
         <td>{priority}</td><td>{cpus_shown}</td><td>{memory}</td><td>{devices}</td><td>{numa}</td></tr>",
        key = escape(&pod.key),
        colour = pod.colour.hex(),
        cpus = pod.cpus,
        priority = pod.priority,
        cpus_shown = if pod.cpus.is_empty() {
            "shared pool".to_owned()
        } else {
            pod.cpus.to_string()
        },
        memory = escape(&memory.join("; ")),
        devices = escape(&devices.join("; ")),
        numa = numa.join(","),
    );
}

fn zone_row(out: &mut String, zone: &ZoneView, pods: &[PodView]) {
    let mut devices: Vec<String> = zone
        .free_devices
        .iter()
        .map(|(resource, ids)| {
            format!(
                "{resource}: {}",
                if ids.is_empty() {
                    "none".to_owned()
                } else {
                    ids.join(", ")
                }
            )
        })
        .collect();
    if !zone.free_dra.is_empty() {
        devices.push(format!("DRA: {}", zone.free_dra.join(", ")));
    }
    let free_cpus = zone
        .free_cpus
        .as_ref()
        .map_or_else(|| "(no exclusive CPUs: none policy)".to_owned(), ToString::to_string);
    let _ = write!(
        out,
        "<tr class=\"zone\" data-numa=\"{numa}\" data-stranded=\"{stranded}\"><td>{numa}</td><td>{cpus}</td><td>{free_cpus}</td><td>{free_cpu}</td><td>{bar}</td><td>{devices}</td></tr>",
        numa = zone.numa,
        stranded = zone.stranded,
        cpus = zone.cpus,
        free_cpu = cpus_text(zone.free_milli_cpu),
        bar = memory_bar(zone, pods),
        devices = escape(&devices.join("; ")),
    );
}

/// The zone's `memory` as a bar: each pod's pinned bytes in its colour,
/// then the free bytes (red when stranded), then the rest (held by pods
/// whose memory is not pinned, or not attributed).
fn memory_bar(zone: &ZoneView, pods: &[PodView]) -> String {
    const WIDTH: f64 = 240.0;
    let total = zone.memory_allocatable.max(1) as f64;
    let mut x = 0.0;
    let mut rects = String::new();
    let mut segment = |colour: &str, bytes: u64, title: &str, rects: &mut String| {
        let w = (bytes as f64 / total * WIDTH).min(WIDTH - x).max(0.0);
        if w > 0.0 {
            let _ = write!(
                rects,
                "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"14\" fill=\"{colour}\"><title>{}</title></rect>",
                escape(title)
            );
        }
        x += w;
    };
    for pod in pods {
        let bytes = pod
            .memory
            .get(&zone.numa)
            .and_then(|r| r.get("memory"))
            .copied()
            .unwrap_or(0);
        if bytes > 0 {
            segment(
                &pod.colour.hex(),
                bytes,
                &format!("{}: {}", pod.key, bytes_text(bytes)),
                &mut rects,
            );
        }
    }
    let free_colour = if zone.stranded {
        crate::model::STRANDED.hex()
    } else {
        "#bbf7d0".to_owned()
    };
    segment(
        &free_colour,
        zone.free_memory,
        &format!("free: {}", bytes_text(zone.free_memory)),
        &mut rects,
    );
    format!(
        "<svg class=\"memory\" width=\"{WIDTH}\" height=\"14\" viewBox=\"0 0 {WIDTH} 14\"><rect width=\"{WIDTH}\" height=\"14\" fill=\"#e5e7eb\"/>{rects}</svg> {} free of {}",
        bytes_text(zone.free_memory),
        bytes_text(zone.memory_allocatable)
    )
}

fn cpus_text(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        format!("{}", milli / 1000)
    } else {
        format!("{:.3}", milli as f64 / 1000.0)
    }
}

/// Bytes for people, as every command writes them.
fn bytes_text(bytes: u64) -> String {
    topoalign_model::human_bytes(bytes)
}

/// `name` as one path segment: node names are DNS subdomains, so only
/// characters outside them are percent-encoded.
pub fn url_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn node_names_as_path_segments() {
        assert_eq!(url_segment("node-a.example"), "node-a.example");
        assert_eq!(url_segment("a/b c"), "a%2Fb%20c");
    }
}

//! deploy/grafana/topoalign.json loads as a Grafana dashboard and queries
//! only metrics that exist: every metric name in every panel's PromQL is
//! one topoalign exports — read from the real encoders (the node agent's
//! registry for the newest kubelet release, the follower's, and the
//! extender's `/metrics` served by the binary) — or one of the kubelet's,
//! listed with their source in testdata/grafana/kubelet-metrics.tsv. And
//! every metric topoalign exports has a panel.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// Metric families in a Prometheus or OpenMetrics text: (family, type).
fn families(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| {
            let mut words = rest.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect()
}

/// The series names a family of `kind` is queried by.
fn series(family: &str, kind: &str) -> Vec<String> {
    match kind {
        "counter" if family.ends_with("_total") => vec![family.to_owned()],
        "counter" => vec![format!("{family}_total")],
        "histogram" => ["_bucket", "_sum", "_count"]
            .iter()
            .map(|s| format!("{family}{s}"))
            .collect(),
        "summary" => vec![family.to_owned(), format!("{family}_sum"), format!("{family}_count")],
        _ => vec![family.to_owned()],
    }
}

/// The families a metrics module registers, read from its source: the
/// registry's prefix, each `registry.register("name", …,
/// metrics.FIELD.clone())` and the field's type in `struct Metrics`
/// (`Counter`, `Gauge`, `Histogram`, or a `Family` of one). The encoders
/// leave out a family with no series yet (a per-NUMA gauge before the
/// first reading), so the test takes the registrations from the source
/// and checks them against what the encoders do write.
fn registered(source_path: &str) -> Vec<(String, String)> {
    let source = std::fs::read_to_string(repo(source_path)).expect("metrics source");
    let after = |text: &str, marker: &str| text.split_once(marker).map(|(_, rest)| rest.to_owned());
    let quoted = |text: &str| -> Option<String> {
        let start = text.find('"')? + 1;
        let end = start + text[start..].find('"')?;
        Some(text[start..end].to_owned())
    };
    let prefix = after(&source, "Registry::with_prefix(")
        .and_then(|rest| quoted(&rest))
        .expect("a prefix");
    let fields = after(&source, "pub struct Metrics {").expect("struct Metrics");
    let fields = &fields[..fields.find('}').expect("its end")];
    let kind_of = |field: &str| -> Option<String> {
        let line = fields
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{field}:")))?;
        ["Counter", "Gauge", "Histogram"]
            .iter()
            .find(|kind| line.contains(&format!("{kind}>")) || line.trim_end().ends_with(&format!("{kind},")))
            .map(|kind| kind.to_lowercase())
    };
    let mut families = Vec::new();
    for call in source.split("registry.register(").skip(1) {
        let name = quoted(call).expect("a metric name");
        let field = after(call, "metrics.")
            .and_then(|rest| rest.split(".clone()").next().map(str::to_owned))
            .expect("the metric's field");
        let kind = kind_of(&field).unwrap_or_else(|| panic!("{source_path}: the type of field {field}"));
        families.push((format!("{prefix}_{name}"), kind));
    }
    assert!(!families.is_empty(), "{source_path} registers metrics");
    families
}

/// The node agent's families: its registry for a node of the newest
/// release with every manager's policy on (the fullest set).
fn agent_families() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo("testdata/serve/gpu-node.yaml")).expect("scenario");
    let scenario = topoalign_scenario::Scenario::parse(&text).expect("scenario");
    let mut kubelet = scenario.kubelet.clone();
    kubelet["kubeletVersion"] = Value::from(topoalign_model::KubeletVersion::NEWEST.as_str());
    let spec = topoalign_nrt::NodeSpec {
        topology: scenario.topology.clone(),
        kubelet,
    };
    let node = topoalign_nrt::start_node(&spec).expect("node");
    families(&topoalign_agent::metrics::Metrics::new(node.config()).encode())
}

/// The extender's families, from `/metrics` of the running binary.
fn extender_families() -> Vec<(String, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_topoalign"))
        .args(["extender", "--listen", "127.0.0.1:0", "--fleet"])
        .arg(repo("examples/fleet/fleet.yaml"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("topoalign extender");
    let stdout = child.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|line| line.contains("listening on http://"));
    let answer = line.map(|line| {
        let address = line.rsplit("http://").next().unwrap_or_default().trim().to_owned();
        let mut stream = std::net::TcpStream::connect(&address).expect("connect");
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
            .expect("request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        answer
    });
    let _ = child.kill();
    let _ = child.wait();
    families(&answer.expect("the extender listens"))
}

/// Metric names in a PromQL expression: identifiers that are not
/// functions or aggregations (followed by `(`), keywords, label names in
/// `by`/`without`/`on`/`ignoring`/`group_*` lists, or inside `{…}`, `[…]`
/// or strings.
fn metric_names(expr: &str) -> Vec<String> {
    // Aggregations may be followed by `by (…)` before their `(`.
    const KEYWORDS: [&str; 20] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
    ];
    const LISTS: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    let mut plain = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut in_string = false;
    for c in expr.chars() {
        match c {
            '"' => in_string = !in_string,
            _ if in_string => {}
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            c => plain.push(c),
        }
        if matches!(c, '}' | ']') {
            plain.push(' ');
        }
    }
    let chars: Vec<char> = plain.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if LISTS.contains(&word.as_str()) {
                // Its label list, when one follows (group_left's is optional).
                skip_list = next == Some(&'(');
            } else if next == Some(&'(') || KEYWORDS.contains(&word.as_str()) {
            } else {
                names.push(word);
            }
        } else if c == '(' && skip_list {
            // The label list after by/without/on/…: skip to its `)`.
            while i < chars.len() && chars[i] != ')' {
                i += 1;
            }
            skip_list = false;
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            // A number (also 1e3): not a name.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn promql_names_are_found() {
    assert_eq!(
        metric_names(r#"histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{x="y,z"}[$__rate_interval])))"#),
        ["a_bucket"]
    );
    assert_eq!(
        metric_names("sum by (verb) (rate(a_sum[5m])) / on (verb) group_left sum(b) unless c offset 1h > 1e3"),
        ["a_sum", "b", "c"]
    );
}

#[test]
fn the_dashboard_queries_metrics_that_exist() {
    let kubelet: BTreeSet<String> = std::fs::read_to_string(repo("testdata/grafana/kubelet-metrics.tsv"))
        .expect("kubelet metrics")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .flat_map(|line| {
            let mut fields = line.split('\t');
            let name = fields.next().unwrap_or_default();
            let kind = fields.next().unwrap_or_default();
            assert!(fields.next().is_some_and(|s| !s.is_empty()), "{name}: give its source");
            // component-base counters keep their names.
            if kind == "counter" {
                vec![name.to_owned()]
            } else {
                series(name, kind)
            }
        })
        .collect();
    // What the encoders write is what the sources register.
    let agent = registered("crates/agent/src/metrics.rs");
    let follower = registered("crates/follow/src/metrics.rs");
    for (written, source) in [
        (agent_families(), &agent),
        (families(&topoalign_follow::Metrics::default().encode()), &follower),
    ] {
        assert!(!written.is_empty());
        for family in &written {
            assert!(
                source.contains(family),
                "{family:?} is written but not found in the source: {source:?}"
            );
        }
    }
    let ours: Vec<(String, String)> = agent.into_iter().chain(follower).chain(extender_families()).collect();
    assert!(
        ours.iter().any(|(f, _)| f.starts_with("topoalign_follow_"))
            && ours.iter().any(|(f, _)| f.starts_with("topoalign_extender_"))
            && ours
                .iter()
                .any(|(f, _)| f == "topoalign_topology_manager_admission_requests"),
        "{ours:?}"
    );
    let exported: BTreeSet<String> = ours.iter().flat_map(|(f, k)| series(f, k)).collect();

    let text = std::fs::read_to_string(repo("deploy/grafana/topoalign.json")).expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("JSON");
    for field in ["uid", "title", "schemaVersion", "panels", "templating"] {
        assert!(dashboard.get(field).is_some(), "the dashboard has {field}");
    }
    let mut queried = BTreeSet::new();
    let mut targets = 0;
    let panels = dashboard["panels"].as_array().expect("panels");
    let nested = panels
        .iter()
        .flat_map(|p| p["panels"].as_array().cloned().unwrap_or_default());
    for panel in panels.iter().cloned().chain(nested) {
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        assert!(panel["gridPos"].is_object(), "{title}: gridPos");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{title}: the datasource variable"
        );
        let list = panel["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: targets"));
        assert!(!list.is_empty(), "{title}: queries");
        for target in list {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("{title}: expr"));
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{title}: {expr} names no metric");
            for name in names {
                assert!(
                    exported.contains(&name) || kubelet.contains(&name),
                    "{title}: {name} is neither exported by topoalign nor a kubelet metric of \
                     testdata/grafana/kubelet-metrics.tsv"
                );
                queried.insert(name);
            }
            targets += 1;
        }
    }
    assert!(targets > 10, "{targets} queries");
    // Every family topoalign exports has a panel.
    for (family, kind) in &ours {
        assert!(
            series(family, kind).iter().any(|s| queried.contains(s)),
            "{family} ({kind}) is exported but no panel of deploy/grafana/topoalign.json queries it"
        );
    }
}

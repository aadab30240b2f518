//! The DRA side of `admit` and `explain`: the cluster's DRA objects read
//! from the node scenario's `dra:` block or `--dra FILE` ([`dra_state`]),
//! and an explanation of a pod's claims as text ([`dra_text`]). The
//! explanation itself is `topoalign_explain::dra`'s.

use std::fmt::Write as _;
use std::path::Path;

use topoalign_explain::dra::{DraExplanation, RELEASES, running};
use topoalign_intake::{StartedNode, read_text};
use topoalign_scenario::Scenario;
use topoalign_scenario::dra::{DraSpec, DraState};

use super::Error;
use super::render::wrap;

/// The DRA objects and the claims the running pods hold: the node
/// scenario's `dra:` block (its events allocate claims as `replay` does)
/// and the manifests of `--dra` (claims with `status.allocation` held
/// already). `None` when neither gives any.
///
/// # Errors
/// A file that cannot be read or holds a malformed object (named with its
/// document and field), a claim a pod names that is not given, or a kubelet
/// release whose scheduler allocator topoalign does not reproduce.
pub fn dra_state(node: Option<&Path>, dra: Option<&Path>, started: &StartedNode) -> super::Result<Option<DraState>> {
    let mut spec: Option<DraSpec> = None;
    let mut events = Vec::new();
    // The node file again, for its dra block and events: only a scenario
    // has them (the intake has checked the file already).
    let scenario = node
        .filter(|path| path.is_file() && path.extension().is_none_or(|e| e != "xml"))
        .and_then(|path| read_text(path).ok())
        .and_then(|text| Scenario::parse(&text).ok());
    if let Some(scenario) = scenario
        && let Some(block) = scenario.dra
    {
        spec = Some(*block);
        events = scenario.events;
    }
    if let Some(path) = dra {
        let text = read_text(path)?;
        let (manifests, skipped) =
            DraSpec::from_manifests(&text).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
        for note in skipped {
            eprintln!("topoalign: {}: {note}: not a DRA object; skipped", path.display());
        }
        spec.get_or_insert_with(DraSpec::default).extend(manifests);
    }
    let Some(spec) = spec else {
        return Ok(None);
    };
    let release = started.node.config().kubelet_version.to_string();
    if !RELEASES.contains(&release.as_str()) {
        return Err(Error::bad_input(format!(
            "the kubelet release is {release}; DRA allocation is reproduced for {}",
            RELEASES.join(", ")
        )));
    }
    let origin = node.map_or_else(String::new, |p| p.display().to_string());
    // The scheduler's node advertises the machine's device-plugin resources:
    // an extended resource listed there is not DRA's to serve.
    let spec = topoalign_scenario::dra::with_device_plugin_allocatable(&spec, started.node.machine());
    running(spec, &release, &events)
        .map(Some)
        .map_err(|(event, error)| Error::bad_input(format!("{origin}: events[{event}].add.{error}")))
}

/// The DRA part of a pod's text block.
pub fn dra_text(explanation: &DraExplanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  DRA (the kube-scheduler {} allocator; the kubelet does not see these devices):",
        explanation.release
    );
    out.push_str(&wrap("    ", "      ", &explanation.summary));
    let kubelet = if explanation.kubelet_numa_nodes.is_empty() {
        "nothing pinned".to_owned()
    } else {
        format!("NUMA {}", numa_list(&explanation.kubelet_numa_nodes))
    };
    let _ = writeln!(out, "    kubelet CPUs and memory: {kubelet}");
    for request in &explanation.requests {
        let mut name = format!("{}/{}", request.claim, request.request);
        if !request.serves.is_empty() {
            // A request of the scheduler's claim for extended resources.
            let served: Vec<String> = request
                .serves
                .iter()
                .map(|s| format!("{} of container {}", s.resource, s.container))
                .collect();
            name.push_str(&format!(" ({})", served.join(", ")));
        }
        if request.devices.is_empty() {
            let _ = writeln!(out, "    {name}: no device");
        }
        for device in &request.devices {
            let numa = device
                .numa_node
                .map_or_else(|| "NUMA unknown".to_owned(), |n| format!("NUMA {n}"));
            let mark = match device.aligned {
                Some(false) => "  MISALIGNED",
                _ => "",
            };
            let _ = writeln!(
                out,
                "    {name}: {}/{}/{} on {numa}{mark}",
                device.driver, device.pool, device.device
            );
        }
    }
    for problem in &explanation.unsatisfiable {
        let who = if problem.request.is_empty() {
            problem.claim.clone()
        } else {
            format!("{}/{}", problem.claim, problem.request)
        };
        out.push_str(&wrap(
            &format!("    cannot allocate {who}: "),
            "      ",
            &problem.reason,
        ));
    }
    for warning in &explanation.lint {
        out.push_str(&wrap(
            &format!("    claim {}: warning: ", warning.claim),
            "      ",
            &warning.message,
        ));
    }
    if !explanation.fixes.is_empty() {
        let _ = writeln!(out, "    fixes (each checked by allocating again):");
        for (i, fix) in explanation.fixes.iter().enumerate() {
            out.push_str(&wrap(&format!("    {}. ", i + 1), "       ", &fix.description));
            if let Some(yaml) = &fix.yaml {
                if let (Some(target), Some(path)) = (&fix.target, &fix.path) {
                    let _ = writeln!(out, "       # {target}: add under {path}:");
                }
                for line in yaml.lines() {
                    let _ = writeln!(out, "       {line}");
                }
            }
        }
    }
    out
}

fn numa_list(nodes: &[usize]) -> String {
    nodes.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

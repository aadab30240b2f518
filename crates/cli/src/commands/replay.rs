//! `topoalign replay SCENARIO`: the result document as JSON (default) or a
//! table for people (`-o text`).

use std::path::PathBuf;

use comfy_table::{Table, presets::UTF8_FULL};
use topoalign_scenario::{Replay, ReplayInput, ResultDocument};

use topoalign_intake::read_text;

use super::node_args::KubeletVersionArg;
use super::output::Output;
use super::{Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON or YAML); `-` reads standard input.
    scenario: PathBuf,
    #[command(flatten)]
    version: KubeletVersionArg,
    #[command(flatten)]
    output: Output<ReplayFormat>,
}

#[derive(Clone, Copy, Default, clap::ValueEnum)]
enum ReplayFormat {
    /// The result document of docs/scenario.md (the default).
    #[default]
    Json,
    /// A readable table.
    Text,
}

pub fn run(args: &Args) -> Result {
    let text = read_text(&args.scenario)?;
    let outcome = match ReplayInput::parse(&text) {
        Ok(mut scenario) => {
            args.version.apply(&mut scenario.kubelet, &args.scenario)?;
            for warning in topoalign_k8s::unknown_field_warnings(&scenario.kubelet) {
                eprintln!("topoalign: {}: kubelet: {warning}", args.scenario.display());
            }
            scenario.replay()
        }
        Err(invalid) => Err(invalid),
    };
    let error = match outcome {
        Ok(Replay::Completed(document)) => {
            for warning in &document.warnings {
                eprintln!("topoalign: {}: warning: {warning}", args.scenario.display());
            }
            let text = match args.output.format() {
                ReplayFormat::Json => serde_json::to_string_pretty(&document)? + "\n",
                ReplayFormat::Text => render_text(&document),
            };
            args.output.write(text.as_bytes())?;
            return Ok(Outcome::Success);
        }
        Ok(Replay::Refused(error)) => error,
        Err(invalid) => format!("invalid scenario: {}: {invalid}", args.scenario.display()),
    };
    match args.output.format() {
        ReplayFormat::Json => args
            .output
            .write(format!("{}\n", serde_json::json!({ "error": error })).as_bytes())?,
        ReplayFormat::Text => eprintln!("error: {error}"),
    }
    Ok(Outcome::Refused)
}

fn render_text(document: &ResultDocument) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL);
    table.set_header(["#", "pod", "outcome", "container", "CPUs", "memory NUMA", "devices"]);
    for result in &document.results {
        let message = result.message.as_deref().unwrap_or("");
        let outcome = match (result.admitted, result.deleted, result.resized) {
            (Some(true), _, _) => "admitted".to_string(),
            (Some(false), _, _) => format!("REJECTED {}: {message}", result.reason.as_deref().unwrap_or("")),
            (_, Some(true), _) => "deleted".to_string(),
            (_, _, Some(true)) => "resized".to_string(),
            (_, _, Some(false)) => match &result.reason {
                Some(reason) => format!("NOT RESIZED {reason}: {message}"),
                None => format!("not resized: {message}"),
            },
            _ => format!("not deleted: {message}"),
        };
        let containers = result.containers.as_deref().unwrap_or_default();
        if containers.is_empty() {
            table.add_row([
                result.event.to_string(),
                result.pod.clone(),
                outcome.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        for (i, c) in containers.iter().enumerate() {
            let first = i == 0;
            let devices: Vec<String> = c
                .devices
                .iter()
                .map(|(r, ids)| format!("{r}: {}", ids.join(",")))
                .collect();
            table.add_row([
                if first { result.event.to_string() } else { String::new() },
                if first { result.pod.clone() } else { String::new() },
                if first { outcome.clone() } else { String::new() },
                if c.init {
                    format!("{} (init)", c.name)
                } else {
                    c.name.clone()
                },
                c.cpus
                    .as_ref()
                    .map_or_else(|| "shared pool".into(), ToString::to_string),
                c.memory_numa.as_ref().map_or("not pinned".into(), |n| format!("{n:?}")),
                devices.join("; "),
            ]);
        }
    }
    let mut out = format!("{table}\n");
    let state = &document.final_state;
    out.push_str(&format!(
        "shared CPU pool: {}\n",
        if state.default_cpu_set.is_empty() {
            "(none: CPU manager policy none)"
        } else {
            &state.default_cpu_set
        }
    ));
    for (pod, containers) in &state.cpu_assignments {
        for (name, cpus) in containers {
            out.push_str(&format!("exclusive CPUs: {pod} {name} -> {cpus}\n"));
        }
    }
    for (pod, containers) in &state.memory_assignments {
        for (name, nodes) in containers {
            out.push_str(&format!("pinned memory:  {pod} {name} -> NUMA {nodes:?}\n"));
        }
    }
    if !document.dra.is_empty() {
        out.push_str(&render_dra(&document.dra));
    }
    out
}

/// The DRA part: per pod with claims, the devices the scheduler's allocator
/// took, their NUMA nodes, and whether they meet the kubelet's.
fn render_dra(results: &[topoalign_scenario::dra::DraEventResult]) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL);
    table.set_header([
        "#",
        "pod",
        "DRA",
        "claim / request",
        "device",
        "device NUMA",
        "kubelet NUMA",
    ]);
    let mut split = Vec::new();
    for result in results {
        let pod = &result.devices.pod;
        let kubelet = if result.kubelet_numa_nodes.is_empty() {
            "nothing pinned".to_owned()
        } else {
            format!("{:?}", result.kubelet_numa_nodes)
        };
        let devices: Vec<_> = result
            .devices
            .claims
            .iter()
            .flat_map(|claim| claim.devices.iter().map(move |d| (claim, d)))
            .collect();
        if devices.is_empty() {
            let outcome = match &result.devices.message {
                Some(message) => format!("{}: {message}", result.devices.outcome.to_uppercase()),
                None => result.devices.outcome.clone(),
            };
            table.add_row([
                result.event.to_string(),
                pod.clone(),
                outcome,
                String::new(),
                String::new(),
                String::new(),
                kubelet.clone(),
            ]);
        }
        for (i, (claim, device)) in devices.iter().enumerate() {
            let first = i == 0;
            table.add_row([
                if first { result.event.to_string() } else { String::new() },
                if first { pod.clone() } else { String::new() },
                if first {
                    result.devices.outcome.clone()
                } else {
                    String::new()
                },
                format!("{}/{}", claim.name, device.request),
                format!("{}/{}", device.driver, device.device),
                device.numa_node.map_or_else(|| "unknown".to_owned(), |n| n.to_string()),
                if first { kubelet.clone() } else { String::new() },
            ]);
        }
        if let Some(misaligned) = result.misaligned.as_ref().filter(|m| !m.is_empty()) {
            split.push(format!(
                "MISALIGNED {pod}: the kubelet pinned its CPUs and memory to NUMA {:?}, but {}\n",
                result.kubelet_numa_nodes,
                misaligned.join(", ")
            ));
        }
    }
    let mut out = format!(
        "\nDynamic Resource Allocation (the scheduler's allocator; the kubelet does not see these devices):\n{table}\n"
    );
    for line in split {
        out.push_str(&line);
    }
    out
}

//! `topoalign replay SCENARIO`: the result document as JSON (default) or a
//! table for people.

use std::path::PathBuf;

use anyhow::Context;
use comfy_table::{Table, presets::UTF8_FULL};
use topoalign_scenario::{Replay, ResultDocument, Scenario, replay};

use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON or YAML); `-` reads standard input.
    scenario: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    /// The result document of SCENARIO.md.
    Json,
    /// A readable table.
    Text,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let read = if args.scenario.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the scenario from standard input")
    } else {
        std::fs::read_to_string(&args.scenario).with_context(|| format!("cannot read {}", args.scenario.display()))
    };
    let text = match read {
        Ok(text) => text,
        Err(error) => {
            eprintln!("topoalign: {error:#}");
            return Ok(Outcome::BadInput);
        }
    };
    let outcome = Scenario::parse(&text).and_then(|scenario| {
        for warning in topoalign_k8s::unknown_field_warnings(&scenario.kubelet) {
            eprintln!("topoalign: {}: kubelet: {warning}", args.scenario.display());
        }
        replay(&scenario)
    });
    let error = match outcome {
        Ok(Replay::Completed(document)) => {
            match args.format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&document)?),
                Format::Text => print!("{}", render_text(&document)),
            }
            return Ok(Outcome::Success);
        }
        Ok(Replay::Refused(error)) => error,
        Err(invalid) => format!("invalid scenario: {}: {invalid}", args.scenario.display()),
    };
    match args.format {
        Format::Json => println!("{}", serde_json::json!({ "error": error })),
        Format::Text => eprintln!("error: {error}"),
    }
    Ok(Outcome::BadInput)
}

fn render_text(document: &ResultDocument) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL);
    table.set_header(["#", "pod", "outcome", "container", "CPUs", "memory NUMA", "devices"]);
    for result in &document.results {
        let outcome = match (result.admitted, result.deleted) {
            (Some(true), _) => "admitted".to_string(),
            (Some(false), _) => format!(
                "REJECTED {}: {}",
                result.reason.as_deref().unwrap_or(""),
                result.message.as_deref().unwrap_or("")
            ),
            (_, Some(true)) => "deleted".to_string(),
            _ => format!("not deleted: {}", result.message.as_deref().unwrap_or("")),
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
                c.cpus.clone().unwrap_or_else(|| "shared pool".into()),
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
    out
}

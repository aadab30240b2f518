//! Text for people shared by `admit`, `explain` and `diagnose`: one block
//! per pod — outcome, placement per container (CPU list and cores per NUMA
//! node, memory and huge pages per NUMA node, devices), warnings, and the
//! explanation (free vs requested per NUMA node, hints in words, the
//! policy's rule, fixes).
//!
//! Every NUMA id printed is the machine's own: a report's fields already
//! are (explain labels them, `Machine::numa_label`), and what is read off
//! the machine here (cores per NUMA node, devices' NUMA nodes) goes through
//! `numa_label`, since a machine read with NUMA ids past 63 is numbered
//! anew. A pod the kubelet crashes on (`KubeletPanic`) is shown as that
//! crash, never as a rejection.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use topoalign_engine::{ContainerPlacement, KubeletPanic};
use topoalign_explain::{Explanation, PodReport, ResourceTable};
use topoalign_model::{CpuSet, Machine, Pod};

/// Text lines are wrapped at this width.
const WIDTH: usize = 100;

/// `text` wrapped at [`WIDTH`], every line starting with `indent`, the
/// first with `first` instead.
pub fn wrap(first: &str, indent: &str, text: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// `NUMA 1: 8 CPUs on 4 cores` for each NUMA node the CPUs sit on.
pub fn cores_per_numa(machine: &Machine, cpus: &CpuSet) -> String {
    let mut by_numa: BTreeMap<usize, (usize, BTreeSet<u32>)> = BTreeMap::new();
    for cpu in machine.cpus().iter().filter(|c| cpus.contains(c.id)) {
        let entry = by_numa.entry(cpu.numa).or_default();
        entry.0 += 1;
        entry.1.insert(cpu.core);
    }
    let parts: Vec<String> = by_numa
        .iter()
        .map(|(&numa, (count, cores))| {
            let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
            format!(
                "NUMA {}: {} on {}",
                machine.numa_label(numa),
                plural(*count, "CPU"),
                plural(cores.len(), "core")
            )
        })
        .collect();
    parts.join(", ")
}

fn numa_list(nodes: &[usize]) -> String {
    nodes.iter().map(ToString::to_string).collect::<Vec<_>>().join("+")
}

/// Whether the kubelet crashes admitting the pod of `report` (a
/// [`KubeletPanic`]): it neither admits nor rejects it.
pub fn kubelet_crashes(report: &PodReport) -> bool {
    !report.admitted && report.reason.as_deref() == Some(KubeletPanic::REASON)
}

fn container_line(machine: &Machine, pod: &Pod, container: &ContainerPlacement) -> String {
    let spec = pod
        .all_containers()
        .find(|(c, _)| c.name == container.name)
        .map(|(c, _)| c);
    let mut parts = Vec::new();
    match &container.cpus {
        Some(cpus) => parts.push(format!("CPUs {cpus} ({})", cores_per_numa(machine, cpus))),
        None => parts.push("shared CPU pool".to_owned()),
    }
    match (&container.memory_numa, spec) {
        (Some(nodes), Some(spec)) => {
            let mut pinned: Vec<String> = spec
                .requests
                .iter()
                .filter(|(r, q)| topoalign_model::resource_name::is_memory_like(r) && !q.is_zero())
                .map(|(resource, amount)| {
                    let what = if resource == "memory" {
                        "memory".to_owned()
                    } else {
                        resource.clone()
                    };
                    format!("{what} {amount} on NUMA {}", numa_list(nodes))
                })
                .collect();
            if pinned.is_empty() {
                pinned.push(format!("memory on NUMA {}", numa_list(nodes)));
            }
            parts.extend(pinned);
        }
        (Some(nodes), None) => parts.push(format!("memory on NUMA {}", numa_list(nodes))),
        (None, _) => parts.push("memory not pinned".to_owned()),
    }
    for (resource, ids) in &container.devices {
        let numa: BTreeSet<usize> = machine
            .devices()
            .get(resource)
            .into_iter()
            .flatten()
            .filter(|d| ids.contains(&d.id))
            .flat_map(|d| d.numa.iter().map(|&n| machine.numa_label(n)))
            .collect();
        let at = if numa.is_empty() {
            String::new()
        } else {
            format!(" (NUMA {})", numa_list(&numa.into_iter().collect::<Vec<_>>()))
        };
        parts.push(format!("{resource} {}{at}", ids.join(",")));
    }
    let name = if container.init {
        format!("{} (init)", container.name)
    } else {
        container.name.clone()
    };
    wrap(&format!("  {name}: "), "      ", &parts.join("; "))
}

/// One pod's block.
pub fn pod_text(machine: &Machine, pod: &Pod, origin: &str, report: &PodReport) -> String {
    let mut out = String::new();
    let headline = if kubelet_crashes(report) {
        format!(
            "{}: THE KUBELET CRASHES admitting it (a Go panic; not admitted): {} ({})",
            report.pod,
            report.message.as_deref().unwrap_or(""),
            report.qos_class
        )
    } else if report.admitted {
        let aligned = match &report.affinity {
            Some(nodes) => format!(", NUMA {}", numa_list(nodes)),
            None => String::new(),
        };
        format!("{}: admitted{aligned} ({})", report.pod, report.qos_class)
    } else {
        format!(
            "{}: REJECTED, {}: {} ({})",
            report.pod,
            report.reason.as_deref().unwrap_or(""),
            report.message.as_deref().unwrap_or(""),
            report.qos_class
        )
    };
    out.push_str(&wrap("", "    ", &headline));
    if !origin.is_empty() && origin != format!("Pod {}", report.pod) {
        let _ = writeln!(out, "  from {origin}");
    }
    for container in report.containers.iter().flatten() {
        out.push_str(&container_line(machine, pod, container));
    }
    for warning in &report.warnings {
        out.push_str(&wrap("  warning: ", "    ", warning));
    }
    if let Some(explanation) = &report.explanation {
        out.push_str(&explanation_text(explanation));
    }
    out
}

fn table_text(table: &ResourceTable) -> String {
    let resources: Vec<&String> = table.requested.keys().collect();
    if resources.is_empty() {
        return String::new();
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec![String::new()];
    header.extend(resources.iter().map(|r| (*r).clone()));
    rows.push(header);
    let mut requested = vec![format!("requested ({})", table.requested_by)];
    requested.extend(resources.iter().map(|r| table.requested[*r].clone()));
    rows.push(requested);
    for numa in &table.numa {
        let mut row = vec![format!("free on NUMA {}", numa.node)];
        for resource in &resources {
            row.push(match numa.resources.get(*resource) {
                Some(cell) if cell.absent => "none here".to_owned(),
                Some(cell) => {
                    let free = cell.free.clone().unwrap_or_else(|| "-".to_owned());
                    if cell.short { format!("{free} short") } else { free }
                }
                None => "-".to_owned(),
            });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "    {}", cells.join("   ").trim_end());
    }
    out
}

/// The explanation block.
pub fn explanation_text(explanation: &Explanation) -> String {
    let mut out = String::new();
    out.push_str(&wrap("  why: ", "    ", &explanation.summary));
    let _ = writeln!(
        out,
        "  topology manager: policy {}, scope {}",
        explanation.policy, explanation.scope
    );
    out.push_str(&table_text(&explanation.resources));
    for merge in &explanation.merges {
        let whose = match &merge.container {
            Some(name) => format!("container {name}"),
            None => "pod".to_owned(),
        };
        let _ = writeln!(out, "  hints for the {whose}:");
        for provider in &merge.providers {
            let label = match &provider.resource {
                Some(resource) => format!("{} ({resource})", provider.provider),
                None => provider.provider.clone(),
            };
            out.push_str(&wrap(&format!("    {label}: "), "        ", &provider.text));
        }
        let merged = match &merge.merged {
            Some(nodes) => format!("NUMA {}", numa_list(nodes)),
            None if !merge.preferred => {
                "no NUMA node suits every provider (the kubelet's fallback: any NUMA node".to_owned()
            }
            None => "any NUMA node".to_owned(),
        };
        let preferred = if merge.preferred { "preferred" } else { "not preferred" };
        let verdict = if merge.merged.is_none() && !merge.preferred {
            format!(
                "{merged}, {preferred}); {}",
                if merge.admitted { "admitted" } else { "rejected" }
            )
        } else {
            format!(
                "{merged}, {preferred}; {}",
                if merge.admitted { "admitted" } else { "rejected" }
            )
        };
        out.push_str(&wrap("    merged: ", "        ", &verdict));
        // A rejecting rule is already the last sentence of "why".
        if merge.admitted {
            out.push_str(&wrap("    rule: ", "        ", &merge.rule));
        }
    }
    let empty = &explanation.empty_node;
    let on_empty = if empty.admitted {
        match &empty.affinity {
            Some(nodes) => format!("admitted, aligned to NUMA {}", numa_list(nodes)),
            None => "admitted".to_owned(),
        }
    } else if empty.reason.as_deref() == Some("KubeletPanic") {
        "the kubelet crashes there too".to_owned()
    } else {
        format!("rejected too ({})", empty.reason.as_deref().unwrap_or("?"))
    };
    let _ = writeln!(out, "  on an empty node of this shape: {on_empty}");
    if !explanation.fixes.is_empty() {
        let _ = writeln!(out, "  fixes (each checked by admitting the pod again):");
        for (i, fix) in explanation.fixes.iter().enumerate() {
            out.push_str(&wrap(&format!("    {}. ", i + 1), "       ", &fix.description));
        }
    }
    out
}

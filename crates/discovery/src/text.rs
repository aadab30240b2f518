//! The machine for people, as text: per socket and NUMA node its CPUs
//! grouped by L3 and core (SMT siblings together), memory, huge pages and
//! attached devices; memory-only nodes; devices without affinity; the
//! distance matrix; the GPU link matrix; the device-plugin resources the
//! engine will see; warnings and notes.
//!
//! Owns layout and wording only; reads nothing but the [`Topology`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use topoalign_model::{CpuSet, hugepage_resource_name, human_bytes};

use crate::topology::{NumaNode, PciDevice, Topology};

const WIDTH: usize = 100;

/// Renders the text report.
pub fn render_text(topology: &Topology) -> String {
    let mut out = String::new();
    summary(&mut out, topology);
    cpu_sections(&mut out, topology);
    memory_only_nodes(&mut out, topology);
    unattached_devices(&mut out, topology);
    distances(&mut out, topology);
    gpu_links(&mut out, topology);
    resources(&mut out, topology);
    if !topology.warnings.is_empty() {
        out.push_str("\nWarnings\n");
        for warning in &topology.warnings {
            let _ = writeln!(out, "  ! {warning}");
        }
    }
    if !topology.notes.is_empty() {
        out.push_str("\nNotes\n");
        for note in &topology.notes {
            let _ = writeln!(out, "  - {note}");
        }
    }
    out
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn summary(out: &mut String, t: &Topology) {
    let _ = writeln!(out, "Machine  {}", t.source);
    if let Some(model) = &t.cpu_model {
        let _ = writeln!(out, "CPU      {model}");
    }
    let threads = t.threads_per_core();
    let mut parts = vec![
        plural(t.packages.len(), "socket", "sockets"),
        plural(t.numa_nodes.len(), "NUMA node", "NUMA nodes"),
        plural(t.cores().len(), "core", "cores"),
        format!(
            "{}{}",
            plural(t.cpus.len(), "CPU", "CPUs"),
            if threads > 1 {
                format!(" ({threads} threads/core)")
            } else {
                String::new()
            }
        ),
    ];
    if !t.caches.is_empty() {
        parts.push(plural(t.caches.len(), "L3 group", "L3 groups"));
    }
    parts.push(format!("{} memory", human_bytes(t.total_memory())));
    let gpus = t.gpus().count();
    if gpus > 0 {
        parts.push(plural(gpus, "GPU", "GPUs"));
    }
    let _ = writeln!(out, "Summary  {}", parts.join(" · "));
}

/// Sockets with their NUMA nodes, or NUMA nodes with their sockets when a
/// node spans several sockets (one memory controller for many sockets).
fn cpu_sections(out: &mut String, t: &Topology) {
    let node_spans_sockets = t.numa_nodes.iter().any(|n| {
        t.packages
            .iter()
            .filter(|p| p.cpus.intersection_len(&n.cpus) > 0)
            .count()
            > 1
    });
    if node_spans_sockets {
        for node in t.numa_nodes.iter().filter(|n| !n.cpus.is_empty()) {
            out.push('\n');
            let _ = writeln!(out, "{}", node_header(node));
            for package in t.packages.iter().filter(|p| p.cpus.intersection_len(&node.cpus) > 0) {
                let _ = writeln!(out, "  Socket {}{}", package.id, die_note(package));
                cpu_lines(out, t, &package.cpus.intersection(&node.cpus), "    ");
            }
            node_devices(out, t, node, "  ");
        }
    } else {
        for package in &t.packages {
            out.push('\n');
            let os = match package.os_id {
                Some(os) if os != i64::from(package.id) => format!(" (os id {os})"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "Socket {}{os}{} · {}",
                package.id,
                die_note(package),
                plural(package.cpus.len(), "CPU", "CPUs")
            );
            for node in t
                .numa_nodes
                .iter()
                .filter(|n| n.cpus.intersection_len(&package.cpus) > 0)
            {
                let _ = writeln!(out, "  {}", node_header(node));
                cpu_lines(out, t, &node.cpus.intersection(&package.cpus), "    ");
                node_devices(out, t, node, "    ");
            }
            let homeless: CpuSet = t
                .cpus
                .iter()
                .filter(|c| c.package == package.id && c.numa.is_none())
                .map(|c| c.id)
                .collect();
            if !homeless.is_empty() {
                let _ = writeln!(out, "  no NUMA node");
                cpu_lines(out, t, &homeless, "    ");
            }
        }
    }
}

fn die_note(package: &crate::Package) -> String {
    if package.dies.len() > 1 {
        format!(" · {} dies", package.dies.len())
    } else {
        String::new()
    }
}

fn node_header(node: &NumaNode) -> String {
    let mut parts = vec![format!("NUMA node {}", node.id)];
    if let Some(subtype) = &node.subtype {
        parts.push(subtype.clone());
    }
    if !node.cpus.is_empty() {
        parts.push(plural(node.cpus.len(), "CPU", "CPUs"));
    }
    parts.push(memory_text(node));
    if let Some(pages) = hugepage_text(node) {
        parts.push(pages);
    }
    parts.join(" · ")
}

fn memory_text(node: &NumaNode) -> String {
    match (node.memory, node.memory_free) {
        (None, _) => "memory unknown".into(),
        (Some(total), Some(free)) => format!("{} ({} free)", human_bytes(total), human_bytes(free)),
        (Some(total), None) => human_bytes(total),
    }
}

fn hugepage_text(node: &NumaNode) -> Option<String> {
    if node.hugepages.is_empty() {
        return None;
    }
    let pools: Vec<String> = node
        .hugepages
        .iter()
        .map(|(&size, pool)| {
            let name = hugepage_resource_name(size);
            let name = name.trim_start_matches("hugepages-");
            match pool.free {
                Some(free) if pool.total > 0 => format!("{name}×{} ({free} free)", pool.total),
                _ => format!("{name}×{}", pool.total),
            }
        })
        .collect();
    Some(format!("hugepages {}", pools.join(" ")))
}

/// The CPUs of a group, one line per L3 group, cores as `0+40`.
fn cpu_lines(out: &mut String, t: &Topology, cpus: &CpuSet, indent: &str) {
    let mut by_l3: BTreeMap<Option<u32>, BTreeMap<u32, CpuSet>> = BTreeMap::new();
    for cpu in t.cpus.iter().filter(|c| cpus.contains(c.id)) {
        by_l3
            .entry(cpu.l3)
            .or_default()
            .entry(cpu.core)
            .or_default()
            .insert(cpu.id);
    }
    let label_of = |cache: &crate::Cache| {
        let size = cache.size.map(|s| format!(" {}", human_bytes(s))).unwrap_or_default();
        format!("L3 #{}{size}", cache.id)
    };
    // One label width for the whole machine keeps the cores aligned.
    let width = t
        .caches
        .iter()
        .map(|c| label_of(c).chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    for (l3, cores) in by_l3 {
        let label = match l3.and_then(|id| t.caches.iter().find(|c| c.id == id)) {
            Some(cache) => label_of(cache),
            None => "cores".to_string(),
        };
        let items: Vec<String> = cores
            .values()
            .map(|threads| threads.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("+"))
            .collect();
        wrap(out, &format!("{indent}{label:<width$}  "), &items);
    }
}

/// Writes `items` after `head`, wrapping at [`WIDTH`] with a hanging indent.
fn wrap(out: &mut String, head: &str, items: &[String]) {
    let indent = " ".repeat(head.chars().count());
    let mut line = head.to_string();
    let mut fresh = true;
    for item in items {
        if !fresh && line.chars().count() + 1 + item.len() > WIDTH {
            let _ = writeln!(out, "{}", line.trim_end());
            line = indent.clone();
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(item);
        fresh = false;
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

/// Devices of interest whose affinity is exactly this node.
fn node_devices(out: &mut String, t: &Topology, node: &NumaNode, indent: &str) {
    let devices: Vec<&PciDevice> = t
        .pci_devices
        .iter()
        .filter(|d| d.kind.is_of_interest() && d.numa == [node.id])
        .collect();
    device_lines(out, &devices, indent);
}

fn device_lines(out: &mut String, devices: &[&PciDevice], indent: &str) {
    let mut vfs: BTreeMap<(Option<String>, String), Vec<&PciDevice>> = BTreeMap::new();
    for device in devices {
        if device.virtual_function {
            vfs.entry((device.physical_function.clone(), device.ids()))
                .or_default()
                .push(device);
            continue;
        }
        let mut line = format!(
            "{indent}{:<5}{}  {}",
            device.kind.label(),
            device.short_address(),
            device.ids()
        );
        if !device.names.is_empty() {
            let _ = write!(line, "  {}", device.names.join(","));
        }
        if let Some(gpu) = &device.gpu {
            let _ = write!(line, "  {} {} {}", gpu.name, human_bytes(gpu.memory), gpu.uuid);
        } else if let Some(description) = &device.description {
            let _ = write!(line, "  {description}");
        }
        if let Some(total) = device.sriov_total_vfs {
            let _ = write!(line, "  (SR-IOV: up to {total} VFs)");
        }
        let _ = writeln!(out, "{line}");
    }
    for ((parent, ids), list) in vfs {
        let kind = list.first().map_or("NIC", |d| d.kind.label());
        let of = parent.map(|p| format!(" of {p}")).unwrap_or_default();
        let head = format!("{indent}{kind:<5}{} SR-IOV VFs{of} ({ids}): ", list.len());
        let items: Vec<String> = list.iter().map(|d| d.short_address().to_string()).collect();
        wrap(out, &head, &items);
    }
}

fn memory_only_nodes(out: &mut String, t: &Topology) {
    let nodes: Vec<&NumaNode> = t.numa_nodes.iter().filter(|n| n.cpus.is_empty()).collect();
    if nodes.is_empty() {
        return;
    }
    out.push_str("\nMemory-only NUMA nodes\n");
    for node in nodes {
        let mut line = format!("  {}", node_header(node));
        let nearest = node
            .distances
            .iter()
            .filter(|&(&to, _)| to != node.id && t.numa_node(to).is_some_and(|n| !n.cpus.is_empty()))
            .min_by_key(|&(&to, &d)| (d, to));
        if let Some((to, d)) = nearest {
            let _ = write!(line, " · nearest CPUs: node {to} (distance {d})");
        }
        let _ = writeln!(out, "{line}");
        node_devices(out, t, node, "    ");
    }
}

fn unattached_devices(out: &mut String, t: &Topology) {
    let of_interest: Vec<&PciDevice> = t.pci_devices.iter().filter(|d| d.kind.is_of_interest()).collect();
    let none: Vec<&PciDevice> = of_interest.iter().copied().filter(|d| d.numa.is_empty()).collect();
    let several: Vec<&PciDevice> = of_interest.iter().copied().filter(|d| d.numa.len() > 1).collect();
    if !several.is_empty() {
        let mut groups: BTreeMap<Vec<usize>, Vec<&PciDevice>> = BTreeMap::new();
        for device in several {
            groups.entry(device.numa.clone()).or_default().push(device);
        }
        for (nodes, devices) in groups {
            let list: Vec<String> = nodes.iter().map(ToString::to_string).collect();
            let _ = writeln!(out, "\nDevices local to NUMA nodes {}", list.join(","));
            device_lines(out, &devices, "  ");
        }
    }
    if !none.is_empty() {
        out.push_str("\nDevices without NUMA affinity\n");
        device_lines(out, &none, "  ");
    }
    let others = t.pci_devices.len() - of_interest.len();
    if others > 0 {
        let _ = writeln!(
            out,
            "\n({}: bridges, storage and USB controllers, … — see -o json)",
            plural(others, "other PCI device", "other PCI devices")
        );
    }
}

fn distances(out: &mut String, t: &Topology) {
    if t.numa_nodes.len() < 2 || t.numa_nodes.iter().all(|n| n.distances.is_empty()) {
        return;
    }
    let ids: Vec<usize> = t.numa_nodes.iter().map(|n| n.id).collect();
    let width = ids
        .iter()
        .map(|id| id.to_string().len())
        .chain(
            t.numa_nodes
                .iter()
                .flat_map(|n| n.distances.values().map(|d| d.to_string().len())),
        )
        .max()
        .unwrap_or(2)
        + 1;
    out.push_str("\nNUMA distances (SLIT)\n");
    let mut header = format!("  {:>w$}", "node", w = width.max(4));
    for id in &ids {
        let _ = write!(header, "{id:>width$}");
    }
    let _ = writeln!(out, "{header}");
    for node in &t.numa_nodes {
        let mut row = format!("  {:>w$}", node.id, w = width.max(4));
        for to in &ids {
            match node.distances.get(to) {
                Some(d) => {
                    let _ = write!(row, "{d:>width$}");
                }
                None => {
                    let _ = write!(row, "{:>width$}", "-");
                }
            }
        }
        let _ = writeln!(out, "{row}");
    }
}

fn gpu_links(out: &mut String, t: &Topology) {
    let Some(links) = &t.gpu_links else {
        return;
    };
    let _ = writeln!(out, "\nGPU links ({})", links.source);
    let cells: Vec<Vec<String>> = links
        .links
        .iter()
        .map(|row| row.iter().map(ToString::to_string).collect())
        .collect();
    let width = cells.iter().flatten().map(String::len).max().unwrap_or(1).max(5) + 1;
    let mut header = "        ".to_string();
    for i in 0..links.gpus.len() {
        let _ = write!(header, "{:>width$}", format!("GPU{i}"));
    }
    let _ = writeln!(out, "{header}  NUMA  PCI           CPU affinity");
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (i, row) in cells.iter().enumerate() {
        let mut line = format!("  GPU{i:<3} ");
        for cell in row {
            let _ = write!(line, "{cell:>width$}");
            used.insert(cell.clone());
        }
        let device = t.pci_devices.iter().find(|d| d.address == links.gpus[i]);
        let numa = device
            .filter(|d| !d.numa.is_empty())
            .map(|d| d.numa.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
            .unwrap_or_else(|| "-".into());
        let cpus = device
            .and_then(|d| d.local_cpus.as_ref())
            .map(ToString::to_string)
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{line}  {numa:<5} {:<13} {cpus}",
            links.gpus[i].trim_start_matches("0000:")
        );
    }
    let mut legend = vec!["X = same GPU".to_string()];
    if used
        .iter()
        .any(|c| c.starts_with("NV") && c[2..].chars().all(|ch| ch.is_ascii_digit()))
    {
        legend.push("NV# = # bonded NVLinks".into());
    }
    if used.iter().any(|c| c.contains(':') || c.contains('*')) {
        legend.push("NV:/XG: = direct NVLink/XGMI bandwidth, NV*/XG* = through switches (GB/s)".into());
    }
    let levels = [
        ("PIX", "at most one PCIe switch"),
        ("PXB", "several PCIe bridges"),
        ("PHB", "a PCIe host bridge"),
        ("NODE", "host bridges within a NUMA node"),
        ("SYS", "the CPU interconnect between NUMA nodes"),
    ];
    for (name, meaning) in levels {
        if used.contains(name) {
            legend.push(format!("{name} = through {meaning}"));
        }
    }
    let last = legend.len().saturating_sub(1);
    let items: Vec<String> = legend
        .iter()
        .enumerate()
        .map(|(i, l)| if i < last { format!("{l};") } else { l.clone() })
        .collect();
    wrap(out, "  legend: ", &items);
}

fn resources(out: &mut String, t: &Topology) {
    if t.resources.is_empty() {
        return;
    }
    out.push_str("\nDevice-plugin resources (what the engine sees)\n");
    for (name, devices) in &t.resources {
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for device in devices {
            let key = if device.numa.is_empty() {
                "no affinity".to_string()
            } else {
                format!(
                    "NUMA {}",
                    device
                        .numa
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            };
            *per_node.entry(key).or_default() += 1;
        }
        let spread: Vec<String> = per_node.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(out, "  {name:<28} {:>3}  ({})", devices.len(), spread.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceKind;

    #[test]
    fn wrapping_keeps_a_hanging_indent() {
        let mut out = String::new();
        let items: Vec<String> = (0..40).map(|i| format!("{i}+{}", i + 40)).collect();
        wrap(&mut out, "    L3 #0        ", &items);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| l.len() <= WIDTH));
        assert!(lines[1].starts_with("                 0+") || lines[1].starts_with("                 1"));
    }

    #[test]
    fn device_kinds_have_labels() {
        assert_eq!(DeviceKind::Nvme.label(), "NVMe");
    }
}

//! Shrinking a scenario on which the engine and the oracle differ: remove
//! events, containers, resources, configuration keys, feature gates,
//! policy options, devices, huge pages, distances, cores and NUMA nodes,
//! one at a time, keeping each removal while the same kind of difference
//! persists, until no removal keeps it (a local minimum: every single
//! removal makes it go away or change kind).

use serde_json::Value;
use topoalign_scenario::Scenario;

/// Shrinks `scenario` while `still_differs` holds, calling it at most
/// `budget` times. Returns the smallest scenario found and the number of
/// calls made.
pub fn shrink(
    scenario: &Scenario,
    budget: usize,
    mut still_differs: impl FnMut(&Scenario) -> bool,
) -> (Scenario, usize) {
    let mut current = scenario.clone();
    let mut calls = 0;
    'improve: loop {
        for candidate in candidates(&current) {
            if calls >= budget {
                break 'improve;
            }
            calls += 1;
            if still_differs(&candidate) {
                current = candidate;
                continue 'improve;
            }
        }
        break;
    }
    (current, calls)
}

/// Every one-step simplification of `s`, the largest cuts first.
pub fn candidates(s: &Scenario) -> Vec<Scenario> {
    let mut out = Vec::new();
    // Events: the second half, then each one, last first.
    if s.events.len() > 1 {
        let mut c = s.clone();
        c.events.truncate(s.events.len() / 2);
        out.push(c);
    }
    for i in (0..s.events.len()).rev() {
        let mut c = s.clone();
        c.events.remove(i);
        out.push(c);
    }
    // NUMA nodes, from the last.
    if s.topology.numa_nodes.len() > 1 {
        out.push(without_last_numa_node(s));
    }
    // Pods: containers, pod-level resources, single resources.
    for (i, event) in s.events.iter().enumerate() {
        let Some(pod) = &event.add else { continue };
        for edit in pod_edits(pod) {
            let mut c = s.clone();
            c.events[i].add = Some(edit);
            out.push(c);
        }
    }
    // Kubelet configuration: whole keys, then entries of maps.
    if let Some(kubelet) = s.kubelet.as_object() {
        for key in kubelet.keys().filter(|k| *k != "kubeletVersion") {
            let mut c = s.clone();
            if let Some(map) = c.kubelet.as_object_mut() {
                map.remove(key);
            }
            out.push(c);
            if let Some(inner) = kubelet[key].as_object().filter(|m| m.len() > 1) {
                for entry in inner.keys() {
                    let mut c = s.clone();
                    if let Some(map) = c.kubelet.get_mut(key).and_then(Value::as_object_mut) {
                        map.remove(entry);
                    }
                    out.push(c);
                }
            }
        }
    }
    // Devices: a whole resource, then single devices.
    for (resource, devices) in &s.topology.devices {
        let mut c = s.clone();
        c.topology.devices.remove(resource);
        out.push(c);
        for d in (0..devices.len()).rev().filter(|_| devices.len() > 1) {
            let mut c = s.clone();
            if let Some(list) = c.topology.devices.get_mut(resource) {
                list.remove(d);
            }
            out.push(c);
        }
    }
    // Machine details: huge page pools, distances, uncore caches.
    for (n, node) in s.topology.numa_nodes.iter().enumerate() {
        for key in node.other.keys() {
            let mut c = s.clone();
            c.topology.numa_nodes[n].other.remove(key);
            out.push(c);
        }
    }
    if s.topology.numa_nodes.iter().any(|n| n.distances.is_some()) {
        let mut c = s.clone();
        for node in &mut c.topology.numa_nodes {
            node.distances = None;
        }
        out.push(c);
    }
    if s.topology.cpus.iter().any(|c| c.uncore_cache.is_some()) {
        let mut c = s.clone();
        for cpu in &mut c.topology.cpus {
            cpu.uncore_cache = None;
        }
        out.push(c);
    }
    // Cores: the last core of each NUMA node that has more than one.
    let mut cores: Vec<(usize, u32)> = s.topology.cpus.iter().map(|c| (c.numa, c.core)).collect();
    cores.sort_unstable();
    cores.dedup();
    for &(numa, core) in cores.iter().rev() {
        if cores.iter().filter(|(n, _)| *n == numa).count() > 1 {
            let mut c = s.clone();
            c.topology.cpus.retain(|cpu| cpu.core != core);
            out.push(c);
        }
    }
    out
}

/// The scenario without its highest NUMA node: its CPUs, its devices'
/// affinity, its distance column, its memory reservation.
fn without_last_numa_node(s: &Scenario) -> Scenario {
    let mut c = s.clone();
    let Some(last) = c.topology.numa_nodes.iter().map(|n| n.id).max() else {
        return c;
    };
    c.topology.numa_nodes.retain(|n| n.id != last);
    let remaining = c.topology.numa_nodes.len();
    for node in &mut c.topology.numa_nodes {
        if let Some(row) = &mut node.distances {
            row.truncate(remaining);
        }
    }
    c.topology.cpus.retain(|cpu| cpu.numa != last);
    for devices in c.topology.devices.values_mut() {
        for d in devices.iter_mut() {
            d.numa.retain(|&n| n != last);
        }
    }
    if let Some(reserved) = c.kubelet.get_mut("reservedMemory").and_then(Value::as_array_mut) {
        reserved.retain(|r| r.get("numaNode").and_then(Value::as_u64) != Some(last as u64));
    }
    // reservedSystemCPUs naming a CPU that is gone.
    let online: Vec<String> = c.topology.cpus.iter().map(|cpu| cpu.id.to_string()).collect();
    if let Some(list) = c.kubelet.get("reservedSystemCPUs").and_then(Value::as_str) {
        let kept: Vec<&str> = list.split(',').filter(|id| online.iter().any(|o| o == id)).collect();
        let kept = kept.join(",");
        if let Some(map) = c.kubelet.as_object_mut() {
            if kept.is_empty() {
                map.remove("reservedSystemCPUs");
            } else {
                map.insert("reservedSystemCPUs".into(), Value::String(kept));
            }
        }
    }
    c
}

/// One-step simplifications of a pod manifest.
fn pod_edits(pod: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let Some(spec) = pod.get("spec") else {
        return out;
    };
    if spec.get("resources").is_some() {
        let mut p = pod.clone();
        if let Some(spec) = p.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("resources");
        }
        out.push(p);
    }
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, container) in containers.iter().enumerate() {
            // Remove the container (a pod keeps one app container).
            if list == "initContainers" || containers.len() > 1 {
                let mut p = pod.clone();
                if let Some(cs) = p["spec"].get_mut(list).and_then(Value::as_array_mut) {
                    cs.remove(i);
                    if cs.is_empty()
                        && let Some(spec) = p.get_mut("spec").and_then(Value::as_object_mut)
                    {
                        spec.remove(list);
                    }
                }
                out.push(p);
            }
            // A sidecar as a plain init container.
            if container.get("restartPolicy").is_some() {
                let mut p = pod.clone();
                if let Some(c) = p["spec"][list][i].as_object_mut() {
                    c.remove("restartPolicy");
                }
                out.push(p);
            }
            // One resource at a time, from limits and requests together.
            let mut names: Vec<&String> = ["limits", "requests"]
                .iter()
                .filter_map(|part| container.get("resources")?.get(*part)?.as_object())
                .flat_map(|m| m.keys())
                .collect();
            names.sort();
            names.dedup();
            for name in names {
                let mut p = pod.clone();
                for part in ["limits", "requests"] {
                    if let Some(m) = p["spec"][list][i]["resources"]
                        .get_mut(part)
                        .and_then(Value::as_object_mut)
                    {
                        m.remove(name);
                    }
                }
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate;
    use crate::release::Release;

    /// A made-up difference ("the scenario has a GPU request and at least
    /// two NUMA nodes") shrinks to a scenario with just that.
    #[test]
    fn shrinking_keeps_the_difference_and_drops_the_rest() {
        let wants_gpu = |s: &Scenario| {
            s.events.iter().any(|e| {
                e.add
                    .as_ref()
                    .is_some_and(|p| p.to_string().contains("\"nvidia.com/gpu\""))
            }) && s.topology.numa_nodes.len() >= 2
        };
        let start = (0..2000)
            .map(|seed| generate(seed, Release(32)).scenario)
            .find(|s| wants_gpu(s) && s.events.len() > 3 && s.topology.numa_nodes.len() > 2)
            .expect("some seed has GPU pods on a larger machine");
        let (small, calls) = shrink(&start, 10_000, wants_gpu);
        assert!(calls < 10_000);
        assert!(wants_gpu(&small));
        assert_eq!(small.events.len(), 1);
        assert_eq!(small.topology.numa_nodes.len(), 2);
        let pod = small.events[0].add.as_ref().expect("an add");
        // One app container, and an init container only if it holds the GPU
        // (a pod keeps an app container); no resource but the GPU is left.
        assert_eq!(pod["spec"]["containers"].as_array().map(Vec::len), Some(1));
        let inits = pod["spec"].get("initContainers").and_then(Value::as_array);
        assert!(inits.is_none_or(|i| i.len() == 1), "{pod}");
        let text = pod["spec"].to_string();
        for other in ["\"cpu\"", "\"memory\"", "hugepages-", "example.com/nic"] {
            assert!(!text.contains(other), "{other} left in {pod}");
        }
        assert_eq!(small.kubelet.as_object().map(|m| m.len()), Some(1), "{}", small.kubelet);
        // Every candidate of the result loses the difference.
        assert!(candidates(&small).iter().all(|c| !wants_gpu(c)));
    }
}

//! Compact fixtures for the unit tests: machines written as
//! `("nvidia.com/gpu", "gpu0@0 gpu1@1 gpu2@0,1 gpu3@-")` (id @ NUMA nodes,
//! `-` = no topology), containers as name + limits in whole units.

use topoalign_model::{Container, Machine, NumaMask, Pod, QosClass, Quantity, TopologyHint, UniformMachine};

/// A machine with `numa_nodes` nodes (one CPU each) and the given devices.
pub(crate) fn machine(numa_nodes: usize, devices: &[(&str, &str)]) -> Machine {
    let mut shape = UniformMachine::new(numa_nodes, 1);
    for (resource, list) in devices {
        if list.trim().is_empty() {
            // Known to the machine, with no devices.
            shape = shape.devices(resource, "", 0);
        }
        for spec in list.split_whitespace() {
            let (id, numa) = spec.split_once('@').expect("device spec id@numa");
            let numa: Vec<usize> = if numa == "-" {
                Vec::new()
            } else {
                numa.split(',').map(|n| n.parse().expect("NUMA id")).collect()
            };
            shape = shape.device(resource, id, &numa);
        }
    }
    shape.build().expect("valid test machine")
}

/// A container with whole-unit limits (requests defaulted from them).
pub(crate) fn container(name: &str, limits: &[(&str, i128)]) -> Container {
    let limits: topoalign_model::ResourceList = limits
        .iter()
        .map(|(resource, units)| ((*resource).to_owned(), Quantity::from_units(*units)))
        .collect();
    Container {
        name: name.to_owned(),
        requests: limits.clone(),
        limits,
        restartable: false,
    }
}

/// A restartable init container (sidecar).
pub(crate) fn sidecar(name: &str, limits: &[(&str, i128)]) -> Container {
    Container {
        restartable: true,
        ..container(name, limits)
    }
}

/// A pod named and identified by `uid`.
pub(crate) fn pod(uid: &str, init_containers: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        namespace: "default".to_owned(),
        name: uid.to_owned(),
        uid: uid.to_owned(),
        qos: QosClass::Guaranteed,
        init_containers,
        containers,
        overhead: Default::default(),
        pod_resources: None,
    }
}

/// A mask from NUMA ids.
pub(crate) fn mask(nodes: &[usize]) -> NumaMask {
    NumaMask::from_nodes(nodes.iter().copied())
}

/// The topology manager's hint for `nodes` (`&[]` = no affinity).
pub(crate) fn affinity(nodes: &[usize]) -> TopologyHint {
    if nodes.is_empty() {
        TopologyHint::any(true)
    } else {
        TopologyHint::new(mask(nodes), true)
    }
}

/// Hints written as `"{0}* {1}* {0,1}"` (`*` = preferred).
pub(crate) fn hints(text: &str) -> Vec<TopologyHint> {
    text.split_whitespace()
        .map(|hint| {
            let preferred = hint.ends_with('*');
            let nodes: Vec<usize> = hint
                .trim_end_matches('*')
                .trim_start_matches('{')
                .trim_end_matches('}')
                .split(',')
                .map(|n| n.parse().expect("NUMA id"))
                .collect();
            TopologyHint::new(mask(&nodes), preferred)
        })
        .collect()
}

//! The scenario `topology:` block (shared/SCENARIO.md) both ways: any
//! discovered machine written out as one (via the engine's [`Machine`], so
//! what is written is exactly what `replay` will build), and a scenario's
//! block read back as a [`Topology`].
//!
//! Reuses `topoalign-scenario`'s serde types; owns only the conversion.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_model::{Machine, hugepage_resource_name};
use topoalign_scenario::{CpuSpec, DeviceSpec, NumaNodeSpec, Scenario, TopologySpec};

use crate::{DiscoveryError, Topology};

/// The `topology:` block describing `machine`. Quantities are written in
/// the largest binary unit that divides them exactly (`64Gi`, `1536Mi`,
/// plain bytes otherwise); every huge page pool is written, empty ones as
/// `"0"`.
pub fn topology_spec(machine: &Machine) -> TopologySpec {
    let numa_nodes = machine
        .numa_nodes()
        .iter()
        .map(|node| NumaNodeSpec {
            id: node.id,
            memory: byte_quantity(node.memory),
            distances: node.distances.clone(),
            other: node
                .hugepages
                .iter()
                .map(|(&size, &bytes)| {
                    (
                        hugepage_resource_name(size),
                        serde_json::Value::String(byte_quantity(bytes)),
                    )
                })
                .collect(),
        })
        .collect();
    let cpus = machine
        .cpus()
        .iter()
        .map(|cpu| CpuSpec {
            id: cpu.id,
            core: cpu.core,
            socket: cpu.socket,
            numa: cpu.numa,
            uncore_cache: cpu.uncore_cache,
        })
        .collect();
    let devices = machine
        .devices()
        .iter()
        .map(|(name, list)| {
            let list = list
                .iter()
                .map(|d| DeviceSpec {
                    id: d.id.clone(),
                    numa: d.numa.clone(),
                })
                .collect();
            (name.clone(), list)
        })
        .collect();
    TopologySpec {
        numa_nodes,
        cpus,
        devices,
    }
}

/// A complete scenario for `machine`: its `topology:` block, an empty
/// `kubelet:` block (the kubelet's defaults) and no events, ready for
/// `topoalign replay` once events are added.
pub fn scenario_document(machine: &Machine) -> Scenario {
    Scenario {
        topology: topology_spec(machine),
        kubelet: serde_json::Value::Object(serde_json::Map::new()),
        events: Vec::new(),
    }
}

/// Reads a scenario file (JSON or YAML) and returns its machine.
///
/// # Errors
/// [`DiscoveryError::Io`] when the file cannot be read,
/// [`DiscoveryError::Scenario`] when it is not a scenario or its
/// `topology:` block is invalid.
pub fn read_scenario(path: &Path) -> Result<Topology, DiscoveryError> {
    let text = std::fs::read_to_string(path).map_err(|error| DiscoveryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_scenario_topology(&text, &format!("scenario {}", path.display())).map_err(|detail| DiscoveryError::Scenario {
        path: path.to_path_buf(),
        detail,
    })
}

/// The machine of a scenario's text.
///
/// # Errors
/// The scenario crate's message for a malformed document or block.
pub fn parse_scenario_topology(text: &str, source: &str) -> Result<Topology, String> {
    let scenario = Scenario::parse(text).map_err(|e| e.to_string())?;
    let machine = scenario.topology.to_machine().map_err(|e| e.to_string())?;
    Ok(Topology::from_machine(&machine, source))
}

/// Bytes as a Kubernetes quantity in the largest exact binary unit.
pub fn byte_quantity(bytes: u64) -> String {
    if bytes == 0 {
        return "0".into();
    }
    let units: BTreeMap<u32, &str> = [(40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")].into_iter().collect();
    for (&shift, suffix) in units.iter().rev() {
        if bytes.trailing_zeros() >= shift {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_use_the_largest_exact_unit() {
        assert_eq!(byte_quantity(64 << 30), "64Gi");
        assert_eq!(byte_quantity(1536 << 20), "1536Mi");
        assert_eq!(byte_quantity(33771839488), "32980312Ki");
        assert_eq!(byte_quantity(1000), "1000");
        assert_eq!(byte_quantity(0), "0");
    }

    #[test]
    fn a_machine_survives_the_round_trip() {
        let text = r#"
topology:
  numaNodes:
    - {id: 0, memory: 64Gi, hugepages-2Mi: 1Gi, hugepages-1Gi: "0", distances: [10, 21]}
    - {id: 1, memory: 64Gi, distances: [21, 10]}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0, uncoreCache: 0}
    - {id: 1, core: 0, socket: 0, numa: 0, uncoreCache: 0}
    - {id: 2, core: 2, socket: 1, numa: 1}
  devices:
    nvidia.com/gpu:
      - {id: gpu0, numa: [1]}
"#;
        let topology = parse_scenario_topology(text, "test").unwrap();
        assert_eq!(topology.numa_nodes[0].hugepages[&(2 << 20)].total, 512);
        let machine = topology.to_machine().unwrap();
        let again = topology_spec(&machine).to_machine().unwrap();
        assert_eq!(machine, again);
        let written = serde_json::to_string(&scenario_document(&machine)).unwrap();
        assert!(written.contains(r#""hugepages-2Mi":"1Gi""#), "{written}");
        assert!(written.contains(r#""events":[]"#));
    }
}

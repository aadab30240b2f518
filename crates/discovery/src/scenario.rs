//! A scenario's `topology:` block read back as a [`Topology`]. Writing a
//! discovered machine out as one goes through the engine's machine model
//! with `topoalign-scenario`'s [`TopologySpec::from_machine`], so what is
//! written is exactly what `replay` will build.

use std::path::Path;

use topoalign_scenario::Scenario;

use crate::tree::{MAX_INPUT_BYTES, read_bounded};
use crate::{DiscoveryError, Topology};

/// Reads a scenario file (JSON or YAML) and returns its machine.
///
/// # Errors
/// [`DiscoveryError::Io`] when the file cannot be read,
/// [`DiscoveryError::Scenario`] when it is not a scenario or its
/// `topology:` block is invalid.
pub fn read_scenario(path: &Path) -> Result<Topology, DiscoveryError> {
    let bytes = read_bounded(path, MAX_INPUT_BYTES, false).map_err(|error| DiscoveryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| DiscoveryError::Scenario {
        path: path.to_path_buf(),
        detail: "not UTF-8 text".into(),
    })?;
    parse_scenario_topology(&text, &format!("scenario {}", path.display())).map_err(|error| DiscoveryError::Scenario {
        path: path.to_path_buf(),
        detail: error.to_string(),
    })
}

/// The machine of a scenario's text.
///
/// # Errors
/// [`ScenarioError`](topoalign_scenario::ScenarioError), naming the field,
/// for a malformed document or block.
pub fn parse_scenario_topology(text: &str, source: &str) -> Result<Topology, topoalign_scenario::ScenarioError> {
    let scenario = Scenario::parse(text)?;
    let machine = scenario.topology.to_machine_with_numa_labels()?;
    Ok(Topology::from_machine(&machine, source))
}

#[cfg(test)]
mod tests {
    use topoalign_scenario::TopologySpec;

    use super::*;

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
        let again = TopologySpec::from_machine(&machine).to_machine().unwrap();
        assert_eq!(machine, again);
        let written = serde_json::to_string(&Scenario::for_machine(&machine)).unwrap();
        assert!(written.contains(r#""hugepages-2Mi":"1Gi""#), "{written}");
        assert!(written.contains(r#""events":[]"#));
    }
}

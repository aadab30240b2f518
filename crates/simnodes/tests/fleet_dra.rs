//! `simulate-nodes` on a fleet file with a `dra:` block
//! (`examples/fleet/dra-fleet.yaml`): its `drivers` publish the nodes'
//! devices as ResourceSlices exactly as `--dra` does, its DeviceClasses go
//! with them, and a `--dra` naming the same resource must name the same
//! driver.

use std::path::Path;

use topoalign_fleet::Fleet;
use topoalign_fleet::dra::DraResource;

fn example_fleet() -> Fleet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/dra-fleet.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Fleet::parse(&text, |path| Err(format!("no scenario files here: {path}"))).expect("the example parses")
}

fn resource(text: &str) -> DraResource {
    text.parse().expect("RESOURCE=DRIVER")
}

/// One slice: its node, its driver, its devices with their NUMA nodes.
type Published = (String, String, Vec<(String, Option<i64>)>);

/// Every slice, in node order.
fn published(fleet: &topoalign_simnodes::SimFleet) -> Vec<Published> {
    fleet
        .nodes
        .iter()
        .flat_map(|node| node.resource_slices())
        .map(|slice| {
            let devices = slice
                .spec
                .devices
                .iter()
                .flatten()
                .map(|d| {
                    let numa = d
                        .attributes
                        .as_ref()
                        .and_then(|a| a.get("resource.kubernetes.io/numaNode"))
                        .and_then(|a| a.int);
                    (d.name.clone(), numa)
                })
                .collect();
            (
                slice.spec.node_name.clone().unwrap_or_default(),
                slice.spec.driver,
                devices,
            )
        })
        .collect()
}

#[test]
fn the_fleet_blocks_drivers_publish_slices_and_its_classes() {
    let fleet = topoalign_simnodes::fleet_nodes(&example_fleet()).expect("the nodes start");
    // The example's GPUs, in the file's order (first-fit takes them so),
    // each with the NUMA node the file gives it.
    assert_eq!(
        published(&fleet),
        [
            (
                "swapped-0".to_owned(),
                "gpu.example.com".to_owned(),
                vec![("gpu1".to_owned(), Some(1)), ("gpu0".to_owned(), Some(0))]
            ),
            (
                "straight-0".to_owned(),
                "gpu.example.com".to_owned(),
                vec![("gpu0".to_owned(), Some(0)), ("gpu1".to_owned(), Some(1))]
            ),
        ]
    );
    let classes: Vec<_> = fleet.device_classes.iter().map(|c| c.metadata.name.clone()).collect();
    assert_eq!(classes, [Some("gpu.example.com".to_owned())]);
    // The kubelet no longer has the devices: the Node does not advertise
    // the extended resource.
    for node in &fleet.nodes {
        assert_eq!(gpus_advertised(node), None, "{}", node.name());
    }
}

/// The Node's allocatable `example.com/gpu`, if it advertises any.
fn gpus_advertised(node: &topoalign_simnodes::SimNode) -> Option<String> {
    let status = node.node_status("2026-01-01T00:00:00Z");
    status["status"]["allocatable"]["example.com/gpu"]
        .as_str()
        .map(str::to_owned)
}

/// What `--dra` alone gives equals what the fleet block gives.
#[test]
fn the_block_and_the_flag_publish_the_same_slices() {
    let from_block = topoalign_simnodes::fleet_nodes(&example_fleet()).expect("the nodes start");
    let mut flagged = example_fleet();
    flagged.dra = None;
    let without = topoalign_simnodes::fleet_nodes(&flagged).expect("the nodes start");
    assert!(
        published(&without).is_empty(),
        "no block, no flag: the device plugin keeps them"
    );
    assert!(without.nodes.iter().all(|n| gpus_advertised(n).as_deref() == Some("2")));
    assert!(without.device_classes.is_empty());
    flagged
        .dra
        .get_or_insert_with(Default::default)
        .add_drivers(&[resource("example.com/gpu=gpu.example.com")])
        .expect("no conflict");
    let from_flag = topoalign_simnodes::fleet_nodes(&flagged).expect("the nodes start");
    assert_eq!(published(&from_flag), published(&from_block));
}

/// A flag naming the block's resource with another driver is refused
/// (neither silently wins); the same driver is taken once.
#[test]
fn a_flag_and_the_block_naming_one_resource_must_agree() {
    let mut fleet = example_fleet();
    let block = fleet.dra.as_mut().expect("the example has a dra: block");
    block
        .add_drivers(&[resource("example.com/gpu=gpu.example.com")])
        .expect("the same driver");
    assert_eq!(block.drivers.len(), 1);
    let conflict = block
        .add_drivers(&[resource("example.com/gpu=other.example.com")])
        .unwrap_err();
    assert!(
        conflict
            .to_string()
            .starts_with("--dra example.com/gpu=other.example.com: the fleet's dra.drivers[0] publishes"),
        "{conflict}"
    );
}

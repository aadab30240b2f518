//! Manager-level behaviour: hints per scope, allocation, reuse, release.
//! Cases follow the kubelet's `TestGetTopologyHints`,
//! `TestTopologyAlignedAllocation`, `TestPodContainerDeviceAllocation`
//! and `TestInitContainerDeviceAllocation`, with the device choice made
//! deterministic by the conformance plugins' rule.

use std::collections::BTreeMap;

use proptest::prelude::*;
use topoalign_model::{KubeletVersion, ResourceHints, TopologyHint};

use crate::DeviceManager;
use crate::testing::{affinity, container, hints, machine, pod, sidecar};

fn held(manager: &DeviceManager, pod: &str, container: &str) -> BTreeMap<String, Vec<String>> {
    manager.container_devices(pod, container)
}

fn ids(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn container_hints_per_resource_kind() {
    let machine = machine(
        2,
        &[
            ("plain", "d0@- d1@-"),
            ("mixed", "d0@- d1@1"),
            ("aligned", "d0@0 d1@1 d2@0 d3@1"),
        ],
    );
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container(
        "app",
        &[
            ("plain", 1),
            ("mixed", 1),
            ("aligned", 2),
            ("cpu", 4),
            ("example.com/other", 1),
        ],
    );
    let p = pod("p", vec![], vec![app.clone()]);
    let got = manager.container_hints(&p, &app);
    let expected = BTreeMap::from([
        ("plain".to_owned(), ResourceHints::NoPreference),
        ("mixed".to_owned(), ResourceHints::Hints(hints("{1}* {0,1}"))),
        ("aligned".to_owned(), ResourceHints::Hints(hints("{0}* {1}* {0,1}"))),
    ]);
    assert_eq!(got.by_resource, expected);
}

/// From 1.36 the kubelet enumerates only the NUMA nodes that hold devices
/// of the resource (`deviceNUMANodes`): masks reaching device-less nodes are
/// no longer hints, and preference is counted among the device nodes. A
/// resource without any topology still spans every node.
#[test]
fn from_1_36_hints_cover_only_the_nodes_holding_devices() {
    let machine = machine(4, &[("gpu", "g0@1 g1@1 g2@2"), ("plain", "p0@-")]);
    let app = container("app", &[("gpu", 1)]);
    let p = pod("p", vec![], vec![app.clone()]);
    // | release | hints of one GPU |
    let table = [
        (
            KubeletVersion::V1_35,
            "{1}* {2}* {0,1} {0,2} {1,2} {1,3} {2,3} {0,1,2} {0,1,3} {0,2,3} {1,2,3} {0,1,2,3}",
        ),
        (KubeletVersion::V1_36, "{1}* {2}* {1,2}"),
        (KubeletVersion::V1_37, "{1}* {2}* {1,2}"),
    ];
    for (version, want) in table {
        let mut manager = DeviceManager::new(&machine, version);
        let got = manager.container_hints(&p, &app).by_resource.remove("gpu");
        assert_eq!(got, Some(ResourceHints::Hints(hints(want))), "{version}");
    }
    // Three GPUs need both device nodes: preferred, the only hint.
    let three = container("app", &[("gpu", 3)]);
    let p = pod("p", vec![], vec![three.clone()]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_36);
    assert_eq!(
        manager.container_hints(&p, &three).by_resource.remove("gpu"),
        Some(ResourceHints::Hints(hints("{1,2}*")))
    );
}

#[test]
fn too_large_requests_are_impossible() {
    let machine = machine(2, &[("r", "d0@0 d1@0 d2@1 d3@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("r", 6)]);
    let p = pod("p", vec![], vec![app.clone()]);
    assert_eq!(
        manager.container_hints(&p, &app).by_resource.get("r"),
        Some(&ResourceHints::Impossible)
    );
    assert_eq!(
        manager.pod_hints(&p).by_resource.get("r"),
        Some(&ResourceHints::Impossible)
    );
}

#[test]
fn hints_after_other_pods_took_devices() {
    // kubelet: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA".
    let machine = machine(2, &[("r", "d1@0 d2@1 d3@0 d4@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let other = container("other", &[("r", 2)]);
    let first = pod("first", vec![], vec![other.clone()]);
    manager
        .allocate(&first, &other, affinity(&[0, 1]))
        .expect("4 free devices");
    assert_eq!(held(&manager, "first", "other")["r"], ids("d1 d2"));

    let app = container("app", &[("r", 2)]);
    let second = pod("second", vec![], vec![app.clone()]);
    assert_eq!(
        manager.container_hints(&second, &app).by_resource["r"],
        ResourceHints::Hints(hints("{0,1}"))
    );
}

#[test]
fn hints_for_an_allocated_container_are_regenerated_from_what_it_holds() {
    let machine = machine(2, &[("r", "d1@0 d2@0 d3@1 d4@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("r", 2)]);
    let p = pod("p", vec![], vec![app.clone()]);
    manager.allocate(&p, &app, affinity(&[0])).expect("fits node 0");
    assert_eq!(held(&manager, "p", "app")["r"], ids("d1 d2"));
    // Same request: the hints of the held set.
    assert_eq!(
        manager.container_hints(&p, &app).by_resource["r"],
        ResourceHints::Hints(hints("{0}* {0,1}"))
    );
    assert_eq!(
        manager.pod_hints(&p).by_resource["r"],
        ResourceHints::Hints(hints("{0}* {0,1}"))
    );
    // A different request: impossible.
    let bigger = container("app", &[("r", 4)]);
    assert_eq!(
        manager.container_hints(&p, &bigger).by_resource["r"],
        ResourceHints::Impossible
    );
    // And allocating it again with another count is the kubelet's error.
    assert_eq!(
        manager.allocate(&p, &bigger, affinity(&[])).unwrap_err().to_string(),
        r#"pod "p" container "app" changed request for resource "r" from 2 to 4"#
    );
    // The same count again is a no-op.
    manager.allocate(&p, &app, affinity(&[1])).expect("already held");
    assert_eq!(held(&manager, "p", "app")["r"], ids("d1 d2"));
}

/// `TestTopologyAlignedAllocation`, with the exact ids the conformance
/// plugins' preference yields.
#[test]
fn aligned_allocation_table() {
    let cases: [(&str, &str, i128, &[usize], &str); 10] = [
        // (name, devices, request, hint, expected ids)
        ("no alignment", "Dev1@- Dev2@-", 1, &[0, 1], "Dev1"),
        ("partial alignment", "Dev1@- Dev2@1", 1, &[1], "Dev2"),
        ("socket 0", "Dev1@0 Dev2@1", 1, &[0], "Dev1"),
        ("socket 1", "Dev1@0 Dev2@1", 1, &[1], "Dev2"),
        ("2 on socket 0", "Dev1@0 Dev2@1 Dev3@0 Dev4@1", 2, &[0], "Dev1 Dev3"),
        ("2 on socket 1", "Dev1@0 Dev2@1 Dev3@0 Dev4@1", 2, &[1], "Dev2 Dev4"),
        (
            "4, unsatisfiable on socket 0: all aligned, then the lowest other",
            "Dev1@0 Dev2@1 Dev3@0 Dev4@1 Dev5@0 Dev6@1",
            4,
            &[0],
            "Dev1 Dev2 Dev3 Dev5",
        ),
        (
            "4, unsatisfiable on socket 1",
            "Dev1@0 Dev2@1 Dev3@0 Dev4@1 Dev5@0 Dev6@1",
            4,
            &[1],
            "Dev1 Dev2 Dev4 Dev6",
        ),
        (
            "multi-socket hint",
            "Dev1@0 Dev2@1 Dev3@2 Dev4@3 Dev5@0 Dev6@1 Dev7@2 Dev8@3",
            4,
            &[1, 3],
            "Dev2 Dev4 Dev6 Dev8",
        ),
        (
            "more aligned than needed: lowest ids by string order",
            "gpu10@0 gpu2@0 gpu3@0 gpu4@1",
            2,
            &[0],
            "gpu10 gpu2",
        ),
    ];
    for (name, devices, request, hint, expected) in cases {
        let machine = machine(4, &[("r", devices)]);
        let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
        let app = container("app", &[("r", request)]);
        let p = pod("p", vec![], vec![app.clone()]);
        manager.allocate(&p, &app, affinity(hint)).expect(name);
        assert_eq!(held(&manager, "p", "app")["r"], ids(expected), "{name}");
    }
}

#[test]
fn without_a_hint_devices_with_topology_come_first() {
    // Topology policy `none`: no affinity, the plugin's order decides.
    let machine = machine(2, &[("r", "a@- b@1 c@0 d@-")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("r", 3)]);
    let p = pod("p", vec![], vec![app.clone()]);
    manager.allocate(&p, &app, TopologyHint::any(false)).expect("4 devices");
    assert_eq!(held(&manager, "p", "app")["r"], ids("a b c"));
    let p2 = pod("p2", vec![], vec![app.clone()]);
    assert_eq!(
        manager
            .allocate(&p2, &app, TopologyHint::any(false))
            .unwrap_err()
            .to_string(),
        "requested number of devices unavailable for r. Requested: 3, Available: 1"
    );
}

#[test]
fn unaligned_devices_come_before_devices_without_topology() {
    let machine = machine(2, &[("r", "a@- b@1 c@0 z@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("r", 3)]);
    let p = pod("p", vec![], vec![app.clone()]);
    manager.allocate(&p, &app, affinity(&[0])).expect("4 devices");
    assert_eq!(held(&manager, "p", "app")["r"], ids("b c z"));
}

#[test]
fn unavailable_devices_error_text() {
    // conformance 0026: the second identical pod finds no GPU left.
    let machine = machine(2, &[("nvidia.com/gpu", "gpu0@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("cpu", 8), ("nvidia.com/gpu", 1)]);
    let train = pod("train", vec![], vec![app.clone()]);
    manager.allocate(&train, &app, affinity(&[1])).expect("one GPU");
    let train2 = pod("train-2", vec![], vec![app.clone()]);
    assert_eq!(
        manager.allocate(&train2, &app, affinity(&[1])).unwrap_err().to_string(),
        "requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0"
    );
    // The failed pod holds nothing; once train is gone the GPU is free again.
    assert!(held(&manager, "train-2", "app").is_empty());
    manager.remove_pod("train");
    assert_eq!(manager.in_use_counts()["nvidia.com/gpu"], 0);
    manager.allocate(&train2, &app, affinity(&[1])).expect("GPU released");
    assert_eq!(held(&manager, "train-2", "app")["nvidia.com/gpu"], ids("gpu0"));
}

#[test]
fn first_failing_resource_in_name_order_is_reported_and_earlier_ones_stay_recorded() {
    let machine = machine(1, &[("a", "a0@0"), ("b", "b0@0"), ("c", "c0@0")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("a", 1), ("b", 2), ("c", 2)]);
    let p = pod("p", vec![], vec![app.clone()]);
    assert_eq!(
        manager.allocate(&p, &app, affinity(&[0])).unwrap_err().to_string(),
        "requested number of devices unavailable for b. Requested: 2, Available: 1"
    );
    assert_eq!(
        held(&manager, "p", "app"),
        BTreeMap::from([("a".to_owned(), ids("a0"))])
    );
    assert!(manager.has_pod("p"));
    manager.remove_pod("p");
    assert!(!manager.has_pod("p"));
}

#[test]
fn a_resource_without_devices_cannot_be_allocated_even_at_zero() {
    let machine = machine(1, &[("empty", "")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("empty", 0)]);
    let p = pod("p", vec![], vec![app.clone()]);
    assert_eq!(
        manager.allocate(&p, &app, affinity(&[])).unwrap_err().to_string(),
        "no healthy devices present; cannot allocate unhealthy devices empty"
    );
}

#[test]
fn zero_requests_allocate_nothing() {
    let machine = machine(1, &[("r", "d0@0")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let app = container("app", &[("r", 0)]);
    let p = pod("p", vec![], vec![app.clone()]);
    manager.allocate(&p, &app, affinity(&[0])).expect("nothing to do");
    assert!(held(&manager, "p", "app").is_empty());
    assert!(!manager.has_pod("p"));
}

#[test]
fn app_containers_reuse_init_container_devices() {
    let machine = machine(2, &[("r", "d0@0 d1@0 d2@1 d3@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let init = container("init", &[("r", 2)]);
    let app = container("app", &[("r", 3)]);
    let p = pod("p", vec![init.clone()], vec![app.clone()]);

    manager.allocate(&p, &init, affinity(&[1])).expect("node 1 has 2");
    assert_eq!(held(&manager, "p", "init")["r"], ids("d2 d3"));
    // Hints must cover every reusable device (node 1), even for a request
    // the reusable devices alone satisfy.
    assert_eq!(
        manager.container_hints(&p, &app).by_resource["r"],
        ResourceHints::Hints(hints("{0,1}*"))
    );
    let small = container("small", &[("r", 1)]);
    assert_eq!(
        manager.container_hints(&p, &small).by_resource["r"],
        ResourceHints::Hints(hints("{1}* {0,1}"))
    );
    manager
        .allocate(&p, &app, affinity(&[0, 1]))
        .expect("2 reused + 1 free");
    assert_eq!(held(&manager, "p", "app")["r"], ids("d0 d2 d3"));
    // Init and app share d2, d3: the pod holds 3 devices.
    assert_eq!(manager.in_use_counts()["r"], 3);
}

#[test]
fn sidecars_keep_their_devices() {
    let machine = machine(1, &[("r", "d0@0 d1@0 d2@0")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let init = container("init", &[("r", 1)]);
    let side = sidecar("side", &[("r", 1)]);
    let app = container("app", &[("r", 2)]);
    let p = pod("p", vec![init.clone(), side.clone()], vec![app.clone()]);
    for c in [&init, &side, &app] {
        manager.allocate(&p, c, affinity(&[0])).expect(&c.name);
    }
    assert_eq!(held(&manager, "p", "init")["r"], ids("d0"));
    // The sidecar re-uses the finished init container's device...
    assert_eq!(held(&manager, "p", "side")["r"], ids("d0"));
    // ...and keeps it, so the app gets the others.
    assert_eq!(held(&manager, "p", "app")["r"], ids("d1 d2"));
}

#[test]
fn reuse_belongs_to_the_pod_that_allocated_last() {
    let machine = machine(1, &[("r", "d0@0 d1@0")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let init = container("init", &[("r", 1)]);
    let app = container("app", &[("r", 1)]);
    let first = pod("first", vec![init.clone()], vec![app.clone()]);
    manager.allocate(&first, &init, affinity(&[0])).expect("free");
    // Another pod cannot take over first's init device.
    let other = pod("other", vec![], vec![container("init", &[("r", 1)])]);
    manager
        .allocate(&other, &other.containers[0], affinity(&[0]))
        .expect("one left");
    assert_eq!(held(&manager, "other", "init")["r"], ids("d1"));
}

#[test]
fn pod_scope_hints_use_the_effective_pod_limits() {
    let machine = machine(2, &[("r", "d0@0 d1@0 d2@1")]);
    let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
    let p = pod(
        "p",
        vec![container("init", &[("r", 2)])],
        vec![container("a", &[("r", 1)]), container("b", &[("r", 0)])],
    );
    // max(init 2, apps 1) = 2.
    assert_eq!(
        manager.pod_hints(&p).by_resource["r"],
        ResourceHints::Hints(hints("{0}* {0,1}"))
    );
}

fn any_machine() -> impl Strategy<Value = (usize, Vec<Vec<usize>>)> {
    (1usize..=4).prop_flat_map(|nodes| {
        let device = prop::collection::btree_set(0..nodes, 0..=2).prop_map(|s| s.into_iter().collect());
        (Just(nodes), prop::collection::vec(device, 0..8))
    })
}

proptest! {
    /// Whatever the hints and requests, a device is never held by two pods,
    /// a container gets exactly what it asked for or nothing new, and
    /// removing every pod frees everything.
    #[test]
    fn devices_are_never_handed_out_twice(
        (nodes, devices) in any_machine(),
        pods in prop::collection::vec((0i128..4, prop::collection::btree_set(0usize..4, 0..3)), 1..8),
    ) {
        let spec: Vec<String> = devices
            .iter()
            .enumerate()
            .map(|(i, numa)| {
                let numa: Vec<String> = numa.iter().map(ToString::to_string).collect();
                format!("d{i}@{}", if numa.is_empty() { "-".to_owned() } else { numa.join(",") })
            })
            .collect();
        let spec = spec.join(" ");
        let machine = machine(nodes, &[("r", spec.as_str())]);
        let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
        let mut holders: BTreeMap<String, String> = BTreeMap::new();
        for (i, (request, hint)) in pods.iter().enumerate() {
            let uid = format!("p{i}");
            let app = container("app", &[("r", *request)]);
            let p = pod(&uid, vec![], vec![app.clone()]);
            let hint_nodes: Vec<usize> = hint.iter().copied().filter(|n| *n < nodes).collect();
            let free = devices.len() - holders.len();
            let result = manager.allocate(&p, &app, affinity(&hint_nodes));
            let got = held(&manager, &uid, "app").remove("r").unwrap_or_default();
            if devices.is_empty() {
                prop_assert!(result.is_err());
                continue;
            }
            prop_assert_eq!(result.is_ok(), usize::try_from(*request).unwrap() <= free);
            if result.is_ok() {
                prop_assert_eq!(got.len(), usize::try_from(*request).unwrap());
            } else {
                prop_assert!(got.is_empty());
            }
            for id in got {
                prop_assert!(holders.insert(id.clone(), uid.clone()).is_none(), "{} given twice", id);
            }
        }
        prop_assert_eq!(manager.in_use_counts().get("r").copied().unwrap_or(0), holders.len());
        for i in 0..pods.len() {
            manager.remove_pod(&format!("p{i}"));
        }
        prop_assert_eq!(manager.in_use_counts().get("r").copied().unwrap_or(0), 0);
    }

    /// A hint the topology manager built from this manager's preferred
    /// hints is honoured: the devices all lie on it.
    #[test]
    fn preferred_hints_are_honoured(
        (nodes, devices) in any_machine(),
        request in 1i128..4,
    ) {
        let spec: Vec<String> = devices
            .iter()
            .enumerate()
            .map(|(i, numa)| {
                let numa: Vec<String> = numa.iter().map(ToString::to_string).collect();
                format!("d{i}@{}", if numa.is_empty() { "-".to_owned() } else { numa.join(",") })
            })
            .collect();
        let spec = spec.join(" ");
        let machine = machine(nodes, &[("r", spec.as_str())]);
        let app = container("app", &[("r", request)]);
        let p = pod("p", vec![], vec![app.clone()]);
        let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
        let ResourceHints::Hints(list) = manager.container_hints(&p, &app).by_resource.remove("r").unwrap_or(ResourceHints::NoPreference) else {
            return Ok(());
        };
        for hint in list {
            let mut manager = DeviceManager::new(&machine, KubeletVersion::V1_32);
            manager.allocate(&p, &app, hint).expect("a hint promises enough devices");
            let mask = hint.affinity.expect("device hints carry a mask");
            let registry = crate::registry::Registry::from_machine(&machine);
            let devices = registry.resource("r").expect("registered");
            for id in &held(&manager, "p", "app")["r"] {
                let on = devices.affinity(id).is_some_and(|a| a.intersects(mask));
                prop_assert!(on, "{} not on {:?}", id, mask);
            }
        }
    }
}

//! Churn: 1,000 random adds and deletes (init and sidecar containers,
//! devices, huge pages) on a node; after every change the published object
//! restores to exactly the node's state. Beside it, how often admitting the
//! published pods again in order (the first format's rebuild) would have
//! given another state.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_engine::Node;
use topoalign_nrt::{BuildOptions, NodeSpec, build, restore, start_node};

/// A small deterministic generator (SplitMix64): the same churn every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Two sockets, one NUMA node each, 8 cores × 2 threads, 2Mi huge pages,
/// a GPU and a NIC per NUMA node.
fn spec(policy: &str, scope: &str) -> NodeSpec {
    let cpus: Vec<_> = (0..32)
        .map(|id| {
            let core = id % 16;
            json!({"id": id, "core": core, "socket": core / 8, "numa": core / 8})
        })
        .collect();
    serde_json::from_value(json!({
        "topology": {
            "numaNodes": [
                {"id": 0, "memory": "32Gi", "hugepages-2Mi": "2Gi", "distances": [10, 21]},
                {"id": 1, "memory": "32Gi", "hugepages-2Mi": "2Gi", "distances": [21, 10]}
            ],
            "cpus": cpus,
            "devices": {
                "nvidia.com/gpu": [{"id": "gpu0", "numa": [0]}, {"id": "gpu1", "numa": [1]}],
                "example.com/nic": [{"id": "nic0", "numa": [0]}, {"id": "nic1", "numa": [1]}, {"id": "nic2", "numa": []}]
            }
        },
        "kubelet": {"topologyManagerPolicy": policy, "topologyManagerScope": scope,
                    "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
                    "reservedSystemCPUs": "0,16",
                    "systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}
    }))
    .unwrap()
}

/// A random container's resources: Guaranteed with whole or fractional
/// CPUs, or Burstable; sometimes huge pages or a device.
fn resources(rng: &mut Rng) -> Value {
    let cpu = match rng.below(4) {
        0 => "500m".to_string(),
        _ => (1 + rng.below(6)).to_string(),
    };
    let memory = format!("{}Mi", 256 * (1 + rng.below(24)));
    let mut limits = json!({"cpu": cpu, "memory": memory});
    if rng.chance(15) {
        limits["hugepages-2Mi"] = json!(format!("{}Mi", 2 * (1 + rng.below(256))));
    }
    if rng.chance(15) {
        limits["nvidia.com/gpu"] = json!("1");
    }
    if rng.chance(15) {
        limits["example.com/nic"] = json!("1");
    }
    if rng.chance(20) {
        // Burstable: requests below the limits.
        json!({"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": limits})
    } else {
        json!({"limits": limits})
    }
}

fn random_pod(rng: &mut Rng, n: usize) -> topoalign_model::Pod {
    let mut init = Vec::new();
    for i in 0..rng.below(3) {
        let mut container = json!({"name": format!("init{i}"), "resources": resources(rng)});
        if rng.chance(40) {
            container["restartPolicy"] = json!("Always"); // a sidecar
        }
        init.push(container);
    }
    let apps: Vec<_> = (0..1 + rng.below(3))
        .map(|i| json!({"name": format!("app{i}"), "resources": resources(rng)}))
        .collect();
    topoalign_k8s::pod_from_value(
        &json!({"metadata": {"name": format!("p{n}"), "namespace": "churn"},
                "spec": {"initContainers": init, "containers": apps}}),
        &format!("uid-{n}"),
    )
    .unwrap()
}

/// FNV-1a (64 bits) of `bytes`, continuing from `hash`.
fn fnv64(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The published object restores to `node`; and whether admitting its pods
/// again in order gives another state. `texts` goes on with the state
/// attribute's text.
fn check(spec: &NodeSpec, node: &Node, step: usize, texts: &mut u64) -> bool {
    let object = build(
        "churned",
        node,
        BuildOptions {
            exact_state: Some(spec),
        },
    );
    let state = object.attribute(topoalign_nrt::exact::STATE_ATTRIBUTE).unwrap();
    *texts = fnv64(*texts, state.as_bytes());
    // Through JSON, as it travels.
    let object: topoalign_nrt::NodeResourceTopology =
        serde_json::from_str(&serde_json::to_string(&object).unwrap()).unwrap();
    let rebuilt = restore(&object).unwrap_or_else(|e| panic!("step {step}: {e}"));
    assert_eq!(rebuilt.node.state(), node.state(), "step {step}");
    assert_eq!(rebuilt.node.devices_in_use(), node.devices_in_use(), "step {step}");
    assert_eq!(rebuilt.node.snapshot().memory, node.snapshot().memory, "step {step}");
    assert_eq!(rebuilt.node.pods(), node.pods(), "step {step}");
    // The pod list alone, admitted again in order.
    let mut readmitted = start_node(spec).unwrap();
    let mut same = true;
    for pod in rebuilt.pods {
        same &= readmitted.admit(pod).admitted();
    }
    !(same && readmitted.state() == node.state() && readmitted.devices_in_use() == node.devices_in_use())
}

fn churn(policy: &str, scope: &str, seed: u64, texts: &mut u64) -> (usize, usize) {
    let spec = spec(policy, scope);
    let mut node = start_node(&spec).unwrap();
    let mut rng = Rng(seed);
    let mut history_divergences = 0;
    let mut changes = 0;
    for step in 0..1_000 {
        let live: Vec<String> = node.pods().iter().map(|p| p.uid.clone()).collect();
        let changed = if !live.is_empty() && rng.chance(40) {
            let uid = &live[rng.below(live.len() as u64) as usize];
            node.remove(uid)
        } else {
            node.admit(random_pod(&mut rng, step)).admitted()
        };
        if changed {
            changes += 1;
            history_divergences += usize::from(check(&spec, &node, step, texts));
        }
    }
    (changes, history_divergences)
}

#[test]
fn every_state_of_a_churned_node_restores_exactly() {
    let mut total_history_divergences = 0;
    let mut texts = 0xcbf2_9ce4_8422_2325;
    for (policy, scope, seed) in [
        ("single-numa-node", "container", 1),
        ("best-effort", "pod", 2),
        ("restricted", "container", 3),
    ] {
        let (changes, diverged) = churn(policy, scope, seed, &mut texts);
        eprintln!(
            "{policy}/{scope}: {changes} changes, 0 snapshot divergences; \
             admitting the pods again would have diverged {diverged} times"
        );
        assert!(changes > 300, "{policy}/{scope}: only {changes} changes");
        total_history_divergences += diverged;
    }
    // The churn reaches the histories a pod list cannot reproduce.
    assert!(total_history_divergences > 0);
    // Every state attribute written on the way, byte for byte the text the
    // format's first writer (an owned record serialized by serde) wrote
    // for the same nodes: the format does not change with its writer.
    assert_eq!(
        texts, FIRST_WRITERS_TEXTS,
        "the state attribute's text changed: {texts:#018x}"
    );
}

/// The hash of the state attributes of the three churns above as the
/// owned `StateRecord` of 27 November 2026 (main 566da30) wrote them.
const FIRST_WRITERS_TEXTS: u64 = 0x5a2c_8854_7694_b900;

//! Random `kubelet:` blocks: every topology manager policy, scope and
//! option, CPU manager policy and option, memory manager policy, the ways
//! CPUs and memory are reserved, and the feature gates of the release.
//! Most configurations are ones the release starts with; some are not
//! (a forgotten alpha gate, a reservation that does not add up, a locked
//! gate switched off, a gate the release no longer has): the kubelet's
//! start-up error is part of the answer too.

use serde_json::{Map, Value, json};

use super::Profile;
use super::machine::MachineFacts;
use crate::release::{CPU_OPTIONS, Maturity, Release};
use crate::rng::Rng;

/// The configuration's facts the pod generator needs.
#[derive(Clone, Debug)]
pub struct KubeletFacts {
    pub topology_policy: &'static str,
    pub pod_scope: bool,
    pub static_cpu: bool,
    pub static_memory: bool,
    pub pod_level_resources: bool,
    /// `PodLevelResourceManagers` on (with pod-level resources honoured).
    pub pod_level_managers: bool,
    pub full_pcpus_only: bool,
    /// Whether to generate `resize` events: wherever the oracle replays
    /// them through the kubelet's code (every release, 1.32+;
    /// oracle/README.md).
    pub resize_events: bool,
    /// Whether the pod stream draws them (1.36+, the releases resizes were
    /// first generated for). Older releases get theirs from a later step
    /// with its own random stream (`resize.rs`), so that their seeds' base
    /// scenarios stay the ones the seeds named before.
    pub resize_in_pod_stream: bool,
    /// Most hint permutations one container (or pod) may cost the merge
    /// ([`super::pods::MERGE_BUDGET`], or ten times it for big machines).
    pub merge_budget: f64,
    /// Pods ask for huge pages and devices more often (big machines: the
    /// point is aligning everything at once).
    pub rich_pods: bool,
}

const MI: u64 = 1 << 20;

pub fn kubelet(
    rng: &mut Rng,
    release: Release,
    profile: Profile,
    machine: &MachineFacts,
    tags: &mut Vec<String>,
) -> (Value, KubeletFacts) {
    let mut k = Map::new();
    k.insert("kubeletVersion".into(), json!(release.name()));
    let mut gates = Map::new();

    // Topology manager.
    let policy = match profile {
        Profile::Standard => *rng.weighted(&[
            (10, "default"),
            (15, "none"),
            (25, "best-effort"),
            (20, "restricted"),
            (30, "single-numa-node"),
        ]),
        Profile::Big => *rng.weighted(&[(30, "best-effort"), (30, "restricted"), (40, "single-numa-node")]),
        // Past 64 NUMA nodes the kubelet runs only `none`; another policy
        // is its start-up refusal (past max-allowable-numa-nodes, which is
        // never raised here: raised, the kubelet crashes at the first
        // admission, and an oracle that crashed answers nothing).
        Profile::Wide => *rng.weighted(&[
            (20, "default"),
            (60, "none"),
            (7, "best-effort"),
            (6, "restricted"),
            (7, "single-numa-node"),
        ]),
    };
    if policy != "default" {
        k.insert("topologyManagerPolicy".into(), json!(policy));
    }
    let scope = *rng.weighted(&[(30, "default"), (30, "container"), (40, "pod")]);
    if scope != "default" {
        k.insert("topologyManagerScope".into(), json!(scope));
    }
    let mut topology_options = Map::new();
    // Without distances the kubelet cannot honour it (and says so).
    if rng.chance(if machine.has_distances { 30 } else { 6 }) {
        topology_options.insert(
            "prefer-closest-numa-nodes".into(),
            json!(if rng.chance(80) { "true" } else { "false" }),
        );
    }
    let more_than_eight = machine.numa > 8 && policy != "none" && policy != "default";
    if profile == Profile::Wide {
        if rng.chance(15) {
            // Set, but below the machine's count (or below the minimum of 8).
            let value = if rng.chance(85) {
                rng.urange(8, 64)
            } else {
                rng.urange(4, 7)
            };
            topology_options.insert("max-allowable-numa-nodes".into(), json!(value.to_string()));
        }
    } else if (more_than_eight && rng.chance(92)) || rng.chance(8) {
        let value = if rng.chance(90) {
            machine.numa.max(8) + rng.urange(0, 4)
        } else {
            // Below the minimum of 8, or below the machine's count.
            rng.urange(4, machine.numa.max(8))
        };
        topology_options.insert("max-allowable-numa-nodes".into(), json!(value.to_string()));
        if release.topology_option("max-allowable-numa-nodes") == Maturity::Beta && rng.chance(8) {
            gates.insert("TopologyManagerPolicyBetaOptions".into(), json!(false));
        }
    }
    if !topology_options.is_empty() {
        for name in topology_options.keys() {
            tags.push(format!("topology-option:{name}"));
        }
        k.insert("topologyManagerPolicyOptions".into(), Value::Object(topology_options));
    }

    // CPU manager.
    let cpu_policy = match profile {
        Profile::Standard => *rng.weighted(&[(10, "default"), (12, "none"), (78, "static")]),
        Profile::Big => *rng.weighted(&[(5, "none"), (95, "static")]),
        Profile::Wide => *rng.weighted(&[(10, "default"), (20, "none"), (70, "static")]),
    };
    if cpu_policy != "default" {
        k.insert("cpuManagerPolicy".into(), json!(cpu_policy));
    }
    let static_cpu = cpu_policy == "static";
    let mut options = Map::new();
    if static_cpu || rng.chance(3) {
        let count = *rng.weighted(&[(45, 0usize), (40, 1), (15, 2)]);
        for _ in 0..count {
            let option = *rng.weighted(&[
                (30, CPU_OPTIONS[0]),
                (20, CPU_OPTIONS[1]),
                (10, CPU_OPTIONS[2]),
                (8, CPU_OPTIONS[3]),
                (15, CPU_OPTIONS[4]),
                (20, CPU_OPTIONS[5]),
            ]);
            let value = *rng.weighted(&[(92, "true"), (6, "false"), (2, "yes please")]);
            options.insert(option.into(), json!(value));
        }
    }
    let full_pcpus_only = options.get("full-pcpus-only").is_some_and(|v| v == "true");
    if !options.is_empty() {
        let mut alpha = false;
        let mut beta = false;
        for name in options.keys() {
            tags.push(format!("cpu-option:{name}"));
            match release.cpu_option(name) {
                Maturity::Alpha => alpha = true,
                Maturity::Beta => beta = true,
                Maturity::Ga => {}
            }
        }
        // The gate an option needs in *some* release: setting it where it
        // is no longer needed is harmless, forgetting it is refused.
        let ever_alpha = options
            .keys()
            .any(|name| Release(32).cpu_option(name) == Maturity::Alpha);
        if (alpha && rng.chance(85)) || (ever_alpha && rng.chance(40)) {
            gates.insert("CPUManagerPolicyAlphaOptions".into(), json!(true));
        }
        if beta && rng.chance(8) {
            gates.insert("CPUManagerPolicyBetaOptions".into(), json!(false));
        }
        k.insert("cpuManagerPolicyOptions".into(), Value::Object(options));
    }

    // CPU reservation.
    let reservation = if static_cpu {
        *rng.weighted(&[(45, "reserved"), (40, "cpus"), (3, "nothing"), (12, "both")])
    } else {
        *rng.weighted(&[(60, "nothing"), (30, "reserved"), (10, "cpus")])
    };
    let mut system_reserved = Map::new();
    let mut kube_reserved = Map::new();
    if reservation == "reserved" || reservation == "both" {
        let amount = *rng.weighted(&[(50, "1"), (20, "2"), (15, "500m"), (15, "1500m")]);
        if rng.chance(50) {
            system_reserved.insert("cpu".into(), json!(amount));
        } else {
            kube_reserved.insert("cpu".into(), json!(amount));
            if rng.chance(30) {
                system_reserved.insert("cpu".into(), json!("1"));
            }
        }
    }
    let cpu_capacity = machine.cpus_per_numa.iter().map(Vec::len).sum::<usize>() as u64 * 1000;
    let mut reserved_milli: u64 = [&system_reserved, &kube_reserved]
        .iter()
        .filter_map(|m| m.get("cpu").and_then(Value::as_str))
        .map(|q| {
            q.strip_suffix('m')
                .map_or_else(|| q.parse::<u64>().unwrap_or(0) * 1000, |m| m.parse().unwrap_or(0))
        })
        .sum();
    if reservation == "cpus" || reservation == "both" {
        let cpus = reserved_cpus(rng, machine);
        reserved_milli = cpus.split(',').count() as u64 * 1000;
        k.insert("reservedSystemCPUs".into(), json!(cpus));
    }
    if reserved_milli > cpu_capacity {
        // The kubelet refuses: node allocatable would be negative.
        tags.push("reserved-over-capacity".into());
    }

    // Memory manager and memory reservation.
    let memory_policy = match profile {
        Profile::Standard => *rng.weighted(&[(20, "default"), (20, "None"), (60, "Static")]),
        Profile::Big => *rng.weighted(&[(10, "None"), (90, "Static")]),
        // The Static policy crashes the kubelet at the first Guaranteed
        // container on such a machine (and the oracle with it).
        Profile::Wide => *rng.weighted(&[(30, "default"), (70, "None")]),
    };
    if memory_policy != "default" {
        k.insert("memoryManagerPolicy".into(), json!(memory_policy));
    }
    let static_memory = memory_policy == "Static";
    let mut reserved_memory = 0u64;
    if rng.chance(if static_memory { 80 } else { 40 }) {
        let amount = *rng.pick(&[256u64, 512, 1024]) * MI;
        system_reserved.insert("memory".into(), json!(topoalign_scenario::byte_quantity(amount)));
        reserved_memory += amount;
    }
    if rng.chance(30) {
        let amount = *rng.pick(&[128u64, 256, 512]) * MI;
        kube_reserved.insert("memory".into(), json!(topoalign_scenario::byte_quantity(amount)));
        reserved_memory += amount;
    }
    let mut eviction = *rng.weighted(&[(60, 100u64), (15, 200), (10, 500), (10, 0), (5, 1024)]);
    if rng.chance(8) {
        // Another signal only: the default memory.available (100Mi) is
        // gone, unless mergeDefaultEvictionSettings (1.33+; an unknown
        // field to 1.32) brings it back.
        let merge = rng.chance(60);
        k.insert("evictionHard".into(), json!({"nodefs.available": "5%"}));
        k.insert("mergeDefaultEvictionSettings".into(), json!(merge));
        tags.push(format!("merge-eviction:{merge}"));
        eviction = if merge && release.0 >= 33 { 100 } else { 0 };
    } else if eviction != 100 || rng.chance(20) {
        let text = if eviction == 0 {
            "0".to_owned()
        } else {
            topoalign_scenario::byte_quantity(eviction * MI)
        };
        k.insert("evictionHard".into(), json!({"memory.available": text}));
    }
    reserved_memory += eviction * MI;
    if static_memory {
        // The kubelet wants reservedMemory to add up to the node's reserved
        // memory; now and then it does not.
        let total = if rng.chance(7) {
            reserved_memory + 64 * MI
        } else {
            reserved_memory
        };
        if total > 0 || rng.chance(50) {
            k.insert(
                "reservedMemory".into(),
                json!(spread_memory(rng, &machine.numa_ids, total)),
            );
        }
    }
    if !system_reserved.is_empty() {
        k.insert("systemReserved".into(), Value::Object(system_reserved));
    }
    if !kube_reserved.is_empty() {
        k.insert("kubeReserved".into(), Value::Object(kube_reserved));
    }

    // Feature gates.
    let mut pod_level_gate = None;
    let mut managers_gate = false;
    for gate in release.gates() {
        if gates.contains_key(gate.name) {
            continue;
        }
        let value = match gate.name {
            "PodLevelResources" if !gate.default && rng.chance(20) => Some(true),
            "PodLevelResources" if gate.default && rng.chance(5) => Some(false),
            "PodLevelResourceManagers" if rng.chance(35) => Some(true),
            "PodLevelResourcesFixDefaulting" | "PodLevelResourcesFixKubeletQOSClass" if rng.chance(15) => Some(false),
            "CPUManagerPolicyAlphaOptions" if rng.chance(5) => Some(true),
            // Where resizes are generated (1.36+), now and then.
            "InPlacePodVerticalScalingExclusiveCPUs" | "InPlacePodVerticalScalingExclusiveMemory"
                if release.0 >= 36 && rng.chance(20) =>
            {
                Some(true)
            }
            _ if gate.locked && rng.chance(1) => {
                // The kubelet panics while defaulting its configuration.
                tags.push("gate-refused".into());
                Some(!gate.default)
            }
            _ if rng.chance(3) => Some(gate.default),
            _ => None,
        };
        if let Some(value) = value {
            if gate.name == "PodLevelResources" {
                pod_level_gate = Some(value);
            }
            if gate.name == "PodLevelResourceManagers" {
                managers_gate = value;
            }
            gates.insert(gate.name.into(), json!(value));
        }
    }
    // A gate an earlier release had and this one has not.
    if rng.chance(1) {
        let gone = if release.0 >= 33 {
            "CPUManager"
        } else {
            "PodLevelResourceManagers"
        };
        gates.insert(gone.into(), json!(true));
        tags.push("gate-refused".into());
    }
    if !gates.is_empty() {
        for (name, value) in &gates {
            tags.push(format!("gate:{name}={value}"));
        }
        k.insert("featureGates".into(), Value::Object(gates));
    }

    tags.push(format!("policy:{policy}"));
    tags.push(format!("scope:{scope}"));
    tags.push(format!("cpu:{cpu_policy}"));
    tags.push(format!("memory:{memory_policy}"));
    let facts = KubeletFacts {
        topology_policy: policy,
        pod_scope: scope == "pod",
        static_cpu,
        static_memory,
        pod_level_resources: release.pod_level_resources(pod_level_gate),
        pod_level_managers: managers_gate && release.pod_level_resources(pod_level_gate),
        full_pcpus_only,
        resize_events: release.0 >= 32,
        resize_in_pod_stream: release.0 >= 36,
        merge_budget: match profile {
            Profile::Standard | Profile::Wide => super::pods::MERGE_BUDGET,
            Profile::Big => super::pods::BIG_MERGE_BUDGET,
        },
        rich_pods: profile != Profile::Standard,
    };
    (Value::Object(k), facts)
}

/// `reservedSystemCPUs`: the first core (with its siblings), a few CPUs
/// spread over NUMA nodes, or one CPU of the last NUMA node.
fn reserved_cpus(rng: &mut Rng, machine: &MachineFacts) -> String {
    let first = machine.cpus_per_numa[0][0];
    let mut ids: Vec<u32> = match *rng.weighted(&[(50, "core"), (25, "spread"), (25, "last")]) {
        "core" => {
            let mut ids = vec![first];
            ids.extend(&machine.siblings[&first]);
            ids
        }
        // (Nodes without CPUs, last in id order, give none.)
        "spread" => machine
            .cpus_per_numa
            .iter()
            .take(rng.urange(1, machine.numa))
            .filter_map(|cpus| cpus.first().copied())
            .collect(),
        _ => vec![*machine.cpus_per_numa[machine.numa - 1].last().unwrap_or(&first)],
    };
    ids.sort_unstable();
    ids.dedup();
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// `reservedMemory` entries holding `total` bytes of memory: all on NUMA
/// node 0, or split over two nodes.
fn spread_memory(rng: &mut Rng, ids: &[usize], total: u64) -> Value {
    let numa = ids.len();
    if numa > 1 && total >= 2 * MI && rng.chance(35) {
        let first = (total / 2 / MI) * MI;
        let second = total - first;
        let other = rng.urange(1, numa - 1);
        json!([
            {"numaNode": ids[0], "limits": {"memory": topoalign_scenario::byte_quantity(first)}},
            {"numaNode": ids[other], "limits": {"memory": topoalign_scenario::byte_quantity(second)}},
        ])
    } else {
        json!([{"numaNode": ids[0], "limits": {"memory": topoalign_scenario::byte_quantity(total)}}])
    }
}

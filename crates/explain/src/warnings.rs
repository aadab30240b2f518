//! Warnings for the silent no-ops people fall into: settings under which
//! the kubelet admits a pod but aligns less than they think — a pod that is
//! not Guaranteed, a fractional CPU request, a CPU manager left at `none`
//! under a topology policy, a memory manager at `None`, a device resource
//! the node does not have, a topology policy of `none` — and, on a machine
//! with NUMA ids past 63, why a pod escapes the crash the node's start
//! hazard warns of ([`past_masks`]).

use topoalign_engine::{CpuPolicyName, MemoryPolicyName, Node, TopologyPolicyName};
use topoalign_model::{Pod, QosClass};

/// The warnings for `pod` on `node`, in a fixed order.
pub fn warnings(node: &Node, pod: &Pod) -> Vec<String> {
    let config = node.config();
    let mut warnings = past_masks(node, pod);
    let asks = |resource: &str| pod.all_containers().any(|(c, _)| !c.request(resource).is_zero());
    let pins_cpus = config.cpu_policy == CpuPolicyName::Static;
    let pins_memory = config.memory_policy == MemoryPolicyName::Static;
    let aligns = config.topology_policy != TopologyPolicyName::None;

    if pod.qos != QosClass::Guaranteed && (pins_cpus || pins_memory || aligns) {
        warnings.push(format!(
            "not Guaranteed (QoS {}): requests differ from limits or are missing, so it gets no exclusive CPUs and \
             no pinned memory; it runs in the shared CPU pool",
            pod.qos.as_str()
        ));
    }
    if pod.qos == QosClass::Guaranteed && pins_cpus {
        for (container, _) in pod.all_containers() {
            let cpu = container.request("cpu");
            if !cpu.is_zero() && !cpu.is_whole() {
                warnings.push(format!(
                    "container {} asks for {cpu} CPU, not a whole number: it gets no exclusive CPUs and runs in the \
                     shared pool (ask for a whole number, e.g. {}, to pin it)",
                    container.name,
                    cpu.value().max(1)
                ));
            }
        }
    }
    if aligns && !pins_cpus && asks("cpu") {
        warnings.push(format!(
            "cpuManagerPolicy is none: the CPU manager gives no hints, so topologyManagerPolicy {} has no CPUs to \
             align (every container runs in the shared pool)",
            config.topology_policy.as_str()
        ));
    }
    if !pins_memory && pod.qos == QosClass::Guaranteed && asks("memory") {
        warnings.push(
            "memoryManagerPolicy is None: memory is not pinned to NUMA nodes (it may come from any node)".to_owned(),
        );
    }
    if !aligns && pod.qos == QosClass::Guaranteed && (pins_cpus || pins_memory) {
        warnings.push(
            "topologyManagerPolicy is none: CPUs, memory and devices are each placed on their own, not aligned \
             to common NUMA nodes"
                .to_owned(),
        );
    }
    let mut unknown: Vec<&str> = pod
        .all_containers()
        .flat_map(|(c, _)| c.requests.keys().chain(c.limits.keys()))
        .map(String::as_str)
        .filter(|r| topoalign_model::resource_name::is_extended(r) && !node.machine().devices().contains_key(*r))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    for resource in unknown {
        warnings.push(format!(
            "{resource} is not a device resource of this node: the kubelet ignores the request, and no device is \
             allocated"
        ));
    }
    warnings
}

/// Beside the verdict of a pod the kubelet does not crash on, on a
/// machine with a NUMA id of 64 or more (`Machine::numa_id_past_masks`;
/// the kubelet's NUMA masks are 64-bit): why this pod escapes the crash.
/// Where the kubelet crashes admitting the pod (any topology manager
/// policy but `none`; under `none` the Static memory manager and a
/// Guaranteed pod) the decision says so (`Decision::kubelet_panic`), and
/// the configuration's hazard (`topoalign_engine::KubeletCrash`, shown
/// with the node) says where it crashes: nothing to add. Empty for every
/// other machine.
pub fn past_masks(node: &Node, pod: &Pod) -> Vec<String> {
    let Some(numa_id) = node.machine().numa_id_past_masks() else {
        return Vec::new();
    };
    let config = node.config();
    if config.topology_policy != TopologyPolicyName::None {
        return Vec::new();
    }
    let masks = format!("NUMA node id {numa_id} does not fit the kubelet's 64-bit NUMA masks");
    match config.memory_policy {
        MemoryPolicyName::None => vec![format!(
            "{masks}; this pod does not crash the kubelet because topologyManagerPolicy none and memoryManagerPolicy \
             None build no mask of every NUMA node (any other topology policy crashes it at every admission)"
        )],
        MemoryPolicyName::Static if pod.qos != QosClass::Guaranteed => vec![format!(
            "{masks}; under topologyManagerPolicy none this pod does not crash the kubelet because it is not \
             Guaranteed (QoS {}): the Static memory manager computes no hint for it (for a Guaranteed pod it does, \
             and crashes)",
            pod.qos.as_str()
        )],
        MemoryPolicyName::Static => Vec::new(),
    }
}

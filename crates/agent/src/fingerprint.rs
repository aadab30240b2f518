//! The journal's fingerprint of a node: a checksum over every field of the
//! machine and the kubelet configuration a journal was written for, so a
//! restart on a changed node can say what it was started with then.
//!
//! Built from exhaustive destructuring, not from `Debug` output: a field
//! added to [`NodeConfig`], [`FeatureGates`] or the machine's parts does not
//! compile here until it is added to the fingerprint, and a change to how a
//! type prints (`Debug` of a `Quantity` is its canonical text, `1Gi` or
//! `1073741824`) cannot change the fingerprint of the same node. Amounts
//! are written as thousandths, sets in the kubelet's list syntax.
//!
//! Owns: what the fingerprint covers. Must not touch: the journal's format
//! (the fingerprint is one string in its start record).

use std::fmt::Write as _;

use topoalign_engine::{Node, NodeConfig, ReservedMemory};
use topoalign_model::{Cpu, Device, FeatureGates, Machine, NumaNode, ResourceList};

use crate::crc32::crc32;

/// The fingerprint of a started node (its machine and the configuration
/// it was started with): eight hex digits.
pub fn fingerprint(node: &Node) -> String {
    let mut text = String::new();
    write_machine(&mut text, node.machine());
    write_config(&mut text, node.config());
    format!("{:08x}", crc32(text.as_bytes()))
}

// Every NUMA id is the machine's own (`Machine::numa_label`), not the
// engine's index: a journal written on NUMA ids {0, 1} is not the journal
// of a machine with ids {0, 64}, and on a machine whose ids are all below
// 64 (no labels) the text is what it always was. The distance rows are as
// the machine holds them (by index, one per node in id order once
// numbered anew), and `reservedMemory` is the configuration's own id.
fn write_machine(out: &mut String, machine: &Machine) {
    let label = |numa: usize| machine.numa_label(numa);
    for numa in machine.numa_nodes() {
        let NumaNode {
            id,
            memory,
            hugepages,
            distances,
        } = numa;
        let id = label(*id);
        let _ = writeln!(
            out,
            "numa {id} memory {memory} hugepages {hugepages:?} distances {distances:?}"
        );
    }
    for cpu in machine.cpus() {
        let Cpu {
            id,
            core,
            socket,
            numa,
            uncore_cache,
        } = cpu;
        let numa = label(*numa);
        let _ = writeln!(
            out,
            "cpu {id} core {core} socket {socket} numa {numa} uncore {uncore_cache:?}"
        );
    }
    for (resource, devices) in machine.devices() {
        for device in devices {
            let Device { id, numa } = device;
            let numa: Vec<usize> = numa.iter().map(|&n| label(n)).collect();
            let _ = writeln!(out, "device {resource} {id:?} numa {numa:?}");
        }
    }
}

fn write_config(out: &mut String, config: &NodeConfig) {
    let NodeConfig {
        topology_policy,
        topology_scope,
        topology_options,
        cpu_policy,
        cpu_options,
        reserved_system_cpus,
        memory_policy,
        reserved_memory,
        system_reserved,
        kube_reserved,
        hard_eviction,
        max_pods,
        feature_gates,
        kubelet_version,
    } = config;
    let _ = writeln!(out, "topologyManagerPolicy {topology_policy} scope {topology_scope}");
    let _ = writeln!(out, "topologyManagerPolicyOptions {topology_options:?}");
    let _ = writeln!(out, "cpuManagerPolicy {cpu_policy} options {cpu_options:?}");
    let reserved = reserved_system_cpus.as_ref().map(ToString::to_string);
    let _ = writeln!(out, "reservedSystemCPUs {reserved:?}");
    let _ = writeln!(out, "memoryManagerPolicy {memory_policy}");
    for reservation in reserved_memory {
        let ReservedMemory { numa_node, limits } = reservation;
        let _ = writeln!(out, "reservedMemory {numa_node} {}", amounts(limits));
    }
    let _ = writeln!(out, "systemReserved {}", amounts(system_reserved));
    let _ = writeln!(out, "kubeReserved {}", amounts(kube_reserved));
    let _ = writeln!(out, "hardEviction {}", amounts(hard_eviction));
    let _ = writeln!(out, "maxPods {max_pods}");
    write_gates(out, feature_gates);
    let _ = writeln!(out, "kubeletVersion {kubelet_version}");
}

fn write_gates(out: &mut String, gates: &FeatureGates) {
    let FeatureGates {
        cpu_manager_policy_options,
        cpu_manager_policy_beta_options,
        cpu_manager_policy_alpha_options,
        topology_manager_policy_options,
        topology_manager_policy_beta_options,
        topology_manager_policy_alpha_options,
        memory_manager,
        pod_level_resources_set,
        pod_level_fix_defaulting_set,
        pod_level_fix_qos_set,
        pod_level_managers_set,
        in_place_resize_set,
        in_place_resize_exclusive_cpus,
        in_place_resize_exclusive_memory,
    } = gates;
    let _ = writeln!(
        out,
        "gates CPUManagerPolicyOptions {cpu_manager_policy_options} CPUManagerPolicyBetaOptions \
         {cpu_manager_policy_beta_options} CPUManagerPolicyAlphaOptions {cpu_manager_policy_alpha_options} \
         TopologyManagerPolicyOptions {topology_manager_policy_options} TopologyManagerPolicyBetaOptions \
         {topology_manager_policy_beta_options} TopologyManagerPolicyAlphaOptions \
         {topology_manager_policy_alpha_options} MemoryManager {memory_manager} PodLevelResources \
         {pod_level_resources_set:?} PodLevelResourcesFixDefaulting {pod_level_fix_defaulting_set:?} \
         PodLevelResourcesFixKubeletQOSClass {pod_level_fix_qos_set:?}"
    );
    // Written only when set, so that the fingerprints of journals written
    // before the field existed stay the same.
    if let Some(set) = pod_level_managers_set {
        let _ = writeln!(out, "gates PodLevelResourceManagers {set}");
    }
    // Only when set: fingerprints of journals written before these gates
    // were read stay the same.
    if in_place_resize_set.is_some() || *in_place_resize_exclusive_cpus || *in_place_resize_exclusive_memory {
        let _ = writeln!(
            out,
            "gates InPlacePodVerticalScaling {in_place_resize_set:?} InPlacePodVerticalScalingExclusiveCPUs \
             {in_place_resize_exclusive_cpus} InPlacePodVerticalScalingExclusiveMemory \
             {in_place_resize_exclusive_memory}"
        );
    }
}

/// `name=milli,…` in name order.
fn amounts(list: &ResourceList) -> String {
    let parts: Vec<String> = list.iter().map(|(name, q)| format!("{name}={}", q.milli())).collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use topoalign_model::{CpuSet, Quantity, QuantityFormat, UniformMachine};

    use super::*;

    fn machine() -> Machine {
        UniformMachine::new(2, 2).build().unwrap()
    }

    #[test]
    fn every_field_changes_the_fingerprint_and_notation_does_not() {
        let base = NodeConfig::default();
        let print = |config: &NodeConfig| fingerprint(&Node::start(machine(), config.clone()).unwrap());
        let same = print(&base);
        assert_eq!(print(&base.clone()), same);
        // Journals written by earlier releases carry this value for this
        // node: the fingerprint's text must not drift.
        assert_eq!(same, "eca8a00c");

        let mut changed = base.clone();
        changed.reserved_system_cpus = Some(CpuSet::from_iter([0]));
        assert_ne!(print(&changed), same);
        let mut changed = base.clone();
        changed.feature_gates.pod_level_resources_set = Some(false);
        assert_ne!(print(&changed), same);
        let mut changed = base.clone();
        changed.max_pods += 1;
        assert_ne!(print(&changed), same);

        // The same amount written in another notation is the same node.
        let mut decimal = base.clone();
        decimal
            .kube_reserved
            .insert("memory".into(), Quantity::from_units(1 << 20));
        let mut binary = base.clone();
        binary.kube_reserved.insert(
            "memory".into(),
            Quantity::from_units(1 << 20).with_format(QuantityFormat::BinarySI),
        );
        assert_eq!(print(&decimal), print(&binary));
        assert_ne!(print(&decimal), same);
    }

    /// A machine of two NUMA nodes with ids `ids`, two CPUs and a device
    /// on each; built by `Machine::with_numa_labels` when `labelled`
    /// (otherwise by `Machine::new`, on ids 0 and 1).
    fn two_nodes(ids: [usize; 2], labelled: bool) -> Machine {
        let machine = UniformMachine::new(2, 2)
            .sockets(2)
            .memory_per_numa(4 << 30)
            .remote_distance(21)
            .device("example.com/gpu", &format!("gpu{}", ids[0]), &[0])
            .device("example.com/gpu", &format!("gpu{}", ids[1]), &[1]);
        let machine = if labelled { machine.numa_ids(ids) } else { machine };
        machine.build().expect("machine")
    }

    #[test]
    fn numa_ids_are_the_machines_own() {
        let print = |machine: Machine| fingerprint(&Node::start(machine, NodeConfig::default()).unwrap());
        let plain = two_nodes([0, 1], false);
        // Ids below 64 read with labels are the same machine, byte for byte:
        // journals written before labels existed keep their fingerprint.
        let mut text = String::new();
        write_machine(&mut text, &plain);
        let mut labelled_text = String::new();
        write_machine(&mut labelled_text, &two_nodes([0, 1], true));
        assert_eq!(labelled_text, text);
        assert!(
            text.contains("numa 1 memory") && text.contains("cpu 3 core 3 socket 1 numa 1 "),
            "{text}"
        );
        // Ids {0, 64}: the engine's indices are those of {0, 1}, the
        // fingerprint is not.
        let wide = two_nodes([0, 64], true);
        assert_eq!(wide.numa_label(1), 64);
        let mut wide_text = String::new();
        write_machine(&mut wide_text, &wide);
        assert_eq!(
            wide_text,
            text.replace("numa 1 memory", "numa 64 memory")
                .replace("numa 1 uncore", "numa 64 uncore")
                .replace("\"gpu1\" numa [1]", "\"gpu64\" numa [64]")
        );
        assert_ne!(print(wide), print(plain));
    }
}

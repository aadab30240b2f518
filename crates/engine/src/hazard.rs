//! [`StartHazard`]: what the kubelet starts with on a node although its
//! answers there are dangerous — the one wording of every such warning
//! (intake, replay, `topoalign nrt`, the agent's start-up log, the
//! extender's log and `/healthz` all show [`Node::start_hazards`](crate::Node::start_hazards)).
//!
//! Owns: which configurations are hazards and their texts. Must not touch:
//! decisions (a hazard never changes a verdict; the node decides as the
//! kubelet does, crashes included, see [`KubeletPanic`](crate::KubeletPanic)).

use std::fmt;

use topoalign_model::{KubeletVersion, MAX_NUMA_NODES, Machine};

use crate::decision::PanicSite;
use crate::{MemoryPolicyName, NodeConfig, ReservationOverrun, TopologyPolicyName};

/// A configuration the kubelet starts with although its answers on it are
/// dangerous. The engine starts and decides as the kubelet does; a hazard
/// is a warning every front end shows beside those answers
/// ([`Node::start_hazards`](crate::Node::start_hazards)), never a different
/// verdict. Display is the warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartHazard {
    /// A NUMA node reserves more memory or huge pages than it has.
    #[error(transparent)]
    ReservationOverrun(#[from] ReservationOverrun),
    /// The kubelet starts but crashes at its first admission, or at the
    /// first container of a Guaranteed pod: NUMA ids past 63.
    #[error(transparent)]
    KubeletCrash(#[from] KubeletCrash),
}

/// This kubelet configuration starts on this machine and crashes (a Go
/// panic) later: the machine has NUMA ids of 64 or more, which the
/// kubelet's 64-bit NUMA masks cannot hold (`bitmask.NewBitMask` fails and
/// its callers use the nil mask). Under a topology manager policy other
/// than `none` every admission crashes it; under `none` the Static memory
/// manager's default hint for a container of a Guaranteed pod does. The
/// decision that meets it carries the [`KubeletPanic`](crate::KubeletPanic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletCrash {
    pub release: KubeletVersion,
    /// The machine's NUMA ids of 64 or more, ascending.
    pub numa_ids: Vec<usize>,
    pub at: CrashPoint,
}

/// Where a [`KubeletCrash`] happens first, with the kubelet's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Any admission under this topology manager policy (not `none`).
    FirstAdmission(TopologyPolicyName),
    /// The first container of a Guaranteed pod that reaches the memory
    /// manager (one the device or CPU manager refuses does not), under
    /// topology manager policy `none` with the Static memory manager.
    FirstGuaranteedContainer,
}

impl fmt::Display for KubeletCrash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let KubeletCrash { release, numa_ids, at } = self;
        write!(
            f,
            "NUMA node id(s) {} do not fit the kubelet's 64-bit NUMA masks (bitmask.NewBitMask: \"bit number must be \
             in range 0-63\", the error discarded): the v{release} kubelet starts with this configuration and crashes \
             (a Go panic) ",
            id_list(numa_ids)
        )?;
        match at {
            CrashPoint::FirstAdmission(policy) => write!(
                f,
                "at its first pod admission, and again at every restart while a pod is on the node: {}",
                PanicSite::TopologyManager(*policy)
            ),
            CrashPoint::FirstGuaranteedContainer => f.write_str(
                "at the first container of a Guaranteed pod that reaches the memory manager (the device and CPU \
                 managers allocate before it), and again at every restart while such a pod is on the node: with \
                 topology manager policy none the Static memory manager computes that container's default hint over \
                 masks of every NUMA node (getDefaultHint, calculateHints) and dereferences the nil one; pods that \
                 are not Guaranteed run, and memory manager policy None runs every pod",
            ),
        }
    }
}

impl std::error::Error for KubeletCrash {}

impl KubeletCrash {
    /// The crash `config`'s kubelet meets on `machine`, if any: `None`
    /// when every NUMA id is below 64, or under topology manager policy
    /// `none` without the Static memory manager (the kubelet runs every
    /// pod there).
    pub fn of(machine: &Machine, config: &NodeConfig) -> Option<KubeletCrash> {
        let numa_ids: Vec<usize> = machine
            .numa_labels()
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(|&id| id >= MAX_NUMA_NODES)
            .collect();
        if numa_ids.is_empty() {
            return None;
        }
        let at = match (config.topology_policy, config.memory_policy) {
            (TopologyPolicyName::None, MemoryPolicyName::None) => return None,
            (TopologyPolicyName::None, MemoryPolicyName::Static) => CrashPoint::FirstGuaranteedContainer,
            (policy, _) => CrashPoint::FirstAdmission(policy),
        };
        Some(KubeletCrash {
            release: config.kubelet_version,
            numa_ids,
            at,
        })
    }
}

fn id_list(ids: &[usize]) -> String {
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a panic is how a test reports failure

    use std::collections::BTreeMap;

    use topoalign_model::{Cpu, NumaNode};

    use super::*;

    /// NUMA nodes `ids`, 2 CPUs and 1Gi each.
    fn machine(ids: &[usize]) -> Machine {
        let nodes = ids
            .iter()
            .map(|&id| NumaNode {
                id,
                memory: 1 << 30,
                hugepages: BTreeMap::new(),
                distances: None,
            })
            .collect();
        let cpus = (0..2 * ids.len() as u32)
            .map(|cpu| Cpu {
                id: cpu,
                core: cpu,
                socket: 0,
                numa: ids[cpu as usize / 2],
                uncore_cache: None,
            })
            .collect();
        Machine::with_numa_labels(nodes, cpus, BTreeMap::new()).unwrap()
    }

    fn config(topology: TopologyPolicyName, memory: MemoryPolicyName) -> NodeConfig {
        NodeConfig {
            topology_policy: topology,
            memory_policy: memory,
            ..NodeConfig::default()
        }
    }

    const POLICIES: [TopologyPolicyName; 4] = [
        TopologyPolicyName::None,
        TopologyPolicyName::BestEffort,
        TopologyPolicyName::Restricted,
        TopologyPolicyName::SingleNumaNode,
    ];

    #[test]
    fn no_crash_below_64_whatever_the_configuration() {
        for ids in [&[0, 1][..], &[0, 63], &(0..64).collect::<Vec<_>>()] {
            for policy in POLICIES {
                for memory in [MemoryPolicyName::None, MemoryPolicyName::Static] {
                    assert_eq!(KubeletCrash::of(&machine(ids), &config(policy, memory)), None);
                }
            }
        }
    }

    #[test]
    fn where_the_kubelet_crashes_past_63() {
        let wide: Vec<usize> = (0..72).collect();
        for (ids, past) in [
            (&[0, 64][..], &[64][..]),
            (&[0, 1, 128, 129], &[128, 129]),
            (&wide, &wide[64..]),
        ] {
            let machine = machine(ids);
            assert_eq!(
                KubeletCrash::of(&machine, &config(TopologyPolicyName::None, MemoryPolicyName::None)),
                None,
                "{ids:?}: policy none without the Static memory manager runs every pod"
            );
            let crash =
                KubeletCrash::of(&machine, &config(TopologyPolicyName::None, MemoryPolicyName::Static)).unwrap();
            assert_eq!(crash.numa_ids, past);
            assert_eq!(crash.at, CrashPoint::FirstGuaranteedContainer);
            for policy in &POLICIES[1..] {
                for memory in [MemoryPolicyName::None, MemoryPolicyName::Static] {
                    let crash = KubeletCrash::of(&machine, &config(*policy, memory)).unwrap();
                    assert_eq!(crash.at, CrashPoint::FirstAdmission(*policy), "{ids:?}");
                    assert_eq!(crash.numa_ids, past);
                }
            }
        }
    }

    #[test]
    fn the_warning_names_ids_release_and_the_kubelets_reason() {
        let machine = machine(&[0, 1, 128, 129]);
        let text = StartHazard::from(
            KubeletCrash::of(
                &machine,
                &config(TopologyPolicyName::SingleNumaNode, MemoryPolicyName::None),
            )
            .unwrap(),
        )
        .to_string();
        assert!(
            text.starts_with("NUMA node id(s) 128, 129 do not fit the kubelet's 64-bit NUMA masks"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "the v{} kubelet starts",
                NodeConfig::default().kubelet_version
            )),
            "{text}"
        );
        assert!(
            text.contains("crashes (a Go panic) at its first pod admission"),
            "{text}"
        );
        // The topology manager's reason is the decision's own wording.
        assert!(
            text.contains(&PanicSite::TopologyManager(TopologyPolicyName::SingleNumaNode).to_string()),
            "{text}"
        );
        let text = KubeletCrash::of(&machine, &config(TopologyPolicyName::None, MemoryPolicyName::Static))
            .unwrap()
            .to_string();
        assert!(text.contains("at the first container of a Guaranteed pod"), "{text}");
        assert!(text.contains("getDefaultHint, calculateHints"), "{text}");
        assert!(text.contains("memory manager policy None runs every pod"), "{text}");
    }
}

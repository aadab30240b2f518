//! The JSON documents of the agent's API, shared by the server and the
//! client (and so by `topoalign run` and the tests).
//!
//! Owns: field names and shapes (camelCase, CPU sets in the kernel's list
//! syntax, absent rather than null where a field does not apply). Must not
//! touch: how values are computed (the ledger's and the server's).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_engine::{ContainerPlacement, MergeRecord};
use topoalign_model::{CpuSet, Machine, ResourceHints, TopologyHint};

/// One allocation, as `GET /v1/allocations` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocation {
    pub id: String,
    /// `namespace/name` of the admitted pod (`topoalign/<name>` for plain
    /// requests).
    pub name: String,
    /// The CPUs the workload runs on (list syntax on the wire, `2-3,10`):
    /// its exclusive CPUs, or the shared pool as it is now.
    pub cpus: CpuSet,
    /// Whether `cpus` are the workload's alone.
    pub exclusive: bool,
    /// NUMA nodes its memory is pinned to; `null` when not pinned (memory
    /// manager policy `None`, or not a Guaranteed pod).
    pub memory_numa: Option<Vec<usize>>,
    /// Device ids per resource.
    #[serde(default)]
    pub devices: BTreeMap<String, Vec<String>>,
    /// The process holding the allocation, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The topology policy this allocation was admitted under, when it
    /// overrode the node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How the allocation is made real: `cgroup-v2`, `cgroup-v1`,
    /// `affinity` (the launcher sets CPU affinity and memory policy) or
    /// `none`.
    pub enforcement: String,
    /// The allocation's cgroup directory, under cgroup enforcement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Per container (init containers first).
    #[serde(default)]
    pub containers: Vec<ContainerPlacement>,
}

/// The answer to `POST /v1/allocations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmitResponse {
    pub admitted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// The kubelet's reason when rejected (`TopologyAffinityError`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The kubelet's message when rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub explanation: AdmitExplanation,
}

/// How a decision was reached, for people and tools.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmitExplanation {
    pub policy: String,
    pub scope: String,
    /// One paragraph: what was decided and why, and for a rejection what
    /// was free and what would fit.
    pub summary: String,
    /// Things the requester may not expect (shared pool instead of
    /// exclusive CPUs, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default)]
    pub merges: Vec<Merge>,
    /// For a rejection: changes that would admit it, each checked by
    /// admitting it again on a copy of the node (`topoalign-explain`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<String>,
}

/// One topology-manager merge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Merge {
    /// `null` under the pod scope.
    pub container: Option<String>,
    /// Provider → resource → hints.
    pub hints: BTreeMap<String, BTreeMap<String, Hints>>,
    pub best: Hint,
    pub admitted: bool,
}

/// Machines up to this many NUMA nodes list every hint; larger ones say
/// how narrow the narrowest is.
const LIST_HINTS_UP_TO_NODES: usize = 8;

impl Merge {
    /// The document of one of the engine's merges on `machine`, every
    /// NUMA id the machine's own ([`Machine::numa_label`]).
    pub fn of(merge: &MergeRecord, machine: &Machine) -> Merge {
        let mut hints: BTreeMap<String, BTreeMap<String, Hints>> = BTreeMap::new();
        for (provider, provider_hints) in &merge.hints {
            let by_resource = provider_hints
                .by_resource
                .iter()
                .map(|(resource, h)| (resource.clone(), Hints::of(h, machine)))
                .collect();
            hints.insert(provider.as_str().to_string(), by_resource);
        }
        Merge {
            container: merge.container.clone(),
            hints,
            best: Hint::on(&merge.best, machine),
            admitted: merge.admitted,
        }
    }
}

/// A provider's hints for one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Hints {
    /// Any placement will do.
    NoPreference,
    /// No placement can satisfy the request.
    Impossible,
    /// The placements that can, in the kubelet's order.
    List { hints: Vec<Hint> },
    /// Too many to list (large machines): how many nodes the narrowest
    /// placement needs.
    Rule { narrowest: Option<u32> },
}

impl Hints {
    fn of(hints: &ResourceHints, machine: &Machine) -> Hints {
        let numa_count = machine.numa_nodes().len();
        match hints {
            ResourceHints::NoPreference => Hints::NoPreference,
            ResourceHints::Impossible => Hints::Impossible,
            ResourceHints::Hints(list) => Hints::List {
                hints: list.iter().map(|h| Hint::on(h, machine)).collect(),
            },
            ResourceHints::Rule(rule) if numa_count <= LIST_HINTS_UP_TO_NODES => Hints::List {
                hints: rule.to_list().iter().map(|h| Hint::on(h, machine)).collect(),
            },
            ResourceHints::Rule(rule) => Hints::Rule {
                narrowest: rule.narrowest_count(),
            },
        }
    }
}

/// One placement: NUMA nodes (`null`: any) and whether it is preferred.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hint {
    pub numa: Option<Vec<usize>>,
    pub preferred: bool,
}

impl Hint {
    /// `hint` on `machine`, its NUMA nodes by the machine's own ids.
    fn on(hint: &TopologyHint, machine: &Machine) -> Hint {
        Hint {
            numa: hint
                .affinity
                .map(|mask| mask.nodes().map(|n| machine.numa_label(n)).collect()),
            preferred: hint.preferred,
        }
    }
}

/// An error answer: what went wrong, in words a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /v1/topology` (the document the follower serves too).
pub use topoalign_usage::{NumaNodeUsage, Topology, Usage};

/// `GET /healthz`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub status: String,
    pub enforcement: String,
    pub allocations: usize,
    /// What start-up recovery found.
    pub recovery: Vec<String>,
}

/// `POST /v1/reconcile` and the reconcile loop: what was released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    pub id: String,
    pub name: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use topoalign_model::{Machine, NumaMask, ResourceHints, TopologyHint, UniformMachine};

    use super::{Hint, Hints};

    fn machine(ids: [usize; 2]) -> Machine {
        UniformMachine::new(2, 1)
            .numa_ids(ids)
            .build()
            .expect("a valid machine")
    }

    /// A hint's NUMA nodes are the machine's own ids: the engine's node 1
    /// is NUMA node 64 on {0, 64}.
    #[test]
    fn hints_name_numa_nodes_by_the_machines_own_ids() {
        let second = TopologyHint::new(NumaMask::single(1), true);
        let both = TopologyHint::new(NumaMask::single(0) | NumaMask::single(1), false);
        assert_eq!(Hint::on(&second, &machine([0, 1])).numa, Some(vec![1]));
        assert_eq!(Hint::on(&second, &machine([0, 64])).numa, Some(vec![64]));
        let list = ResourceHints::Hints(vec![second, both]);
        assert_eq!(
            Hints::of(&list, &machine([0, 64])),
            Hints::List {
                hints: vec![
                    Hint {
                        numa: Some(vec![64]),
                        preferred: true
                    },
                    Hint {
                        numa: Some(vec![0, 64]),
                        preferred: false
                    },
                ]
            }
        );
    }
}

//! The planner's input: nodes in their exact state with what it needs to
//! know of each pod they hold — its priority, whether it may be evicted at
//! all, the disruption budgets covering it — and the pending pods.
//!
//! [`assemble`] builds it from Pod manifests (a fleet document's or a live
//! cluster's, as JSON values): one reading of priorities, evictability and
//! budget membership for both.
//!
//! Owns: that reading. Must not touch: how nodes reached their state
//! (callers start, admit or restore them).

use std::collections::BTreeMap;

use serde_json::Value;
use topoalign_engine::Node;
use topoalign_model::Pod;

use crate::budget::BudgetSpec;

/// A pod a node holds, as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningPod {
    pub uid: String,
    /// `namespace/name`.
    pub key: String,
    pub priority: i32,
    /// Indices into [`FleetState::budgets`] of the budgets covering it.
    pub budgets: Vec<usize>,
    /// Why it is never evicted (a static pod, a DaemonSet's, unknown to
    /// the API server); `None` when it may be.
    pub not_evictable: Option<String>,
}

/// One node: its exact state, an empty node of its shape (for the
/// stranded rule), its pods and its DRA devices.
#[derive(Clone, Debug)]
pub struct FleetNode {
    pub name: String,
    pub node: Node,
    pub empty: Node,
    /// One entry per pod of [`Node::pods`], in the same order.
    pub pods: Vec<RunningPod>,
    pub dra: DraCounts,
}

/// DRA devices per NUMA node → driver → count.
pub type DraDevices = BTreeMap<usize, BTreeMap<String, u64>>;

/// A node's DRA devices as the stranded count needs them
/// (`topoalign_fleet::stranded::dra_free`'s counts; a live cluster's, none
/// in a fleet document).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DraCounts {
    /// Free now.
    pub free: DraDevices,
    /// Per pod uid: the devices claims reserved for it alone hold here
    /// (evicting it frees them).
    pub held_by: BTreeMap<String, DraDevices>,
    /// Per pending pod (`namespace/name`): the devices the scheduler's DRA
    /// allocator would give it here now (placing it takes them).
    pub wanted: BTreeMap<String, DraDevices>,
}

impl DraCounts {
    /// The devices free once the pods of uids `evicted` are gone and the
    /// pending pods `placed` (`namespace/name`) hold theirs.
    pub fn free_after<'a>(
        &self,
        evicted: impl IntoIterator<Item = &'a str>,
        placed: impl IntoIterator<Item = &'a str>,
    ) -> DraDevices {
        let mut free = self.free.clone();
        for uid in evicted {
            for (numa, drivers) in self.held_by.get(uid).into_iter().flatten() {
                for (driver, n) in drivers {
                    *free.entry(*numa).or_default().entry(driver.clone()).or_default() += n;
                }
            }
        }
        for key in placed {
            for (numa, drivers) in self.wanted.get(key).into_iter().flatten() {
                for (driver, n) in drivers {
                    if let Some(left) = free.get_mut(numa).and_then(|d| d.get_mut(driver)) {
                        *left = left.saturating_sub(*n);
                    }
                }
            }
        }
        for drivers in free.values_mut() {
            drivers.retain(|_, n| *n > 0);
        }
        free.retain(|_, drivers| !drivers.is_empty());
        free
    }
}

/// A disruption budget and the evictions it allows now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// `namespace/name`.
    pub key: String,
    pub allowed: u32,
}

/// The fleet as the planner sees it.
#[derive(Clone, Debug, Default)]
pub struct FleetState {
    pub nodes: Vec<FleetNode>,
    pub budgets: Vec<Budget>,
}

/// A pod waiting for a node.
#[derive(Clone, Debug)]
pub struct PendingPod {
    pub pod: Pod,
    pub priority: i32,
}

/// Input the planner cannot use, naming the object and field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct InputError {
    pub path: String,
    pub message: String,
}

/// A node before [`assemble`]: its name, exact state, empty shape and
/// DRA devices.
#[derive(Clone, Debug)]
pub struct NodeInput {
    pub name: String,
    pub node: Node,
    pub empty: Node,
    pub dra: DraCounts,
}

/// A Pod manifest with where it came from (for errors: `pods[3]`,
/// `pod shop/db-0`).
#[derive(Clone, Debug)]
pub struct Manifest<'a> {
    pub origin: String,
    pub value: &'a Value,
}

/// Builds the planner's input.
///
/// - `running`: manifests of the pods the nodes hold, by uid; a pod a
///   node holds without a manifest here is never evicted (nothing is
///   known of its priority or budgets);
/// - `pending`: the pending pods with their manifests;
/// - `classes`: PriorityClass name → value, for pods that name a
///   `priorityClassName` without a resolved `spec.priority`.
///
/// A pod's priority is `spec.priority`, else its class's value, else 0
/// (Kubernetes' default without a global default class). A static pod
/// (`kubernetes.io/config.mirror`) or a DaemonSet's is never evicted.
///
/// # Errors
/// [`InputError`] for an unknown priority class or a malformed field.
pub fn assemble(
    nodes: Vec<NodeInput>,
    running: &BTreeMap<String, Manifest<'_>>,
    pending: Vec<(Manifest<'_>, Pod)>,
    budgets: &[BudgetSpec],
    classes: &BTreeMap<String, i32>,
) -> Result<(FleetState, Vec<PendingPod>), InputError> {
    let mut expected = vec![0u32; budgets.len()];
    let mut healthy = vec![0u32; budgets.len()];
    let covering = |manifest: &Value| -> Vec<usize> {
        let namespace = namespace(manifest);
        let labels = labels(manifest);
        budgets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.covers(namespace, &labels))
            .map(|(i, _)| i)
            .collect()
    };
    let mut fleet_nodes = Vec::with_capacity(nodes.len());
    for input in nodes {
        let mut pods = Vec::with_capacity(input.node.pods().len());
        for pod in input.node.pods() {
            let running_pod = match running.get(&pod.uid) {
                None => RunningPod {
                    uid: pod.uid.clone(),
                    key: pod.key(),
                    priority: i32::MAX,
                    budgets: Vec::new(),
                    not_evictable: Some("no Pod object for it: its priority and budgets are unknown".into()),
                },
                Some(manifest) => {
                    let budgets = covering(manifest.value);
                    for &b in &budgets {
                        expected[b] += 1;
                        healthy[b] += 1;
                    }
                    RunningPod {
                        uid: pod.uid.clone(),
                        key: pod.key(),
                        priority: priority(manifest, classes)?,
                        budgets,
                        not_evictable: not_evictable(manifest.value),
                    }
                }
            };
            pods.push(running_pod);
        }
        fleet_nodes.push(FleetNode {
            name: input.name,
            node: input.node,
            empty: input.empty,
            pods,
            dra: input.dra,
        });
    }
    let mut pending_pods = Vec::with_capacity(pending.len());
    for (manifest, pod) in pending {
        for b in covering(manifest.value) {
            expected[b] += 1;
        }
        pending_pods.push(PendingPod {
            priority: priority(&manifest, classes)?,
            pod,
        });
    }
    let budgets = budgets
        .iter()
        .enumerate()
        .map(|(i, b)| Budget {
            key: b.key(),
            allowed: b.allowed(expected[i], healthy[i]),
        })
        .collect();
    Ok((
        FleetState {
            nodes: fleet_nodes,
            budgets,
        },
        pending_pods,
    ))
}

fn namespace(manifest: &Value) -> &str {
    manifest
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// `metadata.labels` (values that are not strings are left out).
pub fn labels(manifest: &Value) -> BTreeMap<String, String> {
    manifest
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A pod's priority (see [`assemble`]).
///
/// # Errors
/// [`InputError`] naming `spec.priority` or `spec.priorityClassName`.
pub fn priority(manifest: &Manifest<'_>, classes: &BTreeMap<String, i32>) -> Result<i32, InputError> {
    let at = |field: &str, message: String| InputError {
        path: format!("{}.spec.{field}", manifest.origin),
        message,
    };
    if let Some(value) = manifest.value.pointer("/spec/priority").filter(|v| !v.is_null()) {
        return value
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| at("priority", format!("{value} is not a 32-bit integer")));
    }
    match manifest
        .value
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
    {
        None | Some("") => Ok(0),
        Some(name) => classes.get(name).copied().ok_or_else(|| {
            at(
                "priorityClassName",
                format!("{name:?} is not in the document's priorityClasses (and spec.priority is not set)"),
            )
        }),
    }
}

/// Why a pod is never evicted, or `None`.
pub fn not_evictable(manifest: &Value) -> Option<String> {
    if manifest
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
    {
        return Some("a static pod (mirror): the API server cannot evict it".into());
    }
    let owners = manifest.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    if owners.is_some_and(|owners| {
        owners
            .iter()
            .any(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
    }) {
        return Some("a DaemonSet's pod: it would come back on the same node".into());
    }
    None
}

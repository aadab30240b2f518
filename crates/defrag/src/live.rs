//! A live cluster (feature `live`): the planner's input from a
//! [`ClusterSnapshot`] (`topoalign-cluster`) and the cluster's
//! PodDisruptionBudgets, and a plan carried out through the Eviction API.
//!
//! - [`from_snapshot`] (pure): nodes whose NodeResourceTopology object
//!   carries the exact state, are Ready, schedulable, without `NoSchedule`
//!   or `NoExecute` taints, and agree with the API server's pods; each
//!   other node is left out with the reason. Pending pods: the unscheduled
//!   ones (of one namespace, when asked).
//! - [`read_budgets`]: every `policy/v1` PodDisruptionBudget, with the
//!   disruption controller's `status.disruptionsAllowed`.
//! - [`evict`]: one `policy/v1` Eviction per planned eviction
//!   (`POST …/pods/NAME/eviction`), with the pod's uid as a precondition so
//!   that a new pod of the same name is never the one evicted; the API
//!   server refuses (429) an eviction a budget does not allow at that
//!   moment. [`wait_gone`] then waits until the evicted pods are gone.
//!
//! Owns: those API calls and that selection. Must not touch: the plan.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, PostParams};
use topoalign_cluster::{ClusterSnapshot, PodState};

pub use topoalign_cluster as cluster;

use crate::budget::BudgetSpec;
use crate::input::{FleetState, InputError, Manifest, NodeInput, PendingPod, assemble};
use crate::plan::Eviction;

/// The planner's input from a snapshot, and the nodes left out (`name:
/// why`).
///
/// # Errors
/// [`InputError`] for a pod whose priority cannot be read.
pub fn from_snapshot(
    snapshot: &ClusterSnapshot,
    budgets: &[BudgetSpec],
    namespace: Option<&str>,
) -> Result<(FleetState, Vec<PendingPod>, Vec<String>), InputError> {
    let mut left_out = Vec::new();
    let mut nodes = Vec::new();
    for node in &snapshot.nodes {
        let why = if !node.ready {
            Some("not Ready".to_owned())
        } else if node.unschedulable {
            Some("cordoned (unschedulable)".to_owned())
        } else if let Some(taint) = node
            .taints
            .iter()
            .find(|t| t.ends_with(":NoSchedule") || t.ends_with(":NoExecute"))
        {
            Some(format!("tainted {taint}"))
        } else if node.exact().is_none() || !node.stale.is_empty() {
            Some(format!("its state is {}", node.source_words()))
        } else {
            None
        };
        if let Some(why) = why {
            left_out.push(format!("{}: {why}", node.name));
            continue;
        }
        let Some(exact) = node.exact() else { continue };
        let empty = match topoalign_nrt::start_node(&exact.spec) {
            Ok(empty) => empty,
            Err(e) => {
                left_out.push(format!("{}: {e}", node.name));
                continue;
            }
        };
        nodes.push(NodeInput {
            name: node.name.clone(),
            node: exact.node.clone(),
            empty,
        });
    }
    let origins: Vec<String> = snapshot.pods.iter().map(|p| format!("pod {}", p.key())).collect();
    let mut running: BTreeMap<String, Manifest<'_>> = BTreeMap::new();
    let mut pending = Vec::new();
    for (pod, origin) in snapshot.pods.iter().zip(&origins) {
        let manifest = Manifest {
            origin: origin.clone(),
            value: &pod.manifest,
        };
        match pod.state {
            PodState::Unscheduled if namespace.is_none_or(|n| n == pod.namespace) => {
                if let Ok(model) = &pod.pod {
                    pending.push((manifest, model.clone()));
                }
            }
            PodState::Bound | PodState::Running => {
                running.insert(pod.uid.clone(), manifest);
            }
            _ => {}
        }
    }
    let (state, pending) = assemble(nodes, &running, pending, budgets, &BTreeMap::new())?;
    Ok((state, pending, left_out))
}

/// Every PodDisruptionBudget of the cluster.
///
/// # Errors
/// The API server's refusal, or a budget that cannot be read (naming it).
pub async fn read_budgets(client: &kube::Client) -> Result<Vec<BudgetSpec>, String> {
    let api: Api<PodDisruptionBudget> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing PodDisruptionBudgets: {e}"))?;
    let mut budgets = Vec::with_capacity(list.items.len());
    for object in list.items {
        let value = serde_json::to_value(&object).map_err(|e| e.to_string())?;
        let name = format!(
            "PodDisruptionBudget {}/{}",
            object.metadata.namespace.unwrap_or_default(),
            object.metadata.name.unwrap_or_default()
        );
        budgets.push(BudgetSpec::from_manifest(&value, &name)?);
    }
    Ok(budgets)
}

/// What became of one eviction.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evicted {
    pub pod: String,
    pub node: String,
    /// `evicted`, or the API server's refusal.
    pub result: String,
    pub ok: bool,
}

/// Posts one Eviction per planned eviction, in plan order, and stops at
/// the first refusal (the rest of the plan may rest on it).
pub async fn evict(client: &kube::Client, evictions: &[Eviction]) -> Vec<Evicted> {
    let mut done = Vec::with_capacity(evictions.len());
    for eviction in evictions {
        let (namespace, name) = eviction.pod.split_once('/').unwrap_or(("default", &eviction.pod));
        let api: Api<K8sPod> = Api::namespaced(client.clone(), namespace);
        let body = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": eviction.uid}},
        });
        let answer: Result<serde_json::Value, kube::Error> = api
            .create_subresource("eviction", name, &PostParams::default(), &body)
            .await;
        let (result, ok) = match answer {
            Ok(_) => ("evicted".to_owned(), true),
            Err(kube::Error::Api(status)) => {
                let why = match status.code {
                    429 => "refused: a PodDisruptionBudget does not allow it now",
                    404 => "refused: the pod is gone",
                    409 => "refused: the pod of that name is not the planned one (uid changed)",
                    _ => "refused",
                };
                (
                    format!("{why} ({} {}: {})", status.code, status.reason, status.message),
                    false,
                )
            }
            Err(e) => (format!("failed: {e}"), false),
        };
        done.push(Evicted {
            pod: eviction.pod.clone(),
            node: eviction.node.clone(),
            result,
            ok,
        });
        if !ok {
            break;
        }
    }
    done
}

/// Waits until none of `evictions`' pods (by uid) is left, polling every
/// half second, for at most `timeout`; the pods still there.
///
/// # Errors
/// The API server's refusal to read a pod.
pub async fn wait_gone(
    client: &kube::Client,
    evictions: &[Eviction],
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for eviction in evictions {
            let (namespace, name) = eviction.pod.split_once('/').unwrap_or(("default", &eviction.pod));
            let api: Api<K8sPod> = Api::namespaced(client.clone(), namespace);
            let pod = api
                .get_opt(name)
                .await
                .map_err(|e| format!("reading pod {}: {e}", eviction.pod))?;
            if pod.is_some_and(|p| p.metadata.uid.as_deref() == Some(eviction.uid.as_str())) {
                left.push(eviction.pod.clone());
            }
        }
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

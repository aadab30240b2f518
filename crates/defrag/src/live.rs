//! A live cluster (feature `live`): the planner's input from a
//! [`ClusterSnapshot`] (`topoalign-cluster`) and the cluster's
//! PodDisruptionBudgets, and a plan carried out through the Eviction API.
//!
//! - [`from_snapshot`] (pure): nodes whose NodeResourceTopology object
//!   carries the exact state, are Ready, schedulable, without `NoSchedule`
//!   or `NoExecute` taints, and agree with the API server's pods; each
//!   other node is left out with the reason. Pending pods: the unscheduled
//!   ones (of one namespace, when asked). Each node's DRA devices
//!   ([`topoalign_cluster::dra`]): the free ones, those only one pod's
//!   claims hold (freed by evicting it), and those the allocator would
//!   give each pending pod with claims there (taken by placing it), for
//!   the stranded count before and after the plan.
//! - [`read_budgets`]: every `policy/v1` PodDisruptionBudget, with the
//!   disruption controller's `status.disruptionsAllowed`.
//! - [`evict`]: one `policy/v1` Eviction per planned eviction
//!   (`POST …/pods/NAME/eviction`), with the pod's uid as a precondition so
//!   that a new pod of the same name is never the one evicted; the API
//!   server refuses (429) an eviction a budget does not allow at that
//!   moment. [`wait_gone`] then waits until the evicted pods are gone,
//!   [`wait_published`] until the freed nodes' NodeResourceTopology objects
//!   no longer hold them (both by one polling loop, `wait_until_none`), and [`nudge`] marks each pod the room was made
//!   for (annotation [`NUDGE_ANNOTATION`]): the scheduler retried those
//!   pods when the evicted pods were deleted, before the nodes' new state
//!   was published, and refused them on the old one; a change to the pod
//!   is an event that makes it try them again now, not at its periodic
//!   flush of unschedulable pods (five minutes).
//!
//! Owns: those API calls and that selection. Must not touch: the plan.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use topoalign_cluster::{ClusterSnapshot, NodeSource, PodState};

pub use topoalign_cluster as cluster;

use crate::budget::BudgetSpec;
use crate::input::{DraCounts, FleetState, InputError, Manifest, NodeInput, PendingPod, assemble};
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
        let dra = DraCounts {
            free: node.dra.free(),
            held_by: node
                .holdings
                .iter()
                .map(|h| (h.uid.clone(), node.dra.held_only_by(&h.uid)))
                .filter(|(_, held)| !held.is_empty())
                .collect(),
            wanted: snapshot
                .pods
                .iter()
                .filter(|p| p.state == PodState::Unscheduled)
                .filter_map(|p| Some((p.key(), topoalign_cluster::dra::wanted(snapshot, node, p)?)))
                .collect(),
        };
        nodes.push(NodeInput {
            name: node.name.clone(),
            node: exact.node.clone(),
            empty,
            dra,
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

/// What talking to the cluster can fail of.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("listing PodDisruptionBudgets: {0}")]
    ListBudgets(#[source] kube::Error),
    /// A budget that cannot be read: its problem, naming it and the field.
    #[error(transparent)]
    Budget(#[from] crate::budget::BudgetError),
    #[error("reading pod {pod}: {source}")]
    ReadPod {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading the cluster: {0}")]
    ReadCluster(#[source] topoalign_cluster::ReadError),
}

/// Every PodDisruptionBudget of the cluster.
///
/// # Errors
/// The API server's refusal, or a budget that cannot be read (naming it).
pub async fn read_budgets(client: &kube::Client) -> Result<Vec<BudgetSpec>, LiveError> {
    let api: Api<PodDisruptionBudget> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await.map_err(LiveError::ListBudgets)?;
    let mut budgets = Vec::with_capacity(list.items.len());
    for object in list.items {
        let name = format!(
            "PodDisruptionBudget {}/{}",
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default()
        );
        let value = serde_json::to_value(&object).map_err(|e| {
            LiveError::Budget(crate::budget::BudgetError {
                path: name.clone(),
                message: e.to_string(),
            })
        })?;
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

/// How often the waits ask again.
const WAIT_POLL: Duration = Duration::from_millis(500);

/// Asks `left` every [`WAIT_POLL`] until it answers nothing, or `timeout`
/// passes; its last answer.
async fn wait_until_none<F, Fut>(timeout: Duration, mut left: F) -> Result<Vec<String>, LiveError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>, LiveError>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = left().await?;
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
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
) -> Result<Vec<String>, LiveError> {
    wait_until_none(timeout, || pods_left(client, evictions)).await
}

/// The pods of `evictions` still there (the same uid).
async fn pods_left(client: &kube::Client, evictions: &[Eviction]) -> Result<Vec<String>, LiveError> {
    let mut left = Vec::new();
    for eviction in evictions {
        let (namespace, name) = eviction.pod.split_once('/').unwrap_or(("default", &eviction.pod));
        let api: Api<K8sPod> = Api::namespaced(client.clone(), namespace);
        let pod = api.get_opt(name).await.map_err(|source| LiveError::ReadPod {
            pod: eviction.pod.clone(),
            source,
        })?;
        if pod.is_some_and(|p| p.metadata.uid.as_deref() == Some(eviction.uid.as_str())) {
            left.push(eviction.pod.clone());
        }
    }
    Ok(left)
}

/// Waits until no freed node's published exact state holds an evicted pod
/// (by uid), reading the cluster every half second, for at most
/// `timeout`; the nodes still behind. A node without an exact state
/// (approximate, unknown, missing) cannot say, and is not waited for.
///
/// # Errors
/// The API server's refusal to be read.
pub async fn wait_published(
    client: &kube::Client,
    evictions: &[Eviction],
    timeout: Duration,
) -> Result<Vec<String>, LiveError> {
    wait_until_none(timeout, move || async move {
        let snapshot = topoalign_cluster::read(client).await.map_err(LiveError::ReadCluster)?;
        Ok(nodes_behind(&snapshot, evictions))
    })
    .await
}

/// The nodes of `evictions` whose exact published state still holds one
/// of the evicted pods.
fn nodes_behind(snapshot: &ClusterSnapshot, evictions: &[Eviction]) -> Vec<String> {
    let mut behind: Vec<String> = evictions
        .iter()
        .filter(|e| {
            snapshot.node(&e.node).is_some_and(|node| {
                matches!(node.source, NodeSource::Exact(_)) && node.holdings.iter().any(|h| h.uid == e.uid)
            })
        })
        .map(|e| e.node.clone())
        .collect();
    behind.dedup();
    behind
}

/// The annotation [`nudge`] sets on a pod the evictions made room for:
/// where and how many pods were evicted for it, and how often it was asked.
pub const NUDGE_ANNOTATION: &str = "topoalign.io/defrag";

/// What became of the pods the evictions made room for.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Nudged {
    /// Bound to a node (`namespace/name` → node).
    pub scheduled: BTreeMap<String, String>,
    /// Still without a node at the deadline, or gone, or not annotatable
    /// (`namespace/name` → why).
    pub unscheduled: BTreeMap<String, String>,
}

/// Until each pod the evictions made room for is bound to a node, or
/// `timeout` passes: annotates the unbound ones ([`NUDGE_ANNOTATION`],
/// with a count, so that every ask is a change) every `every`, so that the
/// scheduler tries them again on the state published since its last try.
pub async fn nudge(client: &kube::Client, evictions: &[Eviction], every: Duration, timeout: Duration) -> Nudged {
    let mut freed_for: BTreeMap<&str, Vec<&Eviction>> = BTreeMap::new();
    for eviction in evictions {
        freed_for.entry(eviction.for_pod.as_str()).or_default().push(eviction);
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut result = Nudged::default();
    for ask in 1u32.. {
        result.unscheduled.clear();
        for (pod, evicted) in &freed_for {
            if result.scheduled.contains_key(*pod) {
                continue;
            }
            let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
            let api: Api<K8sPod> = Api::namespaced(client.clone(), namespace);
            match api.get_opt(name).await {
                Ok(Some(p)) => {
                    if let Some(node) = p.spec.and_then(|s| s.node_name) {
                        result.scheduled.insert((*pod).to_owned(), node);
                        continue;
                    }
                }
                Ok(None) => {
                    result.unscheduled.insert((*pod).to_owned(), "gone".to_owned());
                    continue;
                }
                Err(e) => {
                    result
                        .unscheduled
                        .insert((*pod).to_owned(), format!("cannot be read: {e}"));
                    continue;
                }
            }
            let note = format!(
                "evicted {} on {} (ask {ask})",
                evicted.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>().join(", "),
                evicted[0].node
            );
            let patch = serde_json::json!({"metadata": {"annotations": {NUDGE_ANNOTATION: note}}});
            let why = match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => "not bound to a node yet".to_owned(),
                Err(e) => format!("cannot be annotated: {e}"),
            };
            result.unscheduled.insert((*pod).to_owned(), why);
        }
        if result.unscheduled.is_empty() || tokio::time::Instant::now() + every > deadline {
            break;
        }
        tokio::time::sleep(every).await;
    }
    result
}

//! The simulated kubelets against an API server: [`run`] registers every
//! node (Node object, status, the not-ready taint lifted as the node
//! lifecycle controller would once it is Ready), renews their Leases in
//! `kube-node-lease`, publishes their NodeResourceTopology objects, and
//! follows every bound pod through one watch for the whole fleet.
//!
//! Order: watch events arrive in the API server's order (resourceVersion),
//! so each node sees its pods in binding order and admits them in it, one
//! at a time, as the kubelet's pod workers hand them to admission. After a
//! (re)list, pods not yet decided on are admitted in creation order, as a
//! restarting kubelet does. Writes (pod statuses, Leases, NRT objects) go
//! out concurrently, at most `max_in_flight` at a time; a node's NRT object
//! at most once per `nrt_interval`, the latest state winning.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use topoalign_nrt_publisher::Publisher;

use crate::kubelet::{Admission, SimNode, pod_key, status_patch};

/// The field manager of the simulated kubelets' writes.
pub const FIELD_MANAGER: &str = "topoalign-simnodes";

/// How the simulated kubelets pace their writes.
#[derive(Clone, Debug)]
pub struct Options {
    /// How often each node renews its Lease (the kubelet: every 10 s of a
    /// 40 s lease).
    pub heartbeat: Duration,
    /// The Lease's duration.
    pub lease_duration: Duration,
    /// At most one NodeResourceTopology update per node per interval.
    pub nrt_interval: Duration,
    /// API requests in flight at once.
    pub max_in_flight: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            heartbeat: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            nrt_interval: Duration::from_millis(500),
            max_in_flight: 32,
        }
    }
}

/// What happened, for the caller to print.
#[derive(Debug)]
pub enum Report {
    /// Every node is registered, Ready, and its NRT object published.
    Ready { nodes: usize },
    /// A pod was admitted or refused.
    Decided {
        pod: String,
        node: String,
        admission: Admission,
    },
    /// A pod left its node (deleted or terminating).
    Released { pod: String, node: String },
    /// Whether an admitted pod's DRA devices share a NUMA node with its
    /// pinned CPUs and memory (also written as the pod's
    /// [`crate::dra::ALIGNED_CONDITION`]).
    Dra {
        pod: String,
        node: String,
        alignment: crate::dra::Alignment,
    },
    /// A write or the watch failed (the watch retries; a failed write is
    /// not repeated).
    Error(String),
}

/// Why the simulated nodes could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot register node {node}: {error}")]
    Register { node: String, error: kube::Error },
    #[error("cannot publish the NodeResourceTopology object of {node}: {error}")]
    Publish {
        node: String,
        error: topoalign_nrt_publisher::PublishError,
    },
    #[error("node names repeat: {0}")]
    Duplicate(String),
    #[error("cannot publish the ResourceSlice {slice}: {error}")]
    Slice { slice: String, error: kube::Error },
    #[error("cannot publish the DeviceClass {class}: {error}")]
    DeviceClass { class: String, error: kube::Error },
}

struct State {
    nodes: HashMap<String, SimNode>,
    /// Nodes whose NRT object changed since it was last sent.
    dirty: BTreeSet<String>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock leaves plain data behind; go on.
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An RFC 3339 time for status fields.
fn now() -> Value {
    serde_json::to_value(Time(Timestamp::now())).unwrap_or(Value::Null)
}

/// Runs the nodes until `shutdown` completes; `report` hears what
/// happens. The fleet's DeviceClasses and its nodes' ResourceSlices are
/// applied first.
///
/// # Errors
/// [`RunError`] when a node cannot be registered, a DeviceClass or
/// ResourceSlice or a node's first NRT object is refused; afterwards
/// failures are reported and the nodes go on.
pub async fn run(
    client: kube::Client,
    fleet: crate::SimFleet,
    options: Options,
    shutdown: impl Future<Output = ()>,
    report: impl Fn(Report) + Send + Sync + 'static,
) -> Result<(), RunError> {
    let report = Arc::new(report);
    let crate::SimFleet { nodes, device_classes } = fleet;
    let limit = Arc::new(Semaphore::new(options.max_in_flight.max(1)));
    let names: Vec<String> = nodes.iter().map(|n| n.name().to_owned()).collect();
    let mut by_name = HashMap::new();
    for node in nodes {
        let name = node.name().to_owned();
        if by_name.insert(name.clone(), node).is_some() {
            return Err(RunError::Duplicate(name));
        }
    }
    let publisher = Publisher::new(client.clone());
    let state: Shared = Arc::new(Mutex::new(State {
        nodes: by_name,
        dirty: BTreeSet::new(),
    }));

    register(&client, &state, &names, &limit).await?;
    publish_classes(&client, &device_classes).await?;
    publish_slices(&client, &state).await?;
    let objects: Vec<_> = lock(&state).nodes.values().map(SimNode::nrt).collect();
    let mut first = JoinSet::new();
    for object in objects {
        let (publisher, limit) = (publisher.clone(), limit.clone());
        first.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let name = object.metadata.name.clone();
            publisher
                .apply(&object)
                .await
                .map_err(|error| RunError::Publish { node: name, error })
        });
    }
    while let Some(done) = first.join_next().await {
        if let Ok(result) = done {
            result?;
        }
    }
    report(Report::Ready { nodes: names.len() });

    let mut tasks = JoinSet::new();
    tasks.spawn(heartbeats(
        client.clone(),
        names,
        options.clone(),
        limit.clone(),
        report.clone(),
    ));
    tasks.spawn(publish_changes(
        publisher,
        state.clone(),
        options.nrt_interval,
        limit.clone(),
        report.clone(),
    ));
    tasks.spawn(follow_pods(client, state, limit, report));
    shutdown.await;
    tasks.shutdown().await;
    Ok(())
}

/// Creates every Node (an existing one is taken over), reports its status
/// Ready with the engine's capacity and allocatable, and lifts the
/// not-ready taint the API server puts on a new Node.
async fn register(
    client: &kube::Client,
    state: &Shared,
    names: &[String],
    limit: &Arc<Semaphore>,
) -> Result<(), RunError> {
    let api: Api<K8sNode> = Api::all(client.clone());
    let mut tasks = JoinSet::new();
    for name in names {
        let (object, status) = {
            let state = lock(state);
            let node = &state.nodes[name];
            (node.node_object(), node.node_status(now().as_str().unwrap_or_default()))
        };
        let (api, limit, name) = (api.clone(), limit.clone(), name.clone());
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let error = |error| RunError::Register {
                node: name.clone(),
                error,
            };
            let object: K8sNode = serde_json::from_value(object).map_err(|e| error(kube::Error::SerdeError(e)))?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(error(e)),
            }
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(error)?;
            // No node lifecycle controller need run: a Ready node's
            // not-ready taint is lifted as it would lift it.
            let taints = json!({"spec": {"taints": null}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&taints))
                .await
                .map_err(error)?;
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        if let Ok(result) = done {
            result?;
        }
    }
    Ok(())
}

/// Publishes every node's ResourceSlices (server-side apply; none for
/// nodes without DRA devices).
async fn publish_slices(client: &kube::Client, state: &Shared) -> Result<(), RunError> {
    use k8s_openapi::api::resource::v1::ResourceSlice;
    let slices: Vec<ResourceSlice> = lock(state).nodes.values().flat_map(SimNode::resource_slices).collect();
    let api: Api<ResourceSlice> = Api::all(client.clone());
    for slice in slices {
        let name = slice.metadata.name.clone().unwrap_or_default();
        server_side_apply(&api, &name, &slice)
            .await
            .map_err(|error| RunError::Slice { slice: name, error })?;
    }
    Ok(())
}

/// Applies the fleet's DeviceClasses (server-side apply: a class the
/// cluster has already is taken over, with the fleet's spec).
async fn publish_classes(
    client: &kube::Client,
    classes: &[k8s_openapi::api::resource::v1::DeviceClass],
) -> Result<(), RunError> {
    let api: Api<k8s_openapi::api::resource::v1::DeviceClass> = Api::all(client.clone());
    for class in classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        server_side_apply(&api, &name, class)
            .await
            .map_err(|error| RunError::DeviceClass { class: name, error })?;
    }
    Ok(())
}

/// Server-side applies `object` as `name` (the simulated kubelets' field
/// manager, conflicts forced).
async fn server_side_apply<K>(api: &Api<K>, name: &str, object: &K) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = ()>
        + k8s_openapi::serde::Serialize
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned,
{
    let mut body = serde_json::to_value(object).map_err(kube::Error::SerdeError)?;
    // Server-side apply wants the kind and version in the body.
    body["apiVersion"] = json!(K::api_version(&()));
    body["kind"] = json!(K::kind(&()));
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
        .await?;
    Ok(())
}

/// Renews every node's Lease once per heartbeat, spread over it.
async fn heartbeats(
    client: kube::Client,
    names: Vec<String>,
    options: Options,
    limit: Arc<Semaphore>,
    report: Arc<impl Fn(Report) + Send + Sync + 'static>,
) {
    let api: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let seconds = i32::try_from(options.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let pause = options.heartbeat / u32::try_from(names.len().max(1)).unwrap_or(u32::MAX);
    let mut uids: HashMap<String, String> = HashMap::new();
    let nodes: Api<K8sNode> = Api::all(api.clone().into_client());
    loop {
        let mut round = JoinSet::new();
        for name in &names {
            if !uids.contains_key(name)
                && let Ok(node) = nodes.get(name).await
                && let Some(uid) = node.metadata.uid
            {
                uids.insert(name.clone(), uid);
            }
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some("kube-node-lease".into()),
                    // As the kubelet does: the Lease goes with its Node.
                    owner_references: uids.get(name).map(|uid| {
                        vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Node".into(),
                            name: name.clone(),
                            uid: uid.clone(),
                            ..OwnerReference::default()
                        }]
                    }),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(name.clone()),
                    lease_duration_seconds: Some(seconds),
                    renew_time: Some(MicroTime(Timestamp::now())),
                    ..LeaseSpec::default()
                }),
            };
            let (api, limit, report, name) = (api.clone(), limit.clone(), report.clone(), name.clone());
            round.spawn(async move {
                let _permit = limit.acquire_owned().await;
                let params = PatchParams::apply(FIELD_MANAGER).force();
                if let Err(e) = api.patch(&name, &params, &Patch::Apply(&lease)).await {
                    report(Report::Error(format!("renewing the Lease of {name}: {e}")));
                }
            });
            tokio::time::sleep(pause).await;
        }
        while round.join_next().await.is_some() {}
    }
}

/// Sends the NRT objects of changed nodes, at most once per `interval`
/// each: every interval, the nodes changed since the last round.
async fn publish_changes(
    publisher: Publisher,
    state: Shared,
    interval: Duration,
    limit: Arc<Semaphore>,
    report: Arc<impl Fn(Report) + Send + Sync + 'static>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let objects: Vec<_> = {
            let mut state = lock(&state);
            let dirty = std::mem::take(&mut state.dirty);
            dirty
                .iter()
                .filter_map(|name| state.nodes.get(name))
                .map(SimNode::nrt)
                .collect()
        };
        let mut round = JoinSet::new();
        for object in objects {
            let (publisher, limit, report, state) = (publisher.clone(), limit.clone(), report.clone(), state.clone());
            round.spawn(async move {
                let _permit = limit.acquire_owned().await;
                if let Err(e) = publisher.apply(&object).await {
                    report(Report::Error(format!(
                        "publishing the NodeResourceTopology object of {}: {e}",
                        object.metadata.name
                    )));
                    // Sent again with the next round's state.
                    lock(&state).dirty.insert(object.metadata.name.clone());
                }
            });
        }
        while round.join_next().await.is_some() {}
    }
}

/// Follows every pod bound to a node (one watch for the whole fleet).
async fn follow_pods(
    client: kube::Client,
    state: Shared,
    limit: Arc<Semaphore>,
    report: Arc<impl Fn(Report) + Send + Sync + 'static>,
) {
    let api: Api<K8sPod> = Api::all(client);
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut events = watcher::watcher(api.clone(), config).default_backoff().boxed();
    let mut listing: Option<Vec<K8sPod>> = None;
    let mut writes = JoinSet::new();
    while let Some(event) = events.next().await {
        // Finished writes are collected as the watch goes on.
        while writes.try_join_next().is_some() {}
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                report(Report::Error(format!("watching pods: {e}")));
                continue;
            }
        };
        let mut actions = Vec::new();
        match event {
            Event::Init => listing = Some(Vec::new()),
            Event::InitApply(pod) => listing.get_or_insert_with(Vec::new).push(pod),
            Event::InitDone => {
                let pods = listing.take().unwrap_or_default();
                actions = relist(&mut lock(&state), pods, report.as_ref());
            }
            Event::Apply(pod) => actions = apply(&mut lock(&state), &pod, report.as_ref()),
            Event::Delete(pod) => {
                release(&mut lock(&state), &pod, report.as_ref());
            }
        }
        for action in actions {
            let (api, limit, report) = (api.clone(), limit.clone(), report.clone());
            writes.spawn(async move {
                let _permit = limit.acquire_owned().await;
                match action.send(&api).await {
                    Ok(Some(told)) => report(told),
                    Ok(None) => {}
                    Err(message) => report(Report::Error(message)),
                }
            });
        }
    }
}

/// A write the kubelet makes for a pod.
enum Action {
    /// Patch `pods/<name>/status`.
    Status {
        namespace: String,
        name: String,
        patch: Value,
    },
    /// Delete a terminating pod now (its containers "stopped").
    Delete {
        namespace: String,
        name: String,
        uid: String,
    },
    /// Read an admitted pod's ResourceClaims and write whether their
    /// devices share a NUMA node with its pinned CPUs and memory.
    Dra {
        namespace: String,
        name: String,
        node: String,
        claims: Vec<(String, Option<String>)>,
        slices: Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
        pinned: BTreeSet<usize>,
    },
}

impl Action {
    async fn send(self, api: &Api<K8sPod>) -> Result<Option<Report>, String> {
        let gone = |e: &kube::Error| matches!(e, kube::Error::Api(status) if status.code == 404 || status.code == 409);
        match self {
            Action::Dra {
                namespace,
                name,
                node,
                claims,
                slices,
                pinned,
            } => {
                use k8s_openapi::api::resource::v1::ResourceClaim;
                let client = api.clone().into_client();
                let claim_api: Api<ResourceClaim> = Api::namespaced(client.clone(), &namespace);
                let mut found = Vec::with_capacity(claims.len());
                for (reference, claim) in claims {
                    let claim = match claim {
                        Some(claim) => claim_api
                            .get_opt(&claim)
                            .await
                            .map_err(|e| format!("reading ResourceClaim {namespace}/{claim}: {e}"))?,
                        None => None,
                    };
                    found.push((reference, claim));
                }
                let pod = format!("{namespace}/{name}");
                let alignment = crate::dra::alignment(&pod, &found, &slices, &pinned);
                let patch = crate::dra::condition_patch(&alignment, now().as_str().unwrap_or_default());
                let api: Api<K8sPod> = Api::namespaced(client, &namespace);
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Err(e) if !gone(&e) => Err(format!("writing the status of {namespace}/{name}: {e}")),
                    _ => Ok(Some(Report::Dra { pod, node, alignment })),
                }
            }
            Action::Status { namespace, name, patch } => {
                let api: Api<K8sPod> = Api::namespaced(api.clone().into_client(), &namespace);
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Err(e) if !gone(&e) => Err(format!("writing the status of {namespace}/{name}: {e}")),
                    _ => Ok(None),
                }
            }
            Action::Delete { namespace, name, uid } => {
                let api: Api<K8sPod> = Api::namespaced(api.clone().into_client(), &namespace);
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&name, &params).await {
                    Err(e) if !gone(&e) => Err(format!("deleting the terminating pod {namespace}/{name}: {e}")),
                    _ => Ok(None),
                }
            }
        }
    }
}

fn uid(pod: &K8sPod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn node_of(pod: &K8sPod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// A pod added or changed.
fn apply(state: &mut State, pod: &K8sPod, report: &impl Fn(Report)) -> Vec<Action> {
    let Some(node_name) = node_of(pod) else {
        return Vec::new();
    };
    let Some(node) = state.nodes.get_mut(node_name) else {
        return Vec::new();
    };
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        let uid = uid(pod);
        if node.release(&uid) {
            state.dirty.insert(node_name.to_owned());
            report(Report::Released {
                pod: pod_key(pod),
                node: node_name.to_owned(),
            });
        }
        return vec![Action::Delete { namespace, name, uid }];
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        // A finished pod holds nothing (the kubelet frees it too).
        if node.release(&uid(pod)) {
            state.dirty.insert(node_name.to_owned());
        }
        return Vec::new();
    }
    let admission = match node.admit(pod) {
        None => return Vec::new(),
        Some(Ok(admission)) => admission,
        Some(Err(unreadable)) => {
            report(Report::Error(unreadable.to_string()));
            return Vec::new();
        }
    };
    if matches!(admission, Admission::Admitted(_)) {
        state.dirty.insert(node_name.to_owned());
    }
    let patch = status_patch(
        pod,
        &admission,
        node.node().machine(),
        now().as_str().unwrap_or_default(),
    );
    let claims = crate::dra::claim_names(pod);
    let dra = match &admission {
        Admission::Admitted(containers) if !claims.is_empty() => Some(Action::Dra {
            namespace: namespace.clone(),
            name: name.clone(),
            node: node_name.to_owned(),
            claims,
            slices: node.resource_slices(),
            pinned: node.pinned_numa_nodes(containers),
        }),
        _ => None,
    };
    report(Report::Decided {
        pod: pod_key(pod),
        node: node_name.to_owned(),
        admission,
    });
    let mut actions = vec![Action::Status { namespace, name, patch }];
    actions.extend(dra);
    actions
}

/// A pod gone from the API server.
fn release(state: &mut State, pod: &K8sPod, report: &impl Fn(Report)) {
    let Some(node_name) = node_of(pod) else { return };
    if let Some(node) = state.nodes.get_mut(node_name)
        && node.release(&uid(pod))
    {
        state.dirty.insert(node_name.to_owned());
        report(Report::Released {
            pod: pod_key(pod),
            node: node_name.to_owned(),
        });
    }
}

/// A complete listing (at start, or after the watch lost its place):
/// pods held but no longer listed are released; the others are handled
/// in creation order, as a restarting kubelet admits them.
fn relist(state: &mut State, mut pods: Vec<K8sPod>, report: &impl Fn(Report)) -> Vec<Action> {
    let listed: HashSet<String> = pods.iter().map(uid).collect();
    let names: Vec<String> = state.nodes.keys().cloned().collect();
    for name in names {
        let Some(node) = state.nodes.get_mut(&name) else {
            continue;
        };
        let gone: Vec<String> = node
            .node()
            .pods()
            .iter()
            .filter(|p| !listed.contains(&p.uid))
            .map(|p| p.uid.clone())
            .collect();
        for uid in gone {
            node.release(&uid);
            state.dirty.insert(name.clone());
        }
    }
    pods.sort_by(|a, b| {
        let key = |p: &K8sPod| (p.metadata.creation_timestamp.clone().map(|t| t.0), pod_key(p));
        key(a).cmp(&key(b))
    });
    pods.iter().flat_map(|pod| apply(state, pod, report)).collect()
}

//! Gathering one [`Observation`]: the checkpoint files under the kubelet's
//! root directory, the PodResources API on its socket, and the node's pods
//! (a [`PodSource`]: the API server through a watcher, or a file).
//!
//! The checkpoint files (and a pods file) are read before and after the
//! other sources; if any changed meanwhile the observation is refused as
//! `changing` (the kubelet was writing: the change's own notification
//! brings the next gather), naming the files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod as ApiPod;
use kube::runtime::{WatchStreamExt, watcher};
use topoalign_k8s::checkpoint::{CPU_MANAGER_STATE, DEVICE_CHECKPOINT, MEMORY_MANAGER_STATE};
use topoalign_podresources::Client;

use crate::check::{Observation, Unknown};

/// Where the node's pods come from.
#[derive(Clone)]
pub enum PodSource {
    /// A `v1 List` (or multi-document YAML/JSON) of Pods, re-read at each
    /// gather: for tests and for nodes without API access. Every pod in it
    /// is on this node.
    File(PathBuf),
    /// The API server, through [`watch_pods`].
    Api(PodStore),
}

/// The pods a watcher keeps; `None` until its first listing is complete.
#[derive(Clone, Default)]
pub struct PodStore(Arc<Mutex<Option<Vec<ApiPod>>>>);

impl PodStore {
    fn get(&self) -> Result<Vec<ApiPod>, Unknown> {
        let pods = self
            .0
            .lock()
            .map_err(|_| Unknown::new("pods", "the pod watcher failed"))?;
        pods.clone()
            .ok_or_else(|| Unknown::new("pods", "the node's pods are not listed from the API server yet"))
    }
}

/// Reads one checkpoint file; absent is `None`.
fn read(root: &Path, name: &str) -> Result<Option<Vec<u8>>, Unknown> {
    let path = root.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Unknown::new(
            "checkpoint",
            format!("{}: cannot be read: {e}", path.display()),
        )),
    }
}

type Files = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);

fn read_checkpoints(root: &Path) -> Result<Files, Unknown> {
    Ok((
        read(root, CPU_MANAGER_STATE)?,
        read(root, MEMORY_MANAGER_STATE)?,
        read(root, DEVICE_CHECKPOINT)?,
    ))
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, Unknown> {
    std::fs::read(path).map_err(|e| Unknown::new("pods", format!("{}: cannot be read: {e}", path.display())))
}

/// A `v1 List` of Pods as JSON, read straight into the pods.
#[derive(serde::Deserialize)]
struct JsonList {
    kind: String,
    items: Vec<ApiPod>,
}

fn parse_pods_file(path: &Path, bytes: &[u8]) -> Result<Vec<ApiPod>, Unknown> {
    // The common case, a JSON List (what `kubectl get pods -o json` and
    // the kubelet stand-in write), without a detour through YAML and
    // generic values; anything else takes the general path below.
    if bytes.trim_ascii_start().starts_with(b"{")
        && let Ok(list) = serde_json::from_slice::<JsonList>(bytes)
        && matches!(list.kind.as_str(), "List" | "PodList")
    {
        return Ok(list.items);
    }
    let text =
        std::str::from_utf8(bytes).map_err(|e| Unknown::new("pods", format!("{}: not UTF-8: {e}", path.display())))?;
    let mut pods = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(document)
            .map_err(|e| Unknown::new("pods", format!("{}: {e}", path.display())))?;
        let items = match value.get("kind").and_then(|k| k.as_str()) {
            Some("List" | "PodList") => value.get("items").cloned().unwrap_or_default(),
            Some("Pod") => serde_json::Value::Array(vec![value]),
            _ if value.is_null() => continue,
            other => {
                return Err(Unknown::new(
                    "pods",
                    format!("{}: kind {other:?} is neither a Pod nor a List", path.display()),
                ));
            }
        };
        let items: Vec<ApiPod> =
            serde_json::from_value(items).map_err(|e| Unknown::new("pods", format!("{}: {e}", path.display())))?;
        pods.extend(items);
    }
    Ok(pods)
}

/// Gathers one observation (over a connection of its own: a follower
/// gathering again and again keeps one, [`Sources::gather`]).
///
/// # Errors
/// [`Unknown`] when a source cannot be read or the checkpoints changed
/// while reading.
pub async fn gather(root: &Path, socket: &Path, pods: &PodSource) -> Result<Observation, Unknown> {
    gather_with(&mut None, root, socket, pods).await
}

/// A kubelet's sources, gathered again and again with the PodResources
/// connection kept open between gathers.
pub struct Sources {
    root: PathBuf,
    socket: PathBuf,
    pods: PodSource,
    client: Option<Client>,
}

impl Sources {
    pub fn new(root: PathBuf, socket: PathBuf, pods: PodSource) -> Sources {
        Sources {
            root,
            socket,
            pods,
            client: None,
        }
    }

    /// [`gather`], on the connection kept from the last gather when there
    /// is one.
    ///
    /// # Errors
    /// As [`gather`].
    pub async fn gather(&mut self) -> Result<Observation, Unknown> {
        gather_with(&mut self.client, &self.root, &self.socket, &self.pods).await
    }
}

/// `List` and `GetAllocatableResources` on `client`, connecting first when
/// there is none; a connection that fails is dropped.
async fn ask(
    client: &mut Option<Client>,
    socket: &Path,
) -> Result<
    (
        Vec<topoalign_podresources::PodAllocation>,
        topoalign_podresources::Allocatable,
    ),
    Unknown,
> {
    let error = |e: topoalign_podresources::PodResourcesError| Unknown::new("pod-resources", e.to_string());
    let mut connected = match client.take() {
        Some(kept) => kept,
        None => Client::connect(socket).await.map_err(error)?,
    };
    let pod_resources = connected.list().await.map_err(error)?;
    let allocatable = connected.allocatable().await.map_err(error)?;
    *client = Some(connected);
    Ok((pod_resources, allocatable))
}

/// [`gather`] with the PodResources connection in `client` (kept there
/// for the next gather; a kept one that fails is replaced by a new one,
/// once: the kubelet may have restarted since).
async fn gather_with(
    client: &mut Option<Client>,
    root: &Path,
    socket: &Path,
    pods: &PodSource,
) -> Result<Observation, Unknown> {
    let before = read_checkpoints(root)?;
    let (pods, pods_file_before) = match pods {
        PodSource::File(path) => {
            let bytes = read_bytes(path)?;
            (parse_pods_file(path, &bytes)?, Some((path, bytes)))
        }
        PodSource::Api(store) => (store.get()?, None),
    };
    let kept = client.is_some();
    let (pod_resources, allocatable) = match ask(client, socket).await {
        Err(_) if kept => ask(client, socket).await?,
        answer => answer?,
    };
    let after = read_checkpoints(root)?;
    // A change caught half-way (the kubelet writes one file after the
    // other): not a disagreement, a moment; its own notification brings
    // the next gather. Named apart (`changing`) so the metric and the log
    // tell it from sources that really disagree.
    let mut changed: Vec<&str> = [
        (CPU_MANAGER_STATE, before.0 != after.0),
        (MEMORY_MANAGER_STATE, before.1 != after.1),
        (DEVICE_CHECKPOINT, before.2 != after.2),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect();
    let pods_file_name;
    if let Some((path, bytes)) = &pods_file_before
        && read_bytes(path)? != *bytes
    {
        pods_file_name = path.display().to_string();
        changed.push(&pods_file_name);
    }
    if !changed.is_empty() {
        return Err(Unknown::new(
            "changing",
            format!(
                "the kubelet's state changed while it was read ({} rewritten meanwhile)",
                changed.join(", ")
            ),
        ));
    }
    let (cpu_state, memory_state, device_state) = after;
    Ok(Observation {
        cpu_state,
        memory_state,
        device_state,
        pods,
        pod_resources,
        allocatable: Some(allocatable),
    })
}

/// Keeps `store` equal to the pods the API server has bound to
/// `node_name` (a kube-rs watcher with a `spec.nodeName` field selector),
/// calling `changed` after each update, until the client fails for good.
pub async fn watch_pods(client: kube::Client, node_name: String, store: PodStore, changed: impl Fn()) {
    let api: kube::Api<ApiPod> = kube::Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let mut pending: Vec<ApiPod> = Vec::new();
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "pod watcher: will retry");
                if let Ok(mut pods) = store.0.lock() {
                    *pods = None;
                }
                changed();
                continue;
            }
        };
        let Ok(mut pods) = store.0.lock() else { return };
        match event {
            watcher::Event::Init => pending.clear(),
            watcher::Event::InitApply(pod) => pending.push(pod),
            watcher::Event::InitDone => *pods = Some(std::mem::take(&mut pending)),
            watcher::Event::Apply(pod) => {
                let list = pods.get_or_insert_with(Vec::new);
                list.retain(|p| p.metadata.uid != pod.metadata.uid);
                list.push(pod);
            }
            watcher::Event::Delete(pod) => {
                if let Some(list) = pods.as_mut() {
                    list.retain(|p| p.metadata.uid != pod.metadata.uid);
                }
            }
        }
        drop(pods);
        changed();
    }
}

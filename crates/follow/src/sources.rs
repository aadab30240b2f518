//! Gathering one [`Observation`]: the checkpoint files under the kubelet's
//! root directory, the PodResources API on its socket, and the node's pods
//! (a [`PodSource`]: the API server through a watcher, or a file).
//!
//! The checkpoint files (and a pods file) are read before and after the
//! other sources; if any changed meanwhile the observation is refused as
//! `changing` (the kubelet was writing: the change's own notification
//! brings the next gather), naming the files.
//!
//! [`Sources`] keeps what it parsed of a pods file: each pod's text and
//! the pod it parsed to. The file is read whole at every gather; a pod
//! whose text is byte for byte the text parsed before is that pod again,
//! every other one is parsed (and the whole file checked as JSON) anew.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod as ApiPod;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::value::RawValue;
use topoalign_k8s::checkpoint::{CPU_MANAGER_STATE, DEVICE_CHECKPOINT, MEMORY_MANAGER_STATE};
use topoalign_observe::{CheckpointFile, FileContent, KubeletDir};
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
/// Each pod is shared with the observations that hold it: a pod the
/// watcher did not replace is the same allocation at the next gather.
#[derive(Clone, Default)]
pub struct PodStore(Arc<Mutex<Option<Vec<Arc<ApiPod>>>>>);

impl PodStore {
    fn get(&self) -> Result<Vec<Arc<ApiPod>>, Unknown> {
        let pods = self
            .0
            .lock()
            .map_err(|_| Unknown::new("pods", "the pod watcher failed"))?;
        pods.clone()
            .ok_or_else(|| Unknown::new("pods", "the node's pods are not listed from the API server yet"))
    }
}

type Files = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);

/// The checkpoint files, read by `KubeletDir` (without blocking: a FIFO
/// or device where a file should be is an error naming it); absent is
/// `None`.
fn read_checkpoints(kubelet: &KubeletDir) -> Result<Files, Unknown> {
    let files = kubelet.read_checkpoints();
    let take = |file: CheckpointFile| match file.content {
        FileContent::Bytes(bytes) => Ok(Some(bytes)),
        FileContent::Absent => Ok(None),
        FileContent::Unreadable(error) => Err(Unknown::new(
            "checkpoint",
            format!("{}: cannot be read: {error}", file.path),
        )),
    };
    Ok((take(files.cpu)?, take(files.memory)?, take(files.devices)?))
}

/// The largest pods file read: some 50,000 pods.
const MAX_PODS_FILE_BYTES: u64 = 1 << 30;

/// The pods file's bytes: a regular file (opened without blocking, so a
/// FIFO named by `--pods-file` is an error, not a follower stuck reading).
fn read_bytes(path: &Path) -> Result<Vec<u8>, Unknown> {
    topoalign_files::read_regular(path, MAX_PODS_FILE_BYTES, topoalign_files::Links::Follow)
        .map_err(|e| Unknown::new("pods", format!("{}: cannot be read: {e}", path.display())))
}

/// A `v1 List` of Pods as JSON, read straight into the pods.
#[derive(serde::Deserialize)]
struct JsonList {
    kind: String,
    items: Vec<ApiPod>,
}

/// A `v1 List`'s kind and its items' texts, each checked as JSON (the
/// whole document is) but not read.
#[derive(serde::Deserialize)]
struct JsonListShape<'a> {
    kind: String,
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
}

/// What the last gather parsed of a pods file: each pod's text (an item
/// of the JSON List) and the pod it is.
#[derive(Default)]
struct PodsFileMemo {
    items: foldhash::HashMap<Box<[u8]>, Arc<ApiPod>>,
}

impl PodsFileMemo {
    /// [`parse_pods_file`], taking the pods whose text was parsed last time
    /// from the memo: only a JSON List the whole of which is JSON, whose
    /// every item is parsed or known; anything else takes
    /// [`parse_pods_file`] whole (the memo then keeps what it held, and
    /// the items parsed before the one that failed).
    fn parse(&mut self, path: &Path, bytes: &[u8]) -> Result<Vec<Arc<ApiPod>>, Unknown> {
        let mut last = std::mem::take(&mut self.items);
        if let Some(texts) = json_list_items(bytes) {
            let mut pods = Vec::with_capacity(texts.len());
            for text in texts {
                let pod = match last.remove_entry(text.as_bytes()) {
                    Some((text, pod)) => {
                        self.items.insert(text, Arc::clone(&pod));
                        pod
                    }
                    None => match serde_json::from_str::<ApiPod>(text) {
                        Ok(pod) => {
                            let pod = Arc::new(pod);
                            self.items.insert(text.as_bytes().into(), Arc::clone(&pod));
                            pod
                        }
                        Err(_) => {
                            // Kept for the next gather: each text is still
                            // the pod it parsed to.
                            self.items.extend(last);
                            return parse_pods_file(path, bytes);
                        }
                    },
                };
                pods.push(pod);
            }
            return Ok(pods);
        }
        self.items = last;
        parse_pods_file(path, bytes)
    }
}

/// The texts of the items of `bytes` when it is a JSON `List` (or
/// `PodList`) object, checked as JSON whole; `None` otherwise.
fn json_list_items(bytes: &[u8]) -> Option<Vec<&str>> {
    if !bytes.trim_ascii_start().starts_with(b"{") {
        return None;
    }
    let shape = serde_json::from_slice::<JsonListShape<'_>>(bytes).ok()?;
    if !matches!(shape.kind.as_str(), "List" | "PodList") {
        return None;
    }
    Some(shape.items.into_iter().map(RawValue::get).collect())
}

fn parse_pods_file(path: &Path, bytes: &[u8]) -> Result<Vec<Arc<ApiPod>>, Unknown> {
    // The common case, a JSON List (what `kubectl get pods -o json` and
    // the kubelet stand-in write), without a detour through YAML and
    // generic values; anything else takes the general path below.
    if bytes.trim_ascii_start().starts_with(b"{")
        && let Ok(list) = serde_json::from_slice::<JsonList>(bytes)
        && matches!(list.kind.as_str(), "List" | "PodList")
    {
        return Ok(list.items.into_iter().map(Arc::new).collect());
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
        pods.extend(items.into_iter().map(Arc::new));
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
    let kubelet = KubeletDir::new(root.to_path_buf(), Some(socket.to_path_buf()));
    gather_with(&mut None, &mut PodsFileMemo::default(), &kubelet, pods).await
}

/// A kubelet's sources, gathered again and again with the PodResources
/// connection kept open between gathers (and a pods file's pods kept by
/// their text, see the module docs).
pub struct Sources {
    kubelet: KubeletDir,
    pods: PodSource,
    client: Option<Client>,
    pods_file: PodsFileMemo,
}

impl Sources {
    pub fn new(root: PathBuf, socket: PathBuf, pods: PodSource) -> Sources {
        Sources {
            kubelet: KubeletDir::new(root, Some(socket)),
            pods,
            client: None,
            pods_file: PodsFileMemo::default(),
        }
    }

    /// [`gather`], on the connection kept from the last gather when there
    /// is one.
    ///
    /// # Errors
    /// As [`gather`].
    pub async fn gather(&mut self) -> Result<Observation, Unknown> {
        gather_with(&mut self.client, &mut self.pods_file, &self.kubelet, &self.pods).await
    }
}

/// How long the kubelet has to answer `List` and `GetAllocatableResources`
/// (a connection dropped on the way is not waited for forever).
const POD_RESOURCES_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// `List` and `GetAllocatableResources` on `client`, connecting first when
/// there is none; a connection that fails is dropped.
async fn ask(
    client: &mut Option<Client>,
    kubelet: &KubeletDir,
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
        None => {
            // What is there must be a socket (a FIFO or a file named by
            // mistake is said so, not left to the connection's error).
            kubelet
                .socket_present()
                .map_err(|e| Unknown::new("pod-resources", e.to_string()))?;
            Client::connect(kubelet.socket()).await.map_err(error)?
        }
    };
    let asked = async {
        let pod_resources = connected.list().await?;
        Ok((pod_resources, connected.allocatable().await?))
    };
    let (pod_resources, allocatable) = tokio::time::timeout(POD_RESOURCES_DEADLINE, asked)
        .await
        .map_err(|_| {
            Unknown::new(
                "pod-resources",
                format!(
                    "{}: the kubelet did not answer List and GetAllocatableResources within {POD_RESOURCES_DEADLINE:?}",
                    kubelet.socket().display()
                ),
            )
        })?
        .map_err(error)?;
    *client = Some(connected);
    Ok((pod_resources, allocatable))
}

/// [`gather`] with the PodResources connection in `client` (kept there
/// for the next gather; a kept one that fails is replaced by a new one,
/// once: the kubelet may have restarted since).
async fn gather_with(
    client: &mut Option<Client>,
    pods_file: &mut PodsFileMemo,
    kubelet: &KubeletDir,
    pods: &PodSource,
) -> Result<Observation, Unknown> {
    let before = read_checkpoints(kubelet)?;
    let (pods, pods_file_before) = match pods {
        PodSource::File(path) => {
            let bytes = read_bytes(path)?;
            (pods_file.parse(path, &bytes)?, Some((path, bytes)))
        }
        PodSource::Api(store) => (store.get()?, None),
    };
    let kept = client.is_some();
    let (pod_resources, allocatable) = match ask(client, kubelet).await {
        Err(_) if kept => ask(client, kubelet).await?,
        answer => answer?,
    };
    let after = read_checkpoints(kubelet)?;
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
    let mut pending: Vec<Arc<ApiPod>> = Vec::new();
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
            watcher::Event::InitApply(pod) => pending.push(Arc::new(pod)),
            watcher::Event::InitDone => *pods = Some(std::mem::take(&mut pending)),
            watcher::Event::Apply(pod) => {
                let list = pods.get_or_insert_with(Vec::new);
                list.retain(|p| p.metadata.uid != pod.metadata.uid);
                list.push(Arc::new(pod));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a panic is how a test reports failure

    use super::json_list_items;

    fn items(text: &str) -> Option<Vec<&str>> {
        json_list_items(text.as_bytes())
    }

    #[test]
    fn items_are_found_whatever_their_neighbours_hold() {
        let text = r#" { "apiVersion" : "v1", "metadata": {"items": [1, 2]}, "odd": "\"items\": [3]",
            "items" : [ {"a": "]}\\\"[{", "b": [1, {"c": null}]} , 7 ,"s", [ ] , true ], "kind": "List" } "#;
        assert_eq!(
            items(text).unwrap(),
            [
                r#"{"a": "]}\\\"[{", "b": [1, {"c": null}]}"#,
                "7",
                r#""s""#,
                "[ ]",
                "true"
            ]
        );
        assert_eq!(items(r#"{"kind": "List", "items": []}"#).unwrap(), Vec::<&str>::new());
        assert_eq!(items(r#"{"kind": "List"}"#), None);
        assert_eq!(items(r#"{"kind": "List", "items": {"a": 1}}"#), None);
        assert_eq!(items("[]"), None);
    }

    #[test]
    fn only_a_json_list_has_items_taken_apart() {
        assert!(json_list_items(br#"{"kind": "List", "items": [{}]}"#).is_some());
        assert!(json_list_items(br#"{"kind": "PodList", "items": []}"#).is_some());
        // Another kind, a document that is not JSON whole, YAML.
        assert!(json_list_items(br#"{"kind": "Pod", "items": []}"#).is_none());
        assert!(json_list_items(br#"{"kind": "List", "items": [{}]"#).is_none());
        assert!(json_list_items(br#"{"kind": "List", "items": [{}], "items": []}"#).is_none());
        assert!(json_list_items(b"kind: List\nitems: []\n").is_none());
    }
}

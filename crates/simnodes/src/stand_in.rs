//! A kubelet stand-in: the observable side of one kubelet, for testing
//! what follows a kubelet where no kubelet can run. [`StandIn`] admits and
//! deletes pods through the engine and, after every change, shows the
//! node's state the ways a kubelet does:
//!
//! - the checkpoint files under its root directory (`cpu_manager_state`,
//!   `memory_manager_state`, `device-plugins/kubelet_internal_checkpoint`),
//!   in a release's [`Layout`], written as the kubelet's file store writes
//!   them: a temporary file beside the target, synced, then renamed; a file
//!   whose content did not change is not rewritten;
//! - the PodResources API v1 ([`StandIn::answers`], served on a Unix
//!   socket by [`run`]);
//! - the pods file: what the API server holds for the node (a v1 List of
//!   the admitted pods, in admission order), written the same way.
//!
//! The pods file is the commit point. An add writes the checkpoints, then
//! the pods file; a delete writes the pods file, then the checkpoints. A
//! stand-in killed at any point restarts as a kubelet does: the pods file
//! lists the pods, the checkpoints are restored through `Node::restore`
//! and whatever they hold for a pod not listed is released (the managers'
//! stale-state removal) — so an add caught mid-write is undone and a
//! delete caught mid-write completes — and the files are written again.
//!
//! Owns: the order of writes and the restart. Must not touch: decisions
//! (every admission is `engine::Node::admit`'s), the file formats
//! (`topoalign_k8s::checkpoint`), the protocol (`topoalign_podresources`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use serde_json::{Value, json};
use topoalign_engine::{CpuPolicyName, MemoryPolicyName, Node, NodeSnapshot};
use topoalign_k8s::checkpoint::{
    CPU_MANAGER_STATE, CpuCheckpoint, DEVICE_CHECKPOINT, DeviceCheckpoint, MEMORY_MANAGER_STATE, MemoryCheckpoint,
};
use topoalign_nrt::StateRecord;
pub use topoalign_podresources::pod_allocations;
use topoalign_podresources::{Snapshot, allocatable_of};

use crate::kubelet::pod_key;

/// Which release's checkpoint layouts the stand-in writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// v1.32–v1.35 (and v1.36 by default): CPU v2, memory v1.
    V1_32,
    /// v1.36 with `PodLevelResourceManagers`: CPU v3, memory v2.
    V1_36PodLevel,
    /// v1.37: CPU v4, memory v3 (`data` and `dataChecksum`).
    V1_37,
}

impl Layout {
    /// `1.32`, `1.36-pod-level` or `1.37` (the names of
    /// `testdata/kubelet-state/layouts`).
    pub fn parse(text: &str) -> Option<Layout> {
        match text.trim_start_matches('v') {
            "1.32" => Some(Layout::V1_32),
            "1.36-pod-level" => Some(Layout::V1_36PodLevel),
            "1.37" => Some(Layout::V1_37),
            _ => None,
        }
    }

    fn versions(self) -> (u8, u8) {
        match self {
            Layout::V1_32 => (2, 1),
            Layout::V1_36PodLevel => (3, 2),
            Layout::V1_37 => (4, 3),
        }
    }
}

/// Where the stand-in shows its state.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The kubelet's root directory (the checkpoint files).
    pub root_dir: PathBuf,
    /// The pods file (the API server's view of the node's pods).
    pub pods_file: PathBuf,
}

/// Why the stand-in cannot go on; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// The files left by a previous run cannot be restored (the kubelet's
    /// own refusal to start).
    #[error("{path}: cannot restore the state left there: {message}")]
    Restore { path: String, message: String },
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> StandInError {
    StandInError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// What one change did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Admitted {
        pod: String,
    },
    Rejected {
        pod: String,
        reason: String,
        message: String,
    },
    Deleted {
        pod: String,
    },
    /// A delete of a pod the stand-in does not hold.
    NotFound {
        uid: String,
    },
}

/// A test hook: the stand-in dies (`abort`, as abrupt as `kill -9`) in
/// the middle of its `n`-th file write, the temporary file half written.
#[derive(Clone, Copy, Debug, Default)]
pub struct DieAtWrite(pub Option<u64>);

/// One kubelet's observable state.
pub struct StandIn {
    base: Node,
    node: Node,
    /// The admitted pods as the API server has them, in admission order.
    pods: Vec<K8sPod>,
    layout: Layout,
    paths: Paths,
    answers: Arc<Mutex<Snapshot>>,
    /// The bytes last written per file.
    written: BTreeMap<PathBuf, Vec<u8>>,
    writes: u64,
    die: DieAtWrite,
    generation: u64,
}

impl StandIn {
    /// Starts on `base` (the started, empty node); when the root directory
    /// holds a `cpu_manager_state`, restarts from the files there first.
    /// Then writes every file.
    ///
    /// # Errors
    /// [`StandInError`] naming the file that cannot be read, written or
    /// restored.
    pub fn start(base: Node, layout: Layout, paths: Paths, die: DieAtWrite) -> Result<(StandIn, bool), StandInError> {
        let mut stand_in = StandIn {
            node: base.clone(),
            base,
            pods: Vec::new(),
            layout,
            paths,
            answers: Arc::default(),
            written: BTreeMap::new(),
            writes: 0,
            die,
            generation: 0,
        };
        let restored = stand_in.paths.root_dir.join(CPU_MANAGER_STATE).exists();
        if restored {
            stand_in.restore()?;
        }
        let device_dir = stand_in.paths.root_dir.join("device-plugins");
        std::fs::create_dir_all(&device_dir).map_err(|e| file_error(&device_dir, e))?;
        stand_in.write_checkpoints()?;
        stand_in.write_pods()?;
        stand_in.publish_answers();
        Ok((stand_in, restored))
    }

    /// What the PodResources API answers, kept current.
    pub fn answers(&self) -> Arc<Mutex<Snapshot>> {
        self.answers.clone()
    }

    /// The node as the kubelet holds it.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The number of changes made since the start.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Admits `pod` (bound to this node) and, if admitted, writes the
    /// checkpoints, then the pods file.
    ///
    /// # Errors
    /// A file that cannot be written; a pod that cannot be read is
    /// rejected, as the kubelet rejects it.
    pub fn add(&mut self, mut pod: K8sPod) -> Result<Change, StandInError> {
        let key = pod_key(&pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.generation += 1;
        if uid.is_empty()
            || self
                .pods
                .iter()
                .any(|p| p.metadata.uid.as_deref() == Some(uid.as_str()))
        {
            return Ok(Change::Rejected {
                pod: key,
                reason: "UnexpectedAdmissionError".to_owned(),
                message: "metadata.uid is missing or already admitted".to_owned(),
            });
        }
        let converted = match topoalign_k8s::pod_from_k8s(&pod, &uid) {
            Ok(converted) => converted,
            Err(error) => {
                return Ok(Change::Rejected {
                    pod: key,
                    reason: "UnexpectedAdmissionError".to_owned(),
                    message: error.message(),
                });
            }
        };
        let decision = self.node.admit(converted);
        if let Some(rejection) = decision.rejection {
            return Ok(Change::Rejected {
                pod: key,
                reason: rejection.reason,
                message: rejection.message,
            });
        }
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase = Some("Running".to_owned());
        pod.spec.get_or_insert_with(Default::default);
        self.pods.push(pod);
        self.write_checkpoints()?;
        self.publish_answers();
        self.write_pods()?;
        Ok(Change::Admitted { pod: key })
    }

    /// Deletes the pod with `uid`: the pods file first, then the state.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn delete(&mut self, uid: &str) -> Result<Change, StandInError> {
        self.generation += 1;
        let Some(index) = self.pods.iter().position(|p| p.metadata.uid.as_deref() == Some(uid)) else {
            return Ok(Change::NotFound { uid: uid.to_owned() });
        };
        let pod = self.pods.remove(index);
        self.write_pods()?;
        self.node.remove(uid);
        self.publish_answers();
        self.write_checkpoints()?;
        Ok(Change::Deleted { pod: pod_key(&pod) })
    }

    /// The node's state as the NRT exact-state attribute carries it.
    pub fn state(&self) -> StateRecord<'_> {
        StateRecord::of(&self.node)
    }

    fn restore(&mut self) -> Result<(), StandInError> {
        let root = &self.paths.root_dir;
        let restore_error = |path: &Path, message: String| StandInError::Restore {
            path: path.display().to_string(),
            message,
        };
        let pods_path = &self.paths.pods_file;
        let pods: Vec<K8sPod> = match std::fs::read(pods_path) {
            Ok(bytes) => {
                let list: Value = serde_json::from_slice(&bytes).map_err(|e| file_error(pods_path, e))?;
                serde_json::from_value(list.get("items").cloned().unwrap_or(Value::Array(Vec::new())))
                    .map_err(|e| file_error(pods_path, format!("items: {e}")))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(file_error(pods_path, e)),
        };
        let mut converted = Vec::new();
        for pod in &pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            converted.push(
                topoalign_k8s::pod_from_k8s(pod, &uid)
                    .map_err(|e| file_error(pods_path, format!("pod {}: {}", pod_key(pod), e.message())))?,
            );
        }
        let read = |name: &str| -> Result<Option<Vec<u8>>, StandInError> {
            let path = root.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(file_error(&path, e)),
            }
        };
        let config = self.base.config();
        let cpu_path = root.join(CPU_MANAGER_STATE);
        let cpu = match read(CPU_MANAGER_STATE)? {
            None => Default::default(),
            Some(bytes) => CpuCheckpoint::parse(&bytes)
                .and_then(|c| c.to_state(cpu_policy(config.cpu_policy)))
                .map_err(|e| restore_error(&cpu_path, e.to_string()))?,
        };
        let memory = match (config.memory_policy, read(MEMORY_MANAGER_STATE)?) {
            (MemoryPolicyName::Static, Some(bytes)) => Some(
                MemoryCheckpoint::parse(&bytes)
                    .and_then(|c| c.to_state("Static"))
                    .map_err(|e| restore_error(&root.join(MEMORY_MANAGER_STATE), e.to_string()))?
                    .with_numa_indices(self.base.machine()),
            ),
            _ => None,
        };
        let devices = match read(DEVICE_CHECKPOINT)? {
            None => Default::default(),
            Some(bytes) => DeviceCheckpoint::parse(&bytes)
                .map_err(|e| restore_error(&root.join(DEVICE_CHECKPOINT), e.to_string()))?
                .assignments(),
        };
        let mut node = self.base.clone();
        node.restore(NodeSnapshot {
            pods: converted,
            cpu,
            memory,
            devices,
        })
        .map_err(|e| restore_error(root, e.to_string()))?;
        self.node = node;
        self.pods = pods;
        Ok(())
    }

    fn write_checkpoints(&mut self) -> Result<(), StandInError> {
        let snapshot = self.node.snapshot();
        let config = self.node.config();
        let (cpu_version, memory_version) = self.layout.versions();
        let cpu = CpuCheckpoint::of_state(cpu_policy(config.cpu_policy), &snapshot.cpu, cpu_version);
        let memory_policy = match config.memory_policy {
            MemoryPolicyName::None => "None",
            MemoryPolicyName::Static => "Static",
        };
        // The kubelet names NUMA nodes by the machine's own ids.
        let memory_state = snapshot
            .memory
            .unwrap_or_default()
            .with_numa_labels(self.node.machine());
        let memory = MemoryCheckpoint::of_state(memory_policy, &memory_state, memory_version);
        let devices = DeviceCheckpoint::of_assignments(&snapshot.devices, self.node.machine());
        let unsupported =
            |name: &str, e: topoalign_k8s::checkpoint::CheckpointError| file_error(&self.paths.root_dir.join(name), e);
        let files = [
            (
                CPU_MANAGER_STATE,
                cpu.to_bytes().map_err(|e| unsupported(CPU_MANAGER_STATE, e))?,
            ),
            (
                MEMORY_MANAGER_STATE,
                memory.to_bytes().map_err(|e| unsupported(MEMORY_MANAGER_STATE, e))?,
            ),
            (DEVICE_CHECKPOINT, devices.to_bytes()),
        ];
        for (name, bytes) in files {
            let path = self.paths.root_dir.join(name);
            self.write(&path, bytes)?;
        }
        Ok(())
    }

    fn write_pods(&mut self) -> Result<(), StandInError> {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": self.pods});
        let path = self.paths.pods_file.clone();
        let bytes = serde_json::to_vec(&list).map_err(|e| file_error(&path, e))?;
        self.write(&path, bytes)
    }

    /// The kubelet's file store write: a temporary file in the same
    /// directory, written and synced, then renamed over the target.
    fn write(&mut self, path: &Path, bytes: Vec<u8>) -> Result<(), StandInError> {
        if self.written.get(path) == Some(&bytes) {
            return Ok(());
        }
        self.writes += 1;
        let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        let mut file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| file_error(&tmp, e))?
        };
        if self.die.0 == Some(self.writes) {
            let _ = file.write_all(&bytes[..bytes.len() / 2]);
            let _ = file.sync_all();
            let _ = writeln!(
                std::io::stdout(),
                "{}",
                json!({"event": "dying", "file": path.display().to_string(), "write": self.writes})
            );
            let _ = std::io::stdout().flush();
            std::process::abort();
        }
        file.write_all(&bytes).map_err(|e| file_error(&tmp, e))?;
        file.sync_all().map_err(|e| file_error(&tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(|e| file_error(path, e))?;
        self.written.insert(path.to_path_buf(), bytes);
        Ok(())
    }

    fn publish_answers(&self) {
        let answers = pod_resources_of(&self.node);
        if let Ok(mut current) = self.answers.lock() {
            *current = answers;
        }
    }
}

fn cpu_policy(policy: CpuPolicyName) -> &'static str {
    match policy {
        CpuPolicyName::None => "none",
        CpuPolicyName::Static => "static",
    }
}

/// What a kubelet's PodResources API answers for `node`: each admitted
/// pod's app containers and sidecars with their placements
/// ([`pod_allocations`]); as allocatable what the kubelet's managers make
/// allocatable ([`allocatable_of`]: every CPU but the reserved ones, the
/// memory manager's allocatable memory per NUMA node, every device).
pub fn pod_resources_of(node: &Node) -> Snapshot {
    Snapshot {
        pods: pod_allocations(&node.snapshot(), node.machine()),
        allocatable: allocatable_of(node),
    }
}

/// One line of the stand-in's input: `{"add": <Pod>}` or
/// `{"delete": "<uid>"}`.
///
/// # Errors
/// [`InputError`] saying what the line lacks.
pub fn parse_input(line: &str) -> Result<Input, InputError> {
    let value: Value = serde_json::from_str(line).map_err(InputError::Json)?;
    if let Some(pod) = value.get("add") {
        let pod: K8sPod = serde_json::from_value(pod.clone()).map_err(InputError::Pod)?;
        return Ok(Input::Add(Box::new(pod)));
    }
    if let Some(uid) = value.get("delete").and_then(Value::as_str) {
        return Ok(Input::Delete(uid.to_owned()));
    }
    Err(InputError::Shape)
}

/// An input line the stand-in cannot use (reported as an `error` line;
/// the stand-in goes on).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("not JSON: {0}")]
    Json(serde_json::Error),
    /// `add`'s value does not read as a Pod.
    #[error("add: not a Pod: {0}")]
    Pod(serde_json::Error),
    #[error("expected {{\"add\": <Pod>}} or {{\"delete\": \"<uid>\"}}")]
    Shape,
}

/// A parsed input line.
#[derive(Debug)]
pub enum Input {
    Add(Box<K8sPod>),
    Delete(String),
}

/// The output line for a change: the event, the generation, and the
/// state after it.
pub fn change_line(stand_in: &StandIn, change: &Change) -> Value {
    let mut line = match change {
        Change::Admitted { pod } => json!({"event": "admitted", "pod": pod}),
        Change::Rejected { pod, reason, message } => {
            json!({"event": "rejected", "pod": pod, "reason": reason, "message": message})
        }
        Change::Deleted { pod } => json!({"event": "deleted", "pod": pod}),
        Change::NotFound { uid } => json!({"event": "not-found", "uid": uid}),
    };
    line["generation"] = json!(stand_in.generation());
    line["state"] = serde_json::to_value(stand_in.state()).unwrap_or(Value::Null);
    line
}

/// Serves `stand_in`'s PodResources API on `socket` (replacing a socket
/// file left there, as the kubelet does) and applies `input`'s lines in
/// order, writing one JSON line to `output` per line read — after the
/// change's files are all written — and a `ready` line first. Ends at the
/// input's end, removing the socket.
///
/// # Errors
/// The socket cannot be bound, a file cannot be written, or `output`
/// fails.
pub async fn run(
    mut stand_in: StandIn,
    restored: bool,
    socket: &Path,
    input: impl tokio::io::AsyncBufRead + Unpin,
    mut output: impl Write,
) -> Result<(), StandInError> {
    use tokio::io::AsyncBufReadExt;

    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    }
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_error(socket, e)),
    }
    let listener = tokio::net::UnixListener::bind(socket).map_err(|e| file_error(socket, e))?;
    let answers = stand_in.answers();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(topoalign_podresources::serve(
        listener,
        move || answers.lock().map(|a| a.clone()).unwrap_or_default(),
        async {
            let _ = stopped.await;
        },
    ));
    let emit = |output: &mut dyn Write, line: Value| {
        writeln!(output, "{line}")
            .and_then(|()| output.flush())
            .map_err(|e| StandInError::File {
                path: "stdout".to_owned(),
                message: e.to_string(),
            })
    };
    let mut ready = json!({"event": "ready", "restored": restored, "generation": 0});
    ready["state"] = serde_json::to_value(stand_in.state()).unwrap_or(Value::Null);
    emit(&mut output, ready)?;
    let mut lines = input.lines();
    let result = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break Ok(()),
            Err(e) => break Err(file_error(Path::new("stdin"), e)),
        };
        if line.trim().is_empty() {
            continue;
        }
        let change = match parse_input(&line) {
            Err(message) => {
                emit(&mut output, json!({"event": "error", "message": message.to_string()}))?;
                continue;
            }
            Ok(Input::Add(pod)) => stand_in.add(*pod),
            Ok(Input::Delete(uid)) => stand_in.delete(&uid),
        };
        match change {
            Ok(change) => emit(&mut output, change_line(&stand_in, &change))?,
            Err(error) => break Err(error),
        }
    };
    // A graceful stop waits for open connections to close; a client that
    // keeps one open (an idle channel in a runtime nobody drives) must not
    // keep the stand-in alive after its input ended.
    let _ = stop.send(());
    let mut server = server;
    if tokio::time::timeout(SERVER_STOP_LIMIT, &mut server).await.is_err() {
        server.abort();
    }
    let _ = std::fs::remove_file(socket);
    result
}

/// How long the PodResources server may take to close its connections
/// once the input has ended.
const SERVER_STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

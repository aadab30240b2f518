//! The follower against the real protocol and real kubelet files: the
//! PodResources API served over a real Unix socket by
//! `topoalign-podresources`' server, the checkpoint files the kubelet's own
//! code wrote (`testdata/kubelet-state/layouts`, three releases' layouts),
//! the pods file. The rebuilt node must equal the kubelet's placements (the
//! oracle's `final`); every damaged or disagreeing source must make the
//! state unknown, naming what is wrong; the loop must settle back.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::{oneshot, watch};
use topoalign_engine::{Node, NodeSnapshot};
use topoalign_follow::{
    FollowConfig, Metrics, Observation, PodSource, Rebuilder, Sources, State, Status, Trigger, follow, gather, rebuild,
};
use topoalign_k8s::checkpoint::{CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint};
use topoalign_observe::test_support::{layouts, layouts_node, layouts_pods};
use topoalign_podresources::{Snapshot, allocatable_of, serve};

const RELEASES: [&str; 3] = ["1.32", "1.36-pod-level", "1.37"];

/// The node the fixtures' kubelet runs: the scenario's machine, the
/// KubeletConfiguration file.
fn base_node() -> Node {
    layouts_node(&topoalign_intake::Overrides::default()).unwrap()
}

/// What a kubelet's PodResources API answers for the state in `dir`: each
/// pod's app and sidecar containers with their exclusive CPUs, pinned
/// memory and devices (the kubelet answers from the same managers' state).
fn kubelet_answers(dir: &Path, node: &Node) -> Snapshot {
    let cpu = CpuCheckpoint::parse(&std::fs::read(dir.join("cpu_manager_state")).unwrap())
        .unwrap()
        .to_state("static")
        .unwrap();
    let memory = MemoryCheckpoint::parse(&std::fs::read(dir.join("memory_manager_state")).unwrap())
        .unwrap()
        .to_state("Static")
        .unwrap();
    let devices =
        DeviceCheckpoint::parse(&std::fs::read(dir.join("device-plugins/kubelet_internal_checkpoint")).unwrap())
            .unwrap()
            .assignments();
    // The kubelet's checkpoints as read back, not the engine's node: the
    // walk over pods and containers is the stand-in kubelet's.
    let state = NodeSnapshot {
        pods: layouts_pods().unwrap(),
        cpu,
        memory: Some(memory),
        devices,
    };
    let machine = node.machine();
    let pods = topoalign_simnodes::stand_in::pod_allocations(&state, machine);
    Snapshot {
        pods,
        allocatable: allocatable_of(node),
    }
}

/// A PodResources server on a real Unix socket, answering from `answers`.
struct Kubelet {
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Kubelet {
    fn start(socket: &Path, answers: Arc<Mutex<Snapshot>>) -> Kubelet {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let source = answers;
        let task = tokio::spawn(async move {
            let _ = serve(listener, move || source.lock().unwrap().clone(), async {
                let _ = stopped.await;
            })
            .await;
        });
        Kubelet {
            socket: socket.to_path_buf(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops serving and removes the socket (a kubelet going away).
    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
        std::fs::remove_file(&self.socket).unwrap();
    }
}

/// Copies a release's files into a fresh kubelet root directory.
fn kubelet_root(release: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let from = layouts().join(release);
    std::fs::create_dir(root.path().join("device-plugins")).unwrap();
    for name in [
        "cpu_manager_state",
        "memory_manager_state",
        "device-plugins/kubelet_internal_checkpoint",
    ] {
        std::fs::copy(from.join(name), root.path().join(name)).unwrap();
    }
    std::fs::copy(layouts().join("pods.yaml"), root.path().join("pods.yaml")).unwrap();
    root
}

/// The oracle's `final` for the release, and the rebuilt node's state in
/// the same shape.
fn assert_is_the_kubelets(node: &Node, release: &str) {
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layouts().join(release).join("result.json")).unwrap()).unwrap();
    let snapshot = node.snapshot();
    let key: BTreeMap<&str, String> = snapshot.pods.iter().map(|p| (p.uid.as_str(), p.key())).collect();
    let mut cpus: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (uid, containers) in &snapshot.cpu.assignments {
        for (name, set) in containers {
            cpus.entry(key[uid.as_str()].clone())
                .or_default()
                .insert(name.clone(), set.to_string());
        }
    }
    let mut memory: BTreeMap<String, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
    for (uid, containers) in &snapshot.memory.as_ref().unwrap().assignments {
        for (name, blocks) in containers {
            let mut nodes: Vec<usize> = blocks.iter().flat_map(|b| b.numa_affinity.clone()).collect();
            nodes.sort_unstable();
            nodes.dedup();
            memory
                .entry(key[uid.as_str()].clone())
                .or_default()
                .insert(name.clone(), nodes);
        }
    }
    let final_ = &result["final"];
    assert_eq!(
        serde_json::to_value(&cpus).unwrap(),
        final_["cpuAssignments"],
        "{release}"
    );
    assert_eq!(
        serde_json::to_value(&memory).unwrap(),
        final_["memoryAssignments"],
        "{release}"
    );
    assert_eq!(
        snapshot.cpu.default_cpu_set.to_string(),
        final_["defaultCpuSet"],
        "{release}"
    );
    // Devices: every admitted container's devices as the kubelet gave them.
    for event in result["results"].as_array().unwrap() {
        let Some(uid) = key.iter().find(|(_, k)| **k == event["pod"]).map(|(u, _)| *u) else {
            continue;
        };
        for container in event["containers"].as_array().unwrap() {
            let name = container["name"].as_str().unwrap();
            let held = snapshot
                .devices
                .get(uid)
                .and_then(|c| c.get(name))
                .cloned()
                .unwrap_or_default();
            let given: BTreeMap<String, Vec<String>> =
                serde_json::from_value(container.get("devices").cloned().unwrap_or(serde_json::json!({}))).unwrap();
            assert_eq!(held, given, "{release} {uid} {name}");
        }
    }
}

async fn observe(root: &Path, socket: &Path) -> Result<Observation, topoalign_follow::Unknown> {
    gather(root, socket, &PodSource::File(root.join("pods.yaml"))).await
}

#[tokio::test]
async fn every_release_layout_rebuilds_to_the_kubelets_placements() {
    let base = base_node();
    for release in RELEASES {
        let root = kubelet_root(release);
        let socket = root.path().join("kubelet.sock");
        let answers = Arc::new(Mutex::new(kubelet_answers(&layouts().join(release), &base)));
        let mut kubelet = Kubelet::start(&socket, answers);
        let observation = observe(root.path(), &socket).await.unwrap();
        let rebuilt = rebuild(&base, &observation).unwrap();
        assert_is_the_kubelets(&rebuilt.node, release);
        assert!(rebuilt.stale.is_empty());
        kubelet.stop().await;
    }
}

#[tokio::test]
async fn damaged_or_disagreeing_sources_are_unknown_with_the_reason() {
    let base = base_node();
    let root = kubelet_root("1.37");
    let socket = root.path().join("kubelet.sock");
    let good = kubelet_answers(&layouts().join("1.37"), &base);
    let answers = Arc::new(Mutex::new(good.clone()));
    let mut kubelet = Kubelet::start(&socket, answers.clone());
    let unknown = |result: Result<topoalign_follow::Rebuilt, topoalign_follow::Unknown>| result.err().unwrap();
    let check = |observation: &Observation| rebuild(&base, observation);

    let observation = observe(root.path(), &socket).await.unwrap();
    assert!(check(&observation).is_ok());

    // A checkpoint caught mid-write (cut short), and one edited.
    let mut cut = observation.clone();
    let bytes = cut.cpu_state.take().unwrap();
    cut.cpu_state = Some(bytes[..bytes.len() / 2].to_vec());
    let error = unknown(check(&cut));
    assert_eq!(
        (error.kind, error.reason.as_str()),
        (
            "checkpoint",
            "cpu_manager_state: cut short (291 bytes): unexpected end of JSON input"
        )
    );
    let mut edited = observation.clone();
    let text = String::from_utf8(edited.memory_state.take().unwrap()).unwrap();
    edited.memory_state = Some(
        text.replacen("\\\"size\\\":4294967296", "\\\"size\\\":4294967297", 1)
            .into_bytes(),
    );
    let error = unknown(check(&edited));
    assert_eq!(error.kind, "checkpoint");
    assert!(
        error
            .reason
            .starts_with("memory_manager_state: checksum mismatch: the file records "),
        "{error}"
    );
    let mut devices = observation.clone();
    devices.device_state = Some(b"{\"Data\":{},\"Checksum\":1}".to_vec());
    assert!(
        unknown(check(&devices))
            .reason
            .starts_with("device-plugins/kubelet_internal_checkpoint: checkpoint is corrupted")
    );
    let mut absent = observation.clone();
    absent.cpu_state = None;
    assert_eq!(unknown(check(&absent)).kind, "checkpoint");

    // PodResources disagreeing with a checkpoint.
    let mut moved = observation.clone();
    moved.pod_resources[0].containers[0].cpus = topoalign_model::CpuSet::parse("6").unwrap();
    let error = unknown(check(&moved));
    assert_eq!(error.kind, "pod-resources");
    assert!(
        error
            .reason
            .contains("PodResources reports exclusive CPUs 6, cpu_manager_state records"),
        "{error}"
    );

    let mut pinned = observation.clone();
    let block = pinned
        .pod_resources
        .iter_mut()
        .flat_map(|p| &mut p.containers)
        .find_map(|c| c.memory.first_mut())
        .unwrap();
    block.size += 1;
    let error = unknown(check(&pinned));
    assert_eq!(error.kind, "pod-resources");
    assert!(
        error.reason.contains("PodResources reports pinned memory ")
            && error.reason.contains(", memory_manager_state records "),
        "{error}"
    );
    let mut swapped = observation.clone();
    let group = swapped
        .pod_resources
        .iter_mut()
        .flat_map(|p| &mut p.containers)
        .find_map(|c| c.devices.values_mut().flatten().next())
        .unwrap();
    group.ids = vec!["not-a-device".to_owned()];
    let error = unknown(check(&swapped));
    assert_eq!(error.kind, "pod-resources");
    assert!(
        error.reason.contains("PodResources reports devices ")
            && error
                .reason
                .contains("not-a-device, device-plugins/kubelet_internal_checkpoint records "),
        "{error}"
    );

    // GetAllocatableResources not this node's: the devices missing.
    let mut unlisted = observation.clone();
    unlisted.allocatable.as_mut().unwrap().devices.clear();
    let error = unknown(check(&unlisted));
    assert_eq!(error.kind, "pod-resources");
    assert!(
        error.reason.starts_with(
            "GetAllocatableResources differs from this node's machine and kubelet configuration: devices: "
        ) && error.reason.contains("are on this node's device list but not served"),
        "{error}"
    );

    // A pod bound by the API server, not yet admitted by the kubelet.
    let mut early = observation.clone();
    early.pod_resources.retain(|p| p.name != "db");
    assert_eq!(
        unknown(check(&early)).reason,
        "pod default/db is bound to this node but the kubelet does not list it yet"
    );
    // A pod the kubelet still runs after the API server let it go.
    let mut late = observation.clone();
    late.pods.retain(|p| p.metadata.name.as_deref() != Some("db"));
    assert_eq!(
        unknown(check(&late)).reason,
        "the kubelet lists pod default/db, which the API server does not have on this node (deleted already, or not \
         stored yet)"
    );
    // A pod gone from both: its checkpoint entries are stale, released.
    answers.lock().unwrap().pods.retain(|p| p.name != "db");
    let mut gone = observe(root.path(), &socket).await.unwrap();
    gone.pods.retain(|p| p.metadata.name.as_deref() != Some("db"));
    let rebuilt = check(&gone).unwrap();
    assert_eq!(rebuilt.stale, ["00000000-0000-0000-0000-000000000003"]);
    assert!(
        !rebuilt
            .node
            .snapshot()
            .cpu
            .assignments
            .contains_key("00000000-0000-0000-0000-000000000003")
    );

    // The socket gone: the kubelet is restarting.
    kubelet.stop().await;
    let error = observe(root.path(), &socket).await.err().unwrap();
    assert_eq!(error.kind, "pod-resources");
    assert!(error.reason.contains("cannot connect"), "{error}");
}

/// Waits (at most 30 s: a hang is a failure, not a timing assertion) for
/// a status newer than `after` that satisfies `want`.
async fn wait(status: &mut watch::Receiver<Status>, after: u64, want: impl Fn(&State) -> bool) -> Status {
    tokio::time::timeout(
        Duration::from_secs(30),
        status.wait_for(|s| s.generation > after && want(&s.state)),
    )
    .await
    .expect("the follower settles")
    .unwrap()
    .clone()
}

fn is_known(state: &State) -> bool {
    matches!(state, State::Known { .. })
}

fn is_unknown(state: &State) -> bool {
    matches!(state, State::Unknown(_))
}

/// The loop: files rewritten mid-read (a cut file, then the good one),
/// the socket removed and restored, a follower restarted — the status is
/// the kubelet's exact state or unknown, and settles back to known.
#[tokio::test]
async fn the_follower_settles_after_every_disturbance() {
    let base = base_node();
    let root = kubelet_root("1.32");
    let socket = root.path().join("kubelet.sock");
    let answers = Arc::new(Mutex::new(kubelet_answers(&layouts().join("1.32"), &base)));
    let mut kubelet = Kubelet::start(&socket, answers.clone());
    let config = FollowConfig {
        root_dir: root.path().to_path_buf(),
        socket: socket.clone(),
        pods: PodSource::File(root.path().join("pods.yaml")),
        resync: Duration::from_millis(200),
    };
    for _restart in 0..2 {
        let (sender, mut status) = watch::channel(Status {
            generation: 0,
            state: State::Starting,
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let trigger = Trigger::default();
        let task = tokio::spawn(follow(
            base.clone(),
            config.clone(),
            trigger.clone(),
            sender,
            Arc::new(Metrics::default()),
            async {
                let _ = stopped.await;
            },
        ));
        let seen = wait(&mut status, 0, is_known).await;
        let State::Known { node, .. } = &seen.state else {
            unreachable!()
        };
        assert_is_the_kubelets(node, "1.32");

        // Rewritten mid-read: a cut file appears (the inotify event wakes
        // the follower), then the whole file again.
        let path = root.path().join("cpu_manager_state");
        let good = std::fs::read(&path).unwrap();
        std::fs::write(&path, &good[..good.len() / 3]).unwrap();
        let seen = wait(&mut status, seen.generation, is_unknown).await;
        std::fs::write(&path, &good).unwrap();
        let seen = wait(&mut status, seen.generation, is_known).await;

        // The kubelet goes away and comes back.
        kubelet.stop().await;
        let seen = wait(&mut status, seen.generation, is_unknown).await;
        let State::Unknown(unknown) = &seen.state else {
            unreachable!()
        };
        assert_eq!(unknown.kind, "pod-resources");
        kubelet = Kubelet::start(&socket, answers.clone());
        trigger.poke();
        let seen = wait(&mut status, seen.generation, is_known).await;
        let State::Known { node, .. } = &seen.state else {
            unreachable!()
        };
        assert_is_the_kubelets(node, "1.32");

        let _ = stop.send(());
        task.await.unwrap();
    }
    kubelet.stop().await;
}

/// The exclusive CPUs' first holder among the kubelet's answers: its pod
/// (`namespace/name`), pod name and container.
fn first_exclusive(observation: &Observation) -> (String, String, String) {
    observation
        .pod_resources
        .iter()
        .find_map(|p| {
            p.containers
                .iter()
                .find(|c| !c.cpus.is_empty())
                .map(|c| (format!("{}/{}", p.namespace, p.name), p.name.clone(), c.name.clone()))
        })
        .unwrap()
}

/// A rebuilder keeps what it decoded by the bytes (and each pod by its
/// value): a source that changes after rebuilds that reused it is decoded
/// and checked again. A cut checkpoint after unchanged ones is unknown and
/// the good bytes again are known, for each checkpoint; a pod changed
/// under the same uid is converted again (its renamed container no longer
/// holds what PodResources reports).
#[tokio::test]
async fn a_source_changed_after_unchanged_ones_is_read_and_checked_again() {
    let base = base_node();
    let root = kubelet_root("1.37");
    let socket = root.path().join("kubelet.sock");
    let answers = Arc::new(Mutex::new(kubelet_answers(&layouts().join("1.37"), &base)));
    let mut kubelet = Kubelet::start(&socket, answers);
    let observation = observe(root.path(), &socket).await.unwrap();
    let mut rebuilder = Rebuilder::default();
    for _unchanged in 0..2 {
        assert_is_the_kubelets(&rebuilder.rebuild(&base, &observation).unwrap().node, "1.37");
    }
    for file in [
        "cpu_manager_state",
        "memory_manager_state",
        "kubelet_internal_checkpoint",
    ] {
        let mut cut = observation.clone();
        let slot = match file {
            "cpu_manager_state" => &mut cut.cpu_state,
            "memory_manager_state" => &mut cut.memory_state,
            _ => &mut cut.device_state,
        };
        let bytes = slot.take().unwrap();
        *slot = Some(bytes[..bytes.len() / 2].to_vec());
        let error = rebuilder.rebuild(&base, &cut).err().unwrap();
        assert_eq!(error.kind, "checkpoint", "{error}");
        assert!(error.reason.contains(file), "{error}");
        assert_is_the_kubelets(&rebuilder.rebuild(&base, &observation).unwrap().node, "1.37");
    }
    let (key, pod, container) = first_exclusive(&observation);
    let mut renamed = observation.clone();
    let spec = renamed
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some(pod.as_str()))
        .and_then(|p| Arc::make_mut(p).spec.as_mut())
        .unwrap();
    let held = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
        .find(|c| c.name == container)
        .unwrap();
    held.name = "renamed".to_owned();
    let error = rebuilder.rebuild(&base, &renamed).err().unwrap();
    assert_eq!(error.kind, "pod-resources", "{error}");
    assert!(error.reason.contains(&format!("pod {key} container ")), "{error}");
    assert_is_the_kubelets(&rebuilder.rebuild(&base, &observation).unwrap().node, "1.37");
    kubelet.stop().await;
}

/// The fixture's pods as a JSON `List` (what the stand-in and `kubectl get
/// pods -o json` write), with `edit` applied to the pod named `name`.
fn json_pods_file(name: &str, edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let text = std::fs::read_to_string(layouts().join("pods.yaml")).unwrap();
    let list: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(list["kind"], "List");
    let mut items = list["items"].as_array().unwrap().clone();
    for item in &mut items {
        if item["metadata"]["name"] == name {
            edit(item);
        }
    }
    serde_json::to_vec_pretty(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap()
}

/// A pods file kept by its items' text: gathered again unchanged it gives
/// the same pods; a pod edited after that is read again — its uid gone is
/// unknown naming the pod, a pod that is not JSON any more names the file
/// — and the file as it was is known again.
#[tokio::test]
async fn a_pods_file_changed_after_unchanged_gathers_is_read_and_checked_again() {
    let base = base_node();
    let root = kubelet_root("1.37");
    let socket = root.path().join("kubelet.sock");
    let answers = Arc::new(Mutex::new(kubelet_answers(&layouts().join("1.37"), &base)));
    let mut kubelet = Kubelet::start(&socket, answers);
    let pods_file = root.path().join("pods.json");
    let good = json_pods_file("", |_| {});
    std::fs::write(&pods_file, &good).unwrap();
    let mut sources = Sources::new(
        root.path().to_path_buf(),
        socket.clone(),
        PodSource::File(pods_file.clone()),
    );
    let mut rebuilder = Rebuilder::default();
    let first = sources.gather().await.unwrap();
    let again = sources.gather().await.unwrap();
    assert_eq!(first.pods, again.pods);
    // Unchanged, each pod is the one kept: the same allocation.
    assert!(first.pods.iter().zip(&again.pods).all(|(a, b)| Arc::ptr_eq(a, b)));
    assert_is_the_kubelets(&rebuilder.rebuild(&base, &again).unwrap().node, "1.37");

    let (key, pod, _) = first_exclusive(&first);
    let no_uid = json_pods_file(&pod, |p| {
        p["metadata"].as_object_mut().unwrap().remove("uid");
    });
    std::fs::write(&pods_file, &no_uid).unwrap();
    let error = rebuilder
        .rebuild(&base, &sources.gather().await.unwrap())
        .err()
        .unwrap();
    assert_eq!(
        (error.kind, error.reason.as_str()),
        ("pods", format!("pod {key}: metadata.uid is missing").as_str())
    );
    let not_a_pod = json_pods_file(&pod, |p| p["spec"]["containers"] = serde_json::json!("none"));
    std::fs::write(&pods_file, &not_a_pod).unwrap();
    let error = sources.gather().await.err().unwrap();
    assert_eq!(error.kind, "pods", "{error}");
    assert!(error.reason.starts_with(&pods_file.display().to_string()), "{error}");

    // One pod changed (its uid back, a label added): that pod is parsed
    // anew, a new allocation the rebuilder converts and checks again; the
    // others are the ones kept.
    let labelled = json_pods_file(&pod, |p| {
        p["metadata"]["labels"] = serde_json::json!({"changed": "yes"})
    });
    std::fs::write(&pods_file, &labelled).unwrap();
    let changed = sources.gather().await.unwrap();
    for (kept, now) in first.pods.iter().zip(&changed.pods) {
        let edited = now.metadata.name.as_deref() == Some(pod.as_str());
        assert_eq!(Arc::ptr_eq(kept, now), !edited, "{:?}", now.metadata.name);
        assert_eq!(now.metadata.labels.is_some(), edited);
    }
    assert_is_the_kubelets(&rebuilder.rebuild(&base, &changed).unwrap().node, "1.37");

    std::fs::write(&pods_file, &good).unwrap();
    let back = sources.gather().await.unwrap();
    assert_eq!(back.pods, first.pods);
    assert_is_the_kubelets(&rebuilder.rebuild(&base, &back).unwrap().node, "1.37");
    kubelet.stop().await;
}

/// Issue #31's judgement: `diagnose` and the follower give the same
/// observed state for the same kubelet directory. Both read it through
/// `topoalign_observe` (one function); this feeds both the same files, pods
/// and PodResources answer — every release's layout, and the same with
/// one pod finished (released by both) — and compares what they restored.
#[tokio::test]
async fn diagnose_and_the_follower_observe_the_same_state() {
    let base = base_node();
    let kubelet_config: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(layouts().join("kubelet-config.yaml")).unwrap()).unwrap();
    for release in RELEASES {
        for finished in [None, Some("db")] {
            let root = kubelet_root(release);
            let socket = root.path().join("kubelet.sock");
            let mut answers = kubelet_answers(&layouts().join(release), &base);
            if let Some(name) = finished {
                // The kubelet no longer lists a finished pod.
                answers.pods.retain(|p| p.name != name);
                let text = std::fs::read_to_string(root.path().join("pods.yaml")).unwrap();
                std::fs::write(root.path().join("pods.yaml"), finish(&text, name)).unwrap();
            }
            let mut kubelet = Kubelet::start(&socket, Arc::new(Mutex::new(answers.clone())));
            let observation = observe(root.path(), &socket).await.unwrap();
            let followed = rebuild(&base, &observation).unwrap();
            kubelet.stop().await;

            let dir = topoalign_observe::KubeletDir::new(root.path().to_path_buf(), Some(socket.clone()));
            let files = dir.read_checkpoints();
            let pods = {
                let text = std::fs::read_to_string(root.path().join("pods.yaml")).unwrap();
                topoalign_k8s::read_manifests(&text, &topoalign_k8s::ManifestOptions::default())
                    .unwrap()
                    .pods
            };
            let mut diagnosed = base.clone();
            let diagnosis = topoalign_explain::diagnose::diagnose(topoalign_explain::diagnose::Inputs {
                node: &mut diagnosed,
                kubelet: &kubelet_config,
                cpu_checkpoint: files.cpu,
                memory_checkpoint: files.memory,
                device_checkpoint: files.devices,
                pod_resources: Some(topoalign_observe::PodResourcesAnswer {
                    socket: socket.display().to_string(),
                    pods: answers.pods.clone(),
                    allocatable: Some(answers.allocatable.clone()),
                }),
                pods: Some(&pods),
                explain: &[],
            })
            .unwrap();
            assert_eq!(diagnosis.disagreements, [], "{release} {finished:?}");
            assert_eq!(diagnosed.snapshot(), followed.node.snapshot(), "{release} {finished:?}");
            assert_eq!(
                diagnosed.numa_usage(),
                followed.node.numa_usage(),
                "{release} {finished:?}"
            );
            let stale_uids: Vec<String> = followed.stale.clone();
            match finished {
                None => assert!(stale_uids.is_empty() && diagnosis.stale.is_empty(), "{release}"),
                Some(name) => {
                    assert_eq!(diagnosis.stale, [format!("default/{name}")], "{release}");
                    assert_eq!(stale_uids.len(), 1, "{release}");
                    assert!(
                        !followed.node.pods().iter().any(|p| p.name == name),
                        "{release}: a finished pod is not held"
                    );
                }
            }
        }
    }
}

/// `pods.yaml` with the pod `name` finished (`status.phase: Succeeded`).
fn finish(text: &str, name: &str) -> String {
    let mut list: serde_json::Value = serde_yaml_ng::from_str(text).unwrap();
    for pod in list["items"].as_array_mut().unwrap() {
        if pod["metadata"]["name"] == name {
            pod["status"] = serde_json::json!({"phase": "Succeeded"});
        }
    }
    serde_yaml_ng::to_string(&list).unwrap()
}

/// Issue #32: a FIFO where a checkpoint should be is an error naming it
/// at once (a blocking open would wait for a writer forever), and the
/// follower goes on: unknown, then known when the file is back.
#[tokio::test]
async fn a_fifo_checkpoint_is_unknown_at_once_not_a_hang() {
    let base = base_node();
    let root = kubelet_root("1.37");
    let socket = root.path().join("kubelet.sock");
    let answers = Arc::new(Mutex::new(kubelet_answers(&layouts().join("1.37"), &base)));
    let mut kubelet = Kubelet::start(&socket, answers);
    let file = root.path().join("cpu_manager_state");
    let kept = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let status = std::process::Command::new("mkfifo").arg(&file).status().unwrap();
    assert!(status.success());
    let error = observe(root.path(), &socket).await.err().unwrap();
    assert_eq!(error.kind, "checkpoint", "{error}");
    assert_eq!(
        error.reason,
        format!(
            "{}: cannot be read: a FIFO (named pipe), not a regular file",
            file.display()
        )
    );
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, kept).unwrap();
    let observation = observe(root.path(), &socket).await.unwrap();
    assert_is_the_kubelets(&rebuild(&base, &observation).unwrap().node, "1.37");
    kubelet.stop().await;
}

/// The follower's proof of placement: the captured node of
/// `testdata/verify/kubelet` (the v1.32 checkpoints, the pods with their
/// containers' statuses, systemd cgroup v2 processes), its PodResources
/// answer on a real socket (with a device DRA allocated, which the state
/// carries); once the state is known, each running container is judged as
/// `verify --containers` judges it, and exported.
#[tokio::test]
async fn the_follower_verifies_the_running_containers() {
    let captured = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/verify/kubelet");
    let kubelet_dir = captured.join("var/lib/kubelet");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("device-plugins")).unwrap();
    for name in [
        "cpu_manager_state",
        "memory_manager_state",
        "device-plugins/kubelet_internal_checkpoint",
        "pods.yaml",
    ] {
        std::fs::copy(kubelet_dir.join(name), root.path().join(name)).unwrap();
    }
    let base = base_node();
    let socket = root.path().join("kubelet.sock");
    // The kubelet's answer also names a device DRA gave the app container
    // (PodResources v1 `dynamic_resources`, sent over the real protocol).
    let mut answer = kubelet_answers(&layouts().join("1.32"), &base);
    let nic = topoalign_podresources::DynamicDevice {
        claim_namespace: "ml".to_string(),
        claim_name: "train-nic".to_string(),
        driver: "nic.example.com".to_string(),
        pool: "node-a".to_string(),
        device: "nic-3".to_string(),
    };
    answer
        .pods
        .iter_mut()
        .find(|p| p.namespace == "ml" && p.name == "train")
        .and_then(|p| p.containers.iter_mut().find(|c| c.name == "app"))
        .unwrap()
        .dynamic = vec![nic.clone()];
    let answers = Arc::new(Mutex::new(answer));
    let mut kubelet = Kubelet::start(&socket, answers);
    let config = FollowConfig {
        root_dir: root.path().to_path_buf(),
        socket: socket.clone(),
        pods: PodSource::File(root.path().join("pods.yaml")),
        resync: Duration::from_millis(200),
    };
    let (sender, mut status) = watch::channel(Status {
        generation: 0,
        state: State::Starting,
    });
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(follow(
        base,
        config,
        Trigger::default(),
        sender,
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    let seen = wait(&mut status, 0, is_known).await;
    let State::Known {
        containers,
        dynamic_devices,
        ..
    } = &seen.state
    else {
        unreachable!()
    };
    // The DRA device, carried through observe into the status API.
    assert_eq!(dynamic_devices.len(), 1);
    assert_eq!(
        (dynamic_devices[0].pod.as_str(), dynamic_devices[0].container.as_str()),
        ("train", "app")
    );
    assert_eq!(dynamic_devices[0].devices, [nic]);
    assert_eq!(
        topoalign_follow::api::dynamic_resources(dynamic_devices),
        serde_json::json!([{
            "namespace": "ml", "pod": "train", "container": "app",
            "devices": [{"claimNamespace": "ml", "claimName": "train-nic", "driver": "nic.example.com",
                         "pool": "node-a", "device": "nic-3"}],
        }])
    );
    // setup (an init container that completed) has nothing to check.
    let names: Vec<String> = containers.iter().map(|c| c.label()).collect();
    assert_eq!(
        names,
        [
            "ml/train log",
            "ml/train app",
            "default/web web",
            "default/db db",
            "default/gpu2 g"
        ]
    );

    let (_published_tx, published) = watch::channel(topoalign_follow::api::Published::fresh(
        seen.clone(),
        std::time::Instant::now(),
    ));
    let (verdicts_tx, mut verdicts) = watch::channel(topoalign_follow::verify::Verdicts::default());
    let verifier = tokio::spawn(topoalign_follow::verify::verify_loop(
        published,
        topoalign_follow::verify::VerifyConfig {
            host: topoalign_host::Host::under(&captured),
            interval: Duration::from_millis(50),
        },
        metrics.clone(),
        verdicts_tx,
        None,
    ));
    let latest = tokio::time::timeout(Duration::from_secs(30), verdicts.wait_for(|v| v.verified.is_some()))
        .await
        .expect("a verification")
        .unwrap()
        .clone();
    assert_eq!(latest.generation, seen.generation);
    let verified = latest.verified.unwrap();
    let verdicts: Vec<(String, &str)> = verified
        .reports
        .iter()
        .map(|r| (r.subject.to_string(), r.verdict.as_str()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("ml/train log".to_string(), "aligned"),
            ("ml/train app".to_string(), "aligned"),
            ("default/web web".to_string(), "aligned"),
            ("default/db db".to_string(), "drifted"),
            ("default/gpu2 g".to_string(), "misaligned"),
        ]
    );
    assert!(verified.not_found.is_empty(), "{:?}", verified.not_found);
    let text = metrics.encode();
    for line in [
        r#"topoalign_follow_container_placement{namespace="default",pod="db",container="db",verdict="drifted"} 1"#,
        r#"topoalign_follow_container_placement{namespace="ml",pod="train",container="app",verdict="aligned"} 1"#,
        r#"topoalign_follow_container_placement{namespace="default",pod="gpu2",container="g",verdict="misaligned"} 1"#,
        r#"topoalign_follow_container_memory_spilled_bytes{namespace="default",pod="db",container="db"} 0"#,
        "topoalign_follow_containers_not_found 0",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    verifier.abort();
    let _ = stop.send(());
    task.await.unwrap();
    kubelet.stop().await;
}

//! `topoalign agent --follow-kubelet` against `topoalign kubelet-stand-in`,
//! both real processes: the stand-in writes the kubelet's checkpoint files
//! (temp file, sync, rename), serves the PodResources API on a Unix socket
//! and writes the pods file; the follower rebuilds the node from them.
//!
//! - churn: 1,000 random adds and deletes (init containers, sidecars,
//!   devices, huge pages, all QoS classes); after each change the
//!   follower's state must become exactly the stand-in's, and no state it
//!   reports as known may ever be anything but the stand-in's state before
//!   or after the change — 0 divergences. Re-admitting the pods in order
//!   (the old history attribute's way) is counted beside it: it diverges.
//! - kill -9: the follower killed and restarted; the stand-in dying in the
//!   middle of a file write and restarted. While the stand-in is gone the
//!   follower says unknown, never a state; afterwards it settles on the
//!   stand-in's restored state.
//!
//! - diagnose: `topoalign diagnose` reads the stand-in's PodResources API
//!   (the real proto on its socket) beside its checkpoint files: they
//!   agree; without the device checkpoint the devices are read from the
//!   API, not inferred; a socket that is missing is an error naming it;
//!   a copy of the files from before the node moved on disagrees with the
//!   API, each disagreement naming the file and the field.
//!
//! No sleeps: the tests wait on the stand-in's output lines (one per
//! change, written once its files are), the follower's log lines and its
//! `/v1/status?after=G`, which answers when a newer status exists.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};

use serde_json::{Value, json};
use topoalign_agent::{Client, Endpoint};

mod agent_support;

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_topoalign")
}

/// The node of `testdata/kubelet-state/layouts` (two NUMA nodes of 4
/// cores × 2 threads, 1Gi huge pages, two GPUs, three NICs one without
/// NUMA affinity; static CPU manager, Static memory manager,
/// single-numa-node), without its events.
/// The layouts' node as the release that writes `layout` runs it (its
/// version and feature gates: a kubelet reads the files of its own
/// release's layout, issue #32).
fn write_node(dir: &Path, layout: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/kubelet-state/layouts")
        .join(layout)
        .join("scenario.json");
    let mut scenario: Value = serde_json::from_slice(&std::fs::read(source).unwrap()).unwrap();
    scenario.as_object_mut().unwrap().remove("events");
    let path = dir.join("node.json");
    std::fs::write(&path, serde_json::to_vec(&scenario).unwrap()).unwrap();
    path
}

/// A running `topoalign kubelet-stand-in`.
struct StandIn {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

struct Setup {
    dir: tempfile::TempDir,
    node: PathBuf,
    layout: &'static str,
}

impl Setup {
    fn new(layout: &'static str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let node = write_node(dir.path(), layout);
        Setup { dir, node, layout }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("kubelet")
    }
    fn socket(&self) -> PathBuf {
        self.dir.path().join("kubelet/pod-resources/kubelet.sock")
    }
    fn pods(&self) -> PathBuf {
        self.dir.path().join("pods.json")
    }

    /// Starts the stand-in and reads its `ready` line.
    fn stand_in(&self, extra: &[&str]) -> (StandIn, Value) {
        let mut child = agent_support::dies_with_test(&mut Command::new(binary()))
            .arg("kubelet-stand-in")
            .arg("--node")
            .arg(&self.node)
            .arg("--root-dir")
            .arg(self.root())
            .arg("--pod-resources-socket")
            .arg(self.socket())
            .arg("--pods-file")
            .arg(self.pods())
            .args(["--checkpoint-layout", self.layout])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stand_in = StandIn { child, stdin, stdout };
        let ready = stand_in.line().expect("the stand-in's ready line");
        assert_eq!(ready["event"], "ready", "{ready}");
        (stand_in, ready)
    }

    /// Where the follower serves its read-only API.
    fn follower_socket(&self) -> PathBuf {
        self.dir.path().join("follower.sock")
    }

    /// Starts the follower and waits for its log line saying it serves.
    fn follower(&self) -> Follower {
        let socket = self.follower_socket();
        let mut child = agent_support::dies_with_test(&mut Command::new(binary()))
            .args(["agent", "--follow-kubelet", "--log-format", "json"])
            .arg("--node")
            .arg(&self.node)
            .arg("--kubelet-root-dir")
            .arg(self.root())
            .arg("--pod-resources-socket")
            .arg(self.socket())
            .arg("--pods-file")
            .arg(self.pods())
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(self.dir.path().join("state"))
            .args(["--resync-interval", "1"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if log.read_line(&mut line).unwrap() == 0 {
                panic!("the follower exited before serving: {seen}");
            }
            seen.push_str(&line);
            if line.contains("serving the read-only API") {
                break;
            }
        }
        // Keep draining its log so it never blocks on a full pipe.
        let drain = std::thread::spawn(move || {
            let mut rest = String::new();
            for line in log.lines() {
                rest.push_str(&line.unwrap_or_default());
                rest.push('\n');
            }
            rest
        });
        Follower {
            child,
            client: Client::new(Endpoint::Unix(socket)),
            generation: 0,
            drain: Some(drain),
        }
    }
}

impl StandIn {
    fn line(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap())
    }

    /// Sends one change and returns its line.
    fn send(&mut self, input: &Value) -> Value {
        writeln!(self.stdin, "{input}").unwrap();
        self.stdin.flush().unwrap();
        self.line().expect("an answer line")
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Follower {
    child: Child,
    client: Client,
    generation: u64,
    drain: Option<std::thread::JoinHandle<String>>,
}

impl Follower {
    /// The next status after the last one seen.
    fn next(&mut self) -> Value {
        let status: Value = self
            .client
            .call("GET", &format!("/v1/status?after={}", self.generation), None)
            .unwrap();
        let generation = status["generation"].as_u64().unwrap();
        assert!(generation > self.generation, "no newer status within 30 s: {status}");
        self.generation = generation;
        status
    }

    /// The follower's status now, without waiting for a newer one.
    fn current(&mut self) -> Value {
        let status: Value = self.client.call("GET", "/v1/status", None).unwrap();
        self.generation = self.generation.max(status["generation"].as_u64().unwrap());
        status
    }

    /// Waits until the follower knows `expected`; every known state on the
    /// way that is neither `previous` nor `expected` is a divergence.
    /// Returns the divergences and the unknown statuses seen.
    fn settle(&mut self, previous: &Value, expected: &Value) -> (usize, Vec<String>) {
        let mut divergences = 0;
        let mut unknown = Vec::new();
        // The status now first: a change that left the state as it was (a
        // rejection) rewrites no file, and no newer status comes before the
        // periodic resync.
        let mut status = self.current();
        for _ in 0..500 {
            match status["state"].as_str().unwrap() {
                "known" if &status["record"] == expected => return (divergences, unknown),
                "known" if &status["record"] == previous => {}
                "known" => {
                    divergences += 1;
                    eprintln!("divergence: {}\nexpected {expected}", status["record"]);
                }
                _ => unknown.push(status["reason"].as_str().unwrap_or_default().to_owned()),
            }
            status = self.next();
        }
        panic!("the follower did not settle on the stand-in's state in 500 gathers; unknown: {unknown:?}");
    }

    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.drain.take().map(|d| d.join().unwrap()).unwrap_or_default()
    }

    /// SIGTERM; the exit status (waited for, bounded) and the log.
    fn terminate(mut self) -> (ExitStatus, String) {
        let status = agent_support::terminate(&mut self.child).unwrap();
        (status, self.drain.take().map(|d| d.join().unwrap()).unwrap_or_default())
    }
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A random pod: Guaranteed (whole CPUs, memory, sometimes 1Gi huge
/// pages, a GPU or a NIC), Burstable or BestEffort; sometimes an init
/// container and a sidecar.
fn random_pod(rng: &mut Rng, index: usize) -> Value {
    let guaranteed = rng.chance(60);
    let container = |rng: &mut Rng, name: &str, guaranteed: bool| -> Value {
        if !guaranteed {
            if rng.chance(30) {
                return json!({"name": name, "image": "x"});
            }
            let cpu = format!("{}m", 100 * (1 + rng.below(5)));
            return json!({"name": name, "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}});
        }
        let mut resources = json!({
            "cpu": (1 + rng.below(3)).to_string(),
            "memory": format!("{}Mi", 256 * (1 + rng.below(4))),
        });
        if rng.chance(20) {
            resources["hugepages-1Gi"] = json!("1Gi");
        }
        if rng.chance(15) {
            resources["nvidia.com/gpu"] = json!("1");
        } else if rng.chance(15) {
            resources["example.com/nic"] = json!("1");
        }
        json!({"name": name, "image": "x", "resources": {"requests": resources, "limits": resources}})
    };
    let mut spec = json!({"containers": [container(rng, "app", guaranteed)]});
    let mut init = Vec::new();
    if rng.chance(20) {
        init.push(container(rng, "setup", guaranteed));
    }
    if rng.chance(20) {
        let mut sidecar = container(rng, "sidecar", guaranteed);
        sidecar["restartPolicy"] = json!("Always");
        init.push(sidecar);
    }
    if !init.is_empty() {
        spec["initContainers"] = Value::Array(init);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("p{index:04}"),
            "namespace": if index.is_multiple_of(3) { "team-a" } else { "default" },
            "uid": format!("00000000-0000-0000-0000-{index:012}"),
            // Admission order is creation order, one second apart.
            "creationTimestamp": format!("2026-01-01T{:02}:{:02}:{:02}Z", index / 3600, index / 60 % 60, index % 60),
        },
        "spec": spec,
    })
}

/// The node `record` describes, rebuilt by admitting its pods again in
/// order on a fresh node (the old `topoalign.io/pods` history attribute):
/// whether that gives the same state.
fn readmission_agrees(empty: &topoalign_engine::Node, record: &Value) -> bool {
    let mut fresh = empty.clone();
    let view = <topoalign_nrt::StateView<'_> as serde::Deserialize>::deserialize(record).unwrap();
    for pod in &view.pods {
        let decision = fresh.admit(pod.to_pod().unwrap());
        if decision.rejection.is_some() {
            return false;
        }
    }
    serde_json::to_value(topoalign_nrt::StateRecord::of(&fresh)).unwrap() == *record
}

/// One random change: a delete (40% when pods run) or an add.
fn random_change(rng: &mut Rng, running: &[String], index: usize) -> Value {
    if !running.is_empty() && rng.chance(40) {
        let uid = &running[rng.below(running.len() as u64) as usize];
        json!({"delete": uid})
    } else {
        json!({"add": random_pod(rng, index)})
    }
}

fn running_uids(state: &Value) -> Vec<String> {
    state["pods"]
        .as_array()
        .map(|pods| pods.iter().map(|p| p["uid"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// An unknown status's reason without the pod and container names and
/// the values, to count reasons by kind.
fn reason_kind(reason: &str) -> String {
    reason
        .split_whitespace()
        .map(|word| {
            if word.contains('/') && !word.contains("_state") && !word.contains("checkpoint") || word.starts_with('[') {
                "_"
            } else {
                word
            }
        })
        .take(12)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn churn_follower_never_diverges_readmission_does() {
    let setup = Setup::new("1.37");
    let (mut stand_in, ready) = setup.stand_in(&[]);
    let mut follower = setup.follower();
    let mut previous = ready["state"].clone();
    let (divergences, _) = follower.settle(&previous, &previous);
    assert_eq!(divergences, 0);

    let empty = topoalign_intake::start(&topoalign_intake::NodeInputs::new(
        Some(&setup.node),
        None,
        &topoalign_intake::Overrides::default(),
    ))
    .unwrap()
    .node;
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut follower_divergences, mut readmission_divergences) = (0, 0);
    let (mut admitted, mut rejected, mut deleted, mut unknown_seen) = (0, 0, 0, 0);
    let mut unknown_reasons: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for index in 1..=1000 {
        let change = random_change(&mut rng, &running_uids(&previous), index);
        let line = stand_in.send(&change);
        match line["event"].as_str().unwrap() {
            "admitted" => admitted += 1,
            "rejected" => rejected += 1,
            "deleted" => deleted += 1,
            other => panic!("change {index}: {other}: {line}"),
        }
        let expected = line["state"].clone();
        let (divergences, unknown) = follower.settle(&previous, &expected);
        follower_divergences += divergences;
        unknown_seen += unknown.len();
        for reason in unknown {
            *unknown_reasons.entry(reason_kind(&reason)).or_insert(0) += 1;
        }
        if !readmission_agrees(&empty, &expected) {
            readmission_divergences += 1;
        }
        previous = expected;
    }
    eprintln!(
        "1000 changes ({admitted} admitted, {rejected} rejected, {deleted} deleted): follower divergences \
         {follower_divergences}, re-admission divergences {readmission_divergences}, unknown statuses on the way \
         {unknown_seen} ({unknown_reasons:?})"
    );
    assert!(
        admitted > 200 && deleted > 200 && rejected > 20,
        "a churn worth the name"
    );
    assert_eq!(follower_divergences, 0);
    assert!(
        readmission_divergences > 0,
        "re-admission was expected to diverge after deletions"
    );
    stand_in.kill();
    follower.kill();
}

#[test]
fn a_follower_stopped_with_sigterm_exits_cleanly_and_removes_its_socket() {
    let setup = Setup::new("1.32");
    let (stand_in, _) = setup.stand_in(&[]);
    let mut follower = setup.follower();
    follower.current();
    assert!(setup.follower_socket().exists());
    let (status, log) = follower.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(!setup.follower_socket().exists(), "the socket file was left behind");
    stand_in.kill();
}

#[test]
fn follower_killed_and_restarted_comes_back_to_the_same_state() {
    let setup = Setup::new("1.32");
    let (mut stand_in, ready) = setup.stand_in(&[]);
    let mut rng = Rng(7);
    let mut state = ready["state"].clone();
    for index in 1..=40 {
        let change = random_change(&mut rng, &running_uids(&state), index);
        state = stand_in.send(&change)["state"].clone();
    }
    assert!(!running_uids(&state).is_empty());
    for round in 0..3 {
        let mut follower = setup.follower();
        let (divergences, _) = follower.settle(&Value::Null, &state);
        assert_eq!(divergences, 0, "round {round}");
        // A change while it runs, then kill -9 right after the change.
        let change = random_change(&mut rng, &running_uids(&state), 100 + round);
        let previous = state.clone();
        state = stand_in.send(&change)["state"].clone();
        let (divergences, _) = follower.settle(&previous, &state);
        assert_eq!(divergences, 0, "round {round}");
        follower.kill();
    }
    stand_in.kill();
}

#[test]
fn stand_in_dying_mid_write_is_unknown_then_its_restored_state() {
    let setup = Setup::new("1.36-pod-level");
    // Start-up writes 4 files; each change a few more. Die inside the
    // 30th write: in the middle of some change's files.
    let (mut stand_in, ready) = setup.stand_in(&["--die-at-write", "30"]);
    let mut follower = setup.follower();
    let mut state = ready["state"].clone();
    let (divergences, _) = follower.settle(&Value::Null, &state);
    assert_eq!(divergences, 0);
    let mut rng = Rng(99);
    let mut died = None;
    for index in 1..=100 {
        let change = random_change(&mut rng, &running_uids(&state), index);
        writeln!(stand_in.stdin, "{change}").unwrap();
        stand_in.stdin.flush().unwrap();
        let line = stand_in.line().unwrap();
        if line["event"] == "dying" {
            died = Some(line);
            break;
        }
        let previous = std::mem::replace(&mut state, line["state"].clone());
        let (divergences, _) = follower.settle(&previous, &state);
        assert_eq!(divergences, 0);
    }
    let died = died.expect("the stand-in reached its 30th write");
    assert!(stand_in.line().is_none(), "nothing after dying");
    let status = stand_in.child.wait().unwrap();
    assert!(!status.success(), "{status}");
    // The half-written temporary file is there; the file it was to replace
    // is whole.
    let file = PathBuf::from(died["file"].as_str().unwrap());
    let tmp = file.with_file_name(format!(".{}.tmp", file.file_name().unwrap().to_string_lossy()));
    assert!(tmp.is_file(), "{}", tmp.display());

    // With the stand-in gone, the follower's statuses become unknown (the
    // socket refuses). A known one before that comes from a gather between
    // two of the change's writes: the state before the change, or after it
    // when the change had passed its commit point (the pods file) — its
    // files, half there, hold state for a pod nobody lists, which the
    // kubelet releases as stale.
    let mut known_on_the_way = Vec::new();
    let mut status = follower.next();
    for _ in 0..20 {
        if status["state"] != "known" {
            break;
        }
        known_on_the_way.push(status["record"].clone());
        status = follower.next();
    }
    assert_eq!(status["state"], "unknown", "{status}");

    // Restarted, the stand-in restores from its files: the change in
    // flight is undone (an add) or completed (a delete); the follower
    // settles on exactly that, and never knew anything else.
    let (stand_in, ready) = setup.stand_in(&[]);
    assert_eq!(ready["restored"], true);
    let restored = ready["state"].clone();
    let (divergences, unknown) = follower.settle(&Value::Null, &restored);
    assert_eq!(divergences, 0, "unknown on the way: {unknown:?}");
    for record in known_on_the_way {
        assert!(record == state || record == restored, "{record}");
    }
    stand_in.kill();
    follower.kill();
}

/// A Guaranteed pod of one container: 2 CPUs, 512Mi, and one GPU when
/// `gpu`.
fn fixed_pod(index: usize, gpu: bool) -> Value {
    let mut resources = json!({"cpu": "2", "memory": "512Mi"});
    if gpu {
        resources["nvidia.com/gpu"] = json!("1");
    }
    json!({"add": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("p{index:04}"),
            "namespace": "default",
            "uid": format!("00000000-0000-0000-0000-{index:012}"),
            "creationTimestamp": format!("2026-01-01T00:00:{index:02}Z"),
        },
        "spec": {"containers": [{"name": "app", "image": "x", "resources": {"requests": resources, "limits": resources}}]},
    }})
}

/// `topoalign diagnose` on `dir` with the node and pods file given; its
/// exit status, JSON document (or text) and stderr.
fn diagnose(setup: &Setup, dir: &Path, pods: &Path, extra: &[&str]) -> (i32, String, String) {
    let output = Command::new(binary())
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(dir)
        .arg("--node")
        .arg(&setup.node)
        .arg("--pods")
        .arg(pods)
        .args(extra)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn diagnose_json(setup: &Setup, dir: &Path, pods: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = extra.to_vec();
    args.extend(["-o", "json"]);
    let (status, stdout, stderr) = diagnose(setup, dir, pods, &args);
    let document = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    (status, document)
}

fn notes(document: &Value) -> String {
    document["notes"].to_string()
}

/// The devices of the per-NUMA map: NUMA node → resource → id → holder.
fn device_map(document: &Value) -> Vec<Value> {
    document["numa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["devices"].clone())
        .collect()
}

/// Copies the checkpoint files named (relative to the kubelet root) and
/// the pods file into `to`, as one moment's copy of the node.
fn copy_state(setup: &Setup, to: &Path, files: &[&str]) -> PathBuf {
    for file in files {
        let target = to.join(file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(setup.root().join(file), &target).unwrap();
    }
    let pods = to.join("pods.json");
    std::fs::copy(setup.pods(), &pods).unwrap();
    pods
}

const CPU_STATE: &str = "cpu_manager_state";
const MEMORY_STATE: &str = "memory_manager_state";
const DEVICE_STATE: &str = "device-plugins/kubelet_internal_checkpoint";

#[test]
fn diagnose_reads_the_kubelets_pod_resources_and_agrees_with_its_checkpoints() {
    let setup = Setup::new("1.37");
    let (mut stand_in, _) = setup.stand_in(&[]);
    for (index, gpu) in [(1, true), (2, true), (3, false)] {
        assert_eq!(stand_in.send(&fixed_pod(index, gpu))["event"], "admitted");
    }
    let socket = setup.socket();
    let socket_text = socket.display().to_string();
    // Given, and by default (the socket under the kubelet directory).
    for extra in [vec!["--pod-resources", socket_text.as_str()], vec![]] {
        let (status, doc) = diagnose_json(&setup, &setup.root(), &setup.pods(), &extra);
        assert_eq!(status, 0, "{doc}");
        assert_eq!(doc["podResources"], socket_text.as_str());
        assert_eq!(doc["disagreements"], json!([]));
        // The stand-in serves what its machine and configuration make
        // allocatable, as a kubelet does: nothing to report.
        assert_eq!(doc.get("allocatableDisagreements"), None, "{doc}");
        assert!(notes(&doc).contains("lists 3 pod(s)"), "{}", notes(&doc));
        assert!(notes(&doc).contains("device assignments read from"), "{}", notes(&doc));
    }
    let (_, full) = diagnose_json(&setup, &setup.root(), &setup.pods(), &["--no-pod-resources"]);
    assert_eq!(full["podResources"], Value::Null);
    let held: Vec<String> = device_map(&full)
        .iter()
        .flat_map(|d| d["nvidia.com/gpu"].as_object().cloned().unwrap_or_default())
        .filter_map(|(_, holder)| holder.as_str().map(str::to_owned))
        .collect();
    assert_eq!(held, ["default/p0001 app", "default/p0002 app"], "{}", full["numa"]);

    // A copy without the device manager's checkpoint: the devices are read
    // from the API (the same map), not inferred.
    let copy = tempfile::tempdir().unwrap();
    let pods = copy_state(&setup, copy.path(), &[CPU_STATE, MEMORY_STATE]);
    let (status, doc) = diagnose_json(&setup, copy.path(), &pods, &["--pod-resources", &socket_text]);
    assert_eq!(status, 0, "{doc}");
    assert!(
        notes(&doc).contains("device assignments read from the kubelet's PodResources API"),
        "{}",
        notes(&doc)
    );
    assert!(!notes(&doc).contains("inferred"), "{}", notes(&doc));
    assert_eq!(device_map(&doc), device_map(&full));
    // Without the API, they can only be inferred, and the notes say so.
    let (_, doc) = diagnose_json(&setup, copy.path(), &pods, &[]);
    assert_eq!(doc["podResources"], Value::Null);
    assert!(notes(&doc).contains("inferred"), "{}", notes(&doc));
    stand_in.kill();
}

#[test]
fn diagnose_with_a_missing_pod_resources_socket_says_which() {
    let setup = Setup::new("1.32");
    let (stand_in, _) = setup.stand_in(&[]);
    let missing = setup.dir.path().join("no-kubelet.sock");
    let (status, stdout, stderr) = diagnose(
        &setup,
        &setup.root(),
        &setup.pods(),
        &["--pod-resources", missing.to_str().unwrap()],
    );
    assert_eq!(status, 2, "{stdout}");
    assert!(
        stderr.contains(&format!("--pod-resources {}", missing.display()))
            && stderr.contains("cannot connect to the kubelet's PodResources API"),
        "{stderr}"
    );
    stand_in.kill();
    // The default socket gone (the stand-in is): a note, not an error.
    let (status, doc) = diagnose_json(&setup, &setup.root(), &setup.pods(), &[]);
    assert_eq!(status, 0, "{doc}");
    assert!(
        notes(&doc).contains("the PodResources API was not read"),
        "{}",
        notes(&doc)
    );
}

#[test]
fn diagnose_reports_where_the_pod_resources_api_and_the_checkpoints_disagree() {
    let setup = Setup::new("1.32");
    let (mut stand_in, _) = setup.stand_in(&[]);
    for (index, gpu) in [(1, true), (2, true)] {
        assert_eq!(stand_in.send(&fixed_pod(index, gpu))["event"], "admitted");
    }
    // A copy of that moment, then the node moves on: both pods go and p0002
    // comes back, now where p0001 was.
    let then = tempfile::tempdir().unwrap();
    let pods = copy_state(&setup, then.path(), &[CPU_STATE, MEMORY_STATE, DEVICE_STATE]);
    for uid in [1, 2] {
        let line = stand_in.send(&json!({"delete": format!("00000000-0000-0000-0000-{uid:012}")}));
        assert_eq!(line["event"], "deleted", "{line}");
    }
    assert_eq!(stand_in.send(&fixed_pod(2, true))["event"], "admitted");

    let socket = setup.socket();
    let (status, doc) = diagnose_json(
        &setup,
        then.path(),
        &pods,
        &["--pod-resources", socket.to_str().unwrap()],
    );
    assert_eq!(status, 2, "{doc}");
    let disagreements = doc["disagreements"].as_array().unwrap();
    let find = |pod: &str, field: &str| {
        disagreements
            .iter()
            .find(|d| d["pod"] == pod && d["field"] == field)
            .unwrap_or_else(|| panic!("no {pod} {field} in {disagreements:?}"))
    };
    let gone = find("default/p0001", "pod_resources");
    assert_eq!(
        (gone["served"].as_str(), gone["recorded"].as_str()),
        (Some("-"), Some("listed"))
    );
    let devices = find("default/p0002", "devices");
    assert_eq!(devices["container"], "app");
    assert!(devices["file"].as_str().unwrap().ends_with(DEVICE_STATE), "{devices}");
    let (served, recorded) = (
        devices["served"].as_str().unwrap(),
        devices["recorded"].as_str().unwrap(),
    );
    assert!(served.starts_with("nvidia.com/gpu ") && recorded.starts_with("nvidia.com/gpu ") && served != recorded);
    let cpus = find("default/p0002", "cpu_ids");
    assert!(cpus["file"].as_str().unwrap().ends_with(CPU_STATE), "{cpus}");
    assert_ne!(cpus["served"], cpus["recorded"]);
    let memory = find("default/p0002", "memory");
    assert!(memory["file"].as_str().unwrap().ends_with(MEMORY_STATE), "{memory}");

    // The text says the same, naming the file and the field.
    let (status, text, _) = diagnose(
        &setup,
        then.path(),
        &pods,
        &["--pod-resources", socket.to_str().unwrap()],
    );
    assert_eq!(status, 2);
    assert!(
        text.contains("DISAGREES: pod default/p0002 container app: PodResources devices is"),
        "{text}"
    );
    assert!(text.contains("kubelet_internal_checkpoint records"), "{text}");
    stand_in.kill();
}

//! Issue 32's criterion against the real daemons: under 2,000 slow
//! connections to its TCP listener — each sent part of a request's
//! headers and nothing more — every daemon (the agent, the follower, the
//! extender) still answers its Unix socket and an honest TCP client, with
//! the same answers as before the flood, and the agent makes no
//! allocation for a client that gave up.
//!
//! The daemon holds all 2,000 (its open-file limit raised to the hard one
//! at start, its listen backlog the kernel's largest): the test waits
//! until the daemon's own descriptor table shows them, and checks they are
//! still held after the honest answers (none was dropped to serve them).
//!
//! And a fault: the kubelet's PodResources socket vanishing and coming
//! back under a running follower (a kubelet played by `topoalign
//! kubelet-stand-in`).
//!
//! Waits are on events, each bounded; nothing asserts how long anything
//! took (`bench/hostile-clients.sh` measures that). Every daemon dies with
//! its test (`agent_support::dies_with_test`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use topoalign_agent::{Client, Endpoint};

mod agent_support;

use agent_support::{TEST_TOKEN, TcpAgent, TestResult, binary, dies_with_test, tcp};

const SLOW: usize = 2_000;

/// The longest any wait for an event may take before the test fails.
const BOUND: Duration = Duration::from_secs(120);

/// Raises this process's open-file limit for its ends of the connections;
/// fails when the hard limit is too low to hold them.
fn room_for_the_flood() -> Result<(), String> {
    let soft = topoalign_serve::raise_open_file_limit();
    let needed = SLOW as u64 + 500;
    if soft < needed {
        return Err(format!(
            "this test opens {SLOW} connections and the hard open-file limit is {soft} (ulimit -Hn)"
        ));
    }
    Ok(())
}

/// `SLOW` connections to `address` that each sent the start of a
/// request's headers, and nothing more.
fn slow_clients(address: &str) -> Result<Vec<TcpStream>, std::io::Error> {
    (0..SLOW)
        .map(|_| {
            let mut stream = TcpStream::connect(address)?;
            stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: a")?;
            Ok(stream)
        })
        .collect()
}

/// The connections to TCP `port` that process `pid` holds open: its
/// descriptors that are established sockets with `port` as their local
/// port (`/proc/PID/net/tcp`, `tcp6`).
fn connections_held(pid: u32, port: u16) -> usize {
    let mut inodes = std::collections::HashSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|local| local.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            // State 01: established.
            if local_port == Some(port)
                && fields.get(3) == Some(&"01")
                && let Some(inode) = fields.get(9)
            {
                inodes.insert(format!("socket:[{inode}]"));
            }
        }
    }
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| {
                    std::fs::read_link(entry.path()).is_ok_and(|target| inodes.contains(&*target.to_string_lossy()))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits until `pid` holds `n` connections to `port`: the daemon has
/// accepted them.
fn until_held(pid: u32, port: u16, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + BOUND;
    loop {
        let held = connections_held(pid, port);
        if held >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the daemon holds {held} connections, not {n}, after {BOUND:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The names of the agent's allocations.
fn names(client: &Client) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut names: Vec<String> = client.allocations()?.into_iter().map(|a| a.name).collect();
    names.sort();
    Ok(names)
}

/// An admission request's bytes, its body cut after `body_bytes` when
/// given.
fn admission(name: &str, token: &str, body_bytes: Option<usize>) -> Vec<u8> {
    let body = json!({"name": name, "cpus": 1, "memory": "64Mi"}).to_string();
    let sent = body_bytes.map_or(body.as_str(), |n| &body[..n.min(body.len())]);
    format!(
        "POST /v1/allocations HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sent}",
        body.len()
    )
    .into_bytes()
}

/// Under 2,000 slow connections on TCP: the Unix socket admits and lists,
/// an honest TCP client lists and admits, and the admissions of clients
/// that gave up — one that stopped half-way through its body (answered
/// 503 at its deadline), one that closed its connection while its request
/// waited for the listener's one in-flight slot — are never made.
#[test]
fn the_agent_serves_its_socket_and_honest_clients_under_2000_slow_connections() -> TestResult {
    room_for_the_flood()?;
    let dir = tempfile::tempdir()?;
    let tcp_agent = TcpAgent::start(
        dir.path(),
        &[
            // The flood is held for the whole test (the header timeout
            // would close it: the bench shows that), one request at a time
            // on TCP, and a deadline for the one that waits.
            "--header-timeout",
            "600",
            "--max-in-flight",
            "1",
            "--request-timeout",
            "5",
        ],
    )?;
    let (agent, address, port, token) = (&tcp_agent.agent, &tcp_agent.address, tcp_agent.port, TEST_TOKEN);
    let pid = agent.child.id();
    let socket = agent.client();
    let honest = tcp_agent.tcp(Some(token));
    let before = honest.allocations()?;
    assert!(before.is_empty(), "{before:?}");

    let slow = slow_clients(address)?;
    until_held(pid, port, SLOW)?;

    // The Unix socket and an honest TCP client are answered.
    assert_eq!(socket.health()?.status, "ok");
    let admitted = socket.admit(&json!({"name": "honest-unix", "cpus": 1, "memory": "64Mi"}))?;
    assert!(admitted.admitted);
    assert_eq!(names(&honest)?, ["topoalign/honest-unix"]);

    // A client that stops half-way through its body: the deadline passes
    // while its body is read (inside the listener's one in-flight slot,
    // which it holds meanwhile).
    let mut late = TcpStream::connect(address)?;
    late.write_all(&admission("gave-up-in-its-body", token, Some(10)))?;
    until_held(pid, port, SLOW + 1)?;
    // A client that sends a whole admission and closes at once, while the
    // slot is held: its request is dropped, never run.
    let mut closed = TcpStream::connect(address)?;
    closed.write_all(&admission("gave-up-and-closed", token, None))?;
    drop(closed);
    let mut answer = String::new();
    late.read_to_string(&mut answer)?;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("deadline"), "{answer}");

    let admitted = honest.admit(&json!({"name": "honest-tcp", "cpus": 1, "memory": "64Mi"}))?;
    assert!(admitted.admitted);
    assert_eq!(names(&socket)?, ["topoalign/honest-tcp", "topoalign/honest-unix"]);
    agent_support::check_agent(&socket)?;
    // The flood is still held: nothing was dropped to serve the others.
    assert!(connections_held(pid, port) >= SLOW, "the slow connections were closed");
    drop(slow);
    Ok(())
}

/// The extender answers `/filter` as it did before the flood.
#[test]
fn the_extender_answers_honest_clients_under_2000_slow_connections() -> TestResult {
    room_for_the_flood()?;
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/fleet.yaml");
    let mut child = dies_with_test(&mut Command::new(binary()))
        .args([
            "extender",
            "--listen",
            "127.0.0.1:0",
            "--header-timeout",
            "600",
            "--fleet",
        ])
        .arg(&fleet)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut first_line)?;
    let address = first_line
        .trim()
        .rsplit("http://")
        .next()
        .ok_or("no address")?
        .to_owned();
    let pid = child.id();
    let port: u16 = address.rsplit(':').next().ok_or("no port")?.parse()?;
    let body = json!({
        "Pod": {"metadata": {"name": "p", "uid": "u1"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "30", "memory": "4Gi"}}}]}},
        "Nodes": null,
        "NodeNames": ["gpu-0", "gpu-1", "cpu-0", "elsewhere"]
    })
    .to_string();
    let filter = || -> Result<Value, Box<dyn std::error::Error>> {
        let response = tcp(&address, None).send("POST", "/filter", Some(("application/json", body.as_bytes())), &[])?;
        if response.status != 200 {
            return Err(format!("/filter: {} {}", response.status, response.text()).into());
        }
        Ok(serde_json::from_slice(&response.body)?)
    };
    let before = filter()?;
    let slow = slow_clients(&address)?;
    until_held(pid, port, SLOW)?;
    assert_eq!(filter()?, before);
    assert!(connections_held(pid, port) >= SLOW, "the slow connections were closed");
    drop(slow);
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// The layouts' node as release `layout` runs it, without its events.
fn write_node(dir: &Path, layout: &str) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/kubelet-state/layouts")
        .join(layout)
        .join("scenario.json");
    let mut scenario: Value = serde_json::from_slice(&std::fs::read(source)?)?;
    if let Some(object) = scenario.as_object_mut() {
        object.remove("events");
    }
    let path = dir.join("node.json");
    std::fs::write(&path, serde_json::to_vec(&scenario)?)?;
    Ok(path)
}

/// A kubelet played by `topoalign kubelet-stand-in` (its checkpoint
/// files, PodResources socket and pods file) under a temporary directory.
struct StandIn {
    dir: tempfile::TempDir,
    node: PathBuf,
    child: Child,
    /// `None` once closed ([`StandIn::vanish`]).
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    /// The state after its last change (its `state` field).
    state: Value,
}

impl StandIn {
    fn start() -> Result<StandIn, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let node = write_node(dir.path(), "1.32")?;
        let (child, input, output) = StandIn::spawn(dir.path(), &node)?;
        let mut stand_in = StandIn {
            dir,
            node,
            child,
            input: Some(input),
            output,
            state: Value::Null,
        };
        let ready = stand_in.line()?;
        assert_eq!(ready["event"], "ready", "{ready}");
        stand_in.state = ready["state"].clone();
        Ok(stand_in)
    }

    fn spawn(
        dir: &Path,
        node: &Path,
    ) -> Result<(Child, ChildStdin, BufReader<ChildStdout>), Box<dyn std::error::Error>> {
        let mut child = dies_with_test(&mut Command::new(binary()))
            .arg("kubelet-stand-in")
            .arg("--node")
            .arg(node)
            .arg("--root-dir")
            .arg(dir.join("kubelet"))
            .arg("--pod-resources-socket")
            .arg(dir.join("kubelet/pod-resources/kubelet.sock"))
            .arg("--pods-file")
            .arg(dir.join("pods.json"))
            .args(["--checkpoint-layout", "1.32"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let input = child.stdin.take().ok_or("no stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok((child, input, output))
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("kubelet/pod-resources/kubelet.sock")
    }

    fn line(&mut self) -> Result<Value, Box<dyn std::error::Error>> {
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            return Err("the stand-in ended".into());
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// Adds pod `index` (2 CPUs, 512Mi) and returns the stand-in's line.
    fn add(&mut self, index: usize) -> Result<Value, Box<dyn std::error::Error>> {
        let pod = json!({"add": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{index}"), "namespace": "default",
                         "uid": format!("00000000-0000-0000-0000-{index:012}"),
                         "creationTimestamp": format!("2026-01-01T00:00:{:02}Z", index % 60)},
            "spec": {"containers": [{"name": "app", "image": "x", "resources": {
                "requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}}]}
        }});
        let input = self.input.as_mut().ok_or("the stand-in's input is closed")?;
        writeln!(input, "{pod}")?;
        input.flush()?;
        let line = self.line()?;
        assert_eq!(line["event"], "admitted", "{line}");
        self.state = line["state"].clone();
        Ok(line)
    }

    /// Ends its input: it stops and removes its socket, as a kubelet going
    /// down.
    fn vanish(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        drop(self.input.take());
        let status = agent_support::wait_with_deadline(&mut self.child, BOUND)?;
        assert!(status.success(), "the stand-in stopped with {status}");
        assert!(!self.socket().exists(), "the stand-in left its socket behind");
        Ok(())
    }

    /// Starts it again on its files (it restores from them).
    fn come_back(&mut self) -> Result<Value, Box<dyn std::error::Error>> {
        let (child, input, output) = StandIn::spawn(self.dir.path(), &self.node)?;
        self.child = child;
        self.input = Some(input);
        self.output = output;
        let ready = self.line()?;
        assert_eq!(ready["event"], "ready", "{ready}");
        self.state = ready["state"].clone();
        Ok(ready)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `topoalign agent --follow-kubelet` of a [`StandIn`], with its Unix
/// socket and `--follow-listen` on a free port.
struct Follower {
    child: Child,
    unix: Client,
    address: String,
    port: u16,
}

impl Follower {
    fn start(kubelet: &StandIn) -> Result<Follower, Box<dyn std::error::Error>> {
        let dir = kubelet.dir.path();
        let socket = dir.join("follower.sock");
        let mut child = dies_with_test(&mut Command::new(binary()))
            .args(["agent", "--follow-kubelet", "--log-format", "json"])
            .arg("--node")
            .arg(&kubelet.node)
            .arg("--kubelet-root-dir")
            .arg(dir.join("kubelet"))
            .arg("--pod-resources-socket")
            .arg(kubelet.socket())
            .arg("--pods-file")
            .arg(dir.join("pods.json"))
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args([
                "--follow-listen",
                "127.0.0.1:0",
                "--header-timeout",
                "600",
                "--resync-interval",
                "1",
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut log = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut address = None;
        let mut seen = String::new();
        while address.is_none() {
            let mut line = String::new();
            if log.read_line(&mut line)? == 0 {
                return Err(format!("the follower exited before serving on TCP: {seen}").into());
            }
            seen.push_str(&line);
            if line.contains("serving the read-only API on TCP") {
                let entry: Value = serde_json::from_str(&line)?;
                address = entry["fields"]["address"]
                    .as_str()
                    .or_else(|| entry["address"].as_str())
                    .map(str::to_owned);
            }
        }
        let address = address.ok_or("no address")?;
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in log.lines() {});
        let port = address.rsplit(':').next().ok_or("no port")?.parse()?;
        Ok(Follower {
            child,
            unix: Client::new(Endpoint::Unix(socket)),
            address,
            port,
        })
    }

    /// The next status after generation `after` (the follower waits up to
    /// 30 s for one; it gathers every second).
    fn status_after(&self, after: u64) -> Result<Value, Box<dyn std::error::Error>> {
        Ok(self.unix.call("GET", &format!("/v1/status?after={after}"), None)?)
    }

    /// Waits (a bounded number of gathers) until the follower knows
    /// `state`; returns that status.
    fn until_known(&self, state: &Value) -> Result<Value, Box<dyn std::error::Error>> {
        let mut status: Value = self.unix.call("GET", "/v1/status", None)?;
        for _ in 0..100 {
            if status["state"] == "known" && &status["record"] == state {
                return Ok(status);
            }
            status = self.status_after(status["generation"].as_u64().unwrap_or(0))?;
        }
        Err(format!("the follower did not come to know the state in 100 gathers; last: {status}").into())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The follower keeps its Unix socket and TCP answering, with the state
/// known and the same as before the flood.
#[test]
fn the_follower_answers_honest_clients_under_2000_slow_connections() -> TestResult {
    room_for_the_flood()?;
    let mut kubelet = StandIn::start()?;
    // One pod, so that the state is not empty.
    kubelet.add(1)?;
    let follower = Follower::start(&kubelet)?;
    follower.until_known(&kubelet.state)?;
    let state_before: Value = follower.unix.call("GET", "/v1/state", None)?;
    let pid = follower.child.id();

    let slow = slow_clients(&follower.address)?;
    until_held(pid, follower.port, SLOW)?;
    let health: Value = follower.unix.call("GET", "/healthz", None)?;
    assert_eq!(health["state"], "known", "{health}");
    let over_unix: Value = follower.unix.call("GET", "/v1/state", None)?;
    let over_tcp: Value = tcp(&follower.address, None).call("GET", "/v1/state", None)?;
    assert_eq!(over_unix, state_before);
    assert_eq!(over_tcp, state_before);
    assert!(
        connections_held(pid, follower.port) >= SLOW,
        "the slow connections were closed"
    );
    drop(slow);
    Ok(())
}

/// The kubelet's PodResources socket vanishes (the kubelet goes down) and
/// comes back with a changed state: the follower keeps serving
/// throughout; while the socket is gone each status it publishes is
/// either the last known state — with its age — or unknown, naming the
/// socket, never another state; once the socket is back it knows the
/// kubelet's new state.
#[test]
fn the_follower_outlives_the_kubelets_socket_vanishing_and_recovers() -> TestResult {
    let mut kubelet = StandIn::start()?;
    kubelet.add(1)?;
    let follower = Follower::start(&kubelet)?;
    let known = follower.until_known(&kubelet.state)?;
    let before = kubelet.state.clone();

    kubelet.vanish()?;
    // Three gathers after the socket was removed.
    let mut generation = known["generation"].as_u64().unwrap_or(0);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let status = follower.status_after(generation)?;
        generation = status["generation"].as_u64().unwrap_or(generation);
        seen.push(status);
    }
    for status in &seen {
        match status["state"].as_str() {
            Some("known") => {
                assert_eq!(status["record"], before, "a state the kubelet never had: {status}");
                assert!(
                    status["ageSeconds"].is_number(),
                    "a held state without its age: {status}"
                );
            }
            Some("unknown") => {
                let reason = status["reason"].as_str().unwrap_or_default();
                assert!(
                    reason.contains(&*kubelet.socket().to_string_lossy()),
                    "the reason does not name the socket: {status}"
                );
            }
            _ => panic!("neither the last known state nor unknown: {status}"),
        }
    }
    // Both listeners still answer.
    let health: Value = follower.unix.call("GET", "/healthz", None)?;
    assert_eq!(health["status"], "ok", "{health}");
    let health: Value = tcp(&follower.address, None).call("GET", "/healthz", None)?;
    assert_eq!(health["status"], "ok", "{health}");

    // Back, restored from its files, then changed.
    let ready = kubelet.come_back()?;
    assert_eq!(ready["restored"], true, "{ready}");
    assert_eq!(kubelet.state, before, "the stand-in restored another state");
    kubelet.add(2)?;
    assert_ne!(kubelet.state, before);
    follower.until_known(&kubelet.state)?;
    Ok(())
}

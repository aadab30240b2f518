//! Shared by the cli's integration tests: the binary run to its end, a
//! real `topoalign agent` process on a Unix socket in a temporary
//! directory, a test machine, and the invariant checker.
#![allow(dead_code, reason = "each test file uses a different part")]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use topoalign_agent::wire::{Allocation, Topology};
use topoalign_agent::{Client, Endpoint};
use topoalign_model::{CpuSet, UniformMachine};
use topoalign_scenario::TopologySpec;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_topoalign")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `topoalign` with `args`, run to its end.
pub fn topoalign(args: &[&str]) -> Output {
    Command::new(binary()).args(args).output().expect("the binary runs")
}

/// `topoalign` with `args` run from the repository root, as the README
/// runs it: its exit code, standard output and standard error.
pub fn run_in_repo(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(binary())
        .current_dir(repo())
        .args(args)
        .output()
        .expect("the binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `p` as an argument.
pub fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `command`, made to die with the test: the kernel kills the child
/// (`PR_SET_PDEATHSIG`, SIGKILL) when the test's thread ends — also when
/// the test binary is killed, where no `Drop` runs —, so that a daemon a
/// test started never outlives it. For every test that spawns a daemon.
pub fn dies_with_test(command: &mut Command) -> &mut Command {
    topoalign_enforce::ChildPlacement {
        die_with_parent: true,
        ..topoalign_enforce::ChildPlacement::default()
    }
    .apply_to(command);
    command
}

/// [`dies_with_test`] for `topoalign` with `args`.
pub fn daemon(args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command.args(args);
    dies_with_test(&mut command);
    command
}

/// Two NUMA nodes (= sockets) × 4 cores × 2 threads (CPUs n and n+8 are
/// siblings), 8Gi and two GPUs per node; static CPU and memory managers,
/// best-effort topology policy, CPUs 0 and 8 reserved.
pub fn test_node() -> String {
    let machine = UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(8 << 30)
        .remote_distance(21)
        .device("nvidia.com/gpu", "GPU-0a", &[0])
        .device("nvidia.com/gpu", "GPU-0b", &[0])
        .device("nvidia.com/gpu", "GPU-1a", &[1])
        .device("nvidia.com/gpu", "GPU-1b", &[1])
        .build()
        .expect("a valid machine");
    let node = serde_json::json!({
        "topology": TopologySpec::from_machine(&machine),
        "kubelet": {
            "topologyManagerPolicy": "best-effort",
            "cpuManagerPolicy": "static",
            "memoryManagerPolicy": "Static",
            "reservedSystemCPUs": "0,8",
            "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
        }
    });
    serde_yaml_ng::to_string(&node).expect("a YAML document")
}

/// The bearer token a [`TcpAgent`] listens with.
pub const TEST_TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// [`AgentProcess::start_test_node`] also listening on TCP: on a free
/// local port, with [`TEST_TOKEN`] in `dir`/token, readable by its owner
/// only (a world-readable token is refused).
pub struct TcpAgent {
    pub agent: AgentProcess,
    pub address: String,
    pub port: u16,
    pub token_file: PathBuf,
}

impl TcpAgent {
    /// Starts it with `extra` arguments.
    pub fn start(dir: &Path, extra: &[&str]) -> Result<TcpAgent, Box<dyn std::error::Error>> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let address = format!("127.0.0.1:{port}");
        let token_file = dir.join("token");
        std::fs::write(&token_file, format!("{TEST_TOKEN}\n"))?;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))?;
        let mut args = vec![
            "--listen",
            &address,
            "--token-file",
            token_file.to_str().ok_or("a UTF-8 path")?,
        ];
        args.extend_from_slice(extra);
        let agent = AgentProcess::start_test_node(dir, &args)?;
        Ok(TcpAgent {
            agent,
            address,
            port,
            token_file,
        })
    }

    /// A client of its TCP listener, sending `token`.
    pub fn tcp(&self, token: Option<&str>) -> Client {
        tcp(&self.address, token)
    }
}

/// A client of a daemon's TCP listener at `address`, sending `token`.
pub fn tcp(address: &str, token: Option<&str>) -> Client {
    Client::new(Endpoint::Tcp {
        address: address.to_owned(),
        token: token.map(str::to_owned),
    })
}

/// Field `name` of `/proc/PID/status`.
pub fn status_field(pid: u32, name: &str) -> Result<String, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_string()))
        .ok_or_else(|| format!("no {name} in /proc/{pid}/status").into())
}

/// A kubelet configuration for this machine in `dir`/kubelet.yaml: static
/// CPU and memory managers under `topology_policy`; every CPU this process
/// may not use is reserved (so an allocation is one the test can check),
/// plus the lowest it may use; 100Mi system-reserved, 100Mi eviction
/// threshold, 200Mi reserved on the first NUMA node.
pub fn local_kubelet_config(dir: &Path, topology_policy: &str) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let online = CpuSet::parse(std::fs::read_to_string("/sys/devices/system/cpu/online")?.trim())?;
    let allowed = CpuSet::parse(&status_field(std::process::id(), "Cpus_allowed_list")?)?;
    let usable = online.intersection(&allowed);
    let lowest = usable.first().ok_or("no usable CPU")?;
    if usable.len() < 2 {
        return Err("this test needs two CPUs this process may use".into());
    }
    let reserved = online.difference(&usable).union(&CpuSet::from_iter([lowest]));
    let first_node = std::fs::read_to_string("/sys/devices/system/node/online")
        .ok()
        .and_then(|nodes| CpuSet::parse(nodes.trim()).ok())
        .and_then(|nodes| nodes.first())
        .unwrap_or(0);
    let path = dir.join("kubelet.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
memoryManagerPolicy: Static
topologyManagerPolicy: {topology_policy}
reservedSystemCPUs: \"{reserved}\"
systemReserved: {{memory: 100Mi}}
evictionHard: {{memory.available: 100Mi}}
reservedMemory:
  - {{numaNode: {first_node}, limits: {{memory: 200Mi}}}}
"
        ),
    )?;
    Ok(path)
}

/// The cgroup parent a test's agent uses, removed at the end (the agent
/// leaves it behind for the next start).
pub struct CgroupParent(pub String);

impl Drop for CgroupParent {
    fn drop(&mut self) {
        for root in ["/sys/fs/cgroup/cpuset", "/sys/fs/cgroup"] {
            let _ = std::fs::remove_dir(Path::new(root).join(&self.0));
        }
    }
}

/// An agent on this machine ([`local_kubelet_config`]) enforcing with what
/// the host allows, its cgroups under a [`CgroupParent`]; killed, then its
/// parent removed, when dropped.
pub struct LocalAgent {
    pub agent: AgentProcess,
    pub parent: CgroupParent,
}

impl LocalAgent {
    /// Starts it in `dir` with `extra` arguments, its cgroups under `parent`.
    pub fn start(
        dir: &Path,
        topology_policy: &str,
        parent: String,
        extra: &[&str],
    ) -> Result<LocalAgent, Box<dyn std::error::Error>> {
        let config = local_kubelet_config(dir, topology_policy)?;
        let parent = CgroupParent(parent);
        let mut args = vec![
            "--kubelet-config",
            config.to_str().ok_or("a UTF-8 path")?,
            "--cgroup-parent",
            &parent.0,
        ];
        args.extend_from_slice(extra);
        let agent = AgentProcess::start(dir, &args)?;
        Ok(LocalAgent { agent, parent })
    }
}

/// A running agent; killed when dropped.
pub struct AgentProcess {
    pub child: Child,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub log: PathBuf,
}

impl AgentProcess {
    /// Starts `topoalign agent` with its socket and state under `dir` and
    /// `args` added, and waits until it answers `/healthz`.
    pub fn start(dir: &Path, args: &[&str]) -> Result<AgentProcess, String> {
        AgentProcess::start_with_env(dir, args, &[])
    }

    /// [`AgentProcess::start`] with these environment variables set.
    pub fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<AgentProcess, String> {
        let socket = dir.join("agent.sock");
        let state_dir = dir.join("state");
        let log = dir.join(format!("agent-{}.log", unique()));
        let child = Self::spawn(&socket, &state_dir, &log, args, env)?;
        let mut agent = AgentProcess {
            child,
            socket,
            state_dir,
            log,
        };
        agent.wait_ready()?;
        Ok(agent)
    }

    /// Starts the agent with the test node (`--node`) in `dir`.
    pub fn start_test_node(dir: &Path, args: &[&str]) -> Result<AgentProcess, String> {
        let node = write_test_node(dir)?;
        let mut all = vec!["--node", node.to_str().unwrap_or_default()];
        all.extend_from_slice(args);
        AgentProcess::start(dir, &all)
    }

    fn spawn(
        socket: &Path,
        state_dir: &Path,
        log: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Child, String> {
        let log_file = std::fs::File::create(log).map_err(|e| e.to_string())?;
        dies_with_test(&mut Command::new(binary()))
            .arg("agent")
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state_dir)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start the agent: {e}"))
    }

    /// Polls `/healthz` (bounded: 20 s) until the agent answers; fails at
    /// once if it exits.
    fn wait_ready(&mut self) -> Result<(), String> {
        let client = self.client();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the agent exited with {status}: {}", self.log_text()));
            }
            if client.health().is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the agent did not answer within 20 s: {}", self.log_text()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client(&self) -> Client {
        Client::new(Endpoint::Unix(self.socket.clone()))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kill -9`, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and wait (bounded) for the exit status.
    pub fn terminate(&mut self) -> Result<ExitStatus, String> {
        terminate(&mut self.child)
    }
}

/// SIGTERM to `child`, and wait (bounded) for its exit status.
pub fn terminate(child: &mut Child) -> Result<ExitStatus, String> {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err("kill -TERM failed".into());
    }
    wait_with_deadline(child, Duration::from_secs(20))
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for `child` to exit, polling (bounded).
pub fn wait_with_deadline(child: &mut Child, limit: Duration) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => return Err(format!("process {} still runs after {limit:?}", child.id())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Polls `probe` (every 20 ms, at most 20 s) until it yields a value.
pub fn eventually<T>(what: &str, agent: &AgentProcess, mut probe: impl FnMut() -> Option<T>) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within 20 s; agent log:\n{}", agent.log_text()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The one NodeResourceTopology object in the YAML file at `path`, if
/// there is one.
pub fn read_nrt_object(path: &Path) -> Option<topoalign_nrt::NodeResourceTopology> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut objects = topoalign_nrt::object::parse_objects(&text).ok()?;
    (objects.len() == 1).then(|| objects.remove(0))
}

pub fn write_test_node(dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join("node.yaml");
    std::fs::write(&path, test_node()).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Checks one consistent view of the node (each document is computed
/// under the agent's lock): no CPU held exclusively twice or also in the
/// shared pool, no device held twice, no NUMA node over-allocated.
pub fn check_invariants(allocations: &[Allocation], topology: &Topology) -> Result<(), String> {
    let mut exclusive_owner: BTreeMap<u32, &str> = BTreeMap::new();
    let mut shared = CpuSet::new();
    let mut ids = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut devices: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for allocation in allocations {
        if !ids.insert(allocation.id.as_str()) {
            return Err(format!("allocation {} is listed twice", allocation.id));
        }
        if !names.insert(allocation.name.as_str()) {
            return Err(format!("name {} is held twice", allocation.name));
        }
        let cpus = &allocation.cpus;
        if allocation.exclusive {
            for cpu in cpus.iter() {
                if let Some(other) = exclusive_owner.insert(cpu, &allocation.id) {
                    return Err(format!("CPU {cpu} is held by both {other} and {}", allocation.id));
                }
            }
        } else {
            shared = shared.union(cpus);
        }
        for (resource, list) in &allocation.devices {
            for device in list {
                if let Some(other) = devices.insert((resource, device), &allocation.id) {
                    return Err(format!(
                        "{resource} {device} is held by both {other} and {}",
                        allocation.id
                    ));
                }
            }
        }
    }
    for (cpu, owner) in &exclusive_owner {
        if shared.contains(*cpu) {
            return Err(format!("CPU {cpu} is exclusive to {owner} and in the shared pool"));
        }
    }
    let pool = topology.shared_cpus.clone();
    for node in &topology.numa_nodes {
        for (resource, usage) in &node.resources {
            if let Some(allocated) = usage.allocated
                && allocated > usage.allocatable
            {
                return Err(format!(
                    "NUMA {} {resource}: {allocated} allocated of {} allocatable",
                    node.id, usage.allocatable
                ));
            }
        }
    }
    if pool.is_empty() {
        return Err("the shared pool is empty: the reserved CPUs must stay in it".into());
    }
    Ok(())
}

/// Reads both documents and checks them.
pub fn check_agent(client: &Client) -> Result<Vec<Allocation>, String> {
    let allocations = client.allocations().map_err(|e| e.to_string())?;
    let topology = client.topology().map_err(|e| e.to_string())?;
    check_invariants(&allocations, &topology)?;
    Ok(allocations)
}

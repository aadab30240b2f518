//! Shared by the agent and run integration tests: a real `topoalign agent`
//! process on a Unix socket in a temporary directory, a test machine, and
//! the invariant checker.
#![allow(dead_code, reason = "each test file uses a different part")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use topoalign_agent::wire::{Allocation, Topology};
use topoalign_agent::{Client, Endpoint};
use topoalign_model::CpuSet;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_topoalign")
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

/// Two NUMA nodes × 4 cores × 2 threads (CPUs n and n+8 are siblings),
/// 8Gi and two GPUs per node; static CPU and memory managers, best-effort
/// topology policy, CPUs 0 and 8 reserved.
pub const TEST_NODE: &str = r#"
topology:
  numaNodes:
    - {id: 0, memory: 8Gi, distances: [10, 21]}
    - {id: 1, memory: 8Gi, distances: [21, 10]}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0}
    - {id: 1, core: 1, socket: 0, numa: 0}
    - {id: 2, core: 2, socket: 0, numa: 0}
    - {id: 3, core: 3, socket: 0, numa: 0}
    - {id: 4, core: 4, socket: 1, numa: 1}
    - {id: 5, core: 5, socket: 1, numa: 1}
    - {id: 6, core: 6, socket: 1, numa: 1}
    - {id: 7, core: 7, socket: 1, numa: 1}
    - {id: 8, core: 0, socket: 0, numa: 0}
    - {id: 9, core: 1, socket: 0, numa: 0}
    - {id: 10, core: 2, socket: 0, numa: 0}
    - {id: 11, core: 3, socket: 0, numa: 0}
    - {id: 12, core: 4, socket: 1, numa: 1}
    - {id: 13, core: 5, socket: 1, numa: 1}
    - {id: 14, core: 6, socket: 1, numa: 1}
    - {id: 15, core: 7, socket: 1, numa: 1}
  devices:
    nvidia.com/gpu:
      - {id: GPU-0a, numa: [0]}
      - {id: GPU-0b, numa: [0]}
      - {id: GPU-1a, numa: [1]}
      - {id: GPU-1b, numa: [1]}
kubelet:
  topologyManagerPolicy: best-effort
  cpuManagerPolicy: static
  memoryManagerPolicy: Static
  reservedSystemCPUs: "0,8"
  systemReserved: {memory: 1Gi}
  reservedMemory:
    - {numaNode: 0, limits: {memory: 1124Mi}}
"#;

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
    std::fs::write(&path, TEST_NODE).map_err(|e| e.to_string())?;
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

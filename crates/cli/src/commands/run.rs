//! `topoalign run`: run a command inside an aligned allocation.
//!
//! Asks the agent (or, with `--standalone`, the engine directly, under the
//! state directory's lock) for CPUs, memory and devices; starts the command
//! confined to them; waits; releases; exits with the command's status.
//! When `run` itself dies, the command is killed with it (parent-death
//! signal) and the agent releases the allocation once it notices.
//!
//! Exit status: the command's; 128+N when a signal N killed it; 125 when
//! the command was not started (agent unreachable, request invalid or
//! rejected — the explanation is printed); 126 when it could not be
//! executed; 127 when it was not found.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};
use topoalign_agent::request::{AdmitOptions, read_body};
use topoalign_agent::wire::{AdmitResponse, Allocation};
use topoalign_agent::{Client, ClientError, Endpoint, OpenOptions, Role};
use topoalign_enforce::{ChildPlacement, Procfs};
use topoalign_engine::TopologyPolicyName;
use topoalign_verify::run_record::RunRecord;

use super::{Outcome, Result};

const NOT_STARTED: u8 = 125;
const CANNOT_EXECUTE: u8 = 126;
const NOT_FOUND: u8 = 127;

/// Run a command on CPUs, memory and devices aligned on NUMA nodes,
/// allocated by the agent (or, with --standalone, without one).
#[derive(clap::Args)]
#[command(after_long_help = RUN_HELP)]
pub struct Args {
    /// The agent's socket.
    #[arg(long, value_name = "PATH", default_value = "/run/topoalign/agent.sock")]
    socket: PathBuf,
    /// CPUs: a whole number N for N exclusive CPUs, aligned with the
    /// command's memory and devices; a fraction (0.5, 500m) for a share of
    /// the shared pool.
    #[arg(long, value_name = "N", default_value = "1")]
    cpus: String,
    /// Run on the shared CPU pool even with a whole --cpus (the CPUs
    /// count towards the node's requests, none is the command's alone).
    #[arg(long, conflicts_with = "memory")]
    shared: bool,
    /// Memory to reserve (e.g. 8Gi). Without it, whole CPUs still get
    /// exclusive CPUs: run asks for a nominal 1Mi, which makes the request
    /// one the CPU manager pins (a Guaranteed pod) without reserving
    /// memory the command did not ask for.
    #[arg(long, value_name = "QUANTITY")]
    memory: Option<String>,
    /// 1Gi huge pages (total size, e.g. 4Gi).
    #[arg(long = "hugepages-1Gi", value_name = "QUANTITY")]
    hugepages_1gi: Option<String>,
    /// 2Mi huge pages (total size, e.g. 512Mi).
    #[arg(long = "hugepages-2Mi", value_name = "QUANTITY")]
    hugepages_2mi: Option<String>,
    /// NVIDIA GPUs (resource nvidia.com/gpu); the command sees only these
    /// (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES).
    #[arg(long, value_name = "N")]
    gpus: Option<u32>,
    /// Devices of another resource (repeatable), e.g. example.com/nic=1.
    #[arg(long = "device", value_name = "RESOURCE=N")]
    devices: Vec<String>,
    /// Topology manager policy for this request instead of the node's.
    #[arg(long, value_parser = super::node_args::kubelet_name::<TopologyPolicyName>(TopologyPolicyName::NAMES))]
    policy: Option<TopologyPolicyName>,
    /// A name for the allocation (default: its id).
    #[arg(long)]
    name: Option<String>,
    /// No agent: decide with the engine here, recording the allocation in
    /// --state-dir under a file lock.
    #[arg(long)]
    standalone: bool,
    /// The state directory for --standalone (default:
    /// $XDG_STATE_HOME/topoalign, or /var/lib/topoalign-standalone for root).
    #[arg(long, value_name = "DIR", requires = "standalone")]
    state_dir: Option<PathBuf>,
    /// For --standalone: a node file describing the machine instead of
    /// this one — a scenario, an hwloc XML export, or a sysfs tree or
    /// capture (implies --no-enforce).
    #[arg(long, value_name = "FILE", requires = "standalone")]
    node: Option<PathBuf>,
    /// For --standalone: a KubeletConfiguration file.
    #[arg(long, value_name = "FILE", requires = "standalone")]
    kubelet_config: Option<PathBuf>,
    /// For --standalone: the kubelet release to follow (see `admit`).
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
    /// For --standalone: allocate without pinning.
    #[arg(long, requires = "standalone")]
    no_enforce: bool,
    /// Print nothing about the allocation (errors still go to stderr).
    #[arg(long, short)]
    quiet: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

const RUN_HELP: &str = "\
Examples:
  topoalign run --cpus 4 --memory 8Gi -- ./simulate --steps 1000
  topoalign run --cpus 8 --memory 32Gi --gpus 1 --policy single-numa-node -- python train.py
  topoalign run --standalone --cpus 2 --memory 1Gi -- stress-ng --cpu 2
  topoalign run --cpus 2 -- ./build.sh          # 2 exclusive CPUs
  topoalign run --cpus 2 --shared -- ./build.sh # 2 CPUs' worth of the shared pool
  topoalign run --cpus 0.5 -- ./poll.sh         # half a CPU of the shared pool

The command gets what was decided in its environment (TOPOALIGN_ALLOCATION,
TOPOALIGN_CPUS, TOPOALIGN_EXCLUSIVE, TOPOALIGN_MEMS, TOPOALIGN_DEVICES,
TOPOALIGN_POLICY, TOPOALIGN_ENFORCEMENT, TOPOALIGN_CGROUP); `topoalign verify
--pid PID` reads it back and checks it against the kernel.

Exit status: the command's; 125 if it was not started (no agent, invalid or
rejected request: the explanation is printed); 126 not executable; 127 not
found; 128+N killed by signal N.";

/// Where the allocation comes from.
enum Allocator {
    Agent(Client),
    Standalone(StandaloneNode),
}

struct StandaloneNode {
    state_dir: PathBuf,
    node: Option<PathBuf>,
    kubelet_config: Option<PathBuf>,
    version: super::node_args::KubeletVersionArg,
    enforce: bool,
}

impl StandaloneNode {
    fn open(&self) -> std::result::Result<(topoalign_agent::NodeAgent, topoalign_agent::StateLock), String> {
        let started = super::agent::start_node(self.node.as_deref(), self.kubelet_config.as_deref(), self.version)
            .map_err(|e| e.to_string())?;
        let (mut agent, lock) = topoalign_agent::open(
            started.node.machine().clone(),
            started.node.config().clone(),
            OpenOptions {
                state_dir: &self.state_dir,
                role: Role::Standalone,
                enforce: self.enforce,
                cgroups: true,
                cgroup_parent: "topoalign-standalone",
                procfs: Procfs::default(),
            },
        )
        .map_err(|e| e.to_string())?;
        agent.set_kubelet_configuration(started.kubelet);
        Ok((agent, lock))
    }
}

pub fn run(args: &Args) -> Result {
    let not_started = |message: String| {
        eprintln!("topoalign run: {message}");
        Ok(Outcome::Exit(NOT_STARTED))
    };
    let request = match plain_request(args) {
        Ok(request) => request,
        Err(message) => return not_started(message),
    };
    let allocator = if args.standalone {
        Allocator::Standalone(StandaloneNode {
            state_dir: args.state_dir.clone().unwrap_or_else(default_standalone_dir),
            node: args.node.clone(),
            kubelet_config: args.kubelet_config.clone(),
            version: args.version,
            enforce: !args.no_enforce && args.node.is_none(),
        })
    } else {
        Allocator::Agent(Client::new(Endpoint::Unix(args.socket.clone())))
    };
    let answer = match allocate(&allocator, &request) {
        Ok(answer) => answer,
        Err(message) => return not_started(message),
    };
    let Some(allocation) = answer.allocation.filter(|_| answer.admitted) else {
        eprintln!("topoalign run: not started: {}", answer.explanation.summary);
        for note in &answer.explanation.notes {
            eprintln!("topoalign run: note: {note}");
        }
        for fix in &answer.explanation.fixes {
            eprintln!("topoalign run: fix: {fix}");
        }
        return Ok(Outcome::Exit(NOT_STARTED));
    };
    if !args.quiet {
        eprintln!(
            "topoalign run: allocation {}: CPUs {}{}, memory {}{} ({})",
            allocation.id,
            allocation.cpus,
            if allocation.exclusive {
                " (exclusive)"
            } else {
                " (shared pool)"
            },
            match &allocation.memory_numa {
                Some(nodes) => format!("on NUMA {}", topoalign_enforce::node_list(nodes)),
                None => "not pinned".to_string(),
            },
            allocation
                .devices
                .iter()
                .map(|(r, ids)| format!(", {r} {}", ids.join(",")))
                .collect::<String>(),
            allocation.enforcement,
        );
        for note in &answer.explanation.notes {
            eprintln!("topoalign run: note: {note}");
        }
    }

    let policy = answer.explanation.policy.parse().ok();
    let status = execute(args, &allocation, policy);
    if let Err(message) = release(&allocator, &allocation.id) {
        eprintln!(
            "topoalign run: could not release {} ({message}); it is released once the agent notices this process \
             has exited",
            allocation.id
        );
    }
    Ok(Outcome::Exit(status))
}

/// Runs the command in the allocation; its exit status as `run`'s.
fn execute(args: &Args, allocation: &Allocation, policy: Option<TopologyPolicyName>) -> u8 {
    let Some((program, rest)) = args.command.split_first() else {
        return NOT_STARTED;
    };
    let mut command = Command::new(program);
    command.args(rest);
    command.envs(record_of(allocation, policy).to_env());
    command.envs(topoalign_enforce::visible_devices_env(&allocation.devices));
    // Under cgroups the agent has already moved this process into the
    // allocation's cgroup, and the child inherits it; under `affinity` the
    // child confines itself before exec.
    let affinity = allocation.enforcement == "affinity";
    ChildPlacement {
        cpus: affinity.then(|| allocation.cpus.clone()),
        memory_nodes: allocation.memory_numa.clone().filter(|_| affinity),
        die_with_parent: true,
    }
    .apply_to(&mut command);
    if let Err(error) = topoalign_enforce::kernel::ignore_terminal_signals() {
        eprintln!("topoalign run: cannot ignore terminal signals: {error}");
    }
    let program_name = program.to_string_lossy();
    match command.status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
            (None, None) => 1,
        },
        Err(error) if error.kind() == ErrorKind::NotFound => {
            eprintln!("topoalign run: {program_name}: command not found");
            NOT_FOUND
        }
        Err(error) => {
            eprintln!("topoalign run: cannot execute {program_name}: {error}");
            CANNOT_EXECUTE
        }
    }
}

/// What was decided, for the command's environment (`verify --pid` reads
/// it back).
fn record_of(allocation: &Allocation, policy: Option<TopologyPolicyName>) -> RunRecord {
    RunRecord {
        allocation: allocation.id.clone(),
        cpus: allocation.cpus.clone(),
        exclusive: allocation.exclusive,
        memory_nodes: allocation
            .memory_numa
            .as_ref()
            .map(|nodes| nodes.iter().copied().collect()),
        devices: allocation.devices.clone(),
        policy,
        enforcement: Some(allocation.enforcement.clone()),
        cgroup: allocation.cgroup.clone(),
    }
}

/// The memory a whole-CPU request without --memory asks for: enough to
/// make it Guaranteed (the CPU manager pins only those), nothing more.
const NOMINAL_MEMORY: &str = "1Mi";

/// The plain request for the agent, held by this process.
fn plain_request(args: &Args) -> std::result::Result<Value, String> {
    let mut request = Map::new();
    request.insert("cpus".into(), json!(args.cpus));
    // A whole number of CPUs means that many exclusive CPUs, as bare-metal
    // users expect; the kubelet's rule (only a Guaranteed pod gets them)
    // is met with a nominal memory request. --shared opts out.
    let whole = topoalign_k8s::parse_quantity(args.cpus.trim()).is_ok_and(|q| q.is_whole());
    match &args.memory {
        Some(memory) => {
            request.insert("memory".into(), json!(memory));
        }
        None if whole && !args.shared => {
            request.insert("memory".into(), json!(NOMINAL_MEMORY));
        }
        None => {}
    }
    let mut hugepages = Map::new();
    if let Some(q) = &args.hugepages_1gi {
        hugepages.insert("1Gi".into(), json!(q));
    }
    if let Some(q) = &args.hugepages_2mi {
        hugepages.insert("2Mi".into(), json!(q));
    }
    if !hugepages.is_empty() {
        request.insert("hugepages".into(), Value::Object(hugepages));
    }
    let mut devices = Map::new();
    if let Some(gpus) = args.gpus {
        devices.insert("nvidia.com/gpu".into(), json!(gpus));
    }
    for entry in &args.devices {
        let (resource, count) = entry
            .split_once('=')
            .and_then(|(r, n)| Some((r, n.parse::<u32>().ok()?)))
            .ok_or_else(|| format!("--device {entry:?}: expected RESOURCE=N, e.g. example.com/nic=1"))?;
        devices.insert(resource.to_string(), json!(count));
    }
    if !devices.is_empty() {
        request.insert("devices".into(), Value::Object(devices));
    }
    if let Some(policy) = &args.policy {
        request.insert("policy".into(), json!(policy.as_str()));
    }
    if let Some(name) = &args.name {
        request.insert("name".into(), json!(name));
    }
    request.insert("pid".into(), json!(std::process::id()));
    Ok(Value::Object(request))
}

fn allocate(allocator: &Allocator, request: &Value) -> std::result::Result<AdmitResponse, String> {
    match allocator {
        Allocator::Agent(client) => client.admit(request).map_err(|e| match e {
            ClientError::Connect { endpoint, source } => format!(
                "cannot reach the agent at {endpoint} ({source}); is `topoalign agent` running? (or use --standalone)"
            ),
            other => other.to_string(),
        }),
        Allocator::Standalone(node) => {
            let body = serde_json::to_vec(request).map_err(|e| e.to_string())?;
            let workload = read_body(&body, false, &AdmitOptions::default()).map_err(|e| e.0)?;
            let (mut agent, _lock) = node.open()?;
            agent.admit(&workload).map_err(|e| e.to_string())
        }
    }
}

fn release(allocator: &Allocator, id: &str) -> std::result::Result<(), String> {
    match allocator {
        Allocator::Agent(client) => client.release(id).map(|_| ()).map_err(|e| e.to_string()),
        Allocator::Standalone(node) => {
            let (mut agent, _lock) = node.open()?;
            agent.release(id).map(|_| ()).map_err(|e| e.to_string())
        }
    }
}

fn default_standalone_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Path::new(&dir).join("topoalign");
    }
    // std has no geteuid; /proc/self belongs to the effective uid.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if root {
        return PathBuf::from("/var/lib/topoalign-standalone");
    }
    match std::env::var_os("HOME") {
        Some(home) => Path::new(&home).join(".local/state/topoalign"),
        None => PathBuf::from(".topoalign-state"),
    }
}

//! `topoalign agent`: the node agent daemon — durable allocations, an
//! HTTP/JSON API on a Unix socket, enforcement, metrics.
//!
//! This file parses the arguments, starts the node through
//! `topoalign-intake`, sets up logging and the runtime, and hands over to
//! `topoalign-agent`; with `--nrt-publish` / `--nrt-file` it installs
//! `topoalign-nrt-publisher`'s delivery pipeline as the agent's change
//! listener (throttled, failures logged and retried; allocations never
//! wait for it). Exit status: 0 after a graceful shutdown (SIGTERM or
//! SIGINT), 2 when it cannot start on this input (unreadable file, a
//! configuration the kubelet refuses, damaged state, a state directory or
//! socket in use), 1 when serving fails.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use topoalign_agent::{OpenOptions, Role, ServeConfig};
use topoalign_enforce::Procfs;
use topoalign_intake::{NodeInputs, Overrides, StartedNode, WithoutConfig};
use topoalign_nrt_publisher::pipeline;

use super::{Error, Outcome, Result};

/// Own the node's CPU, memory and device allocations: admit workloads
/// exactly as the kubelet would, keep every allocation on disk before
/// answering, pin what runs (cpuset cgroups, or CPU affinity and memory
/// policy), and serve it all over HTTP/JSON.
#[derive(clap::Args)]
#[command(after_long_help = AGENT_HELP)]
pub struct Args {
    /// The Unix socket to serve on; created with mode 0600, so only its
    /// owner (root, for the default) may allocate.
    #[arg(long, value_name = "PATH", default_value = "/run/topoalign/agent.sock")]
    socket: PathBuf,
    /// Where the allocations are kept: a checksummed journal, synced to
    /// disk before every answer. One agent per directory.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/topoalign")]
    state_dir: PathBuf,
    /// Serve the machine a node file describes instead of discovering this
    /// one: a scenario (its `topology:` block, and its `kubelet:` block
    /// unless --kubelet-config is given; its events are not replayed), an
    /// hwloc XML export, or a sysfs tree or capture. Implies --no-enforce.
    #[arg(long, value_name = "FILE")]
    node: Option<PathBuf>,
    /// A KubeletConfiguration file (YAML): topology, CPU and memory manager
    /// policies, scope, options, reservations. Without one: the --node
    /// file's kubelet block, else static CPU manager, best-effort topology
    /// policy, the lowest CPU reserved.
    #[arg(long, value_name = "FILE")]
    kubelet_config: Option<PathBuf>,
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
    /// Record and serve allocations without pinning anything.
    #[arg(long)]
    no_enforce: bool,
    /// Enforce even with --node (the file must then describe this machine,
    /// with its real CPU and NUMA node ids).
    #[arg(long, conflicts_with = "no_enforce")]
    enforce: bool,
    /// Never use cgroups: `topoalign run` confines commands with CPU
    /// affinity and memory policy instead (the fallback where cgroups are
    /// not writable, e.g. when another manager owns the cpuset hierarchy).
    #[arg(long, conflicts_with = "no_enforce")]
    no_cgroups: bool,
    /// Also serve on this TCP address (e.g. 127.0.0.1:7787); every request
    /// must carry `Authorization: Bearer <token>`.
    #[arg(long, value_name = "ADDR", requires = "token_file")]
    listen: Option<SocketAddr>,
    /// The file holding the bearer token for --listen.
    #[arg(long, value_name = "FILE", requires = "listen")]
    token_file: Option<PathBuf>,
    /// The cgroup, directly under the cpuset hierarchy's root, that holds
    /// one `alloc-<id>` cgroup per allocation.
    #[arg(long, value_name = "NAME", default_value = "topoalign")]
    cgroup_parent: String,
    /// Seconds between checks for allocations whose process has exited.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    reconcile_interval: u64,
    /// Publish the node's NodeResourceTopology object to the API server
    /// (server-side apply; $KUBECONFIG or ~/.kube/config, else the
    /// in-cluster service account),
    /// after every allocation change. The CRD must be installed
    /// (deploy/noderesourcetopology-crd.yaml).
    #[arg(long)]
    nrt_publish: bool,
    /// Write the node's NodeResourceTopology object (YAML) to this file,
    /// replaced atomically after every allocation change; `-` writes one
    /// YAML document per change to standard output.
    #[arg(long, value_name = "PATH")]
    nrt_file: Option<PathBuf>,
    /// The NodeResourceTopology object's name: the Kubernetes node name.
    /// Default: this machine's hostname.
    #[arg(long, value_name = "NAME")]
    nrt_node_name: Option<String>,
    /// At most one NodeResourceTopology update per this many milliseconds
    /// (per destination; the latest state wins, failures are retried after
    /// it).
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..))]
    nrt_interval: u64,
    /// Leave topoalign's exact-state attributes (machine, kubelet
    /// configuration, pods and placements) out of the NodeResourceTopology
    /// object.
    #[arg(long)]
    nrt_no_exact_state: bool,
    /// Log format (the level comes from RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Follow the kubelet instead of allocating: rebuild the node exactly
    /// as the kubelet holds it (its PodResources API, its checkpoint files,
    /// the node's pods), publish that — or, while its sources disagree,
    /// that the state is unknown and why. Allocation requests are refused.
    #[arg(long, conflicts_with_all = ["enforce", "listen", "token_file"])]
    follow_kubelet: bool,
    /// Where the followed kubelet keeps its state (with --follow-kubelet;
    /// without --pods the node's pods come from the API server).
    #[command(flatten)]
    kubelet: super::kubelet_dir::KubeletDirArgs,
    /// Seconds between two reads of the kubelet's sources at most (files
    /// and pods are also re-read when they change).
    #[arg(long, value_name = "SECONDS", default_value_t = 5, requires = "follow_kubelet")]
    resync_interval: u64,
    /// Seconds between two verifications of the running containers'
    /// placement (as `topoalign verify --containers`: metrics
    /// `topoalign_follow_container_placement`, `GET /v1/verdicts`); 0: off.
    /// Needs the host's processes (in a pod: hostPID).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, requires = "follow_kubelet")]
    verify_interval: u64,
    /// Read the host's processes under DIR (DIR/proc and the cgroup mounts
    /// DIR/proc/self/mountinfo names, under DIR) instead of /.
    #[arg(long, value_name = "DIR", requires = "follow_kubelet")]
    verify_root: Option<std::path::PathBuf>,
    /// Post a Kubernetes Event on a pod when one of its containers' verdict
    /// turns drifted, misaligned or memory-spilled (needs create and patch
    /// on events.k8s.io events).
    #[arg(long, requires = "follow_kubelet")]
    events: bool,
    /// Serve the follower's read-only API (health, metrics, topology,
    /// state) on this TCP address, without a token: it changes nothing.
    #[arg(long, value_name = "ADDR", requires = "follow_kubelet")]
    follow_listen: Option<SocketAddr>,
    #[command(flatten)]
    limits: topoalign_serve::LimitArgs,
    #[command(flatten)]
    socket_limits: topoalign_serve::SocketLimitArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

const AGENT_HELP: &str = "\
Examples:
  sudo topoalign agent --kubelet-config /var/lib/kubelet/config.yaml
  topoalign agent --node examples/scenarios/two-socket-gpu.yaml \\
      --socket /tmp/ta.sock --state-dir /tmp/ta-state        # a what-if node, nothing pinned

Then, as the socket's owner:
  topoalign run --socket /tmp/ta.sock --cpus 4 --memory 8Gi -- ./my-job
  curl --unix-socket /tmp/ta.sock http://agent/v1/allocations
  curl --unix-socket /tmp/ta.sock -XPOST http://agent/v1/allocations -d '{\"cpus\": 2, \"memory\": \"1Gi\"}'
  curl --unix-socket /tmp/ta.sock -XDELETE http://agent/v1/allocations/a1

API: GET /v1/topology, GET /v1/allocations[/{id}], POST /v1/allocations (a Pod
manifest, JSON or YAML, or a plain request {cpus, memory, hugepages, devices,
policy, pid, name}), DELETE /v1/allocations/{id}, POST /v1/reconcile,
GET /healthz, GET /metrics.

NodeResourceTopology: --nrt-publish (server-side apply; in-cluster config or
kubeconfig) and/or --nrt-file PATH (YAML, replaced atomically; - for stdout),
updated after every allocation change, at most once per --nrt-interval ms.

Following a kubelet (a DaemonSet beside it; deploy/topoalign-follower.yaml):
  topoalign agent --follow-kubelet --nrt-publish --nrt-node-name \"$NODE_NAME\" \
      --socket /run/topoalign/follower.sock --follow-listen 0.0.0.0:7788
reads the PodResources API, the checkpoint files under --kubelet-dir and
the node's pods (API server, or --pods), and publishes the kubelet's exact
state, or an object saying why it is unknown now. It never allocates.

An allocation with a pid is released when that process has exited and its
cgroup is empty. A damaged state file stops the agent with a report of what
survives; it is never reset silently.";

pub fn run(args: &Args) -> Result {
    init_logging(args.log_format);
    if args.follow_kubelet {
        return follow(args);
    }
    if args.kubelet.any_given() {
        return Err(Error::bad_input(
            "--kubelet-dir, --pod-resources and --pods read a kubelet: they need --follow-kubelet",
        ));
    }
    let started = start_node(args.node.as_deref(), args.kubelet_config.as_deref(), args.version)?;
    if started.ignored_events > 0 {
        // The agent's allocations are its journal's; say so rather than
        // serve a node that silently lacks the scenario's pods.
        eprintln!(
            "topoalign: {}: the scenario's {} pod event(s) are not played: only its topology and kubelet blocks are \
             used; allocations are those in the state directory",
            started.machine_source, started.ignored_events
        );
    }
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let nrt = nrt_plan(args, &started)?;
    let enforce = args.enforce || (!args.no_enforce && args.node.is_none());
    // The notes carry the node's start hazards (a kubelet that crashes
    // on pods, NUMA ids past 63): served and published all the same.
    for note in &started.notes {
        tracing::warn!(%note, "node");
    }
    tracing::info!(machine = %started.machine_source, enforce, "starting");
    let node = &started.node;
    let (mut agent, _lock) = topoalign_agent::open(
        node.machine().clone(),
        node.config().clone(),
        OpenOptions {
            state_dir: &args.state_dir,
            role: Role::Agent,
            enforce,
            cgroups: !args.no_cgroups,
            cgroup_parent: &args.cgroup_parent,
            procfs: Procfs::default(),
        },
    )
    .map_err(Error::bad_input)?;
    agent.set_kubelet_configuration(started.kubelet.clone());
    let serve_config = ServeConfig {
        socket: Some(args.socket.clone()),
        limits: listener_limits(args, args.listen.is_some()),
        tcp: args.listen.zip(token),
        reconcile_every: Duration::from_secs(args.reconcile_interval.max(1)),
    };
    let runtime = runtime()?;
    runtime.block_on(async {
        let shutdown = topoalign_agent::termination_signal().context("cannot install signal handlers")?;
        let publishing = match nrt {
            None => None,
            Some(plan) => {
                let (publishing, listener) = pipeline::start(plan)
                    .await
                    .map_err(|e| Error::bad_input(format!("--nrt-publish: {e}")))?;
                agent.on_change(listener);
                Some(publishing)
            }
        };
        let served = topoalign_agent::serve(agent, serve_config, shutdown).await;
        if let Some(publishing) = publishing {
            // The agent (and with it the change listener) is gone: deliver
            // the last state, but do not hang on an unreachable server.
            publishing.finish(Duration::from_secs(5)).await;
        }
        match served {
            Ok(()) => Ok(Outcome::Success),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => Err(Error::bad_input(error)),
            Err(error) => Err(anyhow::Error::new(error).context("serving failed").into()),
        }
    })
}

/// The listeners' limits from the flags, their connection caps fitted to
/// the open-file limit (raised where it can be; a lowered cap is logged).
fn listener_limits(args: &Args, tcp: bool) -> topoalign_serve::ListenerLimits {
    let mut limits = args.limits.with_socket(&args.socket_limits);
    let lowered = if tcp {
        topoalign_serve::fit_to_descriptors(&mut [&mut limits.socket, &mut limits.tcp])
    } else {
        topoalign_serve::fit_to_descriptors(&mut [&mut limits.socket])
    };
    if let Some(message) = lowered {
        tracing::warn!("{message}");
    }
    limits
}

/// `--follow-kubelet`: the node from this machine (or --node) and the
/// kubelet's configuration, then `topoalign-follow`'s daemon.
fn follow(args: &Args) -> Result {
    let kubelet_dir = args.kubelet.dir();
    let kubelet_config = match &args.kubelet_config {
        Some(path) => Some(path.clone()),
        None => kubelet_dir
            .config_file()
            .map_err(|e| Error::bad_input(format!("--kubelet-dir {e}")))?,
    };
    let started = start_node(args.node.as_deref(), kubelet_config.as_deref(), args.version)?;
    // The notes carry the node's start hazards (a kubelet that crashes
    // on pods, NUMA ids past 63): served and published all the same.
    for note in &started.notes {
        tracing::warn!(%note, "node");
    }
    let node_name = match &args.nrt_node_name {
        Some(name) => name.clone(),
        None => pipeline::hostname().map_err(Error::bad_input)?,
    };
    let publish = nrt_plan(args, &started)?.map(|mut plan| {
        let spec = plan.exact_state.take();
        (plan, spec)
    });
    tracing::info!(
        machine = %started.machine_source,
        kubelet = %started.kubelet_source,
        node = %node_name,
        "following the kubelet"
    );
    let config = topoalign_follow::run::RunConfig {
        base: started.node,
        root_dir: kubelet_dir.root().to_path_buf(),
        pod_resources_socket: kubelet_dir.socket().to_path_buf(),
        pods_file: args.kubelet.pods.clone(),
        node_name,
        resync: Duration::from_secs(args.resync_interval.max(1)),
        socket: Some(args.socket.clone()),
        listen: args.follow_listen,
        publish,
        limits: listener_limits(args, args.follow_listen.is_some()),
        verify: (args.verify_interval > 0).then(|| topoalign_follow::verify::VerifyConfig {
            host: args
                .verify_root
                .as_ref()
                .map_or_else(topoalign_host::Host::live, topoalign_host::Host::under),
            interval: Duration::from_secs(args.verify_interval),
        }),
        events: args.events,
    };
    let runtime = runtime()?;
    runtime.block_on(async {
        let shutdown = topoalign_agent::termination_signal().context("cannot install signal handlers")?;
        match topoalign_follow::run::run(config, shutdown).await {
            Ok(()) => Ok(Outcome::Success),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => Err(Error::bad_input(error)),
            Err(error) => Err(anyhow::Error::new(error).context("following the kubelet failed").into()),
        }
    })
}

/// The daemons' runtime: two workers (the agent's work is small; the
/// machine is the workloads').
fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?)
}

/// The node the agent (or `run --standalone`) serves: `--node` (any node
/// file; a scenario's events are not replayed, the journal holds the
/// node's history) or this machine, `--kubelet-config`, else a scenario's
/// kubelet block, else the agent's defaults.
///
/// # Errors
/// The intake's error, naming the file.
pub fn start_node(
    node: Option<&Path>,
    kubelet_config: Option<&Path>,
    version: super::node_args::KubeletVersionArg,
) -> Result<StartedNode> {
    let overrides = Overrides {
        kubelet_version: version.kubelet_version,
        ..Overrides::default()
    };
    let inputs = NodeInputs {
        without_config: WithoutConfig::AgentDefaults,
        ..NodeInputs::new(node, kubelet_config, &overrides)
    };
    Ok(topoalign_intake::start(&inputs)?)
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second initialisation (tests in one process) is harmless.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Reads the bearer token. A token file other users can read (or
/// write) is refused, like ssh refuses such keys: anyone on the machine
/// could then allocate; one only its group can read gets a warning.
fn read_token(path: &Path) -> Result<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path)
        .map_err(|e| Error::bad_input(format!("cannot read the token file {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o026 != 0 || mode & 0o004 != 0 {
        return Err(Error::bad_input(format!(
            "the token file {} is readable or writable by other users (mode {:04o}): `chmod 600` it \
             (for a Kubernetes Secret volume, defaultMode: 0400)",
            path.display(),
            mode & 0o7777
        )));
    }
    if mode & 0o040 != 0 {
        tracing::warn!(file = %path.display(), mode = format!("{:04o}", mode & 0o7777), "the token file is readable by its group");
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::bad_input(format!("cannot read the token file {}: {e}", path.display())))?;
    let token = text.trim().to_string();
    if token.len() < 16 || token.contains(char::is_whitespace) {
        return Err(Error::bad_input(format!(
            "{}: the token must be one word of at least 16 characters (e.g. `openssl rand -hex 32`)",
            path.display()
        )));
    }
    Ok(token)
}

fn nrt_plan(args: &Args, started: &StartedNode) -> Result<Option<pipeline::Plan>> {
    if !args.nrt_publish && args.nrt_file.is_none() {
        return Ok(None);
    }
    if let Some(file) = args.nrt_file.as_deref().filter(|f| f.as_os_str() != "-") {
        // The file is replaced atomically through a sibling temporary file:
        // without its directory every update would fail and be retried
        // forever, so say so now.
        let parent = match file.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            return Err(Error::bad_input(format!(
                "--nrt-file {}: the directory {} does not exist (create it first)",
                file.display(),
                parent.display()
            )));
        }
    }
    let node_name = match &args.nrt_node_name {
        Some(name) => name.clone(),
        None => pipeline::hostname().map_err(Error::bad_input)?,
    };
    let spec = (!args.nrt_no_exact_state).then(|| topoalign_nrt::NodeSpec {
        topology: topoalign_nrt::topology_spec(started.node.machine()),
        kubelet: started.kubelet.clone(),
    });
    Ok(Some(pipeline::Plan {
        node_name,
        exact_state: spec,
        publish: args.nrt_publish,
        file: args.nrt_file.clone(),
        interval: Duration::from_millis(args.nrt_interval),
    }))
}

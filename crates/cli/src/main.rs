//! The `topoalign` binary: a thin layer that parses arguments, reads files
//! (through `topoalign-intake`), calls the libraries and prints.
//!
//! Exit codes (from [`Error::exit_code`] and [`Outcome`]): 0 success; 1 an
//! unexpected failure (writing the output, starting the runtime, serving);
//! 2 bad input — a file that cannot be read, a malformed document, a
//! configuration the kubelet would refuse to start with — or an answer
//! that is a refusal (`replay` of a configuration the kubelet refuses,
//! `diagnose` of state it would not restart with). `run` exits with its
//! command's status (see its docs).

mod commands;
mod plot;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use commands::{Error, Outcome};

/// jemalloc, not the system's malloc: the extender's start restores
/// thousands of nodes, each keeping a few hundred kilobytes in thousands
/// of small blocks, and glibc's malloc spends most of that start in the
/// kernel (page faults): 5,000 nodes on two cores took 4.2–4.9 s with
/// glibc, 3.0–3.1 s with jemalloc, 3.8–5.7 s with mimalloc (`restore_once`,
/// one busy machine, one session). The examples and benchmarks that time
/// this binary's work
/// (`crates/extender/examples/restore_once.rs`,
/// `crates/cli/tests/follower_bench.rs`) set the same allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Align CPUs, memory and devices on NUMA nodes exactly as the kubelet's
/// Topology Manager would, and explain every decision.
#[derive(Parser)]
// Help wraps at the terminal's width, at most 100 columns (clap's
// `wrap_help`); docs/reference/ is this help at 100 columns
// (crates/cli/tests/reference_docs.rs).
#[command(name = "topoalign", version, about, long_about = None, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Play a scenario (docs/scenario.md) exactly as the kubelet would.
    Replay(commands::replay::Args),
    /// Would the kubelet admit these pods on this node, and on what CPUs,
    /// NUMA nodes and devices? Explains rejections, with fixes.
    Admit(commands::admit::Args),
    /// Like admit, with the full explanation for every pod: per-NUMA free vs
    /// requested, hints in words, the policy's rule, checked fixes.
    /// `explain pod/NAME [-n NS]` asks the live cluster: every node's
    /// answer, then the cheapest verified fix.
    Explain(commands::explain::Args),
    /// The live cluster per node and NUMA node: free, stranded, held by
    /// whom (also `kubectl topoalign nodes`).
    Nodes(commands::cluster::NodesArgs),
    /// Read a node's kubelet state (cpu_manager_state, memory_manager_state,
    /// checksums verified), show who holds what on which NUMA node, and
    /// explain pods against it.
    Diagnose(commands::diagnose::Args),
    /// Discover a machine (this one, a sysfs capture, an hwloc XML file or a
    /// scenario) and show it: text, JSON/YAML, a scenario, or a picture.
    Topology(commands::topology::Args),
    /// The node agent: owns allocations durably, pins them (cgroups or
    /// affinity), serves an HTTP/JSON API on a Unix socket, exports metrics.
    Agent(commands::agent::Args),
    /// Run a command on aligned CPUs, memory and devices from the agent
    /// (or --standalone); exits with the command's status.
    Run(commands::run::Args),
    /// Place a workload over a fleet under each policy with three
    /// schedulers (topology-unaware, NRT-approximate, exact) and compare.
    Simulate(commands::simulate::Args),
    /// Register a fleet's nodes with an API server and admit the pods bound
    /// to them exactly as their kubelets would (statuses, NRT objects).
    SimulateNodes(commands::simulate_nodes::Args),
    /// For pods waiting for a node, the fewest evictions (by priority,
    /// within PodDisruptionBudgets) after which their kubelets admit them,
    /// verified by replay; stranded capacity per NUMA node. `--evict`
    /// carries the plan out on a live cluster.
    Defrag(commands::defrag::Args),
    /// Serve the kube-scheduler extender API with the engine's answers.
    Extender(commands::extender::Args),
    /// Write nodes' NodeResourceTopology (v1alpha2) objects.
    Nrt(commands::nrt::Args),
    /// Serve a live web page of the cluster: every node's machine with its
    /// pods' CPUs, memory and devices, stranded capacity, waiting pods
    /// explained.
    Serve(commands::serve::Args),
    /// Proof of placement: what the kernel applies to processes (CPUs,
    /// memory per NUMA node, devices) against what was decided and promised.
    Verify(commands::verify::Args),
    /// Test tooling: play a kubelet's observable side (checkpoint files,
    /// PodResources API, pods file) from adds and deletes on stdin.
    #[command(hide = true)]
    KubeletStandIn(commands::kubelet_stand_in::Args),
}

fn main() -> ExitCode {
    match try_main() {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Refused) => ExitCode::from(2),
        Ok(Outcome::Rejected) => ExitCode::from(3),
        Ok(Outcome::Exit(status)) => ExitCode::from(status),
        Err(error) => {
            eprintln!("topoalign: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

fn try_main() -> Result<Outcome, Error> {
    match commands::cluster::parse_cli::<Cli>().command {
        Command::Replay(args) => commands::replay::run(&args),
        Command::Admit(args) => commands::admit::run(&args),
        Command::Explain(args) => commands::explain::run(&args),
        Command::Nodes(args) => commands::cluster::nodes(&args),
        Command::Diagnose(args) => commands::diagnose::run(&args),
        Command::Topology(args) => commands::topology::run(&args),
        Command::Agent(args) => commands::agent::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Simulate(args) => commands::simulate::run(&args),
        Command::SimulateNodes(args) => commands::simulate_nodes::run(&args),
        Command::Defrag(args) => commands::defrag::run(&args),
        Command::Extender(args) => commands::extender::run(&args),
        Command::Nrt(args) => commands::nrt::run(&args),
        Command::Serve(args) => commands::serve::run(&args),
        Command::Verify(args) => commands::verify::run(&args),
        Command::KubeletStandIn(args) => commands::kubelet_stand_in::run(&args),
    }
}

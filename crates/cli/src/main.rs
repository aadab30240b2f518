//! The `topoalign` binary: a thin layer that parses arguments, reads files,
//! calls the libraries and prints. Exit codes: 0 success, 1 an unexpected
//! failure (e.g. writing the output), 2 bad input — a file that cannot be
//! read, a malformed scenario, or a configuration the kubelet would refuse
//! to start with. `run` exits with its command's status (see its docs).

mod commands;
mod plot;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Align CPUs, memory and devices on NUMA nodes exactly as the kubelet's
/// Topology Manager would, and explain every decision.
#[derive(Parser)]
#[command(name = "topoalign", version, about, long_about = None)]
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
    Explain(commands::explain::Args),
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
    /// Serve the kube-scheduler extender API with the engine's answers.
    Extender(commands::extender::Args),
    /// Write nodes' NodeResourceTopology (v1alpha2) objects.
    Nrt(commands::nrt::Args),
}

/// How a command ended, mapped to the exit status.
pub enum Outcome {
    Success,
    /// The input was refused (exit 2); the command already printed why.
    BadInput,
    /// Exit with this status (`run`: the command's own).
    Exit(u8),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => commands::replay::run(&args),
        Command::Admit(args) => commands::admit::run(&args),
        Command::Explain(args) => commands::explain::run(&args),
        Command::Diagnose(args) => commands::diagnose::run(&args),
        Command::Topology(args) => commands::topology::run(&args),
        Command::Agent(args) => commands::agent::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Simulate(args) => commands::simulate::run(&args),
        Command::Extender(args) => commands::extender::run(&args),
        Command::Nrt(args) => commands::nrt::run(&args),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(2),
        Ok(Outcome::Exit(status)) => ExitCode::from(status),
        Err(error) => {
            eprintln!("topoalign: {error:#}");
            ExitCode::from(1)
        }
    }
}

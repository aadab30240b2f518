//! The `topoalign` binary: a thin layer that parses arguments, reads files,
//! calls the libraries and prints. Exit codes: 0 success, 1 an unexpected
//! failure (e.g. writing the output), 2 bad input — a file that cannot be
//! read, a malformed scenario, or a configuration the kubelet would refuse
//! to start with.

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
    /// Play a scenario (shared/SCENARIO.md) exactly as the kubelet would.
    Replay(commands::replay::Args),
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => commands::replay::run(&args),
        Command::Simulate(args) => commands::simulate::run(&args),
        Command::Extender(args) => commands::extender::run(&args),
        Command::Nrt(args) => commands::nrt::run(&args),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(2),
        Err(error) => {
            eprintln!("topoalign: {error:#}");
            ExitCode::from(1)
        }
    }
}

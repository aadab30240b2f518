//! `topoalign simulate-nodes`: register a fleet's nodes with an API server
//! and play each node's kubelet with the engine (`topoalign_simnodes`):
//! bound pods admitted in binding order, their status written as the
//! kubelet writes it, deletions released, NRT objects published.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use topoalign_intake::read_fleet;
use topoalign_simnodes::{Admission, Options, Report};

use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The fleet file (the simulator's): its nodes are registered as
    /// `<entry>-0`, `<entry>-1`, …
    #[arg(long, value_name = "FILE")]
    fleet: PathBuf,
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
    /// A kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else the
    /// in-cluster configuration).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Seconds between two renewals of a node's Lease.
    #[arg(long, default_value_t = 10)]
    heartbeat: u64,
    /// Milliseconds between two NodeResourceTopology updates of a node.
    #[arg(long, default_value_t = 500)]
    nrt_interval: u64,
    /// API requests in flight at once.
    #[arg(long, default_value_t = 32)]
    max_in_flight: usize,
    /// Print only the start-up line and errors, not every pod decided.
    #[arg(long)]
    quiet: bool,
    /// Publish the devices of the device-plugin resource RESOURCE through
    /// DRA instead, as driver DRIVER's ResourceSlices (one per node, each
    /// device with `resource.kubernetes.io/numaNode`); a pod with claims
    /// gets the condition `topoalign.io/DRAAligned` saying whether its
    /// devices share a NUMA node with its pinned CPUs and memory. Added to
    /// the fleet file's `dra.drivers`; a resource both name must have the
    /// same driver in both.
    #[arg(long = "dra", value_name = "RESOURCE=DRIVER")]
    dra: Vec<topoalign_simnodes::dra::DraResource>,
}

pub fn run(args: &Args) -> Result {
    let mut fleet = read_fleet(&args.fleet, args.version.kubelet_version)?;
    let input = |e: &dyn std::fmt::Display| Error::bad_input(format!("{}: {e}", args.fleet.display()));
    if !args.dra.is_empty() {
        let block = fleet.dra.get_or_insert_with(Default::default);
        block.add_drivers(&args.dra).map_err(|e| input(&e))?;
    }
    let nodes = topoalign_simnodes::fleet_nodes(&fleet).map_err(|e| input(&e))?;
    if args.nrt_interval < 100 {
        return Err(Error::bad_input("--nrt-interval: at least 100 ms"));
    }
    let options = Options {
        heartbeat: Duration::from_secs(args.heartbeat.max(1)),
        nrt_interval: Duration::from_millis(args.nrt_interval),
        max_in_flight: args.max_in_flight.max(1),
        ..Options::default()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = topoalign_simnodes::connect(args.kubeconfig.as_deref())
            .await
            .map_err(Error::bad_input)?;
        let quiet = args.quiet;
        let report = move |report: Report| match report {
            Report::Ready { nodes } => println!("topoalign simulate-nodes: {nodes} nodes ready"),
            Report::Error(message) => eprintln!("topoalign simulate-nodes: {message}"),
            _ if quiet => {}
            Report::Decided { pod, node, admission } => match admission {
                Admission::Admitted(_) => println!("{node}: admitted {pod}"),
                Admission::Rejected { reason, message } => println!("{node}: rejected {pod}: {reason}: {message}"),
            },
            Report::Released { pod, node } => println!("{node}: released {pod}"),
            Report::Dra { pod, node, alignment } => {
                let verdict = match alignment.aligned {
                    Some(true) => "aligned",
                    Some(false) => "MISALIGNED",
                    None => "unknown",
                };
                println!("{node}: {pod}: DRA devices {verdict}: {}", alignment.message);
            }
        };
        let shutdown = async {
            tokio::signal::ctrl_c().await.ok();
        };
        topoalign_simnodes::run(client, nodes, options, shutdown, report)
            .await
            .map_err(|e| Error::Failed(e.into()))?;
        Ok(Outcome::Success)
    })
}

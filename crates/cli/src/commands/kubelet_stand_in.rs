//! `topoalign kubelet-stand-in` (hidden; test tooling): one kubelet's
//! observable side where no kubelet can run — its checkpoint files, its
//! PodResources API on a Unix socket and the pods file the follower reads
//! as the API server's view — from a node (`--node`, `--kubelet-config`)
//! and a stream of adds and deletes on stdin, one JSON line each
//! (`{"add": <Pod>}`, `{"delete": "<uid>"}`). Each line read is answered
//! with one JSON line on stdout once its files are written (the event,
//! the generation and the node's state record): tests synchronise on
//! those lines. `topoalign_simnodes::stand_in` holds the logic.

use std::path::PathBuf;

use anyhow::Context;
use topoalign_intake::Events;
use topoalign_simnodes::stand_in::{self, DieAtWrite, Layout, Paths, StandIn};

use super::node_args::NodeArgs;
use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    node: NodeArgs,
    /// The kubelet root directory to write the checkpoint files in.
    #[arg(long, value_name = "DIR")]
    root_dir: PathBuf,
    /// Where to serve the PodResources API.
    #[arg(long, value_name = "PATH")]
    pod_resources_socket: PathBuf,
    /// The pods file (a v1 List of the admitted pods).
    #[arg(long, value_name = "FILE")]
    pods_file: PathBuf,
    /// The release whose checkpoint layouts to write: 1.32, 1.36-pod-level
    /// or 1.37.
    #[arg(long, value_name = "RELEASE", default_value = "1.32")]
    checkpoint_layout: String,
    /// Die (abort) in the middle of the N-th file write, the temporary
    /// file half written: a kill at a known point.
    #[arg(long, value_name = "N")]
    die_at_write: Option<u64>,
}

pub fn run(args: &Args) -> Result {
    let layout = Layout::parse(&args.checkpoint_layout).ok_or_else(|| {
        Error::bad_input(format!(
            "--checkpoint-layout {}: expected 1.32, 1.36-pod-level or 1.37",
            args.checkpoint_layout
        ))
    })?;
    let started = args.node.start(Events::Ignore, None)?;
    let paths = Paths {
        root_dir: args.root_dir.clone(),
        pods_file: args.pods_file.clone(),
    };
    let (stand_in, restored) =
        StandIn::start(started.node, layout, paths, DieAtWrite(args.die_at_write)).map_err(Error::bad_input)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let input = tokio::io::BufReader::new(tokio::io::stdin());
        stand_in::run(stand_in, restored, &args.pod_resources_socket, input, std::io::stdout())
            .await
            .map_err(Error::bad_input)
    })?;
    Ok(Outcome::Success)
}

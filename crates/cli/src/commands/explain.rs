//! `topoalign explain POD.yaml [more.yaml …]`: `admit` with the
//! explanation for every pod — per-NUMA free vs requested, each provider's
//! hints and the merged hint in words, the policy's rule, and fixes checked
//! by running the engine again. A rejection is what it was asked to
//! explain, so it exits 0 after explaining one; `admit` is the command
//! whose status says whether every pod was admitted (3 when not).
//!
//! Pods with `spec.resourceClaims` are explained on the DRA side too when
//! the node scenario has a `dra:` block or `--dra FILE` gives the
//! cluster's DRA objects (`dra_input`): the devices the scheduler's
//! allocator picks per request beside the kubelet's NUMA nodes, and checked
//! fixes (`topoalign_explain::dra`).
//!
//! `topoalign explain pod/NAME [-n NS]` asks a live cluster instead
//! (`cluster`: per node, then the cheapest verified fix).

use super::Outcome;

// No argument group of its own: admit's `Args` already makes one of that
// name, and clap refuses two.
#[derive(clap::Args)]
#[group(skip)]
pub struct Args {
    #[command(flatten)]
    pub admit: super::admit::Args,
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArgs,
}

pub fn run(args: &Args) -> super::Result {
    if let Some(name) = super::cluster::pod_argument(&args.admit.pods) {
        return super::cluster::explain_pod(name, &args.cluster, &args.admit.output, args.admit.explain);
    }
    match super::admit::run_with(&args.admit, true)? {
        Outcome::Rejected => Ok(Outcome::Success),
        other => Ok(other),
    }
}

//! Simulated Kubernetes nodes whose kubelets admit exactly: KWOK's idea
//! (nodes and pod lifecycles without kubelets or containers) with
//! topoalign's engine as each node's kubelet, so any scheduler setup can
//! be tried against exact admission on a real API server.
//!
//! - [`kubelet`]: one node's kubelet as plain state — admission through
//!   the engine, release, and the objects and statuses the kubelet writes;
//! - [`run`](mod@run): the whole fleet against an API server — Node objects,
//!   Leases, NodeResourceTopology objects, one pod watch for all nodes,
//!   paced writes;
//! - [`stand_in`]: one kubelet's observable side for tests of what follows
//!   a kubelet — its checkpoint files, its PodResources API on a Unix
//!   socket, the pods the API server holds — from a stream of adds and
//!   deletes (`topoalign kubelet-stand-in`).
//!
//! - [`dra`]: devices published through DRA (ResourceSlices) instead of
//!   the device plugin, and whether a pod's DRA devices share a NUMA node
//!   with its pinned CPUs and memory;
//! - [`bench`]: the follower benchmark's node and pods, for the benchmarks
//!   and examples that measure following and restoring them.
//!
//! `topoalign simulate-nodes` is the command; this crate holds its logic.

pub mod bench;
pub mod dra;
pub mod kubelet;
pub mod run;
pub mod stand_in;

pub use kubelet::{Admission, CONTAINERS_ANNOTATION, GROUP_LABEL, SimNode};
pub use run::{Options, Report, RunError, run};

/// The nodes of a fleet file, each started empty: `<entry>-0`,
/// `<entry>-1`, … (one engine start per entry; its nodes are copies).
///
/// # Errors
/// A message naming the entry whose kubelet would not start.
pub fn fleet_nodes(fleet: &topoalign_fleet::Fleet) -> Result<Vec<SimNode>, String> {
    let mut nodes = Vec::with_capacity(fleet.node_count());
    for group in &fleet.groups {
        let first = SimNode::start(&group.node_name(0), &group.name, &group.spec)
            .map_err(|e| format!("fleet entry {}: {e}", group.name))?;
        for i in 0..group.count {
            nodes.push(first.renamed(&group.node_name(i)));
        }
    }
    Ok(nodes)
}

/// [`fleet_nodes`] with the devices of `resources` published through DRA
/// ([`dra`]).
///
/// # Errors
/// A message naming the entry whose kubelet would not start.
pub fn fleet_nodes_with_dra(
    fleet: &topoalign_fleet::Fleet,
    resources: &[dra::DraResource],
) -> Result<Vec<SimNode>, String> {
    let mut nodes = Vec::with_capacity(fleet.node_count());
    for group in &fleet.groups {
        let first = SimNode::start_with_dra(&group.node_name(0), &group.name, &group.spec, resources)
            .map_err(|e| format!("fleet entry {}: {e}", group.name))?;
        for i in 0..group.count {
            nodes.push(first.renamed(&group.node_name(i)));
        }
    }
    Ok(nodes)
}

/// A client from `kubeconfig`, else the usual places (in-cluster
/// configuration, `$KUBECONFIG`, `~/.kube/config`).
///
/// # Errors
/// A message naming the file when it cannot be used, or saying that no
/// configuration was found.
pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let problem = |e: &dyn std::fmt::Display| format!("--kubeconfig {}: {e}", path.display());
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| problem(&e))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| problem(&e))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes client configuration: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("cannot make a Kubernetes client: {e}"))
}

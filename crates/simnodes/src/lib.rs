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

/// A fleet as simulated nodes: the nodes, and the DRA objects the
/// cluster needs beside their ResourceSlices.
#[derive(Clone, Debug)]
pub struct SimFleet {
    pub nodes: Vec<SimNode>,
    /// The fleet's `dra.deviceClasses`, applied at start with the slices
    /// (none without a `dra:` block).
    pub device_classes: Vec<k8s_openapi::api::resource::v1::DeviceClass>,
}

/// Why a fleet's nodes cannot be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetNodesError {
    /// An entry's kubelet would not start.
    #[error("fleet entry {entry}: {error}")]
    Start {
        entry: String,
        error: topoalign_nrt::RestoreError,
    },
}

/// The nodes of a fleet file, each started empty: `<entry>-0`,
/// `<entry>-1`, … (one engine start per entry; its nodes are copies).
/// With a `dra:` block, the device-plugin resources of its `drivers` are
/// published through DRA instead ([`dra`]) and its DeviceClasses go with
/// them; a command's `--dra` is laid into the block first
/// ([`topoalign_fleet::dra::FleetDra::add_drivers`]).
///
/// # Errors
/// [`FleetNodesError`] naming the entry whose kubelet would not start.
pub fn fleet_nodes(fleet: &topoalign_fleet::Fleet) -> Result<SimFleet, FleetNodesError> {
    let (drivers, device_classes) = match &fleet.dra {
        Some(block) => (block.drivers.as_slice(), block.objects.device_classes.clone()),
        None => (&[][..], Vec::new()),
    };
    let mut nodes = Vec::with_capacity(fleet.node_count());
    for group in &fleet.groups {
        let first =
            SimNode::start_with_dra(&group.node_name(0), &group.name, &group.spec, drivers).map_err(|error| {
                FleetNodesError::Start {
                    entry: group.name.clone(),
                    error,
                }
            })?;
        for i in 0..group.count {
            nodes.push(first.renamed(&group.node_name(i)));
        }
    }
    Ok(SimFleet { nodes, device_classes })
}

/// Why no Kubernetes client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig file given cannot be read or used.
    #[error("--kubeconfig {}: {error}", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        error: kube::config::KubeconfigError,
    },
    /// None was given and none was found in the usual places.
    #[error("no Kubernetes client configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("cannot make a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A client from `kubeconfig`, else the usual places (in-cluster
/// configuration, `$KUBECONFIG`, `~/.kube/config`).
///
/// # Errors
/// [`ConnectError`] naming the file when it cannot be used, or saying that
/// no configuration was found.
pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let problem = |error| ConnectError::Kubeconfig {
                path: path.to_owned(),
                error,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(problem)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(problem)?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

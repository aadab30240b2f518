//! Fleet what-if for topoalign: place a workload over a fleet of nodes with
//! three schedulers side by side — topology-unaware (the default
//! kube-scheduler), NRT-approximate (NodeResourceTopologyMatch) and exact
//! (topoalign's extender: the engine itself) — under each topology-manager
//! policy, and report what each costs: pods rejected at admission, pods
//! never placed, capacity stranded per NUMA zone, fragmentation.
//!
//! Code map:
//! - [`fleet`]: the fleet file (node shapes × counts); [`dra`]: its nodes'
//!   devices published through DRA, the `--dra-align` verdict;
//! - [`workload`]: the pods and their events; `read`: a workload file
//!   (Kubernetes manifests, through `topoalign_k8s`) → workload;
//!   [`generator`]: synthetic workloads;
//! - [`sim`]: the simulator (runs, state classes, the schedulers' filters);
//! - [`report`]: the result; [`replay`]: the node-by-node replay check.
//!
//! No I/O: callers read files and pass text, and print the report.

pub mod dra;
pub mod fleet;
pub mod generator;
mod read;
pub mod replay;
pub mod report;
pub mod rng;
pub mod sim;
pub mod stranded;
pub mod workload;

pub use fleet::{Fleet, FleetError, MAX_NODES, NodeGroup};
pub use generator::GeneratorError;
pub use replay::{ReplayCounts, ReplayError, replay_check};
pub use report::{DraMisalignedPod, PodOutcome, Report, RunReport};
pub use sim::{Options, RunKey, SimulateError, Simulation, StartError, simulate};
pub use workload::{Event, Workload, WorkloadError};

/// Which scheduler places the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// Any node with enough total capacity (the default kube-scheduler).
    Unaware,
    /// Per-NUMA-zone available counts (NodeResourceTopologyMatch).
    Nrt,
    /// The engine on the node's exact state (topoalign's extender).
    Exact,
}

impl Scheduler {
    /// The report's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheduler::Unaware => "unaware",
            Scheduler::Nrt => "nrt",
            Scheduler::Exact => "exact",
        }
    }
}

/// How the scheduler ranks the nodes that pass its filter (the
/// kube-scheduler's `NodeResourcesFit` scoring on cpu and memory, weights
/// 1, with its default requests for containers that set none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// Spread: emptiest node first (the kube-scheduler default).
    LeastAllocated,
    /// Bin-pack: fullest node first.
    MostAllocated,
}

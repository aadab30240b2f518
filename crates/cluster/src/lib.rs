//! A live cluster, read once and answered across: every Node with the
//! engine node its NodeResourceTopology object describes (exact where
//! topoalign's follower or simulated kubelet publishes the exact state;
//! approximate, unknown, missing or stale said per node), who holds what on
//! each NUMA node, and the pods waiting for a node.
//!
//! - [`snapshot`]: [`ClusterSnapshot`] and [`snapshot::build`], pure;
//! - [`read`]: the API calls (kube-rs) and the client from kubectl's
//!   places and flags ([`Connection`]);
//! - [`answer`]: one pod across the cluster — per node the engine's
//!   verdict in `explain`'s words, and the cheapest verified fix;
//! - [`usage`]: per node and NUMA node, free, stranded and held by whom;
//! - [`dra`]: a node's DRA devices (ResourceSlices, the claims holding
//!   them) and the scheduler's DRA allocator asked on one node.
//!
//! Must not touch: decisions (every answer is an `engine::Node`'s, words
//! are `topoalign-explain`'s), the NRT formats (`topoalign-nrt`'s).

pub mod answer;
pub mod dra;
pub mod read;
pub mod snapshot;
pub mod usage;

pub use answer::{ClusterFix, DraVerdict, NodeVerdict, PodAnswer, Verdict, explain_pod};
pub use dra::{HeldDevice, NodeDevice, NodeDra};
pub use read::{Client, Connection, ReadError, read, read_objects, read_pod};
pub use snapshot::{
    ClusterNode, ClusterPod, ClusterSnapshot, ExactNode, Holding, NodeSource, Objects, PodState, TopologyObject,
    UnreadableObject, build, is_admission_reason,
};
pub use usage::{Held, NodeView, NumaView, nodes_view};

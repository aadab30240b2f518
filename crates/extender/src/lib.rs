//! `topoalign extender`: a kube-scheduler extender that filters and scores
//! nodes with topoalign's engine — the same code as the node — so that a
//! pod the scheduler binds is a pod the node's kubelet admits.
//!
//! Code map:
//! - [`api`]: the `k8s.io/kube-scheduler/extender/v1` wire types;
//! - [`binder`]: creating a pod's Binding where the scheduler delegates
//!   binding (`bindVerb`);
//! - [`cluster`]: node states (fleet file or NRT objects), assumed pods,
//!   `filter` / `prioritize` / `bind`, the answer cache;
//! - [`scoring`]: the four NUMA-zone-level scoring strategies;
//! - [`error`]: [`StateError`], the shared cluster's lock poisoned or its
//!   work panicked;
//! - [`server`]: the HTTP routes (axum), the engine work on blocking
//!   threads;
//! - [`dra`]: `--dra-align`, DRA devices on the NUMA node of the pod's
//!   CPUs and memory (the scheduler's allocator predicted per node);
//! - [`poll`]: reading NRT objects again and again into the cluster
//!   (vanished nodes removed).

pub mod api;
pub mod binder;
pub mod cluster;
pub mod dra;
pub mod error;
pub mod poll;
pub mod scoring;
pub mod server;

pub use cluster::{
    Cluster, ClusterError, ExtenderConfig, FilterOutcome, FleetStartError, NodeWarning, Rebuilt, Starts, SyncReport,
    UnseenPod, WorkerPanic, crash_reason,
};
pub use error::StateError;
pub use scoring::Strategy;

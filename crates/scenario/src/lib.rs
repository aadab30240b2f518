//! The scenario format of docs/scenario.md: reading a scenario, replaying
//! it through the engine exactly as a kubelet would, and the result
//! document.
//!
//! Owns: the document's shape and its error messages, the event loop
//! (adds, deletes by `namespace/name`, resizes), the result document. Must not
//! touch: admission logic (the engine's) or Kubernetes parsing (the k8s
//! crate's); no I/O — callers hand in text and print the result.

mod document;
pub mod dra;
mod replay;
mod result;

pub use document::{
    CpuSpec, DeviceSpec, EventSpec, NumaNodeSpec, ResizeContainerSpec, ResizeResources, ResizeSpec, RestartSpec,
    Scenario, TopologySpec, byte_quantity,
};
pub use replay::{DROPPED_POD_LEVEL, EventOutcome, Replay, ReplayInput, play_events, replay, replay_with};
pub use result::{EventResult, FinalState, Readmission, ResultDocument};
pub use topoalign_engine::MergeStrategy;

/// A scenario that cannot be replayed because it is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The text is not JSON or YAML.
    #[error("not a valid scenario document: {0}")]
    Syntax(String),
    /// A field has a wrong value; `path` is like `events[2].add.spec`.
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

//! The defragmenter's planner: for pods that no node admits now, the
//! fewest evictions after which the kubelet's exact model (the engine, as
//! `replay` and `admit` use it) admits them — never evicting a pod of
//! higher or equal priority than the pending pod it frees room for, never
//! beyond what a PodDisruptionBudget allows — each plan checked by
//! replaying it (the evictions, then the pending pods) through the engine
//! from the state it started from; and the capacity stranded per NUMA
//! node before and after (the simulator's rule, `topoalign_fleet::stranded`).
//!
//! Code map:
//! - [`plan`](mod@plan): the search and its bound, the replay check, the
//!   result document;
//! - [`budget`]: PodDisruptionBudgets (selectors, allowed disruptions);
//! - [`input`]: a fleet state from Pod manifests (priority, evictability,
//!   budget membership) — shared by the fleet document and live clusters;
//! - [`document`]: the offline document (a fleet file with `pods`,
//!   `disruptionBudgets`, `priorityClasses`);
//! - `live` (feature `live`): the input from a live cluster's snapshot and
//!   budgets, and the plan carried out through the Eviction API — the one
//!   module that talks to an API server.
//!
//! Pure without the `live` feature: no I/O. Callers read files or the cluster, pass text or objects,
//! and print or perform the plan. Must not touch: admission decisions (the
//! engine's).

pub mod budget;
pub mod document;
pub mod input;
#[cfg(feature = "live")]
pub mod live;
pub mod plan;

pub use budget::{BudgetError, BudgetSpec, Selector};
pub use document::{DocumentError, parse_document};
pub use input::{DraCounts, DraDevices, FleetNode, FleetState, InputError, PendingPod, RunningPod, assemble};
pub use plan::{Limits, Plan, plan};

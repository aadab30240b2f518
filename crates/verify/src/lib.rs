//! Proof of placement: does the kernel apply what was decided, and does it
//! keep what the topology manager policy promised?
//!
//! Owns: the facts about one process or container as plain values —
//! [`Applied`] (what the kernel applies: CPUs, memory nodes, resident pages
//! per NUMA node, visible devices), [`Decided`] (what `topoalign run` or the
//! kubelet decided, with the policy that promised alignment), the machine's
//! [`NumaLayout`] — and the judgement [`judge`] → [`Report`] with its
//! [`Verdict`] and [`Finding`]s, summed up per node by [`Summary`]. Also
//! [`run_record`]: how `topoalign run` leaves its decision in the command's
//! environment, so that `verify --pid` finds it again.
//!
//! Must not touch: files, `/proc`, cgroupfs (the caller reads them, through
//! `topoalign-host`; `topoalign_observe::containers` turns what it reads
//! into [`Applied`] and a container's allocation into [`Decided`]), the
//! kubelet's checkpoints.

pub mod run_record;

mod facts;
mod judge;

pub use facts::{
    Applied, AppliedDevices, CgroupCpuset, Decided, DecidedCpus, DecidedDevice, DeviceSource, MemoryByNode, NodeSet,
    NumaLayout, VisibleDevice, nodes_text,
};
pub use judge::{Finding, Placement, Report, Subject, Summary, Verdict, judge};

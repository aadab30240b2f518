//! Making an allocation real on a Linux host: the one topoalign crate that
//! talks to the kernel.
//!
//! Owns:
//! - [`cgroup`]: cpuset cgroups — finding the hierarchy the host mounts
//!   (cgroup v2, or the v1 `cpuset` controller on hybrid hosts), one parent
//!   cgroup for topoalign and one leaf per allocation, with names that can
//!   never escape the parent;
//! - [`kernel`]: the raw system calls — `sched_setaffinity`,
//!   `set_mempolicy(MPOL_BIND)`, signal dispositions — the fallback where
//!   cgroups are not writable;
//! - [`spawn`]: starting a command inside an allocation (affinity, memory
//!   policy and parent-death signal applied between `fork` and `exec`);
//! - [`process`]: which process holds an allocation, robust against pid
//!   reuse and reboots;
//! - [`gpu`]: the environment that makes only the allocated GPUs visible;
//!
//! The read side — what the kernel applies to a process — is
//! `topoalign-host` (the follower and `verify` read it without linking
//! this crate); [`cgroup::CgroupVersion`] is its.
//!
//! Must not touch: allocation decisions (the engine's), the agent's state.
//! Every `unsafe` block lives here and says why it is sound.

pub mod cgroup;
pub mod gpu;
pub mod kernel;
pub mod process;
pub mod spawn;

pub use cgroup::{CgroupError, CgroupVersion, CpusetMount, Cpusets, LeafName};
pub use gpu::visible_devices_env;
pub use process::{ProcessIdentity, Procfs};
pub use spawn::ChildPlacement;

/// A NUMA node list in the kernel's list syntax (`0-1,3`), as `cpuset.mems`
/// and `Mems_allowed_list` write it.
pub fn node_list(nodes: &[usize]) -> String {
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut pieces = Vec::new();
    let mut index = 0;
    while index < sorted.len() {
        let start = sorted[index];
        let mut end = start;
        while index + 1 < sorted.len() && sorted[index + 1] == end + 1 {
            index += 1;
            end = sorted[index];
        }
        pieces.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        index += 1;
    }
    pieces.join(",")
}

#[cfg(test)]
mod tests {
    use super::node_list;

    #[test]
    fn node_lists_read_like_the_kernels() {
        for (nodes, expected) in [
            (vec![], ""),
            (vec![0], "0"),
            (vec![0, 1], "0-1"),
            (vec![3, 0, 1], "0-1,3"),
            (vec![0, 2, 4, 5, 6], "0,2,4-6"),
            (vec![1, 1], "1"),
        ] {
            assert_eq!(node_list(&nodes), expected, "{nodes:?}");
        }
    }
}

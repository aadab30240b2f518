//! [`CpuTopology`]: the CPU manager's view of the machine (the kubelet's
//! `topology.CPUTopology`): for each logical CPU its core, socket, NUMA node
//! and uncore cache, where a core is named by its lowest logical CPU id.

/// The CPU manager's view of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    _private: (),
}

//! How the agent makes allocations real, chosen once at start-up.
//!
//! Owns: the choice between cpuset cgroups, the affinity fallback and no
//! enforcement ([`Enforcement::choose`]), and mapping allocation ids to
//! cgroup operations. Must not touch: which CPUs an allocation gets (the
//! ledger's) — this module only applies what it is given.
//!
//! - `cgroup-v2` / `cgroup-v1`: one leaf cgroup per allocation with its
//!   CPUs and memory nodes; the holding process is moved in, and whatever
//!   it starts inherits the leaf. Shared-pool allocations are updated as
//!   the pool shrinks and grows.
//! - `affinity`: where cgroups are not writable (not root, no delegation),
//!   the launcher (`topoalign run`) sets `sched_setaffinity` and
//!   `set_mempolicy(MPOL_BIND)` on the command before `exec`; the agent
//!   itself touches no process.
//! - `none`: `--no-enforce`, or `--node` (a machine other than this one).

use std::path::PathBuf;

use topoalign_enforce::{CgroupError, Cpusets, LeafName, Procfs};
use topoalign_model::CpuSet;

/// The enforcement in force.
#[derive(Debug)]
pub enum Enforcement {
    /// Nothing is enforced; `reason` says why.
    Off {
        reason: String,
    },
    /// The launcher applies affinity and memory policy; `reason` says why
    /// cgroups are not used.
    Affinity {
        reason: String,
    },
    Cgroups(Cpusets),
}

impl Enforcement {
    /// Cgroups when `cgroups` allows them and the cpuset hierarchy is
    /// writable here, otherwise the affinity fallback; [`Enforcement::Off`]
    /// when `enforce` is false.
    pub fn choose(enforce: bool, cgroups: bool, cgroup_parent: &str, procfs: &Procfs) -> Enforcement {
        if !enforce {
            return Enforcement::Off {
                reason: "enforcement is off (--no-enforce, or --node describes another machine)".into(),
            };
        }
        if !cgroups {
            return Enforcement::Affinity {
                reason: "cgroups are not to be used (--no-cgroups)".into(),
            };
        }
        match Cpusets::detect(procfs.root(), cgroup_parent) {
            Ok(cpusets) => Enforcement::Cgroups(cpusets),
            Err(error) => Enforcement::Affinity {
                reason: format!("cpuset cgroups are not usable here ({error})"),
            },
        }
    }

    /// `cgroup-v2`, `cgroup-v1`, `affinity` or `none`.
    pub fn mode(&self) -> &'static str {
        match self {
            Enforcement::Off { .. } => "none",
            Enforcement::Affinity { .. } => "affinity",
            Enforcement::Cgroups(cpusets) => cpusets.version().as_str(),
        }
    }

    /// Why cgroups are not used, if they are not.
    pub fn fallback_reason(&self) -> Option<&str> {
        match self {
            Enforcement::Off { reason } | Enforcement::Affinity { reason } => Some(reason),
            Enforcement::Cgroups(_) => None,
        }
    }

    /// The leaf cgroup directory of allocation `id`.
    pub fn cgroup_path(&self, id: &str) -> Option<PathBuf> {
        match self {
            Enforcement::Cgroups(cpusets) => LeafName::for_allocation(id).ok().map(|l| cpusets.leaf_path(&l)),
            _ => None,
        }
    }

    /// Sets allocation `id`'s CPUs and memory nodes and, if `pid` is given,
    /// moves that process in. Idempotent.
    ///
    /// # Errors
    /// The cgroup error (e.g. CPUs this host does not have).
    pub fn confine(&self, id: &str, cpus: &CpuSet, mems: &[usize], pid: Option<u32>) -> Result<(), CgroupError> {
        let Enforcement::Cgroups(cpusets) = self else {
            return Ok(());
        };
        let leaf = LeafName::for_allocation(id)?;
        cpusets.apply(&leaf, cpus, mems)?;
        if let Some(pid) = pid {
            cpusets.attach(&leaf, pid)?;
        }
        Ok(())
    }

    /// Removes allocation `id`'s cgroup (processes still in it are moved
    /// back to the root, unconfined).
    ///
    /// # Errors
    /// The cgroup error.
    pub fn remove(&self, id: &str) -> Result<(), CgroupError> {
        let Enforcement::Cgroups(cpusets) = self else {
            return Ok(());
        };
        cpusets.remove(&LeafName::for_allocation(id)?)
    }

    /// Whether allocation `id`'s cgroup still has processes (the holder
    /// may be gone while what it started still runs).
    pub fn occupied(&self, id: &str) -> bool {
        let Enforcement::Cgroups(cpusets) = self else {
            return false;
        };
        LeafName::for_allocation(id)
            .ok()
            .and_then(|leaf| cpusets.processes(&leaf).ok().flatten())
            .is_some_and(|pids| !pids.is_empty())
    }

    /// Allocation ids that have a cgroup.
    pub fn cgroup_ids(&self) -> Vec<String> {
        match self {
            Enforcement::Cgroups(cpusets) => cpusets.leaves().unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

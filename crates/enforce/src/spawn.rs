//! Starting a command inside an allocation.
//!
//! Owns: what happens in the child between `fork` and `exec`
//! ([`ChildPlacement::apply_to`]): the parent-death signal, default
//! terminal-signal dispositions, and — where cgroups do not already confine
//! the launcher — CPU affinity and the `MPOL_BIND` memory policy. Both are
//! inherited by everything the command starts and survive `exec`.
//!
//! Must not touch: the allocation itself (the agent's) or the environment
//! (callers add [`crate::gpu`] variables).

use std::os::unix::process::CommandExt;
use std::process::Command;

use topoalign_model::CpuSet;

use crate::kernel::{self, CpuMask, NodeMask};

/// What the child must be confined to before it runs the command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildPlacement {
    /// CPUs for `sched_setaffinity`; `None`: leave the affinity alone (a
    /// cgroup confines the launcher already, or enforcement is off).
    pub cpus: Option<CpuSet>,
    /// NUMA nodes for `set_mempolicy(MPOL_BIND)`; `None`: leave it alone.
    pub memory_nodes: Option<Vec<usize>>,
    /// Kill the child if the launcher dies: its allocation is released once
    /// the launcher is gone, so the command must not outlive it.
    pub die_with_parent: bool,
}

impl ChildPlacement {
    /// Arranges for `command`'s child to be placed before `exec`. An error
    /// in the child makes `spawn` fail with that error.
    pub fn apply_to(&self, command: &mut Command) {
        // Everything that allocates happens here, in the parent.
        let cpus = self.cpus.as_ref().map(CpuMask::new);
        let nodes = self.memory_nodes.as_deref().map(NodeMask::new);
        let parent = self.die_with_parent.then(std::process::id);
        let place = move || -> std::io::Result<()> {
            if let Some(parent) = parent {
                kernel::die_with_parent(parent)?;
            }
            kernel::default_terminal_signals()?;
            if let Some(cpus) = &cpus {
                cpus.apply(0)?;
            }
            if let Some(nodes) = &nodes {
                nodes.bind_calling_thread()?;
            }
            Ok(())
        };
        // SAFETY: the closure only makes system calls (prctl, getppid,
        // signal, sched_setaffinity, set_mempolicy), which are
        // async-signal-safe, on masks built before the fork; it neither
        // allocates nor takes locks.
        unsafe {
            command.pre_exec(place);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_field(status: &str, field: &str) -> Option<String> {
        status.lines().find_map(|line| {
            line.strip_prefix(field)?
                .strip_prefix(':')
                .map(|v| v.trim().to_string())
        })
    }

    #[test]
    fn the_child_runs_on_the_given_cpu_with_memory_bound() -> std::io::Result<()> {
        let own = std::fs::read_to_string("/proc/self/status")?;
        // Every Linux process has an allowed CPU: without one this test
        // checks nothing, so it fails rather than passing.
        let allowed = status_field(&own, "Cpus_allowed_list")
            .ok_or_else(|| std::io::Error::other("/proc/self/status has no Cpus_allowed_list"))?;
        let cpus = CpuSet::parse(&allowed).map_err(std::io::Error::other)?;
        let last = cpus
            .iter()
            .max()
            .ok_or_else(|| std::io::Error::other("this process may run on no CPU"))?;
        let mems = status_field(&own, "Mems_allowed_list").unwrap_or_default();
        let first_node: usize = mems.split([',', '-']).next().and_then(|n| n.parse().ok()).unwrap_or(0);

        let mut command = Command::new("sh");
        command.args([
            "-c",
            "cat /proc/self/status; head -n 1 /proc/self/numa_maps 2>/dev/null",
        ]);
        ChildPlacement {
            cpus: Some(CpuSet::from_iter([last])),
            memory_nodes: Some(vec![first_node]),
            die_with_parent: true,
        }
        .apply_to(&mut command);
        let output = command.output()?;
        assert!(output.status.success());
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(status_field(&text, "Cpus_allowed_list"), Some(last.to_string()));
        if text.contains("kernelpagesize") {
            assert!(text.contains(&format!("bind:{first_node}")), "{text}");
        }
        Ok(())
    }

    #[test]
    fn a_placement_the_kernel_refuses_fails_the_spawn() {
        let mut command = Command::new("true");
        ChildPlacement {
            cpus: Some(CpuSet::from_iter([4000])),
            ..ChildPlacement::default()
        }
        .apply_to(&mut command);
        let error = command.status().err();
        assert_eq!(error.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
    }
}

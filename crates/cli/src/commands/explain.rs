//! `topoalign explain POD.yaml [more.yaml …]`: `admit` with the
//! explanation for every pod — per-NUMA free vs requested, each provider's
//! hints and the merged hint in words, the policy's rule, and fixes checked
//! by running the engine again. Exit status as `admit`'s (3 when a pod is
//! rejected).

pub use super::admit::Args;

pub fn run(args: &Args) -> super::Result {
    super::admit::run_with(args, true)
}

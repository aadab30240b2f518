//! `topoalign explain POD.yaml [more.yaml …]`: `admit` with the
//! explanation for every pod — per-NUMA free vs requested, each provider's
//! hints and the merged hint in words, the policy's rule, and fixes checked
//! by running the engine again. A rejection is what it was asked to
//! explain, so it exits 0 after explaining one; `admit` is the command
//! whose status says whether every pod was admitted (3 when not).

use super::Outcome;
pub use super::admit::Args;

pub fn run(args: &Args) -> super::Result {
    match super::admit::run_with(args, true)? {
        Outcome::Rejected => Ok(Outcome::Success),
        other => Ok(other),
    }
}

//! `restricted`: admit only when the merged hint is preferred.

use topoalign_model::TopologyHint;

pub(super) fn admits(best: &TopologyHint) -> bool {
    best.preferred
}

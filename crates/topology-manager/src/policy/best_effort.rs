//! `best-effort`: align where possible, admit always.

use topoalign_model::TopologyHint;

pub(super) fn admits(_best: &TopologyHint) -> bool {
    true
}

//! `GET /v1/topology` of the agent's ledger: the node it holds as
//! `topoalign_usage`'s document (the one shape the follower publishes too).
//!
//! Reads the ledger's node (never changes it).

use crate::ledger::Ledger;
use crate::wire::Topology;

/// The topology document for the ledger's current state.
pub fn topology(ledger: &Ledger, enforcement: &str) -> Topology {
    topoalign_usage::node_topology(ledger.node(), enforcement)
}

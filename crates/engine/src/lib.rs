//! topoalign's alignment engine (work in progress).
mod config;
pub use config::NodeConfig;

//! One module per subcommand.

pub mod admit;
pub mod agent;
pub mod diagnose;
pub mod explain;
mod node_source;
mod render;
pub mod replay;
pub mod run;
pub mod simulate;
pub mod topology;

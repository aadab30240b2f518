//! One module per subcommand.

pub mod admit;
pub mod agent;
pub mod diagnose;
pub mod explain;
pub mod extender;
mod node_source;
pub mod nrt;
mod render;
pub mod replay;
pub mod run;
pub mod simulate;
pub mod topology;

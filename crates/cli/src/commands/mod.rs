//! One module per subcommand.

pub mod extender;
pub mod nrt;
pub mod replay;
pub mod simulate;

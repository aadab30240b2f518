//! One module per subcommand.

pub mod extender;
pub mod replay;
pub mod simulate;

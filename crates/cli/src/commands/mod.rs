//! One module per subcommand.

pub mod replay;
pub mod simulate;

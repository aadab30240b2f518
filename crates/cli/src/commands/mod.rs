//! One module per subcommand.

pub mod replay;

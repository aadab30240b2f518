//! One module per subcommand, and what they share: the node flags
//! ([`node_args`]), the output flags ([`output`]), text for people
//! ([`render`]), and the one error type `main` maps to exit codes.

pub mod admit;
pub mod agent;
pub mod cluster;
pub mod defrag;
pub mod diagnose;
pub mod dra_input;
pub mod explain;
pub mod extender;
pub mod kubelet_dir;
pub mod kubelet_stand_in;
mod node_args;
pub mod nrt;
mod output;
mod render;
pub mod replay;
pub mod run;
pub mod serve;
pub mod simulate;
pub mod simulate_nodes;
pub mod topology;
pub mod verify;

use topoalign_intake::IntakeError;

/// How a command ended without an [`Error`].
pub enum Outcome {
    Success,
    /// The command's answer is a refusal (exit 2); its output says why.
    Refused,
    /// Exit with this status (`run`: the command's own).
    Exit(u8),
    /// `admit`/`explain`: a pod was rejected (exit 3); the report says
    /// which and why.
    Rejected,
}

/// Why a command failed; `main` prints it after `topoalign: ` and exits
/// with [`Error::exit_code`].
#[derive(Debug)]
pub enum Error {
    /// Input the user can fix: exit 2.
    BadInput(String),
    /// Anything else: exit 1.
    Failed(anyhow::Error),
}

impl Error {
    /// 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::BadInput(_) => 2,
            Error::Failed(_) => 1,
        }
    }

    /// Bad input, in these words.
    pub fn bad_input(message: impl std::fmt::Display) -> Error {
        Error::BadInput(message.to_string())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadInput(message) => f.write_str(message),
            Error::Failed(error) => write!(f, "{error:#}"),
        }
    }
}

impl From<IntakeError> for Error {
    fn from(error: IntakeError) -> Error {
        Error::BadInput(error.to_string())
    }
}

impl From<anyhow::Error> for Error {
    fn from(error: anyhow::Error) -> Error {
        Error::Failed(error)
    }
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Error {
        Error::Failed(error.into())
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Error {
        Error::Failed(error.into())
    }
}

impl From<serde_yaml_ng::Error> for Error {
    fn from(error: serde_yaml_ng::Error) -> Error {
        Error::Failed(error.into())
    }
}

/// What every command returns.
pub type Result<T = Outcome> = std::result::Result<T, Error>;

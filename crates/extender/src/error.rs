//! The error every part of the extender that works on the shared cluster
//! can meet: the cluster's lock poisoned, or the work panicked.
//!
//! Its own module so that the parts that report it ([`crate::server`]'s
//! handlers, [`crate::dra`]'s sink) need not import each other.

/// Why the shared cluster gave no answer: a bug, reported to the caller
/// (the scheduler, the log) instead of an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// An earlier panic left the cluster's lock poisoned.
    #[error("internal: state lock poisoned")]
    Poisoned,
    /// The work panicked, with this message.
    #[error("internal: {0}")]
    Panicked(String),
}

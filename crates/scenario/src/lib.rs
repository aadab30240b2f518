//! Scenarios (work in progress).

//! Helpers shared by the integration tests and the benchmark.

pub mod synthetic;

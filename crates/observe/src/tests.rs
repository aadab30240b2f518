#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

//! Kubernetes formats (work in progress).

//! Kubernetes quantities (`500m`, `1Gi`, `1e3`): a clear error or a value,
//! never a panic or saturation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(quantity) = topoalign_k8s::parse_quantity(text) {
        let _ = quantity.to_string();
    }
});

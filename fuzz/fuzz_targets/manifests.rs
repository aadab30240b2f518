//! Pod and workload YAML/JSON streams (Pods, Lists, Deployments, Jobs …).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = topoalign_k8s::read_manifests(text, &topoalign_k8s::ManifestOptions::default());
    let _ = topoalign_fleet::Workload::parse(text);
});

//! KubeletConfiguration files, read and — when valid — put through the
//! kubelet's start-up steps and the managers' own checks on a small
//! two-NUMA-node machine (reserved CPU lists, reserved memory, policy
//! options, eviction thresholds).
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|text: &str| {
    if let Ok(config) = topoalign_k8s::KubeletConfiguration::from_file_text(text)
        && let Ok(node_config) = topoalign_k8s::node_config(&config, &common::machine())
    {
        let _ = topoalign_engine::Node::start(common::machine(), node_config);
    }
});

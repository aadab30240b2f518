//! The agent's allocation request body — plain JSON or a Pod in YAML — and
//! what the agent does with it (without the journal): the pod admitted on
//! a small node and, when rejected, explained with its checked fixes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use topoalign_agent::request::{AdmitOptions, read_body};

mod common;

fuzz_target!(|bytes: &[u8]| {
    let options = AdmitOptions::default();
    for yaml in [false, true] {
        let Ok(workload) = read_body(bytes, yaml, &options) else {
            continue;
        };
        let Ok(pod) = topoalign_k8s::pod_from_value(&workload.manifest, "fuzz-uid") else {
            continue;
        };
        let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                             "topologyManagerPolicy": "single-numa-node"});
        let Ok(node) = topoalign_k8s::start_node(common::machine(), &kubelet) else {
            continue;
        };
        let decision = node.clone().admit(pod.clone());
        if !decision.admitted() {
            let situation = topoalign_explain::Situation {
                node: &node,
                kubelet: &kubelet,
                manifest: &workload.manifest,
                pod: &pod,
            };
            let _ = topoalign_explain::explain(&situation, &decision);
        }
    }
});

//! In-place resize on 1.32/1.33 with `InPlacePodVerticalScalingExclusiveCPUs`
//! on: the CPU manager sizes what a Guaranteed pod's container holds by the
//! container status's `allocatedResources`, which a scenario does not
//! carry. Where the answer depends on it (a changed CPU request under
//! `restricted`/`single-numa-node`, or `full-pcpus-only`) the replay is an
//! error naming the release and the gate, never an answer; elsewhere it is
//! the kubelet's (vectors `1.32|1.33/resize-exclusive-cpus-best-effort`,
//! replayed by the conformance test, are this scenario under `best-effort`).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::Path;

use topoalign_scenario::{Replay, Scenario, replay};

fn scenario(release: &str, policy: &str, options: Option<serde_json::Value>) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance")
        .join(release)
        .join("scenarios/resize-exclusive-cpus-best-effort.json");
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    value["kubelet"]["topologyManagerPolicy"] = policy.into();
    if let Some(options) = options {
        value["kubelet"]["cpuManagerPolicyOptions"] = options;
    }
    Scenario::parse(&value.to_string()).unwrap()
}

#[test]
fn status_dependent_resizes_are_refused_naming_release_and_gate() {
    for release in ["1.32", "1.33"] {
        let cases = [
            ("restricted", None),
            ("single-numa-node", None),
            ("best-effort", Some(serde_json::json!({"full-pcpus-only": "true"}))),
        ];
        for (policy, options) in cases {
            let error = replay(&scenario(release, policy, options.clone()))
                .unwrap_err()
                .to_string();
            assert!(error.contains("events[1]"), "{error}");
            assert!(error.contains(&format!("kubelet {release}")), "{error}");
            assert!(error.contains("InPlacePodVerticalScalingExclusiveCPUs"), "{error}");
        }
        for policy in ["best-effort", "none"] {
            assert!(
                matches!(replay(&scenario(release, policy, None)).unwrap(), Replay::Completed(_)),
                "{release} {policy}"
            );
        }
    }
}

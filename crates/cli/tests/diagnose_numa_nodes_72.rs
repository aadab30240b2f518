//! `topoalign diagnose` on the kubelet directories of a machine of 72 NUMA
//! nodes (`testdata/kubelet-state/layouts/<release>-numa-nodes-72-*`: the
//! checkpoint files v1.32.10 and v1.37.2 wrote, ids 0-71, topology policy
//! `none`), the machine and configuration given by the scenario: no panic,
//! the restart check passes as the kubelet's restart did, the map is the
//! kubelet's final state, and text and JSON both print.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn layouts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/kubelet-state/layouts")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn diagnose(dir: &Path, format: &str) -> std::process::Output {
    Command::cargo_bin("topoalign")
        .expect("binary")
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(dir)
        .arg("--node")
        .arg(dir.join("scenario.json"))
        .args(["-o", format])
        .output()
        .expect("runs")
}

#[test]
fn the_kubelets_files_of_72_numa_nodes_diagnose_and_restart() {
    for release in ["1.32", "1.37"] {
        for name in ["memory-none", "static-memory"] {
            let what = format!("{release} {name}");
            let dir = layouts().join(format!("{release}-numa-nodes-72-{name}"));
            let output = diagnose(&dir, "json");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(0), "{what}: {stderr}");
            let doc: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {stderr}"));
            assert_eq!(doc["restart"]["ok"], true, "{what}: {}", doc["restart"]);
            let last = &read_json(&dir.join("result.json"))["final"];
            for field in ["defaultCpuSet", "cpuAssignments", "memoryAssignments"] {
                assert_eq!(doc[field], last[field], "{what}: {field}");
            }
            assert_eq!(doc["unknownUids"], serde_json::json!([]), "{what}");
            let numa = doc["numa"].as_array().expect("numa");
            let ids: Vec<u64> = numa.iter().map(|n| n["node"].as_u64().expect("id")).collect();
            assert_eq!(ids, (0..72).collect::<Vec<u64>>(), "{what}");
            // gpu65 is on NUMA 65, past the masks: shown there.
            assert!(numa[65]["devices"]["example.com/gpu"].get("gpu65").is_some(), "{what}");
            let notes = doc["notes"].as_array().expect("notes");
            assert!(
                notes
                    .iter()
                    .any(|n| n.as_str().is_some_and(|n| n.contains("NUMA node id 64"))),
                "{what}: {notes:?}"
            );

            let output = diagnose(&dir, "text");
            let text = String::from_utf8_lossy(&output.stdout);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{what}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(text.contains("NUMA 71"), "{what}: {text}");
        }
    }
}

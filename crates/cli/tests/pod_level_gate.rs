//! `topoalign admit` and `explain` read pod-level `spec.resources` as the
//! node's cluster creates the pod (issue #29): with `PodLevelResources`
//! off (1.32 and 1.33 by default) the API server drops the field before
//! validation, so a pod-level amount it would refuse is no refusal there —
//! the field is ignored with a note, as `replay` ignores it. With the gate
//! on (1.34+) the same file is refused, naming the field.

mod agent_support;
mod common;

use std::path::{Path, PathBuf};

use agent_support::run_in_repo;
use common::{TWO_NUMA as NODE, temp_file};
use serde_json::Value;

/// A pod whose pod-level request is above its pod-level limit: refused by
/// pod-level validation, which only runs when the field is kept.
const POD: &str = "kind: Pod\nmetadata: {name: web}\nspec:\n  resources: {requests: {cpu: '8'}, limits: {cpu: \
                   '4'}}\n  containers: [{name: app, resources: {requests: {cpu: '1', memory: 1Gi}}}]\n";

fn pod_file(name: &str) -> PathBuf {
    temp_file("pod-level-gate", name, POD)
}

/// What the note on a dropped field says.
const NOTE: &str = "spec.resources: ignored: the PodLevelResources feature gate is off";

/// Text with its line wrapping undone.
fn unwrapped(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `command` on `version`: exit code, stdout, stderr.
fn run(command: &str, version: &str, file: &Path, json: bool) -> (i32, String, String) {
    let mut args = vec![command, "--node", NODE, "--kubelet-version", version];
    if json {
        args.extend(["-o", "json"]);
    }
    args.push(file.to_str().expect("UTF-8 path"));
    run_in_repo(&args)
}

#[test]
fn admit_drops_pod_level_resources_where_the_gate_is_off() {
    let file = pod_file("admit.yaml");
    let (code, stdout, stderr) = run("admit", "1.32", &file, true);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(doc["results"][0]["pod"], "default/web", "{doc}");
    assert_eq!(doc["results"][0]["admitted"], true, "{doc}");
    assert!(unwrapped(&stderr).contains(NOTE), "{stderr}");
    // Text output carries the note among the node's notes (wrapped).
    let (code, stdout, _) = run("admit", "1.33", &file, false);
    assert_eq!(code, 0, "{stdout}");
    assert!(unwrapped(&stdout).contains(NOTE), "{stdout}");
    // With the gate on, pod-level validation refuses the same pod.
    let (code, stdout, stderr) = run("admit", "1.34", &file, true);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("spec.resources.requests"), "{stderr}");
}

#[test]
fn explain_drops_pod_level_resources_where_the_gate_is_off() {
    let file = pod_file("explain.yaml");
    let (code, stdout, stderr) = run("explain", "1.32", &file, false);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("default/web"), "{stdout}");
    assert!(unwrapped(&stdout).contains(NOTE), "{stdout}");
    let (code, stdout, stderr) = run("explain", "1.37", &file, false);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("spec.resources.requests"), "{stderr}");
}

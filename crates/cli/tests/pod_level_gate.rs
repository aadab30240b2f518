//! `topoalign admit` and `explain` read pod-level `spec.resources` as the
//! node's cluster creates the pod (issue #29): with `PodLevelResources`
//! off (1.32 and 1.33 by default) the API server drops the field before
//! validation, so a pod-level amount it would refuse is no refusal there —
//! the field is ignored with a note, as `replay` ignores it. With the gate
//! on (1.34+) the same file is refused, naming the field.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn topoalign() -> Command {
    let mut command = Command::cargo_bin("topoalign").expect("binary");
    command.current_dir(repo());
    command
}

const NODE: &str = "examples/nodes/two-numa.yaml";

/// A pod whose pod-level request is above its pod-level limit: refused by
/// pod-level validation, which only runs when the field is kept.
const POD: &str = "kind: Pod\nmetadata: {name: web}\nspec:\n  resources: {requests: {cpu: '8'}, limits: {cpu: \
                   '4'}}\n  containers: [{name: app, resources: {requests: {cpu: '1', memory: 1Gi}}}]\n";

fn pod_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoalign-pod-level-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, POD).expect("write");
    path
}

/// What the note on a dropped field says.
const NOTE: &str = "spec.resources: ignored: the PodLevelResources feature gate is off";

/// Text with its line wrapping undone.
fn unwrapped(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `command` on `version`: exit code, stdout, stderr.
fn run(command: &str, version: &str, file: &Path, json: bool) -> (Option<i32>, String, String) {
    let mut cmd = topoalign();
    cmd.args([command, "--node", NODE, "--kubelet-version", version]);
    if json {
        cmd.args(["-o", "json"]);
    }
    let output = cmd.arg(file).output().expect("runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn admit_drops_pod_level_resources_where_the_gate_is_off() {
    let file = pod_file("admit.yaml");
    let (code, stdout, stderr) = run("admit", "1.32", &file, true);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(doc["results"][0]["pod"], "default/web", "{doc}");
    assert_eq!(doc["results"][0]["admitted"], true, "{doc}");
    assert!(unwrapped(&stderr).contains(NOTE), "{stderr}");
    // Text output carries the note among the node's notes (wrapped).
    let (code, stdout, _) = run("admit", "1.33", &file, false);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(unwrapped(&stdout).contains(NOTE), "{stdout}");
    // With the gate on, pod-level validation refuses the same pod.
    let (code, stdout, stderr) = run("admit", "1.34", &file, true);
    assert_ne!(code, Some(0), "{stdout}");
    assert!(stderr.contains("spec.resources.requests"), "{stderr}");
}

#[test]
fn explain_drops_pod_level_resources_where_the_gate_is_off() {
    let file = pod_file("explain.yaml");
    let (code, stdout, stderr) = run("explain", "1.32", &file, false);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("default/web"), "{stdout}");
    assert!(unwrapped(&stdout).contains(NOTE), "{stdout}");
    let (code, stdout, stderr) = run("explain", "1.37", &file, false);
    assert_ne!(code, Some(0), "{stdout}");
    assert!(stderr.contains("spec.resources.requests"), "{stderr}");
}

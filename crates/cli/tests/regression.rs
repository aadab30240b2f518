//! One test per bug a person (or a hostile input) found in the `topoalign`
//! binary, named after what it reproduces (issue 13). Each runs the real
//! binary.

mod agent_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use agent_support::{path, repo, stderr, topoalign};

fn scenario() -> PathBuf {
    repo().join("examples/scenarios/two-socket-gpu.yaml")
}

/// `topoalign agent` on the example scenario, its socket and state in
/// `dir`, with `extra` arguments; it is expected to stop at start.
fn agent_in(dir: &Path, extra: &[&str]) -> Output {
    let (node, socket, state) = (scenario(), dir.join("s.sock"), dir.join("state"));
    let mut args = vec![
        "agent",
        "--node",
        path(&node),
        "--socket",
        path(&socket),
        "--state-dir",
        path(&state),
    ];
    args.extend_from_slice(extra);
    topoalign(&args)
}

/// A token file in `dir` with `text` and `mode`.
fn token_file(dir: &Path, text: &str, mode: u32) -> PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, text).expect("write");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).expect("chmod");
    token
}

/// A token file every local user can read was accepted without a word.
#[test]
fn agent_refuses_a_world_readable_token_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token = token_file(dir.path(), "0123456789abcdef0123456789abcdef\n", 0o644);
    let output = agent_in(dir.path(), &["--listen", "127.0.0.1:1", "--token-file", path(&token)]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is readable or writable by other users (mode 0644): `chmod 600` it"),
        "{}",
        stderr(&output)
    );
}

/// `--nrt-file` into a directory that does not exist retried every second
/// forever (the README's own example).
#[test]
fn agent_nrt_file_into_a_missing_directory_fails_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no/such/dir/node.yaml");
    let output = agent_in(dir.path(), &["--nrt-file", path(&missing), "--nrt-node-name", "n"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("the directory"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("does not exist (create it first)"),
        "{}",
        stderr(&output)
    );
}

/// `agent --node SCENARIO` dropped the scenario's running pods silently.
/// (A short token file makes the agent stop right after reading the node.)
#[test]
fn agent_node_scenario_says_its_pods_are_not_played() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token = token_file(dir.path(), "short", 0o600);
    let output = agent_in(dir.path(), &["--listen", "127.0.0.1:1", "--token-file", path(&token)]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("pod event(s) are not played: only its topology and kubelet blocks are used"),
        "{}",
        stderr(&output)
    );
}

/// `diagnose --kubelet-dir` on a directory without kubelet state reported
/// "the kubelet starts" and exited 0.
#[test]
fn diagnose_kubelet_dir_without_kubelet_state_is_an_error() {
    let empty = tempfile::tempdir().expect("temp dir");
    let output = topoalign(&[
        "diagnose",
        "--kubelet-dir",
        path(empty.path()),
        "--node",
        path(&scenario()),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("no kubelet state here"), "{}", stderr(&output));
    let missing = empty.path().join("nowhere");
    let output = topoalign(&["diagnose", "--kubelet-dir", path(&missing), "--node", path(&scenario())]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not a directory"), "{}", stderr(&output));
}

/// A typo in a KubeletConfiguration field was ignored silently and
/// flipped the answer.
#[test]
fn kubelet_config_typo_gets_a_warning_naming_the_close_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolcy: static\n",
    )
    .expect("write");
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, "metadata: {name: p}\nspec:\n  containers:\n  - name: app\n").expect("write");
    let output = topoalign(&[
        "admit",
        path(&pod),
        "--node",
        path(&scenario()),
        "--kubelet-config",
        path(&config),
    ]);
    let all = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert!(
        all.contains("unknown KubeletConfiguration field \"cpuManagerPolcy\" is ignored")
            && all.contains("did you mean \"cpuManagerPolicy\"?"),
        "{all}"
    );
}

/// `--replicas 1000000000` aborted on allocation.
#[test]
fn admit_with_a_billion_replicas_is_refused_before_allocating() {
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = dir.path().join("d.yaml");
    std::fs::write(
        &deployment,
        "kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n",
    )
    .expect("write");
    let output = topoalign(&[
        "admit",
        path(&deployment),
        "--replicas",
        "1000000000",
        "--node",
        path(&scenario()),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("at most 1000000 pods"), "{}", stderr(&output));
}

/// `admit` exited 0 when pods were rejected (CI users need a status), and
/// `--replicas` replaced a manifest's own `replicas` instead of defaulting
/// to it.
#[test]
fn admit_exits_3_on_a_rejection_and_makes_the_workloads_own_replicas() {
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = dir.path().join("d.yaml");
    std::fs::write(
        &deployment,
        "kind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      \
         - name: app\n        resources: {limits: {cpu: '4', memory: 1Gi}}\n",
    )
    .expect("write");
    let node = repo().join("examples/nodes/two-numa.yaml");
    let admit = |extra: &[&str]| {
        let mut args = vec!["admit", path(&deployment), "--node", path(&node), "-o", "json"];
        args.extend(extra);
        let output = topoalign(&args);
        let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        let admitted: Vec<bool> = document["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["admitted"] == true)
            .collect();
        (output.status.code(), admitted)
    };
    // 7 + 8 allocatable CPUs: three 4-CPU pods fit, one per NUMA node and
    // a second on NUMA 1.
    assert_eq!(admit(&[]), (Some(0), vec![true, true, true]));
    assert_eq!(admit(&["--replicas", "1"]), (Some(0), vec![true]));
    assert_eq!(admit(&["--replicas", "4"]), (Some(3), vec![true, true, true, false]));
    let explain = topoalign(&["explain", path(&deployment), "--node", path(&node), "--replicas", "4"]);
    // explain answers the rejection it was asked about: status 0.
    assert_eq!(explain.status.code(), Some(0), "{}", stderr(&explain));
}

/// The same `namespace/name` in two files lost CPUs from the final state.
#[test]
fn admit_refuses_the_same_pod_name_in_two_files_naming_both() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
    let (first, second) = (dir.path().join("first.yaml"), dir.path().join("second.yaml"));
    std::fs::write(&first, pod).expect("write");
    std::fs::write(&second, pod).expect("write");
    let output = topoalign(&["admit", path(&first), path(&second), "--node", path(&scenario())]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(
        text.contains("second.yaml: Pod default/p: default/p is also in ") && text.contains("first.yaml"),
        "{text}"
    );
}

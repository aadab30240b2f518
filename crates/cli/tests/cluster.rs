//! `topoalign explain pod/NAME` and `topoalign nodes` without a cluster:
//! argument handling, errors naming the kubeconfig, and the kubectl plugin
//! by its name (`kubectl-topoalign`, a symbolic link to the binary). The
//! answers against a real API server and a real kubectl are
//! e2e/suite/explain_pod_test.go's.

use std::path::PathBuf;
use std::process::Command;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_topoalign"))
}

/// The binary linked as `kubectl-topoalign`, as
/// `ln -s $(which topoalign) ~/.local/bin/kubectl-topoalign` installs it.
fn plugin(dir: &tempfile::TempDir) -> PathBuf {
    let link = dir.path().join("kubectl-topoalign");
    if !link.exists() {
        std::os::unix::fs::symlink(binary(), &link).expect("symlink");
    }
    link
}

#[test]
fn as_kubectl_topoalign_it_names_itself_as_kubectl_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(plugin(&dir)).arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{help}");
    assert!(help.contains("Usage: kubectl topoalign <COMMAND>"), "{help}");
    assert!(help.contains("nodes"), "{help}");
    let output = Command::new(plugin(&dir))
        .args(["explain", "--help"])
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("Usage: kubectl topoalign explain"), "{help}");
    for flag in ["--kubeconfig", "--context", "-n, --namespace"] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    // Under its own name it is topoalign.
    let output = Command::new(binary()).arg("--help").output().expect("run");
    assert!(String::from_utf8_lossy(&output.stdout).contains("Usage: topoalign <COMMAND>"));
}

#[test]
fn a_kubeconfig_that_cannot_be_read_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-kubeconfig");
    for args in [
        vec!["explain", "pod/want", "-n", "team-a", "--kubeconfig"],
        vec!["nodes", "--kubeconfig"],
    ] {
        let output = Command::new(plugin(&dir))
            .args(&args)
            .arg(&missing)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot read the kubeconfig {}", missing.display())),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_context_the_kubeconfig_lacks_is_an_error_not_another_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: here\n  context: {cluster: c, user: u}\n\
         current-context: here\n",
    )
    .expect("write");
    let output = Command::new(binary())
        .args(["explain", "pod/want", "--context", "elsewhere", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("elsewhere"), "{stderr}");
}

#[test]
fn an_unreachable_api_server_is_an_error_naming_what_was_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 1 on the loopback: nothing listens, the connection is refused.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: here\n  context: {cluster: c, user: u, namespace: team-a}\n\
         current-context: here\n",
    )
    .expect("write");
    let output = Command::new(binary())
        .args(["explain", "pod/want", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pod team-a/want"), "the context's namespace: {stderr}");
}

#[test]
fn a_pod_file_is_still_a_pod_file() {
    // `explain FILE` with a file named like the cluster form reads the
    // file, as before.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("pod")).expect("mkdir");
    let manifest = dir.path().join("pod/want");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: want}\nspec:\n  containers:\n  - name: app\n    \
         resources: {requests: {cpu: '2', memory: 1Gi}, limits: {cpu: '2', memory: 1Gi}}\n",
    )
    .expect("write");
    let node = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nodes/two-numa.yaml");
    let output = Command::new(binary())
        .current_dir(dir.path())
        .args(["explain", "pod/want", "--node", node])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("default/want"), "{stdout}");
}

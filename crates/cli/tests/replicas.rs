//! `admit --replicas N` up to its documented maximum (1,000,000 pods,
//! `topoalign_k8s::MAX_PODS`) answers in the time and memory of the pods a
//! node can hold; above it, a clear error (issue 32). Runs the real binary.

mod agent_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use agent_support::{path, repo, stderr, topoalign};

/// A Deployment of 1-CPU Guaranteed pods (named `web`), and a Pod `late`
/// of the same size, in `dir`.
fn manifests(dir: &Path) -> (PathBuf, PathBuf) {
    let resources = "resources: {limits: {cpu: '1', memory: 1Gi}}";
    let deployment = dir.join("web.yaml");
    std::fs::write(
        &deployment,
        format!(
            "kind: Deployment\nmetadata: {{name: web}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: \
             app\n        {resources}\n"
        ),
    )
    .expect("write the deployment");
    let pod = dir.join("late.yaml");
    std::fs::write(
        &pod,
        format!("kind: Pod\nmetadata: {{name: late}}\nspec:\n  containers:\n  - name: app\n    {resources}\n"),
    )
    .expect("write the pod");
    (deployment, pod)
}

/// `(admitted, reason)` per result of a JSON document.
fn outcomes(output: &Output) -> Vec<(bool, Value)> {
    let document: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}); stderr: {}", stderr(output)));
    document["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["admitted"] == true, r["reason"].clone()))
        .collect()
}

#[test]
fn the_documented_maximum_answers_with_the_pods_the_node_can_hold() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (deployment, late) = manifests(dir.path());
    let node = repo().join("examples/nodes/two-numa.yaml");
    let maximum = topoalign_k8s::MAX_PODS.to_string();
    let output = topoalign(&[
        "admit",
        path(&deployment),
        path(&late),
        "--node",
        path(&node),
        "--replicas",
        &maximum,
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let results = outcomes(&output);
    // maxPods (110, the default) + 1 replicas, then the Pod of the second
    // file.
    assert_eq!(results.len(), 112, "{}", stderr(&output));
    let first_rejected = results.iter().position(|(admitted, _)| !admitted).expect("a rejection");
    assert!(
        results[first_rejected..].iter().all(|r| *r == results[first_rejected]),
        "after the first rejection every replica, and the same-sized pod after them, is rejected alike"
    );
    assert!(
        stderr(&output).contains(&format!(
            "replicas 111-{} of each workload ({} pods each) are not made",
            topoalign_k8s::MAX_PODS - 1,
            topoalign_k8s::MAX_PODS - 111
        )),
        "{}",
        stderr(&output)
    );

    // The text report says so too.
    let text = topoalign(&[
        "admit",
        path(&deployment),
        "--node",
        path(&node),
        "--replicas",
        &maximum,
    ]);
    assert_eq!(text.status.code(), Some(3), "{}", stderr(&text));
    assert!(String::from_utf8_lossy(&text.stdout).contains("note: replicas 111-"));
}

#[test]
fn above_the_maximum_is_refused_naming_the_option() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (deployment, _) = manifests(dir.path());
    let node = repo().join("examples/nodes/two-numa.yaml");
    let above = (topoalign_k8s::MAX_PODS + 1).to_string();
    let output = topoalign(&["admit", path(&deployment), "--node", path(&node), "--replicas", &above]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "--replicas {above}: at most {} pods are read",
            topoalign_k8s::MAX_PODS
        )),
        "{}",
        stderr(&output)
    );
}

/// With `maxPods: 4`, `--replicas 9` makes 5 replicas: the results are
/// those of `--replicas 5`, and a pod of a later file is decided on the
/// node as if all 9 had been made (the 4 not made would be rejected,
/// changing nothing).
#[test]
fn replicas_not_made_change_nothing_for_later_pods() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (deployment, late) = manifests(dir.path());
    let node = repo().join("examples/nodes/two-numa.yaml");
    let kubelet = dir.path().join("kubelet.yaml");
    std::fs::write(
        &kubelet,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \
         '0'\ntopologyManagerPolicy: best-effort\nmaxPods: 4\n",
    )
    .expect("write the kubelet configuration");
    let run = |replicas: &str, files: &[&Path]| {
        let mut args = vec!["admit"];
        args.extend(files.iter().map(|f| path(f)));
        args.extend(["--node", path(&node), "--kubelet-config", path(&kubelet), "-o", "json"]);
        args.extend(["--replicas", replicas]);
        topoalign(&args)
    };
    let nine = run("9", &[&deployment, &late]);
    assert_eq!(nine.status.code(), Some(3), "{}", stderr(&nine));
    assert!(
        stderr(&nine).contains("replicas 5-8 of each workload (4 pods each) are not made"),
        "{}",
        stderr(&nine)
    );
    let five = run("5", &[&deployment, &late]);
    assert!(!stderr(&five).contains("not made"), "{}", stderr(&five));
    assert_eq!(outcomes(&nine), outcomes(&five));
    assert_eq!(outcomes(&nine).len(), 6);
    let (admitted, reason) = &outcomes(&nine)[4];
    assert!(
        !admitted && reason == "OutOfpods",
        "replica 4 of a node of 4 pods: {reason}"
    );
}

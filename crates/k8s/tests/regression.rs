//! One test per bug found with hostile or mistaken input, named after what
//! it reproduces (issue 13: "Resource bounds", "Validation").

use topoalign_k8s::{ManifestOptions, PodProblem, check_nesting, pod_from_yaml, read_manifests};

fn pod_error(yaml: &str) -> String {
    pod_from_yaml(yaml, "uid").expect_err("refused").to_string()
}

fn container(resources: &str) -> String {
    format!("metadata: {{name: p}}\nspec:\n  containers:\n  - name: app\n    resources: {resources}\n")
}

/// 100,000 `[` used to cost the YAML parser seconds before its own depth
/// limit fired; refused by a linear pre-check now.
#[test]
fn deeply_nested_yaml_is_refused_before_parsing() {
    let text = format!("metadata: {{name: p}}\nspec: {}", "[".repeat(100_000));
    let error = read_manifests(&text, &ManifestOptions::default()).expect_err("refused");
    assert!(
        error.to_string().contains("line 2: nested more than 128 levels deep"),
        "{error}"
    );
    assert!(pod_error(&"{a: ".repeat(100_000)).contains("nested more than 128 levels"));
    assert!(check_nesting(&"- ".repeat(50_000)).is_err());
}

/// A file saved with a UTF-8 byte order mark in front of its JSON.
#[test]
fn utf8_bom_before_json_is_read() {
    let text = "\u{feff}{\"metadata\": {\"name\": \"p\"}, \"spec\": {\"containers\": [{\"name\": \"app\"}]}}";
    let manifests = read_manifests(text, &ManifestOptions::default()).expect("read");
    assert_eq!(manifests.pods[0].pod.name, "p");
    pod_from_yaml(text, "uid").expect("read");
}

/// Requests above limits, and device or huge page requests that differ
/// from their limits, are refused as the API server refuses them.
#[test]
fn requests_above_limits_are_refused_like_the_api_server() {
    let e = pod_error(&container("{requests: {cpu: '4'}, limits: {cpu: '2'}}"));
    assert_eq!(
        e,
        "spec.containers[0].resources.requests: Invalid value: \"4\": must be less than or equal to cpu limit of 2"
    );
    let e = pod_error(&container(
        "{requests: {example.com/nic: '1'}, limits: {example.com/nic: '2'}}",
    ));
    assert!(e.contains("must be equal to example.com/nic limit of 2"), "{e}");
    let e = pod_error(&container("{requests: {nvidia.com/gpu: '1'}}"));
    assert_eq!(
        e,
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
    );
    // Below the limit is fine for cpu and memory.
    pod_from_yaml(
        &container("{requests: {cpu: '1', memory: 1Gi}, limits: {cpu: '2', memory: 2Gi}}"),
        "u",
    )
    .expect("Burstable");
}

/// Amounts past 64 bits used to be saturated silently (`1e30` CPUs,
/// `8Ei` of memory capped at 2^63-1), then refused ("too large") where the
/// API server accepts them. The kubelet reads them with Go's wrapped
/// `Value()` / `MilliValue()`, and so does topoalign now (issue #29; the
/// values a Go program printed with k8s.io/apimachinery v0.37.2).
#[test]
fn quantities_past_64_bits_are_read_as_go_reads_them() {
    for (resources, name, value, milli) in [
        ("{limits: {cpu: '1e30'}}", "cpu", 0, 0),
        (
            "{limits: {cpu: '9223372036854776'}}",
            "cpu",
            9_223_372_036_854_776,
            -9_223_372_036_854_775_616,
        ),
        ("{limits: {memory: '8Ei'}}", "memory", i64::MAX, -1000),
        ("{limits: {memory: '1e19'}}", "memory", 0, 0),
        ("{limits: {example.com/nic: '1e20'}}", "example.com/nic", 0, 0),
    ] {
        let pod = pod_from_yaml(&container(resources), "u").unwrap_or_else(|e| panic!("{resources}: {e}"));
        let quantity = pod.containers[0].limits.get(name).copied().expect("a limit");
        assert_eq!(
            (quantity.go_value(), quantity.go_milli_value()),
            (value, milli),
            "{resources}"
        );
    }
    pod_from_yaml(&container("{limits: {cpu: '64', memory: 7Ei}}"), "u").expect("large but representable");
}

/// Terminal escapes, NUL and right-to-left marks in names reached the
/// terminal and the agent's log; names follow the API server's DNS-1123
/// rules now, and the refused value is shown escaped.
#[test]
fn names_with_escapes_nul_or_bidi_marks_are_refused_and_shown_escaped() {
    for (name, escaped) in [
        ("evil\u{1b}[31m", "\\u{1b}"),
        ("nul\u{0}x", "\\0"),
        ("abc\u{202e}cba", "\\u{202e}"),
    ] {
        let yaml = format!(
            "metadata: {{name: {}}}\nspec:\n  containers:\n  - name: app\n",
            serde_json::to_string(name).expect("json")
        );
        let e = pod_error(&yaml);
        assert!(e.starts_with("metadata.name: Invalid value: "), "{e}");
        assert!(e.contains(escaped) && !e.contains(name), "{e}");
    }
    let e = pod_error("metadata: {name: p, namespace: Prod}\nspec:\n  containers:\n  - name: app\n");
    assert!(
        e.starts_with("metadata.namespace: Invalid value: \"Prod\": a lowercase RFC 1123 label"),
        "{e}"
    );
    let e = pod_error("metadata: {name: p}\nspec:\n  containers:\n  - name: my_app\n");
    assert!(
        e.starts_with("spec.containers[0].name: Invalid value: \"my_app\""),
        "{e}"
    );
    let e = pod_error(&format!(
        "metadata: {{name: {}}}\nspec:\n  containers:\n  - name: a\n",
        "a".repeat(254)
    ));
    assert!(e.ends_with("must be no more than 253 characters"), "{e}");
    pod_from_yaml("metadata: {name: a.b-c}\nspec:\n  containers:\n  - name: app\n", "u").expect("a valid name");
}

/// `replicas: 1000000000` (or `--replicas`) aborted on allocation.
#[test]
fn a_billion_replicas_are_refused_before_any_is_made() {
    let deployment =
        "kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n";
    let options = ManifestOptions {
        replicas: Some(1_000_000_000),
        ..ManifestOptions::default()
    };
    let e = read_manifests(deployment, &options).expect_err("refused");
    assert!(e.to_string().contains("at most 1000000 pods"), "{e}");
    let two = ManifestOptions {
        replicas: Some(2),
        ..ManifestOptions::default()
    };
    assert_eq!(read_manifests(deployment, &two).expect("read").pods.len(), 2);
    let own = deployment.replacen("spec:\n", "spec:\n  replicas: 1000000000\n", 1);
    let e = read_manifests(&own, &ManifestOptions::default()).expect_err("refused");
    assert!(
        e.to_string()
            .starts_with("spec.template: 1000000000 replicas: more than 1000000 pods"),
        "{e}"
    );
}

/// `--replicas` replaced a manifest's own `replicas` instead of defaulting
/// to it.
#[test]
fn a_workload_makes_its_own_replicas_unless_told_otherwise() {
    let workloads = "kind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n  template:\n    spec: {containers: [{name: c}]}\n\
        ---\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 4\n  completions: 2\n  template:\n    spec: {containers: [{name: c}]}\n\
        ---\nkind: DaemonSet\nmetadata: {name: ds}\nspec:\n  template:\n    spec: {containers: [{name: c}]}\n\
        ---\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n  template:\n    spec: {containers: [{name: c}]}\n";
    let keys = |options: &ManifestOptions| -> Vec<String> {
        read_manifests(workloads, options)
            .expect("read")
            .pods
            .iter()
            .map(|p| p.pod.key())
            .collect()
    };
    assert_eq!(
        keys(&ManifestOptions::default()),
        [
            "default/d-0",
            "default/d-1",
            "default/d-2",
            "default/j-0",
            "default/j-1",
            "default/ds-0",
            "default/s-0"
        ]
    );
    let one = ManifestOptions {
        replicas: Some(1),
        ..ManifestOptions::default()
    };
    assert_eq!(
        keys(&one),
        ["default/d-0", "default/j-0", "default/ds-0", "default/s-0"]
    );
    let bad = "kind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: -2\n  template:\n    spec: {containers: [{name: c}]}\n";
    let e = read_manifests(bad, &ManifestOptions::default()).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "spec.replicas: expected a non-negative integer, found -2"
    );
}

/// The same `namespace/name` twice in the pods admitted together lost
/// CPUs from the final state.
#[test]
fn the_same_pod_name_twice_is_an_error_naming_both() {
    let text = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\n\
        kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: [{name: c}]}\n";
    let e = read_manifests(text, &ManifestOptions::default()).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "document 2: metadata.name: default/p again (first as Pod default/p): the API server holds one pod per namespace/name"
    );
}

/// A typo in a KubeletConfiguration field flipped the answer silently.
#[test]
fn kubelet_config_typo_warns_naming_the_close_field() {
    let value = serde_json::json!({"cpuManagerPolcy": "static", "topologyManagerPolicy": "single-numa-node"});
    let warnings = topoalign_k8s::unknown_field_warnings(&value);
    assert_eq!(
        warnings,
        vec![
            "unknown KubeletConfiguration field \"cpuManagerPolcy\" is ignored, as the kubelet ignores it; did you \
             mean \"cpuManagerPolicy\"?"
                .to_owned()
        ]
    );
}

/// The problem kinds a caller can match on stay distinct.
#[test]
fn too_large_is_its_own_problem() {
    // 43 significant digits past 1.7e29 units: more than topoalign holds.
    let error = pod_from_yaml(
        &container("{limits: {cpu: '1234567890123456789012345678901234567890123'}}"),
        "u",
    )
    .expect_err("refused");
    assert!(matches!(error.problem(), PodProblem::TooLarge { .. }));
}

/// The pod reader refused amounts past 64 bits ("too large") that the API
/// server accepts and the kubelet admits (difftest seeds 121 and 180 of
/// 1.32/1.37, issue #29): they are read, and counted with Go's wrapped
/// `Value()` / `MilliValue()`.
#[test]
fn amounts_past_64_bits_are_pods_the_api_server_accepts() {
    for amount in [
        "'9223372036854775807 '",
        "'9Ei'",
        "'16Ei'",
        "'18446744073709551616'",
        "'1e40'",
        "'98765432109876543210987654321000000000.n'",
        "'8e2147483647'",
    ] {
        let pod = pod_from_yaml(
            &container(&format!("{{limits: {{cpu: {amount}, memory: {amount}}}}}")),
            "u",
        )
        .unwrap_or_else(|e| panic!("{amount}: {e}"));
        assert_eq!(
            pod.containers[0].requests.get("cpu"),
            pod.containers[0].limits.get("cpu"),
            "{amount}"
        );
    }
    // Extended resources must be whole by Go's wrapped `MilliValue() %
    // 1000`: `1e19` (MilliValue 0) is; `1.5` is not.
    pod_from_yaml(&container("{limits: {example.com/gpu: '1e19'}}"), "u").expect("whole");
    let error = pod_from_yaml(&container("{limits: {example.com/gpu: '1.5'}}"), "u").expect_err("fractional");
    assert!(matches!(error.problem(), PodProblem::Fractional(_)), "{error}");
}

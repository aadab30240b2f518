//! The examples in `examples/` (the seeds' situations) run as a user runs
//! them: their text output is pinned by snapshots, and every fix the
//! explanations offer is checked again here, independently of the code
//! that found it — pod and removal fixes by running the binary on the
//! changed input, kubelet fixes by starting a node with the changed
//! configuration, restoring the state into it and admitting the pod.

mod agent_support;

use agent_support::{repo, run_in_repo as run};
use serde_json::{Value, json};
use topoalign_engine::Node;
use topoalign_k8s::{KubeletConfiguration, node_config, pod_from_value};
use topoalign_scenario::Scenario;

/// `admit` exits 3 when its text report holds a rejected pod; every other
/// example (`explain` included: a rejection is what it explains) exits 0.
fn expected_status(args: &[&str], stdout: &str) -> i32 {
    let judges = args.first() == Some(&"admit");
    if judges && stdout.contains(": REJECTED") { 3 } else { 0 }
}

/// (snapshot name, arguments) of every example.
const EXAMPLES: [(&str, &[&str]); 9] = [
    (
        "too_large",
        &[
            "explain",
            "examples/pods/too-large.yaml",
            "--node",
            "examples/nodes/two-numa.yaml",
        ],
    ),
    (
        "fragmented",
        &[
            "explain",
            "examples/pods/fragmented.yaml",
            "--node",
            "examples/nodes/two-numa-fragmented.yaml",
        ],
    ),
    (
        "gpu_on_a_busy_numa_node",
        &[
            "explain",
            "examples/pods/gpu-pod.yaml",
            "--node",
            "examples/nodes/two-numa-gpu-busy.yaml",
        ],
    ),
    (
        "fractional_cpu",
        &[
            "admit",
            "examples/pods/fractional-cpu.yaml",
            "--node",
            "examples/nodes/two-numa.yaml",
        ],
    ),
    (
        "two_socket_gpu",
        &[
            "admit",
            "examples/pods/gpu-training.yaml",
            "--node",
            "examples/nodes/two-socket-gpu.yaml",
        ],
    ),
    (
        "gpu_held_by_another_pod",
        &[
            "explain",
            "examples/pods/gpu-training.yaml",
            "--node",
            "examples/scenarios/two-socket-gpu.yaml",
        ],
    ),
    (
        "dpdk",
        &[
            "admit",
            "examples/pods/dpdk.yaml",
            "--node",
            "examples/nodes/dpdk-node.yaml",
        ],
    ),
    (
        "training_4gpu",
        &[
            "admit",
            "examples/pods/training-4gpu.yaml",
            "--node",
            "examples/nodes/gpu-8x-dual-socket.yaml",
            "--replicas",
            "3",
        ],
    ),
    (
        "diagnose_0023",
        &[
            "diagnose",
            "--kubelet-dir",
            "testdata/kubelet-state/0023",
            "--node",
            "testdata/conformance/1.32/scenarios/0023.json",
        ],
    ),
];

#[test]
fn text_output_of_every_example() {
    for (name, args) in EXAMPLES {
        let (status, stdout, stderr) = run(args);
        assert_eq!(status, expected_status(args, &stdout), "{name}: {stderr}");
        insta::assert_snapshot!(name, stdout);
    }
}

#[test]
fn the_seed_situations_come_out_as_the_kubelet_decides() {
    let json = |args: &[&str]| -> Value {
        let mut args = args.to_vec();
        args.extend(["-o", "json"]);
        let (status, stdout, stderr) = run(&args);
        let document: Value = serde_json::from_str(&stdout).expect("JSON");
        let rejected = document["results"]
            .as_array()
            .is_some_and(|results| results.iter().any(|r| r["admitted"] == false));
        let judges = args[0] == "admit";
        assert_eq!(status, if judges && rejected { 3 } else { 0 }, "{stderr}");
        document
    };
    let too_large = json(EXAMPLES[0].1);
    assert_eq!(too_large["results"][0]["reason"], "TopologyAffinityError");
    assert_eq!(too_large["results"][0]["explanation"]["emptyNode"]["admitted"], false);
    let two_socket = json(EXAMPLES[4].1);
    let trainer = &two_socket["results"][0]["containers"][0];
    assert_eq!(trainer["cpus"], "12-15,36-39");
    assert_eq!(trainer["memoryNuma"], json!([1]));
    assert_eq!(trainer["devices"]["nvidia.com/gpu"], json!(["gpu0"]));
    assert_eq!(two_socket["results"][0]["affinity"], json!([1]));
    let fractional = json(EXAMPLES[3].1);
    assert_eq!(fractional["results"][0]["containers"][0]["cpus"], Value::Null);
    assert_eq!(fractional["results"][0]["containers"][0]["memoryNuma"], json!([0]));
    assert!(
        fractional["results"][0]["warnings"][0]
            .as_str()
            .expect("warning")
            .contains("3500m")
    );
    let dpdk = json(EXAMPLES[6].1);
    assert_eq!(
        dpdk["results"][0]["containers"][0]["devices"]["intel.com/sriov"],
        json!(["vf0", "vf1"])
    );
    let training = json(EXAMPLES[7].1);
    let admitted: Vec<bool> = training["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["admitted"] == true)
        .collect();
    assert_eq!(admitted, [true, true, false]);
}

/// The node an example runs on, built here from its scenario: the machine,
/// the kubelet block, the events replayed.
fn example_node(path: &str, kubelet_changes: &serde_json::Map<String, Value>) -> (Node, Value) {
    let text = std::fs::read_to_string(repo().join(path)).expect("node file");
    let scenario = Scenario::parse(&text).expect("scenario");
    let machine = scenario.topology.to_machine().expect("machine");
    let mut kubelet = scenario.kubelet.as_object().cloned().unwrap_or_default();
    let original = Value::Object(kubelet.clone());
    kubelet.extend(kubelet_changes.clone());
    let config = KubeletConfiguration::from_value(&original).expect("config");
    let mut node = Node::start(machine.clone(), node_config(&config, &machine).expect("starts")).expect("starts");
    let mut added: Vec<(String, String)> = Vec::new();
    for (i, event) in scenario.events.iter().enumerate() {
        if let Some(manifest) = &event.add {
            let pod = pod_from_value(manifest, &format!("event-{i}")).expect("pod");
            added.push((pod.key(), pod.uid.clone()));
            node.admit(pod);
        } else if let Some(key) = &event.delete {
            let position = added.iter().position(|(k, _)| k == key).expect("added before");
            node.remove(&added.remove(position).1);
        }
    }
    if kubelet_changes.is_empty() {
        return (node, original);
    }
    // A kubelet restarted with the changed configuration on the same state.
    let changed = KubeletConfiguration::from_value(&Value::Object(kubelet)).expect("changed config");
    let mut restarted = Node::start(machine.clone(), node_config(&changed, &machine).expect("starts")).expect("starts");
    restarted.restore(node.snapshot()).expect("the state restores");
    (restarted, original)
}

#[test]
fn every_fix_admits_the_pod() {
    let mut checked = 0;
    for (name, args) in EXAMPLES.iter().filter(|(_, a)| a[0] == "explain") {
        let (pod_file, node_file) = (args[1], args[3]);
        let mut json_args = args.to_vec();
        json_args.extend(["-o", "json"]);
        let (_, stdout, _) = run(&json_args);
        let doc: Value = serde_json::from_str(&stdout).expect("JSON");
        let result = &doc["results"][0];
        let fixes = result["explanation"]["fixes"].as_array().expect("fixes");
        if result["admitted"] == false {
            assert!(!fixes.is_empty(), "{name}: a rejected example offers fixes");
        }
        for fix in fixes {
            let kinds: Vec<&str> = ["pod", "kubelet", "remove"]
                .into_iter()
                .filter(|k| fix.get(*k).is_some())
                .collect();
            assert_eq!(kinds.len(), 1, "{name}: exactly one change per fix: {fix}");
            assert!(fix["description"].is_string());
            let temp = std::env::temp_dir().join(format!("topoalign-fix-{name}-{checked}"));
            std::fs::create_dir_all(&temp).expect("temp");
            match kinds[0] {
                "pod" => {
                    // The changed manifest, admitted by the binary on the same node.
                    let file = temp.join("pod.json");
                    std::fs::write(&file, fix["pod"].to_string()).expect("write");
                    let (_, out, _) = run(&["admit", &file.display().to_string(), "--node", node_file, "-o", "json"]);
                    let out: Value = serde_json::from_str(&out).expect("JSON");
                    assert_eq!(out["results"][0]["admitted"], true, "{name}: {fix}");
                }
                "remove" => {
                    // The node's history with the removals appended.
                    let text = std::fs::read_to_string(repo().join(node_file)).expect("node");
                    let mut scenario: Value = serde_yaml_ng::from_str(&text).expect("yaml");
                    let events = scenario["events"].as_array_mut().expect("events");
                    for key in fix["remove"].as_array().expect("keys") {
                        events.push(json!({"delete": key}));
                    }
                    let file = temp.join("node.json");
                    std::fs::write(&file, scenario.to_string()).expect("write");
                    let (_, out, _) = run(&["admit", pod_file, "--node", &file.display().to_string(), "-o", "json"]);
                    let out: Value = serde_json::from_str(&out).expect("JSON");
                    assert_eq!(out["results"][0]["admitted"], true, "{name}: {fix}");
                }
                _ => {
                    let changes = fix["kubelet"].as_object().expect("fields");
                    let (mut node, _) = example_node(node_file, changes);
                    let text = std::fs::read_to_string(repo().join(pod_file)).expect("pod");
                    let pod = topoalign_k8s::pod_from_yaml(&text, "fix-check").expect("pod");
                    assert!(node.admit(pod).admitted(), "{name}: {fix}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "every explained example's fixes were checked ({checked})");
}

/// The README's first command and the output it shows agree.
#[test]
fn the_readme_shows_the_main_example_as_it_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let first = readme
        .lines()
        .find(|l| l.starts_with("cargo run -q -- "))
        .expect("the main-job command");
    let command: Vec<&str> = first
        .trim_start_matches("cargo run -q -- ")
        .split('#')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let (status, stdout, stderr) = run(&command);
    assert_eq!(status, expected_status(&command, &stdout), "{stderr}");
    assert!(
        readme.contains(&stdout),
        "README shows the output of `{first}`:\n{stdout}"
    );
}

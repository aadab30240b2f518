//! Every command that reads a node on a machine of MORE than 64 NUMA nodes
//! (issue #29): the 72-node machine of the `hand-numa-nodes-72-*` vectors
//! (testdata/conformance/1.37, README-numa-nodes-72*.md), ids 0-71. The
//! kubelet runs it under topology policy `none` (the Static memory manager
//! until a Guaranteed pod comes); any other policy refuses to start past
//! `max-allowable-numa-nodes` and, with that option raised, crashes at the
//! first admission.
//!
//! Every expected answer is read from the vectors: the pods of a vector's
//! events, asked of `admit` on its machine after the events before them,
//! must get the real kubelet's answers (`expected/`, from the oracle);
//! NUMA ids printed are checked against the machine's topology block;
//! where the kubelet crashes or refuses to start, the command says so.
//! No answer of the engine is written down here. Nothing may panic: each
//! command's exit code is the documented one and its stderr names no panic.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};

mod agent_support;
mod common;

use agent_support::repo;
use common::topoalign;

const VECTORS: &str = "testdata/conformance/1.37";

fn read_json(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The scenario of vector `name` (`hand-numa-nodes-72-<name>`).
fn vector(name: &str) -> Value {
    read_json(
        repo()
            .join(VECTORS)
            .join(format!("scenarios/hand-numa-nodes-72-{name}.json")),
    )
}

/// The real kubelet's answer to vector `name`.
fn expected(name: &str) -> Value {
    read_json(
        repo()
            .join(VECTORS)
            .join(format!("expected/hand-numa-nodes-72-{name}.json")),
    )
}

fn vector_path(name: &str) -> PathBuf {
    repo()
        .join(VECTORS)
        .join(format!("scenarios/hand-numa-nodes-72-{name}.json"))
}

fn write(name: &str, value: &Value) -> PathBuf {
    common::temp_file("numa-nodes-72", name, &value.to_string())
}

/// A node file: the vector's topology and kubelet blocks (the kubelet's
/// fields `kubelet` set over it) and its first `replayed` events.
fn node_file(file: &str, name: &str, replayed: usize, kubelet: &Value) -> PathBuf {
    let mut scenario = vector(name);
    let events: Vec<Value> = scenario["events"].as_array().unwrap()[..replayed].to_vec();
    scenario["events"] = Value::from(events);
    for (field, value) in kubelet.as_object().unwrap() {
        scenario["kubelet"][field] = value.clone();
    }
    write(file, &scenario)
}

/// The pods the vector's events `from..to` add (all must be `add`), as a
/// v1 List.
fn pods_file(file: &str, name: &str, from: usize, to: usize) -> PathBuf {
    let scenario = vector(name);
    let items: Vec<Value> = scenario["events"].as_array().unwrap()[from..to]
        .iter()
        .map(|event| event.get("add").cloned().expect("an add event"))
        .collect();
    write(file, &json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    topoalign().args(args).output().expect("runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The exit code is `code` and nothing panicked.
fn exits(output: &Output, code: i32, what: &str) {
    let err = stderr(output);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_eq!(output.status.code(), Some(code), "{what}: {err}\n{}", stdout(output));
}

fn json_of(output: &Output, what: &str) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{what}: JSON on stdout ({e}): {}", stderr(output)))
}

/// Text with runs of whitespace as one space (reports wrap their lines).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// CPU id -> NUMA id, from the vector's topology block.
fn numa_of_cpus(name: &str) -> BTreeMap<u64, u64> {
    vector(name)["topology"]["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cpu| (cpu["id"].as_u64().unwrap(), cpu["numa"].as_u64().unwrap()))
        .collect()
}

/// The NUMA ids of the vector's topology block.
fn numa_ids(name: &str) -> Vec<u64> {
    vector(name)["topology"]["numaNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["id"].as_u64().unwrap())
        .collect()
}

/// A Linux CPU list (`2-3,8-11`).
fn cpu_list(text: &str) -> Vec<u64> {
    text.split(',')
        .filter(|part| !part.is_empty())
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => (a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap()).collect::<Vec<_>>(),
            None => vec![part.parse().unwrap()],
        })
        .collect()
}

/// Admit's result must carry every field of the kubelet's result (but the
/// event number, which counts the scenario's events).
fn assert_same_answer(ours: &Value, kubelet: &Value, what: &str) {
    for (field, value) in kubelet.as_object().unwrap() {
        if field == "event" {
            continue;
        }
        assert_eq!(
            &ours[field], value,
            "{what}: {field} of {}\nours: {ours}",
            kubelet["pod"]
        );
    }
}

/// The vectors' pods, asked of `admit` after the events before them: the
/// kubelet's answers, in JSON (with and without --explain), YAML and text;
/// the exit code 3 exactly when one is refused.
#[test]
fn admit_answers_the_vectors_pods_as_the_kubelet() {
    // (vector, events replayed as the node's running pods, end of the
    // run of `add` events asked of admit).
    let cases = [
        ("memory-none", 0, 5),
        ("memory-none", 8, 11),
        ("static-memory", 0, 4),
        ("static-memory", 7, 8),
        ("cpu-none", 0, 2),
        ("wide-pods", 0, 6),
        ("distribute-by-socket", 0, 5),
    ];
    for (name, replayed, to) in cases {
        let what = format!("{name} events {replayed}..{to}");
        let node = node_file(&format!("{name}-{replayed}.json"), name, replayed, &json!({}));
        let pods = pods_file(&format!("{name}-{replayed}-pods.json"), name, replayed, to);
        let answers: Vec<Value> = expected(name)["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["event"]
                    .as_u64()
                    .is_some_and(|e| (replayed as u64..to as u64).contains(&e))
            })
            .cloned()
            .collect();
        assert_eq!(answers.len(), to - replayed, "{what}: the vector answers each pod");
        let code = if answers.iter().all(|a| a["admitted"] == true) {
            0
        } else {
            3
        };

        let mut documents = Vec::new();
        for extra in [&["-o", "json"][..], &["-o", "json", "--explain"][..]] {
            let output = run([OsStr::new("admit"), OsStr::new("--node"), node.as_os_str()]
                .into_iter()
                .chain(extra.iter().map(OsStr::new))
                .chain([pods.as_os_str()]));
            exits(&output, code, &what);
            let doc = json_of(&output, &what);
            let results = doc["results"].as_array().unwrap();
            assert_eq!(results.len(), answers.len(), "{what} {extra:?}");
            for (ours, kubelet) in results.iter().zip(&answers) {
                assert_same_answer(ours, kubelet, &format!("{what} {extra:?}"));
            }
            documents.push(doc);
        }
        let output = run([
            OsStr::new("admit"),
            OsStr::new("-o"),
            OsStr::new("yaml"),
            OsStr::new("--node"),
        ]
        .into_iter()
        .chain([node.as_os_str(), pods.as_os_str()]));
        exits(&output, code, &what);
        let yaml: Value = serde_yaml_ng::from_slice(&output.stdout).expect("YAML");
        assert_eq!(yaml, documents[0], "{what}: YAML is the JSON document");

        let output = run([
            OsStr::new("admit"),
            OsStr::new("--node"),
            node.as_os_str(),
            pods.as_os_str(),
        ]);
        exits(&output, code, &what);
        let text = words(&stdout(&output));
        for kubelet in &answers {
            let pod = kubelet["pod"].as_str().unwrap();
            let verdict = if kubelet["admitted"] == true {
                format!("{pod}: admitted")
            } else {
                format!("{pod}: REJECTED, {}", kubelet["reason"].as_str().unwrap())
            };
            assert!(text.contains(&verdict), "{what}: {verdict}\n{text}");
        }
    }
}

/// The NUMA ids admit prints are the machine's: each container's CPUs
/// counted per NUMA node of the topology block (70 and 71 among them),
/// the devices' NUMA nodes, and the per-NUMA table of a refused pod.
#[test]
fn admit_prints_the_machines_numa_ids() {
    let name = "wide-pods";
    let node = node_file("ids-node.json", name, 0, &json!({}));
    let pods = pods_file("ids-pods.json", name, 0, 6);
    let numa_of = numa_of_cpus(name);
    let kubelet = expected(name);
    let output = run([
        OsStr::new("admit"),
        OsStr::new("--node"),
        node.as_os_str(),
        pods.as_os_str(),
    ]);
    exits(&output, 3, "admit text");
    let text = words(&stdout(&output));
    let mut seen = BTreeSet::new();
    for result in kubelet["results"].as_array().unwrap() {
        for container in result["containers"].as_array().into_iter().flatten() {
            let Some(cpus) = container["cpus"].as_str() else {
                continue;
            };
            let mut per_numa: BTreeMap<u64, usize> = BTreeMap::new();
            for cpu in cpu_list(cpus) {
                *per_numa.entry(numa_of[&cpu]).or_default() += 1;
            }
            for (numa, count) in per_numa {
                let cpus_word = if count == 1 { "CPU" } else { "CPUs" };
                let phrase = format!("NUMA {numa}: {count} {cpus_word} on");
                assert!(text.contains(&phrase), "{phrase}\n{text}");
                seen.insert(numa);
            }
        }
    }
    assert!(seen.contains(&70) && seen.contains(&71), "{seen:?}");

    // All GPUs: their NUMA nodes from the topology block, in id order.
    let device_numa: BTreeSet<u64> = vector(name)["topology"]["devices"]["example.com/gpu"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["numa"].as_array().cloned().unwrap_or_default())
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert!(device_numa.contains(&70));
    let joined: Vec<String> = device_numa.iter().map(ToString::to_string).collect();
    let phrase = format!("(NUMA {})", joined.join("+"));
    assert!(text.contains(&phrase), "{phrase}\n{text}");

    // The refused pod's table: one row per NUMA node of the machine, and
    // the free CPUs add up to what the kubelet says is available.
    let output = run([
        OsStr::new("admit"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--explain"),
    ]
    .into_iter()
    .chain([OsStr::new("--node"), node.as_os_str(), pods.as_os_str()]));
    exits(&output, 3, "admit --explain");
    let doc = json_of(&output, "admit --explain");
    let refused = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pod"] == "default/g-too-many")
        .unwrap();
    let rows = refused["explanation"]["resources"]["numa"].as_array().unwrap();
    let nodes: Vec<u64> = rows.iter().map(|row| row["node"].as_u64().unwrap()).collect();
    assert_eq!(nodes, numa_ids(name));
    let free: u64 = rows
        .iter()
        .map(|row| {
            row["resources"]["cpu"]["free"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let message = kubelet["results"][2]["message"].as_str().unwrap();
    let available: u64 = message
        .split("available=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(free, available, "{message}");
}

/// `explain` on a refused pod and an admitted one: exit 0, the verdicts
/// the kubelet gives, the refused pod's table naming NUMA 71.
#[test]
fn explain_a_refused_and_an_admitted_pod() {
    let name = "wide-pods";
    let node = node_file("explain-node.json", name, 0, &json!({}));
    let pods = pods_file("explain-pods.json", name, 0, 3);
    let kubelet = expected(name);
    let output = run([
        OsStr::new("explain"),
        OsStr::new("--node"),
        node.as_os_str(),
        pods.as_os_str(),
    ]);
    exits(&output, 0, "explain");
    let text = stdout(&output);
    let flat = words(&text);
    assert!(flat.contains("default/g-wide: admitted"), "{text}");
    let reason = kubelet["results"][2]["reason"].as_str().unwrap();
    assert!(
        flat.contains(&format!("default/g-too-many: REJECTED, {reason}")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("free on NUMA 71 ")),
        "{text}"
    );
    assert!(
        flat.contains("fixes (each checked by admitting the pod again)"),
        "{text}"
    );

    let output = run([
        OsStr::new("explain"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--node"),
    ]
    .into_iter()
    .chain([node.as_os_str(), pods.as_os_str()]));
    exits(&output, 0, "explain -o json");
    let doc = json_of(&output, "explain -o json");
    for (ours, answer) in doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(kubelet["results"].as_array().unwrap())
    {
        assert_same_answer(ours, answer, "explain -o json");
        assert!(ours.get("explanation").is_some(), "explain explains every pod: {ours}");
    }
}

/// `replay` of every 72-node vector is the kubelet's document.
#[test]
fn replay_gives_the_kubelets_documents() {
    for name in [
        "memory-none",
        "static-memory",
        "cpu-none",
        "best-effort",
        "wide-pods",
        "distribute-by-socket",
    ] {
        let kubelet = expected(name);
        let code = if kubelet.get("error").is_some() { 2 } else { 0 };
        let output = run([
            OsStr::new("replay"),
            OsStr::new("-o"),
            OsStr::new("json"),
            vector_path(name).as_os_str(),
        ]);
        exits(&output, code, name);
        assert_eq!(json_of(&output, name), kubelet, "{name}");
        let output = run([OsStr::new("replay"), vector_path(name).as_os_str()]);
        exits(&output, code, name);
    }
}

/// The configurations the kubelet does not run on this machine.
const SINGLE_NUMA_RAISED: &str = "single-numa-node";

fn raised(policy: &str) -> Value {
    json!({"topologyManagerPolicy": policy, "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "72"}})
}

/// single-numa-node with max-allowable-numa-nodes raised: the kubelet
/// starts and crashes at the first admission. admit, explain and replay
/// say so; simulate admits no pod there.
#[test]
fn single_numa_node_with_the_limit_raised_is_the_kubelets_crash() {
    let name = "wide-pods";
    let node = node_file("crash-node.json", name, 0, &raised(SINGLE_NUMA_RAISED));
    let pods = pods_file("crash-pods.json", name, 0, 6);

    let output = run([
        OsStr::new("admit"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--node"),
    ]
    .into_iter()
    .chain([node.as_os_str(), pods.as_os_str()]));
    exits(&output, 3, "admit");
    let doc = json_of(&output, "admit");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "the kubelet stops at the crash: {doc}");
    assert_eq!(results[0]["admitted"], false);
    assert_eq!(results[0]["reason"], "KubeletPanic");
    let message = results[0]["message"].as_str().unwrap();
    assert!(
        message.contains("NUMA node id 64") && message.contains("single-numa-node"),
        "{message}"
    );
    assert!(stderr(&output).contains("not reached"), "{}", stderr(&output));

    for command in ["admit", "explain"] {
        let output = run([
            OsStr::new(command),
            OsStr::new("--node"),
            node.as_os_str(),
            pods.as_os_str(),
        ]);
        exits(&output, if command == "admit" { 3 } else { 0 }, command);
        let text = words(&stdout(&output));
        assert!(
            text.contains("default/g-all-gpus: THE KUBELET CRASHES"),
            "{command}: {text}"
        );
        assert!(!text.contains("default/g-all-gpus: admitted"), "{command}: {text}");
        assert!(text.contains("not reached: default/g-wide"), "{command}: {text}");
        if command == "explain" {
            assert!(text.contains("Set topologyManagerPolicy: none"), "{text}");
        }
    }

    let mut scenario = vector(name);
    scenario["kubelet"]["topologyManagerPolicy"] = json!(SINGLE_NUMA_RAISED);
    scenario["kubelet"]["topologyManagerPolicyOptions"] = json!({"max-allowable-numa-nodes": "72"});
    let path = write("crash-scenario.json", &scenario);
    let output = run([OsStr::new("replay"), path.as_os_str()]);
    exits(&output, 2, "replay");
    let text = stdout(&output) + &stderr(&output);
    assert!(
        text.contains("events[0].add") && text.contains("NUMA node id 64"),
        "{text}"
    );
}

/// Under none the Static memory manager crashes on the first Guaranteed
/// container; the Burstable pods before it are the kubelet's answers.
#[test]
fn static_memory_manager_crashes_on_a_guaranteed_pod() {
    let name = "static-memory";
    let node = node_file("memory-node.json", name, 0, &json!({}));
    let kubelet = expected(name);
    let mut items: Vec<Value> = vector(name)["events"].as_array().unwrap()[..2]
        .iter()
        .map(|e| e["add"].clone())
        .collect();
    items.push(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}),
    );
    let pods = write(
        "memory-pods.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": items}),
    );
    let output = run([
        OsStr::new("admit"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--node"),
    ]
    .into_iter()
    .chain([node.as_os_str(), pods.as_os_str()]));
    exits(&output, 3, "admit");
    let doc = json_of(&output, "admit");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for (ours, answer) in results.iter().zip(kubelet["results"].as_array().unwrap()).take(2) {
        assert_same_answer(ours, answer, "Burstable and BestEffort");
    }
    assert_eq!(results[2]["reason"], "KubeletPanic");
    assert!(
        results[2]["message"].as_str().unwrap().contains("memory manager"),
        "{doc}"
    );

    let output = run([
        OsStr::new("explain"),
        OsStr::new("--node"),
        node.as_os_str(),
        pods.as_os_str(),
    ]);
    exits(&output, 0, "explain");
    let text = words(&stdout(&output));
    assert!(text.contains("default/pinned: THE KUBELET CRASHES"), "{text}");
    assert!(text.contains("Set memoryManagerPolicy: None"), "{text}");
}

/// best-effort without max-allowable-numa-nodes: the kubelet refuses to
/// start (the vector's error); every command that starts a kubelet says so.
#[test]
fn best_effort_without_the_option_is_the_kubelets_refusal_to_start() {
    let name = "best-effort";
    let refusal = expected(name)["error"].as_str().unwrap().to_owned();
    let node = node_file("refused-node.json", name, 0, &json!({}));
    let pods = pods_file("refused-pods.json", "wide-pods", 0, 2);
    for command in ["admit", "explain"] {
        let output = run([
            OsStr::new(command),
            OsStr::new("--node"),
            node.as_os_str(),
            pods.as_os_str(),
        ]);
        exits(&output, 2, command);
        assert!(stderr(&output).contains(&refusal), "{command}: {}", stderr(&output));
    }
    let output = run([OsStr::new("nrt"), vector_path(name).as_os_str()]);
    exits(&output, 2, "nrt");
    assert!(stderr(&output).contains(&refusal), "nrt: {}", stderr(&output));

    let scenario = vector(name);
    let fleet = write(
        "refused-fleet.json",
        &json!({"nodes": [{"name": "wide", "count": 1, "topology": scenario["topology"], "kubelet": scenario["kubelet"]}]}),
    );
    let output = run([
        OsStr::new("simulate"),
        fleet.as_os_str(),
        pods.as_os_str(),
        OsStr::new("--policy"),
        OsStr::new("best-effort"),
    ]);
    exits(&output, 2, "simulate");
    assert!(stderr(&output).contains(&refusal), "simulate: {}", stderr(&output));
}

/// `topology` shows the machine's own ids: JSON and the scenario it writes
/// hold the topology block's nodes and CPUs; text and picture name node 71.
#[test]
fn topology_shows_the_72_nodes_by_their_ids() {
    let name = "memory-none";
    let node = node_file("topology-node.json", name, 0, &json!({}));
    let numa_of = numa_of_cpus(name);

    let output = run([
        OsStr::new("topology"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--node"),
        node.as_os_str(),
    ]);
    exits(&output, 0, "topology -o json");
    let doc = json_of(&output, "topology -o json");
    let ids: Vec<u64> = doc["numaNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, numa_ids(name));
    for numa in doc["numaNodes"].as_array().unwrap() {
        let id = numa["id"].as_u64().unwrap();
        let cpus: Vec<u64> = cpu_list(numa["cpus"].as_str().unwrap());
        let from_block: Vec<u64> = numa_of.iter().filter(|(_, n)| **n == id).map(|(c, _)| *c).collect();
        assert_eq!(cpus, from_block, "NUMA node {id}");
    }

    let output = run([
        OsStr::new("topology"),
        OsStr::new("-o"),
        OsStr::new("scenario"),
        OsStr::new("--node"),
        node.as_os_str(),
    ]);
    exits(&output, 0, "topology -o scenario");
    let written = json_of(&output, "topology -o scenario");
    let block = &vector(name)["topology"];
    let node_ids = |t: &Value| -> Vec<u64> {
        t["numaNodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(node_ids(&written["topology"]), node_ids(block));
    let cpu_numa = |t: &Value| -> BTreeMap<u64, u64> {
        t["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["id"].as_u64().unwrap(), c["numa"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(cpu_numa(&written["topology"]), cpu_numa(block));
    // The written scenario is a node file again.
    let again = write("topology-again.json", &written);
    let output = run([
        OsStr::new("topology"),
        OsStr::new("-o"),
        OsStr::new("json"),
        OsStr::new("--node"),
        again.as_os_str(),
    ]);
    exits(&output, 0, "topology of the written scenario");
    assert_eq!(json_of(&output, "again")["numaNodes"], doc["numaNodes"]);

    let output = run([OsStr::new("topology"), OsStr::new("--node"), node.as_os_str()]);
    exits(&output, 0, "topology");
    assert!(stdout(&output).contains("NUMA node 71 "), "{}", stdout(&output));
    let output = run([
        OsStr::new("topology"),
        OsStr::new("-o"),
        OsStr::new("svg"),
        OsStr::new("--node"),
        node.as_os_str(),
    ]);
    exits(&output, 0, "topology -o svg");
    assert!(stdout(&output).contains("NUMA 71"), "svg");
}

/// `nrt` writes one zone per NUMA node, named by its id, with the CPUs
/// and devices the topology block puts there.
#[test]
fn nrt_zones_are_the_machines_nodes() {
    let name = "wide-pods";
    let output = run([
        OsStr::new("nrt"),
        OsStr::new("-o"),
        OsStr::new("json"),
        vector_path(name).as_os_str(),
    ]);
    exits(&output, 0, "nrt");
    let doc = json_of(&output, "nrt");
    let zones = doc["zones"].as_array().unwrap();
    let names: Vec<String> = zones.iter().map(|z| z["name"].as_str().unwrap().to_owned()).collect();
    let ids: Vec<String> = numa_ids(name).iter().map(|id| format!("node-{id}")).collect();
    assert_eq!(names, ids);
    let block = vector(name)["topology"].clone();
    for id in [0u64, 63, 64, 70, 71] {
        let zone = zones.iter().find(|z| z["name"] == format!("node-{id}")).unwrap();
        let capacity = |resource: &str| -> Option<String> {
            zone["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == resource)
                .map(|r| r["capacity"].as_str().unwrap().to_owned())
        };
        let cpus = block["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["numa"] == id)
            .count();
        assert_eq!(capacity("cpu"), Some(cpus.to_string()), "node-{id}");
        let gpus = block["devices"]["example.com/gpu"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["numa"].as_array().is_some_and(|n| n.contains(&json!(id))))
            .count();
        let expected_gpus = (gpus > 0).then(|| gpus.to_string());
        assert_eq!(capacity("example.com/gpu"), expected_gpus, "node-{id}");
    }
}

fn fleet_of(name: &str, kubelet: &Value, count: u64) -> PathBuf {
    let mut scenario = vector(name);
    for (field, value) in kubelet.as_object().unwrap() {
        scenario["kubelet"][field] = value.clone();
    }
    write(
        &format!("fleet-{name}-{}.json", kubelet.to_string().len()),
        &json!({"nodes": [{"name": "wide", "count": count, "topology": scenario["topology"], "kubelet": scenario["kubelet"]}]}),
    )
}

/// `simulate` over a fleet of 72-node machines: under none it places pods
/// and names stranded capacity by the machine's zones; under
/// single-numa-node with the limit raised every admission is the crash.
#[test]
fn simulate_a_fleet_of_72_node_machines() {
    let name = "wide-pods";
    let pods = pods_file("simulate-pods.json", name, 0, 6);
    let fleet = fleet_of(name, &json!({}), 2);
    let output = run([OsStr::new("simulate"), fleet.as_os_str(), pods.as_os_str()]
        .into_iter()
        .chain(["--policy", "none", "--verify", "-o", "json"].map(OsStr::new)));
    exits(&output, 0, "simulate none");
    let doc = json_of(&output, "simulate none");
    let zones: BTreeSet<String> = numa_ids(name).iter().map(|id| format!("node-{id}")).collect();
    for run in doc["runs"].as_array().unwrap() {
        assert!(run["scheduled"].as_u64() > Some(0), "{run}");
        for zone in run["strandedByZone"].as_array().into_iter().flatten() {
            assert!(zones.contains(zone["zone"].as_str().unwrap()), "{zone}");
        }
    }

    let fleet = fleet_of(name, &raised(SINGLE_NUMA_RAISED), 2);
    let output = run([OsStr::new("simulate"), fleet.as_os_str(), pods.as_os_str()]
        .into_iter()
        .chain(["--policy", "single-numa-node", "-o", "json"].map(OsStr::new)));
    exits(&output, 0, "simulate single-numa-node");
    let doc = json_of(&output, "simulate single-numa-node");
    for run in doc["runs"].as_array().unwrap() {
        assert_eq!(run["scheduled"], 0, "no pod is admitted: {run}");
        for reason in run["rejectionReasons"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(r, _)| r)
        {
            assert!(
                reason.starts_with("KubeletPanic: ") && reason.contains("NUMA node id 64"),
                "{reason}"
            );
        }
    }
}

/// A node scenario of vector `name` with the DRA block of
/// examples/dra/node.yaml, its devices' numaNode attributes 0 and 1 made
/// 71 and 70 (ids past the kubelet's masks).
fn dra_node(file: &str, name: &str) -> PathBuf {
    let mut dra = common::yaml_file("examples/dra/node.yaml")["dra"].clone();
    for slice in dra["resourceSlices"].as_array_mut().unwrap() {
        for device in slice["spec"]["devices"].as_array_mut().unwrap() {
            let numa = &mut device["attributes"]["resource.kubernetes.io/numaNode"]["int"];
            *numa = json!(if numa.as_u64() == Some(0) { 71 } else { 70 });
        }
    }
    let mut scenario = vector(name);
    scenario["events"] = json!([]);
    scenario["dra"] = dra;
    write(file, &scenario)
}

/// `explain` with DRA devices on NUMA nodes 70 and 71: the devices' NUMA
/// nodes are printed as the slices give them; where the kubelet crashes
/// (the Static memory manager, a Guaranteed pod) the DRA section says it
/// crashes, not that it refuses.
#[test]
fn explain_with_dra_devices_past_the_masks() {
    let train = repo().join("examples/dra/train.yaml");
    let node = dra_node("dra-none.json", "memory-none");
    let output = run([
        OsStr::new("explain"),
        OsStr::new("--node"),
        node.as_os_str(),
        train.as_os_str(),
    ]);
    exits(&output, 0, "explain DRA");
    let text = words(&stdout(&output));
    assert!(text.contains("ml/train: admitted"), "{text}");
    assert!(text.contains("gpu.example.com/node-1/gpu-0 on NUMA 71"), "{text}");

    let node = dra_node("dra-static.json", "static-memory");
    let output = run([
        OsStr::new("explain"),
        OsStr::new("--node"),
        node.as_os_str(),
        train.as_os_str(),
    ]);
    exits(&output, 0, "explain DRA static memory");
    let text = words(&stdout(&output));
    assert!(text.contains("ml/train: THE KUBELET CRASHES"), "{text}");
    assert!(
        text.contains("The kubelet crashes admitting the pod, so nothing is pinned"),
        "{text}"
    );
    assert!(!text.contains("The kubelet refuses the pod"), "{text}");
}

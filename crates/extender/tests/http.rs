//! The extender driven over HTTP with the JSON bodies the kube-scheduler
//! really sends (`ExtenderArgs` with node names, and with a full
//! `NodeList`), on a small fleet: two GPU nodes it knows, one it does not.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use topoalign_extender::api::ExtenderBindingArgs;
use topoalign_extender::binder::{BindError, BindFuture, Binder};
use topoalign_extender::{Cluster, ExtenderConfig, Strategy, server};

/// Two NUMA nodes × 4 cores × 2 threads, 16Gi each, one GPU on NUMA 1;
/// single-numa-node, static CPU manager, CPU 0 reserved.
fn fleet() -> topoalign_fleet::Fleet {
    let cpus: Vec<Value> = (0..16)
        .map(|id| {
            let core = id % 8;
            json!({"id": id, "core": core, "socket": core / 4, "numa": core / 4})
        })
        .collect();
    let text = json!({"nodes": [{
        "name": "gpu",
        "count": 2,
        "topology": {
            "numaNodes": [{"id": 0, "memory": "16Gi"}, {"id": 1, "memory": "16Gi"}],
            "cpus": cpus,
            "devices": {"nvidia.com/gpu": [{"id": "gpu0", "numa": [1]}]}
        },
        "kubelet": {
            "topologyManagerPolicy": "single-numa-node",
            "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0"
        }
    }]})
    .to_string();
    topoalign_fleet::Fleet::parse(&text, |_| Err("no files".into())).unwrap()
}

fn pod(name: &str, uid: &str, cpu: &str, gpus: u32) -> Value {
    let mut limits = json!({"cpu": cpu, "memory": "2Gi"});
    if gpus > 0 {
        limits["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": limits}}]
        },
        "status": {"phase": "Pending"}
    })
}

/// A `v1.Node` as the scheduler sends it when not node-cache-capable.
fn node_object(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "16", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"},
            "allocatable": {"cpu": "15", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"}
        }
    })
}

async fn start(config: ExtenderConfig) -> (String, tokio::sync::oneshot::Sender<()>) {
    start_with_binder(config, None).await
}

async fn start_with_binder(
    config: ExtenderConfig,
    binder: Option<Arc<dyn Binder>>,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let cluster = Cluster::from_fleet(&fleet(), config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server::serve(listener, Arc::new(Mutex::new(cluster)), binder, async {
        stopped.await.ok();
    }));
    (address, stop)
}

/// One HTTP/1.1 request, as any client would send it.
async fn post(address: &str, path: &str, body: &Value) -> Value {
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap()
}

/// Every answer says how long the extender took over it.
#[tokio::test]
async fn answers_carry_the_extenders_own_time() {
    let (address, stop) = start(ExtenderConfig::default()).await;
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let timing = response
        .lines()
        .find_map(|line| line.strip_prefix("server-timing: extender;dur="))
        .unwrap_or_else(|| panic!("no Server-Timing header: {response}"));
    let ms: f64 = timing.trim().parse().unwrap();
    assert!(ms >= 0.0, "{timing}");
    stop.send(()).ok();
}

/// With `choose_in_filter` the answer passes one node; the other node that
/// admits the pod is in no field (the scheduler keeps only the nodes
/// passed), the refusals are under `FailedNodes` with their reasons, and
/// the chosen node nowhere else.
#[tokio::test]
async fn choosing_in_filter_answers_one_node_and_leaves_the_others_out() {
    let config = ExtenderConfig {
        choose_in_filter: true,
        ..ExtenderConfig::default()
    };
    let (address, stop) = start(config).await;
    // The first GPU pod takes gpu-0's or gpu-1's only GPU.
    let first = json!({"Pod": pod("a", "uid-a", "2", 1), "NodeNames": ["gpu-0", "gpu-1"]});
    let result = post(&address, "/filter", &first).await;
    let taken = result["NodeNames"][0].as_str().unwrap().to_owned();
    let free = if taken == "gpu-0" { "gpu-1" } else { "gpu-0" };
    assert_eq!(result["NodeNames"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(result["FailedNodes"], json!({}), "{result}");
    assert_eq!(result["FailedAndUnresolvableNodes"], json!({}), "{result}");
    // A CPU pod: both admit it (one chosen); a second GPU pod: only the
    // free node does, the taken one is refused with the kubelet's reason.
    let names = json!([taken, free]);
    let cpu = post(
        &address,
        "/filter",
        &json!({"Pod": pod("b", "uid-b", "2", 0), "NodeNames": names}),
    )
    .await;
    let chosen = cpu["NodeNames"].as_array().unwrap();
    assert_eq!(chosen.len(), 1, "{cpu}");
    assert!([json!(taken), json!(free)].contains(&chosen[0]), "{cpu}");
    assert_eq!(cpu["FailedNodes"], json!({}), "{cpu}");
    let gpu = post(
        &address,
        "/filter",
        &json!({"Pod": pod("c", "uid-c", "2", 1), "NodeNames": names}),
    )
    .await;
    assert_eq!(gpu["NodeNames"], json!([free]), "{gpu}");
    let failed = gpu["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 1, "{gpu}");
    assert!(
        failed[&taken].as_str().unwrap().starts_with("TopologyAffinityError"),
        "{gpu}"
    );
    assert_eq!(gpu["FailedAndUnresolvableNodes"], json!({}));
    assert_eq!(gpu["Error"], "");
    stop.send(()).ok();
}

#[tokio::test]
async fn filter_by_node_names_keeps_admitting_and_unknown_nodes_and_says_why_others_fail() {
    let (address, stop) = start(ExtenderConfig::default()).await;
    let names = json!(["gpu-0", "gpu-1", "not-managed"]);

    // 4 CPUs + the GPU fits NUMA 1 of either node.
    let args = json!({"Pod": pod("train", "uid-1", "4", 1), "Nodes": null, "NodeNames": names});
    let result = post(&address, "/filter", &args).await;
    assert_eq!(result["NodeNames"], names);
    assert_eq!(result["FailedNodes"], json!({}));
    assert_eq!(result["FailedAndUnresolvableNodes"], json!({}));
    assert_eq!(result["Error"], "");
    assert_eq!(result["Nodes"], Value::Null);

    // 9 CPUs fit the node (15 allocatable) but no NUMA node (8 CPUs each):
    // refused everywhere, even on an empty node.
    let args = json!({"Pod": pod("big", "uid-2", "9", 0), "NodeNames": names});
    let result = post(&address, "/filter", &args).await;
    assert_eq!(result["NodeNames"], json!(["not-managed"]));
    let reason = result["FailedAndUnresolvableNodes"]["gpu-0"].as_str().unwrap();
    assert!(
        reason.starts_with("TopologyAffinityError: Resources cannot be allocated with Topology locality"),
        "{reason}"
    );
    assert!(reason.contains("single-numa-node"), "{reason}");
    stop.send(()).ok();
}

#[tokio::test]
async fn prioritize_assumes_the_pod_so_the_next_filter_sees_the_gpu_taken() {
    let (address, stop) = start(ExtenderConfig {
        strategy: Strategy::LeastNumaNodes,
        ..ExtenderConfig::default()
    })
    .await;
    let names = json!(["gpu-0", "gpu-1", "not-managed"]);
    let first = json!({"Pod": pod("train-a", "uid-a", "4", 1), "NodeNames": names});
    let scores = post(&address, "/prioritize", &first).await;
    assert_eq!(
        scores,
        json!([
            {"Host": "gpu-0", "Score": 10},
            {"Host": "gpu-1", "Score": 10},
            {"Host": "not-managed", "Score": 0}
        ])
    );
    // Assumed on gpu-0 (first of the best): its only GPU is now held.
    let second = json!({"Pod": pod("train-b", "uid-b", "4", 1), "NodeNames": names});
    let result = post(&address, "/filter", &second).await;
    assert_eq!(result["NodeNames"], json!(["gpu-1", "not-managed"]));
    let reason = result["FailedNodes"]["gpu-0"].as_str().unwrap();
    assert!(reason.starts_with("TopologyAffinityError"), "{reason}");
    // Preemption could free the GPU: resolvable.
    assert_eq!(result["FailedAndUnresolvableNodes"], json!({}));

    // The scheduler binds the second pod to gpu-1 through the extender.
    let bound = post(
        &address,
        "/bind",
        &json!({"PodName": "train-b", "PodNamespace": "default", "PodUID": "uid-b", "Node": "gpu-1"}),
    )
    .await;
    assert_eq!(bound, json!({"Error": ""}));
    let third = json!({"Pod": pod("train-c", "uid-c", "4", 1), "NodeNames": names});
    let result = post(&address, "/filter", &third).await;
    assert_eq!(result["NodeNames"], json!(["not-managed"]));
    let unknown = post(&address, "/bind", &json!({"PodUID": "never-seen", "Node": "gpu-1"})).await;
    assert_eq!(unknown["Error"], "pod never-seen was not seen by filter or prioritize");
    stop.send(()).ok();
}

#[tokio::test]
async fn a_full_node_list_comes_back_filtered_with_the_objects_untouched() {
    let (address, stop) = start(ExtenderConfig::default()).await;
    let list = json!({
        "apiVersion": "v1",
        "kind": "NodeList",
        "metadata": {"resourceVersion": "4711"},
        "items": [node_object("gpu-0"), node_object("gpu-1"), node_object("not-managed")]
    });
    let args = json!({"Pod": pod("big", "uid-9", "9", 0), "Nodes": list, "NodeNames": null});
    let result = post(&address, "/filter", &args).await;
    assert_eq!(result["NodeNames"], Value::Null);
    assert_eq!(result["Nodes"]["kind"], "NodeList");
    assert_eq!(result["Nodes"]["metadata"]["resourceVersion"], "4711");
    assert_eq!(result["Nodes"]["items"], json!([node_object("not-managed")]));
    assert_eq!(
        result["FailedAndUnresolvableNodes"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["gpu-0", "gpu-1"]
    );
    let scores = post(
        &address,
        "/prioritize",
        &json!({"Pod": pod("small", "uid-10", "2", 0), "Nodes": args["Nodes"]}),
    )
    .await;
    assert_eq!(scores.as_array().unwrap().len(), 3);
    stop.send(()).ok();
}

#[tokio::test]
async fn a_malformed_pod_is_an_error_not_a_crash() {
    let (address, stop) = start(ExtenderConfig::default()).await;
    let bad = json!({"Pod": {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}}, "NodeNames": ["gpu-0"]});
    let result = post(&address, "/filter", &bad).await;
    assert!(
        result["Error"]
            .as_str()
            .unwrap()
            .starts_with("invalid pod: spec.containers[0].resources.limits"),
        "{result}"
    );
    let none = post(&address, "/filter", &json!({"NodeNames": ["gpu-0"]})).await;
    assert_eq!(none["Error"], "no Pod in the request");
    stop.send(()).ok();
}

/// Records the Bindings it is asked for; refuses them all when given a
/// refusal.
struct RecordingBinder {
    bound: Mutex<Vec<String>>,
    refusal: Option<String>,
}

impl Binder for RecordingBinder {
    fn bind<'a>(&'a self, args: &'a ExtenderBindingArgs) -> BindFuture<'a> {
        Box::pin(async move {
            self.bound.lock().unwrap().push(format!(
                "{}/{} {} -> {}",
                args.pod_namespace, args.pod_name, args.pod_uid, args.node
            ));
            self.refusal
                .clone()
                .map_or(Ok(()), |refusal| Err(BindError::new(args, refusal)))
        })
    }
}

#[tokio::test]
async fn with_a_binder_bind_creates_the_binding_then_records_the_placement() {
    for refusal in [None, Some("pods \"train-a\" not found".to_string())] {
        let binder = Arc::new(RecordingBinder {
            bound: Mutex::new(Vec::new()),
            refusal: refusal.clone(),
        });
        let (address, stop) = start_with_binder(
            ExtenderConfig {
                assume_on_prioritize: false,
                ..ExtenderConfig::default()
            },
            Some(binder.clone()),
        )
        .await;
        let names = json!(["gpu-0"]);
        let first = json!({"Pod": pod("train-a", "uid-a", "4", 1), "NodeNames": names});
        assert_eq!(post(&address, "/filter", &first).await["NodeNames"], names);
        let bound = post(
            &address,
            "/bind",
            &json!({"PodName": "train-a", "PodNamespace": "team", "PodUID": "uid-a", "Node": "gpu-0"}),
        )
        .await;
        assert_eq!(*binder.bound.lock().unwrap(), ["team/train-a uid-a -> gpu-0"]);
        let second = json!({"Pod": pod("train-b", "uid-b", "4", 1), "NodeNames": names});
        let after = post(&address, "/filter", &second).await;
        match refusal {
            // Bound: the node's only GPU is held.
            None => {
                assert_eq!(bound, json!({"Error": ""}));
                assert_eq!(after["NodeNames"], json!([]));
            }
            // Not bound: the scheduler gets the reason and nothing is held.
            Some(reason) => {
                assert_eq!(
                    bound,
                    json!({"Error": format!("cannot bind pod team/train-a to node gpu-0: {reason}")})
                );
                assert_eq!(after["NodeNames"], names);
            }
        }
        stop.send(()).ok();
    }
}

/// `GET /metrics` adds up, per verb, the calls and the extender's own time.
#[tokio::test]
async fn metrics_count_each_verbs_calls() {
    let (address, stop) = start(ExtenderConfig::default()).await;
    let args = json!({"Pod": pod("m", "uid-m", "2", 0), "NodeNames": ["gpu-0", "gpu-1"]});
    post(&address, "/filter", &args).await;
    post(&address, "/filter", &args).await;
    post(&address, "/prioritize", &args).await;
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let name = "topoalign_extender_request_duration_seconds";
    let value = |series: &str| -> f64 {
        response
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series}: {response}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value(&format!("{name}_count{{verb=\"filter\"}}")), 2.0);
    assert_eq!(value(&format!("{name}_count{{verb=\"prioritize\"}}")), 1.0);
    assert_eq!(value(&format!("{name}_count{{verb=\"bind\"}}")), 0.0);
    assert!(value(&format!("{name}_sum{{verb=\"filter\"}}")) > 0.0, "{response}");
    stop.send(()).ok();
}

/// kube-scheduler calls `bind` from concurrent binding cycles, so the
/// later of two pods on one node can ask first: its Binding is made after
/// the earlier pod's, in the order the extender assumed them (the order
/// it predicted the kubelet to meet them in). Five pairs: without the
/// wait, the later pod's Binding, asked first, is most often made first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_on_one_node_are_made_in_the_order_the_pods_were_assumed() {
    let binder = Arc::new(RecordingBinder {
        bound: Mutex::new(Vec::new()),
        refusal: None,
    });
    let (address, stop) = start_with_binder(
        ExtenderConfig {
            choose_in_filter: true,
            ..ExtenderConfig::default()
        },
        Some(binder.clone()),
    )
    .await;
    let names = json!(["gpu-0"]);
    let bind = |name: String| {
        let address = address.clone();
        async move {
            let uid = format!("uid-{name}");
            post(
                &address,
                "/bind",
                &json!({"PodName": name, "PodNamespace": "default", "PodUID": uid, "Node": "gpu-0"}),
            )
            .await
        }
    };
    let mut expected = Vec::new();
    for pair in 0..5 {
        let [earlier, later] = [format!("earlier-{pair}"), format!("later-{pair}")];
        for name in [&earlier, &later] {
            let args = json!({"Pod": pod(name, &format!("uid-{name}"), "1", 0), "NodeNames": names});
            assert_eq!(post(&address, "/filter", &args).await["NodeNames"], names);
            expected.push(format!("default/{name} uid-{name} -> gpu-0"));
        }
        // The later pod's bind is sent first and answered only once the
        // earlier pod's Binding is made.
        let second = tokio::spawn(bind(later));
        assert_eq!(bind(earlier).await, json!({"Error": ""}));
        assert_eq!(second.await.unwrap(), json!({"Error": ""}));
    }
    assert_eq!(*binder.bound.lock().unwrap(), expected);
    stop.send(()).ok();
}

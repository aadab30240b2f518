//! The publisher against a local HTTP server playing the Kubernetes API
//! server for the one resource it writes (`fake_api`): it checks what
//! arrives — verb, path, query, content type, a body valid against the
//! shipped CRD schema — and stores the object as server-side apply would.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::time::Duration;

use axum::http::Method;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec, build, start_node};
use topoalign_nrt_publisher::{FIELD_MANAGER, Next, PublishError, Publisher, Throttle, run};

mod fake_api;

use fake_api::Shared;

async fn start() -> (Shared, kube::Client) {
    let (server, url) = fake_api::serve().await;
    let config = kube::Config::new(url.parse().unwrap());
    (server, kube::Client::try_from(config).unwrap())
}

/// The apply a publisher sends, sent without its schema check.
async fn unchecked_apply(client: kube::Client, object: &NodeResourceTopology) -> Result<DynamicObject, kube::Error> {
    use topoalign_nrt::object::{GROUP, KIND, PLURAL, VERSION};
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(
        &object.metadata.name,
        &params,
        &Patch::Apply(serde_json::to_value(object).unwrap()),
    )
    .await
}

fn spec() -> NodeSpec {
    let cpus: Vec<Value> = (0..8)
        .map(|id| json!({"id": id, "core": id % 4, "socket": 0, "numa": (id % 4) / 2}))
        .collect();
    serde_json::from_value(json!({
        "topology": {"numaNodes": [{"id": 0, "memory": "8Gi"}, {"id": 1, "memory": "8Gi"}], "cpus": cpus},
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}
    }))
    .unwrap()
}

fn object_with(pods: &[&str]) -> NodeResourceTopology {
    let spec = spec();
    let mut node = start_node(&spec).unwrap();
    for name in pods {
        let pod = topoalign_k8s::pod_from_value(
            &json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
            &format!("uid-{name}"),
        )
        .unwrap();
        assert!(node.admit(pod).admitted());
    }
    build(
        "worker-1",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    )
}

#[tokio::test]
async fn an_apply_is_a_forced_server_side_apply_patch_with_a_valid_body() {
    let (server, client) = start().await;
    let publisher = Publisher::new(client);
    let version = publisher.apply(&object_with(&["a"])).await.unwrap();
    assert_eq!(version, "1");
    let version = publisher.apply(&object_with(&["a", "b"])).await.unwrap();
    assert_eq!(version, "2");
    let seen = server.lock().unwrap().requests.clone();
    assert_eq!(seen.len(), 2);
    for seen in &seen {
        assert_eq!(seen.method, Method::PATCH);
        assert_eq!(seen.name, "worker-1");
        assert_eq!(seen.content_type, "application/apply-patch+yaml");
        let mut query: Vec<&str> = seen.query.split('&').filter(|p| !p.is_empty()).collect();
        query.sort_unstable();
        assert_eq!(query, ["fieldManager=topoalign", "force=true"]);
        assert_eq!(seen.problems, Vec::<String>::new());
    }
    // What the server holds is the latest object, it lists back (as the
    // extender reads it), and it rebuilds the node.
    let listed = publisher.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].metadata.resource_version.as_deref(), Some("2"));
    let rebuilt = topoalign_nrt::restore(&listed[0]).unwrap();
    assert_eq!(rebuilt.pods.len(), 2);
}

/// The publisher the agent and `topoalign nrt --publish` use checks every
/// object against the shipped CRD without being told to.
#[tokio::test]
async fn an_invalid_object_is_refused_before_it_is_sent() {
    let (server, client) = start().await;
    let publisher = Publisher::new(client.clone());
    let mut object = object_with(&[]);
    object.zones[0].resources[0].available = "lots".into();
    let error = publisher.apply(&object).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the object does not validate against the CRD schema: zones[0].resources[0].available"),
        "{error}"
    );
    assert!(server.lock().unwrap().requests.is_empty());
    // Sent without the publisher's check, the (fake) API server refuses
    // it: 422.
    let error = PublishError::from(unchecked_apply(client, &object).await.unwrap_err());
    assert!(
        error.to_string().starts_with("the API server refused the apply"),
        "{error}"
    );
    let server = server.lock().unwrap();
    assert_eq!(server.requests.len(), 1);
    assert!(!server.requests[0].problems.is_empty());
    assert!(server.stored.is_empty());
}

#[tokio::test]
async fn rapid_updates_are_coalesced_and_rate_limited() {
    let (server, client) = start().await;
    let (updates, receiver) = tokio::sync::mpsc::channel(64);
    let publisher = Publisher::new(client);
    let task = tokio::spawn(run(publisher, receiver, Duration::from_millis(300), |e, _| {
        panic!("{e}")
    }));
    // Ten allocation changes in a burst, then the same object again.
    let names = ["p0", "p1", "p2", "p3", "p4", "p5"];
    for n in 1..=names.len() {
        updates.send(object_with(&names[..n])).await.unwrap();
    }
    updates.send(object_with(&names)).await.unwrap();
    drop(updates);
    task.await.unwrap();
    let server = server.lock().unwrap();
    // The first goes out at once; the rest coalesce into one more.
    assert!(server.requests.len() <= 2, "{:?}", server.requests);
    let stored: NodeResourceTopology = serde_json::from_value(server.stored["worker-1"].clone()).unwrap();
    assert_eq!(topoalign_nrt::restore(&stored).unwrap().pods.len(), names.len());
}

#[test]
fn the_throttle_sends_at_most_once_per_interval_and_never_repeats_itself() {
    let interval = Duration::from_secs(5);
    let t0 = tokio::time::Instant::now();
    let mut throttle = Throttle::new(interval);
    assert_eq!(throttle.next(t0), Next::Idle);
    throttle.offer(object_with(&["a"]));
    let Next::Send(first) = throttle.next(t0) else {
        panic!("the first goes out at once")
    };
    throttle.sent(*first, t0);
    throttle.offer(object_with(&["a", "b"]));
    throttle.offer(object_with(&["a", "b", "c"]));
    assert_eq!(
        throttle.next(t0 + Duration::from_secs(1)),
        Next::WaitUntil(t0 + interval)
    );
    let Next::Send(latest) = throttle.next(t0 + interval) else {
        panic!("due")
    };
    assert_eq!(*latest, object_with(&["a", "b", "c"]));
    throttle.sent(*latest, t0 + interval);
    // The same state again: nothing to send.
    throttle.offer(object_with(&["a", "b", "c"]));
    assert_eq!(throttle.next(t0 + interval * 3), Next::Idle);
    // A failure is retried after the interval.
    throttle.offer(object_with(&["a"]));
    let Next::Send(failing) = throttle.next(t0 + interval * 3) else {
        panic!("due")
    };
    throttle.failed(*failing);
    assert_eq!(throttle.next(t0 + interval * 3), Next::WaitUntil(t0 + interval * 4));
    assert!(matches!(throttle.next(t0 + interval * 4), Next::Send(_)));
}

/// An API server refusing the identity (HTTP 403, as RBAC answers) ends
/// the deliveries after one attempt: `run` returns although more updates
/// could come, with an error naming the permission; a second request
/// would mean a retry loop.
#[tokio::test]
async fn an_rbac_refusal_is_reported_once_and_not_retried() {
    use std::sync::{Arc, Mutex};

    use axum::http::StatusCode;

    let (retried, mut second_request) = tokio::sync::mpsc::unbounded_channel::<()>();
    let requests = Arc::new(Mutex::new(0_usize));
    let app = axum::Router::new().fallback(move || {
        let requests = requests.clone();
        let retried = retried.clone();
        async move {
            let mut n = requests.lock().unwrap();
            *n += 1;
            if *n > 1 {
                retried.send(()).unwrap();
            }
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                "message": "noderesourcetopologies.topology.node.k8s.io \"worker-1\" is forbidden: User \"system:serviceaccount:default:x\" cannot patch resource \"noderesourcetopologies\""});
            (StatusCode::FORBIDDEN, [("content-type", "application/json")], status.to_string())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();

    let (updates, receiver) = tokio::sync::mpsc::channel(4);
    updates.send(object_with(&["a"])).await.unwrap();
    let mut errors = Vec::new();
    tokio::select! {
        () = run(Publisher::new(client), receiver, Duration::from_millis(10), |e, _| errors.push(e.to_string())) => {}
        _ = second_request.recv() => panic!("the refused apply was retried"),
    }
    drop(updates);
    assert_eq!(errors.len(), 1, "{errors:?}");
    for part in ["forbids", "cannot patch", "deploy/topoalign-rbac.yaml"] {
        assert!(errors[0].contains(part), "{part:?} not in {:?}", errors[0]);
    }
}

/// A refusal after a delivery went through is a moment (a restarted API
/// server answers 403 until its RBAC caches are filled), not the
/// identity's configuration: reported as not final and retried, and the
/// retry delivers.
#[tokio::test]
async fn a_refusal_after_a_delivery_is_retried() {
    use std::sync::{Arc, Mutex};

    use axum::http::StatusCode;

    let (request_tx, mut requests_seen) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let requests = Arc::new(Mutex::new(0_usize));
    let app = axum::Router::new().fallback(move || {
        let requests = requests.clone();
        let request_tx = request_tx.clone();
        async move {
            let n = {
                let mut n = requests.lock().unwrap();
                *n += 1;
                *n
            };
            request_tx.send(n).unwrap();
            if n == 2 {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                    "message": "noderesourcetopologies.topology.node.k8s.io \"worker-1\" is forbidden: User \"system:serviceaccount:default:x\" cannot patch resource \"noderesourcetopologies\""});
                return (StatusCode::FORBIDDEN, [("content-type", "application/json")], status.to_string());
            }
            let stored = json!({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
                "metadata": {"name": "worker-1"}});
            (StatusCode::OK, [("content-type", "application/json")], stored.to_string())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();

    let (updates, receiver) = tokio::sync::mpsc::channel(4);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    updates.send(object_with(&["a"])).await.unwrap();
    let mut delivering = tokio::spawn(run(
        Publisher::new(client),
        receiver,
        Duration::from_millis(10),
        move |e: &PublishError, last| seen.lock().unwrap().push((e.to_string(), last)),
    ));
    assert_eq!(requests_seen.recv().await, Some(1));
    updates.send(object_with(&["a", "b"])).await.unwrap();
    assert_eq!(requests_seen.recv().await, Some(2), "the second object is sent");
    tokio::select! {
        n = requests_seen.recv() => assert_eq!(n, Some(3), "the refused object is sent again"),
        _ = &mut delivering => panic!("the deliveries stopped at the refusal: {:?}", errors.lock().unwrap()),
    }
    drop(updates);
    delivering.await.unwrap();
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].0.contains("forbids") && !errors[0].1, "{errors:?}");
}

/// A machine of 72 NUMA nodes (ids 0-71, past the kubelet's 64-bit masks;
/// the `hand-numa-nodes-72-*` vectors' machine) under topology policy
/// none, which its kubelet runs — with the Static memory manager too,
/// which crashes only at a Guaranteed pod: published like any node, the
/// body valid against the CRD, a zone `node-<id>` for each of the 72 NUMA
/// ids of the scenario, and it lists back and rebuilds the node.
#[tokio::test]
async fn a_machine_of_72_numa_nodes_is_published_with_a_zone_per_node() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/1.37/scenarios");
    for name in ["memory-none", "static-memory"] {
        let text = std::fs::read_to_string(root.join(format!("hand-numa-nodes-72-{name}.json"))).unwrap();
        let scenario: Value = serde_json::from_str(&text).unwrap();
        let spec: NodeSpec =
            serde_json::from_value(json!({"topology": scenario["topology"], "kubelet": scenario["kubelet"]})).unwrap();
        let node = start_node(&spec).unwrap();
        let object = build(
            "wide-1",
            &node,
            BuildOptions {
                exact_state: Some(&spec),
            },
        );
        let (server, client) = start().await;
        let publisher = Publisher::new(client);
        publisher.apply(&object).await.unwrap();
        let seen = server.lock().unwrap().requests.clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].problems, Vec::<String>::new(), "{name}");
        let listed = publisher.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        let zones: Vec<&str> = listed[0].zones.iter().map(|z| z.name.as_str()).collect();
        let own: Vec<String> = scenario["topology"]["numaNodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| format!("node-{}", n["id"]))
            .collect();
        assert_eq!(own.len(), 72);
        assert_eq!(zones, own, "{name}");
        let rebuilt = topoalign_nrt::restore(&listed[0]).unwrap();
        assert_eq!(rebuilt.node.machine().numa_nodes().len(), 72, "{name}");
    }
}

//! The page of a one-node cluster built from testdata/serve: the node's
//! NodeResourceTopology object (exact state, written by topoalign-nrt from
//! the scenario), its running pods and a waiting pod, read as manifests
//! the way `topoalign serve --from` reads them. Expected placements are
//! read back from the NRT object (`topoalign_nrt::restore`), never taken
//! from the page's own code.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use topoalign_cluster::build;
use topoalign_model::CpuSet;
use topoalign_nrt::{BuildOptions, NodeResourceTopology};
use topoalign_webview::model::{POD_COLOURS, RESERVED, STRANDED};
use topoalign_webview::{Live, Page, objects_from_manifests, router};
use tower::ServiceExt as _;

fn testdata(name: &str) -> String {
    let path = format!("{}/../../testdata/serve/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The node's object and the manifests of the cluster: the object, a
/// Running pod per pod it holds, and `extra`.
fn cluster(extra: &str) -> (NodeResourceTopology, String) {
    let scenario = topoalign_scenario::Scenario::parse(&testdata("gpu-node.yaml")).expect("scenario");
    let (spec, node) = topoalign_nrt::scenario_node(&scenario).expect("node");
    let object = topoalign_nrt::build(
        "node-a",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    let mut text = serde_yaml_ng::to_string(&object).expect("yaml");
    for pod in node.pods() {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {}, namespace: {}, uid: {}}}\n\
             spec: {{nodeName: node-a, containers: [{{name: c}}]}}\nstatus: {{phase: Running}}\n",
            pod.name, pod.namespace, pod.uid
        ));
    }
    text.push_str("---\n");
    text.push_str(extra);
    (object, text)
}

fn page(text: &str) -> Page {
    let objects = objects_from_manifests(text).expect("manifests");
    Page::build(&build(objects, jiff::Timestamp::UNIX_EPOCH))
}

/// The fill of CPU `cpu`'s cell in a picture.
fn cpu_fill(svg: &str, cpu: u32) -> String {
    let start = svg
        .find(&format!(r#"<g id="cpu-{cpu}">"#))
        .unwrap_or_else(|| panic!("no cell for CPU {cpu}"));
    let rest = &svg[start..];
    let fill = rest.find("fill=\"").expect("a fill") + 6;
    rest[fill..fill + 7].to_owned()
}

#[test]
fn pods_are_drawn_where_the_object_says() {
    let (object, text) = cluster("");
    let page = page(&text);
    let node = page.node("node-a").expect("node-a");
    assert!(node.source.starts_with("exact"), "{}", node.source);
    let exact = node.exact.as_ref().expect("exact");
    // What the object says each pod holds.
    let restored = topoalign_nrt::restore(&object).expect("restorable");
    let state = restored.node.state();
    let devices = restored.node.snapshot().devices;
    assert_eq!(exact.pods.len(), restored.pods.len());
    let mut held = CpuSet::new();
    for pod in &restored.pods {
        let key = pod.key();
        let view = exact.pods.iter().find(|p| p.key == key).expect("pod on the page");
        assert!(POD_COLOURS.contains(&view.colour));
        let cpus: CpuSet = state
            .cpu_assignments
            .get(&key)
            .into_iter()
            .flat_map(|c| c.values())
            .fold(CpuSet::new(), |acc, set| acc.union(set));
        assert!(!cpus.is_empty(), "{key} holds exclusive CPUs");
        assert_eq!(view.cpus, cpus, "{key}");
        for cpu in cpus.iter() {
            assert_eq!(cpu_fill(&exact.picture, cpu), view.colour.hex(), "{key}: CPU {cpu}");
        }
        held.union_with(&cpus);
        for (resource, ids) in devices.get(&pod.uid).into_iter().flat_map(|c| c.values()).flatten() {
            for id in ids {
                let chip = format!(r#"<g id="pci-{resource}/{id}">"#);
                let at = exact.picture.find(&chip).unwrap_or_else(|| panic!("no chip {chip}"));
                assert!(
                    exact.picture[at..].contains(&format!("fill=\"{}\"", view.colour.hex())),
                    "{key}: {resource} {id}"
                );
            }
        }
        // Its memory on the NUMA nodes the object pins it to.
        let pinned = state.memory_assignments.get(&key).expect("pinned memory");
        let numa: Vec<usize> = pinned.values().flatten().copied().collect();
        assert_eq!(view.memory.keys().copied().collect::<Vec<_>>(), numa, "{key}");
    }
    // Reserved CPUs grey; nothing stranded with no pod waiting.
    assert!(exact.stranded_for.is_empty());
    let reserved = restored.node.reserved_cpus();
    for cpu in reserved.iter() {
        assert_eq!(cpu_fill(&exact.picture, cpu), RESERVED.hex());
    }
    let machine_cpus: CpuSet = restored.node.machine().cpus().iter().map(|c| c.id).collect();
    for cpu in machine_cpus.difference(&held).difference(&reserved).iter() {
        assert!(
            !POD_COLOURS.iter().any(|c| c.hex() == cpu_fill(&exact.picture, cpu)),
            "free CPU {cpu} is drawn as a pod's"
        );
    }
}

#[test]
fn a_waiting_pod_is_explained_and_strands_the_node() {
    let (object, text) = cluster(&testdata("waiting.yaml"));
    let page = page(&text);
    assert_eq!(page.waiting.len(), 1);
    let waiting = &page.waiting[0];
    assert_eq!(waiting.key, "ml/train-2");
    assert_eq!(waiting.verdicts.len(), 1);
    assert!(!waiting.verdicts[0].admitted, "{:?}", waiting.verdicts);
    assert!(
        waiting.verdicts[0].words.contains("rejected"),
        "{}",
        waiting.verdicts[0].words
    );
    assert_eq!(waiting.explanations.len(), 1);
    // The fix the explanation offers must admit it (explain verifies
    // each); removing the GPU pod is one.
    assert!(!waiting.explanations[0].summary.is_empty());
    // An empty node of this shape admits it, this one does not: stranded.
    let node = page.node("node-a").expect("node-a");
    let exact = node.exact.as_ref().expect("exact");
    assert_eq!(exact.stranded_for, ["ml/train-2"]);
    let restored = topoalign_nrt::restore(&object).expect("restorable");
    for usage in restored.node.numa_usage() {
        for cpu in usage.free_cpus.iter().flat_map(CpuSet::iter) {
            assert_eq!(cpu_fill(&exact.picture, cpu), STRANDED.hex(), "free CPU {cpu}");
        }
    }
    let html = topoalign_webview::html::fleet_fragment(&page, None);
    assert!(html.contains(r#"<section class="waiting" data-pod="ml/train-2">"#));
    assert!(html.contains(r#"data-node="node-a" data-stranded="true""#));
}

/// The fill of the chip `address` in a picture.
fn chip_fill(svg: &str, address: &str) -> String {
    let start = svg
        .find(&format!(r#"<g id="pci-{address}">"#))
        .unwrap_or_else(|| panic!("no chip {address}"));
    let rest = &svg[start..];
    let fill = rest.find("fill=\"").expect("a fill") + 6;
    rest[fill..fill + 7].to_owned()
}

/// The node's DRA devices from its ResourceSlice: one held by a claim
/// reserved for the first pod the object holds (its colour), one free on
/// the node the waiting pod strands (red), listed with claim and pod.
#[test]
fn dra_devices_are_drawn_with_their_pods_and_stranded() {
    let (object, _) = cluster("");
    let restored = topoalign_nrt::restore(&object).expect("restorable");
    let holder = &restored.pods[0];
    let dra = format!(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: node-a-gpus}}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {{name: node-a, generation: 1, resourceSliceCount: 1}}
  devices:
    - name: gpu-0
      attributes: {{resource.kubernetes.io/numaNode: {{int: 0}}}}
    - name: gpu-1
      attributes: {{resource.kubernetes.io/numaNode: {{int: 1}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: held, namespace: {namespace}}}
spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]}}}}
status:
  allocation: {{devices: {{results: [{{request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-0}}]}}}}
  reservedFor: [{{resource: pods, name: {name}, uid: {uid}}}]
---
"#,
        namespace = holder.namespace,
        name = holder.name,
        uid = holder.uid,
    );
    let (_, text) = cluster(&(dra + &testdata("waiting.yaml")));
    let page = page(&text);
    let node = page.node("node-a").expect("node-a");
    let exact = node.exact.as_ref().expect("exact");
    assert_eq!(exact.stranded_for, ["ml/train-2"]);
    let pod = exact
        .pods
        .iter()
        .find(|p| p.key == holder.key())
        .expect("holder on the page");
    assert_eq!(pod.dra_devices, ["gpu.example.com/node-a/gpu-0"]);
    assert_eq!(
        chip_fill(&exact.picture, "gpu.example.com/node-a/gpu-0"),
        pod.colour.hex()
    );
    assert_eq!(
        chip_fill(&exact.picture, "gpu.example.com/node-a/gpu-1"),
        STRANDED.hex()
    );
    let listed: Vec<(&str, Option<usize>, Option<&str>, bool)> = node
        .dra
        .iter()
        .map(|d| (d.address.as_str(), d.numa, d.claim.as_deref(), d.stranded))
        .collect();
    let claim = format!("{}/held", holder.namespace);
    assert_eq!(
        listed,
        [
            ("gpu.example.com/node-a/gpu-0", Some(0), Some(claim.as_str()), false),
            ("gpu.example.com/node-a/gpu-1", Some(1), None, true),
        ]
    );
    let zone1 = exact.zones.iter().find(|z| z.numa == 1).expect("NUMA 1");
    assert_eq!(zone1.free_dra, ["gpu.example.com/node-a/gpu-1"]);
    let html = topoalign_webview::html::node_fragment(&page, "node-a", None).expect("node fragment");
    assert!(html.contains(
        r#"<tr class="dra-device" data-device="gpu.example.com/node-a/gpu-1" data-numa="1" data-pods="" data-stranded="true">"#
    ));
    assert!(html.contains(&format!(
        r#"data-device="gpu.example.com/node-a/gpu-0" data-numa="0" data-pods="{}""#,
        holder.key()
    )));
    assert!(
        html.contains("and 1 DRA device free here"),
        "the stranded notice counts it"
    );
}

#[test]
fn objects_alone_stand_for_their_nodes_and_pods() {
    let (_, with_pods) = cluster("");
    let (object, _) = cluster("");
    let alone = page(&serde_yaml_ng::to_string(&object).expect("yaml"));
    let node = alone.node("node-a").expect("node-a");
    assert_eq!(node.source, "exact", "not stale: its pods stand as running");
    assert!(node.ready);
    let listed = page(&with_pods);
    let keys = |page: &Page| -> Vec<String> {
        page.node("node-a")
            .expect("node-a")
            .exact
            .as_ref()
            .expect("exact")
            .pods
            .iter()
            .map(|p| p.key.clone())
            .collect()
    };
    assert_eq!(keys(&alone), keys(&listed));
}

#[test]
fn objects_without_exact_state_are_shown_as_counts() {
    let (mut object, _) = cluster("");
    object.attributes.retain(|a| !a.name.starts_with("topoalign.io/"));
    let page = page(&serde_yaml_ng::to_string(&object).expect("yaml"));
    let node = page.node("node-a").expect("node-a");
    assert!(node.exact.is_none());
    assert!(node.source.starts_with("approximate"), "{}", node.source);
    assert_eq!(node.zones_only.len(), 2);
}

async fn get(app: &axum::Router, uri: &str) -> (StatusCode, Option<String>, String) {
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
        .await
        .expect("answer");
    let status = response.status();
    let version = response
        .headers()
        .get(topoalign_webview::server::VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = axum::body::to_bytes(response.into_body(), 1 << 24).await.expect("body");
    (status, version, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_waiting_fragment_request_answers_when_the_cluster_changes() {
    let (live, rendered) = Live::new();
    let live = std::sync::Arc::new(std::sync::Mutex::new(live));
    let (_, first) = cluster("");
    live.lock()
        .expect("lock")
        .show_objects(objects_from_manifests(&first).expect("manifests"));
    let app = router(rendered, Duration::from_secs(30));
    let (status, _, body) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"data-version="1""#), "{body}");
    assert!(!body.contains("src=\"http"), "nothing is loaded from elsewhere");
    // A request for what follows version 1 waits for the change.
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { get(&app, "/fragment/fleet?since=1").await }
    });
    let (_, second) = cluster(&testdata("waiting.yaml"));
    let objects = objects_from_manifests(&second).expect("manifests");
    tokio::task::spawn_blocking({
        let live = live.clone();
        move || live.lock().expect("lock").show_objects(objects)
    })
    .await
    .expect("shown");
    let (status, version, body) = waiting.await.expect("answered");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(version.as_deref(), Some("2"));
    assert!(body.contains("ml/train-2"), "{body}");
    // The same state read again is not a new version.
    let objects = objects_from_manifests(&second).expect("manifests");
    live.lock().expect("lock").show_objects(objects);
    let (_, _, health) = get(&app, "/healthz").await;
    assert_eq!(health, "ok: version 2, 1 nodes, 1 waiting pods\n");
    let (status, _, _) = get(&app, "/node/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, svg) = get(&app, "/picture/node-a").await;
    assert_eq!(status, StatusCode::OK);
    assert!(svg.starts_with("<svg"));
}

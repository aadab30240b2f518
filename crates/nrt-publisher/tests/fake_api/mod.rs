//! A local HTTP server playing the Kubernetes API server for the one
//! resource topoalign writes (NodeResourceTopology): it records what
//! arrives — verb, path, query, content type, whether the body is valid
//! against the shipped CRD schema — and stores the object as server-side
//! apply would (422 for an invalid body, 405 for anything but an apply).
//! Shared by the publisher's tests and the agent's (`crates/cli/tests`).
#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "test harness; a panic is how a test reports failure"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::any;
use serde_json::{Value, json};

#[derive(Default)]
pub struct ApiServer {
    pub requests: Vec<Seen>,
    pub stored: BTreeMap<String, Value>,
    pub version: u64,
}

#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub name: String,
    pub query: String,
    pub content_type: String,
    pub problems: Vec<String>,
}

pub type Shared = Arc<Mutex<ApiServer>>;

pub fn crd_schema() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/noderesourcetopology-crd.yaml");
    topoalign_nrt::schema::crd_schema(&std::fs::read_to_string(path).unwrap(), "v1alpha2").unwrap()
}

async fn resource(
    State(server): State<Shared>,
    method: Method,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let object: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let problems = topoalign_nrt::schema::validate(&crd_schema(), &object);
    let mut server = server.lock().unwrap();
    server.requests.push(Seen {
        method: method.clone(),
        name: name.clone(),
        query: query.unwrap_or_default(),
        content_type: content_type.clone(),
        problems: problems.clone(),
    });
    if method != Method::PATCH || content_type != "application/apply-patch+yaml" {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"kind": "Status", "code": 405}).to_string(),
        );
    }
    if !problems.is_empty() || object["metadata"]["name"] != name.as_str() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid",
                            "message": problems.join("; "), "code": 422});
        return (StatusCode::UNPROCESSABLE_ENTITY, status.to_string());
    }
    server.version += 1;
    let mut stored = object;
    stored["metadata"]["resourceVersion"] = json!(server.version.to_string());
    server.stored.insert(name, stored.clone());
    (StatusCode::OK, stored.to_string())
}

async fn collection(State(server): State<Shared>) -> String {
    let server = server.lock().unwrap();
    let items: Vec<&Value> = server.stored.values().collect();
    json!({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopologyList",
           "metadata": {"resourceVersion": server.version.to_string()}, "items": items})
    .to_string()
}

/// Starts the server on 127.0.0.1 (an ephemeral port) in the current
/// tokio runtime; returns its state and its URL.
pub async fn serve() -> (Shared, String) {
    let server: Shared = Arc::default();
    let app = Router::new()
        .route(
            "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{name}",
            any(resource),
        )
        .route(
            "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
            axum::routing::get(collection),
        )
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (server, url)
}

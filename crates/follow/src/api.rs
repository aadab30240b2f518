//! The follower's HTTP API: the agent's read side over the kubelet's
//! state, and a clear refusal of everything that would allocate.
//!
//! ```text
//! GET /healthz       {"status": "ok", "state": "known"|"unknown"|"starting", "reason": ...}
//! GET /metrics       OpenMetrics text
//! GET /v1/topology   the agent's topology document of the kubelet's node (503 while unknown)
//! GET /v1/state      the exact state (topoalign.io/state's record; 503 while unknown)
//! GET /v1/status?after=G
//!                    the first status newer than generation G (waiting up to 30 s for it):
//!                    {"generation", "state": "known"|"unknown"|"starting", "reason", "record"}
//! anything else under /v1/allocations, /v1/reconcile: 405, the follower never allocates
//! ```

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State as AxumState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;
use tokio::sync::watch;

use crate::follower::{State, Status};
use crate::metrics::Metrics;

/// What the routes read.
#[derive(Clone)]
pub struct Shared {
    pub status: watch::Receiver<Status>,
    pub metrics: Arc<Metrics>,
}

/// The text every allocation request gets.
pub const REFUSAL: &str = "this agent follows the kubelet (--follow-kubelet): the kubelet allocates on this node and \
                           the follower only observes; run `topoalign agent` without --follow-kubelet to allocate";

/// The routes.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/topology", get(topology))
        .route("/v1/state", get(state))
        .route("/v1/status", get(status))
        .route("/v1/allocations", any(refuse))
        .route("/v1/allocations/{id}", any(refuse))
        .route("/v1/reconcile", any(refuse))
        .with_state(shared)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

async fn refuse() -> Response {
    error(StatusCode::METHOD_NOT_ALLOWED, REFUSAL)
}

async fn health(AxumState(shared): AxumState<Shared>) -> Response {
    let status = shared.status.borrow().clone();
    let body = match &status.state {
        State::Starting => json!({"status": "ok", "state": "starting", "generation": status.generation}),
        State::Known { .. } => json!({"status": "ok", "state": "known", "generation": status.generation}),
        State::Unknown(unknown) => json!({
            "status": "ok", "state": "unknown", "source": unknown.kind, "reason": unknown.reason,
            "generation": status.generation,
        }),
    };
    Json(body).into_response()
}

async fn metrics(AxumState(shared): AxumState<Shared>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics.encode(),
    )
        .into_response()
}

/// The known node, or why there is none (503).
fn known(shared: &Shared) -> Result<Arc<topoalign_engine::Node>, String> {
    match &shared.status.borrow().state {
        State::Known { node } => Ok(node.clone()),
        State::Starting => Err("the kubelet's state is not read yet".to_owned()),
        State::Unknown(unknown) => Err(format!("the kubelet's state is unknown: {}", unknown.reason)),
    }
}

async fn topology(AxumState(shared): AxumState<Shared>) -> Response {
    match known(&shared) {
        Ok(node) => Json(topoalign_agent::usage::node_topology(&node, "kubelet")).into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

async fn state(AxumState(shared): AxumState<Shared>) -> Response {
    match known(&shared) {
        Ok(node) => Json(topoalign_nrt::StateRecord::of(&node)).into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

/// `/v1/status`'s query.
#[derive(serde::Deserialize)]
struct After {
    #[serde(default)]
    after: u64,
}

/// How long `/v1/status` waits for a newer generation.
const STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The first status newer than `after` (or the current one when none
/// comes within [`STATUS_WAIT`]): a watcher waits on this instead of
/// polling.
async fn status(AxumState(shared): AxumState<Shared>, Query(query): Query<After>) -> Response {
    let mut receiver = shared.status.clone();
    let _ = tokio::time::timeout(STATUS_WAIT, receiver.wait_for(|s| s.generation > query.after)).await;
    let status = receiver.borrow().clone();
    let body = match &status.state {
        State::Starting => json!({"generation": status.generation, "state": "starting"}),
        State::Known { node } => json!({
            "generation": status.generation, "state": "known",
            "record": topoalign_nrt::StateRecord::of(node),
        }),
        State::Unknown(unknown) => json!({
            "generation": status.generation, "state": "unknown", "source": unknown.kind, "reason": unknown.reason,
        }),
    };
    Json(body).into_response()
}

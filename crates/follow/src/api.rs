//! The follower's HTTP API: the agent's read side over the kubelet's
//! state, and a clear refusal of everything that would allocate.
//!
//! ```text
//! GET /healthz       {"status": "ok", "state": "known"|"unknown"|"starting", "reason": ...,
//!                     "ageSeconds": ..., "held": ...}
//! GET /metrics       OpenMetrics text
//! GET /v1/topology   the topology document (`topoalign_usage`, the agent's shape) of the kubelet's node (503 while unknown)
//! GET /v1/state      the exact state (topoalign.io/state's record; 503 while unknown)
//! GET /v1/status?after=G
//!                    the first status newer than generation G (waiting up to 30 s for it):
//!                    {"generation", "state": "known"|"unknown"|"starting", "reason", "record",
//!                     "dynamicResources", "ageSeconds", "held"}
//!                    (`dynamicResources`: the devices DRA allocated to each container, from
//!                    PodResources `dynamic_resources`: [{"namespace", "pod", "container",
//!                    "devices": [{"claimNamespace", "claimName", "driver", "pool", "device"}]}])
//! GET /v1/verdicts  the last verification of the running containers ([`crate::verify`]):
//!                    {"generation", "reports": [...], "summary", "notFound": [...]}
//!                    as `topoalign verify --containers -o json`; 503 before the first or when off
//! anything else under /v1/allocations, /v1/reconcile: 405, the follower never allocates
//! ```
//!
//! A known state carries its age: `ageSeconds` (and the `Age` header of
//! `/v1/state` and `/v1/topology`) is the time since a gather last
//! confirmed it. It is the latest gather's, except while gathers fail
//! because this process ran short of descriptors or memory — its own
//! trouble, not the kubelet's ([`crate::run`]'s [`Published`]): then the
//! last known state stays published, `held` saying why it is not fresher.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Query, State as AxumState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;
use tokio::sync::watch;

use crate::follower::{State, Status};
use crate::metrics::Metrics;

/// What the routes read.
#[derive(Clone)]
pub struct Shared {
    pub status: watch::Receiver<Published>,
    pub metrics: Arc<Metrics>,
    /// How long `/v1/status` waits for a newer generation: 30 s, or less
    /// to stay within the listener's request deadline.
    pub status_wait: Duration,
    /// The verifier's latest verdicts (`None`: verification is off).
    pub verdicts: Option<watch::Receiver<crate::verify::Verdicts>>,
}

/// The status the API and the NodeResourceTopology delivery publish.
#[derive(Clone, Debug)]
pub struct Published {
    pub status: Status,
    /// When a gather last confirmed the state shown (a known state).
    pub confirmed_at: Option<Instant>,
    /// Why the state shown is older than the latest gather: that gather
    /// failed for want of this process's own resources.
    pub held: Option<String>,
}

impl Published {
    /// The status as the follower reported it (nothing held).
    pub fn fresh(status: Status, now: Instant) -> Published {
        let confirmed_at = matches!(status.state, State::Known { .. }).then_some(now);
        Published {
            status,
            confirmed_at,
            held: None,
        }
    }

    /// Seconds since the state shown was confirmed (a known state).
    pub fn age_seconds(&self) -> Option<f64> {
        self.confirmed_at.map(|at| at.elapsed().as_millis() as f64 / 1000.0)
    }

    /// `ageSeconds` and `held` added to a status document.
    fn annotate(&self, mut body: serde_json::Value) -> serde_json::Value {
        if let Some(object) = body.as_object_mut() {
            if let Some(age) = self.age_seconds() {
                object.insert("ageSeconds".to_owned(), json!(age));
            }
            if let Some(held) = &self.held {
                object.insert("held".to_owned(), json!(held));
            }
        }
        body
    }

    /// The `Age` header (whole seconds, RFC 9111) of a known state.
    fn age_header(&self) -> Option<(header::HeaderName, HeaderValue)> {
        let seconds = self.confirmed_at?.elapsed().as_secs();
        Some((header::AGE, HeaderValue::from(seconds)))
    }
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
        .route("/v1/verdicts", get(verdicts))
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
    let published = shared.status.borrow().clone();
    let status = &published.status;
    let body = match &status.state {
        State::Starting => json!({"status": "ok", "state": "starting", "generation": status.generation}),
        State::Known { .. } => json!({"status": "ok", "state": "known", "generation": status.generation}),
        State::Unknown(unknown) => json!({
            "status": "ok", "state": "unknown", "source": unknown.kind, "reason": unknown.reason,
            "generation": status.generation,
        }),
    };
    Json(published.annotate(body)).into_response()
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

/// The known node and its `Age` header, or why there is none (503).
type KnownNode = (Arc<topoalign_engine::Node>, Option<(header::HeaderName, HeaderValue)>);

fn known(shared: &Shared) -> Result<KnownNode, String> {
    let published = shared.status.borrow();
    match &published.status.state {
        State::Known { node, .. } => Ok((node.clone(), published.age_header())),
        State::Starting => Err("the kubelet's state is not read yet".to_owned()),
        State::Unknown(unknown) => Err(format!("the kubelet's state is unknown: {}", unknown.reason)),
    }
}

async fn topology(AxumState(shared): AxumState<Shared>) -> Response {
    match known(&shared) {
        Ok((node, age)) => (
            age.into_iter().collect::<axum::http::HeaderMap>(),
            Json(topoalign_usage::node_topology(&node, "kubelet")),
        )
            .into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

async fn state(AxumState(shared): AxumState<Shared>) -> Response {
    match known(&shared) {
        Ok((node, age)) => (
            age.into_iter().collect::<axum::http::HeaderMap>(),
            Json(topoalign_nrt::StateRecord::of(&node)),
        )
            .into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

/// `/v1/status`'s query.
#[derive(serde::Deserialize)]
struct After {
    #[serde(default)]
    after: u64,
}

/// How long `/v1/status` waits for a newer generation at most.
pub const STATUS_WAIT: Duration = Duration::from_secs(30);

/// The first status newer than `after` (or the current one when none
/// comes within [`Shared::status_wait`]): a watcher waits on this instead
/// of polling.
async fn status(AxumState(shared): AxumState<Shared>, Query(query): Query<After>) -> Response {
    let mut receiver = shared.status.clone();
    let _ = tokio::time::timeout(
        shared.status_wait,
        receiver.wait_for(|p| p.status.generation > query.after),
    )
    .await;
    let published = receiver.borrow().clone();
    let status = &published.status;
    let body = match &status.state {
        State::Starting => json!({"generation": status.generation, "state": "starting"}),
        State::Known {
            node, dynamic_devices, ..
        } => json!({
            "generation": status.generation, "state": "known",
            "record": topoalign_nrt::StateRecord::of(node),
            "dynamicResources": dynamic_resources(dynamic_devices),
        }),
        State::Unknown(unknown) => json!({
            "generation": status.generation, "state": "unknown", "source": unknown.kind, "reason": unknown.reason,
        }),
    };
    Json(published.annotate(body)).into_response()
}

/// The DRA devices of each container as `/v1/status` shows them.
pub fn dynamic_resources(containers: &[topoalign_observe::ContainerDynamicDevices]) -> serde_json::Value {
    containers
        .iter()
        .map(|c| {
            let devices: Vec<serde_json::Value> = c
                .devices
                .iter()
                .map(|d| {
                    json!({
                        "claimNamespace": d.claim_namespace, "claimName": d.claim_name,
                        "driver": d.driver, "pool": d.pool, "device": d.device,
                    })
                })
                .collect();
            json!({"namespace": c.namespace, "pod": c.pod, "container": c.container, "devices": devices})
        })
        .collect()
}

/// `GET /v1/verdicts`: the last verification, as `verify --containers -o
/// json` prints it (with the status generation it judged).
async fn verdicts(AxumState(shared): AxumState<Shared>) -> Response {
    let Some(receiver) = &shared.verdicts else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "verification is off (--verify-interval 0)",
        );
    };
    let latest = receiver.borrow().clone();
    match (&latest.verified, &latest.error) {
        (Some(verified), _) => {
            let summary = topoalign_verify::Summary::of(&verified.reports);
            Json(json!({
                "generation": latest.generation,
                "reports": verified.reports,
                "summary": summary,
                "notFound": verified.not_found,
            }))
            .into_response()
        }
        (None, Some(reason)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the containers cannot be verified: {reason}"),
        ),
        (None, None) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no verification yet (the kubelet's state is not known yet)",
        ),
    }
}

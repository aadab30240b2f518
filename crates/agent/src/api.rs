//! The HTTP API: routes, status codes, JSON errors, the body limit and the
//! bearer token for TCP.
//!
//! ```text
//! GET    /healthz                  status, enforcement, what recovery found
//! GET    /metrics                  Prometheus / OpenMetrics text
//! GET    /v1/topology              machine, policies, per-NUMA usage
//! GET    /v1/allocations           every allocation (JSON array)
//! GET    /v1/allocations/{id}      one allocation
//! POST   /v1/allocations           admit: a Pod manifest or a plain request → decision with explanation
//! DELETE /v1/allocations/{id}      release
//! POST   /v1/reconcile             release allocations whose holder exited, now
//! ```
//!
//! Owns: the mapping of [`AgentError`]s to statuses (400 bad request, 401
//! missing or wrong token, 404, 409 rejected or clashing, 413 body too
//! large, 500 enforcement failed, 503 state not writable) and of every
//! error to `{"error": "..."}`. Changes (admit, release, reconcile) are
//! serialised by one lock around the [`NodeAgent`], on the blocking pool
//! (they sync to disk); reads never take that lock: they answer from the
//! state the last committed change published ([`Reader`]), so a slow
//! admission holds up other changes, never a reader.
//!
//! A change is done only for a client still waiting: the listener
//! (`topoalign-serve`) drops a request's future when its client closes the
//! connection or its deadline passes, and a change whose request was
//! dropped while it waited for the agent's lock is not made
//! ([`with_agent`]); an admission whose request was dropped while it ran
//! is released at once — no allocation is left that nobody holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::node_agent::{AgentError, NodeAgent, Reader};
use crate::request::{AdmitOptions, read_body};
use crate::wire::ErrorBody;

/// Request bodies larger than this are refused (413).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The agent shared by all connections.
pub type SharedAgent = Arc<Mutex<NodeAgent>>;

/// What every handler gets: the agent, for changes, and a reader of its
/// last committed state.
#[derive(Clone)]
struct AppState {
    agent: SharedAgent,
    reader: Reader,
}

/// The routes, without authentication (for the Unix socket, whose mode is
/// the permission).
pub fn router(agent: SharedAgent) -> Router {
    let reader = match agent.lock() {
        Ok(locked) => locked.reader(),
        Err(poisoned) => poisoned.into_inner().reader(),
    };
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/topology", get(topology))
        .route("/v1/allocations", get(list).post(admit))
        .route("/v1/allocations/{id}", get(show).delete(release))
        .route("/v1/reconcile", post(reconcile))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(AppState { agent, reader })
}

/// The routes behind a bearer token (for TCP).
pub fn router_with_token(agent: SharedAgent, token: String) -> Router {
    router(agent).layer(middleware::from_fn_with_state(Arc::new(token), require_token))
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(ErrorBody { error: message.into() })).into_response()
}

impl IntoResponse for AgentError {
    fn into_response(self) -> Response {
        let status = match &self {
            AgentError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AgentError::Conflict(_) => StatusCode::CONFLICT,
            AgentError::NotFound(_) => StatusCode::NOT_FOUND,
            AgentError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AgentError::Enforcement(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        error(status, self.to_string())
    }
}

async fn require_token(State(token): State<Arc<String>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials);
    match presented {
        Some(presented) if constant_time_eq(presented.trim().as_bytes(), token.as_bytes()) => next.run(request).await,
        Some(_) => error(StatusCode::UNAUTHORIZED, "wrong bearer token"),
        None => error(
            StatusCode::UNAUTHORIZED,
            "this listener needs `Authorization: Bearer <token>` with the token from the agent's --token-file",
        ),
    }
}

/// The credentials of a `Bearer` authorization: the scheme is
/// case-insensitive (RFC 9110, section 11.1), so `bearer` and `BEARER` are
/// the same scheme.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then_some(credentials)
}

/// Compares without an early exit, so timing does not tell how much of a
/// guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The agent could not run a request at all (a panic earlier poisoned
/// it, or the task was cancelled): 500.
struct Failure(String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        error(StatusCode::INTERNAL_SERVER_ERROR, self.0)
    }
}

/// Whether a request is still wanted: true until its handler's future is
/// dropped — its client closed the connection, or its deadline passed —
/// before [`with_agent`] returned.
#[derive(Clone)]
struct Wanted(Arc<AtomicBool>);

impl Wanted {
    fn still(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Clears [`Wanted`] when dropped unfinished.
struct WantedWhileAlive(Option<Arc<AtomicBool>>);

impl WantedWhileAlive {
    fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for WantedWhileAlive {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            flag.store(false, Ordering::SeqCst);
        }
    }
}

/// Runs `work` on the agent, on the blocking pool (it may sync to disk) —
/// unless the request is dropped before the agent is free for it: then
/// nothing is done (the blocking task outlives the request's future, so
/// it looks before it starts). `work` gets whether the request is still
/// wanted, for what it must undo when it is not.
async fn with_agent<T: Send + 'static>(
    agent: SharedAgent,
    work: impl FnOnce(&mut NodeAgent, &Wanted) -> T + Send + 'static,
) -> Result<T, Failure> {
    let flag = Arc::new(AtomicBool::new(true));
    let alive = WantedWhileAlive(Some(flag.clone()));
    let wanted = Wanted(flag);
    let result = tokio::task::spawn_blocking(move || {
        let mut agent = agent
            .lock()
            .map_err(|_| Failure("the agent failed earlier; restart it".to_string()))?;
        if !wanted.still() {
            tracing::info!(
                "a request was dropped (its client went away or its deadline passed) before it ran: not run"
            );
            return Err(Failure("the request was dropped before it ran".to_string()));
        }
        Ok(work(&mut agent, &wanted))
    })
    .await
    .unwrap_or_else(|e| Err(Failure(format!("request aborted: {e}"))));
    alive.finished();
    result
}

async fn health(State(state): State<AppState>) -> Response {
    Json(&state.reader.committed().health).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.reader.metrics_text(),
    )
        .into_response()
}

async fn topology(State(state): State<AppState>) -> Response {
    Json(&state.reader.committed().topology).into_response()
}

async fn list(State(state): State<AppState>) -> Response {
    Json(&state.reader.committed().allocations).into_response()
}

async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.reader.committed().allocation(&id) {
        Some(allocation) => Json(allocation).into_response(),
        None => AgentError::NotFound(id).into_response(),
    }
}

async fn admit(
    State(AppState { agent, .. }): State<AppState>,
    query: Result<Query<AdmitOptions>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let query = match query {
        Ok(Query(query)) => query,
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("bad query string ({}); accepted: pid, policy", rejection.body_text()),
            );
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
            );
        }
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let yaml = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.contains("yaml"));
    let workload = match read_body(&body, yaml, &query) {
        Ok(workload) => workload,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.0),
    };
    // A rejection is explained after the agent is released: the fix
    // search admits the pod again on copies of the node and may take long.
    let unexplained = match with_agent(agent, move |a, wanted| {
        let admitted = a.admit_unexplained(&workload);
        // Dropped while it ran: nobody will learn of the allocation.
        if let Ok(unexplained) = &admitted
            && let Some(id) = unexplained.allocation_id()
            && !wanted.still()
        {
            tracing::info!(%id, "its request was dropped (client gone or deadline passed) during admission: released");
            if let Err(error) = a.release(id) {
                tracing::warn!(%id, %error, "cannot release the allocation of a dropped request");
            }
        }
        admitted
    })
    .await
    {
        Ok(Ok(unexplained)) => unexplained,
        Ok(Err(e)) => return e.into_response(),
        Err(failure) => return failure.into_response(),
    };
    match tokio::task::spawn_blocking(move || unexplained.explain()).await {
        Ok(response) if response.admitted => (StatusCode::CREATED, Json(response)).into_response(),
        Ok(response) => (StatusCode::CONFLICT, Json(response)).into_response(),
        Err(e) => Failure(format!("request aborted: {e}")).into_response(),
    }
}

async fn release(State(AppState { agent, .. }): State<AppState>, Path(id): Path<String>) -> Response {
    match with_agent(agent, move |a, _| a.release(&id)).await {
        Ok(Ok(allocation)) => Json(allocation).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(failure) => failure.into_response(),
    }
}

async fn reconcile(State(AppState { agent, .. }): State<AppState>) -> Response {
    match with_agent(agent, |a, _| a.reconcile()).await {
        Ok(released) => Json(released).into_response(),
        Err(failure) => failure.into_response(),
    }
}

async fn not_found(request: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no endpoint {}; try GET /v1/allocations, POST /v1/allocations, DELETE /v1/allocations/{{id}}, GET \
             /v1/topology, GET /healthz or GET /metrics",
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {}", request.method(), request.uri().path()),
    )
}

#[cfg(test)]
mod tests {
    use super::{bearer_credentials, constant_time_eq};

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "  bEaReR abc"] {
            assert_eq!(bearer_credentials(header), Some("abc"), "{header}");
        }
        assert_eq!(bearer_credentials("Basic abc"), None);
        assert_eq!(bearer_credentials("Bearerabc"), None);
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}

//! The HTTP side: `POST /filter`, `/prioritize`, `/bind` with the
//! extender v1 JSON bodies, `GET /healthz`. Each request locks the cluster
//! for its duration (the scheduler calls an extender one pod at a time);
//! the lock and the engine work run on the request's own thread, its
//! other tasks moved off it meanwhile ([`with_cluster`]).
//! `/bind` creates the pod's Binding when given a [`Binder`], then records
//! the placement.
//!
//! `GET /metrics` gives, per verb, the calls served and the extender's own
//! time over them (what each answer's `Server-Timing` header says), in
//! Prometheus' text format: kube-scheduler's own metrics have no extender
//! latency, so a benchmark reads the extender's part here.
//!
//! Both `nodeCacheCapable` settings are served by every verb: a request
//! with `NodeNames` gets `NodeNames` back; one with a `Nodes` list gets the
//! same list back, filtered, objects untouched.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};

use crate::api::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, FilterAnswer, HostPriority,
    filter_node_list, node_list_names,
};
use crate::binder::Binder;
use crate::cluster::Cluster;

/// The node states the handlers share.
pub type Shared = Arc<Mutex<Cluster>>;

/// Everything the handlers read.
#[derive(Clone)]
struct AppState {
    cluster: Shared,
    binder: Option<Arc<dyn Binder>>,
    timings: Arc<Timings>,
}

/// The verbs whose calls and time `GET /metrics` reports.
const TIMED_VERBS: [&str; 3] = ["filter", "prioritize", "bind"];

/// Per verb of [`TIMED_VERBS`]: calls answered, and nanoseconds over them
/// (as [`server_timing`] measures).
#[derive(Default)]
struct Timings {
    calls: [AtomicU64; 3],
    nanos: [AtomicU64; 3],
}

impl Timings {
    /// The index in [`TIMED_VERBS`] of a request path's verb.
    fn verb(path: &str) -> Option<usize> {
        let verb = path.strip_prefix('/').unwrap_or(path);
        TIMED_VERBS.iter().position(|v| *v == verb)
    }

    fn record(&self, verb: usize, took: std::time::Duration) {
        self.calls[verb].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[verb].fetch_add(nanos, Ordering::Relaxed);
    }

    /// Prometheus' text format: a summary (sum and count) per verb.
    fn text(&self) -> String {
        let name = "topoalign_extender_request_duration_seconds";
        let mut text = format!(
            "# HELP {name} The extender's own time over the requests of a verb: request headers read to answer ready (its Server-Timing).\n# TYPE {name} summary\n"
        );
        for (i, verb) in TIMED_VERBS.iter().enumerate() {
            let seconds = self.nanos[i].load(Ordering::Relaxed) as f64 / 1e9;
            let calls = self.calls[i].load(Ordering::Relaxed);
            let _ = writeln!(text, "{name}_sum{{verb=\"{verb}\"}} {seconds}");
            let _ = writeln!(text, "{name}_count{{verb=\"{verb}\"}} {calls}");
        }
        text
    }
}

/// Largest request body accepted (larger ones get 413 before they are
/// read). The port has no authentication, so this bounds what any peer can
/// make the extender hold. With `nodeCacheCapable` (as deployed) a body is
/// the pod and node names, a few KiB; without it, a `NodeList` of 5,000
/// nodes (Kubernetes' largest supported cluster) at ~10 KiB per Node object
/// is about 50 MiB.
pub const BODY_LIMIT: usize = 64 << 20;

/// The extender's routes; `/bind` creates Bindings with `binder` when given.
pub fn router(cluster: Shared, binder: Option<Arc<dyn Binder>>) -> Router {
    let timings = Arc::new(Timings::default());
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(refuse_announced_oversize))
        .layer(middleware::from_fn_with_state(timings.clone(), server_timing))
        .with_state(AppState {
            cluster,
            binder,
            timings,
        })
}

/// 413 at once for a body whose `Content-Length` passes [`BODY_LIMIT`]:
/// the body limit alone would wait for the bytes to arrive, holding the
/// connection while a peer trickles them in. (A chunked body is still cut
/// off at the limit as it is read.)
async fn refuse_announced_oversize(request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > BODY_LIMIT as u64) {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {BODY_LIMIT} bytes"),
        )
            .into_response();
    }
    next.run(request).await
}

/// Says in a `Server-Timing` header (`extender;dur=<ms>`) how long the
/// extender took over a request: from its headers read to its answer
/// ready to send (the body read and parsed, the work, the answer
/// serialized; not the writing to the socket). A client timing the round
/// trip can then tell the extender's own time from the transport's; the
/// same time is added up per verb for `GET /metrics`.
async fn server_timing(State(timings): State<Arc<Timings>>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    let verb = Timings::verb(request.uri().path());
    let mut response = next.run(request).await;
    let elapsed = start.elapsed();
    if let Some(verb) = verb {
        timings.record(verb, elapsed);
    }
    let took = format!("extender;dur={:.3}", elapsed.as_secs_f64() * 1000.0);
    if let Ok(value) = header::HeaderValue::from_str(&took) {
        response.headers_mut().insert(SERVER_TIMING, value);
    }
    response
}

/// The `Server-Timing` header ([`server_timing`]).
pub const SERVER_TIMING: header::HeaderName = header::HeaderName::from_static("server-timing");

/// Serves on `listener` until `shutdown` completes.
///
/// # Errors
/// The listener's I/O error.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cluster: Shared,
    binder: Option<Arc<dyn Binder>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Answers go out at once (no Nagle delay): a filter answer over
    // thousands of nodes ends in a segment smaller than the MSS, which
    // Nagle's algorithm would hold until the peer acknowledges the rest.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("topoalign extender: cannot set TCP_NODELAY on a connection: {error}");
        }
    });
    axum::serve(listener, router(cluster, binder))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The candidates of a request (its `NodeNames` taken out of it, not
/// copied), and whether they came as names.
fn candidates(args: &mut ExtenderArgs) -> (Vec<String>, bool) {
    match (args.node_names.take(), &args.nodes) {
        (Some(names), _) => (names, true),
        (None, Some(list)) => (node_list_names(list), false),
        (None, None) => (Vec::new(), true),
    }
}

/// Runs `work` on the locked cluster, on the request's own thread. The
/// scheduler waits for the answer, so the work is the request's whole
/// path: handing it to a blocking thread and the answer back (two thread
/// wake-ups per call, each waiting for a CPU on a busy machine) cost more
/// than a warm `filter` itself. On a multi-thread runtime the worker's
/// other tasks move to another thread meanwhile ([`block_in_place`]), so
/// a long evaluation (a pod shape never seen) holds up no other request.
///
/// [`block_in_place`]: tokio::task::block_in_place
///
/// # Errors
/// A message when the lock is poisoned or `work` panicked.
pub fn with_cluster<T>(cluster: &Shared, work: impl FnOnce(&mut Cluster) -> T) -> Result<T, String> {
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cluster = cluster.lock().map_err(|_| "internal: state lock poisoned".to_owned())?;
            Ok(work(&mut cluster))
        }))
        .unwrap_or_else(|panic| {
            Err(format!(
                "internal: {}",
                crate::cluster::panic_message(panic.as_ref(), "a panic")
            ))
        })
    };
    match tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
        _ => run(),
    }
}

async fn filter(State(AppState { cluster, .. }): State<AppState>, Json(mut args): Json<ExtenderArgs>) -> Response {
    let (names, by_name) = candidates(&mut args);
    let answer = |error: String| {
        Json(ExtenderFilterResult {
            error,
            ..ExtenderFilterResult::default()
        })
        .into_response()
    };
    let Some(manifest) = &args.pod else {
        return answer("no Pod in the request".into());
    };
    let pod = match Cluster::read_pod(manifest) {
        Ok(pod) => pod,
        Err(e) => return answer(e.to_string()),
    };
    let claims = match crate::dra::PodClaims::of_manifest(manifest) {
        Ok(claims) => claims,
        Err(e) => return answer(e),
    };
    let outcome = with_cluster(&cluster, |cluster| {
        cluster
            .filter_with(&pod, claims.as_ref(), names, Instant::now())
            .map_err(|e| e.to_string())
    })
    .and_then(|outcome| outcome);
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return answer(error),
    };
    let nodes = match (by_name, &args.nodes) {
        (false, Some(list)) => {
            let passed: std::collections::HashSet<&str> = outcome.passed.iter().map(String::as_str).collect();
            Some(filter_node_list(list, |name| passed.contains(name)))
        }
        _ => None,
    };
    Json(FilterAnswer {
        nodes: nodes.as_ref(),
        node_names: by_name.then_some(outcome.passed.as_slice()),
        failed_nodes: &outcome.failed,
        failed_and_unresolvable_nodes: &outcome.unresolvable,
        error: "",
    })
    .into_response()
}

async fn prioritize(
    State(AppState { cluster, .. }): State<AppState>,
    Json(mut args): Json<ExtenderArgs>,
) -> Json<Vec<HostPriority>> {
    let (names, _) = candidates(&mut args);
    let pod = args.pod.as_ref().and_then(|m| Cluster::read_pod(m).ok());
    let claims = args
        .pod
        .as_ref()
        .and_then(|m| crate::dra::PodClaims::of_manifest(m).ok().flatten());
    // Without a readable pod, or without an answer, every node scores the
    // same (the verb has no error field).
    let even: Vec<(String, i64)> = names.iter().map(|n| (n.clone(), 0)).collect();
    let scores = match pod {
        Some(pod) => with_cluster(&cluster, |cluster| {
            cluster.prioritize_with(&pod, claims.as_ref(), names, Instant::now())
        })
        .ok()
        .and_then(Result::ok)
        .unwrap_or(even),
        None => even,
    };
    Json(
        scores
            .into_iter()
            .map(|(host, score)| HostPriority { host, score })
            .collect(),
    )
}

async fn bind(State(state): State<AppState>, Json(args): Json<ExtenderBindingArgs>) -> Json<ExtenderBindingResult> {
    if let Some(binder) = &state.binder
        && let Err(error) = binder.bind(&args).await
    {
        return Json(ExtenderBindingResult { error });
    }
    let recorded = with_cluster(&state.cluster, |cluster| {
        cluster.bind(&args.pod_uid, &args.node, Instant::now())
    })
    .and_then(|recorded| recorded);
    let error = match recorded {
        Ok(()) => String::new(),
        // The Binding exists: the pod is bound even though its placement
        // could not be recorded (an extender restarted between the
        // scheduler's filter and bind has not seen the pod).
        Err(error) if state.binder.is_some() => {
            eprintln!(
                "topoalign extender: pod {} bound to {} but not assumed: {error}",
                args.pod_uid, args.node
            );
            String::new()
        }
        Err(error) => error,
    };
    Json(ExtenderBindingResult { error })
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.timings.text(),
    )
        .into_response()
}

async fn healthz(State(state): State<AppState>) -> String {
    with_cluster(&state.cluster, |cluster| {
        let dra = cluster
            .dra_mut()
            .map(|dra| format!(", {} ResourceClaims", dra.claims_known()))
            .unwrap_or_default();
        format!(
            "ok: {} nodes, {} assumed pods{dra}\n",
            cluster.len(),
            cluster.assumptions().len()
        )
    })
    .unwrap_or_else(|error| format!("{error}\n"))
}

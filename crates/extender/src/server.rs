//! The HTTP side: `POST /filter`, `/prioritize`, `/bind` with the
//! extender v1 JSON bodies, `GET /healthz`. Each request locks the cluster
//! for its duration (the scheduler calls an extender one pod at a time);
//! the lock and the engine work run on the request's own thread, its
//! other tasks moved off it meanwhile ([`with_cluster`]).
//! `/bind` creates the pod's Binding when given a [`Binder`] — after the
//! Bindings of the pods assumed before it on the same node, so the kubelet
//! meets a node's pods in the order they were predicted — then records
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
//!
//! Memory: a `filter` or `prioritize` body is read into one buffer (its
//! `Content-Length` reserved up front) and read in place
//! ([`crate::api::read_args`]: the names, and each Node's place in the
//! body); a filtered `NodeList` answer is written from slices of that
//! buffer. A request costs about its body's size, and the bodies held at
//! once are bounded ([`ServeOptions::bytes_in_flight`]): a request waits,
//! within its deadline, for its bytes to fit. The listener's limits
//! (connections, requests in flight, header, body and request deadlines)
//! are `topoalign-serve`'s.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};

use futures::StreamExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::{
    ArgsView, Candidates, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, FilterAnswer, HostPriority,
    read_args,
};
use crate::binder::Binder;
use crate::cluster::Cluster;
use crate::error::StateError;

/// The node states the handlers share.
pub type Shared = Arc<Mutex<Cluster>>;

/// `--dra-align`: each listing of the cluster's DRA objects goes to the
/// cluster's [`crate::dra::Dra`] (none when the option is off).
impl crate::dra::DraSink for Shared {
    fn sync_dra(&self, objects: crate::dra::DraObjects) -> Result<(), StateError> {
        let mut cluster = self.lock().map_err(|_| StateError::Poisoned)?;
        if let Some(dra) = cluster.dra_mut() {
            dra.sync(objects);
        }
        Ok(())
    }
}

/// Everything the handlers read.
#[derive(Clone)]
struct AppState {
    cluster: Shared,
    binder: Option<Arc<dyn Binder>>,
    timings: Arc<Timings>,
    budget: Arc<Budget>,
    /// Woken whenever a Binding is made or refused (see [`bind`]).
    bindings_settled: Arc<tokio::sync::Notify>,
}

/// The request body bytes held at once, in KiB permits (a semaphore's
/// permits are counted in `u32`).
struct Budget {
    kib: Arc<Semaphore>,
    total_kib: u32,
}

impl Budget {
    fn new(bytes: usize) -> Budget {
        let total_kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(Semaphore::MAX_PERMITS as u32);
        Budget {
            kib: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
        }
    }

    /// Reserves `bytes` (at most the whole budget), waiting for room.
    async fn reserve(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.total_kib);
        self.kib.clone().acquire_many_owned(kib).await.ok()
    }
}

/// How the extender serves.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// The listener's limits.
    pub limits: topoalign_serve::Limits,
    /// Request body bytes held at once, across requests (at least
    /// [`BODY_LIMIT`]).
    pub bytes_in_flight: usize,
}

/// [`ServeOptions::bytes_in_flight`]'s default: four requests of the
/// largest size at once.
pub const DEFAULT_BYTES_IN_FLIGHT: usize = 4 * BODY_LIMIT;

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            limits: topoalign_serve::Limits::default(),
            bytes_in_flight: DEFAULT_BYTES_IN_FLIGHT,
        }
    }
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
    router_with(cluster, binder, DEFAULT_BYTES_IN_FLIGHT)
}

/// [`router`], holding at most `bytes_in_flight` request body bytes at
/// once (raised to [`BODY_LIMIT`] when lower).
pub fn router_with(cluster: Shared, binder: Option<Arc<dyn Binder>>, bytes_in_flight: usize) -> Router {
    let timings = Arc::new(Timings::default());
    let budget = Arc::new(Budget::new(bytes_in_flight.max(BODY_LIMIT)));
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
            budget,
            bindings_settled: Arc::new(tokio::sync::Notify::new()),
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

/// Serves on `listener` until `shutdown` completes, with the default
/// [`ServeOptions`].
///
/// # Errors
/// The listener's I/O error.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cluster: Shared,
    binder: Option<Arc<dyn Binder>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, cluster, binder, ServeOptions::default(), shutdown).await
}

/// Serves on `listener` under `options` until `shutdown` completes.
///
/// # Errors
/// The listener's I/O error.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    cluster: Shared,
    binder: Option<Arc<dyn Binder>>,
    options: ServeOptions,
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
    let stats = Arc::new(topoalign_serve::Stats::new(options.limits));
    let app = router_with(cluster, binder, options.bytes_in_flight);
    topoalign_serve::serve(listener, app, stats, shutdown).await
}

/// A request body read whole into one buffer: its `Content-Length`
/// reserved in the budget (and allocated) before it is read, a chunked
/// body reserved as it grows; the reservation is held for as long as the
/// body (or an answer made of slices of it) lives.
async fn read_body(budget: &Budget, request: Request) -> Result<(Bytes, Vec<OwnedSemaphorePermit>), Response> {
    let refused = |status: StatusCode, message: String| (status, message).into_response();
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n <= BODY_LIMIT);
    let mut permits = Vec::new();
    let mut reserved = 0usize;
    if let Some(length) = announced {
        permits.extend(budget.reserve(length).await);
        reserved = length;
    }
    let mut body = bytes::BytesMut::with_capacity(announced.unwrap_or(0));
    let mut frames = request.into_body().into_data_stream();
    while let Some(frame) = frames.next().await {
        let frame =
            frame.map_err(|e| refused(StatusCode::BAD_REQUEST, format!("cannot read the request body: {e}")))?;
        if body.len() + frame.len() > BODY_LIMIT {
            return Err(refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {BODY_LIMIT} bytes"),
            ));
        }
        if body.len() + frame.len() > reserved {
            // Chunked (or longer than announced): reserve what it grew by,
            // in steps of at least 1 MiB.
            let more = (body.len() + frame.len() - reserved).max(1 << 20);
            permits.extend(budget.reserve(more).await);
            reserved += more;
        }
        body.extend_from_slice(&frame);
    }
    Ok((body.freeze(), permits))
}

/// Reads a `filter` or `prioritize` body; an answer for the client when
/// it cannot be read.
async fn read_request(
    budget: &Budget,
    request: Request,
) -> Result<(ArgsView, Bytes, Vec<OwnedSemaphorePermit>), Response> {
    let (body, permits) = read_body(budget, request).await?;
    let view = read_args(&body).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()).into_response())?;
    Ok((view, body, permits))
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
/// [`StateError`] when the lock is poisoned or `work` panicked.
pub fn with_cluster<T>(cluster: &Shared, work: impl FnOnce(&mut Cluster) -> T) -> Result<T, StateError> {
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cluster = cluster.lock().map_err(|_| StateError::Poisoned)?;
            Ok(work(&mut cluster))
        }))
        .unwrap_or_else(|panic| {
            Err(StateError::Panicked(crate::cluster::panic_message(
                panic.as_ref(),
                "a panic",
            )))
        })
    };
    match tokio::runtime::Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
        _ => run(),
    }
}

async fn filter(State(state): State<AppState>, request: Request) -> Response {
    let answer = |error: String| {
        Json(ExtenderFilterResult {
            error,
            ..ExtenderFilterResult::default()
        })
        .into_response()
    };
    let (args, body, permits) = match read_request(&state.budget, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let ArgsView { pod, candidates } = args;
    let (names, list) = match candidates {
        Candidates::Names(names) => (names, None),
        Candidates::List(list) => (list.names(), Some(list)),
        Candidates::None => (Vec::new(), None),
    };
    let Some(list) = list else {
        // Nothing of the body is answered: let it go before the work.
        drop((body, permits));
        return match filter_outcome(&state.cluster, pod.as_ref(), names) {
            Ok(outcome) => Json(FilterAnswer {
                nodes: None,
                node_names: Some(outcome.passed.as_slice()),
                failed_nodes: &outcome.failed,
                failed_and_unresolvable_nodes: &outcome.unresolvable,
                error: "",
            })
            .into_response(),
            Err(error) => answer(error),
        };
    };
    let outcome = match filter_outcome(&state.cluster, pod.as_ref(), names) {
        Ok(outcome) => outcome,
        Err(error) => return answer(error),
    };
    // `FilterAnswer`'s fields, the list written from slices of the body.
    let passed: std::collections::HashSet<&str> = outcome.passed.iter().map(String::as_str).collect();
    let mut chunks = vec![Bytes::from_static(b"{\"Nodes\":")];
    chunks.extend(list.filtered_json(|name| passed.contains(name)));
    let rest = serde_json::to_string(&FilterAnswer {
        nodes: None,
        node_names: None,
        failed_nodes: &outcome.failed,
        failed_and_unresolvable_nodes: &outcome.unresolvable,
        error: "",
    })
    .unwrap_or_default();
    // `{"Nodes":null,` is replaced by the list and its comma.
    chunks.push(Bytes::from(format!(",{}", rest.trim_start_matches("{\"Nodes\":null,"))));
    drop((body, list));
    // Its length is known: sent with it, not chunked.
    let length = chunks.iter().map(Bytes::len).sum::<usize>();
    let stream = futures::stream::iter(chunks).map(move |chunk| {
        // The slices are the body's: its reservation lasts until they are sent.
        let _held = &permits;
        Ok::<_, std::convert::Infallible>(chunk)
    });
    (
        [
            (
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            ),
            (header::CONTENT_LENGTH, header::HeaderValue::from(length)),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The engine's `filter` of `pod` (its manifest) over the nodes `names`,
/// its DRA claims included.
fn filter_outcome(
    cluster: &Shared,
    pod: Option<&serde_json::Value>,
    names: Vec<String>,
) -> Result<crate::FilterOutcome, String> {
    let manifest = pod.ok_or_else(|| "no Pod in the request".to_owned())?;
    let pod = Cluster::read_pod(manifest).map_err(|e| e.to_string())?;
    let claims = crate::dra::PodClaims::of_manifest(manifest).map_err(|e| e.to_string())?;
    with_cluster(cluster, |cluster| {
        cluster
            .filter_with(&pod, claims.as_ref(), names, Instant::now())
            .map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())
    .and_then(|outcome| outcome)
}

async fn prioritize(State(state): State<AppState>, request: Request) -> Response {
    let (args, body, permits) = match read_request(&state.budget, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    drop((body, permits));
    let names = match args.candidates {
        Candidates::Names(names) => names,
        Candidates::List(list) => list.names(),
        Candidates::None => Vec::new(),
    };
    let pod = args.pod.as_ref().and_then(|m| Cluster::read_pod(m).ok());
    let claims = args
        .pod
        .as_ref()
        .and_then(|m| crate::dra::PodClaims::of_manifest(m).ok().flatten());
    // Without a readable pod, or without an answer, every node scores the
    // same (the verb has no error field).
    let even: Vec<(String, i64)> = names.iter().map(|n| (n.clone(), 0)).collect();
    let scores = match pod {
        Some(pod) => with_cluster(&state.cluster, |cluster| {
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
            .collect::<Vec<_>>(),
    )
    .into_response()
}

/// How long a Binding waits for the Bindings of pods assumed before it on
/// its node ([`Cluster::binding_waits_for_earlier`]): such a pod's bind
/// comes within milliseconds unless the scheduler dropped the pod after
/// the extender's filter (another plugin refused it), and then it never
/// comes; kube-scheduler's extender calls time out after 30 s.
const BINDING_ORDER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `/bind`: with a binder, the pod's Binding is made after those of the
/// pods assumed before it on the node (waiting up to
/// [`BINDING_ORDER_WAIT`]), so the kubelet meets them in the order the
/// extender predicted; then the placement is recorded.
async fn bind(State(state): State<AppState>, Json(args): Json<ExtenderBindingArgs>) -> Json<ExtenderBindingResult> {
    if let Some(binder) = &state.binder {
        wait_for_earlier_bindings(&state, &args).await;
        let made = binder.bind(&args).await;
        if let Err(error) = made {
            // Refused: the scheduler retries the pod from its start; later
            // pods on the node no longer wait for it.
            with_cluster(&state.cluster, |cluster| cluster.binding_settled(&args.pod_uid)).ok();
            state.bindings_settled.notify_waiters();
            return Json(ExtenderBindingResult {
                error: error.to_string(),
            });
        }
    }
    let recorded = with_cluster(&state.cluster, |cluster| {
        cluster
            .bind(&args.pod_uid, &args.node, Instant::now())
            .map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())
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
    state.bindings_settled.notify_waiters();
    Json(ExtenderBindingResult { error })
}

/// Waits, up to [`BINDING_ORDER_WAIT`], until no pod assumed before the
/// pod of `args` on its node is still without its Binding.
async fn wait_for_earlier_bindings(state: &AppState, args: &ExtenderBindingArgs) {
    let deadline = tokio::time::Instant::now() + BINDING_ORDER_WAIT;
    loop {
        // Registered before the check, so a Binding settled between the
        // check and the wait still wakes it.
        let mut settled = std::pin::pin!(state.bindings_settled.notified());
        settled.as_mut().enable();
        let waits = with_cluster(&state.cluster, |cluster| {
            cluster.binding_waits_for_earlier(&args.pod_uid, &args.node)
        })
        .unwrap_or(false);
        if !waits || tokio::time::timeout_at(deadline, settled).await.is_err() {
            return;
        }
    }
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
            .map(|dra| {
                format!(
                    ", {} ResourceClaims, {} DeviceClasses",
                    dra.claims_known(),
                    dra.device_classes_known()
                )
            })
            .unwrap_or_default();
        // Dangerous kubelet configurations (the nodes are judged as their
        // kubelets would judge them all the same): a line each.
        let warnings: String = cluster
            .warnings()
            .iter()
            .map(|warning| format!("{warning}\n"))
            .collect();
        format!(
            "ok: {} nodes, {} assumed pods{dra}\n{warnings}",
            cluster.len(),
            cluster.assumptions().len()
        )
    })
    .unwrap_or_else(|error| format!("{error}\n"))
}

//! One listener served under its [`Limits`]: connections accepted while
//! the listener's connection semaphore has a permit, each served by
//! hyper's HTTP/1 with its header read timeout, and every request through
//!
//! ```text
//! Track → Timeout (request deadline, 503) → ReadyInCall
//!       → GlobalConcurrencyLimit (in-flight cap) → RequestBodyDeadline → the router
//! ```
//!
//! Dropping a request's future cancels its work: hyper drops it when the
//! client closes its connection before the answer (a request body fully
//! read, no half-close), the timeout when the deadline passes. Handlers
//! that hand work to another thread check that they are still wanted
//! before doing it (the agent's `with_agent`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, watch};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::timeout::{RequestBodyDeadlineLayer, TimeoutLayer};

use crate::limits::Limits;

/// What a listener is doing, for tests, benches and metrics: counters
/// only, read without locks.
#[derive(Debug)]
pub struct Stats {
    limits: Limits,
    in_flight: Arc<Semaphore>,
    connections_open: AtomicUsize,
    connections_accepted: AtomicU64,
    requests: AtomicU64,
    active: AtomicUsize,
    cancelled: AtomicU64,
    timed_out: AtomicU64,
}

/// A moment's [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Connections open now.
    pub connections_open: usize,
    /// Connections accepted since the start.
    pub connections_accepted: u64,
    /// Requests whose headers were read, since the start.
    pub requests: u64,
    /// Requests being worked on now (holding an in-flight slot).
    pub in_flight: usize,
    /// Requests waiting for an in-flight slot now.
    pub queued: usize,
    /// Requests dropped before their answer was ready, since the start:
    /// their client went away, or their deadline passed.
    pub cancelled: u64,
    /// Of those, the ones whose deadline passed (answered 503).
    pub timed_out: u64,
}

impl Stats {
    /// Counters for a listener served under `limits`.
    pub fn new(limits: Limits) -> Stats {
        Stats {
            limits,
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            connections_open: AtomicUsize::new(0),
            connections_accepted: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            cancelled: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
        }
    }

    /// The limits this listener serves under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let in_flight = self
            .limits
            .max_in_flight
            .saturating_sub(self.in_flight.available_permits());
        StatsSnapshot {
            connections_open: self.connections_open.load(Ordering::Relaxed),
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            in_flight,
            queued: self.active.load(Ordering::Relaxed).saturating_sub(in_flight),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
        }
    }
}

/// Counts a request from its headers to its answer, and the ones dropped
/// before it (outermost layer); fills the empty 503 of a passed deadline
/// with a JSON error.
#[derive(Clone)]
struct Track<S> {
    inner: S,
    stats: Arc<Stats>,
}

/// A request being worked on: counted as cancelled when dropped unfinished.
struct Active {
    stats: Arc<Stats>,
    finished: bool,
}

impl Active {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.stats.active.fetch_sub(1, Ordering::Relaxed);
        if !self.finished {
            self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<B>> for Track<S>
where
    S: Service<Request<B>, Response = Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let stats = self.stats.clone();
        stats.requests.fetch_add(1, Ordering::Relaxed);
        stats.active.fetch_add(1, Ordering::Relaxed);
        let mut active = Active { stats, finished: false };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            // tower-http's timeout answers an empty 503; every answer of
            // ours that is not a success says why.
            if response.status() == StatusCode::SERVICE_UNAVAILABLE
                && response.headers().get(header::CONTENT_TYPE).is_none()
            {
                active.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                active.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                let seconds = active.stats.limits.request_timeout.as_secs();
                *response.body_mut() = Body::from(format!(
                    "{{\"error\":\"the request was not answered within its deadline ({seconds} s, \
                     --request-timeout); its work was dropped\"}}"
                ));
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            }
            active.finish();
            Ok(response)
        })
    }
}

/// Always ready; waits for the inner service's readiness inside the
/// request's future (`oneshot`), so that waiting for an in-flight slot
/// happens within the request's deadline and is cancelled with it (tower's
/// concurrency limit takes its permit in `poll_ready`, which hyper's
/// adapter polls before the timeout's timer starts).
#[derive(Clone)]
struct ReadyInCall<S>(S);

impl<S, R> Service<R> for ReadyInCall<S>
where
    S: Service<R> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = tower::util::Oneshot<S, R>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.0.clone().oneshot(request)
    }
}

struct ReadyInCallLayer;

impl<S> tower::Layer<S> for ReadyInCallLayer {
    type Service = ReadyInCall<S>;
    fn layer(&self, inner: S) -> ReadyInCall<S> {
        ReadyInCall(inner)
    }
}

/// Serves `app` on `listener` under `limits` until `stopping` says stop;
/// then stops accepting, lets open connections finish their requests (at
/// most the request deadline), and returns.
pub(crate) async fn serve_listener<L>(
    mut listener: L,
    app: Router,
    stats: Arc<Stats>,
    mut stopping: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
{
    let limits = stats.limits;
    let service = ServiceBuilder::new()
        .layer(tower::layer::layer_fn({
            let stats = stats.clone();
            move |inner| Track {
                inner,
                stats: stats.clone(),
            }
        }))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            limits.request_timeout,
        ))
        .layer(ReadyInCallLayer)
        .layer(GlobalConcurrencyLimitLayer::with_semaphore(stats.in_flight.clone()))
        .layer(RequestBodyDeadlineLayer::new(limits.body_read_timeout))
        .service(app);
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    loop {
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stopping.wait_for(|stop| *stop) => break,
        };
        let (io, _) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopping.wait_for(|stop| *stop) => break,
        };
        stats.connections_accepted.fetch_add(1, Ordering::Relaxed);
        stats.connections_open.fetch_add(1, Ordering::Relaxed);
        let connection = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service.clone()));
        let connection = graceful.watch(connection);
        let stats = stats.clone();
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection closed");
            }
            stats.connections_open.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.request_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the request deadline; closing them");
    }
    Ok(())
}

/// A listener's stats, made for `limits`.
pub(crate) fn stats_for(limits: Limits) -> Arc<Stats> {
    Arc::new(Stats::new(limits))
}

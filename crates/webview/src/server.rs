//! Serving the page: the latest rendering held in a `watch` channel
//! ([`Live`] writes it, [`router`] reads it), and the routes:
//!
//! ```text
//! GET /                          the fleet page
//! GET /node/{name}               one node's page
//! GET /fragment/fleet?since=V    the fleet's <main> once its version is not V
//! GET /fragment/node/{name}?since=V
//! GET /picture/{name}            a node's picture alone (SVG)
//! GET /healthz                   ok, the version, nodes and waiting pods
//! ```
//!
//! A fragment request whose `since` is the current version waits (up to
//! the long-poll time) for the next one, then answers 200 with the
//! fragment and its `X-Topoalign-Version`, or 204: the page's script asks
//! again at once, so a change shows within one reading. The listener's
//! limits (connections, in-flight requests, deadlines) are
//! `topoalign-serve`'s, which serves this router; keep the long-poll time
//! below its request deadline.
//!
//! Owns: the routes and when a rendering is new. Must not touch: what is
//! shown (`model`) or how (`html`), reading the cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;
use topoalign_cluster::ClusterSnapshot;

use crate::html::{self, View};
use crate::model::Page;

/// Header carrying a fragment's version.
pub const VERSION_HEADER: &str = "X-Topoalign-Version";

/// One rendering of the page.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    /// Moves when anything shown changes (not when a reading finds the
    /// same state).
    pub version: u64,
    /// The fleet's fragment.
    pub fleet: String,
    /// Each node's fragment, by name.
    pub nodes: BTreeMap<String, String>,
    /// Each exact node's picture (SVG), by name.
    pub pictures: BTreeMap<String, String>,
    pub node_count: usize,
    pub waiting: usize,
    /// What the page model was built from, to tell a new state from the
    /// same one read again: the fragments without the reading's time.
    fingerprint: String,
}

/// The writing side: each reading of the cluster (or of the input file)
/// is shown with [`Live::show`], a failed reading with [`Live::fail`].
pub struct Live {
    sender: watch::Sender<Arc<Rendered>>,
    last: Option<Page>,
}

impl Live {
    /// An empty page (version 0, "no reading yet") and its reader.
    pub fn new() -> (Live, watch::Receiver<Arc<Rendered>>) {
        let empty = Page {
            taken_at: "(no reading yet)".to_owned(),
            nodes: Vec::new(),
            waiting: Vec::new(),
        };
        let rendered = render(&empty, None, 0);
        let (sender, receiver) = watch::channel(Arc::new(rendered));
        (Live { sender, last: None }, receiver)
    }

    /// Shows the page of `snapshot` (built here: the engine's trial
    /// admissions and explanations; run it off the async threads). A
    /// reading that shows nothing new leaves the version as it is.
    pub fn show(&mut self, snapshot: &ClusterSnapshot) {
        let page = Page::build(snapshot);
        self.publish(&page, None);
        self.last = Some(page);
    }

    /// Shows the cluster `objects` describe, read now ([`Live::show`]).
    pub fn show_objects(&mut self, objects: topoalign_cluster::Objects) {
        self.show(&topoalign_cluster::build(objects, jiff::Timestamp::now()));
    }

    /// Keeps the last page and says, above it, why the latest reading
    /// failed.
    pub fn fail(&mut self, notice: &str) {
        let page = self.last.clone().unwrap_or_else(|| Page {
            taken_at: "(no reading yet)".to_owned(),
            nodes: Vec::new(),
            waiting: Vec::new(),
        });
        self.publish(&page, Some(notice));
    }

    fn publish(&self, page: &Page, notice: Option<&str>) {
        let current = self.sender.borrow().version;
        let rendered = render(page, notice, current + 1);
        if rendered.fingerprint != self.sender.borrow().fingerprint {
            self.sender.send_replace(Arc::new(rendered));
        }
    }
}

fn render(page: &Page, notice: Option<&str>, version: u64) -> Rendered {
    let nodes: BTreeMap<String, String> = page
        .nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), html::node_fragment(page, &n.name, notice)?)))
        .collect();
    let fleet = html::fleet_fragment(page, notice);
    let untimed = Page {
        taken_at: String::new(),
        ..page.clone()
    };
    let fingerprint = html::fleet_fragment(&untimed, notice);
    Rendered {
        version,
        fleet,
        nodes,
        pictures: page
            .nodes
            .iter()
            .filter_map(|n| Some((n.name.clone(), n.exact.as_ref()?.picture.clone())))
            .collect(),
        node_count: page.nodes.len(),
        waiting: page.waiting.len(),
        fingerprint,
    }
}

type Shared = watch::Receiver<Arc<Rendered>>;

#[derive(Clone)]
struct AppState {
    rendered: Shared,
    long_poll: Duration,
}

/// The routes over `rendered`; a fragment request waits at most
/// `long_poll` for a new version.
pub fn router(rendered: Shared, long_poll: Duration) -> Router {
    Router::new()
        .route("/", get(fleet_page))
        .route("/node/{name}", get(node_page))
        .route("/fragment/fleet", get(fleet_fragment))
        .route("/fragment/node/{name}", get(node_fragment))
        .route("/picture/{name}", get(picture))
        .route("/healthz", get(healthz))
        .with_state(AppState { rendered, long_poll })
}

fn html_response(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn fleet_page(State(state): State<AppState>) -> Response {
    let rendered = state.rendered.borrow().clone();
    html_response(html::page(
        &View::Fleet,
        "topoalign: fleet",
        &rendered.fleet,
        rendered.version,
    ))
}

async fn node_page(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let rendered = state.rendered.borrow().clone();
    match rendered.nodes.get(&name) {
        Some(fragment) => html_response(html::page(
            &View::Node(name.clone()),
            &format!("topoalign: {name}"),
            fragment,
            rendered.version,
        )),
        None => not_found(&name),
    }
}

fn not_found(name: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("no node {name}\n")).into_response()
}

#[derive(serde::Deserialize)]
struct Since {
    since: Option<u64>,
}

/// The fragment `pick` chooses from the first rendering whose version is
/// not `since` (waiting for one up to the long-poll time).
async fn wait_fragment(state: AppState, since: Option<u64>, pick: impl Fn(&Rendered) -> Option<String>) -> Response {
    let mut receiver = state.rendered.clone();
    let newer = async {
        receiver
            .wait_for(|r| Some(r.version) != since)
            .await
            .map(|r| Arc::clone(&r))
    };
    let rendered = match tokio::time::timeout(state.long_poll, newer).await {
        Ok(Ok(rendered)) => rendered,
        // No new version in time, or the writer is gone: nothing new.
        Ok(Err(_)) | Err(_) => return StatusCode::NO_CONTENT.into_response(),
    };
    match pick(&rendered) {
        Some(fragment) => {
            let mut response = html_response(fragment);
            if let Ok(value) = HeaderValue::from_str(&rendered.version.to_string()) {
                response.headers_mut().insert(VERSION_HEADER, value);
            }
            response
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn fleet_fragment(State(state): State<AppState>, Query(since): Query<Since>) -> Response {
    wait_fragment(state, since.since, |r| Some(r.fleet.clone())).await
}

async fn node_fragment(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(since): Query<Since>,
) -> Response {
    wait_fragment(state, since.since, move |r| r.nodes.get(&name).cloned()).await
}

async fn picture(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let rendered = state.rendered.borrow().clone();
    match rendered.pictures.get(&name) {
        Some(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg.clone()).into_response(),
        None => not_found(&name),
    }
}

async fn healthz(State(state): State<AppState>) -> String {
    let rendered = state.rendered.borrow().clone();
    format!(
        "ok: version {}, {} nodes, {} waiting pods\n",
        rendered.version, rendered.node_count, rendered.waiting
    )
}

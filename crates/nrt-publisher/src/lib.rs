//! Publishing NodeResourceTopology objects to a Kubernetes API server.
//!
//! - [`Publisher`]: one object → one server-side apply (`PATCH
//!   /apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/<node>`,
//!   `application/apply-patch+yaml`, field manager `topoalign`, forced),
//!   which creates the object or updates it — no read-modify-write race
//!   with other writers of other fields. The client comes from the usual
//!   places ([`Publisher::connect`]: in-cluster service account, else
//!   `$KUBECONFIG` / `~/.kube/config`). Every object is checked against
//!   the shipped CRD's schema ([`topoalign_nrt::schema::shipped_schema`])
//!   before it is sent.
//! - [`FileSink`]: the same objects written to a file (replaced
//!   atomically) or standard output, for clusters that only want the data.
//! - [`Throttle`] and [`run`]: the node agent hands over a new object after
//!   every allocation change; at most one delivery to a [`Destination`]
//!   goes out per interval, the latest object wins, and an object equal to
//!   the last one sent is not sent again.
//! - [`pipeline`]: the node agent's delivery — the change listener and one
//!   task per destination.
//!
//! Tested against a local HTTP server playing the API server for this one
//! resource (`tests/fake_api_server.rs`); see docs/nrt.md for what was not
//! tried against a real cluster.

mod file;
pub mod pipeline;

use std::future::Future;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use tokio::time::Instant;
use topoalign_nrt::NodeResourceTopology;
use topoalign_nrt::object::{GROUP, KIND, PLURAL, VERSION};

pub use file::FileSink;

/// The field manager named in every apply.
pub const FIELD_MANAGER: &str = "topoalign";

/// Why an object was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("no Kubernetes client configuration: {0}")]
    Config(String),
    #[error("the object does not validate against the CRD schema: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// The API server does not let this identity write the objects (HTTP
    /// 403): retrying cannot help until someone grants the permission.
    #[error(
        "the API server forbids this identity to apply NodeResourceTopology objects: {0} (its RBAC role needs \
         `create` and `patch` on noderesourcetopologies.topology.node.k8s.io, as deploy/topoalign-rbac.yaml grants \
         the topoalign-agent service account)"
    )]
    Forbidden(String),
    /// The API server does not accept the credentials (HTTP 401).
    #[error("the API server does not accept this client's credentials: {0}")]
    Unauthorized(String),
    /// The CRD schema to check against cannot be read.
    #[error("the CRD schema cannot be read: {0}")]
    Schema(String),
    #[error("the API server refused the apply: {0}")]
    Api(kube::Error),
    #[error("cannot serialize the object: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl From<kube::Error> for PublishError {
    fn from(error: kube::Error) -> PublishError {
        match error {
            kube::Error::Api(status) if status.code == 403 => PublishError::Forbidden(status.message),
            kube::Error::Api(status) if status.code == 401 => PublishError::Unauthorized(status.message),
            other => PublishError::Api(other),
        }
    }
}

impl PublishError {
    /// Whether sending again, unchanged, cannot succeed: the API server
    /// refuses this identity ([`PublishError::Forbidden`],
    /// [`PublishError::Unauthorized`]).
    pub fn is_refusal(&self) -> bool {
        matches!(self, PublishError::Forbidden(_) | PublishError::Unauthorized(_))
    }
}

/// Applies NRT objects with a client.
#[derive(Clone)]
pub struct Publisher {
    api: Api<DynamicObject>,
    /// What objects are checked against (the error is reported at
    /// [`Publisher::apply`]).
    schema: Result<serde_json::Value, topoalign_nrt::schema::SchemaError>,
}

impl Publisher {
    /// A publisher using `client`, checking objects against the shipped
    /// CRD's schema.
    pub fn new(client: kube::Client) -> Publisher {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
        Publisher {
            api: Api::all_with(client, &resource),
            schema: topoalign_nrt::schema::shipped_schema(),
        }
    }

    /// A publisher with the default client: in-cluster configuration, else
    /// the kubeconfig.
    ///
    /// # Errors
    /// [`PublishError::Config`] when neither is available.
    pub async fn connect() -> Result<Publisher, PublishError> {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| PublishError::Config(e.to_string()))?;
        Ok(Publisher::new(client))
    }

    /// Server-side applies `object`; returns the stored object's
    /// `resourceVersion`.
    ///
    /// # Errors
    /// [`PublishError::Invalid`] for an object the schema refuses (nothing
    /// is sent), else the API server's error.
    pub async fn apply(&self, object: &NodeResourceTopology) -> Result<String, PublishError> {
        let mut value = serde_json::to_value(object)?;
        // The API server owns resourceVersion; an apply must not carry one.
        if let Some(metadata) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            metadata.remove("resourceVersion");
        }
        let schema = self.schema.as_ref().map_err(|e| PublishError::Schema(e.to_string()))?;
        let problems = topoalign_nrt::schema::validate(schema, &value);
        if !problems.is_empty() {
            return Err(PublishError::Invalid(problems));
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let stored = self
            .api
            .patch(&object.metadata.name, &params, &Patch::Apply(&value))
            .await?;
        Ok(stored.metadata.resource_version.unwrap_or_default())
    }
}

impl Publisher {
    /// Every NodeResourceTopology object the API server holds (for the
    /// extender, which reads nodes' states from them, again and again).
    /// Read from the API server's watch cache (`resourceVersion=0`: no
    /// quorum read of etcd each time) and decoded once, straight into
    /// [`NodeResourceTopology`] (what it does not hold, `managedFields`
    /// and the like, skipped unread). Only when that fails is the list
    /// read again object by object, to name the object that does not parse.
    ///
    /// # Errors
    /// [`PublishError::Api`] from the list call; an object that does not
    /// parse is [`PublishError::Serialize`].
    pub async fn list(&self) -> Result<Vec<NodeResourceTopology>, PublishError> {
        let params = kube::api::ListParams::default().match_any();
        let request = kube::core::Request::new(self.api.resource_url())
            .list(&params)
            .map_err(|e| PublishError::Api(kube::Error::BuildRequest(e)))?;
        let client = self.api.clone().into_client();
        match client
            .request::<kube::core::ObjectList<NodeResourceTopology>>(request)
            .await
        {
            Ok(list) => Ok(list.items),
            Err(kube::Error::SerdeError(_)) => self.list_one_by_one(&params).await,
            Err(error) => Err(error.into()),
        }
    }

    /// [`Publisher::list`] through untyped objects, each converted on its
    /// own, so the error names what does not parse.
    async fn list_one_by_one(&self, params: &kube::api::ListParams) -> Result<Vec<NodeResourceTopology>, PublishError> {
        let list = self.api.list(params).await?;
        list.items
            .into_iter()
            .map(|object| {
                let value = serde_json::to_value(&object)?;
                Ok(serde_json::from_value(value)?)
            })
            .collect()
    }
}

/// Where [`run`] delivers objects: an API server ([`Publisher`]), a file
/// or standard output ([`FileSink`]).
pub trait Destination {
    type Error: std::fmt::Display;
    /// Delivers one object.
    fn deliver(&self, object: &NodeResourceTopology) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Whether `error` ends the deliveries: trying again would only repeat
    /// it (an RBAC refusal), so [`run`] stops instead of retrying forever
    /// — when nothing was delivered yet (see [`run`]).
    fn is_final(_error: &Self::Error) -> bool {
        false
    }
}

impl Destination for Publisher {
    type Error = PublishError;
    async fn deliver(&self, object: &NodeResourceTopology) -> Result<(), PublishError> {
        self.apply(object).await.map(|_| ())
    }
    fn is_final(error: &PublishError) -> bool {
        error.is_refusal()
    }
}

/// What to do next with the objects handed to a [`Throttle`].
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Send this object now.
    Send(Box<NodeResourceTopology>),
    /// Something is pending; it may go out at this instant.
    WaitUntil(Instant),
    /// Nothing to send.
    Idle,
}

/// Rate limiting and coalescing: at most one send per `min_interval`, the
/// latest object wins, an object equal to the last one sent is dropped.
#[derive(Debug)]
pub struct Throttle {
    min_interval: Duration,
    last_sent: Option<(Instant, NodeResourceTopology)>,
    last_attempt: Option<Instant>,
    pending: Option<NodeResourceTopology>,
}

impl Throttle {
    pub fn new(min_interval: Duration) -> Throttle {
        Throttle {
            min_interval,
            last_sent: None,
            last_attempt: None,
            pending: None,
        }
    }

    /// A newer object (replaces any pending one).
    pub fn offer(&mut self, object: NodeResourceTopology) {
        self.pending = Some(object);
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: Instant) -> Next {
        let Some(pending) = &self.pending else {
            return Next::Idle;
        };
        if self.last_sent.as_ref().is_some_and(|(_, sent)| sent == pending) {
            self.pending = None;
            return Next::Idle;
        }
        if let Some(at) = self.last_attempt
            && now < at + self.min_interval
        {
            return Next::WaitUntil(at + self.min_interval);
        }
        self.last_attempt = Some(now);
        match self.pending.take() {
            Some(object) => Next::Send(Box::new(object)),
            None => Next::Idle,
        }
    }

    /// `object` went out at `now`.
    pub fn sent(&mut self, object: NodeResourceTopology, now: Instant) {
        self.last_sent = Some((now, object));
    }

    /// Sending `object` failed: it is retried after the interval unless a
    /// newer one arrived meanwhile.
    pub fn failed(&mut self, object: NodeResourceTopology) {
        if self.pending.is_none() {
            self.pending = Some(object);
        }
    }
}

/// Delivers every object that arrives on `updates` (the node agent sends
/// one after each allocation change) to `destination`, through a
/// [`Throttle`], until the sender is dropped; then sends what is still
/// pending and returns. Failures are reported to `on_error` and retried
/// after the interval, except a final one: `run` returns once it is
/// reported (`on_error`'s second argument says so).
///
/// An error [`Destination::is_final`] says cannot pass is final only
/// before the first delivery: then it is this identity's configuration.
/// Once a delivery has gone through, the same refusal is a passing moment
/// — a restarted API server answers 403 until its RBAC caches are filled
/// (the end-to-end suite's API-server kill meets exactly that) — and is
/// retried like any other failure.
pub async fn run<D: Destination>(
    destination: D,
    mut updates: tokio::sync::mpsc::Receiver<NodeResourceTopology>,
    min_interval: Duration,
    mut on_error: impl FnMut(&D::Error, bool),
) {
    let mut throttle = Throttle::new(min_interval);
    let mut open = true;
    let mut delivered = false;
    loop {
        match throttle.next(Instant::now()) {
            Next::Send(object) => match destination.deliver(&object).await {
                Ok(()) => {
                    delivered = true;
                    throttle.sent(*object, Instant::now());
                }
                Err(error) => {
                    let last = !delivered && D::is_final(&error);
                    on_error(&error, last);
                    if last {
                        return;
                    }
                    throttle.failed(*object);
                    if !open {
                        return;
                    }
                }
            },
            Next::WaitUntil(at) if open => {
                tokio::select! {
                    update = updates.recv() => match update {
                        Some(object) => throttle.offer(object),
                        None => open = false,
                    },
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            Next::WaitUntil(at) => tokio::time::sleep_until(at).await,
            Next::Idle if open => match updates.recv().await {
                Some(object) => throttle.offer(object),
                None => open = false,
            },
            Next::Idle => return,
        }
    }
}

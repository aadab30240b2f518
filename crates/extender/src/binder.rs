//! Binding pods for kube-scheduler. With `bindVerb` in its configuration
//! the scheduler hands binding over to the extender entirely: the pod is
//! bound only if the extender creates its `Binding` (`POST
//! /api/v1/namespaces/<ns>/pods/<name>/binding`), as the scheduler's own
//! DefaultBinder would. [`Binder`] is that step; [`ApiServerBinder`] does
//! it through the API server.

use std::future::Future;
use std::pin::Pin;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

use crate::api::ExtenderBindingArgs;

/// A boxed future, so that [`Binder`] can be a trait object.
pub type BindFuture<'a> = Pin<Box<dyn Future<Output = Result<(), BindError>> + Send + 'a>>;

/// Creates the Binding the scheduler asked for.
pub trait Binder: Send + Sync {
    /// Binds the pod of `args` to `args.node`; the error's text is the
    /// message returned to the scheduler (which then retries the pod).
    fn bind<'a>(&'a self, args: &'a ExtenderBindingArgs) -> BindFuture<'a>;
}

/// Why a pod was not bound: which pod, to which node, and the refusal
/// (the API server's, for [`ApiServerBinder`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot bind pod {pod} to node {node}: {source}")]
pub struct BindError {
    /// `namespace/name`.
    pub pod: String,
    pub node: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl BindError {
    /// The Binding of `args` refused for `source`.
    pub fn new(args: &ExtenderBindingArgs, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> BindError {
        BindError {
            pod: format!("{}/{}", args.pod_namespace, args.pod_name),
            node: args.node.clone(),
            source: source.into(),
        }
    }
}

/// No Kubernetes client configuration: neither in-cluster nor a
/// kubeconfig ([`ApiServerBinder::connect`], [`crate::dra::connect`]).
#[derive(Debug, thiserror::Error)]
#[error("no Kubernetes client configuration: {0}")]
pub struct ConnectError(#[source] pub kube::Error);

/// A client with the default configuration: in-cluster, else the
/// kubeconfig.
///
/// # Errors
/// [`ConnectError`] when neither is available.
pub async fn default_client() -> Result<kube::Client, ConnectError> {
    kube::Client::try_default().await.map_err(ConnectError)
}

/// Creates Bindings through the API server.
pub struct ApiServerBinder {
    client: kube::Client,
}

impl ApiServerBinder {
    pub fn new(client: kube::Client) -> ApiServerBinder {
        ApiServerBinder { client }
    }

    /// A binder with the default client: in-cluster configuration, else
    /// the kubeconfig.
    ///
    /// # Errors
    /// [`ConnectError`] when neither is available.
    pub async fn connect() -> Result<ApiServerBinder, ConnectError> {
        default_client().await.map(ApiServerBinder::new)
    }
}

impl Binder for ApiServerBinder {
    fn bind<'a>(&'a self, args: &'a ExtenderBindingArgs) -> BindFuture<'a> {
        Box::pin(async move {
            let pods = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods");
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &args.pod_namespace, &pods);
            // The pod's uid makes the API server refuse the Binding if the
            // pod was deleted and recreated under the same name meanwhile.
            let binding = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": args.pod_name, "namespace": args.pod_namespace, "uid": args.pod_uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": args.node},
            });
            api.create_subresource::<_, serde_json::Value>("binding", &args.pod_name, &PostParams::default(), &binding)
                .await
                .map(|_| ())
                .map_err(|e| BindError::new(args, e))
        })
    }
}

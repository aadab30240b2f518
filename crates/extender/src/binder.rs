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
pub type BindFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Creates the Binding the scheduler asked for.
pub trait Binder: Send + Sync {
    /// Binds the pod of `args` to `args.node`; the error is the message
    /// returned to the scheduler (which then retries the pod).
    fn bind<'a>(&'a self, args: &'a ExtenderBindingArgs) -> BindFuture<'a>;
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
    /// A message when neither is available.
    pub async fn connect() -> Result<ApiServerBinder, String> {
        kube::Client::try_default()
            .await
            .map(ApiServerBinder::new)
            .map_err(|e| format!("no Kubernetes client configuration: {e}"))
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
                .map_err(|e| {
                    format!(
                        "cannot bind pod {}/{} to node {}: {e}",
                        args.pod_namespace, args.pod_name, args.node
                    )
                })
        })
    }
}

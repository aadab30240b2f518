//! Reading a live cluster: the client from the places kubectl looks
//! ([`Connection`]: `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`,
//! else the in-cluster service account; `--context`; `-n`), and one
//! reading of the Nodes, NodeResourceTopology objects, pods and DRA
//! objects (`resource.k8s.io/v1` DeviceClasses, ResourceSlices,
//! ResourceClaims, ResourceClaimTemplates) ([`read`]) into a
//! [`ClusterSnapshot`].
//!
//! Owns: the API calls. Must not touch: what the objects mean
//! ([`crate::snapshot`]).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use topoalign_nrt::NodeResourceTopology;
use topoalign_nrt::object::{GROUP, KIND, PLURAL, VERSION};
use topoalign_scenario::dra::DraSpec;

use crate::snapshot::{ClusterSnapshot, Objects, TopologyObject, UnreadableObject, build};

/// Where the client's configuration comes from, as kubectl's flags say.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// `--kubeconfig`: this file instead of `$KUBECONFIG` / `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`: this context of the kubeconfig instead of its current one.
    pub context: Option<String>,
    /// `-n/--namespace`: instead of the context's namespace (or the
    /// service account's, in a cluster).
    pub namespace: Option<String>,
}

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("no Kubernetes client configuration (no kubeconfig, not in a cluster): {0}")]
    Config(String),
    #[error("cannot build the client: {0}")]
    Client(String),
    /// A list or get call failed; `what` names the objects.
    #[error("cannot read {what} from the API server: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("pod {namespace}/{name} not found")]
    PodNotFound { namespace: String, name: String },
}

impl ReadError {
    /// The error in a line for a page: the API server's refusal as its
    /// HTTP code and Status message (the whole error, with kube's dump of
    /// the Status, is [`std::fmt::Display`]'s, for the log).
    pub fn brief(&self) -> String {
        match self {
            ReadError::Api {
                what,
                source: kube::Error::Api(status),
            } => {
                let message = if status.message.is_empty() {
                    &status.reason
                } else {
                    &status.message
                };
                format!(
                    "cannot read {what} from the API server: HTTP {}: {message}",
                    status.code
                )
            }
            other => other.to_string(),
        }
    }
}

/// A client and the namespace names default to.
#[derive(Clone)]
pub struct Client {
    pub client: kube::Client,
    /// `-n`, else the context's (or service account's) namespace, else
    /// `default`.
    pub namespace: String,
}

impl Connection {
    /// The client this connection describes.
    ///
    /// # Errors
    /// [`ReadError::Kubeconfig`], [`ReadError::Config`] or
    /// [`ReadError::Client`].
    pub async fn connect(&self) -> Result<Client, ReadError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let named = |message: String| ReadError::Kubeconfig {
                    path: path.display().to_string(),
                    message,
                };
                let file = Kubeconfig::read_from(path).map_err(|e| named(e.to_string()))?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| named(e.to_string()))?
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|e| ReadError::Config(e.to_string()))?,
            None => kube::Config::infer()
                .await
                .map_err(|e| ReadError::Config(e.to_string()))?,
        };
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).map_err(|e| ReadError::Client(e.to_string()))?;
        Ok(Client { client, namespace })
    }
}

/// Every Node, NodeResourceTopology object and pod (all namespaces), read
/// now.
///
/// # Errors
/// [`ReadError::Api`] naming the list that failed. A missing NRT CRD is
/// not an error: every node is then [`crate::NodeSource::Missing`].
pub async fn read(client: &kube::Client) -> Result<ClusterSnapshot, ReadError> {
    let objects = read_objects(client).await?;
    Ok(build(objects, jiff::Timestamp::now()))
}

/// The objects [`read`] builds its snapshot from.
///
/// # Errors
/// As [`read`].
pub async fn read_objects(client: &kube::Client) -> Result<Objects, ReadError> {
    let params = ListParams::default();
    let api_error = |what: &str| {
        let what = what.to_owned();
        move |source| ReadError::Api { what, source }
    };
    let nodes = Api::<K8sNode>::all(client.clone())
        .list(&params)
        .await
        .map_err(api_error("Nodes"))?
        .items;
    let pods = Api::<K8sPod>::all(client.clone())
        .list(&params)
        .await
        .map_err(api_error("Pods"))?
        .items;
    let gvk = GroupVersionKind::gvk(GROUP, VERSION, KIND);
    let resource = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
    let topologies = match Api::<DynamicObject>::all_with(client.clone(), &resource)
        .list(&params)
        .await
    {
        Ok(list) => list.items.into_iter().map(topology_object).collect(),
        // No CRD: no objects.
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(source) => {
            return Err(ReadError::Api {
                what: "NodeResourceTopology objects".to_owned(),
                source,
            });
        }
    };
    Ok(Objects {
        nodes,
        topologies,
        pods,
        dra: read_dra(client).await?,
    })
}

/// The cluster's DRA objects; none where the API server does not serve
/// `resource.k8s.io/v1` (404).
///
/// # Errors
/// [`ReadError::Api`] naming the list that failed.
async fn read_dra(client: &kube::Client) -> Result<DraSpec, ReadError> {
    async fn list<K>(client: &kube::Client, what: &str) -> Result<Vec<K>, ReadError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match Api::<K>::all(client.clone()).list(&ListParams::default()).await {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(source) => Err(ReadError::Api {
                what: what.to_owned(),
                source,
            }),
        }
    }
    Ok(DraSpec {
        node: None,
        device_classes: list::<DeviceClass>(client, "DeviceClasses").await?,
        resource_slices: list::<ResourceSlice>(client, "ResourceSlices").await?,
        resource_claims: list::<ResourceClaim>(client, "ResourceClaims").await?,
        resource_claim_templates: list::<ResourceClaimTemplate>(client, "ResourceClaimTemplates").await?,
    })
}

/// The pod `namespace/name`, read now (the snapshot's pods are read by a
/// list; this is for a pod named on the command line, so that a missing
/// one is said plainly).
///
/// # Errors
/// [`ReadError::PodNotFound`] or [`ReadError::Api`].
pub async fn read_pod(client: &kube::Client, namespace: &str, name: &str) -> Result<K8sPod, ReadError> {
    match Api::<K8sPod>::namespaced(client.clone(), namespace).get_opt(name).await {
        Ok(Some(pod)) => Ok(pod),
        Ok(None) => Err(ReadError::PodNotFound {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
        Err(source) => Err(ReadError::Api {
            what: format!("pod {namespace}/{name}"),
            source,
        }),
    }
}

/// An NRT object as listed: its last change (the latest `managedFields`
/// time, else its creation) and the object in `topoalign-nrt`'s shape.
fn topology_object(object: DynamicObject) -> TopologyObject {
    let name = object.metadata.name.clone().unwrap_or_default();
    let updated = object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
        .or_else(|| object.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let object = serde_json::to_value(&object)
        .and_then(serde_json::from_value::<NodeResourceTopology>)
        .map_err(|e| UnreadableObject::new(&name, e));
    TopologyObject { name, object, updated }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page shows the refusal's code and message, the log the whole
    /// error (kube's dump of the Status).
    #[test]
    fn a_refusal_in_brief() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": 403,
            "reason": "Forbidden",
            "message": "nodes is forbidden: User \"system:serviceaccount:kube-system:x\" cannot list resource \"nodes\"",
            "details": {"kind": "nodes"},
        }))
        .expect("status");
        let error = ReadError::Api {
            what: "Nodes".to_owned(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            error.brief(),
            "cannot read Nodes from the API server: HTTP 403: nodes is forbidden: User \
             \"system:serviceaccount:kube-system:x\" cannot list resource \"nodes\""
        );
        let full = error.to_string();
        assert!(full.contains("Forbidden") && full.contains("details"), "{full}");
        let other = ReadError::PodNotFound {
            namespace: "ns".to_owned(),
            name: "p".to_owned(),
        };
        assert_eq!(other.brief(), other.to_string());
    }
}

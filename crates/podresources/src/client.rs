//! [`Client`]: the calls a kubelet's PodResources API answers, over its
//! Unix socket.

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::convert;
use crate::v1;
use crate::v1::pod_resources_lister_client::PodResourcesListerClient;
use crate::{Allocatable, PodAllocation, PodResourcesError};

/// A connection to one kubelet's PodResources API.
#[derive(Clone, Debug)]
pub struct Client {
    socket: String,
    inner: PodResourcesListerClient<Channel>,
}

impl Client {
    /// Connects to the API on the Unix socket at `path`.
    ///
    /// # Errors
    /// [`PodResourcesError::Connect`] when nothing answers there.
    pub async fn connect(path: &Path) -> Result<Client, PodResourcesError> {
        let socket = path.display().to_string();
        let target: PathBuf = path.to_path_buf();
        // The URI is required by the endpoint but unused: every connection
        // goes to the socket.
        let channel = Endpoint::from_static("http://kubelet.invalid")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let target = target.clone();
                async move { UnixStream::connect(target).await.map(TokioIo::new) }
            }))
            .await
            .map_err(|e| PodResourcesError::Connect {
                socket: socket.clone(),
                message: source_chain(&e),
            })?;
        Ok(Client {
            socket,
            inner: PodResourcesListerClient::new(channel),
        })
    }

    /// `List`: every pod the kubelet has admitted, with its containers'
    /// exclusive CPUs, pinned memory and devices.
    ///
    /// # Errors
    /// [`PodResourcesError::Call`] for an error status,
    /// [`PodResourcesError::Invalid`] for an answer no node could give.
    pub async fn list(&mut self) -> Result<Vec<PodAllocation>, PodResourcesError> {
        const METHOD: &str = "List";
        let answer = self
            .inner
            .list(v1::ListPodResourcesRequest {})
            .await
            .map_err(|status| self.call_error(METHOD, status))?
            .into_inner();
        let root = convert::At::Root("");
        answer
            .pod_resources
            .iter()
            .enumerate()
            .map(|(i, pod)| convert::pod(pod, &root.item("pod_resources", i)))
            .collect::<Result<_, _>>()
            .map_err(|e| self.invalid(METHOD, e))
    }

    /// `GetAllocatableResources`: what the node can hand out.
    ///
    /// # Errors
    /// As [`Client::list`].
    pub async fn allocatable(&mut self) -> Result<Allocatable, PodResourcesError> {
        const METHOD: &str = "GetAllocatableResources";
        let answer = self
            .inner
            .get_allocatable_resources(v1::AllocatableResourcesRequest {})
            .await
            .map_err(|status| self.call_error(METHOD, status))?
            .into_inner();
        convert::allocatable(&answer).map_err(|e| self.invalid(METHOD, e))
    }

    /// `Get`: one pod. `Ok(None)` when the kubelet does not serve `Get`
    /// (before 1.27, or with the `KubeletPodResourcesGet` gate off) or does
    /// not know the pod.
    ///
    /// # Errors
    /// As [`Client::list`], for any other error status.
    pub async fn get(&mut self, namespace: &str, name: &str) -> Result<Option<PodAllocation>, PodResourcesError> {
        const METHOD: &str = "Get";
        let request = v1::GetPodResourcesRequest {
            pod_name: name.to_string(),
            pod_namespace: namespace.to_string(),
        };
        let answer = match self.inner.get(request).await {
            Ok(answer) => answer.into_inner(),
            Err(status) if matches!(status.code(), tonic::Code::Unimplemented | tonic::Code::NotFound) => {
                return Ok(None);
            }
            Err(status) => return Err(self.call_error(METHOD, status)),
        };
        answer
            .pod_resources
            .map(|pod| convert::pod(&pod, &convert::At::Root("pod_resources")))
            .transpose()
            .map_err(|e| self.invalid(METHOD, e))
    }

    fn call_error(&self, method: &'static str, status: tonic::Status) -> PodResourcesError {
        PodResourcesError::Call {
            socket: self.socket.clone(),
            method,
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    fn invalid(&self, method: &'static str, e: convert::Invalid) -> PodResourcesError {
        PodResourcesError::Invalid {
            socket: self.socket.clone(),
            method,
            field: e.field,
            message: e.message,
        }
    }
}

/// An error and its causes in one line (tonic's transport error says
/// little without them).
fn source_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

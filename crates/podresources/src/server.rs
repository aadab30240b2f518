//! [`serve`]: the PodResources API for a node no kubelet runs on, answering
//! from a [`Snapshot`] the caller provides at each call.

use std::sync::Arc;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::Snapshot;
use crate::convert;
use crate::v1;
use crate::v1::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};

/// Where the server reads the node's allocations from, at every call.
pub trait SnapshotSource: Send + Sync + 'static {
    fn snapshot(&self) -> Snapshot;
}

impl<F: Fn() -> Snapshot + Send + Sync + 'static> SnapshotSource for F {
    fn snapshot(&self) -> Snapshot {
        self()
    }
}

struct Lister<S> {
    source: Arc<S>,
}

#[tonic::async_trait]
impl<S: SnapshotSource> PodResourcesLister for Lister<S> {
    async fn list(
        &self,
        _: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        let snapshot = self.source.snapshot();
        Ok(Response::new(v1::ListPodResourcesResponse {
            pod_resources: snapshot.pods.iter().map(convert::wire_pod).collect(),
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        Ok(Response::new(convert::wire_allocatable(
            &self.source.snapshot().allocatable,
        )))
    }

    async fn get(
        &self,
        request: Request<v1::GetPodResourcesRequest>,
    ) -> Result<Response<v1::GetPodResourcesResponse>, Status> {
        let request = request.into_inner();
        let snapshot = self.source.snapshot();
        let pod = snapshot
            .pods
            .iter()
            .find(|p| p.namespace == request.pod_namespace && p.name == request.pod_name)
            // The kubelet's words for a pod it does not know.
            .ok_or_else(|| {
                Status::not_found(format!(
                    "pod {} in namespace {} not found",
                    request.pod_name, request.pod_namespace
                ))
            })?;
        Ok(Response::new(v1::GetPodResourcesResponse {
            pod_resources: Some(convert::wire_pod(pod)),
        }))
    }
}

/// Serves the API on `listener` until `shutdown` completes.
///
/// # Errors
/// The transport's error when serving fails.
pub async fn serve<S: SnapshotSource>(
    listener: UnixListener,
    source: S,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let lister = Lister {
        source: Arc::new(source),
    };
    tonic::transport::Server::builder()
        .add_service(PodResourcesListerServer::new(lister))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
}

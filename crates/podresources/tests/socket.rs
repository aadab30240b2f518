//! The client and the server speak the kubelet's protocol to each other over
//! a real Unix socket; answers no node could give, and a socket nobody
//! serves, are errors that say where.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::Path;

use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio_stream::wrappers::UnixListenerStream;
use topoalign_model::CpuSet;
use topoalign_podresources::v1;
use topoalign_podresources::v1::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};
use topoalign_podresources::{
    Allocatable, Client, ContainerAllocation, DeviceGroup, DynamicDevice, MemoryBlock, PodAllocation,
    PodResourcesError, Snapshot, serve,
};

fn snapshot() -> Snapshot {
    let gpu = |id: &str, numa: &[usize]| DeviceGroup {
        ids: vec![id.to_string()],
        numa: numa.to_vec(),
    };
    let app = ContainerAllocation {
        name: "app".into(),
        cpus: CpuSet::parse("2-3,34-35").unwrap(),
        memory: vec![
            MemoryBlock {
                resource: "memory".into(),
                size: 8 << 30,
                numa: vec![1],
            },
            MemoryBlock {
                resource: "hugepages-1Gi".into(),
                size: 2 << 30,
                numa: vec![0, 1],
            },
        ],
        devices: BTreeMap::from([
            ("nvidia.com/gpu".to_string(), vec![gpu("gpu1", &[1])]),
            ("example.com/nic".to_string(), vec![gpu("nic9", &[])]),
        ]),
        // Two devices of one claim and one of another (claim by claim, as
        // the kubelet sends them).
        dynamic: vec![
            DynamicDevice {
                claim_namespace: "ml".into(),
                claim_name: "train-gpus".into(),
                driver: "gpu.example.com".into(),
                pool: "node-a".into(),
                device: "gpu-2".into(),
            },
            DynamicDevice {
                claim_namespace: "ml".into(),
                claim_name: "train-gpus".into(),
                driver: "gpu.example.com".into(),
                pool: "node-a".into(),
                device: "gpu-3".into(),
            },
            DynamicDevice {
                claim_namespace: "ml".into(),
                claim_name: "train-nic".into(),
                driver: "nic.example.com".into(),
                pool: "node-a".into(),
                device: "nic-0".into(),
            },
        ],
    };
    let sidecar = ContainerAllocation {
        name: "log".into(),
        ..ContainerAllocation::default()
    };
    Snapshot {
        pods: vec![
            PodAllocation {
                namespace: "ml".into(),
                name: "train".into(),
                containers: vec![app, sidecar],
            },
            PodAllocation {
                namespace: "default".into(),
                name: "web".into(),
                containers: vec![ContainerAllocation {
                    name: "nginx".into(),
                    ..ContainerAllocation::default()
                }],
            },
        ],
        allocatable: Allocatable {
            cpus: CpuSet::parse("1-31,33-63").unwrap(),
            memory: vec![MemoryBlock {
                resource: "memory".into(),
                size: 60 << 30,
                numa: vec![0],
            }],
            devices: BTreeMap::from([("nvidia.com/gpu".to_string(), vec![gpu("gpu0", &[0]), gpu("gpu1", &[1])])]),
        },
    }
}

/// Starts `service` on a fresh socket; the returned sender stops it.
fn start<S: PodResourcesLister>(dir: &Path, service: S) -> oneshot::Sender<()> {
    let listener = UnixListener::bind(dir.join("kubelet.sock")).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(PodResourcesListerServer::new(service))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                stopped.await.ok();
            })
            .await
            .unwrap();
    });
    stop
}

#[tokio::test]
async fn list_allocatable_and_get_come_back_as_served() {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(dir.path().join("kubelet.sock")).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, snapshot, async {
        stopped.await.ok();
    }));

    let mut client = Client::connect(&dir.path().join("kubelet.sock")).await.unwrap();
    assert_eq!(client.list().await.unwrap(), snapshot().pods);
    assert_eq!(client.allocatable().await.unwrap(), snapshot().allocatable);
    assert_eq!(
        client.get("ml", "train").await.unwrap().as_ref(),
        Some(&snapshot().pods[0])
    );
    assert_eq!(client.get("ml", "nobody").await.unwrap(), None);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// A peer that answers with ids no machine has.
struct Hostile;

#[tonic::async_trait]
impl PodResourcesLister for Hostile {
    async fn list(
        &self,
        _: tonic::Request<v1::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::ListPodResourcesResponse>, tonic::Status> {
        let container = v1::ContainerResources {
            name: "app".into(),
            cpu_ids: vec![1, 4_294_967_295],
            ..Default::default()
        };
        Ok(tonic::Response::new(v1::ListPodResourcesResponse {
            pod_resources: vec![v1::PodResources {
                name: "p".into(),
                namespace: "default".into(),
                containers: vec![container],
                ..Default::default()
            }],
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: tonic::Request<v1::AllocatableResourcesRequest>,
    ) -> Result<tonic::Response<v1::AllocatableResourcesResponse>, tonic::Status> {
        let memory = v1::ContainerMemory {
            memory_type: "memory".into(),
            size: 1,
            topology: Some(v1::TopologyInfo {
                nodes: vec![v1::NumaNode { id: -3 }],
            }),
        };
        Ok(tonic::Response::new(v1::AllocatableResourcesResponse {
            memory: vec![memory],
            ..Default::default()
        }))
    }

    async fn get(
        &self,
        _: tonic::Request<v1::GetPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::GetPodResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("Get is not served"))
    }
}

#[tokio::test]
async fn ids_no_machine_has_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let stop = start(dir.path(), Hostile);
    let mut client = Client::connect(&dir.path().join("kubelet.sock")).await.unwrap();

    let error = client.list().await.unwrap_err();
    assert!(matches!(error, PodResourcesError::Invalid { .. }), "{error}");
    assert!(
        error
            .to_string()
            .ends_with("List: pod_resources[0].containers[0].cpu_ids[1]: 4294967295 is not a CPU id (0..=8191)"),
        "{error}"
    );
    let error = client.allocatable().await.unwrap_err();
    assert!(
        error.to_string().ends_with(
            "GetAllocatableResources: allocatable.memory[0].topology.nodes[0].ID: -3 is not a NUMA node id (0..=1023)"
        ),
        "{error}"
    );
    // A kubelet without `Get` is not an error: the caller falls back to List.
    assert_eq!(client.get("default", "p").await.unwrap(), None);
    stop.send(()).unwrap();
}

#[tokio::test]
async fn a_socket_nobody_serves_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.sock");
    let error = Client::connect(&path).await.unwrap_err();
    assert!(matches!(error, PodResourcesError::Connect { .. }));
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}: cannot connect", path.display())),
        "{error}"
    );
}

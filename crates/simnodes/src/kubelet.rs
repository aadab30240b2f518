//! One simulated node's kubelet as plain state: [`SimNode`] holds the
//! engine node of a fleet entry, admits the pods bound to it in the order
//! it is handed them, releases them, and says what the kubelet would write:
//! the Node object and its status ([`SimNode::node_status`]), a pod's status
//! after admission ([`status_patch`]) and the node's NodeResourceTopology
//! object ([`SimNode::nrt`]).
//!
//! Owns: the translation of an engine [`Decision`] into the pod status the
//! kubelet writes. Must not touch: the API server (see [`crate::run`]), or
//! any decision (every answer is `engine::Node::admit`'s).

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use serde_json::{Value, json};
use topoalign_engine::{ContainerPlacement, Decision, Node};
use topoalign_model::Machine;
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec, RestoreError};

/// The pod annotation with the admitted containers' exclusive CPUs, the
/// NUMA nodes of their pinned memory and their device ids (a JSON list in
/// the form of `topoalign replay`'s result entries).
pub const CONTAINERS_ANNOTATION: &str = "topoalign.io/containers";

/// The label naming the fleet entry a node comes from.
pub const GROUP_LABEL: &str = "topoalign.io/node-group";

/// What the kubelet did with one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Admitted: its containers "run" with these resources.
    Admitted(Vec<ContainerPlacement>),
    /// Refused with the kubelet's reason (`TopologyAffinityError`,
    /// `OutOfcpu`, …) and message.
    Rejected { reason: String, message: String },
}

impl From<&Decision> for Admission {
    fn from(decision: &Decision) -> Admission {
        match &decision.rejection {
            None => Admission::Admitted(decision.containers.clone()),
            Some(rejection) => Admission::Rejected {
                reason: rejection.reason.clone(),
                message: rejection.message.clone(),
            },
        }
    }
}

/// A pod the simulated kubelet cannot read (the API server accepted it,
/// but topoalign refuses it: an amount past 64 bits, …).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("pod {pod}: {message}")]
pub struct UnreadablePod {
    pub pod: String,
    pub message: String,
}

/// One node of the fleet and its kubelet's state.
#[derive(Clone, Debug)]
pub struct SimNode {
    name: String,
    group: String,
    spec: NodeSpec,
    node: Node,
    /// Pods this kubelet has decided on (admitted or rejected), by uid: a
    /// pod is admitted once, whatever later updates of it say.
    decided: HashSet<String>,
    /// Devices published through DRA instead of the device plugin
    /// ([`crate::dra`]).
    dra: crate::dra::DraDevices,
}

impl SimNode {
    /// The node `name` of fleet entry `group`, empty, as its kubelet
    /// starts.
    ///
    /// # Errors
    /// [`RestoreError`] when the kubelet would not start.
    pub fn start(name: &str, group: &str, spec: &NodeSpec) -> Result<SimNode, RestoreError> {
        Ok(SimNode {
            name: name.to_owned(),
            group: group.to_owned(),
            spec: spec.clone(),
            node: topoalign_nrt::start_node(spec)?,
            decided: HashSet::new(),
            dra: Vec::new(),
        })
    }

    /// The node `name` of fleet entry `group` whose devices of `resources`
    /// come from DRA ([`crate::dra`]): its kubelet starts without them,
    /// its ResourceSlices ([`SimNode::resource_slices`]) carry them.
    ///
    /// # Errors
    /// [`RestoreError`] when the kubelet would not start.
    pub fn start_with_dra(
        name: &str,
        group: &str,
        spec: &NodeSpec,
        resources: &[crate::dra::DraResource],
    ) -> Result<SimNode, RestoreError> {
        let (spec, dra) = crate::dra::split_spec(spec, resources);
        let mut node = SimNode::start(name, group, &spec)?;
        node.dra = dra;
        Ok(node)
    }

    /// The node's ResourceSlices (none without DRA devices).
    pub fn resource_slices(&self) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
        crate::dra::resource_slices(&self.name, &self.dra)
    }

    /// The NUMA nodes of the exclusive CPUs and pinned memory of
    /// `containers` (an admitted pod's), by the machine's own ids
    /// ([`pinned_numa_labels`]).
    pub fn pinned_numa_nodes(&self, containers: &[ContainerPlacement]) -> BTreeSet<usize> {
        pinned_numa_labels(self.node.machine(), containers)
    }

    /// A copy of this node, named `name` (an empty node's copy is the
    /// node started again: starting is deterministic).
    pub fn renamed(&self, name: &str) -> SimNode {
        SimNode {
            name: name.to_owned(),
            ..self.clone()
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine node (its admitted pods, state, usage).
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The kubelet's admission of `pod`, bound to this node; `None` when it
    /// was decided on before (a later update of the same pod).
    ///
    /// # Errors
    /// [`UnreadablePod`] when the pod cannot be read; it counts as decided
    /// (it is not tried again).
    pub fn admit(&mut self, pod: &K8sPod) -> Option<Result<Admission, UnreadablePod>> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !self.decided.insert(uid.clone()) {
            return None;
        }
        let converted = topoalign_k8s::pod_from_k8s(pod, &uid).map_err(|e| UnreadablePod {
            pod: pod_key(pod),
            message: e.message(),
        });
        Some(converted.map(|pod| Admission::from(&self.node.admit(pod))))
    }

    /// Releases the pod with `uid` (deleted, or terminating); whether it
    /// held anything.
    pub fn release(&mut self, uid: &str) -> bool {
        self.decided.remove(uid);
        self.node.remove(uid)
    }

    /// The Node object the kubelet registers (labels only; the status is
    /// [`SimNode::node_status`]).
    pub fn node_object(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    GROUP_LABEL: self.group,
                },
            },
        })
    }

    /// The Node status the kubelet reports: capacity and allocatable as
    /// the engine computes them (the kubelet's `nodestatus.MachineInfo`),
    /// Ready, no pressure; `now` is an RFC 3339 time.
    pub fn node_status(&self, now: &str) -> Value {
        let list = |resources: &topoalign_model::ResourceList| -> Value {
            resources
                .iter()
                .map(|(name, amount)| (name.clone(), Value::String(amount.to_string())))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let resources = self.node.resources();
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({
                "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            })
        };
        json!({
            "status": {
                "capacity": list(&resources.capacity),
                "allocatable": list(&resources.allocatable),
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    condition("Ready", "True", "KubeletReady", "kubelet is posting ready status (simulated by topoalign)"),
                ],
                "nodeInfo": {
                    "kubeletVersion": format!("v{}.0", self.node.config().kubelet_version),
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
                    "containerRuntimeVersion": "", "kubeProxyVersion": "",
                },
            },
        })
    }

    /// The node's NodeResourceTopology object with the exact-state
    /// attributes.
    pub fn nrt(&self) -> NodeResourceTopology {
        topoalign_nrt::build(
            &self.name,
            &self.node,
            BuildOptions {
                exact_state: Some(&self.spec),
            },
        )
    }
}

/// The NUMA nodes of the exclusive CPUs and pinned memory of `containers`
/// (placed on `machine`) as the machine names them
/// ([`Machine::numa_label`]): the ids ResourceSlices publish in
/// `resource.kubernetes.io/numaNode`, which [`crate::dra::alignment`]
/// compares them with and writes into the pod's condition. On a machine
/// whose NUMA ids are all below 64 they are the engine's indices.
pub fn pinned_numa_labels(machine: &Machine, containers: &[ContainerPlacement]) -> BTreeSet<usize> {
    topoalign_scenario::dra::pinned_numa_nodes(containers, |cpu| machine.cpu(cpu).map(|c| c.numa))
        .into_iter()
        .map(|node| machine.numa_label(node))
        .collect()
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &K8sPod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The strategic-merge patch of `pods/<name>/status` the kubelet's status
/// manager would send after `admission`, at `now` (RFC 3339): Running, its
/// containers started and ready, with [`CONTAINERS_ANNOTATION`]; or Failed
/// with the kubelet's reason and `Pod was rejected: <message>`
/// (`kubelet.rejectPod`). The annotation names NUMA nodes by `machine`'s
/// own ids, as `topoalign replay` does.
pub fn status_patch(pod: &K8sPod, admission: &Admission, machine: &Machine, now: &str) -> Value {
    match admission {
        Admission::Rejected { reason, message } => json!({
            "status": {"phase": "Failed", "reason": reason, "message": format!("Pod was rejected: {message}")},
        }),
        Admission::Admitted(containers) => {
            let spec = pod.spec.as_ref();
            let running = |container: &k8s_openapi::api::core::v1::Container| {
                json!({
                    "name": container.name, "image": container.image.clone().unwrap_or_default(), "imageID": "",
                    "ready": true, "started": true, "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                })
            };
            let init_statuses: Vec<Value> = spec
                .and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten()
                .map(|container| {
                    if container.restart_policy.as_deref() == Some("Always") {
                        return running(container);
                    }
                    json!({
                        "name": container.name, "image": container.image.clone().unwrap_or_default(), "imageID": "",
                        "ready": true, "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}},
                    })
                })
                .collect();
            let statuses: Vec<Value> = spec.into_iter().flat_map(|s| &s.containers).map(running).collect();
            let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
            let labelled: Vec<ContainerPlacement> = containers.iter().map(|c| c.with_numa_labels(machine)).collect();
            let annotation = serde_json::to_string(&labelled).unwrap_or_default();
            let mut status = json!({
                "phase": "Running",
                "startTime": now,
                "conditions": [
                    condition("PodReadyToStartContainers"),
                    condition("Initialized"),
                    condition("ContainersReady"),
                    condition("Ready"),
                ],
                "containerStatuses": statuses,
            });
            if !init_statuses.is_empty() {
                status["initContainerStatuses"] = Value::Array(init_statuses);
            }
            json!({"metadata": {"annotations": {CONTAINERS_ANNOTATION: annotation}}, "status": status})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> NodeSpec {
        let text = include_str!("../../../examples/nodes/two-numa.yaml");
        let scenario = topoalign_scenario::Scenario::parse(text).expect("example scenario");
        NodeSpec {
            topology: scenario.topology,
            kubelet: scenario.kubelet,
        }
    }

    fn pod(name: &str, cpus: &str, memory: &str) -> K8sPod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "app", "image": "pause", "resources": {
                "requests": {"cpu": cpus, "memory": memory}, "limits": {"cpu": cpus, "memory": memory}}}]},
        }))
        .expect("pod")
    }

    #[test]
    fn admits_once_in_order_and_releases() {
        let mut node = SimNode::start("n-0", "n", &spec()).expect("starts");
        let first = node.admit(&pod("a", "7", "2Gi")).expect("new").expect("readable");
        let Admission::Admitted(containers) = &first else {
            panic!("refused: {first:?}")
        };
        assert_eq!(containers.len(), 1);
        assert!(containers[0].cpus.is_some(), "a Guaranteed pod gets exclusive CPUs");
        assert_eq!(node.admit(&pod("a", "7", "2Gi")), None, "a pod is decided once");
        node.admit(&pod("b", "7", "2Gi")).expect("new").expect("readable");
        // 15 allocatable CPUs, 14 taken: the third 7-CPU pod does not fit.
        let third = node.admit(&pod("c", "7", "2Gi")).expect("new").expect("readable");
        assert!(
            matches!(&third, Admission::Rejected { reason, .. } if reason == "TopologyAffinityError" || reason == "OutOfcpu"),
            "{third:?}"
        );
        assert!(node.release("uid-a"));
        assert!(!node.release("uid-a"));
        assert_eq!(node.admit(&pod("c", "7", "2Gi")), None, "a rejected pod stays rejected");
        let again = node.admit(&pod("d", "7", "2Gi")).expect("new");
        assert!(matches!(again, Ok(Admission::Admitted(_))), "{again:?}");
    }

    #[test]
    fn rejected_status_is_the_kubelets() {
        let admission = Admission::Rejected {
            reason: "TopologyAffinityError".into(),
            message: "Resources cannot be allocated with Topology locality".into(),
        };
        let patch = status_patch(
            &pod("a", "1", "1Gi"),
            &admission,
            &spec().topology.to_machine_with_numa_labels().expect("machine"),
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(
            patch,
            json!({"status": {"phase": "Failed", "reason": "TopologyAffinityError",
                "message": "Pod was rejected: Resources cannot be allocated with Topology locality"}})
        );
    }

    #[test]
    fn admitted_status_carries_the_placement() {
        let mut node = SimNode::start("n-0", "n", &spec()).expect("starts");
        let pod = pod("a", "2", "1Gi");
        let admission = node.admit(&pod).expect("new").expect("readable");
        let patch = status_patch(&pod, &admission, node.node().machine(), "2026-01-01T00:00:00Z");
        assert_eq!(patch["status"]["phase"], "Running");
        assert_eq!(patch["status"]["containerStatuses"][0]["name"], "app");
        let annotation = patch["metadata"]["annotations"][CONTAINERS_ANNOTATION]
            .as_str()
            .expect("annotation");
        let containers: Value = serde_json::from_str(annotation).expect("JSON");
        assert_eq!(containers[0]["name"], "app");
        assert_eq!(
            containers[0]["cpus"]
                .as_str()
                .map(|c| topoalign_model::CpuSet::parse(c).map(|s| s.len())),
            Some(Ok(2))
        );
    }

    #[test]
    fn the_annotation_names_numa_nodes_by_the_machine_s_own_ids() {
        let machine = spec_with_second_numa_id(64)
            .topology
            .to_machine_with_numa_labels()
            .expect("machine");
        let admission = Admission::Admitted(vec![ContainerPlacement {
            name: "app".to_owned(),
            init: false,
            cpus: None,
            memory_numa: Some(vec![0, 1]),
            devices: std::collections::BTreeMap::new(),
        }]);
        let patch = status_patch(&pod("a", "1", "1Gi"), &admission, &machine, "2026-01-01T00:00:00Z");
        let annotation = patch["metadata"]["annotations"][CONTAINERS_ANNOTATION]
            .as_str()
            .expect("annotation");
        let containers: Value = serde_json::from_str(annotation).expect("JSON");
        assert_eq!(containers[0]["memoryNuma"], json!([0, 64]));
    }

    /// Two NUMA nodes of four CPUs, the second with id `second`, where the
    /// kubelet runs a machine with ids past 63 (topology policy `none`, no
    /// memory pinning); one GPU on each NUMA node.
    fn spec_with_second_numa_id(second: usize) -> NodeSpec {
        let machine = topoalign_model::UniformMachine::new(2, 4)
            .sockets(2)
            .memory_per_numa(4 << 30)
            .device("example.com/gpu", "gpu-a", &[0])
            .device("example.com/gpu", "gpu-b", &[1])
            .numa_ids([0, second])
            .build()
            .expect("machine");
        NodeSpec {
            topology: topoalign_scenario::TopologySpec::from_machine(&machine),
            kubelet: json!({"topologyManagerPolicy": "none", "cpuManagerPolicy": "static",
                "memoryManagerPolicy": "None", "reservedSystemCPUs": "0"}),
        }
    }

    /// What a simulated node with DRA GPUs says of a 6-CPU pod holding the
    /// GPU `device`: the NUMA nodes it pinned and the alignment condition.
    fn pinned_and_alignment(second: usize, device: &str) -> (BTreeSet<usize>, crate::dra::Alignment) {
        let resources = [crate::dra::DraResource {
            resource: "example.com/gpu".to_owned(),
            driver: "gpu.example.com".to_owned(),
        }];
        let mut node =
            SimNode::start_with_dra("n-0", "n", &spec_with_second_numa_id(second), &resources).expect("starts");
        let admission = node.admit(&pod("a", "6", "1Gi")).expect("new").expect("readable");
        let Admission::Admitted(containers) = admission else {
            panic!("refused: {admission:?}")
        };
        let pinned = node.pinned_numa_nodes(&containers);
        let claim: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": "a-gpu", "namespace": "ns"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n-0", "device": device}]}}}}))
        .expect("claim");
        let alignment = crate::dra::alignment(
            "ns/a",
            &[("gpu".to_owned(), Some(claim))],
            &node.resource_slices(),
            &pinned,
        );
        (pinned, alignment)
    }

    #[test]
    fn pinned_numa_nodes_are_the_machines_own_ids() {
        let renumbered = spec_with_second_numa_id(1)
            .topology
            .to_machine_with_numa_labels()
            .expect("machine");
        let labelled = spec_with_second_numa_id(64)
            .topology
            .to_machine_with_numa_labels()
            .expect("machine");
        assert_eq!(labelled.numa_labels(), Some(&[0, 64][..]));
        let placement = |cpus: &str, memory: Option<Vec<usize>>| ContainerPlacement {
            name: "app".to_owned(),
            init: false,
            cpus: Some(topoalign_model::CpuSet::parse(cpus).expect("cpus")),
            memory_numa: memory,
            devices: std::collections::BTreeMap::new(),
        };
        for containers in [
            vec![placement("1-2", None)],
            vec![placement("5", None)],
            vec![placement("1", Some(vec![1]))],
            vec![placement("1-2", None), placement("6-7", Some(vec![0, 1]))],
        ] {
            let expected: BTreeSet<usize> = pinned_numa_labels(&renumbered, &containers)
                .into_iter()
                .map(|node| labelled.numa_label(node))
                .collect();
            assert_eq!(pinned_numa_labels(&labelled, &containers), expected, "{containers:?}");
        }
    }

    #[test]
    fn dra_alignment_on_numa_id_64_is_the_renumbered_machines_with_ids_mapped() {
        // Mapping the renumbered machine's answer: its NUMA node 1 is 64.
        let mapped = |text: &str| {
            text.replace("NUMA node 0,1", "NUMA node 0,64")
                .replace("NUMA node 1", "NUMA node 64")
        };
        for device in ["gpu-a", "gpu-b"] {
            let (pinned, alignment) = pinned_and_alignment(1, device);
            assert!(
                pinned.contains(&1),
                "6 of 7 free CPUs reach the second NUMA node: {pinned:?}"
            );
            let (pinned_64, alignment_64) = pinned_and_alignment(64, device);
            let expected: BTreeSet<usize> = pinned.iter().map(|&n| if n == 1 { 64 } else { n }).collect();
            assert_eq!(pinned_64, expected);
            assert_eq!(alignment_64.aligned, alignment.aligned, "{device}");
            assert_eq!(alignment_64.message, mapped(&alignment.message), "{device}");
        }
    }

    #[test]
    fn node_status_reports_the_engines_allocatable() {
        let node = SimNode::start("n-0", "n", &spec()).expect("starts");
        let status = node.node_status("2026-01-01T00:00:00Z");
        assert_eq!(status["status"]["capacity"]["cpu"], "16");
        assert_eq!(status["status"]["allocatable"]["cpu"], "15");
        assert_eq!(status["status"]["allocatable"]["pods"], "110");
        assert_eq!(node.node_object()["metadata"]["labels"][GROUP_LABEL], "n");
    }
}

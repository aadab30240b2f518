//! The page model: what the page shows of a [`ClusterSnapshot`], built
//! once per reading ([`Page::build`]) and rendered by [`crate::html`].
//!
//! - every node: how its state is known (the cluster crate's words), its
//!   machine picture — `topoalign topology`'s drawing
//!   ([`topoalign_discovery::render_svg`]) coloured by a [`Colouring`]: each
//!   pod's exclusive CPUs and devices in the pod's colour, the CPU
//!   manager's reserved CPUs grey, and a stranded node's free CPUs and
//!   devices red —, each pod's CPUs, memory per NUMA node and devices, and
//!   per NUMA node what is free; the node's DRA devices (from its
//!   ResourceSlices, `topoalign_cluster::dra`) as chips of the picture too,
//!   each in the colour of the pod its claim is reserved for, free ones red
//!   on a stranded node, and listed with their claim and pod;
//! - stranded capacity as the fleet report defines it
//!   ([`topoalign_fleet::stranded`]: free on a node where no waiting pod
//!   that an empty node of its shape would admit is admitted now);
//! - every waiting pod (unscheduled, or refused by a kubelet's admission):
//!   per exact node the engine's trial admission in `explain`'s words, and
//!   when no node admits it, `explain`'s summary and verified fixes.
//!
//! Pure: no I/O, no clock. Must not touch: decisions (the engine's, asked
//! through `try_admit` and `explain`), the drawing (discovery's), what is
//! free (`Node::numa_usage`), what is stranded (`topoalign-fleet`'s).

use std::collections::BTreeMap;

use topoalign_cluster::{ClusterNode, ClusterPod, ClusterSnapshot, NodeSource, PodState};
use topoalign_discovery::{Colour, Colouring, DeviceKind, PciDevice, Topology, render_svg};
use topoalign_engine::Node;
use topoalign_model::{CpuSet, Pod, resource_name};
use topoalign_nrt::NodeSpec;

/// Colours of pods, in the order a node holds them (the tenth pod takes
/// the first colour again). None is the picture's device green, the
/// reserved grey or the stranded red.
pub const POD_COLOURS: [Colour; 10] = [
    Colour(37, 99, 235),
    Colour(234, 88, 12),
    Colour(147, 51, 234),
    Colour(13, 148, 136),
    Colour(219, 39, 119),
    Colour(161, 98, 7),
    Colour(79, 70, 229),
    Colour(8, 145, 178),
    Colour(190, 24, 93),
    Colour(71, 85, 105),
];

/// Free CPUs and devices of a stranded node.
pub const STRANDED: Colour = Colour(248, 113, 113);
/// The CPU manager's reserved CPUs.
pub const RESERVED: Colour = Colour(156, 163, 175);

/// Waiting pods explained in full (`explain` with fixes) on at most this
/// many nodes each; the others get the one-line refusal.
pub const EXPLAINED_NODES: usize = 3;

/// The whole page.
#[derive(Clone, Debug)]
pub struct Page {
    /// When the snapshot was read (RFC 3339).
    pub taken_at: String,
    pub nodes: Vec<NodeView>,
    /// The pods waiting for a node, in `namespace/name` order.
    pub waiting: Vec<WaitingView>,
}

/// One node.
#[derive(Clone, Debug)]
pub struct NodeView {
    pub name: String,
    /// How its state is known (`exact`, `approximate …`, `unknown: …`,
    /// stale or not): the cluster crate's words.
    pub source: String,
    pub ready: bool,
    pub unschedulable: bool,
    pub taints: Vec<String>,
    /// `topologyManagerPolicy` and scope, when known.
    pub policy: Option<(String, String)>,
    /// Exact nodes only: the picture, the pods and the zones.
    pub exact: Option<ExactView>,
    /// Approximate nodes: the zones the object lists.
    pub zones_only: Vec<ZoneCounts>,
    /// Its DRA devices (any node that publishes ResourceSlices), by NUMA
    /// node then address.
    pub dra: Vec<DraDeviceView>,
}

/// One DRA device of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraDeviceView {
    /// `driver/pool/device` (its picture chip is `g#pci-<address>`).
    pub address: String,
    pub driver: String,
    /// From its `numaNode` attribute; `None`: it says none.
    pub numa: Option<usize>,
    /// The allocated claim holding it (`namespace/name`), if any.
    pub claim: Option<String>,
    /// The pods that claim is reserved for (`namespace/name`).
    pub pods: Vec<String>,
    /// Free on a stranded node (exact nodes only: stranded is judged
    /// there).
    pub stranded: bool,
}

/// What an exact node shows.
#[derive(Clone, Debug)]
pub struct ExactView {
    /// `topoalign topology`'s picture, coloured (SVG text).
    pub picture: String,
    pub pods: Vec<PodView>,
    pub zones: Vec<ZoneView>,
    /// Free CPU (millicores) and memory (bytes) of the node, as the fleet
    /// report counts them.
    pub free_milli_cpu: u64,
    pub free_memory: u64,
    /// The waiting pods this node's free capacity was wanted for (an
    /// empty node of its shape admits them) when it admits none of them:
    /// its free capacity is stranded. Empty: not stranded.
    pub stranded_for: Vec<String>,
}

/// One pod on a node.
#[derive(Clone, Debug)]
pub struct PodView {
    /// `namespace/name`.
    pub key: String,
    pub colour: Colour,
    pub priority: i32,
    /// Exclusive CPUs (all containers); empty: the shared pool.
    pub cpus: CpuSet,
    /// Pinned memory per NUMA node and resource, bytes (a block spanning
    /// several NUMA nodes is drawn split evenly over them).
    pub memory: BTreeMap<usize, BTreeMap<String, u64>>,
    /// Devices: resource → ids.
    pub devices: BTreeMap<String, Vec<String>>,
    /// DRA devices its claims hold here: `driver/pool/device`.
    pub dra_devices: Vec<String>,
    /// The NUMA nodes it holds something on.
    pub numa: Vec<usize>,
}

/// One NUMA node of an exact node.
#[derive(Clone, Debug)]
pub struct ZoneView {
    pub numa: usize,
    pub cpus: CpuSet,
    pub reserved_cpus: CpuSet,
    /// CPUs free for exclusive allocation (`None`: the `none` CPU policy).
    pub free_cpus: Option<CpuSet>,
    /// Free CPU and memory as the fleet report apportions them.
    pub free_milli_cpu: u64,
    pub free_memory: u64,
    /// `memory` allocatable here (the memory manager's table, or the NUMA
    /// node's memory).
    pub memory_allocatable: u64,
    /// Device resource → free ids here.
    pub free_devices: BTreeMap<String, Vec<String>>,
    /// Free DRA devices here: `driver/pool/device`.
    pub free_dra: Vec<String>,
    /// Free capacity here is stranded (the node is).
    pub stranded: bool,
}

/// A zone as an object without exact state lists it.
#[derive(Clone, Debug)]
pub struct ZoneCounts {
    pub name: String,
    /// Resource, capacity, allocatable, available (the object's strings).
    pub resources: Vec<(String, String, String, String)>,
}

/// One waiting pod.
#[derive(Clone, Debug)]
pub struct WaitingView {
    pub key: String,
    /// `unscheduled`, or `rejected by its kubelet: REASON`.
    pub state: String,
    /// `status.message`.
    pub message: Option<String>,
    /// Why the engine cannot read it, when it cannot.
    pub unreadable: Option<String>,
    /// Per exact node, admitting nodes first.
    pub verdicts: Vec<Verdict>,
    /// One line: where it would be admitted, or why nowhere.
    pub summary: String,
    /// When no node admits it: `explain` on the first nodes.
    pub explanations: Vec<NodeExplanation>,
}

/// A waiting pod on one node.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub node: String,
    pub admitted: bool,
    /// `explain::words::decision_line` (the machine's own NUMA ids).
    pub words: String,
}

/// `explain` of a waiting pod on one node.
#[derive(Clone, Debug)]
pub struct NodeExplanation {
    pub node: String,
    pub summary: String,
    /// Verified fixes, in words.
    pub fixes: Vec<String>,
}

impl Page {
    /// The page of `snapshot`.
    pub fn build(snapshot: &ClusterSnapshot) -> Page {
        let waiting: Vec<&ClusterPod> = snapshot.waiting().collect();
        let waiting_pods: Vec<Pod> = waiting.iter().filter_map(|p| p.pod.as_ref().ok().cloned()).collect();
        let priorities: BTreeMap<String, i32> = snapshot.pods.iter().map(|p| (p.key(), p.priority)).collect();
        let nodes = snapshot
            .nodes
            .iter()
            .map(|n| node_view(n, &waiting, &waiting_pods, &priorities))
            .collect();
        let waiting = waiting.iter().map(|pod| waiting_view(pod, snapshot)).collect();
        Page {
            taken_at: snapshot.taken_at.to_string(),
            nodes,
            waiting,
        }
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

fn node_view(
    cluster: &ClusterNode,
    waiting: &[&ClusterPod],
    waiting_pods: &[Pod],
    priorities: &BTreeMap<String, i32>,
) -> NodeView {
    let mut view = NodeView {
        name: cluster.name.clone(),
        source: cluster.source_words(),
        ready: cluster.ready,
        unschedulable: cluster.unschedulable,
        taints: cluster.taints.clone(),
        policy: None,
        exact: None,
        zones_only: Vec::new(),
        dra: Vec::new(),
    };
    match &cluster.source {
        NodeSource::Exact(exact) => {
            let config = exact.node.config();
            view.policy = Some((
                config.topology_policy.as_str().to_owned(),
                config.topology_scope.as_str().to_owned(),
            ));
            view.exact = Some(exact_view(cluster, &exact.node, waiting, waiting_pods, priorities));
        }
        NodeSource::Approximate(object) => {
            view.policy = object
                .attribute(topoalign_nrt::POLICY_ATTRIBUTE)
                .zip(object.attribute(topoalign_nrt::SCOPE_ATTRIBUTE))
                .map(|(p, s)| (p.to_owned(), s.to_owned()));
            view.zones_only = object
                .zones
                .iter()
                .map(|zone| ZoneCounts {
                    name: zone.name.clone(),
                    resources: zone
                        .resources
                        .iter()
                        .map(|r| {
                            (
                                r.name.clone(),
                                r.capacity.clone(),
                                r.allocatable.clone(),
                                r.available.clone(),
                            )
                        })
                        .collect(),
                })
                .collect();
        }
        NodeSource::Unknown { .. } | NodeSource::Missing | NodeSource::Unreadable { .. } => {}
    }
    let stranded = view.exact.as_ref().is_some_and(|e| !e.stranded_for.is_empty());
    view.dra = dra_devices(cluster, stranded);
    view
}

/// The node's DRA devices (`NodeDra::devices`), with the claim holding
/// each and whether it is free on a stranded node.
fn dra_devices(cluster: &ClusterNode, stranded: bool) -> Vec<DraDeviceView> {
    let mut out: Vec<DraDeviceView> = cluster
        .dra
        .devices()
        .into_iter()
        .map(|device| DraDeviceView {
            address: device.address(),
            // Free devices that say no NUMA node are counted nowhere
            // (`fleet::stranded::dra_free`), so never stranded.
            stranded: stranded && device.held.is_none() && device.numa.is_some(),
            driver: device.driver,
            numa: device.numa,
            claim: device.held.as_ref().map(|h| h.claim.clone()),
            pods: device
                .held
                .map(|h| h.pods.into_iter().map(|(key, _)| key).collect())
                .unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| (a.numa, &a.address).cmp(&(b.numa, &b.address)));
    out
}

/// Each DRA device a claim holds on the node, on the pods the claim is
/// reserved for (a pod the node's state does not hold — it pins nothing —
/// is added, in the next colour).
fn add_dra_holders(cluster: &ClusterNode, priorities: &BTreeMap<String, i32>, pods: &mut Vec<PodView>) {
    for device in &cluster.dra.held {
        for (key, _) in &device.pods {
            let at = match pods.iter().position(|p| &p.key == key) {
                Some(at) => at,
                None => {
                    pods.push(PodView {
                        key: key.clone(),
                        colour: POD_COLOURS[pods.len() % POD_COLOURS.len()],
                        priority: priorities.get(key).copied().unwrap_or(0),
                        cpus: CpuSet::new(),
                        memory: BTreeMap::new(),
                        devices: BTreeMap::new(),
                        dra_devices: Vec::new(),
                        numa: Vec::new(),
                    });
                    pods.len() - 1
                }
            };
            let pod = &mut pods[at];
            pod.dra_devices.push(device.address());
            if let Some(numa) = device.numa
                && !pod.numa.contains(&numa)
            {
                pod.numa.push(numa);
                pod.numa.sort_unstable();
            }
        }
    }
}

fn exact_view(
    cluster: &ClusterNode,
    node: &Node,
    waiting: &[&ClusterPod],
    waiting_pods: &[Pod],
    priorities: &BTreeMap<String, i32>,
) -> ExactView {
    let machine = node.machine();
    let snapshot = node.snapshot();
    let mut pods: Vec<PodView> = cluster
        .holdings
        .iter()
        .enumerate()
        .map(|(i, holding)| {
            let mut cpus = CpuSet::new();
            let mut devices: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for container in &holding.containers {
                if let Some(set) = &container.cpus {
                    cpus.union_with(set);
                }
                for (resource, ids) in &container.devices {
                    devices.entry(resource.clone()).or_default().extend(ids.iter().cloned());
                }
            }
            let mut memory: BTreeMap<usize, BTreeMap<String, u64>> = BTreeMap::new();
            let blocks = snapshot
                .memory
                .as_ref()
                .and_then(|m| m.assignments.get(&holding.uid))
                .into_iter()
                .flat_map(|containers| containers.values().flatten());
            for block in blocks {
                let shares = split_evenly(block.size, block.numa_affinity.len());
                for (&numa, share) in block.numa_affinity.iter().zip(shares) {
                    *memory
                        .entry(numa)
                        .or_default()
                        .entry(block.resource.clone())
                        .or_default() += share;
                }
            }
            PodView {
                key: holding.pod.clone(),
                colour: POD_COLOURS[i % POD_COLOURS.len()],
                priority: holding.priority,
                cpus,
                memory,
                devices,
                dra_devices: Vec::new(),
                numa: holding.numa.iter().copied().collect(),
            }
        })
        .collect();
    add_dra_holders(cluster, priorities, &mut pods);
    let free = topoalign_fleet::stranded::node_free(node);
    let stranded_for: Vec<String> = match Node::start(machine.clone(), node.config().clone()) {
        Ok(empty) if topoalign_fleet::stranded::is_stranded(node, &empty, waiting_pods) => waiting
            .iter()
            .filter(|p| p.pod.as_ref().is_ok_and(|pod| empty.try_admit(pod).decision.admitted()))
            .map(|p| p.key())
            .collect(),
        _ => Vec::new(),
    };
    let stranded = !stranded_for.is_empty();
    let zones: Vec<ZoneView> = node
        .numa_usage()
        .into_iter()
        .map(|usage| {
            let zone_free = free.zones.iter().find(|z| z.numa == usage.numa);
            ZoneView {
                numa: usage.numa,
                cpus: usage.cpus.clone(),
                reserved_cpus: usage.reserved_cpus.clone(),
                free_cpus: usage.free_cpus.clone(),
                free_milli_cpu: zone_free.map_or(0, |z| z.milli_cpu),
                free_memory: zone_free.map_or(0, |z| z.memory_bytes),
                memory_allocatable: usage
                    .get(resource_name::MEMORY)
                    .map_or(0, |m| u64::try_from(m.allocatable.value()).unwrap_or(0)),
                free_devices: usage.free_devices.clone(),
                free_dra: dra_free_here(cluster, usage.numa),
                stranded,
            }
        })
        .collect();
    let picture = picture(&cluster.name, node, &cluster.dra, &pods, &zones, stranded);
    ExactView {
        picture,
        pods,
        zones,
        free_milli_cpu: free.milli_cpu,
        free_memory: free.memory_bytes,
        stranded_for,
    }
}

/// The addresses of the node's free DRA devices on NUMA node `numa`.
fn dra_free_here(cluster: &ClusterNode, numa: usize) -> Vec<String> {
    cluster
        .dra
        .devices()
        .into_iter()
        .filter(|d| d.held.is_none() && d.numa == Some(numa))
        .map(|d| d.address())
        .collect()
}

/// `amount` in `parts` shares that add up to it (the first ones one more).
fn split_evenly(amount: u64, parts: usize) -> Vec<u64> {
    let Ok(n) = u64::try_from(parts) else {
        return Vec::new();
    };
    if n == 0 {
        return Vec::new();
    }
    (0..n).map(|i| amount / n + u64::from(i < amount % n)).collect()
}

/// The machine picture of `node` with its pods, reserved CPUs and (on a
/// stranded node) its free CPUs and devices coloured.
fn picture(
    name: &str,
    node: &Node,
    dra: &topoalign_cluster::NodeDra,
    pods: &[PodView],
    zones: &[ZoneView],
    stranded: bool,
) -> String {
    let topology = topology(name, node, dra);
    let mut colouring = Colouring::default();
    for zone in zones {
        for cpu in zone.reserved_cpus.iter() {
            colouring.cpus.insert(cpu, RESERVED);
        }
        if stranded {
            for cpu in zone.free_cpus.iter().flat_map(CpuSet::iter) {
                colouring.cpus.insert(cpu, STRANDED);
            }
            for (resource, ids) in &zone.free_devices {
                for id in ids {
                    colouring.devices.insert(device_address(resource, id), STRANDED);
                }
            }
            for address in &zone.free_dra {
                colouring.devices.insert(address.clone(), STRANDED);
            }
        }
    }
    for pod in pods {
        for cpu in pod.cpus.iter() {
            colouring.cpus.insert(cpu, pod.colour);
        }
        for (resource, ids) in &pod.devices {
            for id in ids {
                colouring.devices.insert(device_address(resource, id), pod.colour);
            }
        }
        for address in &pod.dra_devices {
            colouring.devices.insert(address.clone(), pod.colour);
        }
        colouring.legend.push((pod.colour, pod.key.clone()));
    }
    if zones.iter().any(|z| !z.reserved_cpus.is_empty()) {
        colouring.legend.push((RESERVED, "reserved CPUs".to_owned()));
    }
    if stranded {
        colouring
            .legend
            .push((STRANDED, "stranded: free, but no waiting pod fits".to_owned()));
    }
    render_svg(&topology, Some(&colouring))
}

/// The machine as `topoalign topology` draws it. A node's devices are
/// device-plugin resources, not PCI devices: each becomes a chip named by
/// its resource and id, whose element id is `pci-<resource>/<id>`; each
/// DRA device that names its NUMA node a chip `pci-<driver>/<pool>/<device>`.
fn topology(name: &str, node: &Node, dra: &topoalign_cluster::NodeDra) -> Topology {
    let machine = node.machine();
    let mut topology = Topology::from_machine(machine, name);
    for (resource, devices) in machine.devices() {
        for device in devices {
            let mut chip = PciDevice::new(device_address(resource, &device.id), 0, None, None);
            chip.kind = device_kind(resource);
            chip.numa = device.numa.clone();
            chip.description = Some(resource.clone());
            topology.pci_devices.push(chip);
        }
    }
    for device in dra.devices() {
        let Some(numa) = device.numa else { continue };
        let mut chip = PciDevice::new(device.address(), 0, None, None);
        chip.kind = device_kind(&device.driver);
        chip.numa = vec![numa];
        chip.description = Some(format!("{} (DRA)", device.driver));
        topology.pci_devices.push(chip);
    }
    topology
}

/// The picture's key of a device: `<resource>/<id>`.
pub fn device_address(resource: &str, id: &str) -> String {
    format!("{resource}/{id}")
}

/// The chip kind of a device-plugin resource (or a DRA driver), by its
/// name.
fn device_kind(resource: &str) -> DeviceKind {
    let name = resource.rsplit('/').next().unwrap_or(resource).to_ascii_lowercase();
    if name.contains("gpu") {
        DeviceKind::Gpu
    } else if name.contains("sriov") || name.contains("nic") || name.contains("net") || name.contains("rdma") {
        DeviceKind::EthernetNic
    } else {
        DeviceKind::Accelerator
    }
}

fn waiting_view(pod: &ClusterPod, snapshot: &ClusterSnapshot) -> WaitingView {
    let state = match &pod.state {
        PodState::Rejected { reason } => format!("rejected by its kubelet: {reason}"),
        _ => "unscheduled".to_owned(),
    };
    let mut view = WaitingView {
        key: pod.key(),
        state,
        message: pod.message.clone(),
        unreadable: None,
        verdicts: Vec::new(),
        summary: String::new(),
        explanations: Vec::new(),
    };
    let engine_pod = match &pod.pod {
        Ok(engine_pod) => engine_pod,
        Err(error) => {
            view.summary = format!("cannot be read as a pod: {error}");
            view.unreadable = Some(error.to_string());
            return view;
        }
    };
    let mut refused = Vec::new();
    for node in &snapshot.nodes {
        let Some(exact) = node.exact() else { continue };
        let decision = exact.node.try_admit(engine_pod).decision;
        let admitted = decision.admitted();
        view.verdicts.push(Verdict {
            node: node.name.clone(),
            admitted,
            words: topoalign_explain::words::decision_line(exact.node.machine(), &decision),
        });
        if !admitted {
            refused.push((node, &exact.spec, &exact.node, decision));
        }
    }
    view.verdicts.sort_by_key(|v| !v.admitted);
    let admitting: Vec<&str> = view
        .verdicts
        .iter()
        .filter(|v| v.admitted)
        .map(|v| v.node.as_str())
        .collect();
    view.summary = if view.verdicts.is_empty() {
        "no node publishes its exact state: nothing to ask".to_owned()
    } else if admitting.is_empty() {
        format!("no node admits it now ({} asked)", view.verdicts.len())
    } else {
        format!("admitted as it is on {}", admitting.join(", "))
    };
    if admitting.is_empty() {
        view.explanations = refused
            .iter()
            .take(EXPLAINED_NODES)
            .map(|(node, spec, engine_node, decision)| explanation(node, spec, engine_node, pod, engine_pod, decision))
            .collect();
    }
    view
}

fn explanation(
    node: &ClusterNode,
    spec: &NodeSpec,
    engine_node: &Node,
    pod: &ClusterPod,
    engine_pod: &Pod,
    decision: &topoalign_engine::Decision,
) -> NodeExplanation {
    let situation = topoalign_explain::Situation {
        node: engine_node,
        kubelet: &spec.kubelet,
        manifest: &pod.manifest,
        pod: engine_pod,
    };
    let explained = topoalign_explain::explain(&situation, decision);
    NodeExplanation {
        node: node.name.clone(),
        summary: explained.summary,
        fixes: explained.fixes.into_iter().map(|f| f.description).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_split_adds_up() {
        assert_eq!(split_evenly(10, 3), vec![4, 3, 3]);
        assert_eq!(split_evenly(9, 1), vec![9]);
        assert!(split_evenly(9, 0).is_empty());
    }

    #[test]
    fn device_kinds_by_name() {
        assert_eq!(device_kind("nvidia.com/gpu"), DeviceKind::Gpu);
        assert_eq!(device_kind("intel.com/sriov_netdevice"), DeviceKind::EthernetNic);
        assert_eq!(device_kind("example.com/fpga"), DeviceKind::Accelerator);
    }
}

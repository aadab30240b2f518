//! Per node and NUMA node: what is free, what is stranded, and who holds
//! what ([`nodes_view`]).
//!
//! Free and stranded are the fleet simulator's, for one engine node
//! (`topoalign_fleet::stranded`, which `defrag` uses too): free CPU and
//! memory per NUMA node are the zones' `available`, capped by the node's
//! allocatable minus its pods' requests and apportioned to the zones;
//! devices are each zone's free devices, and its DRA devices no claim
//! holds (`node_free` + `NodeFree::add_dra(dra_free(..), machine)`, counted under
//! the driver's name; [`crate::dra`]). A node's free capacity is
//! stranded when some pods wait (unscheduled, or rejected by a kubelet)
//! that an empty node of its shape would admit, and the engine admits none
//! of them on it now. Only exact nodes can be judged so; an approximate
//! node shows its zones' `available`. DRA devices are shown on every node
//! that publishes them, whatever its NRT object: free ones per driver,
//! held ones under the pod their claim is reserved for.
//!
//! Pure. Must not touch: decisions (the engine's).

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_engine::Node;
use topoalign_model::CpuSet;

use crate::answer::cautions;
use crate::snapshot::{ClusterNode, ClusterSnapshot, NodeSource};

/// One node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    /// How its state is known ([`ClusterNode::source_words`]).
    pub state: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cautions: Vec<String>,
    /// Per NUMA node; empty when the state is not known.
    pub numa: Vec<NumaView>,
    /// The waiting pods (`namespace/name`) an empty node of this shape
    /// would admit while this node admits none: its free capacity is
    /// stranded. Empty when it is not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stranded_for: Vec<String>,
}

/// One NUMA node of a node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaView {
    /// The machine's own NUMA id (as its zone `node-<id>` names it; on a
    /// machine with ids past 63 not the engine's index).
    pub numa: usize,
    /// Resource → amount free: `cpu` (CPUs, `500m` for a part), `memory`
    /// (bytes, `2Gi`), each device resource (devices).
    pub free: BTreeMap<String, String>,
    /// The free CPUs, as a list (`4-7,12`), when the CPU manager pins CPUs
    /// and the state is exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_cpus: Option<String>,
    /// Whether this NUMA node's free capacity is stranded (see the module
    /// docs).
    pub stranded: bool,
    /// Who holds what here.
    pub held: Vec<Held>,
}

/// What one pod holds on one NUMA node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// `namespace/name`.
    pub pod: String,
    pub priority: i32,
    /// Its exclusive CPUs here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Its memory is pinned here (with other NUMA nodes when more than one).
    pub memory: bool,
    /// `resource id` of each of its devices here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// `driver/pool/device (claim namespace/name)` of each DRA device its
    /// claims hold here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dra_devices: Vec<String>,
}

/// [`Held::pod`] of DRA devices an allocated claim reserved for no pod
/// holds: `(no pod) namespace/claim`.
pub const NO_POD: &str = "(no pod)";

/// Every node of `snapshot`, by name.
pub fn nodes_view(snapshot: &ClusterSnapshot) -> Vec<NodeView> {
    snapshot.nodes.iter().map(|node| node_view(snapshot, node)).collect()
}

fn node_view(snapshot: &ClusterSnapshot, node: &ClusterNode) -> NodeView {
    let mut view = NodeView {
        node: node.name.clone(),
        state: node.source_words(),
        cautions: cautions(node),
        numa: Vec::new(),
        stranded_for: Vec::new(),
    };
    match &node.source {
        NodeSource::Exact(exact) => {
            view.stranded_for = stranded_for(snapshot, &exact.node);
            view.numa = exact_numa(node, &exact.node, !view.stranded_for.is_empty());
        }
        NodeSource::Approximate(object) => {
            view.numa = object
                .zones
                .iter()
                .filter_map(|zone| {
                    Some(NumaView {
                        numa: topoalign_nrt::numa_of_zone(&zone.name)?,
                        free: zone
                            .resources
                            .iter()
                            .map(|r| (r.name.clone(), r.available.clone()))
                            .collect(),
                        free_cpus: None,
                        stranded: false,
                        held: Vec::new(),
                    })
                })
                .collect();
        }
        NodeSource::Unknown { .. } | NodeSource::Missing | NodeSource::Unreadable { .. } => {}
    }
    add_dra(snapshot, node, &mut view);
    view
}

/// The node's DRA devices on `view`'s NUMA nodes (made for NUMA nodes it
/// lacks): the free ones (an exact node's are in already, by
/// `NodeFree::add_dra`), and the held ones under their pods.
fn add_dra(snapshot: &ClusterSnapshot, node: &ClusterNode, view: &mut NodeView) {
    if node.dra.is_empty() {
        return;
    }
    let exact = matches!(node.source, NodeSource::Exact(_));
    let free = node.dra.free();
    let numa_nodes: std::collections::BTreeSet<usize> = free
        .keys()
        .copied()
        .chain(node.dra.held.iter().filter_map(|d| d.numa))
        .collect();
    for numa in numa_nodes {
        if !view.numa.iter().any(|v| v.numa == numa) {
            if exact {
                // `add_dra` leaves out a NUMA node the machine lacks.
                continue;
            }
            view.numa.push(NumaView {
                numa,
                free: BTreeMap::new(),
                free_cpus: None,
                stranded: false,
                held: Vec::new(),
            });
        }
    }
    view.numa.sort_by_key(|v| v.numa);
    let stranded = !view.stranded_for.is_empty();
    for numa_view in &mut view.numa {
        let numa = numa_view.numa;
        if !exact {
            for (driver, count) in free.get(&numa).into_iter().flatten() {
                numa_view.free.insert(driver.clone(), count.to_string());
            }
        }
        if stranded && free.get(&numa).is_some_and(|d| d.values().any(|&n| n > 0)) {
            numa_view.stranded = true;
        }
        for device in node.dra.held.iter().filter(|d| d.numa == Some(numa)) {
            let line = format!("{} (claim {})", device.address(), device.claim);
            let holders: Vec<(String, i32)> = if device.pods.is_empty() {
                vec![(format!("{NO_POD} {}", device.claim), 0)]
            } else {
                device
                    .pods
                    .iter()
                    .map(|(key, uid)| {
                        let priority = snapshot.pods.iter().find(|p| &p.uid == uid).map_or(0, |p| p.priority);
                        (key.clone(), priority)
                    })
                    .collect()
            };
            for (pod, priority) in holders {
                match numa_view.held.iter_mut().find(|h| h.pod == pod) {
                    Some(held) => held.dra_devices.push(line.clone()),
                    None => numa_view.held.push(Held {
                        pod,
                        priority,
                        cpus: None,
                        memory: false,
                        devices: Vec::new(),
                        dra_devices: vec![line.clone()],
                    }),
                }
            }
        }
    }
}

/// The waiting pods an empty node of `node`'s shape admits, when `node`
/// admits none of them now (else nothing).
fn stranded_for(snapshot: &ClusterSnapshot, node: &Node) -> Vec<String> {
    let Ok(empty) = Node::start(node.machine().clone(), node.config().clone()) else {
        return Vec::new();
    };
    let waiting: Vec<(String, &topoalign_model::Pod)> = snapshot
        .waiting()
        .filter_map(|p| Some((p.key(), p.pod.as_ref().ok()?)))
        .collect();
    let pods: Vec<topoalign_model::Pod> = waiting.iter().map(|(_, pod)| (*pod).clone()).collect();
    if !topoalign_fleet::stranded::is_stranded(node, &empty, &pods) {
        return Vec::new();
    }
    waiting
        .into_iter()
        .filter(|(_, pod)| empty.try_admit(pod).decision.admitted())
        .map(|(key, _)| key)
        .collect()
}

/// Millicores as a quantity: `3`, `1500m`.
fn cpus(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn exact_numa(node: &ClusterNode, engine: &Node, stranded: bool) -> Vec<NumaView> {
    let machine = engine.machine();
    let mut node_free = topoalign_fleet::stranded::node_free(engine);
    node_free.add_dra(&node.dra.free(), machine);
    let zones = node_free.zones;
    engine
        .numa_usage()
        .into_iter()
        .map(|usage| {
            let on_numa = machine.numa_cpus(usage.numa);
            let zone = zones.iter().find(|z| z.numa == usage.numa).cloned().unwrap_or_default();
            let mut free: BTreeMap<String, String> = BTreeMap::new();
            free.insert("cpu".to_owned(), cpus(zone.milli_cpu));
            free.insert(
                "memory".to_owned(),
                topoalign_model::Quantity::from_units(i128::from(zone.memory_bytes))
                    .with_format(topoalign_model::QuantityFormat::BinarySI)
                    .to_string(),
            );
            let has_free = zone.milli_cpu > 0 || zone.memory_bytes > 0 || zone.devices.values().any(|&n| n > 0);
            free.extend(zone.devices.into_iter().map(|(resource, n)| (resource, n.to_string())));
            let held = node
                .holdings
                .iter()
                .filter(|h| h.numa.contains(&usage.numa))
                .map(|h| {
                    let cpus: CpuSet = h
                        .containers
                        .iter()
                        .filter_map(|c| c.cpus.as_ref())
                        .fold(CpuSet::default(), |all, cpus| all.union(&cpus.intersection(&on_numa)));
                    let devices = h
                        .containers
                        .iter()
                        .flat_map(|c| c.devices.iter())
                        .flat_map(|(resource, ids)| ids.iter().map(move |id| (resource, id)))
                        .filter(|(resource, id)| {
                            machine
                                .devices()
                                .get(*resource)
                                .and_then(|list| list.iter().find(|d| &d.id == *id))
                                .is_some_and(|d| d.numa.contains(&usage.numa))
                        })
                        .map(|(resource, id)| format!("{resource} {id}"))
                        .collect();
                    Held {
                        pod: h.pod.clone(),
                        priority: h.priority,
                        cpus: (!cpus.is_empty()).then(|| cpus.to_string()),
                        memory: h
                            .containers
                            .iter()
                            .any(|c| c.memory_numa.as_ref().is_some_and(|n| n.contains(&usage.numa))),
                        devices,
                        dra_devices: Vec::new(),
                    }
                })
                .collect();
            NumaView {
                // The machine's own id (its zone's name), past 63 too.
                numa: machine.numa_label(usage.numa),
                free,
                free_cpus: usage.free_cpus.as_ref().map(CpuSet::to_string),
                stranded: stranded && has_free,
                held,
            }
        })
        .collect()
}

//! The per-NUMA-node table of free vs requested: for every resource the pod
//! asks the aligned managers for (CPUs, memory, each huge page size, each
//! device resource), what each NUMA node has free right now and whether it
//! falls short.
//!
//! "Free" is what the managers themselves would hand out, the `available`
//! amount of the engine's one read side ([`Node::numa_usage`]): CPUs of
//! the shared pool minus the reserved ones (static CPU policy), the memory
//! manager's free bytes (Static memory policy), devices not held by any
//! container. A manager that does not place a resource (`none` / `None`
//! policies) shows no free amount for it.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_engine::{Decision, Node, NumaUsage, TopologyScope};
use topoalign_model::{Pod, Quantity};

use crate::requests::{container_requests, largest_container_requests, pod_requests};

/// Free vs requested per NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTable {
    /// Whose requests the table compares with: `pod`, or `container <name>`
    /// (the container whose alignment failed, under the container scope).
    pub requested_by: String,
    /// Resource → requested amount.
    pub requested: BTreeMap<String, String>,
    /// One row per NUMA node, ascending.
    pub numa: Vec<NumaRow>,
}

/// One NUMA node's free amounts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaRow {
    /// The NUMA node's id as the machine names it (its original id on a
    /// machine numbered anew, `Machine::numa_label`).
    pub node: usize,
    pub resources: BTreeMap<String, ResourceCell>,
}

/// One resource on one NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceCell {
    /// Free amount; `None` when no manager places this resource on NUMA
    /// nodes (CPU policy `none`, memory policy `None`).
    pub free: Option<String>,
    /// Whether the node alone has less free than requested.
    pub short: bool,
    /// Whether the node has none of this resource at all (a device
    /// resource none of whose devices is attached to it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub absent: bool,
}

/// The table for `pod` on `node` (the node before the pod was admitted).
///
/// Under the pod scope the pod's requests are compared (the kubelet aligns
/// them together); under the container scope each container is aligned on
/// its own, so the table compares the container whose alignment failed, or
/// — when none failed — the largest request of each resource among the
/// containers. An admitted pod is never marked short, nor one the kubelet
/// crashes admitting (nothing fell short).
pub fn resource_table(node: &Node, pod: &Pod, decision: &Decision) -> ResourceTable {
    let (requested_by, requested) = requested(node, pod, decision);
    let judge = !decision.admitted() && decision.kubelet_panic.is_none();
    let numa = node
        .numa_usage()
        .into_iter()
        .map(|usage| {
            let resources = requested
                .iter()
                .map(|(resource, &amount)| {
                    let free_amount = free_amount(node, &usage, resource);
                    let absent = node
                        .machine()
                        .devices()
                        .get(resource)
                        .is_some_and(|devices| !devices.iter().any(|d| d.numa.contains(&usage.numa)));
                    let cell = ResourceCell {
                        free: free_amount.map(|q| q.to_string()),
                        short: judge && free_amount.is_some_and(|f| f < amount),
                        absent,
                    };
                    (resource.clone(), cell)
                })
                .collect();
            NumaRow {
                node: node.machine().numa_label(usage.numa),
                resources,
            }
        })
        .collect();
    ResourceTable {
        requested_by,
        requested: requested.iter().map(|(r, q)| (r.clone(), q.to_string())).collect(),
        numa,
    }
}

/// Whose requests the table compares, and them.
fn requested(node: &Node, pod: &Pod, decision: &Decision) -> (String, BTreeMap<String, Quantity>) {
    if decision.trace.scope != TopologyScope::Container {
        return ("pod".to_owned(), pod_requests(node, pod));
    }
    let failed = decision
        .trace
        .merges
        .iter()
        .find(|m| !m.admitted)
        .and_then(|m| m.container.as_deref())
        .and_then(|name| pod.all_containers().find(|(c, _)| c.name == name));
    if let Some((container, _)) = failed {
        return (
            format!("container {}", container.name),
            container_requests(node, pod, container),
        );
    }
    let asking: Vec<(&str, BTreeMap<String, Quantity>)> = pod
        .all_containers()
        .map(|(c, _)| (c.name.as_str(), container_requests(node, pod, c)))
        .filter(|(_, requests)| !requests.is_empty())
        .collect();
    match asking.as_slice() {
        [] => ("pod".to_owned(), BTreeMap::new()),
        [(name, requests)] => (format!("container {name}"), requests.clone()),
        _ => (
            "the largest container of each resource".to_owned(),
            largest_container_requests(node, pod),
        ),
    }
}

/// What a manager would hand out of `resource` on the NUMA node of `usage`
/// ([`Node::numa_usage`]'s available amount): `None` when no manager places
/// it on NUMA nodes (CPU policy `none`, memory policy `None`, resources no
/// manager aligns); zero for a placed resource the node has none of (an
/// empty huge page pool, a device resource without devices here).
pub(crate) fn free_amount(node: &Node, usage: &NumaUsage, resource: &str) -> Option<Quantity> {
    let memory_like = topoalign_model::resource_name::is_memory_like(resource);
    let placed = match resource {
        "cpu" => usage.get("cpu").is_some_and(|c| c.placed),
        _ if memory_like => usage.get("memory").is_some_and(|m| m.placed),
        _ => node.machine().devices().contains_key(resource),
    };
    placed.then(|| usage.available(resource))
}

impl ResourceTable {
    /// Each NUMA node's shortfalls in words: `NUMA 0 has only 4 of the 5
    /// CPUs free; NUMA 1 has only 15Gi of the 18Gi of memory free`. Empty
    /// when no node is short.
    pub fn shortfalls_text(&self) -> String {
        // NUMA nodes short in the same words are named together, as ranges
        // (`NUMA 1-63 have only 2 of the 3 CPUs free`).
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for row in &self.numa {
            let short: Vec<String> = row
                .resources
                .iter()
                .filter(|(_, cell)| cell.short)
                .map(|(resource, cell)| {
                    if cell.absent {
                        return format!("no {resource} at all");
                    }
                    let free = cell.free.as_deref().unwrap_or("0");
                    let wanted = self.requested.get(resource).map_or("?", String::as_str);
                    match resource.as_str() {
                        "cpu" => format!("{free} of the {wanted} CPUs"),
                        "memory" => format!("{free} of the {wanted} of memory"),
                        other if topoalign_model::resource_name::is_hugepages(other) => {
                            format!("{free} of the {wanted} of {other}")
                        }
                        other => format!("{free} of the {wanted} {other}"),
                    }
                })
                .collect();
            if short.is_empty() {
                continue;
            }
            let short = short.join(" and ");
            match groups.iter_mut().find(|(words, _)| *words == short) {
                Some((_, nodes)) => nodes.push(row.node),
                None => groups.push((short, vec![row.node])),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(short, nodes)| {
                let has = if nodes.len() == 1 { "has" } else { "have" };
                let which = format!("NUMA {}", crate::hints::nodes_text(nodes));
                if short.starts_with("no ") {
                    format!("{which} {has} {short}")
                } else {
                    format!("{which} {has} only {short} free")
                }
            })
            .collect();
        // Free amounts that all differ would still list every node: name a
        // few, count the rest.
        const NAMED: usize = 4;
        if parts.len() > NAMED + 1 {
            let more: usize = groups[NAMED..].iter().map(|(_, nodes)| nodes.len()).sum();
            let named = parts[..NAMED].join("; ");
            return format!("{named}; and {more} more NUMA nodes are short likewise");
        }
        parts.join("; ")
    }
}

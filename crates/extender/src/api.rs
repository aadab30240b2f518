//! The wire format of `k8s.io/kube-scheduler/extender/v1`, field for field:
//! Go structs without JSON tags, so the names are the Go field names
//! (`Pod`, `Nodes`, `NodeNames`, `FailedNodes`, …), and absent pointers are
//! `null`.
//!
//! Pods and nodes stay raw JSON here: the pod is read by `topoalign-k8s`,
//! and the nodes of a `NodeList` are handed back untouched (only their
//! names are read), so a scheduler that is not `nodeCacheCapable` gets its
//! own objects back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `ExtenderArgs`: the body of `filter` and `prioritize`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ExtenderArgs {
    #[serde(rename = "Pod", default)]
    pub pod: Option<serde_json::Value>,
    /// Set when the extender is not `nodeCacheCapable`: a `v1.NodeList`.
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<serde_json::Value>,
    /// Set when the extender is `nodeCacheCapable`.
    #[serde(rename = "NodeNames", default)]
    pub node_names: Option<Vec<String>>,
}

/// `ExtenderFilterResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ExtenderFilterResult {
    #[serde(rename = "Nodes")]
    pub nodes: Option<serde_json::Value>,
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: BTreeMap<String, String>,
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    #[serde(rename = "Error")]
    pub error: String,
}

/// An [`ExtenderFilterResult`] as the extender writes it, borrowing its
/// parts. With `--choose-in-filter`, the nodes that admit the pod but were
/// not chosen are in no field: kube-scheduler keeps only the nodes an
/// extender passes, and reads `FailedNodes` only to explain a pod no node
/// takes (then nothing was chosen, so nothing is left out). Listing them,
/// each with a reason, made every answer about 60 KB over 1,000 nodes for
/// the scheduler to decode. The same JSON fields, so the scheduler reads
/// it as an `ExtenderFilterResult`.
#[derive(Serialize)]
pub struct FilterAnswer<'a> {
    #[serde(rename = "Nodes")]
    pub nodes: Option<&'a serde_json::Value>,
    #[serde(rename = "NodeNames")]
    pub node_names: Option<&'a [String]>,
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: &'a BTreeMap<String, String>,
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: &'a BTreeMap<String, String>,
    #[serde(rename = "Error")]
    pub error: &'a str,
}

/// `HostPriority`; `prioritize` answers a list of them (`HostPriorityList`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct HostPriority {
    #[serde(rename = "Host")]
    pub host: String,
    #[serde(rename = "Score")]
    pub score: i64,
}

/// `ExtenderBindingArgs`: the body of `bind`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ExtenderBindingArgs {
    #[serde(rename = "PodName", default)]
    pub pod_name: String,
    #[serde(rename = "PodNamespace", default)]
    pub pod_namespace: String,
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    #[serde(rename = "Node", default)]
    pub node: String,
}

/// `ExtenderBindingResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    #[serde(rename = "Error")]
    pub error: String,
}

/// `MaxExtenderPriority`: scores run from 0 to this.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// The names of a `v1.NodeList`'s items, in order.
pub fn node_list_names(list: &serde_json::Value) -> Vec<String> {
    list.get("items")
        .and_then(|items| items.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|node| node.pointer("/metadata/name").and_then(|n| n.as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The `v1.NodeList` with only the items whose names `keep` accepts.
pub fn filter_node_list(list: &serde_json::Value, keep: impl Fn(&str) -> bool) -> serde_json::Value {
    let mut list = list.clone();
    if let Some(items) = list.get_mut("items").and_then(|items| items.as_array_mut()) {
        items.retain(|node| {
            node.pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .is_some_and(&keep)
        });
    }
    list
}

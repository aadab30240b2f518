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

/// An [`ExtenderArgs`] read from its body without copying its nodes: the
/// pod, and the candidates — their names, and for a `NodeList` each
/// item's bytes in the body (shared, not copied), so that an answer hands
/// the chosen items back exactly as the scheduler sent them. A request
/// with full Node objects then costs its body once, not a
/// `serde_json::Value` tree of it (about ten times its size) and a copy.
#[derive(Debug, Default)]
pub struct ArgsView {
    pub pod: Option<serde_json::Value>,
    pub candidates: Candidates,
}

/// The candidate nodes of an [`ArgsView`].
#[derive(Debug, Default)]
pub enum Candidates {
    /// `NodeNames` (a `nodeCacheCapable` extender).
    Names(Vec<String>),
    /// `Nodes`: a `v1.NodeList`.
    List(NodeListView),
    /// Neither.
    #[default]
    None,
}

/// A `v1.NodeList` as slices of the request body.
#[derive(Debug, Default)]
pub struct NodeListView {
    /// Its fields other than `items`, each as its JSON key and its value's
    /// bytes, in order.
    fields: Vec<(String, bytes::Bytes)>,
    /// Each item's `metadata.name` and bytes.
    items: Vec<(Option<String>, bytes::Bytes)>,
}

impl NodeListView {
    /// The items' names, in order (items without one are no candidates,
    /// as in [`node_list_names`]).
    pub fn names(&self) -> Vec<String> {
        self.items.iter().filter_map(|(name, _)| name.clone()).collect()
    }

    /// The list with only the items whose names `keep` accepts, as the
    /// chunks of its JSON text: slices of the request body, not copies
    /// ([`filter_node_list`]'s answer).
    pub fn filtered_json(&self, keep: impl Fn(&str) -> bool) -> Vec<bytes::Bytes> {
        let mut chunks = vec![bytes::Bytes::from_static(b"{")];
        for (key, value) in &self.fields {
            chunks.push(bytes::Bytes::from(format!("{key}:")));
            chunks.push(value.clone());
            chunks.push(bytes::Bytes::from_static(b","));
        }
        chunks.push(bytes::Bytes::from_static(b"\"items\":["));
        let mut first = true;
        for (name, item) in &self.items {
            if name.as_deref().is_some_and(&keep) {
                if !first {
                    chunks.push(bytes::Bytes::from_static(b","));
                }
                first = false;
                chunks.push(item.clone());
            }
        }
        chunks.push(bytes::Bytes::from_static(b"]}"));
        chunks
    }
}

/// Why a request body is not an `ExtenderArgs`.
#[derive(Debug, thiserror::Error)]
#[error("the request body is not an ExtenderArgs: {0}")]
pub struct ArgsError(String);

/// Reads an `ExtenderArgs` from `body` ([`ArgsView`]).
///
/// # Errors
/// [`ArgsError`]: not JSON, or not the shape of an `ExtenderArgs`.
pub fn read_args(body: &bytes::Bytes) -> Result<ArgsView, ArgsError> {
    let borrowed: BorrowedArgs<'_> = serde_json::from_slice(body).map_err(|e| ArgsError(e.to_string()))?;
    let pod = match borrowed.pod {
        Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|e| ArgsError(format!("Pod: {e}")))?),
        None => None,
    };
    let candidates = match (borrowed.node_names, borrowed.nodes) {
        (Some(names), _) => Candidates::Names(names),
        (None, Some(list)) => {
            let slice = |raw: &serde_json::value::RawValue| body.slice_ref(raw.get().as_bytes());
            Candidates::List(NodeListView {
                fields: list
                    .fields
                    .into_iter()
                    .map(|(key, value)| (key, slice(value)))
                    .collect(),
                items: list
                    .items
                    .into_iter()
                    .map(|item| (item.name, slice(item.raw)))
                    .collect(),
            })
        }
        (None, None) => Candidates::None,
    };
    Ok(ArgsView { pod, candidates })
}

/// `ExtenderArgs` borrowing from the body.
#[derive(Deserialize)]
struct BorrowedArgs<'a> {
    #[serde(rename = "Pod", default, borrow)]
    pod: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "Nodes", default, borrow)]
    nodes: Option<BorrowedList<'a>>,
    #[serde(rename = "NodeNames", default)]
    node_names: Option<Vec<String>>,
}

/// A `v1.NodeList` borrowing from the body: its fields as JSON keys and
/// raw values, its items raw with their names.
struct BorrowedList<'a> {
    fields: Vec<(String, &'a serde_json::value::RawValue)>,
    items: Vec<BorrowedItem<'a>>,
}

struct BorrowedItem<'a> {
    name: Option<String>,
    raw: &'a serde_json::value::RawValue,
}

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedItem<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            name: Option<String>,
        }
        #[derive(Deserialize, Default)]
        struct Named {
            #[serde(default)]
            metadata: Option<Meta>,
        }
        let raw = <&'a serde_json::value::RawValue>::deserialize(deserializer)?;
        // A Node without a readable name is no candidate.
        let named: Named = serde_json::from_str(raw.get()).unwrap_or_default();
        let name = named.metadata.and_then(|m| m.name);
        Ok(BorrowedItem { name, raw })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedList<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = BorrowedList<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a v1.NodeList object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut list = BorrowedList {
                    fields: Vec::new(),
                    items: Vec::new(),
                };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "items" {
                        list.items = map.next_value::<Option<Vec<BorrowedItem<'a>>>>()?.unwrap_or_default();
                    } else {
                        let value = map.next_value::<&'a serde_json::value::RawValue>()?;
                        let key = serde_json::to_string(&key).map_err(serde::de::Error::custom)?;
                        list.fields.push((key, value));
                    }
                }
                Ok(list)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> serde_json::Value {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {"a\"b": "é"}}, "status": {"x": [1, 2.5, null]}})
    }

    /// The view reads what the `Value` reading reads, and its filtered
    /// list is the `Value` filtering's, byte for byte once parsed.
    #[test]
    fn the_view_agrees_with_the_value_reading() -> Result<(), Box<dyn std::error::Error>> {
        let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"},
                          "items": [node("a"), {"kind": "Node"}, node("b"), node("c")]});
        let args = json!({"Pod": {"metadata": {"name": "p"}}, "Nodes": list, "NodeNames": null});
        let body = bytes::Bytes::from(serde_json::to_vec_pretty(&args)?);
        let view = read_args(&body)?;
        assert_eq!(view.pod, Some(json!({"metadata": {"name": "p"}})));
        let Candidates::List(nodes) = &view.candidates else {
            return Err("not a list".into());
        };
        assert_eq!(nodes.names(), node_list_names(&list));
        for keep in [|name: &str| name != "b", |_: &str| false, |_: &str| true] {
            let filtered: Vec<u8> = nodes.filtered_json(keep).concat();
            let filtered: serde_json::Value = serde_json::from_slice(&filtered)?;
            assert_eq!(filtered, filter_node_list(&list, keep));
        }
        Ok(())
    }

    #[test]
    fn names_nulls_and_garbage() -> Result<(), Box<dyn std::error::Error>> {
        let names = read_args(&bytes::Bytes::from_static(
            br#"{"Pod": null, "Nodes": null, "NodeNames": ["x", "y"]}"#,
        ))?;
        assert!(names.pod.is_none());
        assert!(matches!(names.candidates, Candidates::Names(n) if n == ["x", "y"]));
        let empty = read_args(&bytes::Bytes::from_static(b"{}"))?;
        assert!(matches!(empty.candidates, Candidates::None));
        let no_items = read_args(&bytes::Bytes::from_static(
            br#"{"Nodes": {"kind": "NodeList", "items": null}}"#,
        ))?;
        assert!(matches!(no_items.candidates, Candidates::List(l) if l.names().is_empty()));
        for bad in [&b"["[..], b"{\"Nodes\": 3}", b"{\"Nodes\": {\"items\": {}}}", b"\xff"] {
            assert!(read_args(&bytes::Bytes::copy_from_slice(bad)).is_err(), "{bad:?}");
        }
        Ok(())
    }
}

//! Which nodes a ResourceSlice (or one of its devices) serves: its
//! `nodeName`, `allNodes` or `nodeSelector`, matched against the node the way
//! the scheduler's node-affinity helper matches a `NodeSelector`. The one
//! rule: the allocator gathers a node's pools by [`slice_serves`] and
//! admits a device by [`device_serves`]; callers listing a node's devices
//! (the cluster's views) ask the same two.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

/// Whether `slice` has devices for `node`, as the scheduler gathers the
/// pools a node allocates from: by the slice's `nodeName`, `allNodes` or
/// `nodeSelector`, or — with `perDeviceNodeSelection` — by any of its
/// devices' own ([`device_serves`]). `None`: the slice selects nodes in no
/// way known here (the scheduler skips it). An invalid selector (an
/// unknown operator, a `Gt` value that is no integer) is an error, in the
/// scheduler's words.
pub fn slice_serves(slice: &ResourceSlice, node: &Node) -> Result<Option<bool>, String> {
    let spec = &slice.spec;
    let name = slice.metadata.name.as_deref().unwrap_or_default();
    let node_name = spec.node_name.as_deref().filter(|n| !n.is_empty());
    let all_nodes = spec.all_nodes.unwrap_or(false);
    if node_name.is_some() || all_nodes || spec.node_selector.is_some() {
        return node_matches(node, node_name, all_nodes, spec.node_selector.as_ref())
            .map(Some)
            .map_err(|e| format!("failed to perform node selection for slice {name}: {e}"));
    }
    if spec.per_device_node_selection != Some(true) {
        return Ok(None);
    }
    for device in spec.devices.as_deref().unwrap_or_default() {
        let matched = node_matches(
            node,
            device.node_name.as_deref(),
            device.all_nodes.unwrap_or(false),
            device.node_selector.as_ref(),
        )
        .map_err(|e| {
            format!(
                "failed to perform node selection for device {} in slice {name}: {e}",
                device.name
            )
        })?;
        if matched {
            return Ok(Some(true));
        }
    }
    Ok(Some(false))
}

/// Whether `device` of `slice` (a slice that serves `node`) is for `node`:
/// with `perDeviceNodeSelection`, by the device's own `nodeName`,
/// `allNodes` or `nodeSelector`; otherwise the slice decided for all its
/// devices. An invalid selector is an error (the requirement's key and
/// what is wrong).
pub fn device_serves(slice: &ResourceSlice, device: &Device, node: &Node) -> Result<bool, String> {
    if slice.spec.per_device_node_selection != Some(true) {
        return Ok(true);
    }
    node_matches(
        node,
        device.node_name.as_deref(),
        device.all_nodes.unwrap_or(false),
        device.node_selector.as_ref(),
    )
}

/// Does the node match the slice's (or device's) node selection? A node name
/// decides alone, then `allNodes`, then the selector; none of them set
/// matches no node.
fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&NodeSelector>,
) -> Result<bool, String> {
    match (node_name.filter(|name| !name.is_empty()), all_nodes, selector) {
        (Some(name), _, _) => Ok(node.metadata.name.as_deref() == Some(name)),
        (None, true, _) => Ok(true),
        (None, false, Some(selector)) => selector_matches(node, selector),
        (None, false, None) => Ok(false),
    }
}

/// A `NodeSelector`: its terms are ORed, a term's requirements ANDed; a term
/// with no requirement matches nothing. An invalid requirement (an unknown
/// operator, a `Gt` value that is not an integer) is an error, as the
/// scheduler's parser makes it one before matching.
fn selector_matches(node: &Node, selector: &NodeSelector) -> Result<bool, String> {
    let mut any = false;
    for term in &selector.node_selector_terms {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        // Every term is parsed (and so checked) before any is matched.
        for requirement in expressions {
            check_requirement(requirement, false)?;
        }
        for requirement in fields {
            check_requirement(requirement, true)?;
        }
        if expressions.is_empty() && fields.is_empty() {
            continue;
        }
        let labels = node.metadata.labels.as_ref();
        let label_ok = expressions
            .iter()
            .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)));
        let field_ok = fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then(|| node.metadata.name.as_deref().unwrap_or_default());
            requirement_matches(r, value)
        });
        any |= label_ok && field_ok;
    }
    Ok(any)
}

fn check_requirement(requirement: &NodeSelectorRequirement, field: bool) -> Result<(), String> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let problem = match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => Some("for 'in', 'notin' operators, values set can't be empty"),
        "In" | "NotIn" if field && values.len() != 1 => Some("must have one element"),
        "In" | "NotIn" => None,
        "Exists" | "DoesNotExist" if field => Some("not a valid selector operator"),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Some("values set must be empty for exists and does not exist")
        }
        "Exists" | "DoesNotExist" => None,
        "Gt" | "Lt" if field => Some("not a valid selector operator"),
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => {
            Some("for 'Gt', 'Lt' operators, the value must be a single integer")
        }
        "Gt" | "Lt" => None,
        _ => Some("not a valid selector operator"),
    };
    match problem {
        Some(text) => Err(format!("{}: {text}", requirement.key)),
        None => Ok(()),
    }
}

/// One checked requirement against the node's value for its key.
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|w| w == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        operator @ ("Gt" | "Lt") => {
            let (Some(have), Some(want)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|v| v.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if operator == "Gt" { have > want } else { have < want }
        }
        _ => false,
    }
}

//! The API server's validation of a `resource.k8s.io/v1` ResourceSlice, the
//! part that needs no cluster: what `ValidateResourceSlice`
//! (`k8s.io/kubernetes` v1.37 `pkg/apis/resource/validation`) checks on a
//! new object. Names: the object's a DNS subdomain, the driver a DNS
//! subdomain of at most 63 characters (compared in lower case), every `/`
//! part of the pool name a DNS subdomain, the node name a DNS subdomain;
//! exactly one of `nodeName`, `nodeSelector`, `allNodes`,
//! `perDeviceNodeSelection`; at most 128 devices (64 when any has a list
//! attribute, a taint or consumes counters), each named by a unique DNS
//! label, with at most 32 attributes and capacities and 48 attribute values,
//! attribute names `[domain/]ID` (domain as a driver name, ID a C identifier
//! of at most 32 characters) and each value exactly one of its kinds,
//! strings at most 64 bytes, lists not empty.
//!
//! Stricter than the API server in one place: it lets a name with two
//! slashes through (a TODO in its source); this refuses it.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};

/// `ResourceSliceMaxDevices`.
pub const MAX_DEVICES: usize = 128;
/// `ResourceSliceMaxDevicesWithAdvancedFeatures`: list attributes, taints,
/// counters.
pub const MAX_DEVICES_ADVANCED: usize = 64;
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
pub const MAX_ATTRIBUTES: usize = 32;
/// `ResourceSliceMaxAttributeValuesPerDevice`.
pub const MAX_ATTRIBUTE_VALUES: usize = 48;
/// `DeviceAttributeMaxValueLength`.
pub const MAX_VALUE_LENGTH: usize = 64;
/// `DeviceMaxIDLength`.
const MAX_ID_LENGTH: usize = 32;
/// `DriverNameMaxLength` (and the domain of an attribute name).
pub const MAX_DRIVER_LENGTH: usize = 63;
/// `DNS1123SubdomainMaxLength`.
const MAX_SUBDOMAIN_LENGTH: usize = 253;
/// `DNS1123LabelMaxLength`.
const MAX_LABEL_LENGTH: usize = 63;

/// What the API server would refuse in `slice`, one `path: message` each;
/// empty when it passes.
pub fn validate_resource_slice(slice: &ResourceSlice) -> Vec<String> {
    fn fail(errors: &mut Vec<String>, path: &str, message: String) {
        errors.push(format!("{path}: {message}"));
    }
    let mut errors: Vec<String> = Vec::new();
    match (&slice.metadata.name, &slice.metadata.generate_name) {
        (Some(name), _) => {
            if let Err(e) = dns_subdomain(name) {
                fail(&mut errors, "metadata.name", e);
            }
        }
        (None, Some(_)) => {}
        (None, None) => fail(&mut errors, "metadata.name", "name or generateName is required".into()),
    }
    let spec = &slice.spec;
    if let Err(e) = driver_name(&spec.driver) {
        fail(&mut errors, "spec.driver", e);
    }
    if let Err(e) = pool_name(&spec.pool.name) {
        fail(&mut errors, "spec.pool.name", e);
    }
    if spec.pool.resource_slice_count <= 0 {
        fail(
            &mut errors,
            "spec.pool.resourceSliceCount",
            "must be greater than zero".into(),
        );
    }
    if spec.pool.generation < 0 {
        fail(
            &mut errors,
            "spec.pool.generation",
            "must be greater than or equal to zero".into(),
        );
    }
    let mut set = Vec::new();
    match spec.node_name.as_deref() {
        Some("") => fail(
            &mut errors,
            "spec.nodeName",
            "must be either unset or set to a non-empty string".into(),
        ),
        Some(name) => {
            set.push("nodeName");
            if let Err(e) = dns_subdomain(name) {
                fail(&mut errors, "spec.nodeName", e);
            }
        }
        None => {}
    }
    if let Some(selector) = &spec.node_selector {
        set.push("nodeSelector");
        if selector.node_selector_terms.len() != 1 {
            fail(
                &mut errors,
                "spec.nodeSelector.nodeSelectorTerms",
                "must have exactly one node selector term".into(),
            );
        }
    }
    for (flag, name) in [
        (spec.all_nodes, "allNodes"),
        (spec.per_device_node_selection, "perDeviceNodeSelection"),
    ] {
        match flag {
            Some(true) => set.push(name),
            Some(false) => fail(
                &mut errors,
                &format!("spec.{name}"),
                "must be either unset or set to true".into(),
            ),
            None => {}
        }
    }
    if set.len() != 1 {
        fail(
            &mut errors,
            "spec",
            format!(
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required (set: {})",
                set.join(", ")
            ),
        );
    }
    let devices = spec.devices.as_deref().unwrap_or_default();
    if spec.shared_counters.is_some() && spec.devices.is_some() {
        fail(
            &mut errors,
            "spec",
            "only one of `sharedCounters` or `devices` is allowed".into(),
        );
    }
    let advanced = devices.iter().any(|d| {
        d.taints.as_ref().is_some_and(|t| !t.is_empty())
            || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
            || d.attributes.iter().flatten().any(|(_, a)| is_list(a))
    });
    let max = if advanced { MAX_DEVICES_ADVANCED } else { MAX_DEVICES };
    if devices.len() > max {
        fail(
            &mut errors,
            "spec.devices",
            format!("{} devices, must have at most {max}", devices.len()),
        );
    }
    let per_device = spec.per_device_node_selection == Some(true);
    let mut names = BTreeSet::new();
    for (i, device) in devices.iter().enumerate() {
        let path = format!("spec.devices[{i}]");
        if !names.insert(device.name.as_str()) {
            fail(
                &mut errors,
                &format!("{path}.name"),
                format!("duplicate value {:?}", device.name),
            );
        }
        for error in device_errors(device, per_device) {
            errors.push(format!("{path}{error}"));
        }
    }
    errors
}

/// One device's errors, each `.field: message` (or `: message`).
fn device_errors(device: &Device, per_device_node_selection: bool) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = dns_label(&device.name) {
        errors.push(format!(".name: {e}"));
    }
    let attributes = device.attributes.clone().unwrap_or_default();
    let count = attributes.len() + device.capacity.as_ref().map_or(0, |c| c.len());
    if count > MAX_ATTRIBUTES {
        errors.push(format!(
            ": {count} attributes and capacities, must not exceed {MAX_ATTRIBUTES}"
        ));
    }
    let values: usize = attributes.values().map(value_count).sum();
    if values > MAX_ATTRIBUTE_VALUES {
        errors.push(format!(
            ": {values} attribute values, must not exceed {MAX_ATTRIBUTE_VALUES}"
        ));
    }
    for (name, value) in &attributes {
        if let Err(e) = qualified_name(name) {
            errors.push(format!(".attributes[{name}]: {e}"));
        }
        if let Err(e) = attribute_value(value) {
            errors.push(format!(".attributes[{name}]: {e}"));
        }
    }
    if let Some(capacity) = &device.capacity {
        for name in capacity.keys() {
            if let Err(e) = qualified_name(name) {
                errors.push(format!(".capacity[{name}]: {e}"));
            }
        }
    }
    if !per_device_node_selection
        && (device.node_name.is_some() || device.node_selector.is_some() || device.all_nodes.is_some())
    {
        errors.push(
            ": `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
                .into(),
        );
    }
    errors
}

fn is_list(value: &DeviceAttribute) -> bool {
    value.bools.is_some() || value.ints.is_some() || value.strings.is_some() || value.versions.is_some()
}

/// How many values an attribute counts for (`numEntriesDeviceAttribute`):
/// a list its items, anything else one.
fn value_count(value: &DeviceAttribute) -> usize {
    let items = value.bools.as_ref().map_or(0, Vec::len)
        + value.ints.as_ref().map_or(0, Vec::len)
        + value.strings.as_ref().map_or(0, Vec::len)
        + value.versions.as_ref().map_or(0, Vec::len);
    items.max(1)
}

/// Exactly one kind of value; strings and versions at most 64 bytes; lists
/// not empty.
fn attribute_value(value: &DeviceAttribute) -> Result<(), String> {
    let scalars = [
        value.int.is_some(),
        value.bool.is_some(),
        value.string.is_some(),
        value.version.is_some(),
    ];
    let lists = [
        value.ints.as_ref().map(Vec::len),
        value.bools.as_ref().map(Vec::len),
        value.strings.as_ref().map(Vec::len),
        value.versions.as_ref().map(Vec::len),
    ];
    let kinds = scalars.iter().filter(|s| **s).count() + lists.iter().flatten().count();
    if kinds != 1 {
        return Err(format!("exactly one value must be specified ({kinds} given)"));
    }
    if lists.contains(&Some(0)) {
        return Err("a list must not be empty if specified".into());
    }
    let texts = value
        .string
        .iter()
        .chain(&value.version)
        .chain(value.strings.iter().flatten())
        .chain(value.versions.iter().flatten());
    for text in texts {
        if text.len() > MAX_VALUE_LENGTH {
            return Err(format!("{text:?} is longer than {MAX_VALUE_LENGTH} bytes"));
        }
    }
    Ok(())
}

/// An attribute or capacity name: `ID` or `domain/ID`.
pub(crate) fn qualified_name(name: &str) -> Result<(), String> {
    let (domain, id) = match name.split_once('/') {
        None => (None, name),
        Some((_, rest)) if rest.contains('/') => return Err(format!("{name:?} has more than one slash")),
        Some((domain, id)) => (Some(domain), id),
    };
    if let Some(domain) = domain {
        if domain.is_empty() {
            return Err("the domain must not be empty".into());
        }
        driver_name(domain).map_err(|e| format!("domain {domain:?}: {e}"))?;
    }
    if id.is_empty() {
        return Err("the name must not be empty".into());
    }
    if id.len() > MAX_ID_LENGTH {
        return Err(format!("{id:?} is longer than {MAX_ID_LENGTH} characters"));
    }
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "{id:?} is not a C identifier (letters, digits and `_`, not starting with a digit)"
        ));
    }
    Ok(())
}

/// A driver name (`ValidateCSIDriverName`): at most 63 characters, a DNS
/// subdomain once lower-cased.
pub(crate) fn driver_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("required".into());
    }
    if name.len() > MAX_DRIVER_LENGTH {
        return Err(format!("longer than {MAX_DRIVER_LENGTH} characters"));
    }
    dns_subdomain(&name.to_lowercase())
}

/// A pool name: at most 253 characters, every `/` part a DNS subdomain.
pub(crate) fn pool_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("required".into());
    }
    if name.len() > MAX_SUBDOMAIN_LENGTH {
        return Err(format!("longer than {MAX_SUBDOMAIN_LENGTH} characters"));
    }
    name.split('/').try_for_each(dns_subdomain)
}

/// A DNS-1123 label: at most 63 of `a-z`, `0-9`, `-`, starting and ending
/// with a letter or digit.
pub(crate) fn dns_label(value: &str) -> Result<(), String> {
    if value.len() > MAX_LABEL_LENGTH {
        return Err(format!("{value:?} is longer than {MAX_LABEL_LENGTH} characters"));
    }
    if label_ok(value) {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a DNS-1123 label (lower-case letters, digits and `-`, starting and ending with a letter or digit)"
        ))
    }
}

/// A DNS-1123 subdomain: at most 253 characters, labels joined by `.`.
pub(crate) fn dns_subdomain(value: &str) -> Result<(), String> {
    if value.len() > MAX_SUBDOMAIN_LENGTH {
        return Err(format!("{value:?} is longer than {MAX_SUBDOMAIN_LENGTH} characters"));
    }
    if value.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a DNS-1123 subdomain (lower-case letters, digits, `-` and `.`, starting and ending with a letter or digit)"
        ))
    }
}

fn label_ok(label: &str) -> bool {
    let bytes = label.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => edge(first) && edge(last) && bytes.iter().all(|b| edge(b) || *b == b'-'),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_api_server_checks_them() {
        assert!(dns_label("pci-0000-3b-00-0").is_ok());
        for bad in ["", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(dns_label(bad).is_err(), "{bad:?}");
        }
        assert!(dns_subdomain("worker-1.example.com").is_ok());
        for bad in ["", "a..b", ".a", "a_b", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert!(driver_name("GPU.Example.com").is_ok(), "compared in lower case");
        assert!(driver_name(&format!("{}.io", "a".repeat(61))).is_err());
        assert!(pool_name("node-1/pool").is_ok());
        assert!(pool_name("node-1//pool").is_err());
        assert!(qualified_name("resource.kubernetes.io/pcieRoot").is_ok());
        assert!(qualified_name("pciAddress").is_ok());
        for bad in [
            "/x",
            "a.io/",
            "a.io/1x",
            "a.io/b-c",
            "a.io/b/c",
            "Bad_Domain!/x",
            &"x".repeat(33),
        ] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
    }
}

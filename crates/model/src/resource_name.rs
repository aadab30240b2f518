//! Which class a resource name belongs to, decided once, with the rules of
//! Kubernetes' `v1helper` (`IsHugePageResourceName`, `IsNativeResource`,
//! `IsExtendedResourceName`, `IsScalarResourceName`): the fit check, pod
//! validation, warnings, the fleet's NRT filter and every table that sorts
//! resources read these functions instead of looking at the text
//! themselves.
//!
//! Owns: the names `cpu`, `memory`, `ephemeral-storage`, the `hugepages-`
//! prefix and the class rules. Must not touch: what a manager does with a
//! resource.

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `ephemeral-storage`.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The prefix of a huge page resource (`hugepages-2Mi`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// The Kubernetes resource name of a huge page size: `hugepages-2Mi`,
/// `hugepages-1Gi` (the canonical binary-SI form of the size).
pub fn hugepage_resource_name(page_size: u64) -> String {
    const KI: u64 = 1024;
    let (value, suffix) = [
        (KI * KI * KI * KI, "Ti"),
        (KI * KI * KI, "Gi"),
        (KI * KI, "Mi"),
        (KI, "Ki"),
    ]
    .into_iter()
    .find(|(unit, _)| page_size.is_multiple_of(*unit))
    .map_or((page_size, ""), |(unit, suffix)| (page_size / unit, suffix));
    format!("{HUGEPAGES_PREFIX}{value}{suffix}")
}

/// `IsHugePageResourceName`: `hugepages-<size>`.
pub fn is_hugepages(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

/// `memory` or a huge page resource: what the memory manager places.
pub fn is_memory_like(name: &str) -> bool {
    name == MEMORY || is_hugepages(name)
}

/// `cpu`, `memory` or huge pages: what the CPU and memory managers place
/// on NUMA nodes (device resources are the device manager's).
pub fn is_cpu_or_memory(name: &str) -> bool {
    name == CPU || is_memory_like(name)
}

/// `IsPrefixedNativeResource`: the name contains `kubernetes.io/`.
pub fn is_prefixed_native(name: &str) -> bool {
    name.contains("kubernetes.io/")
}

/// `IsNativeResource`: unqualified names (`cpu`, `hugepages-1Gi`) and
/// `kubernetes.io/` ones.
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || is_prefixed_native(name)
}

/// `IsExtendedResourceName`: a qualified name outside `kubernetes.io/`
/// that stays a valid qualified name behind the quota prefix `requests.`
/// (`nvidia.com/gpu`, `example.com/nic`). Device-plugin resources are
/// extended resources.
pub fn is_extended(name: &str) -> bool {
    const QUOTA_PREFIX: &str = "requests.";
    if is_native(name) || name.starts_with(QUOTA_PREFIX) {
        return false;
    }
    // `requests.<name>` is spelled out on the stack: the fit check asks
    // this for every extended resource of every admission.
    let mut spelled = [0u8; 320];
    let len = QUOTA_PREFIX.len() + name.len();
    if len <= spelled.len() {
        spelled[..QUOTA_PREFIX.len()].copy_from_slice(QUOTA_PREFIX.as_bytes());
        spelled[QUOTA_PREFIX.len()..len].copy_from_slice(name.as_bytes());
        if let Ok(quota_name) = std::str::from_utf8(&spelled[..len]) {
            return is_qualified_name(quota_name);
        }
    }
    is_qualified_name(&format!("{QUOTA_PREFIX}{name}"))
}

/// `IsScalarResourceName`: the resources the fit check counts by name
/// (extended, huge pages, `kubernetes.io/` and attachable volumes).
pub fn is_scalar(name: &str) -> bool {
    is_extended(name) || is_hugepages(name) || is_prefixed_native(name) || name.starts_with("attachable-volumes-")
}

/// apimachinery `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123
/// subdomain, name at most 63 characters of `[-A-Za-z0-9_.]` starting and
/// ending alphanumeric.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        None => (None, value),
        Some((_, rest)) if rest.contains('/') => return false,
        Some((prefix, name)) => (Some(prefix), name),
    };
    if prefix.is_some_and(|p| !is_dns1123_subdomain(p)) {
        return false;
    }
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            name.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// apimachinery `IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// labels of `[a-z0-9-]` that start and end alphanumeric.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    is_lower_alnum(*first)
                        && is_lower_alnum(*last)
                        && bytes.iter().all(|b| is_lower_alnum(*b) || *b == b'-')
                }
                _ => false,
            }
        })
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugepage_names_are_canonical() {
        assert_eq!(hugepage_resource_name(2 << 20), "hugepages-2Mi");
        assert_eq!(hugepage_resource_name(1 << 30), "hugepages-1Gi");
        assert_eq!(hugepage_resource_name(64 << 10), "hugepages-64Ki");
    }

    #[test]
    fn classes() {
        // name, native, extended, scalar, cpu or memory
        for (name, native, extended, scalar, cpu_or_memory) in [
            ("cpu", true, false, false, true),
            ("memory", true, false, false, true),
            ("hugepages-1Gi", true, false, true, true),
            ("ephemeral-storage", true, false, false, false),
            ("nvidia.com/gpu", false, true, true, false),
            ("example.com/nic", false, true, true, false),
            ("example.com/Big_Name.1", false, true, true, false),
            ("kubernetes.io/foo", true, false, true, false),
            ("storage.kubernetes.io/foo", true, false, true, false),
            ("attachable-volumes-aws-ebs", true, false, true, false),
            ("requests.example.com/x", false, false, false, false),
            ("Example.com/x", false, false, false, false),
            ("example.com/-x", false, false, false, false),
            ("example.com/a/b", false, false, false, false),
            ("example..com/x", false, false, false, false),
            ("example.com/", false, false, false, false),
        ] {
            assert_eq!(is_native(name), native, "native {name}");
            assert_eq!(is_extended(name), extended, "extended {name}");
            assert_eq!(is_scalar(name), scalar, "scalar {name}");
            assert_eq!(is_cpu_or_memory(name), cpu_or_memory, "cpu or memory {name}");
        }
        // The quota prefix counts against the 253 characters of a DNS
        // subdomain; names past the stack buffer take the heap path.
        let label = "a".repeat(63);
        let fits = format!("{label}.{label}.{label}.{}/x", "a".repeat(52));
        assert!(is_extended(&fits), "{} characters with the prefix", fits.len() + 9);
        let too_long = format!("{label}.{label}.{label}.{}/x", "a".repeat(53));
        assert!(!is_extended(&too_long));
        assert!(!is_extended(&format!("{}/x", "a.".repeat(200))));
    }
}

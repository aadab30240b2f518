//! The generator's pod step: DRA-backed extended resources (KEP-5004).
//!
//! In some cases ([`SHARE`] percent) the case becomes one with a `pod`: the
//! step adds DeviceClasses with `spec.extendedResourceName` (sometimes two
//! for one name, created at different times or at the same time, listed
//! before or after each other), the node's `status.allocatable` (what
//! device plugins serve: sometimes a resource a class also names, sometimes
//! at 0), and a pod whose containers, init containers and sidecars request
//! those resources — by their extended name, by a class's implicit name
//! `deviceclass.resource.kubernetes.io/<class>`, by a name only the device
//! plugin serves, by a name nothing serves, now and then a fractional
//! amount — beside the case's own claims (kept in about half the cases).
//!
//! The step draws from a stream of its own, forked from the case's stream
//! after the base case is made, so a seed it leaves alone names the same
//! case as before the step existed. It only adds: classes after the base
//! ones, the node's status, the `pod`; it may drop the claims.

use serde_json::{Value, json};

use super::{GPU, NIC};
use crate::rng::Rng;

/// Percent of cases that get a pod.
pub const SHARE: u64 = 35;

const GPU_RESOURCE: &str = "example.com/gpu";
const NIC_RESOURCE: &str = "example.com/nic";
/// Served by a device plugin (the node's allocatable), no class names it.
const PLUGIN_RESOURCE: &str = "example.com/fpga";
/// A class names it, but the class selects no device.
const EMPTY_RESOURCE: &str = "example.com/tpu";
/// Nothing serves it.
const UNKNOWN_RESOURCE: &str = "example.com/unknown";
const IMPLICIT: &str = "deviceclass.resource.kubernetes.io/";

/// Turns the base case into one with a pod, or leaves it alone (false).
pub fn add(rng: &mut Rng, case: &mut Value) -> bool {
    if !rng.chance(SHARE) {
        return false;
    }
    let mut classes = Vec::new();
    let base_time = "2025-03-01T00:00:00Z";
    let mut first = json!({"metadata": {"name": "ext-gpu"}, "spec": {
        "selectors": [{"cel": {"expression": format!("device.driver == \"{GPU}\"")}}],
        "extendedResourceName": GPU_RESOURCE,
    }});
    if rng.chance(80) {
        first["metadata"]["creationTimestamp"] = json!(base_time);
    }
    classes.push(first);
    // Resource names a container may ask for, with weights.
    let mut names: Vec<(u64, String)> = vec![
        (40, GPU_RESOURCE.to_owned()),
        (8, format!("{IMPLICIT}gpu")),
        (6, format!("{IMPLICIT}ext-gpu")),
        (10, PLUGIN_RESOURCE.to_owned()),
        (3, UNKNOWN_RESOURCE.to_owned()),
    ];
    if rng.chance(40) {
        // A rival for the same name: the newer one wins, then the lower name.
        let name = *rng.pick(&["ext-gpu-big", "a-gpu-big"]);
        let created = *rng.pick(&["2025-01-01T00:00:00Z", base_time, "2025-06-01T00:00:00Z"]);
        classes.push(json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {
            "selectors": [
                {"cel": {"expression": format!("device.driver == \"{GPU}\"")}},
                {"cel": {"expression": format!("device.capacity[\"{GPU}\"].memory.compareTo(quantity(\"80Gi\")) >= 0")}},
            ],
            "extendedResourceName": GPU_RESOURCE,
        }}));
        names.push((8, format!("{IMPLICIT}{name}")));
    }
    if rng.chance(60) {
        classes.push(json!({"metadata": {"name": "ext-nic"}, "spec": {
            "selectors": [{"cel": {"expression": format!("device.driver == \"{NIC}\"")}}],
            "extendedResourceName": NIC_RESOURCE,
        }}));
        names.push((15, NIC_RESOURCE.to_owned()));
        names.push((3, format!("{IMPLICIT}nic")));
    }
    if rng.chance(15) {
        classes.push(json!({"metadata": {"name": "ext-tpu"}, "spec": {
            "selectors": [{"cel": {"expression": "device.driver == \"tpu.example.com\""}}],
            "extendedResourceName": EMPTY_RESOURCE,
        }}));
        names.push((6, EMPTY_RESOURCE.to_owned()));
    }
    if let Some(list) = case["deviceClasses"].as_array_mut() {
        list.extend(classes);
    }

    let mut allocatable = json!({"cpu": "62", "memory": "250Gi", "pods": "110"});
    if rng.chance(70) {
        allocatable[PLUGIN_RESOURCE] = json!(*rng.pick(&["2", "4"]));
    }
    if rng.chance(15) {
        // A device plugin serves the class's resource too (or says 0: DRA's).
        allocatable[GPU_RESOURCE] = json!(*rng.pick(&["4", "0"]));
    }
    case["node"]["status"] = json!({"allocatable": allocatable});

    let mut index = 0;
    let init: Vec<Value> = (0..*rng.weighted(&[(55, 0usize), (30, 1), (15, 2)]))
        .map(|_| {
            let mut c = container(rng, &names, "init", &mut index);
            if rng.chance(40) {
                c["restartPolicy"] = json!("Always");
            }
            c
        })
        .collect();
    let containers: Vec<Value> = (0..*rng.weighted(&[(55, 1usize), (30, 2), (15, 3)]))
        .map(|_| container(rng, &names, "main", &mut index))
        .collect();
    let mut spec = json!({"containers": containers});
    if !init.is_empty() {
        spec["initContainers"] = Value::Array(init);
    }
    if rng.chance(50) {
        case["claims"] = json!([]);
    }
    case["pod"] = json!({
        "metadata": {"name": "pod", "namespace": "default", "uid": "00000000-0000-0000-0000-00000000c0de"},
        "spec": spec,
    });
    true
}

/// A container with CPU and memory and, most of the time, one or two
/// extended resources.
fn container(rng: &mut Rng, names: &[(u64, String)], kind: &str, index: &mut usize) -> Value {
    let name = format!("{kind}-{index}");
    *index += 1;
    let mut limits = serde_json::Map::new();
    limits.insert("cpu".into(), json!("1"));
    limits.insert("memory".into(), json!("1Gi"));
    let extended = *rng.weighted(&[(30, 0usize), (55, 1), (15, 2)]);
    for _ in 0..extended {
        let resource = rng.weighted(names).clone();
        let amount = *rng.weighted(&[(60, "1"), (28, "2"), (9, "3"), (3, "500m")]);
        limits.insert(resource, json!(amount));
    }
    let limits = Value::Object(limits);
    // A limit alone becomes the request (API defaulting); sometimes both.
    let resources = if rng.chance(30) {
        json!({"requests": limits.clone(), "limits": limits})
    } else {
        json!({"limits": limits})
    };
    json!({"name": name, "image": "registry.example/app:1", "resources": resources})
}

#[cfg(test)]
mod tests {
    use topoalign_dra::{AllocationCase, PodOutcome};

    use super::super::{DraCase, base, case};
    use crate::release::Release;

    const RELEASES: [Release; 4] = [Release(34), Release(35), Release(36), Release(37)];

    fn fnv(hash: &mut u64, text: &str) {
        for byte in text.bytes() {
            *hash ^= u64::from(byte);
            *hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Before the pod step every seed names the case it named before the
    /// step existed: FNV-1a of the JSON of seeds 0..100 and 10,000..10,050
    /// (where the ledger's runs end) of every release, as `difftest dra
    /// --print` of the generator before the step (commit 14b730c) printed
    /// them. A change meant to change the base cases updates the number
    /// (and leaves the ledger's seeds meaning other cases); the pod step
    /// never may.
    #[test]
    fn before_the_pod_step_seeds_name_their_old_cases() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for release in RELEASES {
            for seed in (0..100).chain(10_000..10_050) {
                let (value, _) = base(release, seed);
                let case: AllocationCase = serde_json::from_value(value).expect("a valid case");
                fnv(&mut hash, &serde_json::to_string(&case).expect("serializes"));
            }
        }
        assert_eq!(hash, 0xa333_e0a7_9223_e505, "the cases of old seeds changed");
    }

    /// The step turns about a third of the cases into cases with a pod; it
    /// leaves the others exactly as they were, and in its own cases only
    /// adds classes (after the base ones), the node's status and the pod,
    /// and may drop the claims. Over the seeds it makes each kind of pod
    /// it is there for.
    #[test]
    fn a_share_of_cases_gets_a_pod_and_the_rest_stays() {
        let mut kinds = std::collections::BTreeMap::<&str, u32>::new();
        for release in RELEASES {
            let mut pods = 0;
            for seed in 0..300 {
                let (before, _) = base(release, seed);
                let before: AllocationCase = serde_json::from_value(before).expect("a valid case");
                let before = serde_json::to_value(&before).expect("serializes");
                let generated = case(release, seed);
                let after = serde_json::to_value(&generated).expect("serializes");
                if let DraCase::Plain(_) = generated {
                    assert_eq!(after, before, "seed {seed}");
                    continue;
                }
                pods += 1;
                for field in ["resourceSlices", "allocatedClaims"] {
                    assert_eq!(after[field], before[field], "seed {seed}: {field}");
                }
                assert_eq!(after["node"]["metadata"]["name"], before["node"]["metadata"]["name"]);
                let base_classes = before["deviceClasses"].as_array().expect("classes");
                let classes = after["deviceClasses"].as_array().expect("classes");
                assert!(classes.len() > base_classes.len(), "seed {seed}: no class added");
                for (a, b) in classes.iter().zip(base_classes) {
                    assert_eq!(a["metadata"]["name"], b["metadata"]["name"], "seed {seed}");
                }
                let claims = after["claims"].as_array().map_or(0, Vec::len);
                let base_claims = before["claims"].as_array().map_or(0, Vec::len);
                assert!(claims == 0 || claims == base_claims, "seed {seed}: claims changed");
                *kinds
                    .entry(if claims == 0 { "no claims" } else { "claims" })
                    .or_default() += 1;

                let text = after["pod"].to_string();
                let extra = serde_json::to_string(&after["deviceClasses"]).expect("serializes");
                for (kind, found) in [
                    ("sidecar", text.contains("\"Always\"")),
                    ("implicit name", text.contains("deviceclass.resource.kubernetes.io/")),
                    ("device plugin", text.contains(super::PLUGIN_RESOURCE)),
                    ("fractional", text.contains("500m")),
                    ("rival class", extra.contains("gpu-big")),
                    (
                        "plugin serves the class's resource",
                        after["node"]["status"]["allocatable"]
                            .get(super::GPU_RESOURCE)
                            .is_some(),
                    ),
                ] {
                    if found {
                        *kinds.entry(kind).or_default() += 1;
                    }
                }
                if release.0 >= 36
                    && let PodOutcome::Allocated {
                        extended_resource_claim: Some(claim),
                        ..
                    } = generated.decide()
                    && !claim.requests.is_empty()
                {
                    *kinds.entry("special claim").or_default() += 1;
                }
            }
            assert!(
                (60..=150).contains(&pods),
                "{release:?}: {pods} of 300 cases with a pod"
            );
        }
        for kind in [
            "claims",
            "no claims",
            "sidecar",
            "implicit name",
            "device plugin",
            "fractional",
            "rival class",
            "plugin serves the class's resource",
            "special claim",
        ] {
            assert!(
                kinds.get(kind).copied().unwrap_or(0) > 0,
                "no case with {kind}: {kinds:?}"
            );
        }
    }
}

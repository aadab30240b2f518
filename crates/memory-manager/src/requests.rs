//! What a container or a pod asks of the memory manager: the `memory` and
//! `hugepages-*` requests in bytes (kubelet `getRequestedResources` and
//! `getPodRequestedResources`).
//!
//! Owns: reading requests and the pod-level sum rules for init containers
//! and sidecars. Must not touch: the machine state.

use std::collections::BTreeMap;

use topoalign_model::{Container, Pod, Quantity};

use crate::machine_state::{MEMORY, is_hugepage_resource};

/// Requested bytes per memory resource, the names borrowed from the pod.
pub(crate) type Requested<'a> = BTreeMap<&'a str, u64>;

/// A request the kubelet cannot read as a whole number of bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[memorymanager] failed to represent quantity as int64")]
pub(crate) struct UnrepresentableRequest;

/// The Go `uint64(q.AsInt64())` of a quantity: `None` where `AsInt64()`
/// fails — an amount Go holds as an `inf.Dec` or with a scale below units
/// (`1.5Gi`, `1073741824000m`), whole or not; a negative amount wraps, as
/// in Go.
pub(crate) fn quantity_as_u64(quantity: Quantity) -> Option<u64> {
    // Go converts the int64 to uint64 bit for bit.
    quantity.as_int64().map(|units| units as u64)
}

/// The container's memory and huge page requests.
///
/// # Errors
/// [`UnrepresentableRequest`] for a request that is not a whole number of
/// bytes in `int64` range.
pub(crate) fn container_requests(container: &Container) -> Result<Requested<'_>, UnrepresentableRequest> {
    let mut requested = Requested::new();
    add_container_requests(&mut requested, container)?;
    Ok(requested)
}

/// Adds the container's memory and huge page requests to `total`.
fn add_container_requests<'a>(
    total: &mut Requested<'a>,
    container: &'a Container,
) -> Result<(), UnrepresentableRequest> {
    for (name, &quantity) in &container.requests {
        if name.as_str() != MEMORY && !is_hugepage_resource(name) {
            continue;
        }
        let size = quantity_as_u64(quantity).ok_or(UnrepresentableRequest)?;
        match total.get_mut(name.as_str()) {
            Some(sum) => *sum = sum.wrapping_add(size),
            None => {
                total.insert(name.as_str(), size);
            }
        }
    }
    Ok(())
}

/// What the whole pod needs at its peak: for each resource the app
/// containers ask for, the larger of (app containers + sidecars) and the
/// largest moment of the init phase (an init container plus the sidecars
/// started before it). Resources only init containers ask for are left out,
/// as in the kubelet.
///
/// # Errors
/// [`UnrepresentableRequest`] as [`container_requests`].
pub(crate) fn pod_requests(pod: &Pod) -> Result<Requested<'_>, UnrepresentableRequest> {
    let mut apps = Requested::new();
    for app in &pod.containers {
        add_container_requests(&mut apps, app)?;
    }
    if pod.init_containers.is_empty() {
        // No init phase and no sidecars: the app containers' sums.
        return Ok(apps);
    }

    let mut init_peak = Requested::new();
    let mut sidecars = Requested::new();
    for init in &pod.init_containers {
        for (name, size) in container_requests(init)? {
            let peak = init_peak.entry(name).or_insert(0);
            let running_sidecars = sidecars.entry(name).or_insert(0);
            if init.restartable {
                *running_sidecars = running_sidecars.wrapping_add(size);
            } else if running_sidecars.wrapping_add(size) > *peak {
                *peak = running_sidecars.wrapping_add(size);
            }
        }
    }

    Ok(apps
        .into_iter()
        .map(|(name, app_total)| {
            let long_running = app_total.wrapping_add(sidecars.get(&name).copied().unwrap_or(0));
            let peak = init_peak.get(&name).copied().unwrap_or(0);
            (name, long_running.max(peak))
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod fixture {
    //! Pods and containers for tests, written as the kubelet's tests write
    //! theirs: requests only (limits are irrelevant here).

    use topoalign_model::{Container, Pod, QosClass, Quantity};

    /// A container with whole-unit requests.
    pub fn container(name: &str, requests: &[(&str, u64)]) -> Container {
        Container {
            name: name.to_string(),
            requests: requests
                .iter()
                .map(|&(r, v)| (r.to_string(), Quantity::from_units(i128::from(v))))
                .collect(),
            limits: Default::default(),
            restartable: false,
        }
    }

    /// A sidecar (an init container with `restartPolicy: Always`).
    pub fn sidecar(name: &str, requests: &[(&str, u64)]) -> Container {
        Container {
            restartable: true,
            ..container(name, requests)
        }
    }

    /// A Guaranteed pod.
    pub fn pod(uid: &str, init_containers: Vec<Container>, containers: Vec<Container>) -> Pod {
        Pod {
            namespace: "default".to_string(),
            name: uid.to_string(),
            uid: uid.to_string(),
            qos: QosClass::Guaranteed,
            init_containers,
            containers,
            overhead: Default::default(),
            pod_resources: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;

    const GI: u64 = 1 << 30;

    #[test]
    fn only_memory_and_huge_pages_are_read() {
        let c = container(
            "app",
            &[
                ("cpu", 2),
                ("memory", GI),
                ("hugepages-2Mi", 4 << 20),
                ("nvidia.com/gpu", 1),
            ],
        );
        let requested = container_requests(&c).expect("whole requests");
        assert_eq!(requested, [("hugepages-2Mi", 4 << 20), ("memory", GI)].into());
    }

    #[test]
    fn fractional_bytes_cannot_be_represented() {
        let mut c = container("app", &[]);
        c.requests.insert("memory".to_string(), Quantity::from_milli(1500));
        assert_eq!(container_requests(&c), Err(UnrepresentableRequest));
        assert_eq!(
            UnrepresentableRequest.to_string(),
            "[memorymanager] failed to represent quantity as int64"
        );
    }

    #[test]
    fn pod_requests_follow_the_sidecar_rules() {
        // (init containers, app containers, expected memory in Gi)
        let cases: Vec<(Vec<Container>, Vec<Container>, u64)> = vec![
            // Plain: the larger of the biggest init container and the apps.
            (
                vec![
                    container("i1", &[("memory", 3 * GI)]),
                    container("i2", &[("memory", GI)]),
                ],
                vec![container("a1", &[("memory", GI)]), container("a2", &[("memory", GI)])],
                3,
            ),
            (
                vec![container("i1", &[("memory", GI)])],
                vec![
                    container("a1", &[("memory", 2 * GI)]),
                    container("a2", &[("memory", 2 * GI)]),
                ],
                4,
            ),
            // A sidecar runs alongside later init containers and the apps.
            (
                vec![sidecar("s1", &[("memory", GI)]), container("i1", &[("memory", 4 * GI)])],
                vec![container("a1", &[("memory", GI)])],
                5,
            ),
            (
                vec![container("i1", &[("memory", 2 * GI)]), sidecar("s1", &[("memory", GI)])],
                vec![container("a1", &[("memory", 2 * GI)])],
                3,
            ),
        ];
        for (init, apps, expected_gi) in cases {
            let pod = pod("p", init, apps);
            let requested = pod_requests(&pod).expect("whole requests");
            assert_eq!(requested.get("memory").copied(), Some(expected_gi * GI));
        }
    }

    #[test]
    fn resources_only_init_containers_ask_for_are_dropped() {
        let p = pod(
            "p",
            vec![container("i1", &[("memory", GI), ("hugepages-1Gi", GI)])],
            vec![container("a1", &[("memory", GI)])],
        );
        assert_eq!(pod_requests(&p).expect("whole"), [("memory", GI)].into());
    }
}

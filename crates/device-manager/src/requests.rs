//! How many devices a container or a pod asks for, read the way the device
//! manager reads it: from *limits* (for extended resources requests must
//! equal limits, so the kubelet never looks at requests), counted with
//! `Quantity.Value()` (rounded up to a whole device; past `int64` wrapped
//! as Go wraps it, [`Quantity::go_value`]).
//!
//! Owns only the reading of requests; resources that are not device-plugin
//! resources are dropped here and never reach the device manager.

use topoalign_model::{Container, Pod, Quantity};

use crate::registry::Registry;

/// Devices asked for, per device-plugin resource in name order, the names
/// borrowed from the pod. Counts are Go's `int64` `Value()`, held as `i128`; a
/// count can be zero (a `0` limit still names the resource, and the kubelet
/// still gives it hints).
pub(crate) type DeviceRequests<'a> = Vec<(&'a str, i128)>;

/// The kubelet's `getContainerDeviceRequest`.
pub(crate) fn container_device_requests<'a>(registry: &Registry, container: &'a Container) -> DeviceRequests<'a> {
    device_requests(
        registry,
        container
            .limits
            .iter()
            .map(|(resource, quantity)| (resource.as_str(), *quantity)),
    )
}

/// The kubelet's `getPodDeviceRequest`: the pod's effective limits
/// (component-helpers `PodLimits` without overhead), device resources only.
pub(crate) fn pod_device_requests<'a>(registry: &Registry, pod: &'a Pod) -> DeviceRequests<'a> {
    // Each resource's effective limit depends on that resource's limits
    // only, so the other resources are dropped before summing.
    let keep = |resource: &str| registry.resource(resource).is_some();
    device_requests(registry, pod_limits(pod, keep).into_iter())
}

fn device_requests<'a>(registry: &Registry, limits: impl Iterator<Item = (&'a str, Quantity)>) -> DeviceRequests<'a> {
    limits
        .filter(|(resource, _)| registry.resource(resource).is_some())
        // `int(quantity.Value())`: Go's `Value()`, wrapped past `int64`.
        .map(|(resource, quantity)| (resource, i128::from(quantity.go_value())))
        .collect()
}

/// component-helpers `PodLimits` (v1.32, overhead excluded): the pod's
/// containers aggregated ([`Pod::aggregate_containers`]) over their
/// limits. Only the resources `keep` accepts are summed.
fn pod_limits(pod: &Pod, keep: impl Fn(&str) -> bool) -> topoalign_model::FlatMap<&str, Quantity> {
    pod.aggregate_containers_keyed(|container| &container.limits, keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{container, machine, pod, sidecar};
    use topoalign_model::Quantity;

    fn gpus(requests: DeviceRequests) -> Option<i128> {
        requests
            .iter()
            .find(|(resource, _)| *resource == "gpu")
            .map(|&(_, count)| count)
    }

    #[test]
    fn pod_limits_follow_the_sidecar_formula() {
        let registry = Registry::from_machine(&machine(1, &[("gpu", "gpu0@0")]));
        let app = || vec![container("app", &[("gpu", 1)]), container("cpu-only", &[("cpu", 2)])];
        let cases = [
            // (init containers, expected pod request)
            (vec![], 1),
            // app 1 + sidecar 1 = 2 < init 3 running next to the sidecar = 4
            (
                vec![sidecar("sidecar", &[("gpu", 1)]), container("init", &[("gpu", 3)])],
                4,
            ),
            // an init container that runs before the sidecar starts: max(2, 1 + 1)
            (
                vec![container("init", &[("gpu", 2)]), sidecar("sidecar", &[("gpu", 1)])],
                2,
            ),
            // two sidecars and a small init: 1 + 2 + 3 = 6
            (
                vec![
                    sidecar("s1", &[("gpu", 2)]),
                    container("init", &[("gpu", 1)]),
                    sidecar("s2", &[("gpu", 3)]),
                ],
                6,
            ),
        ];
        for (init, expected) in cases {
            let pod = pod("p", init, app());
            assert_eq!(gpus(pod_device_requests(&registry, &pod)), Some(expected), "{pod:?}");
        }
    }

    #[test]
    fn only_device_resources_count_and_fractions_round_up() {
        let registry = Registry::from_machine(&machine(1, &[("gpu", "gpu0@0")]));
        let mut app = container("app", &[("cpu", 2), ("example.com/unknown", 1)]);
        assert_eq!(container_device_requests(&registry, &app), DeviceRequests::new());
        app.limits.insert("gpu".to_owned(), Quantity::from_milli(1500));
        assert_eq!(gpus(container_device_requests(&registry, &app)), Some(2));
        app.limits.insert("gpu".to_owned(), Quantity::ZERO);
        assert_eq!(gpus(container_device_requests(&registry, &app)), Some(0));
    }

    /// Counts past `int64` are Go's `int(Value())`, wrapped (issue #29;
    /// the values a Go program printed with k8s.io/apimachinery v0.37.2):
    /// `1e19` (int64Amount{1, 19}) asks for 0 devices,
    /// `10000000000000000000` (inf.Dec) for -8446744073709551616.
    #[test]
    fn counts_past_int64_wrap_as_in_go() {
        use topoalign_model::GoForm;
        let registry = Registry::from_machine(&machine(1, &[("gpu", "gpu0@0")]));
        let mut app = container("app", &[("cpu", 2)]);
        let table = [
            (Quantity::from_scaled_nano(1, 28, GoForm::Int64 { scale: 19 }), 0),
            (
                Quantity::from_scaled_nano(1, 28, GoForm::Dec { scale: 9 }),
                -8_446_744_073_709_551_616,
            ),
            (Quantity::from_scaled_nano(1, 49, GoForm::Int64 { scale: 40 }), 0),
        ];
        for (limit, expected) in table {
            app.limits.insert("gpu".to_owned(), limit);
            assert_eq!(
                gpus(container_device_requests(&registry, &app)),
                Some(expected),
                "{limit}"
            );
        }
    }
}

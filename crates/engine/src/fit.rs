//! The kubelet's resource-fit admission check (the predicate admit
//! handler: `pkg/kubelet/lifecycle/predicate.go` → scheduler
//! `noderesources.Fits`), the node capacity and allocatable it checks
//! against (`nodestatus.MachineInfo`), and the start-up check that the
//! reservation does not exceed capacity (`validateNodeAllocatable`).
//!
//! Owns: [`NodeResources`] ([`node_resources`]), [`check_fit`] and its
//! [`FitFailure`] texts, [`validate_node_allocatable`], and `FitUsage` (the
//! admitted pods' requests summed, which the node keeps up to date as pods
//! come and go instead of re-adding them on every admission). Pure; must not
//! touch any manager's state — the engine runs it after the topology
//! manager's admission, with the other admitted pods.
//!
//! Node resources, as the conformance README "Interpretations" fixes them:
//! capacity `cpu` = logical CPUs, `memory` = sum of the NUMA nodes' memory
//! (huge pages included), `hugepages-<size>` = pool totals (2Mi and 1Gi
//! always listed, as cAdvisor does on x86-64), `pods` = `maxPods`, one entry
//! per device resource = its device count; no `ephemeral-storage`.
//! Allocatable = capacity − (systemReserved + kubeReserved + hard eviction)
//! for `cpu`, `memory` and huge pages (the resources the kubelet's container
//! manager knows), clamped at zero; memory then also loses the huge page
//! totals (clamped again); device resources are their (all healthy) device
//! counts.
//!
//! The fit check, in the kubelet's order, reports only the first shortfall:
//! too many pods, then `cpu` (millicores), `memory` (bytes),
//! `ephemeral-storage`, then the other scalar resources (huge pages,
//! extended resources) — which the kubelet visits in Go map order; here in
//! ascending name order. Extended resources the node does not list are
//! dropped from the pod's container requests first
//! (`removeMissingExtendedResources`).
//!
//! The device manager's `sanitizeNodeAllocatable` (raise a device
//! resource's allocatable to what is already in use) is
//! [`NodeResources::with_devices_in_use`]; with every device healthy it
//! never changes anything, so calling it is optional.

use std::collections::BTreeMap;

use topoalign_model::resource_name::{is_extended, is_hugepages, is_scalar};
use topoalign_model::{
    FlatMap, GoForm, Machine, Pod, Quantity, QuantityFormat, ResourceList, add_resources, hugepage_resource_name,
};

use crate::NodeConfig;
use crate::reservation::node_allocatable_reservation;

/// A node's capacity and allocatable resources, as its Node status reports
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeResources {
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
}

impl NodeResources {
    /// The kubelet's `sanitizeNodeAllocatable`: every device resource's
    /// allocatable raised to at least the number of its devices in use.
    #[must_use]
    pub fn with_devices_in_use(&self, in_use: &BTreeMap<String, usize>) -> NodeResources {
        let mut sanitized = self.clone();
        for (resource, &count) in in_use {
            let count = Quantity::from_units(i128::try_from(count).unwrap_or(i128::MAX));
            let allocatable = sanitized.allocatable.entry(resource.clone()).or_insert(count);
            if *allocatable < count {
                *allocatable = count;
            }
        }
        sanitized
    }
}

/// Why the resource-fit check refused a pod: the kubelet's
/// `PodAdmitResult` reason (`OutOfcpu`, `OutOfmemory`, `OutOfpods`,
/// `OutOfhugepages-1Gi`, `OutOfnvidia.com/gpu`, ...) and message (`Node
/// didn't have enough resource: cpu, requested: 2000, used: 15000,
/// capacity: 16000`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitFailure {
    pub reason: String,
    pub message: String,
}

/// The node's capacity and allocatable for `machine` under `config`.
pub fn node_resources(machine: &Machine, config: &NodeConfig) -> NodeResources {
    let units = |n: usize| Quantity::from_units(i128::try_from(n).unwrap_or(i128::MAX));
    let bytes = |n: u64| Quantity::from_units(i128::from(n)).with_format(QuantityFormat::BinarySI);

    // What the kubelet's container manager knows from cAdvisor: the only
    // resources a reservation applies to.
    let mut machine_capacity = ResourceList::new();
    machine_capacity.insert("cpu".to_owned(), units(machine.cpus().len()));
    machine_capacity.insert("memory".to_owned(), bytes(machine.total_memory()));
    let mut page_sizes = machine.hugepage_sizes();
    page_sizes.extend([2 << 20, 1 << 30]);
    for size in page_sizes {
        let total: u64 = machine
            .numa_nodes()
            .iter()
            .filter_map(|node| node.hugepages.get(&size))
            .sum();
        machine_capacity.insert(hugepage_resource_name(size), bytes(total));
    }
    let reservation = node_allocatable_reservation(&machine_capacity, config);

    let mut capacity = machine_capacity.clone();
    capacity.insert("pods".to_owned(), Quantity::from_units(i128::from(config.max_pods)));
    let mut allocatable = ResourceList::new();
    for (resource, amount) in &capacity {
        let reserved = reservation.get(resource).copied().unwrap_or_default();
        allocatable.insert(resource.clone(), clamp_at_zero(*amount - reserved));
    }
    for (resource, devices) in machine.devices() {
        capacity.insert(resource.clone(), units(devices.len()));
        allocatable.insert(resource.clone(), units(devices.len()));
    }
    let huge_pages: Vec<Quantity> = capacity
        .iter()
        .filter(|(resource, _)| is_hugepages(resource))
        .map(|(_, amount)| *amount)
        .collect();
    if let Some(memory) = allocatable.get_mut("memory") {
        for pool in huge_pages {
            *memory = clamp_at_zero(*memory - pool);
        }
    }
    NodeResources { capacity, allocatable }
}

/// One resource whose node-allocatable reservation exceeds its capacity,
/// both printed as the kubelet prints them (`%v` of a Go quantity).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverReserved {
    pub resource: String,
    pub reserved: String,
    pub capacity: String,
}

impl std::fmt::Display for OverReserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Resource {:?} has a reservation of {} but capacity of {}. Expected capacity >= reservation.",
            self.resource, self.reserved, self.capacity
        )
    }
}

/// `validateNodeAllocatable`'s refusal: every over-reserved resource, in
/// name order. Display is the kubelet's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid Node Allocatable configuration. {}", .over.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "))]
pub struct NodeAllocatableError {
    pub over: Vec<OverReserved>,
}

/// The kubelet's start-up check `validateNodeAllocatable`: no reservation
/// may exceed the capacity of its resource.
///
/// `reservation` is [`node_allocatable_reservation`] of the node's
/// capacity. Resources are checked in ascending name order (the kubelet:
/// Go map order, only visible when several are over-reserved).
///
/// # Errors
/// [`NodeAllocatableError`], whose message is the kubelet's text, e.g.
/// `invalid Node Allocatable configuration.
/// Resource "cpu" has a reservation of {{9400 -3} {<nil>}  DecimalSI} but
/// capacity of {{8000 -3} {<nil>}  DecimalSI}. Expected capacity >=
/// reservation.` — the kubelet formats the
/// quantities with `%v`, which prints Go's internal struct (see
/// `GoQuantity`).
pub fn validate_node_allocatable(
    resources: &NodeResources,
    reservation: &ResourceList,
) -> Result<(), NodeAllocatableError> {
    let over: Vec<OverReserved> = reservation
        .iter()
        .filter_map(|(resource, reserved)| {
            // The reservation's resources are the capacity's.
            let capacity = go_capacity(resource, resources.capacity.get(resource).copied()?);
            // Go: `value := capacity.DeepCopy(); value.Sub(v); value.Sign() < 0`.
            (capacity - *reserved).is_negative().then(|| OverReserved {
                resource: resource.clone(),
                reserved: GoQuantity::of(*reserved).to_string(),
                capacity: GoQuantity::of(capacity).to_string(),
            })
        })
        .collect();
    if over.is_empty() {
        Ok(())
    } else {
        Err(NodeAllocatableError { over })
    }
}

/// The predicate admit handler's resource-fit check of `pod` on `node`,
/// next to the `others` already admitted (not including `pod`).
///
/// # Errors
/// The first shortfall, as the kubelet reports it.
pub fn check_fit(node: &NodeResources, pod: &Pod, others: &[&Pod]) -> Result<(), FitFailure> {
    let usage = FitUsage::of(others.iter().copied());
    check_fit_with(&FitAllocatable::of(node), pod, &PodRequests::of(pod), &usage)
}

/// A node's allocatable as the fit check reads it, worked out once per
/// node rather than once per admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FitAllocatable(SchedulerResources);

impl FitAllocatable {
    pub(crate) fn of(node: &NodeResources) -> FitAllocatable {
        FitAllocatable(SchedulerResources::sum_of(&node.allocatable))
    }
}

/// What the admitted pods request together, as the fit check counts it:
/// kept up to date as pods come and go (see [`FitUsage::add`]), so that an
/// admission does not re-add every admitted pod's requests. Exact: the
/// amounts are whole `int64`s (millicores, bytes, units) added with Go's
/// wrapping, so adding a pod and subtracting it again leaves the sum as it
/// was.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct FitUsage {
    used: SchedulerResources,
    pods: usize,
}

/// One pod's requests as the fit check counts an admitted pod
/// ([`pod_request_totals`]), worked out once per admission: the check reads
/// them, then the node's [`FitUsage`] adds them. The names are the pod's
/// own, borrowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodRequests<'a>(BorrowedList<'a>);

/// Amounts per resource name, the names borrowed from a pod.
type BorrowedList<'a> = FlatMap<&'a str, Quantity>;

impl<'a> PodRequests<'a> {
    pub(crate) fn of(pod: &'a Pod) -> PodRequests<'a> {
        PodRequests(pod_requests(pod, |_| true))
    }
}

impl FitUsage {
    /// The usage of `pods`, all admitted.
    pub(crate) fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> FitUsage {
        let mut usage = FitUsage::default();
        for pod in pods {
            usage.add(&PodRequests::of(pod));
        }
        usage
    }

    /// Counts an admitted pod with these requests.
    pub(crate) fn add(&mut self, requests: &PodRequests) {
        self.used
            .add(requests.0.iter().map(|(resource, amount)| (*resource, amount)), |_| {
                false
            });
        self.pods += 1;
    }

    /// [`FitUsage::add`] on the node whose allocatable is `allocatable`: a
    /// name it lists as a scalar resource is one without reading the name
    /// again.
    pub(crate) fn add_on(&mut self, requests: &PodRequests, allocatable: &FitAllocatable) {
        self.used.add(
            requests.0.iter().map(|(resource, amount)| (*resource, amount)),
            |name| allocatable.0.scalar.contains_key(name),
        );
        self.pods += 1;
    }

    /// Stops counting `pod`, which [`FitUsage::add`] counted.
    pub(crate) fn remove(&mut self, pod: &Pod) {
        self.used.subtract(&PodRequests::of(pod).0);
        self.pods = self.pods.saturating_sub(1);
    }
}

/// [`check_fit`] against an allocatable already read and the admitted pods'
/// usage kept by the node; `requests` are [`PodRequests::of`] `pod`.
pub(crate) fn check_fit_with(
    allocatable: &FitAllocatable,
    pod: &Pod,
    requests: &PodRequests,
    usage: &FitUsage,
) -> Result<(), FitFailure> {
    let allocatable = &allocatable.0;
    let used = &usage.used;
    // Extended resources the node does not list are dropped from the pod's
    // container requests (not from its overhead). When none is dropped the
    // pod's totals are the requests asked.
    // (A name the node lists as a scalar resource is kept without reading
    // it again.)
    let kept = |resource: &str| allocatable.scalar.contains_key(resource) || !is_extended(resource);
    let filtered: BorrowedList<'_>;
    let asked_list = if requests.0.keys().all(|resource| kept(resource)) {
        &requests.0
    } else {
        filtered = pod_requests(pod, kept);
        &filtered
    };
    // `SetMaxResource` on an empty `Resource`: the named amounts here, the
    // scalar ones read in name order below; a negative amount counts as
    // zero.
    // Go's `Value()` / `MilliValue()`, wrapped past `int64` as Go wraps
    // them (`9Ei` of cpu is -1000 millicores: no cpu asked).
    let asked = |resource: &str| asked_list.get(resource).map_or(0, |amount| amount.go_value().max(0));
    let asked_milli_cpu = asked_list.get("cpu").map_or(0, |amount| amount.go_milli_value().max(0));

    let pods_used = i64::try_from(usage.pods).unwrap_or(i64::MAX);
    if pods_used.wrapping_add(1) > allocatable.pods {
        return Err(shortfall("pods", 1, pods_used, allocatable.pods));
    }
    let named = [
        ("cpu", asked_milli_cpu, used.milli_cpu, allocatable.milli_cpu),
        ("memory", asked("memory"), used.memory, allocatable.memory),
        (
            "ephemeral-storage",
            asked("ephemeral-storage"),
            used.ephemeral_storage,
            allocatable.ephemeral_storage,
        ),
    ];
    // Go's int64 arithmetic: the difference wraps too.
    for (resource, requested, used, capacity) in named {
        if requested > 0 && requested > capacity.wrapping_sub(used) {
            return Err(shortfall(resource, requested, used, capacity));
        }
    }
    let scalar = |resource: &str| {
        !matches!(resource, "cpu" | "memory" | "ephemeral-storage")
            && (allocatable.scalar.contains_key(resource) || is_scalar(resource))
    };
    for (resource, amount) in asked_list.iter().filter(|(resource, _)| scalar(resource)) {
        let requested = amount.go_value().max(0);
        let used = used.scalar.get(*resource).copied().unwrap_or(0);
        let capacity = allocatable.scalar.get(*resource).copied().unwrap_or(0);
        if requested > 0 && requested > capacity.wrapping_sub(used) {
            return Err(shortfall(resource, requested, used, capacity));
        }
    }
    Ok(())
}

fn shortfall(resource: &str, requested: i64, used: i64, capacity: i64) -> FitFailure {
    FitFailure {
        reason: format!("OutOf{resource}"),
        message: format!(
            "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    }
}

/// The scheduler framework's `Resource`: the amounts the fit check
/// compares — millicores, bytes, pod slots, and whole units of every other
/// scalar resource (huge pages, extended resources) — as Go's `int64`s:
/// read with `MilliValue()` / `Value()` ([`Quantity::go_milli_value`],
/// [`Quantity::go_value`]) and summed with Go's wrapping addition, so an
/// amount past `int64` counts as the kubelet counts it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct SchedulerResources {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    pods: i64,
    scalar: BTreeMap<String, i64>,
}

impl SchedulerResources {
    /// `NewResource`: a resource list read as amounts.
    fn sum_of(list: &ResourceList) -> Self {
        let mut resources = SchedulerResources::default();
        resources.add(
            list.iter().map(|(resource, amount)| (resource.as_str(), amount)),
            |_| false,
        );
        resources
    }

    /// `Resource.Add`. Names that are not scalar resources (e.g. a bare
    /// `foo`) are ignored, as the kubelet ignores them. `known_scalar`: names
    /// already known to be scalar resources (a shortcut, never a widening).
    fn add<'a>(&mut self, list: impl Iterator<Item = (&'a str, &'a Quantity)>, known_scalar: impl Fn(&str) -> bool) {
        for (resource, amount) in list {
            match resource {
                "cpu" => self.milli_cpu = self.milli_cpu.wrapping_add(amount.go_milli_value()),
                "memory" => self.memory = self.memory.wrapping_add(amount.go_value()),
                "pods" => self.pods = self.pods.wrapping_add(amount.go_value()),
                "ephemeral-storage" => self.ephemeral_storage = self.ephemeral_storage.wrapping_add(amount.go_value()),
                // A name already counted is a scalar resource: no need to
                // read it again.
                name => match self.scalar.get_mut(name) {
                    Some(sum) => *sum = sum.wrapping_add(amount.go_value()),
                    None if known_scalar(name) || is_scalar(name) => {
                        self.scalar.insert(name.to_owned(), amount.go_value());
                    }
                    None => {}
                },
            }
        }
    }

    /// Undoes [`Self::add`] of the same list.
    fn subtract(&mut self, list: &BorrowedList<'_>) {
        for (&resource, amount) in list {
            match resource {
                "cpu" => self.milli_cpu = self.milli_cpu.wrapping_sub(amount.go_milli_value()),
                "memory" => self.memory = self.memory.wrapping_sub(amount.go_value()),
                "pods" => self.pods = self.pods.wrapping_sub(amount.go_value()),
                "ephemeral-storage" => self.ephemeral_storage = self.ephemeral_storage.wrapping_sub(amount.go_value()),
                // Only scalar resources were counted.
                name => {
                    if let Some(used) = self.scalar.get_mut(name) {
                        *used = used.wrapping_sub(amount.go_value());
                        if *used == 0 {
                            // As if never added: a missing entry reads as 0.
                            self.scalar.remove(name);
                        }
                    }
                }
            }
        }
    }
}

/// The pod's effective requests as the scheduler and the resource-fit
/// check count them (see [`check_fit`]): app containers and sidecars
/// summed, or the largest init container when larger, plus overhead.
pub fn pod_request_totals(pod: &Pod) -> ResourceList {
    pod_requests(pod, |_| true)
}

/// component-helpers `PodRequests`: the containers' requests
/// ([`Pod::aggregate_containers`]) — or, for a resource the pod's `spec.resources`
/// requests, that amount instead — plus the pod overhead. Only requests
/// whose name `keep` accepts count. Keyed by owned or borrowed names (see
/// [`Pod::aggregate_containers_keyed`]).
///
/// The engine admits a pod with its pod-level resources already as its
/// release sees them (`pod_level::as_admitted`: dropped when the gate is
/// off, defaulted, only supported names); a pod not yet admitted is read as
/// a scheduler with the gate on reads it.
fn pod_requests<'a, K>(pod: &'a Pod, keep: impl Fn(&str) -> bool) -> FlatMap<K, Quantity>
where
    K: Ord + Clone + std::borrow::Borrow<str> + From<&'a str>,
{
    let mut total: FlatMap<K, Quantity> = pod.aggregate_containers_keyed(|container| &container.requests, &keep);
    if let Some(pod_level) = &pod.pod_resources {
        for (resource, amount) in &pod_level.requests {
            if keep(resource) && crate::pod_level::covers(resource) {
                total.insert(K::from(resource.as_str()), *amount);
            }
        }
    }
    add_resources(&mut total, &pod.overhead);
    total
}

fn clamp_at_zero(amount: Quantity) -> Quantity {
    if amount.is_negative() {
        Quantity::ZERO.with_format(amount.format())
    } else {
        amount
    }
}

/// A quantity as Go's `%v` prints a `resource.Quantity` *value*: its
/// internal struct `{{value scale} {<nil>}  Format}` (the `String` method
/// has a pointer receiver, so `fmt` does not call it; the cached string is
/// empty after arithmetic).
///
/// The `value × 10^scale` split is Go's own `int64Amount`, which
/// [`Quantity::go_form`] keeps from the parser through `Add`: `1G` is
/// `{1 9}`, `1500M` `{1500 6}`, `2.5` `{25 -1}`, `1e9` `{1 9}`, `500m`
/// `{500 -3}`, and a sum takes the finer scale of its terms (`1G` +
/// `1500M` is `{2500 6}`; adding `100Mi`, `{104857600 0}`, makes it
/// `{2604857600 0}`); v1.37 holds every reserved CPU amount in millicores
/// (`SetMilli`: `3` is `{3000 -3}`).
///
/// A reservation Go holds as an `inf.Dec` (summed past `int64`, or an
/// amount its parser could not take as `int64Amount`) prints as
/// `{{0 0} {0x…}  Format}`: the `int64Amount` zeroed and the `inf.Dec`
/// pointer's address, which no one can reproduce; the engine prints
/// [`DEC_ADDRESS_STAND_IN`] there (the differential test compares all but
/// the address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GoQuantity {
    value: i64,
    scale: i32,
    format: QuantityFormat,
    /// Go holds it as an `inf.Dec`.
    dec: bool,
}

/// The address printed for an `inf.Dec` reservation (see [`GoQuantity`]):
/// a Go heap address of the usual shape, fixed.
const DEC_ADDRESS_STAND_IN: &str = "0xc000012000";

impl GoQuantity {
    /// An amount in Go's form.
    fn of(amount: Quantity) -> Self {
        let format = amount.format();
        match amount.go_form() {
            // `ScaledValue` at its own scale is the `int64Amount`'s value.
            GoForm::Int64 { scale } => GoQuantity {
                value: amount.go_scaled_value(scale),
                scale,
                format,
                dec: false,
            },
            GoForm::Dec { .. } => GoQuantity {
                value: 0,
                scale: 0,
                format,
                dec: true,
            },
        }
    }
}

/// The container manager's capacity as Go builds it from cAdvisor's
/// numbers: CPUs in millicores (`NewMilliQuantity`), everything else in
/// whole units (`NewQuantity`), in the capacity's notation.
fn go_capacity(resource: &str, amount: Quantity) -> Quantity {
    if resource == "cpu" {
        Quantity::from_milli(amount.milli()).with_format(amount.format())
    } else {
        Quantity::from_units(amount.value()).with_format(amount.format())
    }
}

impl std::fmt::Display for GoQuantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let format = match self.format {
            QuantityFormat::DecimalSI => "DecimalSI",
            QuantityFormat::BinarySI => "BinarySI",
            QuantityFormat::DecimalExponent => "DecimalExponent",
        };
        if self.dec {
            return write!(f, "{{{{0 0}} {{{DEC_ADDRESS_STAND_IN}}}  {format}}}");
        }
        write!(f, "{{{{{} {}}} {{<nil>}}  {format}}}", self.value, self.scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_model::{Container, QosClass, UniformMachine};

    const KI: u64 = 1024;
    const MI: u64 = KI * KI;
    const GI: u64 = MI * KI;

    fn binary(bytes: u64) -> Quantity {
        Quantity::from_units(i128::from(bytes)).with_format(QuantityFormat::BinarySI)
    }

    fn cpus(milli: i128) -> Quantity {
        Quantity::from_milli(milli)
    }

    /// `numa` nodes of `memory` bytes and `hugepages_1gi` bytes of 1Gi
    /// pages each, `cpus_per_node` CPUs each, `gpus` GPUs on node 0.
    fn machine(numa: usize, cpus_per_node: u32, memory: u64, hugepages_1gi: u64, gpus: usize) -> Machine {
        let mut shape = UniformMachine::new(numa, cpus_per_node).memory_per_numa(memory);
        if hugepages_1gi > 0 {
            shape = shape.hugepages_per_numa(GI, hugepages_1gi);
        }
        for i in 0..gpus {
            shape = shape.device("nvidia.com/gpu", &format!("gpu{i}"), &[0]);
        }
        shape.build().expect("valid machine")
    }

    fn reserving(system: &[(&str, Quantity)], kube: &[(&str, Quantity)], eviction_memory: u64) -> NodeConfig {
        let list = |entries: &[(&str, Quantity)]| -> ResourceList {
            entries.iter().map(|(name, q)| ((*name).to_owned(), *q)).collect()
        };
        let mut config = NodeConfig {
            system_reserved: list(system),
            kube_reserved: list(kube),
            ..NodeConfig::default()
        };
        if eviction_memory > 0 {
            config
                .hard_eviction
                .insert("memory".to_owned(), binary(eviction_memory));
        }
        config
    }

    fn container(name: &str, requests: &[(&str, Quantity)]) -> Container {
        let requests: ResourceList = requests.iter().map(|(n, q)| ((*n).to_owned(), *q)).collect();
        Container {
            name: name.to_owned(),
            limits: requests.clone(),
            requests,
            restartable: false,
        }
    }

    fn pod(name: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
        Pod {
            namespace: "default".to_owned(),
            name: name.to_owned(),
            uid: name.to_owned(),
            qos: QosClass::Burstable,
            init_containers: init,
            containers: app,
            overhead: ResourceList::new(),
            pod_resources: None,
        }
    }

    fn app(name: &str, requests: &[(&str, Quantity)]) -> Pod {
        pod(name, vec![], vec![container("app", requests)])
    }

    fn failure(reason: &str, message: &str) -> Result<(), FitFailure> {
        Err(FitFailure {
            reason: reason.to_owned(),
            message: message.to_owned(),
        })
    }

    /// conformance 1020: 24 CPUs, one 16Gi node, systemReserved cpu 2 /
    /// memory 2048Mi, kubeReserved cpu 1, default eviction.
    fn node_1020() -> NodeResources {
        let machine = machine(1, 24, 16 * GI, 0, 0);
        let config = reserving(
            &[("cpu", cpus(2000)), ("memory", binary(2048 * MI))],
            &[("cpu", cpus(1000))],
            100 * MI,
        );
        node_resources(&machine, &config)
    }

    #[test]
    fn capacity_and_allocatable_of_conformance_1020() {
        let node = node_1020();
        assert_eq!(node.capacity.get("cpu").copied().unwrap(), cpus(24_000));
        assert_eq!(node.capacity.get("memory").copied().unwrap(), binary(16 * GI));
        assert_eq!(node.capacity.get("pods").copied().unwrap(), Quantity::from_units(110));
        assert_eq!(node.capacity.get("hugepages-2Mi").copied().unwrap(), binary(0));
        assert_eq!(node.capacity.get("hugepages-1Gi").copied().unwrap(), binary(0));
        assert!(!node.capacity.contains_key("ephemeral-storage"));
        assert_eq!(node.allocatable.get("cpu").copied().unwrap(), cpus(21_000));
        assert_eq!(node.allocatable.get("memory").copied().unwrap().value(), 14_927_527_936);
        assert_eq!(
            node.allocatable.get("pods").copied().unwrap(),
            Quantity::from_units(110)
        );
    }

    #[test]
    fn huge_pages_and_devices_in_capacity_and_allocatable() {
        // Two nodes of 24Gi with 2Gi of 1Gi pages each, kubeReserved 256Mi.
        let machine = machine(2, 4, 24 * GI, 2 * GI, 3);
        let node = node_resources(&machine, &reserving(&[], &[("memory", binary(256 * MI))], 100 * MI));
        assert_eq!(node.capacity.get("memory").copied().unwrap(), binary(48 * GI));
        assert_eq!(node.capacity.get("hugepages-1Gi").copied().unwrap(), binary(4 * GI));
        assert_eq!(node.allocatable.get("hugepages-1Gi").copied().unwrap(), binary(4 * GI));
        assert_eq!(
            node.allocatable.get("memory").copied().unwrap(),
            binary(48 * GI - 356 * MI - 4 * GI)
        );
        assert_eq!(
            node.capacity.get("nvidia.com/gpu").copied().unwrap(),
            Quantity::from_units(3)
        );
        assert_eq!(
            node.allocatable.get("nvidia.com/gpu").copied().unwrap(),
            Quantity::from_units(3)
        );
    }

    #[test]
    fn over_reservation_clamps_allocatable_at_zero() {
        let machine = machine(1, 2, 8 * GI, 4 * GI, 0);
        let node = node_resources(
            &machine,
            &reserving(&[("cpu", cpus(3000)), ("memory", binary(5 * GI))], &[], 0),
        );
        assert_eq!(node.allocatable.get("cpu").copied().unwrap(), Quantity::ZERO);
        // 8Gi - 5Gi = 3Gi, minus 4Gi of huge pages: clamped.
        assert_eq!(node.allocatable.get("memory").copied().unwrap(), Quantity::ZERO);
    }

    #[test]
    fn fit_messages_of_conformance_1020() {
        let node = node_1020();
        // event 2: nothing admitted yet.
        let p2 = app("p2", &[("cpu", cpus(3000)), ("memory", binary(22719 * MI))]);
        assert_eq!(
            check_fit(&node, &p2, &[]),
            failure(
                "OutOfmemory",
                "Node didn't have enough resource: memory, requested: 23822598144, used: 0, capacity: 14927527936"
            )
        );
        // event 13: p13 asks 500m + 11 + 2 CPUs (requests, not limits).
        let mut p13 = pod(
            "p13",
            vec![],
            vec![
                container("c0", &[("cpu", cpus(500)), ("memory", binary(GI))]),
                container("c1", &[("cpu", cpus(11_000)), ("memory", binary(4480 * MI))]),
                container("c2", &[("cpu", cpus(2000)), ("memory", binary(512 * MI))]),
            ],
        );
        p13.containers[2].limits.insert("cpu".to_owned(), cpus(4000));
        let others = [
            app("p4", &[("cpu", cpus(2000)), ("memory", binary(2 * GI))]),
            pod(
                "p6",
                vec![],
                vec![
                    container("c0", &[("cpu", cpus(1000)), ("memory", binary(5 * GI))]),
                    container("c1", &[("cpu", cpus(1000)), ("memory", binary(1536 * MI))]),
                ],
            ),
            app("p7", &[("cpu", cpus(4000)), ("memory", binary(128 * MI))]),
            app("p8", &[("cpu", cpus(2000)), ("memory", binary(1920 * MI))]),
            app("p9", &[("cpu", cpus(4000)), ("memory", binary(2944 * MI))]),
        ];
        let others: Vec<&Pod> = others.iter().collect();
        assert_eq!(
            check_fit(&node, &p13, &others),
            failure(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 13500, used: 14000, capacity: 21000"
            )
        );
        // event 12: 1Gi more memory does not fit next to 13696Mi.
        let p12 = app("p12", &[("cpu", cpus(3000)), ("memory", binary(GI))]);
        assert_eq!(
            check_fit(&node, &p12, &others),
            failure(
                "OutOfmemory",
                "Node didn't have enough resource: memory, requested: 1073741824, used: 14361296896, capacity: 14927527936"
            )
        );
        // A pod without requests always fits.
        assert_eq!(check_fit(&node, &app("p14", &[]), &others), Ok(()));
    }

    #[test]
    fn pod_requests_follow_init_sidecar_and_overhead_rules() {
        let machine = machine(1, 8, 16 * GI, 0, 0);
        let node = node_resources(&machine, &NodeConfig::default());
        let cases = [
            // (name, init containers, app containers, overhead millicores, expected millicores)
            (
                "init larger than apps",
                vec![container("i", &[("cpu", cpus(9000))])],
                vec![container("a", &[("cpu", cpus(2000))])],
                0,
                9000,
            ),
            (
                "apps larger than init",
                vec![container("i", &[("cpu", cpus(1000))])],
                vec![container("a", &[("cpu", cpus(9000))])],
                0,
                9000,
            ),
            (
                "sidecar adds to apps and to later inits",
                vec![
                    Container {
                        restartable: true,
                        ..container("s", &[("cpu", cpus(1000))])
                    },
                    container("i", &[("cpu", cpus(8500))]),
                ],
                vec![container("a", &[("cpu", cpus(500))])],
                0,
                9500,
            ),
            (
                "overhead",
                vec![],
                vec![container("a", &[("cpu", cpus(8000))])],
                500,
                8500,
            ),
        ];
        for (name, init, apps, overhead, expected) in cases {
            let mut p = pod("p", init, apps);
            if overhead > 0 {
                p.overhead.insert("cpu".to_owned(), cpus(overhead));
            }
            let message =
                format!("Node didn't have enough resource: cpu, requested: {expected}, used: 0, capacity: 8000");
            assert_eq!(check_fit(&node, &p, &[]), failure("OutOfcpu", &message), "{name}");
        }
    }

    #[test]
    fn usage_kept_as_pods_come_and_go_is_the_usage_summed_again() {
        let sidecar = Container {
            restartable: true,
            ..container("s", &[("cpu", cpus(300)), ("example.com/foo", Quantity::from_units(1))])
        };
        let a = pod(
            "a",
            vec![
                sidecar,
                container("i", &[("cpu", cpus(5000)), ("memory", binary(1 << 30))]),
            ],
            vec![container(
                "c",
                &[("cpu", cpus(1500)), ("hugepages-2Mi", binary(4 << 20))],
            )],
        );
        let b = app("b", &[("cpu", cpus(250)), ("example.com/foo", Quantity::from_units(2))]);
        let c = app("c", &[("memory", binary(3 << 20))]);
        let mut usage = FitUsage::default();
        for p in [&a, &b, &c] {
            usage.add(&PodRequests::of(p));
        }
        usage.remove(&a);
        assert_eq!(usage, FitUsage::of([&b, &c]));
        usage.remove(&b);
        usage.remove(&c);
        assert_eq!(usage, FitUsage::default());
    }

    #[test]
    fn too_many_pods_is_checked_first() {
        let machine = machine(1, 2, 4 * GI, 0, 0);
        let node = node_resources(
            &machine,
            &NodeConfig {
                max_pods: 2,
                ..NodeConfig::default()
            },
        );
        let others = [app("a", &[]), app("b", &[])];
        let others: Vec<&Pod> = others.iter().collect();
        assert_eq!(
            check_fit(&node, &app("c", &[("cpu", cpus(4000))]), &others),
            failure(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
            )
        );
        assert_eq!(check_fit(&node, &app("c", &[]), &others[..1]), Ok(()));
    }

    /// Amounts past `int64` count as the kubelet counts them (issue #29):
    /// Go's wrapped `MilliValue()` / `Value()` (the values a Go program
    /// printed with k8s.io/apimachinery v0.37.2 for the texts named),
    /// `SetMaxResource` from zero, and wrapping `int64` sums and
    /// differences.
    #[test]
    fn amounts_past_int64_wrap_as_in_go() {
        use topoalign_model::GoForm;
        let dec = GoForm::Dec { scale: 9 };
        let node = node_resources(&machine(1, 2, 4 * GI, 0, 0), &NodeConfig::default());
        // `9Ei` (inf.Dec 2^63-1): MilliValue() -1000, so no cpu is asked.
        let capped = Quantity::from_nano(i128::from(i64::MAX) * 1_000_000_000, dec);
        assert_eq!(check_fit(&node, &app("a", &[("cpu", capped)]), &[]), Ok(()));
        // `1e19` (int64Amount{1, 19}): Value() 0; `10000000000000000000`
        // (inf.Dec): Value() -8446744073709551616, below zero: none asked.
        let int64_amount = Quantity::from_scaled_nano(1, 28, GoForm::Int64 { scale: 19 });
        let dec_amount = Quantity::from_scaled_nano(1, 28, dec);
        assert_eq!(check_fit(&node, &app("b", &[("memory", int64_amount)]), &[]), Ok(()));
        assert_eq!(check_fit(&node, &app("c", &[("memory", dec_amount)]), &[]), Ok(()));
        // Its MilliValue() is 1864712049423024128: far too much cpu.
        let wide = app("d", &[("cpu", dec_amount)]);
        assert_eq!(
            check_fit(&node, &wide, &[]),
            failure(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 1864712049423024128, used: 0, capacity: 2000"
            )
        );
        // Two of them admitted (by a kubelet that counted otherwise): the
        // usage is their sum; five wrap past int64 to a negative usage,
        // and 2000 - used wraps back to room for a CPU.
        let one = app("e", &[("cpu", cpus(1000))]);
        let admitted: Vec<Pod> = (0..5).map(|i| app(&format!("w{i}"), &[("cpu", dec_amount)])).collect();
        let two: Vec<&Pod> = admitted.iter().take(2).collect();
        assert_eq!(
            check_fit(&node, &one, &two),
            failure(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 1000, used: 3729424098846048256, capacity: 2000"
            )
        );
        let five: Vec<&Pod> = admitted.iter().collect();
        assert_eq!(check_fit(&node, &one, &five), Ok(()));
        // Kept up to date as pods come and go, the usage is the same.
        let mut usage = FitUsage::of(five.iter().copied());
        usage.remove(&admitted[0]);
        assert_eq!(usage, FitUsage::of(five[1..].iter().copied()));
    }

    #[test]
    fn scalar_resources_extended_and_missing() {
        let machine = machine(1, 4, 8 * GI, 2 * GI, 1);
        let node = node_resources(&machine, &NodeConfig::default());
        let units = Quantity::from_units;
        type Case<'a> = (&'a str, Vec<(&'a str, Quantity)>, Result<(), FitFailure>);
        let cases: [Case; 7] = [
            (
                "extended resource unknown to the node is dropped",
                vec![("example.com/foo", units(5))],
                Ok(()),
            ),
            (
                "prefixed native resources are not dropped",
                vec![("kubernetes.io/foo", units(1))],
                failure(
                    "OutOfkubernetes.io/foo",
                    "Node didn't have enough resource: kubernetes.io/foo, requested: 1, used: 0, capacity: 0",
                ),
            ),
            ("bare unknown names are ignored", vec![("foo", units(1))], Ok(())),
            (
                "devices are extended resources",
                vec![("nvidia.com/gpu", units(2))],
                failure(
                    "OutOfnvidia.com/gpu",
                    "Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 0, capacity: 1",
                ),
            ),
            (
                "no ephemeral-storage capacity",
                vec![("ephemeral-storage", binary(GI))],
                failure(
                    "OutOfephemeral-storage",
                    "Node didn't have enough resource: ephemeral-storage, requested: 1073741824, used: 0, capacity: 0",
                ),
            ),
            (
                "cpu before memory",
                vec![("cpu", cpus(5000)), ("memory", binary(100 * GI))],
                failure(
                    "OutOfcpu",
                    "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000",
                ),
            ),
            (
                "scalar resources in name order",
                vec![("hugepages-2Mi", binary(2 * MI)), ("hugepages-1Gi", binary(3 * GI))],
                failure(
                    "OutOfhugepages-1Gi",
                    "Node didn't have enough resource: hugepages-1Gi, requested: 3221225472, used: 0, capacity: 2147483648",
                ),
            ),
        ];
        for (name, requests, expected) in cases {
            assert_eq!(check_fit(&node, &app("p", &requests), &[]), expected, "{name}");
        }
    }

    #[test]
    fn others_count_with_their_missing_extended_resources_and_overhead() {
        let machine = machine(1, 4, 8 * GI, 0, 2);
        let node = node_resources(&machine, &NodeConfig::default());
        let mut holder = app(
            "holder",
            &[("nvidia.com/gpu", Quantity::from_units(1)), ("cpu", cpus(1000))],
        );
        holder.overhead.insert("cpu".to_owned(), cpus(250));
        let others = [&holder];
        assert_eq!(
            check_fit(
                &node,
                &app("p", &[("nvidia.com/gpu", Quantity::from_units(2))]),
                &others
            ),
            failure(
                "OutOfnvidia.com/gpu",
                "Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 1, capacity: 2"
            )
        );
        assert_eq!(
            check_fit(&node, &app("p", &[("cpu", cpus(3000))]), &others),
            failure(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 3000, used: 1250, capacity: 4000"
            )
        );
    }

    #[test]
    fn sanitize_never_lowers_allocatable() {
        let machine = machine(1, 4, 8 * GI, 0, 2);
        let node = node_resources(&machine, &NodeConfig::default());
        let sanitized = node.with_devices_in_use(&BTreeMap::from([("nvidia.com/gpu".to_owned(), 1)]));
        assert_eq!(sanitized, node);
        let raised = node.with_devices_in_use(&BTreeMap::from([("nvidia.com/gpu".to_owned(), 5)]));
        assert_eq!(
            raised.allocatable.get("nvidia.com/gpu").copied().unwrap(),
            Quantity::from_units(5)
        );
    }

    #[test]
    fn node_allocatable_validation_texts() {
        // 9400m reserved on 8 CPUs (the v1.32-v1.34 kubelet's text, checked
        // through the oracle: capacity printed as the machine has it).
        let machine = machine(1, 8, 64 * GI, 0, 0);
        let config = reserving(&[], &[("cpu", cpus(9400)), ("memory", binary(4 * GI))], 100 * MI);
        let node = node_resources(&machine, &config);
        let reservation = node_allocatable_reservation(&node.capacity, &config);
        assert_eq!(
            validate_node_allocatable(&node, &reservation).unwrap_err().to_string(),
            "invalid Node Allocatable configuration. Resource \"cpu\" has a reservation of \
                 {{9400 -3} {<nil>}  DecimalSI} but capacity of {{8000 -3} {<nil>}  DecimalSI}. \
                 Expected capacity >= reservation."
        );

        // Memory and CPU over: both, in name order; `10` CPUs as written
        // (`int64Amount{10, 0}`).
        let config = reserving(
            &[("cpu", Quantity::from_units(10)), ("memory", binary(70 * GI))],
            &[],
            100 * MI,
        );
        let reservation = node_allocatable_reservation(&node.capacity, &config);
        assert_eq!(
            validate_node_allocatable(&node, &reservation).unwrap_err().to_string(),
            format!(
                "invalid Node Allocatable configuration. \
                 Resource \"cpu\" has a reservation of {{{{10 0}} {{<nil>}}  DecimalSI}} but capacity of {{{{8000 -3}} {{<nil>}}  DecimalSI}}. \
                 Expected capacity >= reservation. \
                 Resource \"memory\" has a reservation of {{{{{} 0}} {{<nil>}}  BinarySI}} but capacity of {{{{{} 0}} {{<nil>}}  BinarySI}}. \
                 Expected capacity >= reservation.",
                70 * GI + 100 * MI,
                64 * GI
            )
        );

        // Exactly the capacity is fine.
        let config = reserving(&[("cpu", cpus(8000))], &[], 0);
        let reservation = node_allocatable_reservation(&node.capacity, &config);
        assert_eq!(validate_node_allocatable(&node, &reservation), Ok(()));
    }

    /// An amount as Go's parser holds it: `int64Amount{value, scale}`.
    fn int64_amount(value: i64, scale: i32) -> Quantity {
        let exp = u32::try_from(scale + 9).expect("scale at least -9");
        Quantity::from_scaled_nano(i128::from(value), exp, GoForm::Int64 { scale })
    }

    /// Over-reserved amounts print Go's own `int64Amount{value, scale}`,
    /// as parsed and as `Add` summed them. The texts are the real
    /// kubelet's (`oracle replay`, v1.32.10 and v1.37.2, on a node of 2
    /// CPUs and 2Gi; vectors `hand-reserved-over-capacity-*`).
    #[test]
    fn over_reserved_amounts_print_go_value_and_scale() {
        let machine = machine(1, 2, 2 * GI, 0, 0);
        let text = |system: &[(&str, Quantity)], kube: &[(&str, Quantity)], eviction: Option<Quantity>| {
            let mut config = reserving(system, kube, 0);
            if let Some(eviction) = eviction {
                config.hard_eviction.insert("memory".to_owned(), eviction);
            }
            let node = node_resources(&machine, &config);
            let reservation = node_allocatable_reservation(&node.capacity, &config);
            validate_node_allocatable(&node, &reservation).unwrap_err().to_string()
        };
        let memory = |reserved: &str| {
            format!(
                "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of {reserved} \
                 but capacity of {{{{2147483648 0}} {{<nil>}}  BinarySI}}. Expected capacity >= reservation."
            )
        };
        let cpu = |reserved: &str| {
            format!(
                "invalid Node Allocatable configuration. Resource \"cpu\" has a reservation of {reserved} \
                 but capacity of {{{{2000 -3}} {{<nil>}}  DecimalSI}}. Expected capacity >= reservation."
            )
        };
        let mi100 = Some(binary(100 * MI));
        // `1G` + `1500M` + `100Mi`: {1 9} + {1500 6} = {2500 6}, then
        // scale 0 with the eviction threshold.
        assert_eq!(
            text(
                &[("memory", int64_amount(1, 9))],
                &[("memory", int64_amount(1500, 6))],
                mi100
            ),
            memory("{{2604857600 0} {<nil>}  DecimalSI}")
        );
        // `3G` alone (evictionHard `memory.available: 0%`, a zero
        // `NewQuantity(0, BinarySI)` that changes nothing).
        assert_eq!(
            text(&[("memory", int64_amount(3, 9))], &[], Some(binary(0))),
            memory("{{3 9} {<nil>}  DecimalSI}")
        );
        // `0` then `3000M`: the zero sum takes the next amount's value,
        // scale and notation.
        assert_eq!(
            text(
                &[("memory", Quantity::from_units(0))],
                &[("memory", int64_amount(3000, 6))],
                None
            ),
            memory("{{3000 6} {<nil>}  DecimalSI}")
        );
        // `1.5G` + a `1G` threshold: {15 8} + {1 9} = {25 8}.
        assert_eq!(
            text(&[], &[("memory", int64_amount(15, 8))], Some(int64_amount(1, 9))),
            memory("{{25 8} {<nil>}  DecimalSI}")
        );
        // `1e9` + `2Gi` + `100Mi`: scale 0, in the first amount's notation.
        let exponent = int64_amount(1, 9).with_format(QuantityFormat::DecimalExponent);
        assert_eq!(
            text(&[("memory", exponent)], &[("memory", binary(2 * GI))], mi100),
            memory("{{3252341248 0} {<nil>}  DecimalExponent}")
        );
        // CPUs as v1.32 keeps them: `2.5`, `2k`, `1500m` + `1`.
        assert_eq!(
            text(&[("cpu", int64_amount(25, -1))], &[], None),
            cpu("{{25 -1} {<nil>}  DecimalSI}")
        );
        assert_eq!(
            text(&[], &[("cpu", int64_amount(2, 3))], None),
            cpu("{{2 3} {<nil>}  DecimalSI}")
        );
        assert_eq!(
            text(&[("cpu", cpus(1500))], &[("cpu", Quantity::from_units(1))], None),
            cpu("{{2500 -3} {<nil>}  DecimalSI}")
        );
        // v1.37 holds them in millicores (`SetMilli`): `2k` is {2000000 -3}.
        assert_eq!(
            text(&[("cpu", cpus(2_000_000))], &[], None),
            cpu("{{2000000 -3} {<nil>}  DecimalSI}")
        );
    }

    #[test]
    fn an_inf_dec_reservation_prints_as_go_prints_its_pointer() {
        // The kubelet's text (difftest 1.32 seed 516: 2^64 bytes reserved,
        // an inf.Dec) is `{{0 0} {0x1c928f773620}  DecimalSI}`: the
        // int64Amount zeroed, then the *inf.Dec's address, which the engine
        // prints as a fixed stand-in.
        let machine = machine(1, 1, 64 * GI, 0, 0);
        let dec_text = |reserved: Quantity| {
            let config = reserving(&[("memory", reserved)], &[], 0);
            let node = node_resources(&machine, &config);
            let reservation = node_allocatable_reservation(&node.capacity, &config);
            validate_node_allocatable(&node, &reservation).unwrap_err().to_string()
        };
        let expected = |format: &str| {
            format!(
                "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of \
                 {{{{0 0}} {{{DEC_ADDRESS_STAND_IN}}}  {format}}} but capacity of {{{{{} 0}} {{<nil>}}  BinarySI}}. \
                 Expected capacity >= reservation.",
                64 * GI
            )
        };
        let two_to_64 = Quantity::from_units(1 << 64);
        assert_eq!(two_to_64.go_form(), GoForm::Dec { scale: 9 });
        assert_eq!(dec_text(two_to_64), expected("DecimalSI"));
        assert_eq!(
            dec_text(two_to_64.with_format(QuantityFormat::DecimalExponent)),
            expected("DecimalExponent")
        );
        // Two int64Amounts whose int64 sum overflows: Go's Add turns to
        // inf.Dec.
        let max = Quantity::from_units(i128::from(i64::MAX));
        let config = reserving(&[("memory", max)], &[("memory", Quantity::from_units(1))], 0);
        let node = node_resources(&machine, &config);
        let reservation = node_allocatable_reservation(&node.capacity, &config);
        assert_eq!(
            validate_node_allocatable(&node, &reservation).unwrap_err().to_string(),
            expected("DecimalSI")
        );
        // i64::MAX alone is an int64Amount.
        let config = reserving(&[("memory", max)], &[], 0);
        let node = node_resources(&machine, &config);
        let reservation = node_allocatable_reservation(&node.capacity, &config);
        assert!(
            validate_node_allocatable(&node, &reservation)
                .unwrap_err()
                .to_string()
                .contains(&format!("{{{{{} 0}} {{<nil>}}  DecimalSI}}", i64::MAX))
        );
    }
}

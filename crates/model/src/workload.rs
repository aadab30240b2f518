//! The workload as the engine sees it: a pod's identity, QoS class and the
//! defaulted requests and limits of each container.
//!
//! Building one from a Kubernetes manifest (defaulting requests to limits,
//! computing the QoS class) is the `topoalign-k8s` crate's job.

use crate::Quantity;

/// A map kept as one `Vec` of entries sorted by key (`litemap`): the API
/// and the order of a `BTreeMap` (iteration in key order, which decisions
/// and output rely on), for maps of a few entries held by the thousand — a
/// restored node keeps two resource lists per container and a container
/// map per pod, where a B-tree's leaf of eleven slots would be mostly
/// empty. Lookups are a binary search, an insert shifts the entries
/// after it: not for maps that grow large.
pub type FlatMap<K, V> = litemap::LiteMap<K, V>;

/// A resource name: `cpu`, `memory`, `hugepages-1Gi`, `nvidia.com/gpu`, ...
pub type ResourceName = String;

/// Amounts per resource name.
pub type ResourceList = FlatMap<ResourceName, Quantity>;

/// Adds every amount of `more` to `total` (copying a name only when it is
/// new to `total`).
pub fn add_resources<'a, K>(total: &mut FlatMap<K, Quantity>, more: &'a ResourceList)
where
    K: Ord + std::borrow::Borrow<str> + From<&'a str>,
{
    fold_amounts(
        total,
        more.iter().map(|(name, amount)| (name.as_str(), *amount)),
        K::from,
        add,
    );
}

/// Adds `amount` to `resource`'s entry of `total`, making the key from the
/// name only when it is new (an owned list copies it, a borrowed one does
/// not).
pub fn add_resource<'a, K>(total: &mut FlatMap<K, Quantity>, resource: &'a str, amount: Quantity)
where
    K: Ord + std::borrow::Borrow<str> + From<&'a str>,
{
    fold_amounts(total, [(resource, amount)], K::from, add);
}

/// Folds `more` (names in any order) into `total`: `fold` into the entry
/// where the name is there, a new entry of the amount where not (its key
/// made by `key` only then). New names that sort after `total`'s last are
/// appended; the others are put in place by one stable sort at the end. A
/// name repeated among those keeps only its later amount, unfolded: right
/// for a replacing `fold` (an object read from JSON), and the sums and
/// peaks fold maps, whose names are distinct. An insert
/// each would shift the entries after it, and the names are a pod's — input
/// a user or a remote peer chooses (an extender request of 64 MiB) — so the
/// cost must stay n log n in them, not quadratic.
pub fn fold_amounts<K, Q>(
    total: &mut FlatMap<K, Quantity>,
    more: impl IntoIterator<Item = (Q, Quantity)>,
    key: impl Fn(Q) -> K,
    fold: impl Fn(&mut Quantity, Quantity),
) where
    K: Ord + std::borrow::Borrow<str>,
    Q: std::borrow::Borrow<str>,
{
    let mut out_of_order = Vec::new();
    for (name, amount) in more {
        match total.get_mut(name.borrow()) {
            Some(entry) => fold(entry, amount),
            None => {
                if let Some(entry) = total.try_append(key(name), amount) {
                    out_of_order.push(entry);
                }
            }
        }
    }
    if !out_of_order.is_empty() {
        // The names are new to `total`: the sort only places them (the
        // later of a repeated one kept).
        total.extend(out_of_order);
    }
}

/// [`fold_amounts`]' sum.
fn add(sum: &mut Quantity, amount: Quantity) {
    *sum += amount;
}

/// [`fold_amounts`]' peak.
fn max(peak: &mut Quantity, amount: Quantity) {
    if amount > *peak {
        *peak = amount;
    }
}

/// Kubernetes QoS class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The name Kubernetes prints.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// `ComputePodQOS` over init and app containers (requests already
    /// defaulted from limits): only `cpu` and `memory` count, and only
    /// amounts above zero.
    ///
    /// - BestEffort: no container requests or limits either.
    /// - Guaranteed: every container has both limits, and the summed
    ///   requests equal the summed limits, resource by resource.
    /// - Burstable: anything else.
    pub fn of_containers(init_containers: &[Container], containers: &[Container]) -> QosClass {
        let mut totals = QosTotals::default();
        let mut every_container_limits_both = true;
        for container in containers.iter().chain(init_containers) {
            every_container_limits_both &= totals.add(&container.requests, &container.limits);
        }
        totals.class(every_container_limits_both)
    }

    /// `ComputePodQOS` of a pod whose `spec.resources` decides (the
    /// `PodLevelResources` gate on): the same rules over the pod-level
    /// requests and limits alone, the containers' not looked at.
    pub fn of_pod_resources(resources: &PodResources) -> QosClass {
        let mut totals = QosTotals::default();
        let limits_both = totals.add(&resources.requests, &resources.limits);
        // Pod-level requests without any limits leave the pod Burstable
        // through the comparison below, whatever `limits_both` says.
        totals.class(limits_both || resources.limits.is_empty())
    }
}

/// The `cpu` and `memory` amounts above zero, summed, as `ComputePodQOS`
/// collects them (`None`: none counted; one slot per name of
/// [`QosTotals::COUNTED`], no map: this runs for every pod read).
#[derive(Default)]
struct QosTotals {
    requests: [Option<Quantity>; 2],
    limits: [Option<Quantity>; 2],
}

impl QosTotals {
    const COUNTED: [&'static str; 2] = ["cpu", "memory"];

    /// Adds one list pair; returns whether `limits` holds both resources.
    fn add(&mut self, requests: &ResourceList, limits: &ResourceList) -> bool {
        let mut limits_both = true;
        for (i, resource) in Self::COUNTED.into_iter().enumerate() {
            let request = requests.get(resource).copied().unwrap_or_default();
            if request > Quantity::ZERO {
                *self.requests[i].get_or_insert_with(Quantity::default) += request;
            }
            let limit = limits.get(resource).copied().unwrap_or_default();
            if limit > Quantity::ZERO {
                *self.limits[i].get_or_insert_with(Quantity::default) += limit;
            } else {
                limits_both = false;
            }
        }
        limits_both
    }

    fn class(&self, limits_complete: bool) -> QosClass {
        let counted = |totals: &[Option<Quantity>]| totals.iter().flatten().count();
        if counted(&self.requests) == 0 && counted(&self.limits) == 0 {
            return QosClass::BestEffort;
        }
        let matching = self
            .requests
            .iter()
            .zip(&self.limits)
            .all(|(request, limit)| request.is_none() || request == limit);
        if limits_complete && matching && counted(&self.requests) == counted(&self.limits) {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

/// One container with its requests already defaulted from its limits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Container {
    pub name: String,
    pub requests: ResourceList,
    pub limits: ResourceList,
    /// An init container with `restartPolicy: Always` (a sidecar): it keeps
    /// running for the pod's whole life.
    pub restartable: bool,
}

impl Container {
    /// The request for `resource`, zero when absent.
    pub fn request(&self, resource: &str) -> Quantity {
        self.requests.get(resource).copied().unwrap_or_default()
    }

    /// The limit for `resource`, zero when absent.
    pub fn limit(&self, resource: &str) -> Quantity {
        self.limits.get(resource).copied().unwrap_or_default()
    }

    /// Whether the container alone would be Guaranteed: non-zero `cpu` and
    /// `memory` requests equal to their limits (kubelet
    /// `IsContainerEquivalentQOSGuaranteed`). Inside a pod with pod-level
    /// resources under `PodLevelResourceManagers`, only such containers get
    /// exclusive CPUs and memory of their own.
    pub fn is_equivalent_guaranteed(&self) -> bool {
        ["cpu", "memory"].iter().all(|resource| {
            let request = self.request(resource);
            !request.is_zero() && request == self.limit(resource)
        })
    }
}

/// A pod: identity, QoS class, init containers then app containers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub qos: QosClass,
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    /// `spec.overhead`, added to the pod's requests by the resource-fit check.
    pub overhead: ResourceList,
    /// `spec.resources` (pod-level resources) as written, `None` when the
    /// manifest has none. What it changes depends on the node's release and
    /// its `PodLevelResources` gate: the engine applies it at admission.
    pub pod_resources: Option<PodResources>,
}

/// See [`Pod::shape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PodShape<'a> {
    qos: QosClass,
    init_containers: &'a [Container],
    containers: &'a [Container],
    overhead: &'a ResourceList,
    pod_resources: Option<&'a PodResources>,
}

/// A pod's `spec.resources`: requests and limits for the pod as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodResources {
    pub requests: ResourceList,
    pub limits: ResourceList,
}

impl PodResources {
    /// Whether requests or limits name `cpu`, `memory` or a huge page size:
    /// the resources pod-level management covers (component-helpers
    /// `IsPodLevelResourcesSet`, once unsupported names are dropped).
    pub fn is_set(&self) -> bool {
        !self.requests.is_empty() || !self.limits.is_empty()
    }
}

impl Pod {
    /// component-helpers `AggregateContainerRequests` / `...Limits` over
    /// the list `amounts` picks: the sum of app containers and sidecars
    /// (restartable init containers), or, when larger, the biggest init
    /// container next to the sidecars started before it. Only names `keep`
    /// accepts count. The pod's requests for fitting (engine) and its
    /// limits for device hints (device manager) are both this.
    pub fn aggregate_containers(
        &self,
        amounts: impl Fn(&Container) -> &ResourceList,
        keep: impl Fn(&str) -> bool,
    ) -> ResourceList {
        self.aggregate_containers_keyed(amounts, keep)
    }

    /// [`Pod::aggregate_containers`] keyed by owned names (`String`) or by
    /// names borrowed from the pod (`&str`, no name copied: for the
    /// admission path, which only reads them).
    pub fn aggregate_containers_keyed<'a, K>(
        &'a self,
        amounts: impl Fn(&'a Container) -> &'a ResourceList,
        keep: impl Fn(&str) -> bool,
    ) -> FlatMap<K, Quantity>
    where
        K: Ord + Clone + std::borrow::Borrow<str> + From<&'a str>,
    {
        let mut total = FlatMap::<K, Quantity>::new();
        let kept = |list: &'a ResourceList| {
            list.iter()
                .filter(|(resource, _)| keep(resource))
                .map(|(resource, amount)| (resource.as_str(), *amount))
        };
        for container in &self.containers {
            fold_amounts(&mut total, kept(amounts(container)), K::from, add);
        }
        if self.init_containers.is_empty() {
            return total;
        }
        let add_all = |into: &mut FlatMap<K, Quantity>, more: &FlatMap<K, Quantity>| {
            // The key cloned even where it is there: free for the borrowed lists
            // the admission uses, one copy of a name for an owned one.
            fold_amounts(
                into,
                more.iter().map(|(resource, amount)| (resource.clone(), *amount)),
                |name| name,
                add,
            );
        };
        let mut sidecars = FlatMap::<K, Quantity>::new();
        let mut init_peak = FlatMap::<K, Quantity>::new();
        for init in &self.init_containers {
            let own: FlatMap<K, Quantity> = kept(amounts(init))
                .map(|(resource, amount)| (K::from(resource), amount))
                .collect();
            let running_now = if init.restartable {
                add_all(&mut total, &own);
                add_all(&mut sidecars, &own);
                sidecars.clone()
            } else {
                let mut with_sidecars = own;
                add_all(&mut with_sidecars, &sidecars);
                with_sidecars
            };
            fold_amounts(&mut init_peak, running_now, |name| name, max);
        }
        fold_amounts(&mut total, init_peak, |name| name, max);
        total
    }

    /// `namespace/name`, the key the results and state use.
    pub fn key(&self) -> String {
        // Built by hand: one exact allocation, no formatting machinery
        // (every decision carries it).
        let mut key = String::with_capacity(self.namespace.len() + 1 + self.name.len());
        key.push_str(&self.namespace);
        key.push('/');
        key.push_str(&self.name);
        key
    }

    /// Whether `spec.resources` names something pod-level management covers
    /// (component-helpers `IsPodLevelResourcesSet`, on a pod as admitted).
    pub fn uses_pod_level_resources(&self) -> bool {
        self.pod_resources.as_ref().is_some_and(PodResources::is_set)
    }

    /// What admission reads of the pod, its identity left out: pods of equal
    /// shape get equal answers from equal nodes.
    pub fn shape(&self) -> PodShape<'_> {
        PodShape {
            qos: self.qos,
            init_containers: &self.init_containers,
            containers: &self.containers,
            overhead: &self.overhead,
            pod_resources: self.pod_resources.as_ref(),
        }
    }

    /// Whether `container` is one of the pod's init containers that runs to
    /// completion (not a restartable sidecar): what the kubelet's managers
    /// ask, by name, after each allocation. The pod's own containers (what
    /// [`Pod::all_containers`] yields) are recognised by address, so a pod
    /// with thousands of init containers costs linear time, not quadratic;
    /// any other container by its name.
    pub fn is_regular_init(&self, container: &Container) -> bool {
        let address = std::ptr::from_ref(container);
        if self.init_containers.as_ptr_range().contains(&address) {
            return !container.restartable;
        }
        if self.containers.as_ptr_range().contains(&address) {
            return false;
        }
        self.init_containers
            .iter()
            .find(|init| init.name == container.name)
            .is_some_and(|init| !init.restartable)
    }

    /// Init containers then app containers, in spec order, each with whether
    /// it is an init container — the order the kubelet admits and starts them.
    pub fn all_containers(&self) -> impl Iterator<Item = (&Container, bool)> {
        self.init_containers
            .iter()
            .map(|c| (c, true))
            .chain(self.containers.iter().map(|c| (c, false)))
    }
}

#[cfg(test)]
mod tests {
    use super::{Container, FlatMap, Pod, QosClass, Quantity, ResourceList};

    fn container(name: &str, amounts: impl Iterator<Item = (String, i128)>, restartable: bool) -> Container {
        let requests: ResourceList = amounts.map(|(name, n)| (name, Quantity::from_units(n))).collect();
        Container {
            name: name.to_owned(),
            limits: requests.clone(),
            requests,
            restartable,
        }
    }

    /// Many resource names spread over containers (interleaved, so most new
    /// names land inside the running total) sum per name and come out
    /// sorted: the names are folded in by one sort, not an insert each.
    #[test]
    fn interleaved_resource_names_sum_per_name_in_order() {
        let names = 5_000;
        let apps = (0..2)
            .map(|c| {
                container(
                    &format!("app{c}"),
                    (0..names).filter(move |i| i % 2 == c).map(|i| (format!("r/{i:05}"), 1)),
                    false,
                )
            })
            .collect();
        let inits = vec![
            container("sidecar", (0..names).rev().map(|i| (format!("r/{i:05}"), 1)), true),
            container("init", (0..names).map(|i| (format!("r/{i:05}"), 10)), false),
        ];
        let pod = Pod {
            namespace: "default".to_owned(),
            name: "many".to_owned(),
            uid: "many".to_owned(),
            qos: QosClass::Guaranteed,
            init_containers: inits,
            containers: apps,
            overhead: ResourceList::new(),
            pod_resources: None,
        };
        let total: FlatMap<String, Quantity> = pod.aggregate_containers(|c| &c.requests, |_| true);
        assert_eq!(total.len(), names as usize);
        assert!(total.iter().zip(total.iter().skip(1)).all(|((a, _), (b, _))| a < b));
        // Each name: one app (1) + the sidecar (1), against the init's 10
        // beside the sidecar (11): the init's peak wins.
        assert!(
            total.iter().all(|(_, q)| *q == Quantity::from_units(11)),
            "{:?}",
            total.iter().next()
        );
    }
}

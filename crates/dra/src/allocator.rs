//! The allocation search: for one node, one device per required slot of
//! every request of every claim, first fit in the pools' order, backtracking
//! when a later slot cannot be filled — the scheduler's structured-parameters
//! allocator (no scoring: the first complete solution wins).
//!
//! Order of the search, which decides *which* devices a claim gets:
//! claims in the pod's order; a claim's requests in order; for a
//! `firstAvailable` request its subrequests in order (the first that can be
//! completed wins); for each device slot, pools by (driver, pool), slices by
//! name, devices as listed, and within one request only device sets in that
//! order (combinations, not permutations). `allocationMode: All` takes every
//! matching device of the node, decided before the search.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CapacityRequirements, Device, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceAttribute, DeviceClass, DeviceConstraint, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector,
    DeviceTaint, DeviceToleration, ResourceClaim, ResourceSlice,
};
use topoalign_model::Quantity;

use crate::capacity::{self, Capacities};
use crate::case::{AllocationCase, Outcome};
use crate::features::{Features, scheduler_defaults};
use crate::pools::{self, Pool, PoolId, PoolState, UsablePool};
use crate::selector::{DeviceView, Selector, SelectorError};

/// The most devices one claim's allocation may hold
/// (`resourceapi.AllocationResultsMaxSize`).
pub const MAX_RESULTS_PER_CLAIM: usize = 32;

/// Allocates the case's claims on its node, as the case's release would.
pub fn allocate(case: &AllocationCase) -> Outcome {
    let features = match scheduler_defaults(&case.release) {
        Ok(features) => features,
        Err(e) => return Outcome::Error { message: e.to_string() },
    };
    allocate_with(case, &features)
}

/// [`allocate`] with the given feature set instead of the release's defaults.
pub fn allocate_with(case: &AllocationCase, features: &Features) -> Outcome {
    if let Some(refused) = prefilter(case, features) {
        return refused;
    }
    let in_use = InUse::from_claims(&case.allocated_claims, features);
    let minor = case
        .release
        .strip_prefix("1.")
        .and_then(|m| m.parse().ok())
        .unwrap_or(u8::MAX);
    let pools = match pools::gather(&case.resource_slices, &case.node, features, minor) {
        Ok(pools) => pools,
        Err(e) => {
            return Outcome::Error {
                message: format!("gather pool information: {e}"),
            };
        }
    };
    let claims: Vec<&ResourceClaim> = case.claims.iter().collect();
    let mut search = match Search::new(
        features,
        minor,
        &case.node,
        &case.device_classes,
        &claims,
        pools,
        &in_use,
    ) {
        Ok(search) => search,
        Err(Stop::Fatal(message)) => return Outcome::Error { message },
        Err(Stop::TooMany) => return Outcome::Unschedulable { message: String::new() },
    };
    match search.next_slot(Slot::default(), false, Location::default()) {
        Ok(true) => match search.results() {
            Ok(allocations) => Outcome::Allocated { allocations },
            Err(message) => Outcome::Error { message },
        },
        Ok(false) | Err(Stop::TooMany) => {
            if search.minor >= 35 && search.pools.iter().any(|p| matches!(p.state, PoolState::Invalid(_))) {
                // Only this node is affected: not a fatal error.
                Outcome::Unschedulable {
                    message: "invalid resource pools were encountered".to_owned(),
                }
            } else {
                Outcome::Unschedulable { message: String::new() }
            }
        }
        Err(Stop::Fatal(message)) => Outcome::Error { message },
    }
}

/// The DynamicResources plugin's PreFilter checks of every request of every
/// claim, before any allocator runs: a request without a class stops
/// scheduling; a class that does not exist, subrequests with the
/// DRAPrioritizedList feature off, or a request of an unknown kind leave
/// the pod unschedulable.
pub(crate) fn prefilter(case: &AllocationCase, features: &Features) -> Option<Outcome> {
    let class_check = |class: &str, request: &str| -> Option<Outcome> {
        if class.is_empty() {
            return Some(Outcome::Error {
                message: format!("request {request}: unsupported request type"),
            });
        }
        if !case
            .device_classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
        {
            return Some(Outcome::Unschedulable {
                message: format!("request {request}: device class {class} does not exist"),
            });
        }
        None
    };
    for claim in &case.claims {
        for request in requests_of(claim) {
            if let Some(exact) = &request.exactly {
                if let Some(refused) = class_check(&exact.device_class_name, &request.name) {
                    return Some(refused);
                }
            } else if let Some(subs) = request.first_available.as_ref().filter(|s| !s.is_empty()) {
                if !features.prioritized_list {
                    return Some(Outcome::Unschedulable {
                        message: format!(
                            "resource claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                            claim_name(claim),
                            request.name
                        ),
                    });
                }
                for sub in subs {
                    if let Some(refused) =
                        class_check(&sub.device_class_name, &format!("{}/{}", request.name, sub.name))
                    {
                        return Some(refused);
                    }
                }
            } else {
                return Some(Outcome::Unschedulable {
                    message: format!(
                        "resource claim {}, request {}: unknown request type",
                        claim_name(claim),
                        request.name
                    ),
                });
            }
        }
    }
    None
}

/// A device by driver, pool and name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId<'a> {
    pub driver: &'a str,
    pub pool: &'a str,
    pub device: &'a str,
}

/// What other claims already hold: dedicated devices, shared devices, and
/// the capacity consumed on shared devices.
#[derive(Debug, Default)]
pub(crate) struct InUse<'a> {
    dedicated: HashSet<DeviceId<'a>>,
    shared: HashSet<DeviceId<'a>>,
    pub consumed: HashMap<DeviceId<'a>, Capacities>,
}

impl<'a> InUse<'a> {
    /// Devices of allocated claims; admin access holds nothing. With
    /// consumable capacity on, a result with a share ID is a share of the
    /// device, whose consumed capacity adds up.
    pub(crate) fn from_claims(claims: &'a [ResourceClaim], features: &Features) -> Self {
        let mut in_use = InUse::default();
        for claim in claims {
            let results = claim
                .status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
                .and_then(|d| d.results.as_deref())
                .unwrap_or_default();
            for result in results {
                if result.admin_access == Some(true) {
                    continue;
                }
                let id = DeviceId {
                    driver: &result.driver,
                    pool: &result.pool,
                    device: &result.device,
                };
                if features.consumable_capacity && result.share_id.is_some() {
                    in_use.shared.insert(id);
                    if let Some(consumed) = &result.consumed_capacity {
                        capacity::add_into(in_use.consumed.entry(id).or_default(), &capacity::parse_map(consumed));
                    }
                    continue;
                }
                in_use.dedicated.insert(id);
            }
        }
        in_use
    }

    /// Held in any way (its counters are taken).
    pub(crate) fn holds(&self, id: &DeviceId<'_>) -> bool {
        self.dedicated.contains(id) || self.shared.contains(id) || self.consumed.contains_key(id)
    }
}

/// Why the search stops.
#[derive(Debug)]
enum Stop {
    /// A claim would hold more than [`MAX_RESULTS_PER_CLAIM`] devices.
    TooMany,
    /// Invalid input: the whole scheduling attempt fails.
    Fatal(String),
}

/// One slot to fill: a device of a (sub)request of a claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Slot {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

impl Slot {
    fn request_key(self) -> RequestKey {
        RequestKey {
            claim: self.claim,
            request: self.request,
            sub: self.sub,
        }
    }
}

/// A request, or one subrequest of a `firstAvailable` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct RequestKey {
    claim: usize,
    request: usize,
    sub: usize,
}

/// Where a request's next device is looked for: pool, slice, device.
#[derive(Clone, Copy, Debug, Default)]
struct Location {
    pool: usize,
    slice: usize,
    device: usize,
}

/// A request or subrequest, read the same way.
#[derive(Debug)]
struct RequestView<'a> {
    name: &'a str,
    /// The `firstAvailable` request this subrequest belongs to.
    parent: Option<&'a str>,
    class_name: &'a str,
    all: bool,
    mode: &'a str,
    count: i64,
    admin_access: bool,
    has_admin_access: bool,
    has_derived_attributes: bool,
    selectors: &'a [DeviceSelector],
    tolerations: Option<&'a [DeviceToleration]>,
    capacity: Option<&'a CapacityRequirements>,
}

impl<'a> RequestView<'a> {
    fn exact(request: &'a DeviceRequest) -> Option<Self> {
        let exact = request.exactly.as_ref()?;
        let mode = exact.allocation_mode.as_deref().unwrap_or("ExactCount");
        Some(RequestView {
            name: &request.name,
            parent: None,
            class_name: &exact.device_class_name,
            all: mode == "All",
            mode,
            count: exact.count.unwrap_or(1),
            admin_access: exact.admin_access == Some(true),
            has_admin_access: exact.admin_access.is_some(),
            has_derived_attributes: exact.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()),
            selectors: exact.selectors.as_deref().unwrap_or_default(),
            tolerations: exact.tolerations.as_deref(),
            capacity: exact.capacity.as_ref(),
        })
    }

    fn subrequests(request: &'a DeviceRequest) -> impl Iterator<Item = Self> + 'a {
        request.first_available.iter().flatten().map(move |sub| {
            let mode = sub.allocation_mode.as_deref().unwrap_or("ExactCount");
            RequestView {
                name: &sub.name,
                parent: Some(&request.name),
                class_name: &sub.device_class_name,
                all: mode == "All",
                mode,
                count: sub.count.unwrap_or(1),
                admin_access: false,
                has_admin_access: false,
                has_derived_attributes: sub.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()),
                selectors: sub.selectors.as_deref().unwrap_or_default(),
                tolerations: sub.tolerations.as_deref(),
                capacity: sub.capacity.as_ref(),
            }
        })
    }

    /// The name results and constraints use: "request" or "request/sub".
    fn full_name(&self) -> String {
        match self.parent {
            Some(parent) => format!("{parent}/{}", self.name),
            None => self.name.to_owned(),
        }
    }
}

/// A candidate device with where it lives.
#[derive(Clone, Copy, Debug)]
struct Candidate<'a> {
    id: DeviceId<'a>,
    device: &'a Device,
    slice: &'a ResourceSlice,
    pool: usize,
}

/// What the search knows of one (sub)request.
#[derive(Debug)]
struct RequestData<'a> {
    view: RequestView<'a>,
    class: &'a DeviceClass,
    devices: usize,
    /// `allocationMode: All`: the devices, fixed before the search.
    all: Vec<Candidate<'a>>,
}

/// A claim constraint, tracking the devices added so far.
#[derive(Debug)]
struct Constraint<'a> {
    requests: BTreeSet<&'a str>,
    attribute: &'a str,
    kind: ConstraintKind<'a>,
}

#[derive(Debug)]
enum ConstraintKind<'a> {
    /// Every device has the attribute with the first device's value.
    Match {
        first: Option<&'a DeviceAttribute>,
        devices: usize,
    },
    /// Every device has the attribute with a value no other device has
    /// (1.37+).
    Distinct { values: Vec<&'a DeviceAttribute> },
    /// 1.36: the value of the last device added for each request, and a
    /// device's value must differ from those only; removing a device forgets
    /// its request's value.
    DistinctPerRequest {
        values: BTreeMap<String, &'a DeviceAttribute>,
        devices: usize,
    },
    /// 1.34: values are compared by address, which two devices never share:
    /// every device that has the attribute is taken.
    DistinctByAddress,
}

impl<'a> Constraint<'a> {
    fn applies(&self, request: &str, sub: Option<&str>) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        self.requests.contains(request)
            || sub.is_some_and(|sub| self.requests.contains(format!("{request}/{sub}").as_str()))
    }

    /// Adds the device if the constraint allows it.
    fn add(&mut self, request: &str, sub: Option<&str>, candidate: &Candidate<'a>) -> bool {
        if !self.applies(request, sub) {
            return true;
        }
        let Some(value) = lookup_attribute(candidate.device, candidate.id.driver, self.attribute) else {
            return false;
        };
        match &mut self.kind {
            ConstraintKind::Match { first, devices } => {
                match first {
                    Some(first) if *devices > 0 => {
                        if !same_scalar(value, first) {
                            return false;
                        }
                    }
                    _ => *first = Some(value),
                }
                *devices += 1;
                true
            }
            ConstraintKind::Distinct { values } => {
                if values
                    .iter()
                    .any(|held| scalar_kind(value).is_none() || same_scalar(value, held))
                {
                    return false;
                }
                values.push(value);
                true
            }
            ConstraintKind::DistinctPerRequest { values, devices } => {
                if *devices > 0
                    && values
                        .values()
                        .any(|held| scalar_kind(value).is_none() || same_scalar(value, held))
                {
                    return false;
                }
                values.insert(request.to_owned(), value);
                *devices += 1;
                true
            }
            ConstraintKind::DistinctByAddress => true,
        }
    }

    fn remove(&mut self, request: &str, sub: Option<&str>) {
        if !self.applies(request, sub) {
            return;
        }
        match &mut self.kind {
            ConstraintKind::Match { devices, .. } => *devices -= 1,
            ConstraintKind::Distinct { values } => {
                values.pop();
            }
            ConstraintKind::DistinctPerRequest { values, devices } => {
                values.remove(request);
                *devices -= 1;
            }
            ConstraintKind::DistinctByAddress => {}
        }
    }
}

/// The attribute's scalar value, by type; `None` for a list or an empty one.
fn scalar_kind(value: &DeviceAttribute) -> Option<u8> {
    match value {
        DeviceAttribute { string: Some(_), .. } => Some(0),
        DeviceAttribute { int: Some(_), .. } => Some(1),
        DeviceAttribute { bool: Some(_), .. } => Some(2),
        DeviceAttribute { version: Some(_), .. } => Some(3),
        _ => None,
    }
}

/// Equal scalar values of the same type (versions compared as text: semver
/// is in its minimal form).
fn same_scalar(a: &DeviceAttribute, b: &DeviceAttribute) -> bool {
    match (scalar_kind(a), a) {
        (Some(0), _) => b.string.is_some() && a.string == b.string,
        (Some(1), _) => b.int.is_some() && a.int == b.int,
        (Some(2), _) => b.bool.is_some() && a.bool == b.bool,
        (Some(3), _) => b.version.is_some() && a.version == b.version,
        _ => false,
    }
}

/// A fully qualified attribute of a device: `domain/id`, or `id` alone when
/// the domain is the device's driver.
fn lookup_attribute<'a>(device: &'a Device, driver: &str, name: &str) -> Option<&'a DeviceAttribute> {
    let attributes = device.attributes.as_ref()?;
    if let Some(value) = attributes.get(name) {
        return Some(value);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attributes.get(id)
}

/// One device in a claim's result.
#[derive(Debug, Clone)]
struct Chosen<'a> {
    candidate: Candidate<'a>,
    request: RequestKey,
    admin_access: bool,
    share: Option<usize>,
    consumed: Option<Capacities>,
}

/// Undo information for one device placed in the search.
#[derive(Debug, Default)]
struct Placed {
    counters: bool,
    constraints: usize,
    marked: bool,
    capacity: Option<(Capacities, bool)>,
}

type CounterSets<'a> = BTreeMap<&'a str, BTreeMap<&'a str, Quantity>>;

struct Search<'a, 'c> {
    features: &'c Features,
    /// The release's minor version (34 for 1.34): behaviour that changed
    /// without a feature gate.
    minor: u8,
    node: &'a Node,
    claims: &'c [&'a ResourceClaim],
    pools: Vec<Pool<'a>>,
    in_use: &'c InUse<'a>,
    requests: HashMap<RequestKey, RequestData<'a>>,
    /// The subrequest picked for each `firstAvailable` request.
    picked_sub: HashMap<(usize, usize), usize>,
    constraints: Vec<Vec<Constraint<'a>>>,
    /// Devices being allocated, and for which claims.
    allocating: HashMap<DeviceId<'a>, BTreeSet<usize>>,
    /// Capacity being allocated on shared devices.
    allocating_capacity: HashMap<DeviceId<'a>, Capacities>,
    /// Counters left per pool after other claims' devices, computed once.
    available_counters: HashMap<usize, CounterSets<'a>>,
    /// Counters taken by the devices being allocated, per pool.
    consumed_counters: HashMap<usize, CounterSets<'a>>,
    results: Vec<Vec<Chosen<'a>>>,
    matches: HashMap<(DeviceId<'a>, RequestKey), bool>,
    compiled: HashMap<String, Result<Selector, SelectorError>>,
    shares: usize,
}

/// `namespace/name` of a claim, as the scheduler names objects.
fn claim_name(claim: &ResourceClaim) -> String {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    match claim.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

fn requests_of(claim: &ResourceClaim) -> &[DeviceRequest] {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default()
}

fn constraints_of(claim: &ResourceClaim) -> &[DeviceConstraint] {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.constraints.as_deref())
        .unwrap_or_default()
}

impl<'a, 'c> Search<'a, 'c> {
    fn new(
        features: &'c Features,
        minor: u8,
        node: &'a Node,
        classes: &'a [DeviceClass],
        claims: &'c [&'a ResourceClaim],
        pools: Vec<Pool<'a>>,
        in_use: &'c InUse<'a>,
    ) -> Result<Self, Stop> {
        let mut search = Search {
            features,
            minor,
            node,
            claims,
            pools,
            in_use,
            requests: HashMap::new(),
            picked_sub: HashMap::new(),
            constraints: Vec::new(),
            allocating: HashMap::new(),
            allocating_capacity: HashMap::new(),
            available_counters: HashMap::new(),
            consumed_counters: HashMap::new(),
            results: vec![Vec::new(); claims.len()],
            matches: HashMap::new(),
            compiled: HashMap::new(),
            shares: 0,
        };
        for (claim_index, claim) in claims.iter().enumerate() {
            let name = claim_name(claim);
            let mut min_devices = 0usize;
            for (request_index, request) in requests_of(claim).iter().enumerate() {
                let subrequests: Vec<_> = RequestView::subrequests(request).collect();
                if !features.prioritized_list && !subrequests.is_empty() {
                    return Err(Stop::Fatal(format!(
                        "claim {name}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                        request.name
                    )));
                }
                // 1.35 ignores capacity requests; 1.34 and later releases with
                // the feature off refuse them.
                if !features.consumable_capacity && minor != 35 {
                    if request.exactly.as_ref().is_some_and(|e| e.capacity.is_some()) {
                        return Err(Stop::Fatal(format!(
                            "claim {name}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            request.name
                        )));
                    }
                    if let Some(sub) = subrequests.iter().find(|s| s.capacity.is_some()) {
                        return Err(Stop::Fatal(format!(
                            "claim {name}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            sub.name
                        )));
                    }
                }
                let fewest = if subrequests.is_empty() {
                    let view = RequestView::exact(request).ok_or_else(|| {
                        Stop::Fatal(format!(
                            "claim {name}, request {}: missing device class name (unsupported request type?)",
                            request.name
                        ))
                    })?;
                    let key = RequestKey {
                        claim: claim_index,
                        request: request_index,
                        sub: 0,
                    };
                    let data = search.request_data(view, key, classes, &name)?;
                    let devices = data.devices;
                    search.requests.insert(key, data);
                    devices
                } else {
                    let mut fewest = usize::MAX;
                    for (sub_index, view) in subrequests.into_iter().enumerate() {
                        let key = RequestKey {
                            claim: claim_index,
                            request: request_index,
                            sub: sub_index,
                        };
                        // Up to 1.35 a subrequest is checked under the key of the
                        // one before it: `All` devices found for one are cached
                        // as the other's.
                        let cache_key = if minor <= 35 {
                            RequestKey {
                                sub: sub_index.saturating_sub(1),
                                ..key
                            }
                        } else {
                            key
                        };
                        let data = search.request_data(view, cache_key, classes, &name)?;
                        fewest = fewest.min(data.devices);
                        search.requests.insert(key, data);
                    }
                    fewest
                };
                if fewest > MAX_RESULTS_PER_CLAIM - min_devices.min(MAX_RESULTS_PER_CLAIM) {
                    return Err(Stop::Fatal(format!(
                        "claim {name}, request {}: adding {fewest} devices exceeds the claim limit of {MAX_RESULTS_PER_CLAIM}, with {min_devices} already accounted for",
                        request.name
                    )));
                }
                min_devices += fewest;
            }
            let mut constraints = Vec::new();
            for (i, constraint) in constraints_of(claim).iter().enumerate() {
                let requests = constraint.requests.iter().flatten().map(String::as_str).collect();
                let (attribute, kind) = match (&constraint.match_attribute, &constraint.distinct_attribute) {
                    (Some(attribute), _) => (
                        attribute,
                        ConstraintKind::Match {
                            first: None,
                            devices: 0,
                        },
                    ),
                    (None, Some(attribute)) if minor != 35 => {
                        let kind = match minor {
                            ..=34 => ConstraintKind::DistinctByAddress,
                            36 => ConstraintKind::DistinctPerRequest {
                                values: BTreeMap::new(),
                                devices: 0,
                            },
                            _ => ConstraintKind::Distinct { values: Vec::new() },
                        };
                        (attribute, kind)
                    }
                    // 1.35's allocator knows no distinctAttribute.
                    _ => {
                        return Err(Stop::Fatal(format!(
                            "claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)"
                        )));
                    }
                };
                constraints.push(Constraint {
                    requests,
                    attribute,
                    kind,
                });
            }
            search.constraints.push(constraints);
        }
        // What the checks above cached goes: the search starts afresh.
        search.matches.clear();
        Ok(search)
    }

    /// Checks one (sub)request and, for `All`, finds its devices (`key`
    /// names the request in the selector cache).
    fn request_data(
        &mut self,
        view: RequestView<'a>,
        key: RequestKey,
        classes: &'a [DeviceClass],
        claim: &str,
    ) -> Result<RequestData<'a>, Stop> {
        let request_name = view.name;
        let fatal = |text: String| Stop::Fatal(format!("claim {claim}, request {request_name}: {text}"));
        if view.has_derived_attributes {
            return Err(fatal(
                "cannot handle request with derived attributes, the feature is disabled".to_owned(),
            ));
        }
        if let Some(i) = view.selectors.iter().position(|s| s.cel.is_none()) {
            return Err(Stop::Fatal(format!(
                "claim {claim}, request {}, selector #{i}: CEL expression empty (unsupported selector type?)",
                view.name
            )));
        }
        if !self.features.admin_access && view.has_admin_access {
            return Err(fatal(
                "admin access is requested, but the feature is disabled".to_owned(),
            ));
        }
        if view.class_name.is_empty() {
            return Err(fatal(
                "missing device class name (unsupported request type?)".to_owned(),
            ));
        }
        let Some(class) = classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(view.class_name))
        else {
            return Err(fatal(format!(
                "could not retrieve device class {}: deviceclass.resource.k8s.io \"{}\" not found",
                view.class_name, view.class_name
            )));
        };
        let mut data = RequestData {
            view,
            class,
            devices: 0,
            all: Vec::new(),
        };
        match data.view.mode {
            "ExactCount" => {
                data.devices = usize::try_from(data.view.count)
                    .map_err(|_| fatal(format!("exact count {} is too large", data.view.count)))?;
            }
            "All" => {
                let mut found = Vec::new();
                for (pool_index, pool) in self.pools.iter().enumerate() {
                    let usable = match &pool.state {
                        PoolState::Incomplete(_) => {
                            return Err(fatal(format!(
                                "asks for all devices, but resource pool {} is currently being updated",
                                pool.id
                            )));
                        }
                        PoolState::Invalid(_) => {
                            return Err(fatal(format!(
                                "asks for all devices, but resource pool {} is currently invalid",
                                pool.id
                            )));
                        }
                        PoolState::Usable(usable) => usable,
                    };
                    found.extend(candidates(usable, pool.id, pool_index));
                }
                let mut all = Vec::new();
                for candidate in found {
                    if !self.selectable(key, &data, &candidate, claim)? {
                        continue;
                    }
                    if self.features.consumable_capacity {
                        let fits = capacity::fits(
                            &Capacities::new(),
                            data.view.capacity,
                            candidate.device,
                            &Capacities::new(),
                            self.features.fractional_capacity_range,
                            self.minor,
                        )
                        .map_err(|e| fatal(format!("checking capacity for device {}: {e}", candidate.device.name)))?;
                        if !fits {
                            continue;
                        }
                    }
                    all.push(candidate);
                }
                data.devices = all.len();
                data.all = all;
            }
            other => return Err(fatal(format!("unsupported count mode {other}"))),
        }
        Ok(data)
    }

    /// Do the class's and the request's selectors (and the device's own node
    /// selection) admit the device? Cached per device and request.
    fn selectable(
        &mut self,
        key: RequestKey,
        data: &RequestData<'a>,
        candidate: &Candidate<'a>,
        claim: &str,
    ) -> Result<bool, Stop> {
        let device = candidate.device;
        if !self.features.device_binding_and_status && device.binding_conditions.as_ref().is_some_and(|b| !b.is_empty())
        {
            return Ok(false);
        }
        if let Some(&known) = self.matches.get(&(candidate.id, key)) {
            return Ok(known);
        }
        let class_selectors = data
            .class
            .spec
            .as_ref()
            .and_then(|s| s.selectors.as_deref())
            .unwrap_or_default();
        let class_name = data.class.metadata.name.as_deref().unwrap_or_default();
        let mut ok = self.selectors_match(candidate, class_selectors, &format!("class {class_name}"))?;
        if ok {
            ok = self.selectors_match(candidate, data.view.selectors, &format!("claim {claim}"))?;
        }
        if ok {
            ok = crate::nodesel::device_serves(candidate.slice, device, self.node).map_err(Stop::Fatal)?;
        }
        self.matches.insert((candidate.id, key), ok);
        Ok(ok)
    }

    fn selectors_match(
        &mut self,
        candidate: &Candidate<'a>,
        selectors: &[DeviceSelector],
        owner: &str,
    ) -> Result<bool, Stop> {
        let empty_attributes = BTreeMap::new();
        let empty_capacity = BTreeMap::new();
        let device = candidate.device;
        // Up to 1.36, without DRAListTypeAttributes, the CEL input cannot
        // hold a list value: any selector on such a device fails.
        if !selectors.is_empty() && self.minor <= 36 && !self.features.list_type_attributes {
            let listed =
                device.attributes.iter().flatten().find(|(_, a)| {
                    a.bools.is_some() || a.ints.is_some() || a.strings.is_some() || a.versions.is_some()
                });
            if let Some((name, _)) = listed {
                let qualified = if name.contains('/') {
                    name.clone()
                } else {
                    format!("{}/{name}", candidate.id.driver)
                };
                return Err(Stop::Fatal(format!(
                    "{owner}: selector #0: CEL runtime error: attribute {qualified}: unsupported attribute value"
                )));
            }
        }
        let view = DeviceView {
            driver: candidate.id.driver,
            attributes: device.attributes.as_ref().unwrap_or(&empty_attributes),
            capacity: device.capacity.as_ref().unwrap_or(&empty_capacity),
            allow_multiple_allocations: device.allow_multiple_allocations.unwrap_or(false),
        };
        for (i, selector) in selectors.iter().enumerate() {
            let Some(cel) = &selector.cel else { continue };
            let features = self.features;
            let compiled = self
                .compiled
                .entry(cel.expression.clone())
                .or_insert_with(|| Selector::compile(&cel.expression, features));
            let selector = match compiled {
                Ok(selector) => selector,
                Err(e) => return Err(Stop::Fatal(format!("{owner}: selector #{i}: CEL compile error: {e}"))),
            };
            match selector.matches(&view) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    let id = candidate.id;
                    return Err(Stop::Fatal(format!(
                        "{owner}: selector #{i} on device {}/{}/{}: CEL runtime error: {e}",
                        id.driver, id.pool, id.device
                    )));
                }
            }
        }
        Ok(true)
    }

    fn in_use(&self, id: &DeviceId<'a>) -> bool {
        self.in_use.dedicated.contains(id) || self.allocating.get(id).is_some_and(|c| !c.is_empty())
    }

    fn allocating_for_claim(&self, id: &DeviceId<'a>, claim: usize) -> bool {
        self.allocating.get(id).is_some_and(|c| c.contains(&claim))
    }

    fn capacity_in_use(&self, id: &DeviceId<'a>) -> bool {
        self.in_use.consumed.contains_key(id)
            || self.in_use.shared.contains(id)
            || self.allocating_capacity.contains_key(id)
    }

    /// Fills `slot` and every slot after it; `Ok(true)` once all claims are
    /// complete. `in_sub` is set while one chosen subrequest is tried.
    fn next_slot(&mut self, slot: Slot, in_sub: bool, start: Location) -> Result<bool, Stop> {
        let Some(claim) = self.claims.get(slot.claim) else {
            return Ok(true);
        };
        if slot.request >= requests_of(claim).len() {
            return match self.next_slot(
                Slot {
                    claim: slot.claim + 1,
                    ..Slot::default()
                },
                false,
                Location::default(),
            ) {
                Err(Stop::TooMany) => Ok(false),
                other => other,
            };
        }
        let key = slot.request_key();
        let is_sub = self.requests[&key].view.parent.is_some();
        if !in_sub && is_sub {
            // Try each subrequest in turn; the first that completes wins.
            let mut all_too_many = true;
            for sub in 0.. {
                if !self.requests.contains_key(&RequestKey { sub, ..key }) {
                    return if all_too_many { Err(Stop::TooMany) } else { Ok(false) };
                }
                match self.next_slot(Slot { sub, ..slot }, true, Location::default()) {
                    Err(Stop::TooMany) => continue,
                    Err(fatal) => return Err(fatal),
                    Ok(done) => {
                        all_too_many = false;
                        if done {
                            self.picked_sub.insert((slot.claim, slot.request), sub);
                            return Ok(true);
                        }
                    }
                }
            }
        }
        let data = &self.requests[&key];
        let wanted = data.devices;
        if data.view.all && data.all.is_empty() {
            return Ok(false);
        }
        if slot.device >= wanted {
            return self.next_slot(
                Slot {
                    claim: slot.claim,
                    request: slot.request + 1,
                    ..Slot::default()
                },
                false,
                Location::default(),
            );
        }
        if wanted - slot.device > MAX_RESULTS_PER_CLAIM.saturating_sub(self.results[slot.claim].len()) {
            return Err(Stop::TooMany);
        }
        let next = Slot {
            device: slot.device + 1,
            ..slot
        };
        // Up to 1.35 the next device of an `All` request forgets which
        // subrequest it serves (the subrequest index goes back to 0).
        let next_all = if self.minor <= 35 {
            Slot { sub: 0, ..next }
        } else {
            next
        };
        if data.view.all {
            let candidate = data.all[slot.device];
            let Some(placed) = self.place(slot, &candidate, true)? else {
                return Ok(false);
            };
            return match self.next_slot(next_all, in_sub, Location::default()) {
                Ok(true) => Ok(true),
                other => {
                    self.unplace(slot, &candidate, placed);
                    other.map(|_| false)
                }
            };
        }
        let claim_text = claim_name(claim);
        for pool_index in start.pool..self.pools.len() {
            let pool = &self.pools[pool_index];
            let usable = match &pool.state {
                PoolState::Usable(usable) => usable,
                // 1.34 takes devices from the slices it has.
                PoolState::Incomplete(Some(usable)) => usable,
                PoolState::Incomplete(None) => continue,
                // 1.34 stops at an invalid pool it reaches; later releases
                // pass it by.
                PoolState::Invalid(reason) if self.minor <= 34 => {
                    return Err(Stop::Fatal(format!("pool {} is invalid: {reason}", pool.id.pool)));
                }
                PoolState::Invalid(_) => continue,
            };
            let slice_start = if pool_index == start.pool { start.slice } else { 0 };
            let pool_id = pool.id;
            let slices: Vec<&'a ResourceSlice> = usable.slices.clone();
            for (slice_index, slice) in slices.iter().enumerate().skip(slice_start) {
                let device_start = if pool_index == start.pool && slice_index == start.slice {
                    start.device
                } else {
                    0
                };
                for (device_index, device) in slice.spec.devices.iter().flatten().enumerate().skip(device_start) {
                    let candidate = Candidate {
                        id: DeviceId {
                            driver: pool_id.driver,
                            pool: pool_id.pool,
                            device: &device.name,
                        },
                        device,
                        slice,
                        pool: pool_index,
                    };
                    let data = &self.requests[&key];
                    let admin = data.view.admin_access;
                    if admin && self.allocating_for_claim(&candidate.id, slot.claim) {
                        continue;
                    }
                    if !admin && self.in_use(&candidate.id) {
                        continue;
                    }
                    let data = self.requests.remove(&key).expect("request data is present");
                    let selectable = self.selectable(key, &data, &candidate, &claim_text);
                    let capacity_ok = match selectable {
                        Ok(true) if self.features.consumable_capacity => {
                            self.capacity_fits(&data, &candidate).map_err(|e| {
                                Stop::Fatal(format!(
                                    "claim {claim_text}, request {}: checking capacity for device {}/{}/{}: {e}",
                                    data.view.name, candidate.id.driver, candidate.id.pool, candidate.id.device
                                ))
                            })
                        }
                        other => other,
                    };
                    self.requests.insert(key, data);
                    if !capacity_ok? {
                        continue;
                    }
                    let Some(placed) = self.place(slot, &candidate, false)? else {
                        continue;
                    };
                    let after = Location {
                        pool: pool_index,
                        slice: slice_index,
                        device: device_index + 1,
                    };
                    match self.next_slot(next, in_sub, after) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.unplace(slot, &candidate, placed),
                        Err(stop) => {
                            self.unplace(slot, &candidate, placed);
                            return Err(stop);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// Does the device have room for the request's capacity, counting what
    /// other claims and this search already took?
    fn capacity_fits(&self, data: &RequestData<'a>, candidate: &Candidate<'a>) -> Result<bool, String> {
        let empty = Capacities::new();
        let allocated = self.in_use.consumed.get(&candidate.id).unwrap_or(&empty);
        let allocating = self.allocating_capacity.get(&candidate.id).unwrap_or(&empty);
        capacity::fits(
            allocated,
            data.view.capacity,
            candidate.device,
            allocating,
            self.features.fractional_capacity_range,
            self.minor,
        )
    }

    /// Takes the device for the slot if nothing forbids it; `None` if
    /// something does. `must`: the slot can only be this device (`All`).
    fn place(&mut self, slot: Slot, candidate: &Candidate<'a>, must: bool) -> Result<Option<Placed>, Stop> {
        let key = slot.request_key();
        let features = self.features;
        let (admin, request_name, parent, capacity_request, tolerations_ok) = {
            let view = &self.requests[&key].view;
            (
                view.admin_access,
                view.name,
                view.parent,
                view.capacity,
                !features.device_taints || !taint_prevents(candidate.device, view.tolerations.unwrap_or_default()),
            )
        };
        let multiple = features.consumable_capacity && candidate.device.allow_multiple_allocations == Some(true);
        if !multiple && admin && self.allocating_for_claim(&candidate.id, slot.claim) {
            return Ok(None);
        }
        if !admin && self.in_use(&candidate.id) {
            return Ok(None);
        }
        let consumes = candidate
            .device
            .consumes_counters
            .as_ref()
            .is_some_and(|c| !c.is_empty());
        if !features.partitionable_devices && consumes {
            return Ok(None);
        }
        let mut placed = Placed::default();
        let skip_counters = multiple && self.capacity_in_use(&candidate.id);
        if !skip_counters && consumes {
            if !self.take_counters(candidate) {
                return Ok(None);
            }
            placed.counters = true;
        }
        if !tolerations_ok {
            self.unplace_partial(slot, candidate, &placed);
            return Ok(None);
        }
        // Constraints name the request (and the subrequest, if any).
        let (base, sub) = match parent {
            Some(parent) => (parent, Some(request_name)),
            None => (request_name, None),
        };
        let claim_constraints = std::mem::take(&mut self.constraints[slot.claim]);
        let mut constraints = claim_constraints;
        let mut refused = false;
        for constraint in constraints.iter_mut() {
            if !constraint.add(base, sub, candidate) {
                refused = true;
                break;
            }
            placed.constraints += 1;
        }
        self.constraints[slot.claim] = constraints;
        if refused {
            self.unplace_partial(slot, candidate, &placed);
            if must {
                let claim = claim_name(self.claims[slot.claim]);
                let id = candidate.id;
                return Err(Stop::Fatal(format!(
                    "claim {claim}, request {request_name}: cannot add device {}/{}/{} because a claim constraint would not be satisfied",
                    id.driver, id.pool, id.device
                )));
            }
            return Ok(None);
        }
        if !multiple {
            self.allocating.entry(candidate.id).or_default().insert(slot.claim);
            placed.marked = true;
        }
        let mut consumed = None;
        let mut share = None;
        if features.consumable_capacity {
            let data = &self.requests[&key];
            let fits = self.capacity_fits(data, candidate).map_err(|e| {
                Stop::Fatal(format!(
                    "claim {}, request {request_name}: rechecking capacity for device {}/{}/{}: {e}",
                    claim_name(self.claims[slot.claim]),
                    candidate.id.driver,
                    candidate.id.pool,
                    candidate.id.device
                ))
            });
            match fits {
                Ok(true) => {}
                Ok(false) => {
                    self.unplace_partial(slot, candidate, &placed);
                    return Ok(None);
                }
                Err(e) => {
                    self.unplace_partial(slot, candidate, &placed);
                    return Err(e);
                }
            }
            if multiple {
                let taken = capacity::consumed_by(
                    capacity_request,
                    candidate.device,
                    features.fractional_capacity_range,
                    self.minor,
                )
                .map_err(|e| {
                    Stop::Fatal(format!(
                        "claim {}, request {request_name}: computing consumed capacity for device {}/{}/{}: {e}",
                        claim_name(self.claims[slot.claim]),
                        candidate.id.driver,
                        candidate.id.pool,
                        candidate.id.device
                    ))
                });
                let taken = match taken {
                    Ok(taken) => taken,
                    Err(e) => {
                        self.unplace_partial(slot, candidate, &placed);
                        return Err(e);
                    }
                };
                let existed = self.allocating_capacity.contains_key(&candidate.id);
                capacity::add_into(self.allocating_capacity.entry(candidate.id).or_default(), &taken);
                placed.capacity = Some((taken.clone(), existed));
                self.shares += 1;
                share = Some(self.shares);
                if !taken.is_empty() {
                    consumed = Some(taken);
                }
            }
        }
        self.results[slot.claim].push(Chosen {
            candidate: *candidate,
            request: key,
            admin_access: admin,
            share,
            consumed,
        });
        Ok(Some(placed))
    }

    /// Undoes [`Search::place`] after a successful placement.
    fn unplace(&mut self, slot: Slot, candidate: &Candidate<'a>, placed: Placed) {
        self.results[slot.claim].pop();
        if placed.capacity.is_some() {
            self.shares -= 1;
        }
        self.unplace_partial(slot, candidate, &placed);
    }

    /// Undoes what `placed` records, in reverse order.
    fn unplace_partial(&mut self, slot: Slot, candidate: &Candidate<'a>, placed: &Placed) {
        if let Some((taken, existed)) = &placed.capacity
            && let Some(held) = self.allocating_capacity.get_mut(&candidate.id)
        {
            capacity::sub_from(held, taken);
            if capacity::is_zero(held) && !existed {
                self.allocating_capacity.remove(&candidate.id);
            }
        }
        if placed.marked
            && let Some(claims) = self.allocating.get_mut(&candidate.id)
        {
            claims.remove(&slot.claim);
        }
        let key = slot.request_key();
        let (name, parent) = {
            let view = &self.requests[&key].view;
            (view.name, view.parent)
        };
        let (base, sub) = match parent {
            Some(parent) => (parent, Some(name)),
            None => (name, None),
        };
        for constraint in self.constraints[slot.claim][..placed.constraints].iter_mut().rev() {
            constraint.remove(base, sub);
        }
        if placed.counters {
            self.release_counters(candidate);
        }
    }

    /// Counters of the device's pool left after other claims' devices.
    fn pool_counters(&mut self, pool_index: usize) -> &CounterSets<'a> {
        let in_use = self.in_use;
        let pool = &self.pools[pool_index];
        self.available_counters.entry(pool_index).or_insert_with(|| {
            let PoolState::Usable(usable) = &pool.state else {
                return CounterSets::new();
            };
            available_counters(usable, pool.id, in_use)
        })
    }

    /// Takes the device's counters; `false` (and nothing taken) if any
    /// counter of its pool would be exceeded.
    fn take_counters(&mut self, candidate: &Candidate<'a>) -> bool {
        let available = self.pool_counters(candidate.pool).clone();
        let consumed = self.consumed_counters.entry(candidate.pool).or_default();
        for consumption in candidate.device.consumes_counters.iter().flatten() {
            let set = consumed.entry(consumption.counter_set.as_str()).or_default();
            for (name, counter) in &consumption.counters {
                *set.entry(name.as_str()).or_insert(Quantity::ZERO) += quantity(&counter.value.0);
            }
        }
        let exceeded = available.iter().any(|(set, counters)| {
            counters.iter().any(|(name, left)| {
                let taken = consumed
                    .get(set)
                    .and_then(|s| s.get(name))
                    .copied()
                    .unwrap_or(Quantity::ZERO);
                *left < taken
            })
        });
        if exceeded {
            self.release_counters(candidate);
        }
        !exceeded
    }

    fn release_counters(&mut self, candidate: &Candidate<'a>) {
        let Some(consumed) = self.consumed_counters.get_mut(&candidate.pool) else {
            return;
        };
        for consumption in candidate.device.consumes_counters.iter().flatten() {
            if let Some(set) = consumed.get_mut(consumption.counter_set.as_str()) {
                for (name, counter) in &consumption.counters {
                    if let Some(value) = set.get_mut(name.as_str()) {
                        *value -= quantity(&counter.value.0);
                    }
                }
            }
        }
    }

    /// The allocation results, one per claim.
    fn results(&self) -> Result<Vec<AllocationResult>, String> {
        let node_name = self.node.metadata.name.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(self.claims.len());
        let mut share_ids = 0usize;
        for (claim_index, claim) in self.claims.iter().enumerate() {
            let chosen = &self.results[claim_index];
            let mut results = Vec::with_capacity(chosen.len());
            for device in chosen {
                let view = &self.requests[&device.request].view;
                let share_id = device.share.map(|_| {
                    share_ids += 1;
                    format!("00000000-0000-0000-0000-{share_ids:012}")
                });
                results.push(DeviceRequestAllocationResult {
                    request: view.full_name(),
                    driver: device.candidate.id.driver.to_owned(),
                    pool: device.candidate.id.pool.to_owned(),
                    device: device.candidate.id.device.to_owned(),
                    admin_access: device.admin_access.then_some(true),
                    // 1.34 does not copy the request's tolerations.
                    tolerations: view
                        .tolerations
                        .filter(|t| !t.is_empty() && self.minor >= 35)
                        .map(<[_]>::to_vec),
                    share_id,
                    consumed_capacity: device.consumed.as_ref().map(capacity::to_api),
                    binding_conditions: if self.features.device_binding_and_status {
                        device.candidate.device.binding_conditions.clone()
                    } else {
                        None
                    },
                    binding_failure_conditions: if self.features.device_binding_and_status {
                        device.candidate.device.binding_failure_conditions.clone()
                    } else {
                        None
                    },
                    ..Default::default()
                });
            }
            let config = self.configs(claim_index, claim);
            let node_selector = node_selector(chosen, node_name).map_err(|e| {
                format!(
                    "create NodeSelector for claim {}: {e}",
                    claim.metadata.name.as_deref().unwrap_or_default()
                )
            })?;
            out.push(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(results).filter(|r| !r.is_empty()),
                    config: Some(config).filter(|c| !c.is_empty()),
                }),
                node_selector,
                allocation_timestamp: None,
            });
        }
        Ok(out)
    }

    /// The (sub)request that served request `index` of the claim.
    fn served(&self, claim: usize, request: usize) -> &RequestData<'a> {
        let sub = self.picked_sub.get(&(claim, request)).copied().unwrap_or(0);
        &self.requests[&RequestKey { claim, request, sub }]
    }

    /// The claim's device configuration: each class's configs once, naming
    /// the requests of that class, then the claim's own configs that name a
    /// request (or subrequest) it holds; a config naming every request
    /// names none ("all").
    fn configs(&self, claim_index: usize, claim: &ResourceClaim) -> Vec<DeviceAllocationConfiguration> {
        let requests = requests_of(claim);
        let mut configs: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
        for request_index in 0..requests.len() {
            let data = self.served(claim_index, request_index);
            let class_name = data.class.metadata.name.as_deref().unwrap_or_default();
            let name = data.view.full_name();
            if let Some(&(start, end)) = class_ranges.get(class_name) {
                for config in &mut configs[start..end] {
                    config.requests.get_or_insert_with(Vec::new).push(name.clone());
                }
                continue;
            }
            let start = configs.len();
            for config in data.class.spec.iter().flat_map(|s| s.config.iter().flatten()) {
                configs.push(DeviceAllocationConfiguration {
                    source: "FromClass".to_owned(),
                    requests: Some(vec![name.clone()]),
                    opaque: config.opaque.clone(),
                });
            }
            class_ranges.insert(class_name, (start, configs.len()));
        }
        let claim_configs = claim
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.config.as_deref())
            .unwrap_or_default();
        for config in claim_configs {
            let named = config.requests.as_deref().unwrap_or_default();
            let from_claim = || DeviceAllocationConfiguration {
                source: "FromClaim".to_owned(),
                requests: config.requests.clone().filter(|r| !r.is_empty()),
                opaque: config.opaque.clone(),
            };
            if named.is_empty() {
                configs.push(from_claim());
                continue;
            }
            // Up to 1.36 the config is added once for every request (or
            // chosen subrequest) it names; from 1.37 once.
            for (request_index, request) in requests.iter().enumerate() {
                let data = self.served(claim_index, request_index);
                if named.contains(&request.name)
                    || (data.view.parent.is_some() && named.contains(&data.view.full_name()))
                {
                    configs.push(from_claim());
                    if self.minor >= 37 {
                        break;
                    }
                }
            }
        }
        if self.minor < 37 {
            return configs;
        }
        for config in &mut configs {
            let Some(named) = &config.requests else { continue };
            if named.is_empty() {
                continue;
            }
            let all = requests.iter().enumerate().all(|(request_index, request)| {
                named.contains(&request.name) || {
                    let data = self.served(claim_index, request_index);
                    data.view.parent.is_some() && named.contains(&data.view.full_name())
                }
            });
            if all {
                config.requests = None;
            }
        }
        configs
    }
}

/// The devices of a usable pool's node slices, in search order.
fn candidates<'a>(usable: &UsablePool<'a>, id: PoolId<'a>, pool: usize) -> Vec<Candidate<'a>> {
    usable
        .slices
        .iter()
        .flat_map(|slice| {
            slice.spec.devices.iter().flatten().map(move |device| Candidate {
                id: DeviceId {
                    driver: id.driver,
                    pool: id.pool,
                    device: &device.name,
                },
                device,
                slice,
                pool,
            })
        })
        .collect()
}

/// The pool's shared counters less what other claims' devices consume
/// (which may go below zero: then nothing is left).
fn available_counters<'a>(usable: &UsablePool<'a>, id: PoolId<'a>, in_use: &InUse<'_>) -> CounterSets<'a> {
    let mut available: CounterSets<'a> = usable
        .counter_sets
        .iter()
        .map(|(&name, set)| {
            (
                name,
                set.counters
                    .iter()
                    .map(|(n, c)| (n.as_str(), quantity(&c.value.0)))
                    .collect(),
            )
        })
        .collect();
    for slice in usable.slices.iter().chain(&usable.other_slices) {
        for device in slice.spec.devices.iter().flatten() {
            let device_id = DeviceId {
                driver: id.driver,
                pool: id.pool,
                device: &device.name,
            };
            if !in_use.holds(&device_id) {
                continue;
            }
            for consumption in device.consumes_counters.iter().flatten() {
                let Some(set) = available.get_mut(consumption.counter_set.as_str()) else {
                    continue;
                };
                for (name, counter) in &consumption.counters {
                    if let Some(left) = set.get_mut(name.as_str()) {
                        *left -= quantity(&counter.value.0);
                    }
                }
            }
        }
    }
    available
}

/// A quantity from the API; one the API server would have refused counts as
/// zero.
pub(crate) fn quantity(text: &str) -> Quantity {
    topoalign_k8s::parse_quantity(text).unwrap_or(Quantity::ZERO)
}

/// Does a NoSchedule or NoExecute taint of the device lack a toleration?
fn taint_prevents(device: &Device, tolerations: &[DeviceToleration]) -> bool {
    device.taints.iter().flatten().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute") && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if toleration
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if toleration
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// Where the allocation is usable: the node alone if any device is local to
/// it (or binds to it), else the union of the slices' node selectors (one
/// term), else everywhere (`None`).
fn node_selector(chosen: &[Chosen<'_>], node_name: &str) -> Result<Option<NodeSelector>, String> {
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut expressions: Vec<NodeSelectorRequirement> = Vec::new();
    for device in chosen {
        let (slice, dev) = (device.candidate.slice, device.candidate.device);
        let (name, selector) = if slice.spec.per_device_node_selection == Some(true) {
            (dev.node_name.as_deref(), dev.node_selector.as_ref())
        } else {
            (slice.spec.node_name.as_deref(), slice.spec.node_selector.as_ref())
        };
        if name.is_some() || dev.binds_to_node == Some(true) {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![node_name.to_owned()]),
                    }]),
                    match_expressions: None,
                }],
            }));
        }
        if let Some(selector) = selector {
            match selector.node_selector_terms.as_slice() {
                [] => {}
                [term] => {
                    for requirement in term.match_fields.iter().flatten() {
                        if !fields.contains(requirement) {
                            fields.push(requirement.clone());
                        }
                    }
                    for requirement in term.match_expressions.iter().flatten() {
                        if !expressions.contains(requirement) {
                            expressions.push(requirement.clone());
                        }
                    }
                }
                terms => {
                    return Err(format!(
                        "unsupported ResourceSlice.NodeSelector with {} terms",
                        terms.len()
                    ));
                }
            }
        }
    }
    if fields.is_empty() && expressions.is_empty() {
        return Ok(None);
    }
    Ok(Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(fields).filter(|f| !f.is_empty()),
            match_expressions: Some(expressions).filter(|e| !e.is_empty()),
        }],
    }))
}

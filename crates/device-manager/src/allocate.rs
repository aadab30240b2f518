//! Choosing the devices for one container and one resource (the kubelet's
//! `devicesToAllocate`, `filterByAffinity`, and the conformance plugins'
//! `GetPreferredAllocation`).
//!
//! Owns the choice only: it reads the registry and what is in use, and
//! returns the ids to give; recording them is the manager's job.
//!
//! The kubelet picks from unordered sets, so without a plugin preference its
//! choice is random. The conformance plugins implement
//! `GetPreferredAllocation` ([`preferred_allocation`]) and, because every
//! call asks for exactly the number of devices still needed, that makes the
//! outcome deterministic. The one place where the kubelet stays in map order
//! whatever the plugin says — re-using more init-container devices than the
//! container needs — takes the lowest ids here.

use std::collections::BTreeSet;
use std::sync::Arc;

use topoalign_model::{NumaMask, TopologyHint};

use crate::DeviceAllocateError;
use crate::pod_devices::{DeviceSet, InUse};
use crate::registry::ResourceDevices;

/// One `devicesToAllocate` call.
pub(crate) struct Request<'a> {
    pub(crate) pod_uid: &'a str,
    pub(crate) container: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) devices: &'a ResourceDevices,
    /// The container's limit, in devices.
    pub(crate) required: i128,
    /// What the container already holds of this resource (a repeated call).
    pub(crate) already_held: Option<&'a DeviceSet>,
    /// Devices of earlier init containers of the pod it may take over.
    pub(crate) reusable: &'a DeviceSet,
    /// Devices held by any pod.
    pub(crate) in_use: InUse<'a>,
    /// The topology manager's hint for the container.
    pub(crate) hint: TopologyHint,
}

/// The devices to give; empty when nothing new is needed.
///
/// # Errors
/// The kubelet's errors, e.g. `requested number of devices unavailable for
/// nvidia.com/gpu. Requested: 2, Available: 1`.
pub(crate) fn devices_to_allocate(request: &Request<'_>) -> Result<DeviceSet, DeviceAllocateError> {
    let Request { resource, required, .. } = *request;
    let mut needed = required;
    if let Some(held) = request.already_held {
        needed -= len(held);
        if needed != 0 {
            return Err(DeviceAllocateError::new(format!(
                "pod {:?} container {:?} changed request for resource {:?} from {} to {}",
                request.pod_uid,
                request.container,
                resource,
                held.len(),
                required
            )));
        }
    }
    if request.devices.is_empty() {
        return Err(DeviceAllocateError::new(format!(
            "no healthy devices present; cannot allocate unhealthy devices {resource}"
        )));
    }
    if needed == 0 {
        return Ok(DeviceSet::new());
    }
    if needed < 0 {
        // Not reachable from a valid pod (negative quantities are rejected
        // at the edge). The kubelet would grab devices without ever reaching
        // zero and then fail with this text; we fail without grabbing.
        return Err(less_than_required(required, 0));
    }

    let mut chosen = Chosen {
        needed,
        devices: DeviceSet::new(),
    };
    if chosen.take_from(request.reusable.iter()) {
        return Ok(chosen.devices);
    }

    // Ids are borrowed from the registry (only the ones given are copied),
    // each with its affinity, in ascending id order.
    let available: Vec<(&Arc<str>, Option<NumaMask>)> = request
        .devices
        .iter()
        .filter(|(id, _)| !request.in_use.contains(id) && !chosen.devices.contains(*id))
        .collect();
    if i128::try_from(available.len()).unwrap_or(i128::MAX) < chosen.needed {
        return Err(DeviceAllocateError::new(format!(
            "requested number of devices unavailable for {resource}. Requested: {}, Available: {}",
            chosen.needed,
            available.len()
        )));
    }

    let buckets = filter_by_affinity(request.devices, &available, request.hint);
    if chosen.needed < i128::try_from(buckets.aligned().len()).unwrap_or(i128::MAX) {
        // Everything fits in the aligned set: let the plugin choose there.
        let offered: Ids<'_> = buckets.aligned().iter().copied().chain(&chosen.devices).collect();
        let preferred = preferred_allocation(request.devices, &offered, &chosen.devices, required);
        if chosen.take_from(preferred.iter().filter(|id| holds(buckets.aligned(), id))) {
            return Ok(chosen.devices);
        }
        if chosen.take_from(buckets.aligned().iter().copied()) {
            return Ok(chosen.devices);
        }
        return Err(less_than_required(required, required - chosen.needed));
    }

    // Take every aligned device first (the alignment the topology manager
    // promised), then let the plugin choose among the rest.
    if chosen.take_from(buckets.aligned().iter().copied()) {
        return Ok(chosen.devices);
    }
    let offered: Ids<'_> = available.iter().map(|&(id, _)| id).chain(&chosen.devices).collect();
    let preferred = preferred_allocation(request.devices, &offered, &chosen.devices, required);
    let is_available = |id: &&Arc<str>| {
        available
            .binary_search_by(|(other, _)| other.as_ref().cmp(id.as_ref()))
            .is_ok()
    };
    if chosen.take_from(preferred.iter().filter(is_available)) {
        return Ok(chosen.devices);
    }
    if chosen.take_from(buckets.unaligned().iter().copied())
        || chosen.take_from(buckets.without_topology().iter().copied())
    {
        return Ok(chosen.devices);
    }
    Err(less_than_required(required, required - chosen.needed))
}

/// Devices chosen so far and how many are still needed (the kubelet's
/// `allocateRemainingFrom` closure state).
struct Chosen {
    needed: i128,
    devices: DeviceSet,
}

impl Chosen {
    /// Takes candidates not chosen yet, in order, until none is needed;
    /// whether the request is complete.
    fn take_from<'a>(&mut self, candidates: impl Iterator<Item = &'a Arc<str>>) -> bool {
        for id in candidates {
            if self.needed <= 0 {
                break;
            }
            if self.devices.insert(id.clone()) {
                self.needed -= 1;
            }
        }
        self.needed <= 0
    }
}

/// The available devices split by the hint (the kubelet's
/// `filterByAffinity`). A device on several NUMA nodes is aligned as soon as
/// one of them is in the hint. Each bucket is in ascending id order; the
/// three are consecutive parts of one list (one allocation).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct AffinityBuckets<'a> {
    ids: Vec<&'a Arc<str>>,
    aligned_end: usize,
    unaligned_end: usize,
}

impl<'a> AffinityBuckets<'a> {
    pub(crate) fn aligned(&self) -> &[&'a Arc<str>] {
        &self.ids[..self.aligned_end]
    }

    pub(crate) fn unaligned(&self) -> &[&'a Arc<str>] {
        &self.ids[self.aligned_end..self.unaligned_end]
    }

    pub(crate) fn without_topology(&self) -> &[&'a Arc<str>] {
        &self.ids[self.unaligned_end..]
    }
}

/// Device ids borrowed from the registry (or from what is already chosen),
/// ascending like a [`DeviceSet`].
pub(crate) type Ids<'a> = BTreeSet<&'a Arc<str>>;

/// Whether the ascending list `ids` holds `id`.
fn holds(ids: &[&Arc<str>], id: &str) -> bool {
    ids.binary_search_by(|other| other.as_ref().cmp(id)).is_ok()
}

/// Without a hint affinity, or for a resource none of whose devices reports
/// a topology, everything lands in `without_topology`: nothing is aligned.
/// `available` is in ascending id order, with each device's affinity.
pub(crate) fn filter_by_affinity<'a>(
    devices: &ResourceDevices,
    available: &[(&'a Arc<str>, Option<NumaMask>)],
    hint: TopologyHint,
) -> AffinityBuckets<'a> {
    let ids = |wanted: Bucket| {
        available
            .iter()
            .filter(move |&&(_, affinity)| bucket(devices, hint, affinity) == wanted)
            .map(|&(id, _)| id)
    };
    let mut all = Vec::with_capacity(available.len());
    all.extend(ids(Bucket::Aligned));
    let aligned_end = all.len();
    all.extend(ids(Bucket::Unaligned));
    let unaligned_end = all.len();
    all.extend(ids(Bucket::WithoutTopology));
    AffinityBuckets {
        ids: all,
        aligned_end,
        unaligned_end,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bucket {
    Aligned,
    Unaligned,
    WithoutTopology,
}

/// Which bucket of [`filter_by_affinity`] a device with `affinity` is in.
fn bucket(devices: &ResourceDevices, hint: TopologyHint, affinity: Option<NumaMask>) -> Bucket {
    match (hint.affinity, affinity) {
        (Some(hint_mask), Some(affinity)) if devices.has_topology_alignment() => {
            if affinity.intersects(hint_mask) {
                Bucket::Aligned
            } else {
                Bucket::Unaligned
            }
        }
        _ => Bucket::WithoutTopology,
    }
}

/// The conformance plugins' `GetPreferredAllocation` (conformance README,
/// "Device choice"): the must-include devices, then the other offered
/// devices — those with a NUMA affinity first, each group by ascending id
/// (string order) — up to `size` devices in all, in that order.
pub(crate) fn preferred_allocation(
    devices: &ResourceDevices,
    offered: &Ids<'_>,
    must_include: &DeviceSet,
    size: i128,
) -> Vec<Arc<str>> {
    let size = usize::try_from(size.max(0)).unwrap_or(usize::MAX);
    let rest = |with_topology: bool| {
        offered
            .iter()
            .copied()
            .filter(move |id| !must_include.contains(*id) && devices.affinity(id).is_some() == with_topology)
    };
    must_include
        .iter()
        .chain(rest(true))
        .chain(rest(false))
        .take(size.max(must_include.len()))
        .cloned()
        .collect()
}

fn less_than_required(required: i128, got: i128) -> DeviceAllocateError {
    DeviceAllocateError::new(format!(
        "unexpectedly allocated less resources than required. Requested: {required}, Got: {got}"
    ))
}

fn len<T>(set: &BTreeSet<T>) -> i128 {
    i128::try_from(set.len()).unwrap_or(i128::MAX)
}

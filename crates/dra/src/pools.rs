//! The resource pools a node can allocate from: every ResourceSlice that
//! serves the node, grouped by (driver, pool), the newest generation only,
//! checked for completeness and validity, in the allocator's search order
//! (pools by driver then name, pools with binding conditions last; slices by
//! name; devices as listed).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CounterSet, ResourceSlice};

use crate::features::Features;
use crate::nodesel::slice_serves;

/// A pool's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PoolId<'a> {
    pub driver: &'a str,
    pub pool: &'a str,
}

impl std::fmt::Display for PoolId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.driver, self.pool)
    }
}

/// One pool as the search sees it.
#[derive(Debug)]
pub(crate) struct Pool<'a> {
    pub id: PoolId<'a>,
    pub state: PoolState<'a>,
}

#[derive(Debug)]
pub(crate) enum PoolState<'a> {
    /// Not every slice of the pool's generation is published yet. 1.34
    /// still allocates from the slices it has (`Some`); later releases do
    /// not.
    Incomplete(Option<UsablePool<'a>>),
    /// Duplicate device names, unknown counter sets, … (why).
    Invalid(String),
    Usable(UsablePool<'a>),
}

#[derive(Debug)]
pub(crate) struct UsablePool<'a> {
    /// The slices with devices for this node, by name.
    pub slices: Vec<&'a ResourceSlice>,
    /// The pool's other device slices (their allocated devices still use
    /// shared counters).
    pub other_slices: Vec<&'a ResourceSlice>,
    /// Shared counter sets by name (partitionable devices).
    pub counter_sets: BTreeMap<&'a str, &'a CounterSet>,
}

fn pool_id(slice: &ResourceSlice) -> PoolId<'_> {
    PoolId {
        driver: &slice.spec.driver,
        pool: &slice.spec.pool.name,
    }
}

/// The pools with devices for `node`, in search order.
///
/// `minor` is the release (34 for 1.34). Up to 1.35 the scheduler keeps
/// pools in a Go map and visits them in its random order, and a pool's
/// slices in the order they were listed; this takes pools by (driver, pool)
/// — one of the orders 1.34/1.35 may take — and slices as listed. From 1.36
/// pools are sorted so, and slices by name.
pub(crate) fn gather<'a>(
    slices: &'a [ResourceSlice],
    node: &Node,
    features: &Features,
    minor: u8,
) -> Result<Vec<Pool<'a>>, String> {
    // From 1.36 the node's own slices come first, then those without a node
    // name (the order in which the scheduler hands them over).
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let listed: Vec<&'a ResourceSlice> = if minor <= 35 {
        slices.iter().collect()
    } else {
        let own = slices.iter().filter(|s| {
            s.spec
                .node_name
                .as_deref()
                .is_some_and(|n| !n.is_empty() && n == node_name)
        });
        let shared = slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref().unwrap_or_default().is_empty());
        own.chain(shared).collect()
    };
    let mut by_pool: BTreeMap<PoolId<'a>, Vec<&'a ResourceSlice>> = BTreeMap::new();
    let mut with_binding_conditions = Vec::new();
    for slice in listed {
        let spec = &slice.spec;
        let per_device = spec.per_device_node_selection;
        // Without partitionable devices, slices that select nodes per
        // device are skipped, and from 1.35 those with shared counters too.
        let counters = spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty());
        if !features.partitionable_devices && (per_device.is_some() || (counters && minor >= 35)) {
            continue;
        }
        let Some(relevant) = slice_serves(slice, node)? else {
            // Some future way of selecting nodes: not understood, skipped.
            continue;
        };
        if relevant {
            if minor <= 34 && slice_has_binding_conditions(slice) {
                // 1.34 adds these after all other slices.
                with_binding_conditions.push(slice);
            } else {
                add_slice(&mut by_pool, slice);
            }
        }
    }
    for slice in with_binding_conditions {
        add_slice(&mut by_pool, slice);
    }

    let mut ready = Vec::new();
    let mut pools_with_binding_conditions = Vec::new();
    for (id, pool_slices) in by_pool {
        let first = &pool_slices[0].spec.pool;
        let pool = if pool_slices.len() as i64 == first.resource_slice_count {
            build(id, pool_slices, Vec::new(), features, minor)
        } else if minor <= 34 {
            // 1.34 counts only the slices that serve the node, and still
            // allocates from an incomplete pool.
            match build(id, pool_slices, Vec::new(), features, minor) {
                Pool {
                    state: PoolState::Usable(usable),
                    ..
                } => Pool {
                    id,
                    state: PoolState::Incomplete(Some(usable)),
                },
                invalid => invalid,
            }
        } else {
            // Slices that serve other nodes belong to the pool too: look
            // at all of them before calling it incomplete.
            let generation = first.generation;
            let count = first.resource_slice_count;
            let mut all = Vec::new();
            let mut obsolete = false;
            for slice in slices.iter().filter(|s| pool_id(s) == id) {
                match slice.spec.pool.generation.cmp(&generation) {
                    std::cmp::Ordering::Equal => all.push(slice),
                    std::cmp::Ordering::Greater => obsolete = true,
                    std::cmp::Ordering::Less => {}
                }
            }
            if obsolete {
                // The driver is replacing this generation: ignore the pool.
                continue;
            }
            if all.len() as i64 != count {
                Pool {
                    id,
                    state: PoolState::Incomplete(None),
                }
            } else {
                let targeting: BTreeSet<_> = pool_slices
                    .iter()
                    .map(|s| s.metadata.name.as_deref().unwrap_or_default())
                    .collect();
                let others = all
                    .into_iter()
                    .filter(|s| !targeting.contains(s.metadata.name.as_deref().unwrap_or_default()))
                    .collect();
                build(id, pool_slices, others, features, minor)
            }
        };
        if has_binding_conditions(&pool) {
            pools_with_binding_conditions.push(pool);
        } else {
            ready.push(pool);
        }
    }
    // BTreeMap iteration already gives (driver, pool) order for both lists.
    ready.extend(pools_with_binding_conditions);
    Ok(ready)
}

/// Adds a slice to its pool: an older generation is dropped, a newer one
/// replaces what the pool held.
fn add_slice<'a>(by_pool: &mut BTreeMap<PoolId<'a>, Vec<&'a ResourceSlice>>, slice: &'a ResourceSlice) {
    let held = by_pool.entry(pool_id(slice)).or_default();
    let generation = slice.spec.pool.generation;
    match held.first().map(|s| s.spec.pool.generation) {
        Some(have) if generation < have => {}
        Some(have) if generation > have => *held = vec![slice],
        _ => held.push(slice),
    }
}

fn build<'a>(
    id: PoolId<'a>,
    mut targeting: Vec<&'a ResourceSlice>,
    others: Vec<&'a ResourceSlice>,
    features: &Features,
    minor: u8,
) -> Pool<'a> {
    // Slices by name from 1.36; as listed before.
    if minor >= 36 {
        targeting.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    let has_counters = |s: &ResourceSlice| s.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty());
    let (counter_slices, device_slices): (Vec<_>, Vec<_>) = targeting
        .into_iter()
        .partition(|s| features.partitionable_devices && has_counters(s));
    let (other_counter_slices, other_slices): (Vec<_>, Vec<_>) = others
        .into_iter()
        .partition(|s| features.partitionable_devices && has_counters(s));

    let mut names = BTreeSet::new();
    for slice in &device_slices {
        for device in slice.spec.devices.as_deref().unwrap_or_default() {
            if !names.insert(device.name.as_str()) {
                return Pool {
                    id,
                    state: PoolState::Invalid(format!("duplicate device name {}", device.name)),
                };
            }
        }
    }
    if !features.partitionable_devices {
        return Pool {
            id,
            state: PoolState::Usable(UsablePool {
                slices: device_slices,
                other_slices: Vec::new(),
                counter_sets: BTreeMap::new(),
            }),
        };
    }
    let mut counter_sets = BTreeMap::new();
    for slice in counter_slices.iter().chain(&other_counter_slices) {
        for set in slice.spec.shared_counters.as_deref().unwrap_or_default() {
            if counter_sets.insert(set.name.as_str(), set).is_some() {
                return Pool {
                    id,
                    state: PoolState::Invalid(format!("duplicate counter set name {}", set.name)),
                };
            }
        }
    }
    let consumption_known = |slices: &[&ResourceSlice]| {
        slices.iter().all(|slice| {
            slice.spec.devices.as_deref().unwrap_or_default().iter().all(|device| {
                device
                    .consumes_counters
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .all(|consumption| {
                        counter_sets
                            .get(consumption.counter_set.as_str())
                            .is_some_and(|set| consumption.counters.keys().all(|name| set.counters.contains_key(name)))
                    })
            })
        })
    };
    if !consumption_known(&device_slices) || !consumption_known(&other_slices) {
        return Pool {
            id,
            state: PoolState::Invalid("a device consumes a counter no counter set of the pool has".to_owned()),
        };
    }
    Pool {
        id,
        state: PoolState::Usable(UsablePool {
            slices: device_slices,
            other_slices,
            counter_sets,
        }),
    }
}

fn has_binding_conditions(pool: &Pool<'_>) -> bool {
    let (PoolState::Usable(usable) | PoolState::Incomplete(Some(usable))) = &pool.state else {
        return false;
    };
    usable.slices.iter().any(|s| slice_has_binding_conditions(s))
}

fn slice_has_binding_conditions(slice: &ResourceSlice) -> bool {
    slice
        .spec
        .devices
        .iter()
        .flatten()
        .any(|d| d.binding_conditions.is_some())
}

//! Consumable capacity (DRAConsumableCapacity): a device that allows several
//! allocations hands out shares of its capacities; a request asks for an
//! amount of each, rounded up to what the device's request policy allows
//! (a default, a range with a step, a list of valid values).
//!
//! Amounts are exact to a thousandth of a unit (the model's [`Quantity`]);
//! the API's finer amounts are rounded up as `MilliValue` does.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements, Device};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use topoalign_model::{Quantity, QuantityFormat};

use crate::allocator::quantity;

/// Amounts per capacity name.
pub(crate) type Capacities = BTreeMap<String, Quantity>;

pub(crate) fn parse_map(map: &BTreeMap<String, ApiQuantity>) -> Capacities {
    map.iter().map(|(name, q)| (name.clone(), quantity(&q.0))).collect()
}

pub(crate) fn to_api(map: &Capacities) -> BTreeMap<String, ApiQuantity> {
    map.iter()
        .map(|(name, q)| (name.clone(), ApiQuantity(q.to_string())))
        .collect()
}

pub(crate) fn add_into(into: &mut Capacities, added: &Capacities) {
    for (name, q) in added {
        *into.entry(name.clone()).or_insert(Quantity::ZERO) += *q;
    }
}

pub(crate) fn sub_from(from: &mut Capacities, taken: &Capacities) {
    for (name, q) in taken {
        if let Some(held) = from.get_mut(name) {
            *held -= *q;
        }
    }
}

pub(crate) fn is_zero(map: &Capacities) -> bool {
    map.values().all(|q| q.is_zero())
}

/// Does the request fit the device beside what is allocated and being
/// allocated? A request for a capacity the device lacks never fits.
pub(crate) fn fits(
    allocated: &Capacities,
    request: Option<&CapacityRequirements>,
    device: &Device,
    allocating: &Capacities,
    fractional: bool,
    minor: u8,
) -> Result<bool, String> {
    let empty = BTreeMap::new();
    let capacities = device.capacity.as_ref().unwrap_or(&empty);
    let requested = request.and_then(|r| r.requests.as_ref());
    if requested.is_some_and(|r| r.keys().any(|name| !capacities.contains_key(name))) {
        return Ok(false);
    }
    let mut consumed = BTreeMap::new();
    for (name, capacity) in capacities {
        let asked = requested.and_then(|r| r.get(name)).map(|q| quantity(&q.0));
        let amount = consumed_amount(
            asked,
            capacity.request_policy.as_ref(),
            quantity(&capacity.value.0),
            fractional,
            minor,
        )
        .map_err(|e| format!("capacity {name:?}: {e}"))?;
        if amount.is_negative() {
            return Err(format!("capacity {name:?}: capacity value is negative"));
        }
        consumed.insert(name, amount);
    }
    for (name, capacity) in capacities {
        let amount = consumed[name];
        if violates_policy(amount, capacity.request_policy.as_ref(), fractional) {
            return Ok(false);
        }
        let total = allocated.get(name).copied().unwrap_or(Quantity::ZERO)
            + amount
            + allocating.get(name).copied().unwrap_or(Quantity::ZERO);
        if total > quantity(&capacity.value.0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What one share takes of each of the device's capacities.
pub(crate) fn consumed_by(
    request: Option<&CapacityRequirements>,
    device: &Device,
    fractional: bool,
    minor: u8,
) -> Result<Capacities, String> {
    let requested = request.and_then(|r| r.requests.as_ref());
    let mut consumed = Capacities::new();
    for (name, capacity) in device.capacity.iter().flatten() {
        let asked = requested.and_then(|r| r.get(name)).map(|q| quantity(&q.0));
        let amount = consumed_amount(
            asked,
            capacity.request_policy.as_ref(),
            quantity(&capacity.value.0),
            fractional,
            minor,
        )
        .map_err(|e| format!("capacity {name:?}: {e}"))?;
        consumed.insert(name.clone(), amount);
    }
    Ok(consumed)
}

/// The amount a request takes: the policy's default (or the whole capacity)
/// when it asks for none; rounded up to the range's step or the next valid
/// value otherwise.
fn consumed_amount(
    asked: Option<Quantity>,
    policy: Option<&CapacityRequestPolicy>,
    value: Quantity,
    fractional: bool,
    minor: u8,
) -> Result<Quantity, String> {
    let Some(asked) = asked else {
        return Ok(policy
            .and_then(|p| p.default.as_ref())
            .map_or(value, |d| quantity(&d.0)));
    };
    let Some(policy) = policy else { return Ok(asked) };
    if let Some(range) = &policy.valid_range {
        return round_up_range(asked, range, fractional, minor);
    }
    if let Some(values) = &policy.valid_values {
        return Ok(values
            .iter()
            .map(|v| quantity(&v.0))
            .find(|v| asked <= *v)
            .unwrap_or(asked));
    }
    Ok(asked)
}

/// 1.36 prints the rounded amount in binary notation; 1.37 in the step's.
fn round_up_range(
    asked: Quantity,
    range: &CapacityRequestPolicyRange,
    fractional: bool,
    minor: u8,
) -> Result<Quantity, String> {
    let min = quantity(&range.min.0);
    if asked < min {
        return Ok(min);
    }
    let Some(step) = range.step.as_ref().map(|s| quantity(&s.0)) else {
        return Ok(asked);
    };
    let format = if minor <= 36 {
        QuantityFormat::BinarySI
    } else {
        step.format()
    };
    let (asked_n, min_n, step_n) = if use_milli(range, fractional) {
        (asked.milli(), min.milli(), step.milli())
    } else {
        (asked.value(), min.value(), step.value())
    };
    if step_n <= 0 {
        return Err("capacity request cannot be represented in the device's range arithmetic".to_owned());
    }
    let added = asked_n - min_n;
    let steps = added / step_n + i128::from(added % step_n != 0);
    let rounded = min_n + step_n * steps;
    if rounded > i128::from(i64::MAX) {
        return Err(format!(
            "capacity request cannot be represented in the device's range arithmetic: rounding request {asked} up to the next step passes the range"
        ));
    }
    Ok(if use_milli(range, fractional) {
        Quantity::from_milli(rounded).with_format(format)
    } else {
        Quantity::from_units(rounded).with_format(format)
    })
}

/// Range arithmetic in thousandths when fractional ranges are on and the
/// step is at least one thousandth.
fn use_milli(range: &CapacityRequestPolicyRange, fractional: bool) -> bool {
    fractional && range.step.as_ref().is_none_or(|s| quantity(&s.0).milli() >= 1)
}

fn violates_policy(amount: Quantity, policy: Option<&CapacityRequestPolicy>, fractional: bool) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.as_ref().is_some_and(|d| quantity(&d.0) == amount) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.as_ref().is_some_and(|m| amount > quantity(&m.0)) {
            return true;
        }
        if let Some(step) = range.step.as_ref().map(|s| quantity(&s.0)) {
            let min = quantity(&range.min.0);
            let (a, m, s) = if use_milli(range, fractional) {
                (amount.milli(), min.milli(), step.milli())
            } else {
                (amount.value(), min.value(), step.value())
            };
            return s == 0 || (a - m) % s != 0;
        }
        return false;
    }
    if let Some(values) = policy.valid_values.as_ref().filter(|v| !v.is_empty()) {
        return !values.iter().any(|v| quantity(&v.0) == amount);
    }
    false
}

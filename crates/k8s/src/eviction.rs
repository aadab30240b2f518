//! `evictionHard`: the kubelet's hard eviction thresholds
//! (`eviction.ParseThresholdConfig`) and what they keep back from node
//! allocatable (`hardEvictionReservation` in pkg/kubelet/cm).
//!
//! Owns: signal names, quantity/percentage thresholds and their error texts.
//! Must not touch: eviction itself (no memory pressure is modelled).

use std::collections::BTreeMap;

use topoalign_model::{Quantity, QuantityFormat, ResourceList};

use crate::go;
use crate::quantity::{QuantityError, go_string, parse_quantity};

/// The signals a v1.32 kubelet on Linux knows (`signalToResource`).
const SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];

/// The amount a threshold is set at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThresholdValue {
    Quantity(Quantity),
    /// A fraction of capacity (`10%` is 0.1), in Go's `float32`.
    Percentage(f32),
}

/// One hard eviction threshold (`signal < value`).
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub signal: String,
    pub value: ThresholdValue,
}

/// Why the kubelet refuses an `evictionHard` statement; the message is the
/// kubelet's, and [`EvictionError::signal`] names the statement's key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvictionError {
    #[error("unsupported eviction signal {signal}")]
    UnsupportedSignal { signal: String },
    /// A percentage that is not a number (Go's `strconv.ParseFloat` text).
    #[error("strconv.ParseFloat: parsing {}: {reason}", go::quote(.number))]
    PercentageNumber {
        signal: String,
        number: String,
        reason: &'static str,
    },
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    PercentageBelowZero { signal: String, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    PercentageAboveAll { signal: String, value: String },
    /// A value that is not a quantity.
    #[error("{error}")]
    Quantity { signal: String, error: QuantityError },
    /// A quantity of zero or less (`shown` as the kubelet prints it).
    #[error("eviction threshold {signal} must be positive: {shown}")]
    NotPositive { signal: String, shown: String },
}

impl EvictionError {
    /// The statement's signal (its key in `evictionHard`).
    pub fn signal(&self) -> &str {
        match self {
            EvictionError::UnsupportedSignal { signal }
            | EvictionError::PercentageNumber { signal, .. }
            | EvictionError::PercentageBelowZero { signal, .. }
            | EvictionError::PercentageAboveAll { signal, .. }
            | EvictionError::Quantity { signal, .. }
            | EvictionError::NotPositive { signal, .. } => signal,
        }
    }
}

/// Parses `evictionHard` like `parseThresholdStatements`; `0%` and `100%`
/// thresholds are dropped, as the kubelet drops them.
///
/// # Errors
/// [`EvictionError`] for the first statement refused, with the kubelet's
/// text, e.g. `unsupported eviction signal x`, `eviction threshold
/// memory.available must be positive: -1Mi`.
pub fn parse_hard_thresholds(statements: &BTreeMap<String, String>) -> Result<Vec<Threshold>, EvictionError> {
    let mut thresholds = Vec::new();
    for (signal, value) in statements {
        if let Some(value) = parse_statement(signal, value)? {
            thresholds.push(Threshold {
                signal: signal.clone(),
                value,
            });
        }
    }
    Ok(thresholds)
}

fn parse_statement(signal: &str, text: &str) -> Result<Option<ThresholdValue>, EvictionError> {
    if !SIGNALS.contains(&signal) {
        return Err(EvictionError::UnsupportedSignal {
            signal: signal.to_owned(),
        });
    }
    if text.ends_with('%') {
        if text == "0%" || text == "100%" {
            return Ok(None);
        }
        let number = text.trim_end_matches('%');
        let value = go::parse_float32(number).map_err(|e| EvictionError::PercentageNumber {
            signal: signal.to_owned(),
            number: number.to_owned(),
            reason: e.reason(),
        })?;
        let fraction = value / 100.0;
        if fraction < 0.0 {
            return Err(EvictionError::PercentageBelowZero {
                signal: signal.to_owned(),
                value: text.to_owned(),
            });
        }
        if fraction > 1.0 {
            return Err(EvictionError::PercentageAboveAll {
                signal: signal.to_owned(),
                value: text.to_owned(),
            });
        }
        return Ok(Some(ThresholdValue::Percentage(fraction)));
    }
    let quantity = parse_quantity(text).map_err(|error| EvictionError::Quantity {
        signal: signal.to_owned(),
        error,
    })?;
    if quantity.milli() <= 0 {
        let shown = go_string(text).unwrap_or_else(|| "0".to_owned());
        return Err(EvictionError::NotPositive {
            signal: signal.to_owned(),
            shown,
        });
    }
    Ok(Some(ThresholdValue::Quantity(quantity)))
}

/// `hardEvictionReservation`: what `memory.available` and
/// `nodefs.available` thresholds keep back, a percentage taken of
/// `memory_capacity` / `storage_capacity` (bytes) and printed in binary SI.
pub fn hard_eviction_reservation(
    thresholds: &[Threshold],
    memory_capacity: i64,
    storage_capacity: i64,
) -> ResourceList {
    let mut reserved = ResourceList::new();
    for threshold in thresholds {
        let (resource, capacity) = match threshold.signal.as_str() {
            "memory.available" => ("memory", memory_capacity),
            "nodefs.available" => ("ephemeral-storage", storage_capacity),
            _ => continue,
        };
        let amount = match threshold.value {
            ThresholdValue::Quantity(quantity) => quantity,
            ThresholdValue::Percentage(fraction) => {
                // Go: int64(float64(capacity.Value()) * float64(percentage)).
                #[allow(clippy::cast_precision_loss, reason = "Go converts the same way")]
                let bytes = go::float_to_int64(capacity as f64 * f64::from(fraction));
                Quantity::from_units(i128::from(bytes)).with_format(QuantityFormat::BinarySI)
            }
        };
        reserved.insert(resource.to_owned(), amount);
    }
    reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Vec<Threshold>, EvictionError> {
        parse_hard_thresholds(&pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
    }

    fn reservation(pairs: &[(&str, &str)], memory: i64) -> BTreeMap<String, String> {
        let thresholds = parse(pairs).unwrap();
        hard_eviction_reservation(&thresholds, memory, 0)
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect()
    }

    #[test]
    fn reservations_from_quantities_and_percentages() {
        let gib = 1 << 30;
        assert_eq!(reservation(&[("memory.available", "100Mi")], gib)["memory"], "100Mi");
        assert_eq!(
            reservation(&[("memory.available", "10%")], 64 * gib)["memory"],
            "6871947776"
        );
        assert_eq!(reservation(&[("memory.available", "50%")], 64 * gib)["memory"], "32Gi");
        // The v1.32 default also names filesystem signals; they reserve no memory.
        let defaults = [
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
            ("imagefs.inodesFree", "5%"),
        ];
        let reserved = reservation(&defaults, 64 * gib);
        assert_eq!(reserved["memory"], "100Mi");
        assert_eq!(reserved["ephemeral-storage"], "0");
        assert!(reservation(&[("memory.available", "0%")], gib).is_empty());
        assert!(reservation(&[("pid.available", "100")], gib).is_empty());
    }

    #[test]
    fn refusals_use_the_kubelet_text() {
        let table = [
            (("memory.free", "1Gi"), "unsupported eviction signal memory.free"),
            (
                ("memory.available", "-1Mi"),
                "eviction threshold memory.available must be positive: -1Mi",
            ),
            (
                ("memory.available", "0"),
                "eviction threshold memory.available must be positive: 0",
            ),
            (
                ("memory.available", "Mi"),
                "eviction threshold memory.available must be positive: 0",
            ),
            (
                ("memory.available", "-5%"),
                "eviction percentage threshold memory.available must be >= 0%: -5%",
            ),
            (
                ("memory.available", "150%"),
                "eviction percentage threshold memory.available must be <= 100%: 150%",
            ),
            (
                ("memory.available", "x%"),
                r#"strconv.ParseFloat: parsing "x": invalid syntax"#,
            ),
            (
                ("memory.available", "1gb"),
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ];
        for ((signal, value), expected) in table {
            let error = parse(&[(signal, value)]).unwrap_err();
            assert_eq!(error.to_string(), expected, "{signal}: {value}");
            assert_eq!(error.signal(), signal);
        }
    }
}

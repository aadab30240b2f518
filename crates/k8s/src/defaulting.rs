//! The API defaulting of resource lists: every amount rounded up to a
//! thousandth (issue #29).
//!
//! Owns: [`round_up_milli`], core/v1 `SetDefaults_ResourceList`, which the
//! generated defaulters call on every `v1.ResourceList` they reach:
//! - a pod's (`SetObjectDefaults_Pod`): each container's and init
//!   container's requests and limits, `spec.overhead`, the pod-level
//!   `spec.resources` — after `SetDefaults_Pod` copied limits into missing
//!   requests, and before validation compares requests with limits;
//! - the kubelet configuration's (`SetObjectDefaults_KubeletConfiguration`
//!   in `pkg/kubelet/apis/config/v1beta1`): each `reservedMemory[].limits`,
//!   when the kubelet loads its configuration file.
//!
//! Every release from 1.32 to 1.37 does both, the same way. So a memory
//! request of `5368709119.999700068` (an `inf.Dec`) reaches the kubelet as
//! 5368709120 — equal to a limit of `5368709120`, so the pod is Guaranteed —
//! still an `inf.Dec`, which the memory manager's `AsInt64()` cannot
//! represent; and a reservedMemory total of `373293055999201635n` is
//! compared and printed as `373293056`.
//!
//! Must not touch: parsing ([`crate::quantity`]) or what an amount means.

use topoalign_model::{GoForm, Quantity};

/// Billionths per thousandth.
const NANO_PER_MILLI: i128 = 1_000_000;

/// Go's `Quantity.RoundUp(-3)` as `SetDefaults_ResourceList` applies it
/// (`k8s.io/apimachinery/pkg/api/resource`):
/// - the amount is rounded away from zero to a thousandth;
/// - an `int64Amount` of scale -3 or coarser is left alone; a finer one
///   becomes `int64Amount{value, -3}` (`negativeScaleInt64`, away from
///   zero): `1.0005` (`{10005, -4}`) becomes `{1001, -3}`;
/// - an `inf.Dec` stays one, of scale 3 (`inf.Dec.Round(.., 3, RoundUp)`),
///   whole or not, so `AsInt64()` still fails on it;
/// - the notation (`Format`) is kept.
pub fn round_up_milli(quantity: Quantity) -> Quantity {
    // An `inf.Dec` past billionths in `i128`: `nano()` saturates there, so
    // it is rounded on its own mantissa.
    if let Some(rounded) = quantity.huge_dec_rounded_up_to_milli() {
        return rounded;
    }
    let form = match quantity.go_form() {
        GoForm::Int64 { scale } if scale >= -3 => return quantity,
        GoForm::Int64 { .. } => GoForm::Int64 { scale: -3 },
        // Already whole thousandths: Go gives the `inf.Dec` scale 3, which
        // shows nowhere (`AsInt64()` fails for any `inf.Dec`; `Value()`,
        // `MilliValue()` and `String()` do not depend on the scale of an
        // exact amount), so the quantity is kept as it is — huge ones too.
        GoForm::Dec { .. } if quantity.is_whole_milli() => return quantity,
        GoForm::Dec { .. } => GoForm::Dec { scale: 3 },
    };
    // Finer than a thousandth (an `int64Amount` of scale below -3, or an
    // `inf.Dec` with billionths): an amount held exactly in billionths.
    let nano = quantity.nano();
    let below = nano.rem_euclid(NANO_PER_MILLI);
    let rounded = if below == 0 {
        Some(nano)
    } else if nano > 0 {
        (nano - below).checked_add(NANO_PER_MILLI)
    } else {
        // Away from zero: down, for a negative amount.
        Some(nano - below)
    };
    // Past i128 (no amount a quantity holds): the amount is kept.
    let nano = rounded.unwrap_or(nano);
    Quantity::from_nano(nano, form).with_format(quantity.format())
}

#[cfg(test)]
mod tests {
    use topoalign_model::QuantityFormat;

    use super::*;
    use crate::quantity::parse_quantity;

    /// `(text, String() after RoundUp(-3), AsInt64() after it)`. The
    /// expected values were checked against the Go code: apimachinery
    /// v0.37.2 `Quantity.RoundUp` / `infDecAmount.AsScale` /
    /// `int64Amount.AsScale` (read in the module cache, and printed by a
    /// Go program calling `ParseQuantity(text)`, `RoundUp(-3)`, `String()`
    /// and `AsInt64()`).
    #[test]
    fn round_up_to_thousandths_as_go_does() {
        let table: &[(&str, &str, Option<i64>)] = &[
            // inf.Dec (19 digits): rounded up, still no int64.
            ("5368709119.999700068", "5368709120", None),
            ("0.000000005368709119999700068E", "5368709120", None),
            ("373293055999201635.0n", "373293056", None),
            // An inf.Dec that is already whole stays an inf.Dec.
            ("5368709120.000000000", "5368709120", None),
            ("1.5Gi", "1536Mi", None),
            // int64Amount finer than a thousandth: {value, -3}.
            ("1.0005", "1001m", None),
            ("1500000n", "2m", None),
            ("1000000000n", "1", None),
            ("0.5u", "1m", None),
            // int64Amount of scale -3 or coarser: untouched.
            ("5368709120", "5368709120", Some(5_368_709_120)),
            ("0.00536870912T", "5368709120", Some(5_368_709_120)),
            ("1Gi", "1Gi", Some(1_073_741_824)),
            ("1500m", "1500m", None),
            ("5368709119.5", "5368709119500m", None),
            ("0", "0", Some(0)),
            // Negative amounts round away from zero.
            ("-1.0005", "-1001m", None),
            ("-5368709119.999700068", "-5368709120", None),
            // The notation is kept.
            ("1.0005e0", "1001e-3", None),
            // inf.Dec past billionths in i128: rounded on its mantissa.
            (
                "1000000000000000000000000000000000.0001",
                "1000000000000000000000000000000000001m",
                None,
            ),
            (
                "-1000000000000000000000000000000000.0001",
                "-1000000000000000000000000000000000001m",
                None,
            ),
            (
                "98765432109876543210987654321000000000n",
                "98765432109876543210987654321",
                None,
            ),
        ];
        for &(text, string, as_int64) in table {
            let rounded = round_up_milli(parse_quantity(text).unwrap());
            assert_eq!(rounded.to_string(), string, "{text}");
            assert_eq!(rounded.as_int64(), as_int64, "{text}");
        }
    }

    #[test]
    fn forms_and_notation() {
        let dec = round_up_milli(parse_quantity("5368709119.999700068").unwrap());
        assert_eq!(dec.go_form(), GoForm::Dec { scale: 3 });
        let whole_dec = round_up_milli(parse_quantity("5368709120.000000000").unwrap());
        assert!(matches!(whole_dec.go_form(), GoForm::Dec { .. }));
        let int = round_up_milli(parse_quantity("1.0005").unwrap());
        assert_eq!(int.go_form(), GoForm::Int64 { scale: -3 });
        let binary = round_up_milli(parse_quantity("1.5Gi").unwrap());
        assert_eq!(binary.format(), QuantityFormat::BinarySI);
        let exponent = round_up_milli(parse_quantity("1.0005e0").unwrap());
        assert_eq!(exponent.format(), QuantityFormat::DecimalExponent);
        // Idempotent, as the API server may default an object twice.
        assert_eq!(round_up_milli(dec).go_form(), dec.go_form());
        assert_eq!(round_up_milli(int), int);
    }
}

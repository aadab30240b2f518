//! [`Quantity`]: an exact resource amount, as the kubelet reads one, and the
//! Kubernetes canonical text it prints.
//!
//! Parsing of the Kubernetes string form (`"500m"`, `"16Gi"`) belongs to the
//! `topoalign-k8s` crate; this type holds the number, the notation it was
//! written in ([`QuantityFormat`]), how Go holds it ([`GoForm`]), and
//! answers the questions the kubelet asks of it (`Value()`, `MilliValue()`,
//! `AsInt64()`, `Cmp()`, `String()`).
//!
//! Semantics, from `k8s.io/apimachinery/pkg/api/resource` (issue #29):
//! - the amount is exact to the billionth, Kubernetes' finest precision
//!   (the parser rounds finer amounts up to a billionth), so sums and
//!   comparisons are exact (`1999999999n` is less than `2`);
//! - Go holds an amount either as `int64Amount{value, scale}` (value ×
//!   10^scale, what the parser's fast path and `NewQuantity` /
//!   `NewMilliQuantity` build) or as an `inf.Dec` (every other spelling:
//!   fractions of a binary suffix, more than 18 digits, finer than a
//!   billionth). [`Quantity::as_int64`] (`AsInt64()`) answers only for an
//!   `int64Amount` of scale ≥ 0, so `1073741824000m` or `1.5Gi` is no
//!   whole number of bytes to the memory manager;
//! - [`Quantity::go_value`] and [`Quantity::go_milli_value`] are Go's
//!   `Value()` and `MilliValue()` bit for bit, overflow included: an
//!   `int64Amount` scaled past `int64` gives the wrapped product (scale
//!   steps 1, 2, 3, 6, 9) or 0 (other steps: `1e19` has `Value()` 0), an
//!   `inf.Dec` the low 64 bits of the rounded-up result (`big.Int.Int64`:
//!   2^64 has `Value()` 0).
//!
//! Every amount the API server accepts is held (issue #29): exactly in
//! billionths up to ±1.7·10^29 units, beyond as a mantissa of up to 38
//! digits times a power of ten (`1e40`, `8e2147483647`, 29-digit numbers
//! of `E`), so Go's `int64Amount{value, scale}` of any scale is held
//! exactly and `Value()` / `MilliValue()` wrap as Go's do. What is not
//! held exactly: an amount beyond ±1.7·10^29 units with more than 38
//! significant digits in billionths (the parser refuses one; a sum that
//! would need one is rounded to 38 digits, where Go keeps it exact).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// The notation a quantity was written in, which Kubernetes keeps to print
/// the amount back the same way (`resource.Format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QuantityFormat {
    /// Powers of ten with SI suffixes: `500m`, `2`, `1k`, `4G`.
    #[default]
    DecimalSI,
    /// Powers of two: `1Ki`, `512Mi`, `16Gi`.
    BinarySI,
    /// Scientific notation: `1e3`, `80e-3`.
    DecimalExponent,
}

/// How Go's `resource.Quantity` holds an amount internally, which decides
/// `AsInt64()` and the overflow of `Value()` / `MilliValue()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GoForm {
    /// `int64Amount{value, scale}`: the amount is `value × 10^scale`,
    /// `value` an `int64`, `scale` at least -9.
    Int64 { scale: i32 },
    /// `inf.Dec` with this scale (the amount is `unscaled × 10^-scale`):
    /// 9 for every non-zero amount the parser builds.
    Dec { scale: i32 },
}

/// Billionths per thousandth.
const NANO_PER_MILLI: i128 = 1_000_000;

/// `low` from here up marks a huge amount (see [`Quantity`]).
const HUGE: u32 = 1_000_000;

/// The largest power of ten an `i128` holds.
const MAX_POW10_I128: u32 = 38;

/// An exact amount in billionths of a unit (nanocores for CPU), kept as
/// thousandths (rounded down) and the billionths below them, plus the
/// notation it prints in and Go's form of it ([`GoForm`]).
///
/// An amount whose billionths do not fit `i128` (beyond ±1.7·10^29 units)
/// is held as `mantissa × 10^exp` billionths instead, the mantissa without
/// trailing zeros (so each amount has one representation); the methods
/// that answer in `i128` ([`Quantity::milli`], [`Quantity::value`],
/// [`Quantity::nano`]) saturate for it, Go's own views
/// ([`Quantity::go_value`], [`Quantity::go_milli_value`],
/// [`Quantity::as_int64`]) and comparisons are exact.
///
/// Equality, ordering and hashing look at the amount only: `1Gi` equals
/// `1073741824` (Go's `Quantity.Cmp`).
#[derive(Clone, Copy)]
pub struct Quantity {
    /// Thousandths, rounded down (towards minus infinity); for a huge
    /// amount, its mantissa in billionths.
    milli: i128,
    /// Below [`HUGE`]: billionths above `milli` thousandths (0 to
    /// 999,999). From [`HUGE`] up: a huge amount of `milli` billionths
    /// times ten to the power `low - HUGE + 1`. (Packed into one field to
    /// keep a quantity at 32 bytes: it sits in every resource list.)
    low: u32,
    format: QuantityFormat,
    form: GoForm,
}

/// `10^exp` when an `i128` holds it.
const fn pow10(exp: u32) -> Option<i128> {
    if exp > MAX_POW10_I128 {
        return None;
    }
    Some(10_i128.pow(exp))
}

/// The fields `(milli, low)` of `mantissa × 10^exp` billionths, in the one
/// representation the amount has (see [`Quantity`]).
const fn canonical(mantissa: i128, exp: u32) -> (i128, u32) {
    // Exact when the billionths fit.
    let exact = match pow10(exp) {
        Some(power) => mantissa.checked_mul(power),
        None if mantissa == 0 => Some(0),
        None => None,
    };
    if let Some(nano) = exact {
        return (nano.div_euclid(NANO_PER_MILLI), nano.rem_euclid(NANO_PER_MILLI) as u32);
    }
    let mut mantissa = mantissa;
    let mut exp = exp;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp = exp.saturating_add(1);
    }
    (mantissa, HUGE.saturating_add(exp - 1))
}

impl Default for Quantity {
    fn default() -> Self {
        Quantity::ZERO
    }
}

impl Quantity {
    /// Zero (Go's zero `Quantity`: `int64Amount{0, 0}`).
    pub const ZERO: Quantity = Quantity {
        milli: 0,
        low: 0,
        format: QuantityFormat::DecimalSI,
        form: GoForm::Int64 { scale: 0 },
    };

    /// An amount of `milli` thousandths, in decimal SI notation (Go's
    /// `NewMilliQuantity`: `int64Amount{milli, -3}`).
    pub const fn from_milli(milli: i128) -> Self {
        let fits = milli >= i64::MIN as i128 && milli <= i64::MAX as i128;
        let (milli, low) = canonical(milli, 6);
        Quantity {
            milli,
            low,
            format: QuantityFormat::DecimalSI,
            form: if fits {
                GoForm::Int64 { scale: -3 }
            } else {
                GoForm::Dec { scale: 9 }
            },
        }
    }

    /// A whole amount (CPUs, bytes, devices), in decimal SI notation (Go's
    /// `NewQuantity`: `int64Amount{units, 0}`).
    pub const fn from_units(units: i128) -> Self {
        let fits = units >= i64::MIN as i128 && units <= i64::MAX as i128;
        let (milli, low) = canonical(units, 9);
        Quantity {
            milli,
            low,
            format: QuantityFormat::DecimalSI,
            form: if fits {
                GoForm::Int64 { scale: 0 }
            } else {
                GoForm::Dec { scale: 9 }
            },
        }
    }

    /// An amount of `nano` billionths held in Go's `form` (the parser's
    /// constructor). A form that cannot hold the amount — an `int64Amount`
    /// whose value is not a whole `int64` — is taken as an `inf.Dec`.
    pub fn from_nano(nano: i128, form: GoForm) -> Self {
        Quantity::from_scaled_nano(nano, 0, form)
    }

    /// An amount of `mantissa × 10^exp` billionths held in Go's `form`
    /// (the parser's constructor for amounts of any size: `1e40` is `1 ×
    /// 10^49` billionths in `int64Amount{1, 40}`). A form that cannot hold
    /// the amount is taken as an `inf.Dec`, as in [`Quantity::from_nano`].
    pub fn from_scaled_nano(mantissa: i128, exp: u32, form: GoForm) -> Self {
        let (milli, low) = canonical(mantissa, exp);
        let quantity = Quantity {
            milli,
            low,
            format: QuantityFormat::DecimalSI,
            form,
        };
        match form {
            GoForm::Int64 { .. } if quantity.int64_value().is_none() => quantity.with_form(GoForm::Dec { scale: 9 }),
            _ => quantity,
        }
    }

    /// `(mantissa, exp)` of a huge amount (`mantissa × 10^exp` billionths).
    const fn huge(self) -> Option<(i128, u32)> {
        if self.low >= HUGE {
            Some((self.milli, self.low - HUGE + 1))
        } else {
            None
        }
    }

    /// The amount as `(mantissa, exp)`: `mantissa × 10^exp` billionths
    /// (`exp` 0 in the exact range).
    fn scaled(self) -> (i128, u32) {
        match self.huge() {
            Some(huge) => huge,
            // In the exact range the billionths fit by construction.
            None => (self.exact_nano().unwrap_or(0), 0),
        }
    }

    /// A saturated `i128` for a huge amount, by its sign.
    const fn saturated(self) -> i128 {
        if self.milli > 0 { i128::MAX } else { i128::MIN }
    }

    /// The same amount, printed in `format`.
    #[must_use]
    pub const fn with_format(self, format: QuantityFormat) -> Self {
        Quantity { format, ..self }
    }

    const fn with_form(self, form: GoForm) -> Self {
        Quantity { form, ..self }
    }

    /// The notation this amount prints in.
    pub const fn format(self) -> QuantityFormat {
        self.format
    }

    /// How Go holds this amount.
    pub const fn go_form(self) -> GoForm {
        self.form
    }

    /// Thousandths of a unit, rounded up (kubelet `MilliValue()` of an
    /// amount that fits `int64`; see [`Quantity::go_milli_value`]).
    /// Saturating past `i128` (a huge amount).
    pub const fn milli(self) -> i128 {
        if self.huge().is_some() {
            return self.saturated();
        }
        if self.low == 0 {
            self.milli
        } else {
            self.milli.saturating_add(1)
        }
    }

    /// Billionths of a unit, exactly (saturating past `i128`).
    pub const fn nano(self) -> i128 {
        if self.huge().is_some() {
            return self.saturated();
        }
        self.milli
            .saturating_mul(NANO_PER_MILLI)
            .saturating_add(self.low as i128)
    }

    /// Whether the amount is a whole number of thousandths.
    pub const fn is_whole_milli(self) -> bool {
        match self.huge() {
            // The mantissa has no trailing zero.
            Some((_, exp)) => exp >= 6,
            None => self.low == 0,
        }
    }

    /// Whole units rounded up (kubelet `Value()` of an amount that fits
    /// `int64`; see [`Quantity::go_value`]).
    pub fn value(self) -> i128 {
        if self.huge().is_some() {
            return self.saturated();
        }
        let milli = self.milli();
        // `i128` division is a library call; an amount that fits `i64` (any
        // real one) is divided natively, with the same result.
        if let Ok(milli) = i64::try_from(milli) {
            return i128::from(milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0));
        }
        milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) != 0)
    }

    /// Whether the amount rounds up to a whole number of units in
    /// thousandths, the kubelet's test for exclusive CPUs
    /// (`Value()*1000 == MilliValue()`: `0.9995` counts as one CPU).
    pub fn is_whole(self) -> bool {
        if let Some((mantissa, exp)) = self.huge() {
            return match exp {
                9.. => true,
                // Whole thousandths, but the mantissa has no trailing zero.
                6..=8 => false,
                _ => {
                    let divisor = 10_i128.pow(6 - exp);
                    let milli = mantissa.div_euclid(divisor) + i128::from(mantissa.rem_euclid(divisor) != 0);
                    milli.rem_euclid(1000) == 0
                }
            };
        }
        let milli = self.milli();
        // Natively where the amount fits `i64` (see `value`).
        match i64::try_from(milli) {
            Ok(milli) => milli.rem_euclid(1000) == 0,
            Err(_) => milli.rem_euclid(1000) == 0,
        }
    }

    /// Whether the amount is zero.
    pub const fn is_zero(self) -> bool {
        self.milli == 0 && self.low == 0
    }

    /// Whether the amount is below zero.
    pub const fn is_negative(self) -> bool {
        self.milli < 0
    }

    /// The `int64Amount` value of the Go form (`None` for an `inf.Dec`).
    fn int64_value(self) -> Option<i64> {
        let GoForm::Int64 { scale } = self.form else {
            return None;
        };
        if let Some((mantissa, exp)) = self.huge() {
            // mantissa × 10^(exp - 9 - scale) units of 10^scale.
            let shift = i64::from(exp) - 9 - i64::from(scale);
            let value = if shift >= 0 {
                mantissa.checked_mul(pow10(u32::try_from(shift).ok()?)?)?
            } else {
                let divisor = pow10(u32::try_from(-shift).ok()?)?;
                if mantissa % divisor != 0 {
                    return None;
                }
                mantissa / divisor
            };
            return i64::try_from(value).ok();
        }
        let nano = self.exact_nano()?;
        if nano == 0 {
            // int64Amount{0, scale} of any scale.
            return Some(0);
        }
        let digits = u32::try_from(scale.checked_add(9)?).ok()?;
        let divisor = 10_i128.checked_pow(digits)?;
        if nano % divisor != 0 {
            return None;
        }
        i64::try_from(nano / divisor).ok()
    }

    /// The exact amount in billionths, `None` past `i128`.
    fn exact_nano(self) -> Option<i128> {
        if self.huge().is_some() {
            return None;
        }
        self.milli
            .checked_mul(NANO_PER_MILLI)?
            .checked_add(i128::from(self.low))
    }

    /// Go's `Quantity.AsInt64()`: the amount as an `int64` when Go holds it
    /// as an `int64Amount` of scale ≥ 0 that scales without overflow;
    /// `None` otherwise (`1.5Gi`, `1073741824000m`, `0m`, 20-digit
    /// numbers), whole or not.
    pub fn as_int64(self) -> Option<i64> {
        let value = self.int64_value()?;
        match self.form {
            GoForm::Int64 { scale: 0 } => Some(value),
            GoForm::Int64 { scale } if scale > 0 => {
                let (scaled, ok) = go_positive_scale(value, scale);
                ok.then_some(scaled)
            }
            _ => None,
        }
    }

    /// Go's `Quantity.Value()`, bit for bit (see the module docs).
    pub fn go_value(self) -> i64 {
        self.go_scaled_value(0)
    }

    /// Go's `Quantity.MilliValue()`, bit for bit (see the module docs).
    pub fn go_milli_value(self) -> i64 {
        self.go_scaled_value(-3)
    }

    /// Go's `Quantity.RoundUp(-3)` for an `inf.Dec` amount too large for
    /// billionths in `i128` (`None` for any other: [`Quantity::nano`] holds
    /// those exactly): rounded away from zero to a thousandth, held as an
    /// `inf.Dec` of scale 3, notation kept. (`nano()` saturates for these
    /// amounts, so a rounding done on it would lose them.)
    pub fn huge_dec_rounded_up_to_milli(self) -> Option<Quantity> {
        let (mantissa, exp) = self.huge()?;
        if !matches!(self.form, GoForm::Dec { .. }) {
            return None;
        }
        let form = GoForm::Dec { scale: 3 };
        let rounded = if exp >= 6 {
            Quantity { form, ..self }
        } else {
            // mantissa × 10^exp billionths, up to whole thousandths.
            let divisor = 10_i128.pow(6 - exp);
            let quotient = mantissa / divisor;
            let up = if mantissa % divisor != 0 { mantissa.signum() } else { 0 };
            Quantity::from_scaled_nano(quotient + up, 6, form).with_format(self.format)
        };
        Some(rounded)
    }

    /// Go's `Quantity.ScaledValue(scale)`: `ceil(amount / 10^scale)` as Go
    /// computes it for each form (`ScaledValue(resource.Micro)` is
    /// `go_scaled_value(-6)`), overflow included (see the module docs).
    pub fn go_scaled_value(self, scale: i32) -> i64 {
        match self.form {
            GoForm::Int64 { scale: own } => {
                let Some(value) = self.int64_value() else { return 0 };
                // Go subtracts scales in int32, wrapping: `8e2147483647`
                // has `MilliValue()` 8.
                if own < scale {
                    go_negative_scale(value, scale.wrapping_sub(own))
                } else {
                    go_positive_scale(value, own.wrapping_sub(scale)).0
                }
            }
            GoForm::Dec { scale: own } => {
                if let Some((mantissa, exp)) = self.huge() {
                    return go_scaled_huge(mantissa, i64::from(exp) - 9 + i64::from(own), own, -scale);
                }
                // The unscaled integer: amount × 10^own.
                let Some(nano) = self.exact_nano() else { return 0 };
                let unscaled = if own >= 9 {
                    10_i128
                        .checked_pow(own.unsigned_abs() - 9)
                        .and_then(|p| nano.checked_mul(p))
                } else {
                    10_i128.checked_pow((9 - own).unsigned_abs()).map(|p| nano / p)
                };
                let Some(unscaled) = unscaled else { return 0 };
                go_scaled_big(unscaled, own, -scale)
            }
        }
    }
}

/// Go's `positiveScaleInt64(base, scale)`: `base × 10^scale` and whether
/// it did not overflow. Steps of 1, 2, 3, 6 and 9 return the wrapped
/// product on overflow; other steps multiply by ten at a time and return
/// 0 on overflow (`math.go`).
fn go_positive_scale(base: i64, scale: i32) -> (i64, bool) {
    let multiply = |a: i64, b: i64| -> (i64, bool) {
        if a == 0 || a == 1 {
            return (a.wrapping_mul(b), true);
        }
        if a == i64::MIN {
            return (0, false);
        }
        let c = a.wrapping_mul(b);
        (c, c / b == a)
    };
    match scale {
        0 => (base, true),
        1 => multiply(base, 10),
        2 => multiply(base, 100),
        3 => multiply(base, 1000),
        6 => multiply(base, 1_000_000),
        9 => multiply(base, 1_000_000_000),
        _ => {
            let mut value = base;
            for _ in 0..scale.max(0) {
                let (next, ok) = multiply(value, 10);
                if !ok {
                    return (0, false);
                }
                value = next;
            }
            (value, true)
        }
    }
}

/// Go's `negativeScaleInt64(base, scale)`: `base / 10^scale` rounded away
/// from zero.
fn go_negative_scale(base: i64, scale: i32) -> i64 {
    let mut value = base;
    let mut fraction = false;
    for _ in 0..scale.max(0) {
        fraction |= value % 10 != 0;
        value /= 10;
        if value == 0 {
            return match (fraction, base > 0) {
                (false, _) => 0,
                (true, true) => 1,
                (true, false) => -1,
            };
        }
    }
    match (fraction, base > 0) {
        (false, _) => value,
        (true, true) => value + 1,
        (true, false) => value - 1,
    }
}

/// `big.Int.Int64()`: the low 64 bits, two's complement.
const fn wrap64(value: i128) -> i64 {
    value as i64
}

/// Go's `scaledValue(unscaled, scale, newScale)` of an `inf.Dec`
/// (`scale_int.go`).
fn go_scaled_big(unscaled: i128, scale: i32, new_scale: i32) -> i64 {
    let dif = i64::from(scale) - i64::from(new_scale);
    if dif == 0 {
        return wrap64(unscaled);
    }
    if dif < 0 {
        // int64(math.Pow10(-dif)): exact up to 10^18.
        let factor = 10_i64
            .checked_pow(u32::try_from(-dif).unwrap_or(u32::MAX))
            .unwrap_or(i64::MIN);
        return wrap64(unscaled).wrapping_mul(factor);
    }
    let Some(divisor) = u32::try_from(dif).ok().and_then(|d| 10_i128.checked_pow(d)) else {
        // 10^dif beyond i128: the quotient is 0 or -1, then rounded up.
        return i64::from(unscaled != 0 && unscaled > 0);
    };
    if unscaled < i128::from(i64::MAX) && dif < 19 {
        // The fast path: int64 truncating division, plus one when inexact
        // (for a negative amount too, as Go does).
        let value = unscaled as i64;
        let divide = divisor as i64;
        let result = value / divide;
        return if value % divide != 0 { result + 1 } else { result };
    }
    // big.Int DivMod is Euclidean: floor for a positive divisor.
    let result = unscaled.div_euclid(divisor);
    let inexact = unscaled.rem_euclid(divisor) != 0;
    wrap64(result).wrapping_add(i64::from(inexact))
}

/// `10^exp` modulo 2^64, as wrapping `int64` (0 from 10^64 on: 2^64
/// divides it).
fn pow10_wrapped(exp: i64) -> i64 {
    if exp >= 64 {
        return 0;
    }
    (0..exp).fold(1_i64, |power, _| power.wrapping_mul(10))
}

/// `big.Int.Int64()` of `mantissa × 10^exp` (`exp` ≥ 0): its low 64 bits.
fn wrap64_scaled(mantissa: i128, exp: i64) -> i64 {
    wrap64(mantissa).wrapping_mul(pow10_wrapped(exp))
}

/// [`go_scaled_big`] of an `inf.Dec` whose unscaled integer is `mantissa ×
/// 10^unscaled_exp`: the same steps, on the low 64 bits where Go's results
/// wrap and on the mantissa where Go divides, when the unscaled integer is
/// beyond `i128`.
fn go_scaled_huge(mantissa: i128, unscaled_exp: i64, scale: i32, new_scale: i32) -> i64 {
    if unscaled_exp < 0 {
        // Not an integer at this scale (no quantity Go builds): read it at
        // the scale where it is one.
        let scale = i64::from(scale) - unscaled_exp;
        return go_scaled_huge(mantissa, 0, i32::try_from(scale).unwrap_or(i32::MAX), new_scale);
    }
    let small = u32::try_from(unscaled_exp)
        .ok()
        .and_then(pow10)
        .and_then(|power| mantissa.checked_mul(power));
    if let Some(unscaled) = small {
        return go_scaled_big(unscaled, scale, new_scale);
    }
    // The unscaled integer is beyond i128, so beyond int64 either way.
    let dif = i64::from(scale) - i64::from(new_scale);
    if dif == 0 {
        return wrap64_scaled(mantissa, unscaled_exp);
    }
    if dif < 0 {
        // int64(math.Pow10(-dif)): exact up to 10^18.
        let factor = u32::try_from(-dif)
            .ok()
            .and_then(|d| 10_i64.checked_pow(d))
            .unwrap_or(i64::MIN);
        return wrap64_scaled(mantissa, unscaled_exp).wrapping_mul(factor);
    }
    if mantissa < 0 && dif < 19 {
        // Go's fast path (`unscaled < MaxInt64`, true of any negative
        // amount) on the wrapped value: truncating division, plus one when
        // inexact.
        let value = wrap64_scaled(mantissa, unscaled_exp);
        let divide = 10_i64.pow(u32::try_from(dif).unwrap_or(0));
        let result = value / divide;
        return if value % divide != 0 { result + 1 } else { result };
    }
    // big.Int DivMod (Euclidean), then plus one when inexact.
    if unscaled_exp >= dif {
        return wrap64_scaled(mantissa, unscaled_exp - dif);
    }
    let Some(divisor) = u32::try_from(dif - unscaled_exp).ok().and_then(pow10) else {
        // 10^(dif - exp) beyond i128: the quotient is 0 or -1, inexact.
        return if mantissa > 0 { 1 } else { 0 };
    };
    let result = mantissa.div_euclid(divisor);
    let inexact = mantissa.rem_euclid(divisor) != 0;
    wrap64(result).wrapping_add(i64::from(inexact))
}

/// Go's `int64Add`: the sum, or `None` on overflow.
fn go_int64_add(a: i64, b: i64) -> Option<i64> {
    a.checked_add(b)
}

/// Go's `int64Amount.Add`: the sum in `int64Amount` form, or `None` where
/// Go falls back to `inf.Dec`.
fn go_int64_amount_add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    match (a, b) {
        (_, (0, _)) => Some(a),
        ((0, _), _) => Some(b),
        ((av, ascale), (bv, bscale)) if ascale == bscale => Some((go_int64_add(av, bv)?, ascale)),
        ((av, ascale), (bv, bscale)) if ascale > bscale => {
            let (scaled, ok) = go_positive_scale(av, ascale.wrapping_sub(bscale));
            ok.then_some(())?;
            Some((go_int64_add(scaled, bv)?, bscale))
        }
        ((av, ascale), (bv, bscale)) => {
            let (scaled, ok) = go_positive_scale(bv, bscale.wrapping_sub(ascale));
            ok.then_some(())?;
            Some((go_int64_add(av, scaled)?, ascale))
        }
    }
}

impl Quantity {
    /// The `inf.Dec` scale Go gives this amount (`int64Amount.AsDec` has
    /// scale `-scale`).
    const fn dec_scale(self) -> i32 {
        match self.form {
            GoForm::Int64 { scale } => scale.saturating_neg(),
            GoForm::Dec { scale } => scale,
        }
    }

    /// The exact sum's `(milli, low)` fields.
    fn sum_parts(self, rhs: Quantity) -> (i128, u32) {
        /// Thousandths whose billionths surely fit `i128`.
        const EXACT_MILLI: i128 = i128::MAX / NANO_PER_MILLI - 1;
        if self.huge().is_none() && rhs.huge().is_none() {
            let sub = self.low + rhs.low;
            let carry = i128::from(sub >= NANO_PER_MILLI as u32);
            if let Some(milli) = self.milli.checked_add(rhs.milli).and_then(|m| m.checked_add(carry))
                && (-EXACT_MILLI..=EXACT_MILLI).contains(&milli)
            {
                return (milli, sub % NANO_PER_MILLI as u32);
            }
        }
        let (mantissa, exp) = scaled_sum(self.scaled(), rhs.scaled());
        canonical(mantissa, exp)
    }

    /// The negated amount in the same form (Go negates `int64Amount`
    /// values with wrapping; `-(-2^63)` is itself).
    fn negated(self) -> Quantity {
        if self.huge().is_some() {
            return Quantity {
                milli: self.milli.saturating_neg(),
                ..self
            };
        }
        let nano_sub = (NANO_PER_MILLI as u32 - self.low) % NANO_PER_MILLI as u32;
        let borrow = i128::from(self.low != 0);
        Quantity {
            milli: self.milli.saturating_neg().saturating_sub(borrow),
            low: nano_sub,
            ..self
        }
    }

    /// Go's `Add` on the two forms: the form of the sum.
    fn go_sum_form(self, rhs: Quantity) -> GoForm {
        if let (GoForm::Int64 { scale: a }, GoForm::Int64 { scale: b }) = (self.form, rhs.form)
            && let (Some(av), Some(bv)) = (self.int64_value(), rhs.int64_value())
            && let Some((_, scale)) = go_int64_amount_add((av, a), (bv, b))
        {
            return GoForm::Int64 { scale };
        }
        GoForm::Dec {
            scale: self.dec_scale().max(rhs.dec_scale()),
        }
    }
}

/// `a + b` of two `(mantissa, exp)` amounts, exact where the sum has at
/// most 38 significant digits in billionths; beyond, rounded half away
/// from zero to 38 (Go keeps it exact).
fn scaled_sum(a: (i128, u32), b: (i128, u32)) -> (i128, u32) {
    let exp = a.1.min(b.1);
    // Each term at `exp`, or `None` when it overflows there.
    let at = |(mantissa, own): (i128, u32), exp: u32| -> Option<i128> {
        if own >= exp {
            mantissa.checked_mul(pow10(own - exp)?)
        } else {
            // Coarser than the term: rounded half away from zero.
            let divisor = pow10(exp - own).unwrap_or(i128::MAX);
            let quotient = mantissa / divisor;
            let rest = (mantissa % divisor).unsigned_abs();
            let up = rest >= divisor.unsigned_abs().div_ceil(2) && rest != 0;
            Some(quotient + if up { mantissa.signum() } else { 0 })
        }
    };
    let mut exp = exp;
    loop {
        if let (Some(x), Some(y)) = (at(a, exp), at(b, exp))
            && let Some(sum) = x.checked_add(y)
        {
            return (sum, exp);
        }
        exp += 1;
    }
}

/// Go's `Quantity.Add`: the exact sum; the sum keeps the left operand's
/// notation, except that a zero left operand takes the right one's (so a
/// running total that starts at zero prints like the first amount added:
/// `0 + 1Gi + 100Mi` is `1124Mi`), and Go's form follows `int64Amount.Add`
/// (an `inf.Dec` when the `int64` sum overflows or either side is one).
impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        let format = if self.is_zero() { rhs.format } else { self.format };
        // Both `int64Amount`s and Go's int64 sum fits: Go's sum, amount
        // and form (the exact sum, except where Go's int32 scale
        // difference wraps: `8e2147483647 + 5m` is 13m to Go).
        if let (GoForm::Int64 { scale: a }, GoForm::Int64 { scale: b }) = (self.form, rhs.form)
            && let (Some(av), Some(bv)) = (self.int64_value(), rhs.int64_value())
            && let Some((value, scale)) = go_int64_amount_add((av, a), (bv, b))
            && let Ok(exp) = u32::try_from(i64::from(scale) + 9)
        {
            return Quantity::from_scaled_nano(i128::from(value), exp, GoForm::Int64 { scale }).with_format(format);
        }
        let (milli, low) = self.sum_parts(rhs);
        let form = self.go_sum_form(rhs);
        let sum = Quantity {
            milli,
            low,
            format: if self.is_zero() { rhs.format } else { self.format },
            form,
        };
        // A form that cannot hold the saturated sum is a Dec.
        match form {
            GoForm::Int64 { .. } if sum.int64_value().is_none() => sum.with_form(GoForm::Dec { scale: 9 }),
            _ => sum,
        }
    }
}

/// Go's `Quantity.Sub`, with the same notation and form rules as
/// [`Add`](std::ops::Add).
impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        // Go's `int64Amount.Sub` is `Add` of the negated amount.
        let difference = std::ops::Add::add(self, rhs.negated());
        Quantity {
            format: if self.is_zero() { rhs.format } else { self.format },
            ..difference
        }
    }
}

impl std::ops::AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Quantity) {
        *self = *self + rhs;
    }
}

impl std::ops::SubAssign for Quantity {
    fn sub_assign(&mut self, rhs: Quantity) {
        *self = *self - rhs;
    }
}

impl std::iter::Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::ZERO, |a, b| a + b)
    }
}

/// Each amount has one representation: equal fields are equal amounts.
impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli && self.low == other.low
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        if self.huge().is_none() && other.huge().is_none() {
            return (self.milli, self.low).cmp(&(other.milli, other.low));
        }
        compare_scaled(self.scaled(), other.scaled())
    }
}

/// The order of two `(mantissa, exp)` amounts.
fn compare_scaled(a: (i128, u32), b: (i128, u32)) -> Ordering {
    let sign = a.0.signum().cmp(&b.0.signum());
    if sign != Ordering::Equal || a.0 == 0 {
        return sign;
    }
    // The term with the larger exponent, brought down to the other's; when
    // that overflows its magnitude is the larger.
    let (larger_first, big, small) = if a.1 >= b.1 { (true, a, b) } else { (false, b, a) };
    let magnitude = match pow10(big.1 - small.1).and_then(|p| big.0.checked_mul(p)) {
        Some(big) => big.cmp(&small.0),
        None if big.0 > 0 => Ordering::Greater,
        None => Ordering::Less,
    };
    if larger_first { magnitude } else { magnitude.reverse() }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.milli.hash(state);
        self.low.hash(state);
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The Kubernetes canonical form (`Quantity.String()`): no fractional
/// digits, the largest suffix that loses nothing, in the quantity's own
/// notation — `1124Mi`, `1500m`, `1k`, `1e3`, `0`, `1999999999n`.
///
/// Binary notation falls back to decimal SI for amounts below 1024 or with a
/// fractional part, as Kubernetes does (`1000` bytes in binary prints `1k`).
/// Beyond the largest suffix (`E`, `Ei`) the exponent is written out
/// (`1e21`) or the amount kept in `Ei`, where v1.32 would drop the exponent.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        let exponent = self.format == QuantityFormat::DecimalExponent;
        if let Some((mantissa, exp)) = self.huge() {
            return write_huge(f, mantissa, i64::from(exp) - 9, exponent);
        }
        if self.format == QuantityFormat::BinarySI {
            let small = self.milli.unsigned_abs() < 1024 * 1000;
            if !small && self.low == 0 && self.milli % 1000 == 0 {
                return write_binary(f, self.milli / 1000);
            }
        }
        match self.exact_nano() {
            Some(nano) if self.low != 0 => write_decimal(f, nano, -9, exponent),
            _ => write_decimal(f, self.milli, -3, exponent),
        }
    }
}

/// A huge amount, `mantissa × 10^exponent` units (the mantissa without
/// trailing zeros), as [`write_decimal`] writes an amount: the exponent
/// brought down to a multiple of three, then its suffix (binary notation
/// has none this large).
fn write_huge(f: &mut fmt::Formatter<'_>, mantissa: i128, exponent: i64, exponent_notation: bool) -> fmt::Result {
    let zeros = usize::try_from(exponent.rem_euclid(3)).unwrap_or(0);
    let exponent = exponent - exponent.rem_euclid(3);
    let digits = format!("{mantissa}{}", "0".repeat(zeros));
    match i32::try_from(exponent).ok().and_then(si_suffix) {
        _ if exponent_notation && exponent == 0 => write!(f, "{digits}"),
        Some(suffix) if !exponent_notation => write!(f, "{digits}{suffix}"),
        _ => write!(f, "{digits}e{exponent}"),
    }
}

/// The decimal SI suffix of a power of ten.
fn si_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

/// `units` as a multiple of the largest power of 1024 that divides it.
fn write_binary(f: &mut fmt::Formatter<'_>, units: i128) -> fmt::Result {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut mantissa = units;
    let mut power = 0;
    while power + 1 < SUFFIXES.len() && mantissa % 1024 == 0 {
        mantissa /= 1024;
        power += 1;
    }
    write!(f, "{mantissa}{}", SUFFIXES[power])
}

/// `mantissa × 10^exponent` as a mantissa and a power of ten that is a
/// multiple of three, the mantissa as small as possible without fractional
/// digits.
fn write_decimal(f: &mut fmt::Formatter<'_>, mantissa: i128, exponent: i32, exponent_notation: bool) -> fmt::Result {
    let mut mantissa = mantissa;
    let mut exponent = exponent;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    // Back down to a multiple of three; never below the starting exponent
    // (a multiple of three), so the mantissa stays at most the amount given
    // and cannot overflow.
    while exponent.rem_euclid(3) != 0 {
        mantissa *= 10;
        exponent -= 1;
    }
    if exponent_notation {
        return if exponent == 0 {
            write!(f, "{mantissa}")
        } else {
            write!(f, "{mantissa}e{exponent}")
        };
    }
    match si_suffix(exponent) {
        Some(suffix) => write!(f, "{mantissa}{suffix}"),
        None => write!(f, "{mantissa}e{exponent}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KI: i128 = 1024;

    fn binary(units: i128) -> Quantity {
        Quantity::from_units(units).with_format(QuantityFormat::BinarySI)
    }

    fn exponent(milli: i128) -> Quantity {
        Quantity::from_milli(milli).with_format(QuantityFormat::DecimalExponent)
    }

    #[test]
    fn value_rounds_up_like_kubernetes() {
        assert_eq!(Quantity::from_milli(3500).value(), 4);
        assert_eq!(Quantity::from_milli(3000).value(), 3);
        assert_eq!(Quantity::from_milli(1).value(), 1);
        assert!(!Quantity::from_milli(3500).is_whole());
        assert!(Quantity::from_units(4).is_whole());
        // Below zero and beyond `i64` (the native and the wide division).
        assert_eq!(Quantity::from_milli(-3500).value(), -3);
        assert!(!Quantity::from_milli(-3500).is_whole());
        let wide = i128::from(i64::MAX) * 10;
        assert_eq!(Quantity::from_milli(wide + 1).value(), wide / 1000 + 1);
        assert!(!Quantity::from_milli(wide + 1).is_whole());
        assert_eq!(Quantity::from_milli(wide * 100).value(), wide / 10);
        assert!(Quantity::from_milli(wide * 100).is_whole());
    }

    /// Kubernetes' `TestQuantityString` table, restricted to amounts a
    /// milli-unit quantity can hold.
    #[test]
    fn display_is_the_kubernetes_canonical_form() {
        let table = [
            (binary(KI * KI * KI), "1Gi"),
            (binary(300 * KI * KI), "300Mi"),
            (binary(6 * KI), "6Ki"),
            (binary(1001 * KI * KI * KI), "1001Gi"),
            (binary(KI * KI * KI * KI), "1Ti"),
            (binary(5), "5"),
            (Quantity::from_milli(500).with_format(QuantityFormat::BinarySI), "500m"),
            (Quantity::from_units(1_000_000_000), "1G"),
            (Quantity::from_milli(1), "1m"),
            (Quantity::from_milli(80), "80m"),
            (Quantity::from_milli(1080), "1080m"),
            (Quantity::from_units(300_000_000), "300M"),
            (Quantity::from_units(1_000_000_000_000), "1T"),
            (Quantity::from_units(1_000_000_000_000_000_000), "1E"),
            (Quantity::from_units(1_000_000_000_000_000_000_000), "1e21"),
            (Quantity::from_units(1_234_567_000_000), "1234567M"),
            (
                Quantity::from_milli(1_234_567).with_format(QuantityFormat::BinarySI),
                "1234567m",
            ),
            (Quantity::from_units(3000), "3k"),
            (binary(1025), "1025"),
            (binary(1000), "1k"),
            (Quantity::ZERO, "0"),
            (binary(0), "0"),
            (exponent(0), "0"),
            (exponent(1_000_000_000_000), "1e9"),
            (exponent(1), "1e-3"),
            (exponent(80), "80e-3"),
            (exponent(300_000_000_000), "300e6"),
            (exponent(3_000_000), "3e3"),
            (exponent(3000), "3"),
        ];
        for (quantity, expected) in table {
            assert_eq!(quantity.to_string(), expected, "{quantity:?}");
            if !quantity.is_zero() {
                let negated = Quantity::ZERO - quantity;
                assert_eq!(negated.to_string(), format!("-{expected}"));
            }
        }
    }

    #[test]
    fn addition_keeps_the_left_notation_unless_the_left_is_zero() {
        let gi = binary(KI * KI * KI);
        let mi100 = binary(100 * KI * KI);
        assert_eq!((gi + mi100).to_string(), "1124Mi");
        assert_eq!((Quantity::ZERO + gi + mi100).to_string(), "1124Mi");
        assert_eq!([gi, mi100].into_iter().sum::<Quantity>().to_string(), "1124Mi");
        // A decimal left operand keeps printing in decimal.
        let decimal = Quantity::from_units(1_000_000);
        assert_eq!((decimal + gi).to_string(), "1074741824");
        // Zero takes the notation of whatever is added to it.
        assert_eq!(
            (Quantity::ZERO + Quantity::ZERO.with_format(QuantityFormat::BinarySI) + gi).format(),
            QuantityFormat::BinarySI
        );
        assert_eq!((gi - gi).to_string(), "0");
    }

    /// Amounts past the exact range (billionths beyond `i128`): one
    /// representation each, exact comparisons and sums, saturating `i128`
    /// views (issue #29).
    #[test]
    fn huge_amounts_compare_and_add_exactly() {
        let units = Quantity::from_units;
        let dec = GoForm::Dec { scale: 9 };
        // 10^35 units is 10^44 billionths: beyond i128.
        let big = units(10_i128.pow(35));
        assert_eq!(big.huge(), Some((1, 44)));
        assert_eq!(big, Quantity::from_milli(10_i128.pow(38)));
        assert_eq!(big, Quantity::from_scaled_nano(1000, 41, dec));
        let mut set = std::collections::HashSet::new();
        set.insert(big);
        assert!(set.contains(&Quantity::from_scaled_nano(10, 43, dec)));
        // The edge: i128::MAX billionths is exact, ten times more is not.
        let edge = Quantity::from_nano(i128::MAX, dec);
        assert_eq!(edge.huge(), None);
        assert_eq!(edge.nano(), i128::MAX);
        let beyond = Quantity::from_scaled_nano(i128::MAX, 1, dec);
        assert!(beyond.huge().is_some());
        assert!(edge < beyond && units(1) < beyond && beyond < big);
        assert!(Quantity::ZERO - big < Quantity::ZERO - beyond);
        assert!(Quantity::ZERO - big < units(-1));
        // Saturating views.
        assert_eq!(big.milli(), i128::MAX);
        assert_eq!(big.value(), i128::MAX);
        assert_eq!((Quantity::ZERO - big).nano(), i128::MIN);
        assert!(big.is_whole() && big.is_whole_milli() && !big.is_zero() && !big.is_negative());
        // Sums: exact while the mantissa has at most 38 digits.
        let sum = big + Quantity::from_milli(500);
        assert!(sum > big);
        assert_eq!(sum - big, Quantity::from_milli(500));
        assert!(!sum.is_whole());
        assert_eq!(big + big, units(2 * 10_i128.pow(35)));
        assert_eq!(big - big, Quantity::ZERO);
        assert_eq!((big - big).huge(), None);
        // Past 38 digits a sum rounds (Go keeps it exact): 10^44 + 10^5
        // billionths needs 40 digits.
        assert_eq!(big + Quantity::from_nano(100_000, dec), big);
        // Two amounts summing past i128 become huge instead of saturating.
        let half = Quantity::from_nano(10_i128.pow(38), dec);
        assert_eq!((half + half).huge(), Some((2, 38)));
        assert_eq!((half + half).nano(), i128::MAX);
        assert!(half + half > edge);
    }

    /// `RoundUp(-3)` of huge `inf.Dec`s: the same amount when whole in
    /// thousandths (the form's scale 3), else rounded away from zero; the
    /// amounts of `1000000000000000000000000000000.0001` (Go:
    /// `1000000000000000000000000000000001m`, apimachinery v0.37.2) and
    /// its negation.
    #[test]
    fn huge_decs_round_up_to_thousandths() {
        let dec = GoForm::Dec { scale: 9 };
        let whole = Quantity::from_scaled_nano(1, 44, dec);
        let rounded = whole.huge_dec_rounded_up_to_milli().expect("huge");
        assert_eq!(rounded, whole);
        assert_eq!(rounded.go_form(), GoForm::Dec { scale: 3 });
        let fine = Quantity::from_scaled_nano(10_i128.pow(34) + 1, 5, dec);
        let rounded = fine.huge_dec_rounded_up_to_milli().expect("huge");
        assert_eq!(rounded.to_string(), "1000000000000000000000000000000001m");
        assert_eq!(
            (Quantity::ZERO - fine)
                .huge_dec_rounded_up_to_milli()
                .map(|q| q.to_string()),
            Some("-1000000000000000000000000000000001m".to_owned())
        );
        assert_eq!(Quantity::from_units(5).huge_dec_rounded_up_to_milli(), None);
        let int64 = Quantity::from_scaled_nano(1, 39, GoForm::Int64 { scale: 30 });
        assert_eq!(int64.huge_dec_rounded_up_to_milli(), None);
    }

    /// Go's `String()` of huge amounts: the mantissa, its exponent brought
    /// to a multiple of three, a suffix where one exists, else `e<n>`
    /// (where Go would print no exponent at all for decimal SI past `E`).
    #[test]
    fn huge_amounts_print_their_exponent() {
        let dec = GoForm::Dec { scale: 9 };
        let table = [
            (Quantity::from_units(10_i128.pow(35)), "100e33"),
            (
                Quantity::from_units(10_i128.pow(35)).with_format(QuantityFormat::DecimalExponent),
                "100e33",
            ),
            (
                Quantity::from_scaled_nano(12345, 2_147_483_656, dec),
                "123450e2147483646",
            ),
            (Quantity::from_scaled_nano(-7, 40, dec), "-70e30"),
            (
                Quantity::from_scaled_nano(10_000_000_000_000_000_000_000_000_000_000_000_001, 5, dec),
                "1000000000000000000000000000000000000100u",
            ),
            (
                Quantity::from_scaled_nano(1_000_000_000_000_000_000_000_000_000_000_001, 27, dec),
                "1000000000000000000000000000000001E",
            ),
        ];
        for (quantity, expected) in table {
            assert_eq!(quantity.to_string(), expected);
        }
    }

    #[test]
    fn equality_ignores_the_notation() {
        assert_eq!(binary(KI), Quantity::from_units(1024));
        assert_eq!(binary(2).cmp(&Quantity::from_units(1)), Ordering::Greater);
        let mut set = std::collections::HashSet::new();
        set.insert(binary(KI));
        assert!(set.contains(&Quantity::from_units(1024)));
    }
}

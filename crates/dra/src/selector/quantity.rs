//! Resource quantities as CEL selectors see them: `quantity("80Gi")` and
//! `device.capacity[domain][id]`, held the way k8s.io/apimachinery's
//! `resource.Quantity` holds them.
//!
//! The representation is observable through CEL, so it is kept: a quantity is
//! either a small amount (`int64Amount`: an `i64` times a power of ten) or a
//! decimal (`inf.Dec`: an unscaled integer over a power of ten), depending on
//! how it was written and computed. `isInteger()` and `asInteger()` answer
//! "not an integer" for every decimal and for a small amount with a negative
//! power of ten, even when the value is whole (`quantity("2.0")`,
//! `quantity("2.5Gi")`, `quantity("300m").add(quantity("700m"))` are not
//! integers to Kubernetes); `asApproximateFloat()` multiplies in the
//! representation's terms. Comparisons are exact.
//!
//! Go's decimals are unbounded; here the unscaled integer is an `i128`
//! (38 digits, nanounits included), and a quantity that needs more is refused
//! with [`QuantityError::TooLarge`]: no device publishes one.

use std::cmp::Ordering;

/// A parsed or computed quantity.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Quantity {
    /// `value × 10^scale` (Go's `int64Amount`).
    Small { value: i64, scale: i32 },
    /// `unscaled × 10^-scale` (Go's `inf.Dec`).
    Dec { unscaled: i128, scale: i32 },
}

/// Why a text is not a quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QuantityError {
    /// Go's `ErrFormatWrong`.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// Go's `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Go's `ErrNumeric`.
    #[error("unable to parse quantity's numeric value")]
    Numeric,
    /// A valid quantity with more digits than topoalign holds.
    #[error("quantity out of the range topoalign evaluates (more than 38 significant digits)")]
    TooLarge,
}

/// How a suffix scales the number.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `k`, `M`, `m`, ... and no suffix.
    DecimalSi,
    /// `e3`, `E-2`.
    DecimalExponent,
    /// `Ki`, `Mi`, ...
    BinarySi,
}

/// The largest quantity a binary suffix may give (Go's `maxAllowed`).
const MAX_ALLOWED: i128 = i64::MAX as i128;
/// Nanounits: decimals are rounded (away from zero) to this many places.
const NANO_PLACES: i32 = 9;
/// Go's `maxInt64Factors`: the digits an `int64` always holds.
const MAX_INT64_FACTORS: i64 = 18;

impl Quantity {
    pub(crate) const ZERO: Quantity = Quantity::Small { value: 0, scale: 0 };

    /// Parses `text` as `resource.ParseQuantity` does.
    pub(crate) fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if text == "0" {
            return Ok(Quantity::ZERO);
        }
        let parts = split(text)?;
        let (base, exponent, format) = interpret_suffix(parts.suffix)?;

        let digits = i64::try_from(parts.num.len() + parts.denom.len()).unwrap_or(i64::MAX);
        let (precision, mut scale, mantissa): (i64, i64, i64) = match format {
            Format::DecimalSi | Format::DecimalExponent => (MAX_INT64_FACTORS - digits, i64::from(exponent), 1),
            Format::BinarySi if exponent >= 0 && parts.denom.is_empty() => {
                // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1
                let digits_of_suffix = ((exponent as f32) * 3.0 / 10.0) as i64;
                let num_len = i64::try_from(parts.num.len()).unwrap_or(i64::MAX);
                (15 - num_len - digits_of_suffix - 1, 0, 1i64 << exponent)
            }
            Format::BinarySi => (-1, 0, 1),
        };
        if precision >= 0 {
            scale -= i64::try_from(parts.denom.len()).unwrap_or(i64::MAX);
            if scale >= -i64::from(NANO_PLACES) {
                let shifted = format!("{}{}", parts.num, parts.denom);
                let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
                if let Some(product) = go_int64_multiply(value, mantissa) {
                    let value = if parts.positive { product } else { -product };
                    // scale is an exponent Go keeps as int32
                    return Ok(Quantity::Small {
                        value,
                        scale: scale as i32,
                    });
                }
            }
        }
        parse_decimal(parts.value, base, exponent, format)
    }

    /// The same amount as a decimal (Go's `ToDec`/`AsDec`).
    fn as_dec(self) -> (i128, i32) {
        match self {
            Quantity::Small { value, scale } => (i128::from(value), scale.wrapping_neg()),
            Quantity::Dec { unscaled, scale } => (unscaled, scale),
        }
    }

    /// Go's `Quantity.Cmp`: exact.
    pub(crate) fn cmp(self, other: Quantity) -> Ordering {
        let (a, sa) = self.as_dec();
        let (b, sb) = other.as_dec();
        cmp_dec(a, sa, b, sb)
    }

    /// Go's `Quantity.Sign`.
    pub(crate) fn sign(self) -> i64 {
        let v = match self {
            Quantity::Small { value, .. } => i128::from(value),
            Quantity::Dec { unscaled, .. } => unscaled,
        };
        v.signum() as i64
    }

    /// Go's `Quantity.Add`.
    pub(crate) fn add(self, other: Quantity) -> Result<Quantity, QuantityError> {
        if let (Quantity::Small { value, scale }, Quantity::Small { value: ov, scale: os }) = (self, other)
            && let Some(sum) = small_add(value, scale, ov, os)
        {
            return Ok(sum);
        }
        let (a, sa) = self.as_dec();
        let (b, sb) = other.as_dec();
        dec_add(a, sa, b, sb)
    }

    /// Go's `Quantity.Sub`.
    pub(crate) fn sub(self, other: Quantity) -> Result<Quantity, QuantityError> {
        if let (Quantity::Small { value, scale }, Quantity::Small { value: ov, scale: os }) = (self, other)
            && let Some(diff) = small_add(value, scale, ov.wrapping_neg(), os)
        {
            return Ok(diff);
        }
        let (a, sa) = self.as_dec();
        let (b, sb) = other.as_dec();
        dec_add(a, sa, b.checked_neg().ok_or(QuantityError::TooLarge)?, sb)
    }

    /// Go's `Quantity.AsInt64`: `None` for every decimal and for a small
    /// amount below the units or out of `i64` range.
    pub(crate) fn as_i64(self) -> Option<i64> {
        match self {
            Quantity::Dec { .. } => None,
            Quantity::Small { value, scale } => match scale {
                0 => Some(value),
                s if s < 0 => None,
                s => positive_scale(value, s),
            },
        }
    }

    /// Go's `Quantity.AsApproximateFloat64`.
    pub(crate) fn as_approximate_f64(self) -> f64 {
        // The nearest double, ties to even, as Go's conversions round.
        let (base, exponent) = match self {
            Quantity::Small { value, scale } => (value as f64, i64::from(scale)),
            Quantity::Dec { unscaled, scale } => (unscaled as f64, -i64::from(scale)),
        };
        if exponent == 0 { base } else { base * go_pow10(exponent) }
    }
}

/// The pieces of a quantity's text (Go's `parseQuantityString`).
struct Parts<'a> {
    positive: bool,
    /// The number with its sign, without the suffix.
    value: &'a str,
    /// The integer digits, leading zeros dropped ("0" if none).
    num: &'a str,
    /// The fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = text.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let zeros = bytes[pos..].iter().take_while(|&&b| b == b'0').count();
    pos += zeros;
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let digits = |from: usize| from + bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let num_end = digits(pos);
    let mut num = &text[pos..num_end];
    if num_end >= end {
        return Ok(Parts {
            positive,
            value: text,
            num,
            denom: "",
            suffix: "",
        });
    }
    if num.is_empty() {
        num = "0";
    }
    pos = num_end;
    let mut denom = "";
    if bytes[pos] == b'.' {
        pos += 1;
        let denom_end = digits(pos);
        denom = &text[pos..denom_end];
        if denom_end >= end {
            return Ok(Parts {
                positive,
                value: text,
                num,
                denom,
                suffix: "",
            });
        }
        pos = denom_end;
    }
    let value = &text[..pos];
    let suffix_start = pos;
    pos += bytes[pos..].iter().take_while(|b| b"eEinumkKMGTP".contains(b)).count();
    if pos < end && matches!(bytes[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits(pos) != end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &text[suffix_start..],
    })
}

/// The base, power and notation of a suffix (Go's `quantitySuffixer`).
fn interpret_suffix(suffix: &str) -> Result<(u32, i32, Format), QuantityError> {
    let decimal = |e| Ok((10, e, Format::DecimalSi));
    let binary = |e| Ok((2, e, Format::BinarySi));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let exponent = go_parse_int64(&s[1..]).ok_or(QuantityError::Suffix)?;
            // Go keeps the exponent as int32(parsed), wrapping
            Ok((10, exponent as i32, Format::DecimalExponent))
        }
        _ => Err(QuantityError::Suffix),
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign and decimal digits.
fn go_parse_int64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The slow path of `ParseQuantity`: the number as a decimal, scaled by the
/// suffix, rounded away from zero to nanounits, binary amounts capped.
fn parse_decimal(value: &str, base: u32, exponent: i32, format: Format) -> Result<Quantity, QuantityError> {
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty()
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(QuantityError::Numeric);
    }
    let mut unscaled: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        unscaled = unscaled
            .checked_mul(10)
            .and_then(|u| u.checked_add(i128::from(b - b'0')))
            .ok_or(QuantityError::TooLarge)?;
    }
    let mut scale = i32::try_from(frac_part.len()).map_err(|_| QuantityError::TooLarge)?;
    if base == 10 {
        scale = scale.wrapping_sub(exponent);
    } else {
        let factor = 1i128
            .checked_shl(u32::try_from(exponent).map_err(|_| QuantityError::TooLarge)?)
            .ok_or(QuantityError::TooLarge)?;
        unscaled = unscaled.checked_mul(factor).ok_or(QuantityError::TooLarge)?;
    }
    if unscaled != 0 {
        (unscaled, scale) = round_up_to(unscaled, scale, NANO_PLACES)?;
    }
    if format == Format::BinarySi && cmp_dec(unscaled, scale, MAX_ALLOWED, 0) == Ordering::Greater {
        (unscaled, scale) = (MAX_ALLOWED, 0);
    }
    if negative {
        unscaled = -unscaled;
    }
    Ok(Quantity::Dec { unscaled, scale })
}

/// `unscaled × 10^-scale` (non-negative) at `target` places, rounded away
/// from zero (inf's `Round(.., RoundUp)`).
fn round_up_to(unscaled: i128, scale: i32, target: i32) -> Result<(i128, i32), QuantityError> {
    let diff = i64::from(target) - i64::from(scale);
    if diff >= 0 {
        let factor = pow10_i128(diff).ok_or(QuantityError::TooLarge)?;
        let u = unscaled.checked_mul(factor).ok_or(QuantityError::TooLarge)?;
        return Ok((u, target));
    }
    match pow10_i128(-diff) {
        Some(divisor) => {
            let (q, r) = (unscaled / divisor, unscaled % divisor);
            Ok((if r != 0 { q + 1 } else { q }, target))
        }
        // dividing by more than the value has digits: a non-zero value rounds up to one unit
        None => Ok((1, target)),
    }
}

fn pow10_i128(n: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

/// Compares `a × 10^-sa` with `b × 10^-sb` exactly.
fn cmp_dec(a: i128, sa: i32, b: i128, sb: i32) -> Ordering {
    if a.signum() != b.signum() {
        return a.signum().cmp(&b.signum());
    }
    if a == 0 {
        return Ordering::Equal;
    }
    let negative = a < 0;
    let (ma, mb) = (a.unsigned_abs(), b.unsigned_abs());
    let magnitude = match i64::from(sa) - i64::from(sb) {
        0 => ma.cmp(&mb),
        d if d > 0 => match scale_u128(mb, d) {
            // a has more places: bring b to them
            Some(mb) => ma.cmp(&mb),
            None => Ordering::Less,
        },
        d => match scale_u128(ma, -d) {
            Some(ma) => ma.cmp(&mb),
            None => Ordering::Greater,
        },
    };
    if negative { magnitude.reverse() } else { magnitude }
}

fn scale_u128(v: u128, places: i64) -> Option<u128> {
    v.checked_mul(10u128.checked_pow(u32::try_from(places).ok()?)?)
}

/// `a + b` for decimals (inf's `Dec.Add`: the larger scale).
fn dec_add(a: i128, sa: i32, b: i128, sb: i32) -> Result<Quantity, QuantityError> {
    let scale = sa.max(sb);
    let align = |v: i128, s: i32| pow10_i128(i64::from(scale) - i64::from(s)).and_then(|f| v.checked_mul(f));
    let sum = align(a, sa)
        .zip(align(b, sb))
        .and_then(|(a, b)| a.checked_add(b))
        .ok_or(QuantityError::TooLarge)?;
    Ok(Quantity::Dec { unscaled: sum, scale })
}

/// Go's `int64Amount.Add`: `None` when the sum leaves `int64Amount`.
fn small_add(a: i64, sa: i32, b: i64, sb: i32) -> Option<Quantity> {
    let small = |value, scale| Some(Quantity::Small { value, scale });
    if b == 0 {
        return small(a, sa);
    }
    if a == 0 {
        return small(b, sb);
    }
    match sa.cmp(&sb) {
        Ordering::Equal => small(go_int64_add(a, b)?, sa),
        Ordering::Greater => {
            let a = positive_scale(a, sa.checked_sub(sb)?)?;
            small(go_int64_add(a, b)?, sb)
        }
        Ordering::Less => {
            let b = positive_scale(b, sb.checked_sub(sa)?)?;
            small(go_int64_add(a, b)?, sa)
        }
    }
}

/// Go's `int64Add`, which refuses `MinInt64 + MinInt64` too.
fn go_int64_add(a: i64, b: i64) -> Option<i64> {
    a.checked_add(b)
}

/// Go's `int64Multiply`.
fn go_int64_multiply(a: i64, b: i64) -> Option<i64> {
    a.checked_mul(b)
}

/// Go's `positiveScaleInt64`: `base × 10^scale`, `None` on overflow.
fn positive_scale(base: i64, scale: i32) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    base.checked_mul(10i64.checked_pow(u32::try_from(scale).ok()?)?)
}

/// Go's `math.Pow10`, which multiplies two table entries (not always the
/// double nearest to 10^n).
fn go_pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
        1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288];
    const NEG32: [f64; 11] = [
        1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    // the ranges below keep every index in bounds
    match n {
        0..=308 => POS32[n as usize / 32] * TAB[n as usize % 32],
        -323..=-1 => NEG32[(-n) as usize / 32] / TAB[(-n) as usize % 32],
        n if n > 0 => f64::INFINITY,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_into_go_representations() {
        assert!(matches!(
            q("80Gi"),
            Quantity::Small {
                value: 85_899_345_920,
                scale: 0
            }
        ));
        assert!(matches!(q("1.50"), Quantity::Small { value: 150, scale: -2 }));
        assert!(matches!(q("300m"), Quantity::Small { value: 300, scale: -3 }));
        assert!(matches!(q("1e3"), Quantity::Small { value: 1, scale: 3 }));
        assert!(matches!(q("-1.5k"), Quantity::Small { value: -15, scale: 2 }));
        // a binary amount with a fraction is a decimal, rounded to nano
        assert!(matches!(
            q("2.5Gi"),
            Quantity::Dec {
                unscaled: 2_684_354_560_000_000_000,
                scale: 9
            }
        ));
        assert!(matches!(q("0.1n"), Quantity::Dec { unscaled: 1, scale: 9 }));
        assert!(matches!(q("-0.1n"), Quantity::Dec { unscaled: -1, scale: 9 }));
        assert!(matches!(
            q("8Ei"),
            Quantity::Dec {
                unscaled: MAX_ALLOWED,
                scale: 0
            }
        ));
        assert!(matches!(q("."), Quantity::Small { value: 0, scale: 0 }));
    }

    #[test]
    fn refuses_what_go_refuses() {
        for text in ["", " 1", "1x", "1e", "1Ee5", "1m5", "--1", "1.2.3"] {
            assert!(Quantity::parse(text).is_err(), "{text:?}");
        }
        assert_eq!(Quantity::parse("1e+").err(), Some(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1x").err(), Some(QuantityError::FormatWrong));
    }

    #[test]
    fn compares_exactly() {
        assert_eq!(q("1Gi").cmp(q("1024Mi")), Ordering::Equal);
        assert_eq!(q("1e1000").cmp(q("1")), Ordering::Greater);
        assert_eq!(q("-1e1000").cmp(q("1")), Ordering::Less);
        assert_eq!(q("1n").cmp(q("0")), Ordering::Greater);
        assert_eq!(q("1e4294967296").cmp(q("1")), Ordering::Equal);
    }

    #[test]
    fn integers_as_kubernetes_sees_them() {
        assert_eq!(q("2").as_i64(), Some(2));
        assert_eq!(q("2.0").as_i64(), None);
        assert_eq!(q("2.5Gi").as_i64(), None);
        let sum = q("300m").add(q("700m")).unwrap();
        assert_eq!(sum.cmp(q("1")), Ordering::Equal);
        assert_eq!(sum.as_i64(), None);
        assert_eq!(
            q("9223372036854775807")
                .add(Quantity::Small { value: 1, scale: 0 })
                .unwrap()
                .as_i64(),
            None
        );
        assert_eq!(q("1k").as_i64(), Some(1000));
    }

    #[test]
    fn approximate_floats() {
        assert_eq!(q("2.5Gi").as_approximate_f64(), 2_684_354_560.0);
        assert_eq!(q("0.1").as_approximate_f64(), 0.1);
        assert_eq!(q("300m").as_approximate_f64(), 0.3);
    }
}

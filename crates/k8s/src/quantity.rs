//! Reading Kubernetes quantity strings (`"500m"`, `"16Gi"`, `"1e3"`) into
//! [`Quantity`], exactly as `resource.ParseQuantity` reads them.
//!
//! Owns: the grammar, suffix interpretation, the rounding of amounts finer
//! than a billionth, the binary-SI cap, Go's internal form of a parsed
//! amount, and the text Go prints for a parsed quantity.
//! Must not touch: what a quantity means for any resource (callers decide
//! whether negative or fractional amounts are acceptable).
//!
//! Semantics, from `k8s.io/apimachinery/pkg/api/resource`:
//! - `<sign>? <digits> (. <digits>)? <suffix>` where the suffix is a decimal
//!   SI one (`n u m "" k M G T P E`), a binary one (`Ki Mi Gi Ti Pi Ei`) or an
//!   exponent (`e3`, `E-2`);
//! - amounts are exact to the billionth; finer ones round *up* (away from
//!   zero): `1.5n` holds 2 billionths, `5n` holds 5 (`MilliValue()`
//!   rounds that up to 1 thousandth);
//! - Go's form ([`GoForm`]): an `int64Amount{value, scale}` where
//!   `ParseQuantity`'s fast path takes the text (at most 18 significant
//!   digits, scale at least -9; binary suffixes only for whole numbers
//!   short enough: `1Gi` but not `1.5Gi` or `1Pi`), an `inf.Dec` otherwise;
//!   the memory manager's `AsInt64()` depends on it;
//! - binary amounts held as `inf.Dec` above 2^63-1 are capped there,
//!   silently, as Kubernetes does (`8Ei` is 2^63-1);
//! - every amount the API server takes is read, however large (`1e40`,
//!   `8e2147483647`, 29-digit numbers of `E`), except one beyond ±1.7·10^29
//!   units with more than 38 significant digits in billionths, which a
//!   [`Quantity`] cannot hold exactly ([`QuantityError::TooLarge`]), and a
//!   binary-suffixed number of more than 1000 digits
//!   ([`QuantityError::TooManyDigits`]; Kubernetes caps it at 2^63-1);
//! - the notation is remembered for printing ([`QuantityFormat`]).
//!
//! A quantity without any digit (`"Gi"`, `"."`, `"-"`, `"m"`) is zero, as
//! Kubernetes reads it: the API server accepts such a pod and the kubelet
//! runs it, so refusing it would be stricter than the kubelet.

use topoalign_model::{GoForm, Quantity, QuantityFormat};

/// The largest binary-SI amount, in billionths: 2^63-1 units.
const BINARY_CAP: u128 = i64::MAX as u128 * 1_000_000_000;

/// The regular expression Kubernetes names in its format error.
const SPLIT_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Why a quantity string is not a quantity. The first two texts are
/// Kubernetes' own (`ErrFormatWrong`, `ErrSuffix`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '{SPLIT_RE}'")]
    FormatWrong,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error(
        "beyond 1.7e29 units the amount has more than 38 significant digits (in billionths), which topoalign does not hold exactly"
    )]
    TooLarge,
    #[error("a quantity with a binary suffix has at most {MAX_DIGITS} digits")]
    TooManyDigits,
}

/// More digits than any real binary quantity has (it is capped at 2^63-1
/// from 20 digits on); a bound on parsing work.
const MAX_DIGITS: usize = 1000;

/// Parses a quantity string the way `resource.ParseQuantity` does.
///
/// # Errors
/// [`QuantityError`] when the text is not a quantity (see the module docs).
pub fn parse_quantity(text: &str) -> Result<Quantity, QuantityError> {
    parse_plain(text).map_or_else(|| parse_general(text), Ok)
}

/// [`parse_quantity`] of any spelling, exactly (big-number arithmetic).
fn parse_general(text: &str) -> Result<Quantity, QuantityError> {
    let parts = split(text)?;
    let (base, exponent, mut format) = interpret_suffix(parts.suffix)?;
    let form = go_form(&parts, base, exponent);
    let (magnitude, exp) = if base == 2 {
        if parts.integer.len() + parts.fraction.len() > MAX_DIGITS {
            return Err(QuantityError::TooManyDigits);
        }
        let magnitude = nano_magnitude(&parts, base, exponent);
        if form.is_none() {
            // Kubernetes caps binary amounts at 2^63-1 units (`inf.Dec` path).
            let capped = magnitude.map_or(BINARY_CAP, |m| m.min(BINARY_CAP));
            if capped > 0 && capped < 1_000_000_000 {
                format = QuantityFormat::DecimalSI;
            }
            (capped, 0)
        } else {
            (magnitude.ok_or(QuantityError::TooLarge)?, 0)
        }
    } else if let Some(GoForm::Int64 { scale }) = form {
        int64_magnitude(&parts, scale)?
    } else {
        decimal_magnitude(&parts, exponent)?
    };
    let mantissa = i128::try_from(magnitude).map_err(|_| QuantityError::TooLarge)?;
    let mantissa = if parts.negative { -mantissa } else { mantissa };
    let form = form.unwrap_or(GoForm::Dec {
        // A non-zero amount is rounded to billionths (scale 9); zero keeps
        // the scale `inf.Dec.SetString` gave it.
        scale: if mantissa == 0 {
            zero_dec_scale(&parts, base, exponent)
        } else {
            9
        },
    });
    let quantity = Quantity::from_scaled_nano(mantissa, exp, form).with_format(format);
    if matches!(form, GoForm::Int64 { .. }) && !matches!(quantity.go_form(), GoForm::Int64 { .. }) {
        // Go's int64 form always holds its amount; so does a quantity's.
        return Err(QuantityError::TooLarge);
    }
    Ok(quantity)
}

/// `ceil(|amount| × 10^9)` of a decimal amount (`base` 10) as `(mantissa,
/// exp)`, `mantissa × 10^exp` billionths with the mantissa's trailing zeros
/// moved into `exp` — in time linear in the digits, whatever the exponent
/// (`1e2147483647`).
///
/// # Errors
/// [`QuantityError::TooLarge`] for a mantissa of more than 38 digits.
fn decimal_magnitude(parts: &Parts<'_>, exponent: i32) -> Result<(u128, u32), QuantityError> {
    let digits: Vec<u8> = parts
        .integer
        .bytes()
        .chain(parts.fraction.bytes())
        .map(|b| b - b'0')
        .skip_while(|&d| d == 0)
        .collect();
    if digits.is_empty() {
        return Ok((0, 0));
    }
    let fraction_digits = i64::try_from(parts.fraction.len()).map_err(|_| QuantityError::TooLarge)?;
    // The amount is `digits × 10^power` billionths.
    let power = i64::from(exponent) + 9 - fraction_digits;
    let (mut kept, power) = if power < 0 {
        // Finer than a billionth: dropped, and rounded up when any dropped
        // digit is not zero.
        let dropped = usize::try_from(power.unsigned_abs()).unwrap_or(usize::MAX);
        let (kept, rest) = digits.split_at(digits.len().saturating_sub(dropped));
        let mut kept = kept.to_vec();
        if rest.iter().any(|&d| d != 0) {
            increment(&mut kept);
        }
        (kept, 0)
    } else {
        (digits, power)
    };
    let zeros = kept.iter().rev().take_while(|&&d| d == 0).count();
    kept.truncate(kept.len() - zeros);
    let power = power + i64::try_from(zeros).map_err(|_| QuantityError::TooLarge)?;
    if kept.len() > 39 {
        return Err(QuantityError::TooLarge);
    }
    let mantissa = kept.iter().try_fold(0_u128, |acc, &d| {
        acc.checked_mul(10)
            .and_then(|acc| acc.checked_add(u128::from(d)))
            .ok_or(QuantityError::TooLarge)
    })?;
    Ok((mantissa, u32::try_from(power).map_err(|_| QuantityError::TooLarge)?))
}

/// Adds one to a number written as decimal digits (most significant first).
fn increment(digits: &mut Vec<u8>) {
    for digit in digits.iter_mut().rev() {
        if *digit == 9 {
            *digit = 0;
        } else {
            *digit += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// Go's choice of form in `ParseQuantity`: `int64Amount` (`Some`, its
/// scale) where the fast path takes the amount — at most 18 significant
/// digits written for a decimal suffix or exponent with a scale of at least
/// -9, a whole number of a binary suffix with few enough digits for its
/// precision estimate — else `inf.Dec` (`None`).
fn go_form(parts: &Parts<'_>, base: u32, exponent: i32) -> Option<GoForm> {
    // Go's numerator is "0" when no integer digit is left.
    let num = i64::try_from(parts.integer.len().max(1)).ok()?;
    let denom = i64::try_from(parts.fraction.len()).ok()?;
    let (scale, precision) = if base == 2 {
        if parts.fraction.is_empty() && exponent >= 0 {
            // `15 - len(num) - int32(float32(exponent)*3/10) - 1`; exact
            // for the binary suffixes' exponents (multiples of ten).
            (0, 15 - num - i64::from(exponent) * 3 / 10 - 1)
        } else {
            (0, -1)
        }
    } else {
        (exponent, 18 - num - denom)
    };
    // Go's `scale -= int32(len(denom))` wraps in int32: `1.5e-2147483648`
    // is `int64Amount{15, 2147483647}` to Go.
    let scale = scale.wrapping_sub(i32::try_from(denom).unwrap_or(i32::MAX));
    (precision >= 0 && scale >= -9).then_some(GoForm::Int64 { scale })
}

/// The amount of Go's fast path, `int64Amount{value, scale}`: `value ×
/// 10^(scale + 9)` billionths, `value` the digits written (at most 18),
/// `scale` as Go computed it (wrapped; see [`go_form`]).
fn int64_magnitude(parts: &Parts<'_>, scale: i32) -> Result<(u128, u32), QuantityError> {
    let value = parts
        .integer
        .bytes()
        .chain(parts.fraction.bytes())
        .fold(0_u128, |value, digit| value * 10 + u128::from(digit - b'0'));
    let exp = u32::try_from(i64::from(scale) + 9).map_err(|_| QuantityError::TooLarge)?;
    Ok((value, exp))
}

/// The scale `inf.Dec` gives a zero amount on Go's `inf.Dec` path:
/// the fraction's digits, less a decimal exponent.
fn zero_dec_scale(parts: &Parts<'_>, base: u32, exponent: i32) -> i32 {
    let digits = i32::try_from(parts.fraction.len()).unwrap_or(i32::MAX);
    if base == 10 {
        digits.saturating_sub(exponent)
    } else {
        digits
    }
}

/// [`parse_quantity`] of the spellings almost every manifest and state
/// uses — up to 18 digits, no sign, point or exponent, a suffix from `m`
/// to `P` or `Ki` to `Pi` — in integer arithmetic; `None` for anything
/// else (the general path then reads it). Same amount, notation and Go
/// form as the general path (a test compares both): whole amounts of these
/// suffixes need no rounding, and none reaches the binary cap.
fn parse_plain(text: &str) -> Option<Quantity> {
    let bytes = text.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 18 {
        return None;
    }
    let mut units: i128 = 0;
    for &digit in &bytes[..digits] {
        units = units * 10 + i128::from(digit - b'0');
    }
    let (nano_per_unit, format, exponent): (i128, QuantityFormat, i32) = match &text[digits..] {
        "" => (1_000_000_000, QuantityFormat::DecimalSI, 0),
        "m" => (1_000_000, QuantityFormat::DecimalSI, -3),
        "k" => (1_000_000_000_000, QuantityFormat::DecimalSI, 3),
        "M" => (1_000_000_000_000_000, QuantityFormat::DecimalSI, 6),
        "G" => (1_000_000_000_000_000_000, QuantityFormat::DecimalSI, 9),
        "T" => (1_000_000_000_000_000_000_000, QuantityFormat::DecimalSI, 12),
        "P" => (1_000_000_000_000_000_000_000_000, QuantityFormat::DecimalSI, 15),
        "Ki" => (1_000_000_000 << 10, QuantityFormat::BinarySI, 10),
        "Mi" => (1_000_000_000 << 20, QuantityFormat::BinarySI, 20),
        "Gi" => (1_000_000_000 << 30, QuantityFormat::BinarySI, 30),
        "Ti" => (1_000_000_000 << 40, QuantityFormat::BinarySI, 40),
        "Pi" => (1_000_000_000 << 50, QuantityFormat::BinarySI, 50),
        _ => return None,
    };
    let nano = units.checked_mul(nano_per_unit)?;
    if format == QuantityFormat::BinarySI && nano > BINARY_CAP as i128 {
        return None;
    }
    let significant = text[..digits].trim_start_matches('0').len().max(1) as i32;
    let form = match format {
        // Go's precision estimate `15 - len(num) - exponent*3/10 - 1 >= 0`.
        QuantityFormat::BinarySI if 15 - significant - exponent * 3 / 10 > 0 => GoForm::Int64 { scale: 0 },
        QuantityFormat::BinarySI if units == 0 => GoForm::Dec { scale: 0 },
        QuantityFormat::BinarySI => GoForm::Dec { scale: 9 },
        _ => GoForm::Int64 { scale: exponent },
    };
    Some(Quantity::from_nano(nano, form).with_format(format))
}

/// Parses a quantity taken from a JSON or YAML document as the API server
/// reads it: `Quantity.UnmarshalJSON` takes the JSON string *as written*,
/// escapes and all, and trims white space (`strings.TrimSpace`) before
/// parsing. Characters that a JSON encoder escapes — tab, line feed,
/// carriage return and the other ASCII control characters, U+2028 and
/// U+2029 —
/// reach it as `\t`, `\u2028`, …, which are no white space, so a quantity
/// with one of them around it is refused; plain and Unicode spaces
/// (U+0020, U+00A0, U+3000, …) are trimmed. (YAML reaches the API server
/// as JSON written by Go's encoder, which escapes exactly those.)
///
/// # Errors
/// As [`parse_quantity`].
pub fn parse_quantity_field(text: &str) -> Result<Quantity, QuantityError> {
    // Go's encoder escapes the bytes below 0x20, U+2028 and U+2029 (not
    // U+0085, which TrimSpace then trims).
    let escaped_in_json = |c: char| c < ' ' || c == '\u{2028}' || c == '\u{2029}';
    parse_quantity(text.trim_matches(|c: char| c.is_whitespace() && !escaped_in_json(c)))
}

/// The text Go's `Quantity.String()` gives for a quantity parsed from `text`.
///
/// Go keeps the original text when it was already in canonical form by its
/// own test, which accepts a few non-canonical spellings (`+1`, `1E3`,
/// `01`); otherwise it prints the canonical form. Error messages that echo a
/// parsed quantity use this.
pub fn go_string(text: &str) -> Option<String> {
    let quantity = parse_quantity(text).ok()?;
    if text == "0" || keeps_original_text(text) {
        return Some(text.to_owned());
    }
    Some(quantity.to_string())
}

/// The pieces of a quantity string.
struct Parts<'a> {
    negative: bool,
    /// Integer digits without leading zeros.
    integer: &'a str,
    fraction: &'a str,
    suffix: &'a str,
}

/// Splits `text` like Go's `parseQuantityString`.
fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            pos = 1;
            true
        }
        Some(b'+') => {
            pos = 1;
            false
        }
        _ => false,
    };
    let digit_run = |from: usize| from + bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let integer_end = digit_run(pos);
    let integer = text[pos..integer_end].trim_start_matches('0');
    pos = integer_end;
    let mut fraction = "";
    if bytes.get(pos) == Some(&b'.') {
        let fraction_end = digit_run(pos + 1);
        fraction = &text[pos + 1..fraction_end];
        pos = fraction_end;
    }
    let suffix_start = pos;
    pos += bytes[pos..].iter().take_while(|b| b"eEinumkKMGTP".contains(b)).count();
    if matches!(bytes.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    pos = digit_run(pos);
    if pos != bytes.len() {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        negative,
        integer,
        fraction,
        suffix: &text[suffix_start..],
    })
}

/// `(base, exponent, format)` of a suffix, like Go's `suffixer.interpret`.
fn interpret_suffix(suffix: &str) -> Result<(u32, i32, QuantityFormat), QuantityError> {
    let decimal = |exponent| Ok((10, exponent, QuantityFormat::DecimalSI));
    let binary = |exponent| Ok((2, exponent, QuantityFormat::BinarySI));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
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
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .filter(|rest| !rest.is_empty())
                .ok_or(QuantityError::Suffix)?;
            let exponent = crate::go::parse_int64(rest).map_err(|_| QuantityError::Suffix)?;
            // Go narrows the parsed int64 with int32(...), wrapping.
            #[allow(clippy::cast_possible_truncation, reason = "Go's int32() conversion wraps; so do we")]
            let exponent = exponent as i32;
            Ok((10, exponent, QuantityFormat::DecimalExponent))
        }
    }
}

/// `ceil(|amount| * 10^9)`, computed exactly (Go rounds up to billionths);
/// `None` when it exceeds `u128` (binary amounts, which are capped far
/// below).
fn nano_magnitude(parts: &Parts<'_>, base: u32, exponent: i32) -> Option<u128> {
    /// Enough limbs for any amount a quantity can hold, and then some.
    const MAX_LIMBS: usize = 5;
    let mut number = BigNat::from_digits(parts.integer.bytes().chain(parts.fraction.bytes()));
    let fraction_digits = i64::try_from(parts.fraction.len()).ok()?;
    let power_of_ten = if base == 2 {
        for _ in 0..exponent {
            number.mul_small(2);
        }
        9 - fraction_digits
    } else {
        i64::from(exponent) + 9 - fraction_digits
    };
    let mut remainder = false;
    if power_of_ten >= 0 {
        for _ in 0..power_of_ten {
            if number.is_zero() {
                break;
            }
            number.mul_small(10);
            if number.limbs.len() > MAX_LIMBS {
                return None;
            }
        }
    } else {
        for _ in 0..power_of_ten.unsigned_abs() {
            if number.is_zero() {
                break;
            }
            remainder |= number.div_small(10) != 0;
        }
    }
    number.to_u128()?.checked_add(u128::from(remainder))
}

/// Go's fast-path test in `ParseQuantity` for reusing the input as the
/// quantity's string: an int64-sized amount at nano precision or coarser
/// whose digits are already canonical.
fn keeps_original_text(text: &str) -> bool {
    let Ok(parts) = split(text) else { return false };
    let Ok((_, exponent, format)) = interpret_suffix(parts.suffix) else {
        return false;
    };
    let integer = if parts.integer.is_empty() { "0" } else { parts.integer };
    let digits = integer.len() + parts.fraction.len();
    let shifted = format!("{integer}{}", parts.fraction);
    let Ok(value) = shifted.parse::<i64>() else {
        return false;
    };
    match format {
        QuantityFormat::BinarySI => {
            // Precision estimate as Go computes it: float32(exponent)*3/10.
            let precision = 15 - digits as i64 - i64::from(exponent * 3 / 10) - 1;
            let fits = parts.fraction.is_empty() && precision >= 0 && value.checked_mul(1_i64 << exponent).is_some();
            fits && exponent % 10 == 0 && value & 0x07 != 0
        }
        QuantityFormat::DecimalSI | QuantityFormat::DecimalExponent => {
            let precision = 18 - digits as i64;
            let scale = i64::from(exponent) - parts.fraction.len() as i64;
            precision >= 0 && scale >= -9 && scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
        }
    }
}

/// A small unsigned big integer (little-endian base 2^32 limbs), enough to
/// scale a quantity's digits exactly before rounding.
struct BigNat {
    limbs: Vec<u32>,
}

impl BigNat {
    fn from_digits(digits: impl Iterator<Item = u8>) -> BigNat {
        let mut number = BigNat { limbs: Vec::new() };
        for digit in digits {
            number.mul_small(10);
            number.add_small(u32::from(digit - b'0'));
        }
        number
    }

    fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&limb| limb == 0)
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry = 0_u64;
        for limb in &mut self.limbs {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }

    fn add_small(&mut self, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.limbs {
            if carry == 0 {
                return;
            }
            let sum = u64::from(*limb) + carry;
            *limb = sum as u32;
            carry = sum >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }

    /// Divides in place; returns the remainder.
    fn div_small(&mut self, divisor: u32) -> u32 {
        let mut remainder = 0_u64;
        for limb in self.limbs.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            *limb = (current / u64::from(divisor)) as u32;
            remainder = current % u64::from(divisor);
        }
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        remainder as u32
    }

    fn to_u128(&self) -> Option<u128> {
        if self.limbs.len() > 4 {
            return None;
        }
        Some(
            self.limbs
                .iter()
                .rev()
                .fold(0_u128, |acc, &limb| (acc << 32) | u128::from(limb)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn milli(text: &str) -> i128 {
        parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}")).milli()
    }

    fn format(text: &str) -> QuantityFormat {
        parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}")).format()
    }

    /// shared/DEPENDENCIES.md "Quantity edge cases", in milli units.
    #[test]
    fn edge_cases_from_the_dependency_study() {
        let table: &[(&str, i128)] = &[
            ("500m", 500),
            ("16Gi", 17_179_869_184_000),
            ("1e3", 1_000_000),
            ("1E3", 1_000_000),
            ("1.5e-3", 2),
            ("1.5m", 2),
            ("5n", 1),
            ("5u", 1),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1Ei", 1_152_921_504_606_846_976_000),
            ("9223372036854775807", 9_223_372_036_854_775_807_000),
            ("123456789012345678", 123_456_789_012_345_678_000),
            (".5", 500),
            ("+1", 1000),
            ("-1", -1000),
            ("0.1", 100),
            ("263902468Ki", 270_236_127_232_000),
        ];
        for &(text, expected) in table {
            assert_eq!(milli(text), expected, "{text}");
        }
    }

    #[test]
    fn malformed_quantities_are_rejected_with_kubernetes_errors() {
        use QuantityError::*;
        let table: &[(&str, QuantityError)] = &[
            ("", FormatWrong),
            ("1.0.0", FormatWrong),
            ("1 Gi", FormatWrong),
            ("1gi", FormatWrong),
            ("1Mi1", Suffix),
            ("0x10", FormatWrong),
            ("inf", FormatWrong),
            ("NaN", FormatWrong),
            ("1e", Suffix),
            ("i", Suffix),
            // Kubernetes' own invalid table.
            ("1.1.M", FormatWrong),
            ("1+1.0M", FormatWrong),
            ("0.1mi", Suffix),
            ("0.1am", FormatWrong),
            ("aoeu", FormatWrong),
            (".5i", Suffix),
            ("1i", Suffix),
            ("-3.01i", Suffix),
            ("-3.01e-", Suffix),
            (" 1", FormatWrong),
            ("1 ", FormatWrong),
            ("1K", Suffix),
            ("1e99999999999999999999", Suffix),
            // Beyond 1.7e29 units, 43 significant digits (Go takes it),
            // and 2^127, whose 39 digits are one too many for an i128.
            ("1234567890123456789012345678901234567890123", TooLarge),
            ("170141183460469231731687303715884105728", TooLarge),
            (&format!("{}Ki", "1".repeat(1001)), TooManyDigits),
        ];
        for (text, expected) in table {
            assert_eq!(parse_quantity(text).as_ref(), Err(expected), "{text:?}");
        }
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    /// Kubernetes' `TestQuantityParse` table (values and formats), where a
    /// value finer than a thousandth is compared after rounding up.
    #[test]
    fn kubernetes_parse_table() {
        use QuantityFormat::*;
        let table: &[(&str, i128, QuantityFormat)] = &[
            ("0", 0, DecimalSI),
            ("0n", 0, DecimalSI),
            ("0Ki", 0, BinarySI),
            ("0M", 0, DecimalSI),
            ("1", 1000, DecimalSI),
            ("8Ki", 8 * 1024 * 1000, BinarySI),
            ("7Mi", 7 * 1024 * 1024 * 1000, BinarySI),
            ("3Ei", 3 * (1 << 60) * 1000, BinarySI),
            ("5n", 1, DecimalSI),
            ("3m", 3, DecimalSI),
            ("50k", 50_000_000, DecimalSI),
            ("300T", 300_000_000_000_000_000, DecimalSI),
            ("1E-3", 1, DecimalExponent),
            ("1e9", 1_000_000_000_000, DecimalExponent),
            ("100.035k", 100_035_000, DecimalSI),
            ("0.0005k", 500, DecimalSI),
            ("0.5e-2", 5, DecimalExponent),
            ("1.3E+6", 1_300_000_000, DecimalExponent),
            ("7.123456M", 7_123_456_000, DecimalSI),
            ("1.01E", 1_010_000_000_000_000_000_000, DecimalSI),
            ("3.001n", 1, DecimalSI),
            ("0.0000000001", 1, DecimalSI),
            ("9Ei", i64::MAX as i128 * 1000, BinarySI),
            ("9223372036854775807Ki", i64::MAX as i128 * 1000, BinarySI),
            (
                "99999999999999999999999999999999999999999999Ei",
                i64::MAX as i128 * 1000,
                BinarySI,
            ),
            (
                "-99999999999999999999999999999999999999999999Ei",
                -(i64::MAX as i128) * 1000,
                BinarySI,
            ),
            ("12E", 12_000_000_000_000_000_000_000, DecimalSI),
            ("100.035Ki", 102_435_840, BinarySI),
            ("0.5Mi", 524_288_000, BinarySI),
            ("0.000000000001Ki", 1, DecimalSI),
            (".001", 1, DecimalSI),
            ("1.", 1000, DecimalSI),
            ("1.G", 1_000_000_000_000, DecimalSI),
            ("-9.01", -9010, DecimalSI),
            // Held as -1n; `milli()` is its ceiling.
            ("-0.5n", 0, DecimalSI),
        ];
        for &(text, expected, expected_format) in table {
            assert_eq!(milli(text), expected, "{text}");
            assert_eq!(format(text), expected_format, "{text}");
        }
    }

    /// Kubernetes' `TestQuantityParseEmit` and canonical round trips.
    #[test]
    fn parsed_quantities_print_canonically() {
        let table = [
            ("1Ki", "1Ki"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            ("1.5", "1500m"),
            ("1.5Gi", "1536Mi"),
            ("1124Mi", "1124Mi"),
            ("0", "0"),
            ("0Gi", "0"),
            ("1e3", "1e3"),
            ("1000", "1k"),
            ("100m", "100m"),
            ("-100Mi", "-100Mi"),
        ];
        for (text, expected) in table {
            assert_eq!(
                parse_quantity(text).map(|q| q.to_string()),
                Ok(expected.to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn go_keeps_some_original_spellings() {
        let table = [
            ("+1", "+1"),
            ("1E3", "1E3"),
            ("01", "01"),
            ("-1E3", "-1E3"),
            ("100Mi", "100Mi"),
            ("1024Mi", "1Gi"),
            ("1.5", "1500m"),
            ("1000", "1k"),
            ("-0", "0"),
            ("0", "0"),
        ];
        for (text, expected) in table {
            assert_eq!(go_string(text).as_deref(), Some(expected), "{text}");
        }
    }

    #[test]
    fn json_fields_are_trimmed_as_the_api_server_trims_them() {
        // Spaces, plain and Unicode, are trimmed (Go's TrimSpace).
        for text in [" 1Gi", "1Gi  ", "\u{a0}1Gi\u{3000}", "\u{85}1Gi"] {
            assert_eq!(parse_quantity_field(text), parse_quantity("1Gi"), "{text:?}");
        }
        // What a JSON encoder escapes is no space to the parser.
        for text in ["\t1Gi", "1Gi\n", "\r1Gi", "1Gi\u{2028}", "\u{b}1Gi"] {
            assert_eq!(parse_quantity_field(text), Err(QuantityError::FormatWrong), "{text:?}");
        }
    }

    /// Kubernetes reads a quantity without a digit as zero (the answers of
    /// `resource.ParseQuantity` v0.37.2, run for this table).
    #[test]
    fn quantities_without_digits_are_zero() {
        for text in [
            "Gi", ".", "-", "+", "-.", ".Gi", "-Gi", "m", "e3", "E", "+.", "0.", "00", "-0",
        ] {
            let quantity = parse_quantity(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(quantity.milli(), 0, "{text:?}");
            assert_eq!(go_string(text).as_deref(), Some("0"), "{text:?}");
        }
    }

    /// Go's form, `AsInt64()`, `Value()` and `MilliValue()` of parsed
    /// quantities, each derived by hand from apimachinery v0.37.2's
    /// `ParseQuantity` (fast path: `precision := 18 - len(num+denom)`,
    /// binary `15 - len(num) - exponent*3/10 - 1`, scale ≥ -9) and
    /// `int64Amount` / `scaledValue` (math.go, scale_int.go).
    #[test]
    fn go_forms_and_values_are_gos() {
        const W: i64 = -8_446_744_073_709_551_616; // 10^19 - 2^64
        let table: &[(&str, Option<i64>, i64, i64)] = &[
            // int64Amount{2^30, 0}: whole bytes.
            ("1Gi", Some(1 << 30), 1 << 30, (1 << 30) * 1000),
            // int64Amount{1073741824000, -3}: AsInt64 refuses any scale < 0.
            ("1073741824000m", None, 1 << 30, (1 << 30) * 1000),
            ("2000000000n", None, 2, 2000),
            ("0m", None, 0, 0),
            ("1.5", None, 2, 1500),
            // A fraction of a binary suffix is an inf.Dec.
            ("1.5Gi", None, 1_610_612_736, 1_610_612_736_000),
            ("1536Mi", Some(1_610_612_736), 1_610_612_736, 1_610_612_736_000),
            // Binary precision: Ti takes 2 digits, Pi none.
            ("1Ti", Some(1 << 40), 1 << 40, (1 << 40) * 1000),
            ("100Ti", None, 100 << 40, (100 << 40) * 1000),
            ("1Pi", None, 1 << 50, (1 << 50) * 1000),
            // int64Amount{1, 3}, {5, 2}: positive scales multiply out.
            ("1k", Some(1000), 1000, 1_000_000),
            ("0.5k", Some(500), 500, 500_000),
            ("1e3", Some(1000), 1000, 1_000_000),
            ("0", Some(0), 0, 0),
            // negativeScaleInt64 rounds up: 0.9995 is 1 and 1000m.
            ("0.9995", None, 1, 1000),
            ("5n", None, 1, 1),
            // Finer than a billionth: inf.Dec rounded up to 1n.
            ("1e-10", None, 1, 1),
            // 18 digits fit the fast path, 19 do not.
            // int64MultiplyScale1000 returns the wrapped product.
            (
                "922337203685477580",
                Some(922_337_203_685_477_580),
                922_337_203_685_477_580,
                -800,
            ),
            // inf.Dec: Value() is exact, MilliValue() wraps (2^63-1)*1000.
            ("9223372036854775807", None, i64::MAX, -1000),
            ("8Ei", None, i64::MAX, -1000),
            ("9223372036854775807m", None, 9_223_372_036_854_776, i64::MAX),
            // inf.Dec past int64: big.Int.Int64() keeps the low 64 bits.
            ("10000000000000000000", None, W, 1_864_712_049_423_024_128),
            ("18446744073709551616", None, 0, 0),
            (
                "99999999999999999999999999999",
                None,
                7_886_392_056_514_347_007,
                -8_814_407_033_341_084_648,
            ),
            // int64Amount{1, 19}: positiveScaleInt64 overflows to 0.
            ("1e19", None, 0, 0),
            ("1e18", Some(1_000_000_000_000_000_000), 1_000_000_000_000_000_000, 0),
        ];
        for &(text, as_int64, value, milli) in table {
            let quantity = parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(quantity.as_int64(), as_int64, "{text} AsInt64");
            assert_eq!(quantity.go_value(), value, "{text} Value");
            assert_eq!(quantity.go_milli_value(), milli, "{text} MilliValue");
        }
        // int64Amount{1e18, 18}.MilliValue(): positiveScaleInt64(1, 21)
        // overflows in the loop: 0 (above).
    }

    /// Amounts past ±1.7e29 units, which the API server takes: read, and
    /// Go's `AsInt64()`, `Value()`, `MilliValue()`, `ScaledValue(Micro)`
    /// and `String()` of each, as a Go program printed them with
    /// k8s.io/apimachinery v0.37.2 (`resource.ParseQuantity`, then those
    /// methods). `AsInt64()` answers for none of them.
    #[test]
    fn huge_amounts_are_read_as_go_reads_them() {
        let table: &[(&str, i64, i64, i64, &str)] = &[
            // int64Amount{1, 30}: every scaled value overflows to 0.
            ("1e30", 0, 0, 0, "1e30"),
            ("1e40", 0, 0, 0, "10e39"),
            ("1e100", 0, 0, 0, "10e99"),
            ("-1e40", 0, 0, 0, "-10e39"),
            ("1.5e35", 0, 0, 0, "150e33"),
            // int64Amount{8, 2147483647}: Value() overflows to 0, but
            // MilliValue() scales by 2147483647 - (-3), which wraps in
            // int32 to a negative step: no scaling at all, 8.
            ("8e2147483647", 0, 8, 8, "80e2147483646"),
            // Go's `scale -= len(denom)` wraps: int64Amount{15, 2147483647}.
            ("1.5e-2147483648", 0, 15, 15, "150e2147483646"),
            // inf.Dec: the low 64 bits of the rounded-up result.
            (
                "123456789012345678901234567890",
                -4_362_896_299_872_285_998,
                8_982_045_596_877_734_992,
                -1_518_767_018_816_644_992,
                "123456789012345678901234567890",
            ),
            (
                "1000000000000000000000000000000.0001",
                5_076_944_270_305_263_617,
                4_089_650_035_136_921_601,
                -5_527_149_226_598_858_652,
                "1000000000000000000000000000000000100u",
            ),
            (
                "12345678901234567890123456789012345678e10",
                -189_669_265_768_744_960,
                -5_201_825_031_649_443_840,
                156_797_136_649_715_712,
                "123456789012345678901234567890123456780e9",
            ),
            (
                "9223372036854775807e20",
                -7_766_279_631_452_241_920,
                -200_376_420_520_689_664,
                2_537_764_290_115_403_776,
                "922337203685477580700e18",
            ),
            (
                "0.00000000000000000000000000000000000000000001e60",
                10_000_000_000_000_000,
                -8_446_744_073_709_551_616,
                1_864_712_049_423_024_128,
                "10e15",
            ),
        ];
        for &(text, value, milli, micro, string) in table {
            let quantity = parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(quantity.as_int64(), None, "{text} AsInt64");
            assert_eq!(quantity.go_value(), value, "{text} Value");
            assert_eq!(quantity.go_milli_value(), milli, "{text} MilliValue");
            assert_eq!(quantity.go_scaled_value(-6), micro, "{text} ScaledValue(Micro)");
            assert_eq!(quantity.to_string(), string, "{text} String");
        }
        // Decimal SI past `E`: Go drops the exponent (`100`); topoalign
        // writes it out. The Go values still agree.
        let q = parse_quantity("100000000000000000000000000000000000000E").expect("read");
        assert_eq!(q.go_value(), 2_377_900_603_251_621_888);
        assert_eq!(q.go_milli_value(), -1_729_382_256_910_270_464);
        assert_eq!(q.to_string(), "100e54");
        // Sums Go keeps exact, and so does a quantity (`Add`, then
        // `Value()`, `MilliValue()` and `Cmp` with the left operand).
        let q = |text: &str| parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let sums: &[(&str, &str, i64, i64, Ordering)] = &[
            (
                "1e30",
                "500m",
                5_076_944_270_305_263_617,
                4_089_650_035_136_922_100,
                Ordering::Greater,
            ),
            ("1e40", "1e40", 0, 0, Ordering::Greater),
            (
                "123456789012345678901234567890",
                "1",
                -4_362_896_299_872_285_997,
                8_982_045_596_877_735_992,
                Ordering::Greater,
            ),
            ("1e30", "-1e30", 0, 0, Ordering::Less),
        ];
        for &(a, b, value, milli, order) in sums {
            let sum = q(a) + q(b);
            assert_eq!(sum.go_value(), value, "{a} + {b} Value");
            assert_eq!(sum.go_milli_value(), milli, "{a} + {b} MilliValue");
            assert_eq!(sum.cmp(&q(a)), order, "{a} + {b} Cmp");
        }
        assert!(q("1e40") > q("99999999999999999999999999999999999999e1"));
        assert_eq!(q("1e40"), q("10000000000000000000000000000000000000000"));
        assert_eq!(q("1e40"), q("0.01e42"));
    }

    /// Go's `Quantity.Add` keeps the int64 form while the int64 sum fits
    /// (`int64Amount.Add` aligns to the finer scale) and turns to inf.Dec
    /// otherwise; the sum is exact to the billionth.
    #[test]
    fn sums_follow_gos_forms() {
        let q = |text: &str| parse_quantity(text).unwrap();
        // int64Amount{1,3} + {5,-3} = {1000005, -3}: no AsInt64.
        assert_eq!((q("1k") + q("5m")).go_form(), GoForm::Int64 { scale: -3 });
        assert_eq!((q("1k") + q("5m")).as_int64(), None);
        assert_eq!((q("1Gi") + q("1Gi")).as_int64(), Some(2 << 30));
        // Either side an inf.Dec: the sum is one (scale 9).
        assert_eq!((q("1Gi") + q("1.5Gi")).go_form(), GoForm::Dec { scale: 9 });
        let sum = q("922337203685477580") + q("922337203685477580");
        assert_eq!(sum.as_int64(), Some(1_844_674_407_370_955_160));
        // int64Amount{92, 17} scaled to -3 overflows: inf.Dec with the
        // larger inf scale (3 against -17); MilliValue() is the low 64 bits
        // of 9.2e21 + 1.
        let over = q("9.2E") + q("1m");
        assert_eq!(over.go_form(), GoForm::Dec { scale: 3 });
        assert_eq!(
            over.go_milli_value(),
            (9_200_000_000_000_000_000_001_i128 as u128 as u64) as i64
        );
        // Exact to the billionth: 0.5m + 0.5m is 1m, not 2m.
        assert_eq!((q("0.5m") + q("0.5m")).milli(), 1);
        assert!(q("1999999999n") < q("2"));
        assert_eq!((q("2") - q("1999999999n")).to_string(), "1n");
        assert_eq!(q("0.5m").to_string(), "500u");
        assert_eq!(q("1.5n").to_string(), "2n");
    }

    fn any_quantity() -> impl Strategy<Value = Quantity> {
        let format = prop_oneof![
            Just(QuantityFormat::DecimalSI),
            Just(QuantityFormat::BinarySI),
            Just(QuantityFormat::DecimalExponent)
        ];
        (any::<i64>(), format).prop_map(|(milli, format)| Quantity::from_milli(i128::from(milli)).with_format(format))
    }

    proptest! {
        #[test]
        fn printing_then_parsing_keeps_the_amount(quantity in any_quantity()) {
            let text = quantity.to_string();
            let parsed = parse_quantity(&text).unwrap();
            prop_assert_eq!(parsed, quantity);
            prop_assert_eq!(parsed.to_string(), text);
        }

        #[test]
        fn whole_units_parse_exactly(units in any::<i64>(), suffix in prop::sample::select(vec!["", "k", "M", "Ki", "Mi"])) {
            let text = format!("{units}{suffix}");
            let scale: i128 = match suffix { "k" => 1000, "M" => 1_000_000, "Ki" => 1024, "Mi" => 1 << 20, _ => 1 };
            let expected = i128::from(units) * scale * 1000;
            let capped = if suffix.ends_with('i') { expected.clamp(-(i64::MAX as i128) * 1000, i64::MAX as i128 * 1000) } else { expected };
            prop_assert_eq!(parse_quantity(&text).unwrap().milli(), capped);
        }

        #[test]
        fn fractions_round_up_to_the_next_thousandth(whole in 0_u32..1000, fraction in 1_u32..1_000_000) {
            let text = format!("{whole}.{fraction:06}");
            let micro = i128::from(whole) * 1_000_000 + i128::from(fraction);
            prop_assert_eq!(parse_quantity(&text).unwrap().milli(), (micro + 999) / 1000);
        }

        #[test]
        fn the_plain_path_reads_as_the_general_one(
            digits in "[0-9]{1,19}",
            suffix in prop::sample::select(vec!["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "e3"]),
        ) {
            let text = format!("{digits}{suffix}");
            let amount = |q: Quantity| (q.nano(), q.format(), q.go_form());
            let general = parse_general(&text).map(amount);
            prop_assert_eq!(parse_quantity(&text).map(amount), general.clone(), "{}", text);
            // Binary amounts at the cap, and amounts too large to hold,
            // are the general path's.
            let capped = suffix.ends_with('i') && general.as_ref().is_ok_and(|g| g.0 == BINARY_CAP as i128);
            // Nor amounts past i128 billionths (`nano()` saturates there).
            let huge = general.as_ref().is_ok_and(|g| g.0 == i128::MAX);
            let expected_plain = general.is_ok() && digits.len() <= 18 && !matches!(suffix, "E" | "Ei" | "n" | "e3") && !capped && !huge;
            let plain = parse_plain(&text).map(amount);
            prop_assert_eq!(plain.is_some(), expected_plain, "{}", text);
            if let Some(plain) = plain {
                prop_assert_eq!(Ok(plain), general, "{}", text);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,12}") {
            let _ = parse_quantity(&text);
            let _ = go_string(&text);
        }
    }
}

//! [`Quantity`]: an exact resource amount, as the kubelet reads one, and the
//! Kubernetes canonical text it prints.
//!
//! Parsing of the Kubernetes string form (`"500m"`, `"16Gi"`) belongs to the
//! `topoalign-k8s` crate; this type holds the number, the notation it was
//! written in ([`QuantityFormat`]), and answers the questions the kubelet asks
//! of it (`Value()`, `MilliValue()`, `String()`).

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

/// An exact amount in thousandths of a unit (millicores for CPU, millibytes
/// for memory), rounded up to a whole thousandth like Kubernetes'
/// `Quantity.MilliValue()`, plus the notation it prints in.
///
/// Equality, ordering and hashing look at the amount only: `1Gi` equals
/// `1073741824` (Go's `Quantity.Cmp`).
#[derive(Clone, Copy, Default)]
pub struct Quantity {
    milli: i128,
    format: QuantityFormat,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity {
        milli: 0,
        format: QuantityFormat::DecimalSI,
    };

    /// An amount of `milli` thousandths, in decimal SI notation.
    pub const fn from_milli(milli: i128) -> Self {
        Quantity {
            milli,
            format: QuantityFormat::DecimalSI,
        }
    }

    /// A whole amount (CPUs, bytes, devices), in decimal SI notation.
    pub const fn from_units(units: i128) -> Self {
        Quantity::from_milli(units * 1000)
    }

    /// The same amount, printed in `format`.
    #[must_use]
    pub const fn with_format(self, format: QuantityFormat) -> Self {
        Quantity {
            milli: self.milli,
            format,
        }
    }

    /// The notation this amount prints in.
    pub const fn format(self) -> QuantityFormat {
        self.format
    }

    /// Thousandths of a unit (kubelet `MilliValue()`).
    pub const fn milli(self) -> i128 {
        self.milli
    }

    /// Whole units rounded up (kubelet `Value()`).
    pub fn value(self) -> i128 {
        // `i128` division is a library call; an amount that fits `i64` (any
        // real one) is divided natively, with the same result.
        if let Ok(milli) = i64::try_from(self.milli) {
            return i128::from(milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0));
        }
        self.milli.div_euclid(1000) + i128::from(self.milli.rem_euclid(1000) != 0)
    }

    /// Whether the amount is a whole number of units, the kubelet's test for
    /// exclusive CPUs (`Value()*1000 == MilliValue()`).
    pub fn is_whole(self) -> bool {
        // Natively where the amount fits `i64` (see `value`).
        match i64::try_from(self.milli) {
            Ok(milli) => milli.rem_euclid(1000) == 0,
            Err(_) => self.milli.rem_euclid(1000) == 0,
        }
    }

    /// Whether the amount is zero.
    pub const fn is_zero(self) -> bool {
        self.milli == 0
    }

    /// Whether the amount is below zero.
    pub const fn is_negative(self) -> bool {
        self.milli < 0
    }
}

/// Go's `Quantity.Add`: the sum keeps the left operand's notation, except
/// that a zero left operand takes the right one's (so a running total that
/// starts at zero prints like the first amount added: `0 + 1Gi + 100Mi` is
/// `1124Mi`).
impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_add(rhs.milli),
            format: if self.is_zero() { rhs.format } else { self.format },
        }
    }
}

/// Go's `Quantity.Sub`, with the same notation rule as [`Add`](std::ops::Add).
impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_sub(rhs.milli),
            format: if self.is_zero() { rhs.format } else { self.format },
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

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli
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
        self.milli.cmp(&other.milli)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.milli.hash(state);
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The Kubernetes canonical form (`Quantity.String()`): no fractional
/// digits, the largest suffix that loses nothing, in the quantity's own
/// notation — `1124Mi`, `1500m`, `1k`, `1e3`, `0`.
///
/// Binary notation falls back to decimal SI for amounts below 1024 or with a
/// fractional part, as Kubernetes does (`1000` bytes in binary prints `1k`).
/// Beyond the largest suffix (`E`, `Ei`) the exponent is written out
/// (`1e21`) or the amount kept in `Ei`, where v1.32 would drop the exponent.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli == 0 {
            return f.write_str("0");
        }
        if self.format == QuantityFormat::BinarySI {
            let small = self.milli.unsigned_abs() < 1024 * 1000;
            if !small && self.is_whole() {
                return write_binary(f, self.milli / 1000);
            }
        }
        write_decimal(f, self.milli, self.format == QuantityFormat::DecimalExponent)
    }
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

/// `milli` thousandths as mantissa and a power of ten that is a multiple of
/// three, the mantissa as small as possible without fractional digits.
fn write_decimal(f: &mut fmt::Formatter<'_>, milli: i128, exponent_notation: bool) -> fmt::Result {
    let mut mantissa = milli;
    let mut exponent: i32 = -3;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    // Back down to a multiple of three; never below -3, so the mantissa stays
    // at most |milli| and cannot overflow.
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
    let suffix = match exponent {
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return write!(f, "{mantissa}e{exponent}"),
    };
    write!(f, "{mantissa}{suffix}")
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

    #[test]
    fn equality_ignores_the_notation() {
        assert_eq!(binary(KI), Quantity::from_units(1024));
        assert_eq!(binary(2).cmp(&Quantity::from_units(1)), Ordering::Greater);
        let mut set = std::collections::HashSet::new();
        set.insert(binary(KI));
        assert!(set.contains(&Quantity::from_units(1024)));
    }
}

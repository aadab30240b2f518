//! [`Quantity`]: an exact resource amount, as the kubelet reads one.
//!
//! Parsing of the Kubernetes string form (`"500m"`, `"16Gi"`) belongs to the
//! `topoalign-k8s` crate; this type only holds the number and answers the
//! questions the kubelet asks of it (`Value()`, `MilliValue()`).

use std::fmt;

/// An exact amount in thousandths of a unit (millicores for CPU, millibytes
/// for memory), rounded up to a whole thousandth like Kubernetes'
/// `Quantity.MilliValue()`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    milli: i128,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { milli: 0 };

    /// An amount of `milli` thousandths.
    pub const fn from_milli(milli: i128) -> Self {
        Quantity { milli }
    }

    /// A whole amount (CPUs, bytes, devices).
    pub const fn from_units(units: i128) -> Self {
        Quantity { milli: units * 1000 }
    }

    /// Thousandths of a unit (kubelet `MilliValue()`).
    pub const fn milli(self) -> i128 {
        self.milli
    }

    /// Whole units rounded up (kubelet `Value()`).
    pub fn value(self) -> i128 {
        self.milli.div_euclid(1000) + i128::from(self.milli.rem_euclid(1000) != 0)
    }

    /// Whether the amount is a whole number of units, the kubelet's test for
    /// exclusive CPUs (`Value()*1000 == MilliValue()`).
    pub fn is_whole(self) -> bool {
        self.milli.rem_euclid(1000) == 0
    }

    /// Whether the amount is zero.
    pub const fn is_zero(self) -> bool {
        self.milli == 0
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_add(rhs.milli),
        }
    }
}

impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_sub(rhs.milli),
        }
    }
}

impl std::iter::Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::ZERO, |a, b| a + b)
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_whole() {
            write!(f, "{}", self.milli / 1000)
        } else {
            write!(f, "{}m", self.milli)
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rounds_up_like_kubernetes() {
        assert_eq!(Quantity::from_milli(3500).value(), 4);
        assert_eq!(Quantity::from_milli(3000).value(), 3);
        assert_eq!(Quantity::from_milli(1).value(), 1);
        assert!(!Quantity::from_milli(3500).is_whole());
        assert!(Quantity::from_units(4).is_whole());
    }
}

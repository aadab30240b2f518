//! [`CpuSet`]: a set of logical CPU ids with the kubelet's list syntax
//! (`"0-3,8,10-11"`), as used in `cpu_manager_state`, `reservedSystemCPUs`
//! and sysfs `cpulist` files.

use std::fmt;

use fixedbitset::FixedBitSet;

/// A set of logical CPU ids.
///
/// Iteration is always in ascending id order, which is the order the kubelet's
/// `cpuset.CPUSet.List()` returns and on which its allocator's tie-breaks rely.
#[derive(Clone, Default)]
pub struct CpuSet {
    bits: FixedBitSet,
}

/// Why a CPU list string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetParseError {
    /// A piece between commas is not a number or a `low-high` range.
    #[error("invalid CPU list {input:?}: {piece:?} is not a CPU id or a range low-high")]
    BadPiece { input: String, piece: String },
    /// A range whose end is below its start.
    #[error("invalid CPU list {input:?}: range {piece:?} ends before it starts")]
    ReversedRange { input: String, piece: String },
    /// An id beyond what any machine has (guards against absurd allocations).
    #[error("invalid CPU list {input:?}: CPU id {id} is larger than {max}, the largest a Linux machine can have", max = CpuSet::MAX_CPU_ID)]
    TooLarge { input: String, id: u64 },
}

impl CpuSet {
    /// The largest CPU id a machine may have; every reader rejects larger
    /// ids in its input (naming the file and field) rather than allocating
    /// a bit set as large as the id.
    ///
    /// The bound is the kernel's: the largest `NR_CPUS` any Linux
    /// architecture can be built with is 8,192 (x86-64 `MAXSMP`, powerpc),
    /// and CPU ids are below `NR_CPUS`. Twice that leaves room for the next
    /// raise while a set stays at most 2 KiB.
    pub const MAX_CPU_ID: u32 = 16_383;

    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a CPU id.
    pub fn insert(&mut self, cpu: u32) {
        let index = cpu as usize;
        if index >= self.bits.len() {
            self.bits.grow(index + 1);
        }
        self.bits.insert(index);
    }

    /// Adds the CPU ids `low..=high`, a word at a time.
    pub fn insert_range(&mut self, low: u32, high: u32) {
        if high < low {
            return;
        }
        let end = high as usize + 1;
        if end > self.bits.len() {
            self.bits.grow(end);
        }
        self.bits.insert_range(low as usize..end);
    }

    /// Removes a CPU id (no-op when absent).
    pub fn remove(&mut self, cpu: u32) {
        let index = cpu as usize;
        if index < self.bits.len() {
            self.bits.set(index, false);
        }
    }

    /// Whether the set holds `cpu`.
    pub fn contains(&self, cpu: u32) -> bool {
        self.bits.contains(cpu as usize)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.bits.count_ones(..)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.is_clear()
    }

    /// CPU ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        // Ids are inserted as u32, so every index fits back into one.
        self.bits.ones().map(|i| i as u32)
    }

    /// CPU ids in ascending order, collected.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let mut bits = self.bits.clone();
        if other.bits.len() > bits.len() {
            bits.grow(other.bits.len());
        }
        bits.union_with(&other.bits);
        CpuSet { bits }
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut bits = self.bits.clone();
        bits.intersect_with(&other.bits);
        CpuSet { bits }
    }

    /// `self \ other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut bits = self.bits.clone();
        bits.difference_with(&other.bits);
        CpuSet { bits }
    }

    /// `self ∪= other`, without building a new set.
    pub fn union_with(&mut self, other: &CpuSet) {
        if other.bits.len() > self.bits.len() {
            self.bits.grow(other.bits.len());
        }
        self.bits.union_with(&other.bits);
    }

    /// `self \= other`, without building a new set.
    pub fn difference_with(&mut self, other: &CpuSet) {
        self.bits.difference_with(&other.bits);
    }

    /// Number of CPUs in `self ∩ other`, without building it.
    pub fn intersection_len(&self, other: &CpuSet) -> usize {
        self.bits.intersection_count(&other.bits)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.iter().all(|cpu| other.contains(cpu))
    }

    /// Parses the kubelet / Linux list syntax: `""`, `"3"`, `"0-3,8,10-11"`.
    /// White space around pieces is tolerated, as the kernel's own files end
    /// with a newline.
    ///
    /// # Errors
    /// [`CpuSetParseError`] naming the offending piece.
    pub fn parse(input: &str) -> Result<CpuSet, CpuSetParseError> {
        let mut set = CpuSet::new();
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        let bad = |piece: &str| CpuSetParseError::BadPiece {
            input: input.to_string(),
            piece: piece.to_string(),
        };
        let id = |text: &str, piece: &str| -> Result<u32, CpuSetParseError> {
            let text = text.trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(piece));
            }
            let value: u64 = text.parse().map_err(|_| bad(piece))?;
            if value > u64::from(CpuSet::MAX_CPU_ID) {
                return Err(CpuSetParseError::TooLarge {
                    input: input.to_string(),
                    id: value,
                });
            }
            // Bounded by MAX_CPU_ID just above.
            Ok(value as u32)
        };
        for piece in trimmed.split(',') {
            match piece.split_once('-') {
                None => set.insert(id(piece, piece)?),
                Some((low, high)) => {
                    let (low, high) = (id(low, piece)?, id(high, piece)?);
                    if high < low {
                        return Err(CpuSetParseError::ReversedRange {
                            input: input.to_string(),
                            piece: piece.to_string(),
                        });
                    }
                    set.insert_range(low, high);
                }
            }
        }
        Ok(set)
    }
}

impl PartialEq for CpuSet {
    fn eq(&self, other: &Self) -> bool {
        // FixedBitSet compares lengths too; two sets are equal by members.
        self.iter().eq(other.iter())
    }
}

impl Eq for CpuSet {}

impl std::hash::Hash for CpuSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for cpu in self.iter() {
            cpu.hash(state);
        }
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = CpuSet::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

/// On the wire a set is the kubelet's list syntax (`"0-3,8"`), as in its
/// checkpoints and the PodResources API; reading one refuses a list that
/// does not parse, naming it.
#[cfg(feature = "serde")]
impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        CpuSet::parse(&text).map_err(|e| serde::de::Error::custom(format!("CPU list {text:?}: {e}")))
    }
}

impl fmt::Display for CpuSet {
    /// The kubelet's list form: runs of consecutive ids as `low-high`
    /// (also for runs of two), singles as the id, joined by commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = self.iter().peekable();
        let mut first = true;
        while let Some(low) = ids.next() {
            let mut high = low;
            while ids.peek() == Some(&(high + 1)) {
                high += 1;
                ids.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if low == high {
                write!(f, "{low}")?;
            } else {
                write!(f, "{low}-{high}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn list_form_matches_the_kubelet() {
        for (ids, text) in [
            (vec![], ""),
            (vec![3], "3"),
            (vec![1, 2, 9, 10], "1-2,9-10"),
            (vec![0, 5, 7, 8, 13, 15], "0,5,7-8,13,15"),
            (vec![0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
        ] {
            let set: CpuSet = ids.iter().copied().collect();
            assert_eq!(set.to_string(), text);
            assert_eq!(CpuSet::parse(text).unwrap(), set);
        }
    }

    #[test]
    fn malformed_lists_are_rejected_with_the_piece() {
        let err = CpuSet::parse("0-3,x").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid CPU list "0-3,x": "x" is not a CPU id or a range low-high"#
        );
        assert!(matches!(
            CpuSet::parse("5-2"),
            Err(CpuSetParseError::ReversedRange { .. })
        ));
        assert!(matches!(CpuSet::parse("1,,2"), Err(CpuSetParseError::BadPiece { .. })));
        assert!(matches!(CpuSet::parse("-1"), Err(CpuSetParseError::BadPiece { .. })));
        assert!(matches!(
            CpuSet::parse("99999999999"),
            Err(CpuSetParseError::TooLarge { .. })
        ));
    }

    #[test]
    fn sysfs_trailing_newline_is_accepted() {
        assert_eq!(CpuSet::parse("0-1\n").unwrap().to_vec(), vec![0, 1]);
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(ids in proptest::collection::btree_set(0u32..300, 0..40)) {
            let set: CpuSet = ids.iter().copied().collect();
            prop_assert_eq!(CpuSet::parse(&set.to_string()).unwrap(), set.clone());
            prop_assert_eq!(set.to_vec(), ids.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn set_algebra_agrees_with_btreeset(
            a in proptest::collection::btree_set(0u32..200, 0..30),
            b in proptest::collection::btree_set(0u32..200, 0..30),
        ) {
            let (sa, sb): (CpuSet, CpuSet) = (a.iter().copied().collect(), b.iter().copied().collect());
            prop_assert_eq!(sa.union(&sb).to_vec(), a.union(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.intersection(&sb).to_vec(), a.intersection(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.difference(&sb).to_vec(), a.difference(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.intersection_len(&sb), a.intersection(&b).count());
            prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
            let mut in_place = sa.clone();
            in_place.union_with(&sb);
            prop_assert_eq!(in_place, sa.union(&sb));
            let mut in_place = sa.clone();
            in_place.difference_with(&sb);
            prop_assert_eq!(in_place, sa.difference(&sb));
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn on_the_wire_a_set_is_its_list() {
        let set = CpuSet::parse("0-3,8").unwrap();
        assert_eq!(serde_json::to_string(&set).unwrap(), r#""0-3,8""#);
        assert_eq!(serde_json::from_str::<CpuSet>(r#""0-3,8""#).unwrap(), set);
        let error = serde_json::from_str::<CpuSet>(r#""3-1""#).unwrap_err().to_string();
        assert!(error.starts_with(r#"CPU list "3-1": "#), "{error}");
    }
}

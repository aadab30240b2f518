//! [`CpuSet`]: a set of logical CPU ids with the kubelet's list syntax
//! (`"0-3,8,10-11"`), as used in `cpu_manager_state`, `reservedSystemCPUs`
//! and sysfs `cpulist` files.

use std::fmt;

/// How many 64-bit words of a set live inline: CPUs 0 to 255, which covers
/// most machines, need no heap allocation (an admission builds and drops
/// dozens of sets); higher ids spill into a vector.
const INLINE_WORDS: usize = 4;

/// A set of logical CPU ids.
///
/// Iteration is always in ascending id order, which is the order the kubelet's
/// `cpuset.CPUSet.List()` returns and on which its allocator's tie-breaks rely.
#[derive(Clone, Default)]
pub struct CpuSet {
    /// One bit per CPU id below `64 * INLINE_WORDS`.
    low: [u64; INLINE_WORDS],
    /// One bit per CPU id from `64 * INLINE_WORDS` up; empty (unallocated)
    /// while the set holds no such id. May end in zero words.
    high: Vec<u64>,
}

/// The set bits of one word. Builds for the baseline x86-64 have no
/// `popcnt` instruction, so `count_ones` is a dozen instructions; most
/// words of a machine's sets are empty, and those are skipped.
fn ones(word: u64) -> u32 {
    if word == 0 { 0 } else { word.count_ones() }
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

/// Ascending CPU ids of a [`CpuSet`].
struct Ones<'a> {
    set: &'a CpuSet,
    /// Index of the word `current` was read from.
    index: usize,
    /// The bits of that word not yet returned.
    current: u64,
}

impl Iterator for Ones<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while self.current == 0 {
            self.index += 1;
            if self.index >= self.set.word_count() {
                return None;
            }
            self.current = self.set.word(self.index);
        }
        let bit = self.current.trailing_zeros();
        self.current &= self.current - 1;
        // Ids are inserted as u32, so every index fits back into one.
        Some((self.index * 64) as u32 + bit)
    }
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

    /// Words held (inline ones always count).
    fn word_count(&self) -> usize {
        INLINE_WORDS + self.high.len()
    }

    /// Word `index`, zero beyond what is held.
    fn word(&self, index: usize) -> u64 {
        match index.checked_sub(INLINE_WORDS) {
            None => self.low[index],
            Some(i) => self.high.get(i).copied().unwrap_or(0),
        }
    }

    /// Word `index` for writing, growing the spilled part as needed.
    fn word_mut(&mut self, index: usize) -> &mut u64 {
        match index.checked_sub(INLINE_WORDS) {
            None => &mut self.low[index],
            Some(i) => {
                if i >= self.high.len() {
                    self.high.resize(i + 1, 0);
                }
                &mut self.high[i]
            }
        }
    }

    /// Adds a CPU id.
    pub fn insert(&mut self, cpu: u32) {
        let index = cpu as usize;
        *self.word_mut(index / 64) |= 1 << (index % 64);
    }

    /// Adds the CPU ids `low..=high`, a word at a time.
    pub fn insert_range(&mut self, low: u32, high: u32) {
        if high < low {
            return;
        }
        let (low, high) = (low as usize, high as usize);
        for index in low / 64..=high / 64 {
            let from = if index == low / 64 { low % 64 } else { 0 };
            let to = if index == high / 64 { high % 64 } else { 63 };
            // Bits from..=to set.
            let mask = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            *self.word_mut(index) |= mask;
        }
    }

    /// Removes a CPU id (no-op when absent).
    pub fn remove(&mut self, cpu: u32) {
        let index = cpu as usize;
        if index / 64 < self.word_count() {
            *self.word_mut(index / 64) &= !(1 << (index % 64));
        }
    }

    /// Whether the set holds `cpu`.
    pub fn contains(&self, cpu: u32) -> bool {
        let index = cpu as usize;
        self.word(index / 64) & (1 << (index % 64)) != 0
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        let low: u32 = self.low.iter().map(|&w| ones(w)).sum();
        let high: u32 = self.high.iter().map(|&w| ones(w)).sum();
        (low + high) as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.low.iter().chain(&self.high).all(|&w| w == 0)
    }

    /// CPU ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        Ones {
            set: self,
            index: 0,
            current: self.low[0],
        }
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
        let mut set = self.clone();
        set.union_with(other);
        set
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut low = [0; INLINE_WORDS];
        for (i, word) in low.iter_mut().enumerate() {
            *word = self.low[i] & other.low[i];
        }
        let high = self.high.iter().zip(&other.high).map(|(a, b)| a & b).collect();
        CpuSet { low, high }
    }

    /// `self \ other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut set = self.clone();
        set.difference_with(other);
        set
    }

    /// `self ∪= other`, without building a new set.
    pub fn union_with(&mut self, other: &CpuSet) {
        for (a, b) in self.low.iter_mut().zip(&other.low) {
            *a |= b;
        }
        if other.high.len() > self.high.len() {
            self.high.resize(other.high.len(), 0);
        }
        for (a, b) in self.high.iter_mut().zip(&other.high) {
            *a |= b;
        }
    }

    /// `self \= other`, without building a new set.
    pub fn difference_with(&mut self, other: &CpuSet) {
        for (a, b) in self.low.iter_mut().zip(&other.low) {
            *a &= !b;
        }
        for (a, b) in self.high.iter_mut().zip(&other.high) {
            *a &= !b;
        }
    }

    /// Number of CPUs in `self ∩ other`, without building it.
    pub fn intersection_len(&self, other: &CpuSet) -> usize {
        let low: u32 = self.low.iter().zip(&other.low).map(|(a, b)| ones(a & b)).sum();
        let high: u32 = self.high.iter().zip(&other.high).map(|(a, b)| ones(a & b)).sum();
        (low + high) as usize
    }

    /// Whether `self` and `other` share a CPU (stops at the first shared
    /// word; counts nothing).
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.low.iter().zip(&other.low).any(|(a, b)| a & b != 0)
            || self.high.iter().zip(&other.high).any(|(a, b)| a & b != 0)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        (0..self.word_count()).all(|i| self.word(i) & !other.word(i) == 0)
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
        // Equal by members: missing words and trailing zero words are alike.
        (0..self.word_count().max(other.word_count())).all(|i| self.word(i) == other.word(i))
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
            a in proptest::collection::btree_set(0u32..600, 0..30),
            b in proptest::collection::btree_set(0u32..600, 0..30),
        ) {
            let (sa, sb): (CpuSet, CpuSet) = (a.iter().copied().collect(), b.iter().copied().collect());
            prop_assert_eq!(sa.union(&sb).to_vec(), a.union(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.intersection(&sb).to_vec(), a.intersection(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.difference(&sb).to_vec(), a.difference(&b).copied().collect::<Vec<_>>());
            prop_assert_eq!(sa.intersection_len(&sb), a.intersection(&b).count());
            prop_assert_eq!(sa.intersects(&sb), !a.is_disjoint(&b));
            prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
            let mut in_place = sa.clone();
            in_place.union_with(&sb);
            prop_assert_eq!(in_place, sa.union(&sb));
            let mut in_place = sa.clone();
            in_place.difference_with(&sb);
            prop_assert_eq!(in_place, sa.difference(&sb));
            prop_assert_eq!(sa == sb, a == b);
            prop_assert_eq!(sa.len(), a.len());
            prop_assert_eq!(sa.is_empty(), a.is_empty());
            for cpu in [0, 63, 64, 255, 256, 300, 599, 700] {
                prop_assert_eq!(sa.contains(cpu), a.contains(&cpu));
            }
        }

        #[test]
        fn ranges_and_removals_agree_with_btreeset(
            low in 0u32..700,
            width in 0u32..300,
            removed in proptest::collection::vec(0u32..1100, 0..20),
        ) {
            let mut set = CpuSet::new();
            set.insert_range(low, low + width);
            let mut expected: std::collections::BTreeSet<u32> = (low..=low + width).collect();
            prop_assert_eq!(set.to_vec(), expected.iter().copied().collect::<Vec<_>>());
            for cpu in removed {
                set.remove(cpu);
                expected.remove(&cpu);
            }
            prop_assert_eq!(set.to_vec(), expected.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(set.first(), expected.first().copied());
            // Removing every high id leaves a set equal to its inline part.
            let low_only: CpuSet = expected.iter().copied().filter(|&c| c < 256).collect();
            let mut trimmed = set.clone();
            for cpu in 256..1100 {
                trimmed.remove(cpu);
            }
            prop_assert_eq!(trimmed, low_only);
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

//! [`NumaMask`]: a set of NUMA node ids, the affinity of a topology hint.

use std::fmt;

/// How many NUMA nodes a mask can name (ids `0..MAX_NUMA_NODES`).
pub const MAX_NUMA_NODES: usize = 64;

/// A set of NUMA node ids `0..64`, stored as a bit mask.
///
/// Ordering follows the kubelet's `bitmask.BitMask`:
/// - [`NumaMask::is_narrower_than`]: fewer nodes first; with equal counts the
///   mask whose integer value is smaller ("more lower-numbered bits set").
/// - [`Ord`] on `NumaMask` is exactly that narrowness order, so `min()` over
///   masks yields the kubelet's `Narrowest` choice.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NumaMask(u64);

impl NumaMask {
    /// The empty mask.
    pub const EMPTY: NumaMask = NumaMask(0);

    /// A mask from its raw bits (bit `i` = NUMA node `i`).
    pub const fn from_bits(bits: u64) -> Self {
        NumaMask(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// A mask holding exactly `node`.
    ///
    /// # Panics
    /// If `node >= 64`; callers validate ids at the edge (the machine model
    /// refuses NUMA ids beyond [`MAX_NUMA_NODES`]).
    pub fn single(node: usize) -> Self {
        assert!(node < MAX_NUMA_NODES, "NUMA id {node} out of range");
        NumaMask(1 << node)
    }

    /// A mask of the given node ids.
    pub fn from_nodes<I: IntoIterator<Item = usize>>(nodes: I) -> Self {
        nodes.into_iter().fold(NumaMask::EMPTY, |m, n| m | NumaMask::single(n))
    }

    /// A mask of the given node ids that fit one (below 64), the others
    /// dropped. Only for what a machine that does not
    /// [fit masks](crate::Machine::fits_numa_masks) keeps at start for
    /// hints it never computes.
    pub fn from_maskable_nodes<I: IntoIterator<Item = usize>>(nodes: I) -> Self {
        NumaMask::from_nodes(nodes.into_iter().filter(|&n| n < MAX_NUMA_NODES))
    }

    /// Number of nodes in the mask.
    pub const fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the mask is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `node` is in the mask.
    pub const fn contains(self, node: usize) -> bool {
        node < MAX_NUMA_NODES && self.0 & (1 << node) != 0
    }

    /// Whether any node of `other` is in the mask (kubelet `AnySet`).
    pub const fn intersects(self, other: NumaMask) -> bool {
        self.0 & other.0 != 0
    }

    /// The nodes of `self` that are not in `other`.
    pub const fn without(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 & !other.0)
    }

    /// Whether every node of `self` is in `other`.
    pub const fn is_subset_of(self, other: NumaMask) -> bool {
        self.0 & !other.0 == 0
    }

    /// Node ids in ascending order.
    pub fn nodes(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let node = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            Some(node)
        })
    }

    /// The kubelet's `IsNarrowerThan`: fewer nodes, or as many nodes and a
    /// smaller integer value.
    pub fn is_narrower_than(self, other: NumaMask) -> bool {
        if self.count() == other.count() {
            self.0 < other.0
        } else {
            self.count() < other.count()
        }
    }

    /// Every non-empty sub-mask of `universe`, in the kubelet's
    /// `IterateBitMasks` order: by size, and within a size lexicographically
    /// by the ascending node ids.
    pub fn subsets_by_size(universe: NumaMask) -> impl Iterator<Item = NumaMask> {
        let nodes: Vec<usize> = universe.nodes().collect();
        (1..=nodes.len()).flat_map(move |k| Combinations::new(nodes.clone(), k))
    }
}

impl NumaMask {
    /// Every `size`-node sub-mask of `universe`, in increasing integer value
    /// (so, for one size, from narrowest to widest under the kubelet's
    /// order). Lazy: the first few of C(64, k) masks cost only a few steps.
    pub fn subsets_of_size(universe: NumaMask, size: u32) -> impl Iterator<Item = NumaMask> {
        // The node ids by position, kept inline: no allocation per call.
        let mut nodes = [0u8; MAX_NUMA_NODES];
        for (position, node) in universe.nodes().enumerate() {
            nodes[position] = node as u8;
        }
        let n = universe.count();
        // Gosper's hack over positions in `nodes`: successive integers with
        // `size` bits set, in increasing order. Positions map to node ids
        // monotonically, so the masks come out in increasing value too.
        let mut next: Option<u128> = (size >= 1 && size <= n).then(|| (1u128 << size) - 1);
        std::iter::from_fn(move || {
            let positions = next?;
            let lowest = positions & positions.wrapping_neg();
            let ripple = positions + lowest;
            let successor = (((ripple ^ positions) >> 2) / lowest) | ripple;
            next = (successor < (1u128 << n)).then_some(successor);
            let mut bits = 0u64;
            let mut rest = positions;
            while rest != 0 {
                let position = rest.trailing_zeros() as usize;
                bits |= 1 << nodes[position];
                rest &= rest - 1;
            }
            Some(NumaMask(bits))
        })
    }
}

/// k-subsets of a node list in lexicographic order of positions.
struct Combinations {
    nodes: Vec<usize>,
    positions: Vec<usize>,
    done: bool,
}

impl Combinations {
    fn new(nodes: Vec<usize>, k: usize) -> Self {
        let done = k == 0 || k > nodes.len();
        Combinations {
            nodes,
            positions: (0..k).collect(),
            done,
        }
    }
}

impl Iterator for Combinations {
    type Item = NumaMask;

    fn next(&mut self) -> Option<NumaMask> {
        if self.done {
            return None;
        }
        let mask = NumaMask::from_nodes(self.positions.iter().map(|&p| self.nodes[p]));
        let (n, k) = (self.nodes.len(), self.positions.len());
        // Advance to the next combination: bump the rightmost position that
        // still has room, then reset the ones after it.
        match (0..k).rev().find(|&i| self.positions[i] < n - k + i) {
            None => self.done = true,
            Some(i) => {
                self.positions[i] += 1;
                for j in i + 1..k {
                    self.positions[j] = self.positions[j - 1] + 1;
                }
            }
        }
        Some(mask)
    }
}

impl std::ops::BitAnd for NumaMask {
    type Output = NumaMask;
    fn bitand(self, rhs: NumaMask) -> NumaMask {
        NumaMask(self.0 & rhs.0)
    }
}

impl std::ops::BitOr for NumaMask {
    type Output = NumaMask;
    fn bitor(self, rhs: NumaMask) -> NumaMask {
        NumaMask(self.0 | rhs.0)
    }
}

impl PartialOrd for NumaMask {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NumaMask {
    /// Narrowness: node count first, then integer value (the kubelet's
    /// tie-break "more lower-numbered bits set").
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.count().cmp(&other.count()).then_with(|| self.0.cmp(&other.0))
    }
}

impl fmt::Debug for NumaMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for NumaMask {
    /// `{0,2}`-style, matching how people write NUMA sets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, node) in self.nodes().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{node}")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_follow_iterate_bit_masks_order() {
        let masks: Vec<String> = NumaMask::subsets_by_size(NumaMask::from_nodes([0, 1, 3]))
            .map(|m| m.to_string())
            .collect();
        assert_eq!(masks, ["{0}", "{1}", "{3}", "{0,1}", "{0,3}", "{1,3}", "{0,1,3}"]);
        assert_eq!(NumaMask::subsets_by_size(NumaMask::EMPTY).count(), 0);
        assert_eq!(NumaMask::subsets_by_size(NumaMask::from_bits(0xff)).count(), 255);
    }

    #[test]
    fn subsets_of_one_size_come_in_value_order() {
        let universe = NumaMask::from_nodes([1, 2, 4, 7]);
        let masks: Vec<u64> = NumaMask::subsets_of_size(universe, 2).map(NumaMask::bits).collect();
        let mut sorted = masks.clone();
        sorted.sort_unstable();
        assert_eq!(masks, sorted);
        assert_eq!(masks.len(), 6);
        assert_eq!(NumaMask::subsets_of_size(NumaMask::from_bits(u64::MAX), 64).count(), 1);
        assert_eq!(NumaMask::subsets_of_size(NumaMask::from_bits(u64::MAX), 1).count(), 64);
        assert_eq!(NumaMask::subsets_of_size(universe, 0).count(), 0);
        assert_eq!(NumaMask::subsets_of_size(universe, 5).count(), 0);
        let all_sizes: usize = (1..=4).map(|k| NumaMask::subsets_of_size(universe, k).count()).sum();
        assert_eq!(all_sizes, NumaMask::subsets_by_size(universe).count());
    }

    #[test]
    fn narrowness_is_count_then_value() {
        let m = |nodes: &[usize]| NumaMask::from_nodes(nodes.iter().copied());
        assert!(m(&[1]).is_narrower_than(m(&[0, 1])));
        assert!(m(&[0, 1]).is_narrower_than(m(&[0, 2])));
        assert!(!m(&[0, 2]).is_narrower_than(m(&[0, 1])));
        assert!(m(&[0, 1]) < m(&[0, 2]));
        assert_eq!(m(&[0, 63]).nodes().collect::<Vec<_>>(), vec![0, 63]);
    }
}

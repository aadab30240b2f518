//! End-of-run capacity arithmetic, pure and in integers (millicores,
//! bytes, device counts), so that every sum in the report adds up exactly.
//!
//! A node's free amount of CPU or memory is seen twice: per NUMA zone (the
//! NRT `available`: exclusive CPUs, the memory manager's free memory), and
//! node-wide by the scheduler (allocatable minus the pods' requests). The
//! two differ when pods use the resource without a zone holding it (CPUs of
//! the shared pool, memory the memory manager does not pin). The node's
//! free amount is the smaller of the two ([`Free::total`]), and it is
//! apportioned to the zones in proportion to their own free amounts
//! ([`Free::zones`]), so the zones add up to the total.
//!
//! Fragmentation is defined here and only here ([`FragmentationSum`]).
//!
//! Owns: those numbers. Must not touch: engines, classes, reports.

/// A node's free amount of one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Free {
    /// Per zone, in the zones' order; sums to [`Free::total`].
    pub zones: Vec<u64>,
    /// `min(Σ zones' own free amounts, node-wide free amount)`.
    pub total: u64,
    /// The most one zone can give one pod: the largest zone's own free
    /// amount, capped by the node-wide free amount.
    pub largest_block: u64,
}

impl Free {
    /// From the zones' own free amounts and the node-wide free amount.
    pub fn new(zone_free: &[u64], node_free: u64) -> Free {
        let sum: u128 = zone_free.iter().map(|&z| u128::from(z)).sum();
        let total = u64::try_from(sum.min(u128::from(node_free))).unwrap_or(node_free);
        let largest_block = zone_free.iter().copied().max().unwrap_or(0).min(total);
        Free {
            zones: apportion(zone_free, total),
            total,
            largest_block,
        }
    }
}

/// Splits `total` (at most `Σ weights`) over the zones in proportion to
/// `weights`, by largest remainder (ties to the earlier zone): the parts
/// add up to `total` exactly and none exceeds its weight.
pub(crate) fn apportion(weights: &[u64], total: u64) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let total = u128::from(total).min(sum);
    let mut parts: Vec<u128> = Vec::with_capacity(weights.len());
    let mut remainders: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let product = u128::from(w) * total;
        parts.push(product / sum);
        remainders.push((product % sum, i));
    }
    let given: u128 = parts.iter().sum();
    let mut left = total - given;
    // Largest remainder first; equal remainders in zone order.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(remainder, i) in &remainders {
        if left == 0 {
            break;
        }
        if remainder > 0 {
            parts[i] += 1;
            left -= 1;
        }
    }
    parts
        .into_iter()
        .map(|p| u64::try_from(p).unwrap_or(u64::MAX))
        .collect()
}

/// Fleet-wide fragmentation of one resource.
///
/// **Definition.** For each node, its *potential block* is the most one
/// NUMA zone could give a pod if the node's free amount sat in as few zones
/// as possible: `min(free total, largest block of an empty node of its
/// shape)`. Its *lost* amount is the potential block minus its actual
/// [`Free::largest_block`]. Fragmentation is `Σ lost / Σ potential` over
/// the fleet: the share by which the largest free blocks fall short of
/// what the same free capacity, packed, would offer. It is 0 on empty
/// nodes (so when nothing is placed) and on nodes whose free capacity sits
/// in one zone; 1 would mean no zone has anything left although the
/// nodes do. With no free capacity at all there is nothing to fragment:
/// 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FragmentationSum {
    lost: u128,
    potential: u128,
}

impl FragmentationSum {
    /// Adds `members` nodes whose free amount is `free`, of a shape whose
    /// empty node's largest block is `empty_block`.
    pub fn add(&mut self, free: &Free, empty_block: u64, members: u64) {
        let potential = free.total.min(empty_block);
        let lost = potential.saturating_sub(free.largest_block);
        self.potential += u128::from(potential) * u128::from(members);
        self.lost += u128::from(lost) * u128::from(members);
    }

    /// `Σ lost / Σ potential`, 0 when there is no free capacity.
    pub fn ratio(&self) -> f64 {
        if self.potential == 0 {
            0.0
        } else {
            self.lost as f64 / self.potential as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportioned_parts_add_up_and_follow_the_weights() {
        assert_eq!(apportion(&[8, 8, 8, 8], 20), [5, 5, 5, 5]);
        assert_eq!(apportion(&[3, 3, 3], 4), [2, 1, 1]);
        assert_eq!(apportion(&[10, 0, 30], 20), [5, 0, 15]);
        assert_eq!(apportion(&[0, 0], 7), [0, 0]);
        assert_eq!(apportion(&[5, 6], 100), [5, 6], "never more than the weights");
        assert_eq!(apportion(&[], 3), Vec::<u64>::new());
        let weights = [u64::MAX, u64::MAX / 3, 7];
        let parts = apportion(&weights, u64::MAX);
        assert_eq!(parts.iter().map(|&p| u128::from(p)).sum::<u128>(), u128::from(u64::MAX));
        assert!(parts.iter().zip(weights).all(|(&p, w)| p <= w));
    }

    #[test]
    fn free_is_capped_by_the_node_and_its_zones_add_up() {
        let free = Free::new(&[8000, 6000, 2000], 10_000);
        assert_eq!(free.total, 10_000);
        assert_eq!(free.zones.iter().sum::<u64>(), 10_000);
        assert_eq!(free.largest_block, 8000);
        let free = Free::new(&[8000, 6000], 3000);
        assert_eq!(free.largest_block, 3000, "no pod gets more than the node has");
        let free = Free::new(&[1000, 2000], 50_000);
        assert_eq!((free.total, free.zones.clone()), (3000, vec![1000, 2000]));
    }

    #[test]
    fn fragmentation_is_zero_on_empty_and_on_packed_nodes() {
        // An empty node of four 8-CPU zones: its own largest block is 8.
        let empty = Free::new(&[8, 8, 8, 8], 32);
        let mut sum = FragmentationSum::default();
        sum.add(&empty, empty.largest_block, 10);
        assert_eq!(sum.ratio(), 0.0);
        // Free capacity packed into one zone: nothing lost.
        sum.add(&Free::new(&[8, 0, 0, 0], 32), 8, 3);
        assert_eq!(sum.ratio(), 0.0);
        // No free capacity at all: nothing to fragment.
        let mut full = FragmentationSum::default();
        full.add(&Free::new(&[0, 0], 0), 8, 5);
        assert_eq!(full.ratio(), 0.0);
    }

    #[test]
    fn fragmentation_counts_what_scattered_free_capacity_loses() {
        // 8 CPUs free as 2 + 2 + 2 + 2: packed they would be one 8-CPU block.
        let mut sum = FragmentationSum::default();
        sum.add(&Free::new(&[2, 2, 2, 2], 32), 8, 1);
        assert!((sum.ratio() - 0.75).abs() < 1e-12, "{}", sum.ratio());
        // Add an empty node (potential 8, lost 0): (6 + 0) / (8 + 8).
        sum.add(&Free::new(&[8, 8, 8, 8], 32), 8, 1);
        assert!((sum.ratio() - 6.0 / 16.0).abs() < 1e-12, "{}", sum.ratio());
    }
}

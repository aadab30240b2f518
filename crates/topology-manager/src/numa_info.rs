//! [`NumaInfo`]: the NUMA nodes the topology manager knows (every node of
//! the machine, CPU-less ones included) and, with `prefer-closest-numa-nodes`,
//! their distances. It also owns the order in which two candidate affinities
//! are compared ([`NumaInfo::better`]).

use std::cmp::Ordering;

use topoalign_model::{Machine, NumaMask};

/// NUMA nodes and distances as the topology manager sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaInfo {
    nodes: NumaMask,
    /// Row per NUMA id (only filled when distances are used).
    distances: Vec<Vec<u64>>,
}

/// The machine does not report distances although
/// `prefer-closest-numa-nodes` needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingDistances;

impl NumaInfo {
    /// The machine's NUMA nodes, without distances.
    pub fn new(machine: &Machine) -> NumaInfo {
        NumaInfo {
            nodes: machine.numa_mask(),
            distances: Vec::new(),
        }
    }

    /// The machine's NUMA nodes with their distances, for
    /// `prefer-closest-numa-nodes`.
    ///
    /// # Errors
    /// [`MissingDistances`] when a node has no distance row (the kubelet
    /// refuses to start then).
    pub fn with_distances(machine: &Machine) -> Result<NumaInfo, MissingDistances> {
        let max_id = machine.numa_nodes().last().map_or(0, |n| n.id);
        let mut distances = vec![Vec::new(); max_id + 1];
        for node in machine.numa_nodes() {
            distances[node.id] = node.distances.clone().ok_or(MissingDistances)?;
        }
        Ok(NumaInfo {
            nodes: machine.numa_mask(),
            distances,
        })
    }

    /// Every NUMA node (the kubelet's default affinity).
    pub fn all_nodes(&self) -> NumaMask {
        self.nodes
    }

    /// How many NUMA nodes the machine has.
    pub fn node_count(&self) -> usize {
        self.nodes.count() as usize
    }

    /// Sum of the distances between every ordered pair of nodes in `mask`
    /// (self-pairs included). For masks of equal size this orders them
    /// exactly as the kubelet's average distance does: the divisor is the
    /// same, and the sums are small integers, exact in a float.
    fn distance_sum(&self, mask: NumaMask) -> u64 {
        let row = |a: usize, b: usize| self.distances.get(a).and_then(|r| r.get(b)).copied().unwrap_or(0);
        mask.nodes().flat_map(|a| mask.nodes().map(move |b| row(a, b))).sum()
    }

    /// Orders two distinct candidate affinities, best first.
    ///
    /// Without `closest`: the kubelet's `Narrowest` — fewer nodes, then the
    /// smaller integer value. With `closest` (`prefer-closest-numa-nodes`,
    /// any policy but `single-numa-node`): fewer nodes, then the smaller
    /// average distance, then the smaller integer value. Both are total
    /// orders, which is what makes the merge independent of hint order.
    pub fn compare(&self, a: NumaMask, b: NumaMask, closest: bool) -> Ordering {
        let by_count = a.count().cmp(&b.count());
        let by_distance = || {
            if closest {
                self.distance_sum(a).cmp(&self.distance_sum(b))
            } else {
                Ordering::Equal
            }
        };
        by_count.then_with(by_distance).then_with(|| a.bits().cmp(&b.bits()))
    }

    /// The better of two affinities under [`NumaInfo::compare`].
    pub fn better(&self, a: NumaMask, b: NumaMask, closest: bool) -> NumaMask {
        if self.compare(b, a, closest) == Ordering::Less {
            b
        } else {
            a
        }
    }
}

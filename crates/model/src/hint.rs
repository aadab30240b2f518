//! Topology hints: what a hint provider (CPU, memory, device manager) says
//! about where a request could be placed.
//!
//! The kubelet encodes "no preference" and "cannot be satisfied" as a nil
//! versus an empty hint list; here they are variants of [`ResourceHints`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::NumaMask;

/// One placement option: a set of NUMA nodes, and whether the provider
/// prefers it. `affinity: None` is the kubelet's "any NUMA node" hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopologyHint {
    pub affinity: Option<NumaMask>,
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint for exactly `mask`.
    pub const fn new(mask: NumaMask, preferred: bool) -> Self {
        TopologyHint {
            affinity: Some(mask),
            preferred,
        }
    }

    /// The "any NUMA node" hint.
    pub const fn any(preferred: bool) -> Self {
        TopologyHint {
            affinity: None,
            preferred,
        }
    }
}

/// What one provider says about one resource.
///
/// Equality is by meaning: a rule equals the list it describes.
#[derive(Clone, Debug)]
pub enum ResourceHints {
    /// The provider does not care where this resource goes (kubelet: `nil`).
    NoPreference,
    /// No NUMA placement can satisfy the request (kubelet: empty list).
    Impossible,
    /// The placements that can satisfy the request, in the provider's order
    /// (the kubelet's `IterateBitMasks` order). Never empty.
    Hints(Vec<TopologyHint>),
    /// The same as `Hints`, described by the rule that produces the list
    /// instead of the list itself: on a machine with many NUMA nodes the
    /// kubelet's list has up to 2^n entries. [`HintRule::to_list`] gives the
    /// list. A rule is never empty (an empty one is `Impossible`).
    Rule(SharedHintRule),
}

impl PartialEq for ResourceHints {
    fn eq(&self, other: &Self) -> bool {
        use ResourceHints::{Hints, Impossible, NoPreference, Rule};
        match (self, other) {
            (NoPreference, NoPreference) | (Impossible, Impossible) => true,
            (Hints(a), Hints(b)) => a == b,
            (Rule(a), Rule(b)) => a == b,
            (Hints(list), Rule(rule)) | (Rule(rule), Hints(list)) => rule.to_list() == *list,
            _ => false,
        }
    }
}

impl Eq for ResourceHints {}

/// A provider's hint list given by its membership rule.
///
/// Masks are drawn from [`HintRule::universe`] (the kubelet enumerates every
/// non-empty sub-mask of it in `IterateBitMasks` order and keeps those the
/// rule accepts). Implementations live with the provider that owns the rule.
pub trait HintRule: fmt::Debug + Send + Sync {
    /// The NUMA nodes the masks are drawn from.
    fn universe(&self) -> NumaMask;

    /// `None` when `mask` (non-empty, within the universe) is not a hint;
    /// otherwise whether it is preferred.
    fn classify(&self, mask: NumaMask) -> Option<bool>;

    /// Whether some hint `a` satisfies `must ⊆ a ⊆ within`.
    fn has_hint_between(&self, must: NumaMask, within: NumaMask) -> bool;

    /// When every preferred hint has the same number of nodes, that number
    /// (merges then look at no other size). `None`: no such promise.
    fn preferred_count(&self) -> Option<u32> {
        None
    }

    /// The node count of the narrowest hint. The default searches sizes
    /// upward; rules with structure answer directly.
    fn narrowest_count(&self) -> Option<u32> {
        let universe = self.universe();
        (1..=universe.count())
            .find(|&size| NumaMask::subsets_of_size(universe, size).any(|m| self.classify(m).is_some()))
    }

    /// The single nodes of `within` that are preferred hints, as one mask
    /// (all the `single-numa-node` policy asks of a rule). The default asks
    /// [`HintRule::classify`] about each node; rules with per-node amounts
    /// answer from them.
    fn preferred_single_nodes(&self, within: NumaMask) -> NumaMask {
        classified_preferred_single_nodes(self, within)
    }

    /// The whole list, in the kubelet's order.
    fn to_list(&self) -> Vec<TopologyHint> {
        NumaMask::subsets_by_size(self.universe())
            .filter_map(|mask| self.classify(mask).map(|preferred| TopologyHint::new(mask, preferred)))
            .collect()
    }
}

/// [`HintRule::preferred_single_nodes`] by asking `classify` about each
/// node of `within` (none when the preferred hints all have another size).
pub fn classified_preferred_single_nodes<R: HintRule + ?Sized>(rule: &R, within: NumaMask) -> NumaMask {
    if rule.preferred_count().is_some_and(|count| count != 1) {
        return NumaMask::EMPTY;
    }
    NumaMask::subsets_of_size(rule.universe() & within, 1)
        .filter(|&node| rule.classify(node) == Some(true))
        .fold(NumaMask::EMPTY, |nodes, node| nodes | node)
}

/// `has_hint_between` for rules whose hints are upward closed within their
/// universe (every superset of a hint, inside the universe, is a hint): the
/// widest candidate decides.
pub fn upward_closed_has_hint_between(rule: &dyn HintRule, must: NumaMask, within: NumaMask) -> bool {
    let widest = within & rule.universe();
    !widest.is_empty() && must.is_subset_of(widest) && rule.classify(widest).is_some()
}

/// A shareable [`HintRule`]. Two rules are equal when they give the same
/// list.
#[derive(Clone)]
pub struct SharedHintRule(pub Arc<dyn HintRule>);

impl SharedHintRule {
    /// Wraps a rule.
    pub fn new(rule: impl HintRule + 'static) -> Self {
        SharedHintRule(Arc::new(rule))
    }
}

impl std::ops::Deref for SharedHintRule {
    type Target = dyn HintRule;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}

impl fmt::Debug for SharedHintRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for SharedHintRule {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.universe() == other.universe() && self.to_list() == other.to_list()
    }
}

impl Eq for SharedHintRule {}

impl ResourceHints {
    /// Wraps a hint list the way the kubelet reads one: an empty list means
    /// the request cannot be satisfied anywhere.
    pub fn from_list(hints: Vec<TopologyHint>) -> Self {
        if hints.is_empty() {
            ResourceHints::Impossible
        } else {
            ResourceHints::Hints(hints)
        }
    }

    /// Wraps a rule; a rule without any hint means the request cannot be
    /// satisfied anywhere.
    pub fn from_rule(rule: impl HintRule + 'static) -> Self {
        if rule.narrowest_count().is_none() {
            ResourceHints::Impossible
        } else {
            ResourceHints::Rule(SharedHintRule::new(rule))
        }
    }

    /// The explicit list, whatever the representation (`None` for
    /// `NoPreference` and `Impossible`).
    pub fn to_list(&self) -> Option<Vec<TopologyHint>> {
        match self {
            ResourceHints::NoPreference | ResourceHints::Impossible => None,
            ResourceHints::Hints(list) => Some(list.clone()),
            ResourceHints::Rule(rule) => Some(rule.to_list()),
        }
    }
}

/// Everything one provider says for one container (or pod): hints per
/// resource name. An empty map means the provider has no preference at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderHints {
    pub by_resource: BTreeMap<String, ResourceHints>,
}

impl ProviderHints {
    /// A provider with no preference for any resource.
    pub fn no_preference() -> Self {
        ProviderHints::default()
    }

    /// Hints for a single resource.
    pub fn single(resource: impl Into<String>, hints: ResourceHints) -> Self {
        let mut by_resource = BTreeMap::new();
        by_resource.insert(resource.into(), hints);
        ProviderHints { by_resource }
    }

    /// Whether the provider expressed no preference at all.
    pub fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }
}

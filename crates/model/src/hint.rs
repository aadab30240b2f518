//! Topology hints: what a hint provider (CPU, memory, device manager) says
//! about where a request could be placed.
//!
//! The kubelet encodes "no preference" and "cannot be satisfied" as a nil
//! versus an empty hint list; here they are variants of [`ResourceHints`].

use std::collections::BTreeMap;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceHints {
    /// The provider does not care where this resource goes (kubelet: `nil`).
    NoPreference,
    /// No NUMA placement can satisfy the request (kubelet: empty list).
    Impossible,
    /// The placements that can satisfy the request, in the provider's order
    /// (the kubelet's `IterateBitMasks` order). Never empty.
    Hints(Vec<TopologyHint>),
}

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

//! The follower's Prometheus metrics: whether the kubelet's state is known
//! now, how often and why it became unknown, and what the known state
//! holds (pods, per-NUMA allocated amounts).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use topoalign_agent::metrics::{NumaLabels, encode, gauge_value};
use topoalign_engine::Node;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

/// The registry and its metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    known: Gauge,
    unknown: Family<SourceLabels, Counter>,
    pods: Gauge,
    allocated: Family<NumaLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("topoalign_follow");
        let metrics = Metrics {
            known: Gauge::default(),
            unknown: Family::default(),
            pods: Gauge::default(),
            allocated: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "state_known",
            "1 when the kubelet's state is known (its sources agree), 0 when unknown",
            metrics.known.clone(),
        );
        registry.register(
            "state_unknown_transitions",
            "Times the state became unknown, by the source that disagreed",
            metrics.unknown.clone(),
        );
        registry.register("pods", "Pods the known state holds", metrics.pods.clone());
        registry.register(
            "numa_allocated",
            "Allocated amount per NUMA node and resource in the known state",
            metrics.allocated.clone(),
        );
        Metrics { registry, ..metrics }
    }
}

impl Metrics {
    pub(crate) fn known(&self, node: &Node) {
        self.known.set(1);
        self.pods.set(gauge_value(node.snapshot().pods.len()));
        for usage in node.numa_usage() {
            for (resource, amounts) in &usage.resources {
                let labels = NumaLabels::new(usage.numa, resource);
                self.allocated
                    .get_or_create(&labels)
                    .set(gauge_value(amounts.allocated.value()));
            }
        }
    }

    pub(crate) fn unknown(&self, source: &str) {
        self.known.set(0);
        self.unknown
            .get_or_create(&SourceLabels {
                source: source.to_owned(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

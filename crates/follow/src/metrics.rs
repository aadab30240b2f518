//! The follower's Prometheus metrics: whether the kubelet's state is known
//! now, how often and why it became unknown, and what the known state
//! holds (pods, per-NUMA allocated amounts); and the verifier's verdicts
//! ([`crate::verify`]): one `container_placement` series per container
//! checked, labelled with its verdict, the memory each spilled, the
//! containers whose processes were not found.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use topoalign_engine::Node;
use topoalign_observe::Verified;
use topoalign_usage::{NumaLabels, encode, gauge_value};
use topoalign_verify::{Finding, Subject};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlacementLabels {
    namespace: String,
    pod: String,
    container: String,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContainerLabels {
    namespace: String,
    pod: String,
    container: String,
}

/// The registry and its metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    known: Gauge,
    unknown: Family<SourceLabels, Counter>,
    pods: Gauge,
    allocated: Family<NumaLabels, Gauge>,
    placement: Family<PlacementLabels, Gauge>,
    spilled: Family<ContainerLabels, Gauge>,
    not_found: Gauge,
    verify_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("topoalign_follow");
        let metrics = Metrics {
            known: Gauge::default(),
            unknown: Family::default(),
            pods: Gauge::default(),
            allocated: Family::default(),
            placement: Family::default(),
            spilled: Family::default(),
            not_found: Gauge::default(),
            verify_failures: Counter::default(),
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
        registry.register(
            "container_placement",
            "1 per running container verified, labelled with its verdict: aligned, not-placed, drifted, misaligned, \
             memory-spilled (topoalign verify --containers)",
            metrics.placement.clone(),
        );
        registry.register(
            "container_memory_spilled_bytes",
            "Resident memory of the container's own on NUMA nodes it was not pinned to",
            metrics.spilled.clone(),
        );
        registry.register(
            "containers_not_found",
            "Containers the kubelet decided for whose processes were not found at the last verification",
            metrics.not_found.clone(),
        );
        registry.register(
            "verify_failures",
            "Verifications that could not read the host's processes",
            metrics.verify_failures.clone(),
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

    /// The verdicts of one verification, replacing the last one's.
    pub(crate) fn verified(&self, verified: &Verified) {
        self.placement.clear();
        self.spilled.clear();
        for report in &verified.reports {
            let Subject::Container {
                namespace,
                pod,
                container,
                ..
            } = &report.subject
            else {
                continue;
            };
            self.placement
                .get_or_create(&PlacementLabels {
                    namespace: namespace.clone(),
                    pod: pod.clone(),
                    container: container.clone(),
                    verdict: report.verdict.as_str(),
                })
                .set(1);
            let spilled: u64 = report
                .findings
                .iter()
                .map(|finding| match finding {
                    Finding::MemorySpilled { bytes, .. } => *bytes,
                    _ => 0,
                })
                .sum();
            self.spilled
                .get_or_create(&ContainerLabels {
                    namespace: namespace.clone(),
                    pod: pod.clone(),
                    container: container.clone(),
                })
                .set(gauge_value(spilled));
        }
        self.not_found.set(gauge_value(verified.not_found.len()));
    }

    pub(crate) fn verify_failed(&self) {
        self.verify_failures.inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

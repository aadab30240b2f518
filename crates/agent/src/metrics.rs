//! Prometheus metrics, named after the kubelet's so that its dashboards'
//! readers know them (`kubelet_topology_manager_admission_requests_total`
//! → `topoalign_topology_manager_admission_requests_total`, …), plus
//! per-NUMA-node capacity, allocatable, allocated and unpaired gauges.
//!
//! Owns: the registry and when each metric moves. The kubelet counts a
//! CPU manager pinning request per container admitted under the static
//! policy that asks for whole CPUs in a Guaranteed pod, and a memory
//! manager pinning request per container of a Guaranteed pod under the
//! `Static` policy; errors are allocation failures of that manager. The
//! same rules apply here, per admission request.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use topoalign_engine::{CpuPolicyName, Decision, MemoryPolicyName, Provider, RejectionStage};
use topoalign_model::{Pod, QosClass};

use crate::wire::Topology;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// The labels of a per-NUMA gauge, the agent's and the follower's
/// (`numa_node`, `resource`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NumaLabels {
    numa_node: String,
    resource: String,
}

impl NumaLabels {
    pub fn new(numa_node: impl std::fmt::Display, resource: &str) -> NumaLabels {
        NumaLabels {
            numa_node: numa_node.to_string(),
            resource: resource.to_owned(),
        }
    }
}

/// An amount as a gauge's value (saturating: no amount is that large).
pub fn gauge_value(amount: impl TryInto<i64>) -> i64 {
    amount.try_into().unwrap_or(i64::MAX)
}

/// The OpenMetrics text exposition of `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// The agent's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    admission_requests: Counter,
    admission_errors: Family<ReasonLabels, Counter>,
    admission_duration: Histogram,
    cpu_pinning_requests: Counter,
    cpu_pinning_errors: Counter,
    memory_pinning_requests: Counter,
    memory_pinning_errors: Counter,
    capacity: Family<NumaLabels, Gauge>,
    allocatable: Family<NumaLabels, Gauge>,
    allocated: Family<NumaLabels, Gauge>,
    unpaired: Family<NumaLabels, Gauge>,
    allocations: Gauge,
    journal_records: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("topoalign");
        let metrics = Metrics {
            admission_requests: Counter::default(),
            admission_errors: Family::default(),
            // 50 µs … ~1.6 s.
            admission_duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            cpu_pinning_requests: Counter::default(),
            cpu_pinning_errors: Counter::default(),
            memory_pinning_requests: Counter::default(),
            memory_pinning_errors: Counter::default(),
            capacity: Family::default(),
            allocatable: Family::default(),
            allocated: Family::default(),
            unpaired: Family::default(),
            allocations: Gauge::default(),
            journal_records: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "topology_manager_admission_requests",
            "Admission requests handled by the topology manager",
            metrics.admission_requests.clone(),
        );
        registry.register(
            "topology_manager_admission_errors",
            "Admission requests rejected, by the kubelet's reason",
            metrics.admission_errors.clone(),
        );
        registry.register(
            "topology_manager_admission_duration_seconds",
            "Time to decide an admission request, including the durable write",
            metrics.admission_duration.clone(),
        );
        registry.register(
            "cpu_manager_pinning_requests",
            "Containers asking the CPU manager for exclusive CPUs",
            metrics.cpu_pinning_requests.clone(),
        );
        registry.register(
            "cpu_manager_pinning_errors",
            "CPU manager allocations that failed",
            metrics.cpu_pinning_errors.clone(),
        );
        registry.register(
            "memory_manager_pinning_requests",
            "Containers asking the memory manager for NUMA-pinned memory",
            metrics.memory_pinning_requests.clone(),
        );
        registry.register(
            "memory_manager_pinning_errors",
            "Memory manager allocations that failed",
            metrics.memory_pinning_errors.clone(),
        );
        registry.register(
            "numa_capacity",
            "Capacity per NUMA node and resource (CPUs, bytes, devices)",
            metrics.capacity.clone(),
        );
        registry.register(
            "numa_allocatable",
            "Allocatable amount per NUMA node and resource",
            metrics.allocatable.clone(),
        );
        registry.register(
            "numa_allocated",
            "Allocated amount per NUMA node and resource",
            metrics.allocated.clone(),
        );
        registry.register(
            "numa_unpaired",
            "Free capacity no Guaranteed workload can use: CPUs on a NUMA node without free memory, memory on one \
             without free CPUs",
            metrics.unpaired.clone(),
        );
        registry.register("agent_allocations", "Allocations held", metrics.allocations.clone());
        registry.register(
            "agent_journal_records",
            "Records in the current state journal",
            metrics.journal_records.clone(),
        );
        Metrics { registry, ..metrics }
    }

    /// Counts one admission request and its outcome.
    pub fn record_admission(
        &self,
        pod: &Pod,
        decision: &Decision,
        seconds: f64,
        cpu_policy: CpuPolicyName,
        memory_policy: MemoryPolicyName,
    ) {
        self.admission_requests.inc();
        self.admission_duration.observe(seconds);
        let guaranteed = pod.qos == QosClass::Guaranteed;
        let containers = || pod.init_containers.iter().chain(&pod.containers);
        if cpu_policy == CpuPolicyName::Static && guaranteed {
            let whole = containers()
                .filter(|c| {
                    let cpu = c.request("cpu");
                    cpu.is_whole() && cpu.value() > 0
                })
                .count();
            self.cpu_pinning_requests.inc_by(whole as u64);
        }
        if memory_policy == MemoryPolicyName::Static && guaranteed {
            self.memory_pinning_requests.inc_by(containers().count() as u64);
        }
        if let Some(rejection) = &decision.rejection {
            self.admission_errors
                .get_or_create(&ReasonLabels {
                    reason: rejection.reason.clone(),
                })
                .inc();
            match rejection.stage {
                RejectionStage::Allocation(Provider::Cpu) => {
                    self.cpu_pinning_errors.inc();
                }
                RejectionStage::Allocation(Provider::Memory) => {
                    self.memory_pinning_errors.inc();
                }
                _ => {}
            }
        }
    }

    /// Sets the per-NUMA gauges from `topology`, and the agent's own.
    pub fn set_usage(&self, topology: &Topology, allocations: usize, journal_records: u64) {
        for node in &topology.numa_nodes {
            for (resource, usage) in &node.resources {
                let labels = NumaLabels::new(node.id, resource);
                self.capacity.get_or_create(&labels).set(gauge_value(usage.capacity));
                self.allocatable
                    .get_or_create(&labels)
                    .set(gauge_value(usage.allocatable));
                if let Some(allocated) = usage.allocated {
                    self.allocated.get_or_create(&labels).set(gauge_value(allocated));
                }
                let unpaired = node.unpaired.get(resource).copied().unwrap_or(0);
                if unpaired > 0 || resource == "cpu" || resource == "memory" {
                    self.unpaired.get_or_create(&labels).set(gauge_value(unpaired));
                }
            }
        }
        self.allocations.set(gauge_value(allocations));
        self.journal_records.set(gauge_value(journal_records));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

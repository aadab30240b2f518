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
//!
//! The set follows the node's `kubeletVersion` as the kubelet's
//! `pkg/kubelet/metrics` does:
//!
//! - every release: `container_aligned_compute_resources_count{scope,
//!   boundary}`: under the `single-numa-node` policy, one per container
//!   (container scope) or pod (pod scope) the topology manager admitted
//!   and allocated (`numa_node`); under `full-pcpus-only`, one per
//!   container given exclusive CPUs (`physical_cpu`); from 1.33 also one
//!   per container whose exclusive CPUs share one uncore cache
//!   (`uncore_cache`, `CheckAlignment`);
//! - from 1.33: `container_aligned_compute_resources_failure_count` (the
//!   same labels: the `single-numa-node` merge refused, or a
//!   `full-pcpus-only` CPU allocation failed) and, under the static CPU
//!   policy, `cpu_manager_allocation_per_numa{numa_node}` (exclusive CPUs
//!   per NUMA node; like the kubelet's, a node's gauge is set only while it
//!   holds some, so it keeps its last value when they are all released);
//!   the label sets the kubelet creates at start (`Add(0)`) are there at
//!   zero;
//! - 1.37: `pod_level_resources_admission_total{config_mode,qos_class}`,
//!   one per admitted pod (`recordPodLevelResourcesAdmission`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use topoalign_engine::{
    CpuPolicyName, Decision, MemoryPolicyName, NodeConfig, Provider, RejectionStage, TopologyPolicyName, TopologyScope,
};
use topoalign_model::{KubeletVersion, Machine, Pod, QosClass, resource_name};

use crate::wire::Topology;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// `scope` (`container`, `pod`) and `boundary` (`numa_node`,
/// `physical_cpu`, `uncore_cache`), the kubelet's alignment labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlignmentLabels {
    scope: &'static str,
    boundary: &'static str,
}

impl AlignmentLabels {
    const fn new(scope: &'static str, boundary: &'static str) -> AlignmentLabels {
        AlignmentLabels { scope, boundary }
    }
}

const CONTAINER_NUMA: AlignmentLabels = AlignmentLabels::new("container", "numa_node");
const POD_NUMA: AlignmentLabels = AlignmentLabels::new("pod", "numa_node");
const PHYSICAL_CPU: AlignmentLabels = AlignmentLabels::new("container", "physical_cpu");
const UNCORE_CACHE: AlignmentLabels = AlignmentLabels::new("container", "uncore_cache");

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CpuNumaLabels {
    numa_node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodLevelLabels {
    config_mode: &'static str,
    qos_class: &'static str,
}

/// What of the node's configuration decides which metrics move.
#[derive(Clone, Copy, Debug)]
struct Rules {
    version: KubeletVersion,
    single_numa_node: bool,
    pod_scope: bool,
    cpu_static: bool,
    memory_static: bool,
    full_pcpus_only: bool,
    /// From 1.34, with `PodLevelResources` on, a pod with pod-level
    /// resources stays in the shared pool and its memory unpinned (no
    /// pinning request to either manager).
    pod_level_shared: bool,
}

impl Rules {
    fn of(config: &NodeConfig) -> Rules {
        let cpu_static = config.cpu_policy == CpuPolicyName::Static;
        Rules {
            version: config.kubelet_version,
            single_numa_node: config.topology_policy == TopologyPolicyName::SingleNumaNode,
            pod_scope: config.topology_scope == TopologyScope::Pod,
            cpu_static,
            memory_static: config.memory_policy == MemoryPolicyName::Static,
            pod_level_shared: config.kubelet_version.at_least(KubeletVersion::V1_34)
                && config.feature_gates.pod_level_resources(config.kubelet_version),
            // A node runs only with options its release accepts; the
            // value is what the static policy parsed.
            full_pcpus_only: cpu_static
                && topoalign_cpu_manager::StaticPolicyOptions::parse(
                    &config.cpu_options,
                    &config.feature_gates,
                    config.kubelet_version,
                )
                .is_ok_and(|o| o.full_pcpus_only),
        }
    }

    /// The failure counter and the per-NUMA CPU gauge (1.33+).
    fn since_1_33(self) -> bool {
        self.version.at_least(KubeletVersion::V1_33)
    }
}

pub use topoalign_usage::{NumaLabels, encode, gauge_value};

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
    aligned: Family<AlignmentLabels, Counter>,
    aligned_failures: Family<AlignmentLabels, Counter>,
    cpu_allocation_per_numa: Family<CpuNumaLabels, Gauge>,
    pod_level_admissions: Family<PodLevelLabels, Counter>,
    rules: Rules,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(&NodeConfig::default())
    }
}

impl Metrics {
    /// A registry with every metric at zero, the set of the node's kubelet
    /// release (see the module documentation).
    pub fn new(config: &NodeConfig) -> Metrics {
        let rules = Rules::of(config);
        let mut registry = Registry::with_prefix("topoalign");
        let metrics = Metrics {
            aligned: Family::default(),
            aligned_failures: Family::default(),
            cpu_allocation_per_numa: Family::default(),
            pod_level_admissions: Family::default(),
            rules,
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
        registry.register(
            "container_aligned_compute_resources_count",
            "Cumulative number of aligned compute resources allocated to containers by alignment type",
            metrics.aligned.clone(),
        );
        if rules.since_1_33() {
            registry.register(
                "container_aligned_compute_resources_failure_count",
                "Cumulative number of failures to allocate aligned compute resources to containers by alignment type",
                metrics.aligned_failures.clone(),
            );
            // The topology manager's start (every policy), then the static
            // CPU policy's.
            for labels in [CONTAINER_NUMA, POD_NUMA] {
                metrics.aligned.get_or_create(&labels).inc_by(0);
                metrics.aligned_failures.get_or_create(&labels).inc_by(0);
            }
            if rules.cpu_static {
                metrics.aligned_failures.get_or_create(&PHYSICAL_CPU).inc_by(0);
                metrics.aligned.get_or_create(&PHYSICAL_CPU).inc_by(0);
                metrics.aligned.get_or_create(&UNCORE_CACHE).inc_by(0);
                registry.register(
                    "cpu_manager_allocation_per_numa",
                    "Number of CPUs allocated per NUMA node",
                    metrics.cpu_allocation_per_numa.clone(),
                );
            }
        }
        if rules.version.at_least(KubeletVersion::V1_37) {
            registry.register(
                "pod_level_resources_admission",
                "Total number of pods admitted, by resource configuration mode (pod_and_container_level, pod_level, \
                 container_level, or empty) and QoS class",
                metrics.pod_level_admissions.clone(),
            );
        }
        registry.register("agent_allocations", "Allocations held", metrics.allocations.clone());
        registry.register(
            "agent_journal_records",
            "Records in the current state journal",
            metrics.journal_records.clone(),
        );
        Metrics { registry, ..metrics }
    }

    /// Counts one admission request and its outcome.
    pub fn record_admission(&self, pod: &Pod, decision: &Decision, seconds: f64, machine: &Machine) {
        let rules = self.rules;
        self.admission_requests.inc();
        self.admission_duration.observe(seconds);
        // The QoS class as admitted (pod-level resources may decide it).
        let guaranteed = decision.qos == QosClass::Guaranteed;
        let containers = || pod.init_containers.iter().chain(&pod.containers);
        let pod_level_shared = rules.pod_level_shared && pod.uses_pod_level_resources();
        let pinning = |c: &topoalign_model::Container| {
            let cpu = c.request("cpu");
            guaranteed && cpu.is_whole() && cpu.value() > 0 && !pod_level_shared
        };
        if rules.cpu_static {
            self.cpu_pinning_requests
                .inc_by(containers().filter(|c| pinning(c)).count() as u64);
        }
        if rules.memory_static && guaranteed && !pod_level_shared {
            self.memory_pinning_requests.inc_by(containers().count() as u64);
        }
        let stage = decision.rejection.as_ref().map(|r| r.stage);
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
        // The topology manager's part: under single-numa-node, one per
        // container merged and allocated (container scope) or per pod.
        let through_topology = matches!(stage, None | Some(RejectionStage::ResourceFit));
        if rules.single_numa_node {
            let merges = decision.trace.merges.len() as u64;
            if rules.pod_scope {
                if through_topology {
                    self.aligned.get_or_create(&POD_NUMA).inc();
                }
            } else {
                let completed = if through_topology {
                    merges
                } else {
                    merges.saturating_sub(1)
                };
                self.aligned.get_or_create(&CONTAINER_NUMA).inc_by(completed);
            }
            if stage == Some(RejectionStage::TopologyPolicy) && rules.since_1_33() {
                let labels = if rules.pod_scope { POD_NUMA } else { CONTAINER_NUMA };
                self.aligned_failures.get_or_create(&labels).inc();
            }
        }
        // The static CPU policy's part, per container given exclusive CPUs.
        if rules.cpu_static {
            if rules.full_pcpus_only {
                let allocated = match stage {
                    None | Some(RejectionStage::ResourceFit) => Some(containers().filter(|c| pinning(c)).count()),
                    // Refused part-way: the containers before the one
                    // refused were allocated, and that one too when only its
                    // memory failed. The container scope's merges name it;
                    // otherwise it is not known and nothing is counted.
                    Some(stage) => decision
                        .trace
                        .merges
                        .last()
                        .and_then(|m| m.container.as_deref())
                        .map(|refused| {
                            let refused_too = stage == RejectionStage::Allocation(Provider::Memory);
                            containers()
                                .take_while(|c| c.name != refused)
                                .chain(containers().filter(|c| refused_too && c.name == refused))
                                .filter(|c| pinning(c))
                                .count()
                        }),
                };
                self.aligned
                    .get_or_create(&PHYSICAL_CPU)
                    .inc_by(allocated.unwrap_or(0) as u64);
                if stage == Some(RejectionStage::Allocation(Provider::Cpu)) && rules.since_1_33() {
                    self.aligned_failures.get_or_create(&PHYSICAL_CPU).inc();
                }
            }
            if through_topology && rules.since_1_33() {
                let uncore_aligned = decision
                    .containers
                    .iter()
                    .filter_map(|placement| placement.cpus.as_ref())
                    .filter(|cpus| shares_one_uncore_cache(machine, cpus.iter()))
                    .count() as u64;
                self.aligned.get_or_create(&UNCORE_CACHE).inc_by(uncore_aligned);
            }
        }
        if rules.version.at_least(KubeletVersion::V1_37) && decision.admitted() {
            self.pod_level_admissions
                .get_or_create(&PodLevelLabels {
                    config_mode: config_mode(pod),
                    qos_class: qos_label(decision.qos),
                })
                .inc();
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
        if self.rules.cpu_static && self.rules.since_1_33() {
            for node in &topology.numa_nodes {
                let exclusive = node.resources.get("cpu").and_then(|usage| usage.allocated).unwrap_or(0);
                if exclusive > 0 {
                    self.cpu_allocation_per_numa
                        .get_or_create(&CpuNumaLabels {
                            numa_node: node.id.to_string(),
                        })
                        .set(gauge_value(exclusive));
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

/// Whether `cpus` share one uncore cache (`CheckAlignment`; a CPU without
/// a known uncore cache counts its socket as one, as the kubelet's
/// topology discovery does).
fn shares_one_uncore_cache(machine: &Machine, mut cpus: impl Iterator<Item = u32>) -> bool {
    let cache = |id: u32| {
        machine
            .cpu(id)
            .map(|cpu| cpu.uncore_cache.map_or((false, cpu.socket), |c| (true, c)))
    };
    let Some(first) = cpus.next().map(cache) else {
        return true;
    };
    cpus.all(|id| cache(id) == first)
}

/// `recordPodLevelResourcesAdmission`'s mode: pod-level resources set
/// (`IsPodLevelResourcesSet`), any container with requests or limits.
fn config_mode(pod: &Pod) -> &'static str {
    let pod_level = pod.pod_resources.as_ref().is_some_and(|r| {
        r.requests
            .keys()
            .chain(r.limits.keys())
            .any(|name| resource_name::is_cpu_or_memory(name))
    });
    let container_level = pod
        .init_containers
        .iter()
        .chain(&pod.containers)
        .any(|c| !c.requests.is_empty() || !c.limits.is_empty());
    match (pod_level, container_level) {
        (true, true) => "pod_and_container_level",
        (true, false) => "pod_level",
        (false, true) => "container_level",
        (false, false) => "",
    }
}

/// The QoS class lower-cased, as the kubelet labels it.
fn qos_label(qos: QosClass) -> &'static str {
    match qos {
        QosClass::Guaranteed => "guaranteed",
        QosClass::Burstable => "burstable",
        QosClass::BestEffort => "besteffort",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_engine::Node;
    use topoalign_model::{Cpu, CpuSet, NumaNode, Quantity, UniformMachine};

    use super::*;
    use crate::wire::{NumaNodeUsage, Usage};

    /// Two NUMA nodes of 4 CPUs, 2 threads per core (siblings `n` and
    /// `n + 4` of each node), one uncore cache per pair of cores; CPU 0 is
    /// reserved.
    fn node(version: KubeletVersion, policy: TopologyPolicyName, scope: TopologyScope, full_pcpus: bool) -> Node {
        let cpus = (0..8u32)
            .map(|id| {
                let core = id % 4;
                Cpu {
                    id,
                    core,
                    socket: 0,
                    numa: (core / 2) as usize,
                    uncore_cache: Some(core / 2),
                }
            })
            .collect();
        let numa = (0..2)
            .map(|id| NumaNode {
                id,
                memory: 8 << 30,
                hugepages: BTreeMap::default(),
                distances: None,
            })
            .collect();
        let machine = Machine::new(numa, cpus, BTreeMap::default()).expect("valid machine");
        let mut config = NodeConfig {
            topology_policy: policy,
            topology_scope: scope,
            cpu_policy: CpuPolicyName::Static,
            kubelet_version: version,
            reserved_system_cpus: Some(CpuSet::from_iter([0, 4])),
            ..NodeConfig::default()
        };
        config.system_reserved.insert("cpu".into(), Quantity::from_units(2));
        if full_pcpus {
            config.cpu_options.insert("full-pcpus-only".into(), "true".into());
        }
        Node::start(machine, config).expect("starts")
    }

    fn pod(name: &str, cpus: &[u32]) -> Pod {
        let containers: Vec<serde_json::Value> = cpus
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let r = serde_json::json!({"cpu": n.to_string(), "memory": "1Gi"});
                serde_json::json!({"name": format!("c{i}"), "resources": {"requests": r, "limits": r}})
            })
            .collect();
        let manifest = serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": containers},
        });
        topoalign_k8s::pod_from_value(&manifest, &format!("uid-{name}")).expect("valid pod")
    }

    fn admit(metrics: &Metrics, node: &mut Node, pod: Pod) -> Decision {
        let decision = node.admit(pod.clone());
        metrics.record_admission(&pod, &decision, 0.001, node.machine());
        decision
    }

    fn line<'a>(text: &'a str, name: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(name))
    }

    #[test]
    fn each_release_exports_the_kubelets_names_of_that_release() {
        let names = |version| {
            Metrics::new(
                node(
                    version,
                    TopologyPolicyName::SingleNumaNode,
                    TopologyScope::Container,
                    false,
                )
                .config(),
            )
            .encode()
        };
        // 1.32 creates no label set at start: the counter shows once it
        // moves (single_numa_node_counts_...).
        let v132 = names(KubeletVersion::V1_32);
        assert!(!v132.contains("container_aligned_compute_resources"));
        assert!(!v132.contains("cpu_manager_allocation_per_numa"));
        assert!(!v132.contains("pod_level_resources_admission"));
        let v133 = names(KubeletVersion::V1_33);
        // The label sets the kubelet creates at start, at zero.
        for labels in [
            r#"{scope="container",boundary="numa_node"} 0"#,
            r#"{scope="pod",boundary="numa_node"} 0"#,
            r#"{scope="container",boundary="physical_cpu"} 0"#,
        ] {
            assert!(
                v133.contains(&format!(
                    "topoalign_container_aligned_compute_resources_failure_count_total{labels}"
                )),
                "{labels}: {v133}"
            );
        }
        assert!(v133.contains(
            r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="uncore_cache"} 0"#
        ));
        // Families without a label set yet are not shown (nor are the
        // kubelet's): cpu_manager_allocation_per_numa and, in 1.37,
        // pod_level_resources_admission appear once they move (tests below).
    }

    #[test]
    fn single_numa_node_counts_aligned_containers_and_from_1_33_failures() {
        for version in [KubeletVersion::V1_32, KubeletVersion::V1_33] {
            let mut node = node(
                version,
                TopologyPolicyName::SingleNumaNode,
                TopologyScope::Container,
                false,
            );
            let metrics = Metrics::new(node.config());
            assert!(admit(&metrics, &mut node, pod("two", &[1, 1])).admitted());
            // 5 CPUs fit no NUMA node (3 allocatable on node 0, 4 on node 1).
            let refused = admit(&metrics, &mut node, pod("wide", &[5]));
            assert_eq!(refused.rejection.expect("refused").reason, "TopologyAffinityError");
            let text = metrics.encode();
            assert_eq!(
                line(
                    &text,
                    r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="numa_node"}"#
                ),
                Some(
                    r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="numa_node"} 2"#
                ),
                "{version}"
            );
            let failure = line(
                &text,
                r#"topoalign_container_aligned_compute_resources_failure_count_total{scope="container",boundary="numa_node"}"#,
            );
            if version.at_least(KubeletVersion::V1_33) {
                assert!(failure.is_some_and(|l| l.ends_with(" 1")), "{text}");
            } else {
                assert_eq!(failure, None);
            }
        }
    }

    #[test]
    fn pod_scope_counts_the_pod_once() {
        let mut node = node(
            KubeletVersion::V1_35,
            TopologyPolicyName::SingleNumaNode,
            TopologyScope::Pod,
            false,
        );
        let metrics = Metrics::new(node.config());
        assert!(admit(&metrics, &mut node, pod("two", &[1, 1])).admitted());
        assert!(!admit(&metrics, &mut node, pod("wide", &[3, 2])).admitted());
        let text = metrics.encode();
        assert!(text.contains(
            r#"topoalign_container_aligned_compute_resources_count_total{scope="pod",boundary="numa_node"} 1"#
        ));
        assert!(text.contains(
            r#"topoalign_container_aligned_compute_resources_failure_count_total{scope="pod",boundary="numa_node"} 1"#
        ));
        assert!(text.contains(
            r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="numa_node"} 0"#
        ));
    }

    #[test]
    fn full_pcpus_only_counts_physical_cpu_alignment_and_uncore_caches() {
        let mut node = node(
            KubeletVersion::V1_34,
            TopologyPolicyName::None,
            TopologyScope::Container,
            true,
        );
        let metrics = Metrics::new(node.config());
        // Two CPUs: one whole core, in one uncore cache.
        assert!(admit(&metrics, &mut node, pod("core", &[2])).admitted());
        // Three CPUs are not whole cores.
        let refused = admit(&metrics, &mut node, pod("odd", &[3]));
        assert_eq!(refused.rejection.expect("refused").reason, "SMTAlignmentError");
        let text = metrics.encode();
        for expected in [
            r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="physical_cpu"} 1"#,
            r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="uncore_cache"} 1"#,
            r#"topoalign_container_aligned_compute_resources_failure_count_total{scope="container",boundary="physical_cpu"} 1"#,
            "topoalign_cpu_manager_pinning_requests_total 2",
            "topoalign_cpu_manager_pinning_errors_total 1",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
    }

    #[test]
    fn a_refusal_part_way_counts_the_containers_allocated_before_it() {
        let mut node = node(
            KubeletVersion::V1_33,
            TopologyPolicyName::BestEffort,
            TopologyScope::Container,
            true,
        );
        let metrics = Metrics::new(node.config());
        // c0 gets a whole core; c1's 3 CPUs are not whole cores.
        let refused = admit(&metrics, &mut node, pod("part", &[2, 3]));
        assert_eq!(refused.rejection.expect("refused").reason, "SMTAlignmentError");
        let text = metrics.encode();
        for expected in [
            r#"topoalign_container_aligned_compute_resources_count_total{scope="container",boundary="physical_cpu"} 1"#,
            r#"topoalign_container_aligned_compute_resources_failure_count_total{scope="container",boundary="physical_cpu"} 1"#,
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
    }

    #[test]
    fn pod_level_pods_ask_for_no_pinning_from_1_34() {
        let r = serde_json::json!({"cpu": "2", "memory": "1Gi"});
        let manifest = serde_json::json!({
            "metadata": {"name": "pl", "namespace": "default"},
            "spec": {
                "resources": {"requests": r, "limits": r},
                "containers": [{"name": "c", "resources": {"requests": r, "limits": r}}],
            },
        });
        let pod_level = topoalign_k8s::pod_from_value(&manifest, "uid-pl").expect("valid pod");
        for (version, pinned) in [(KubeletVersion::V1_33, 1), (KubeletVersion::V1_34, 0)] {
            let mut node = node(version, TopologyPolicyName::None, TopologyScope::Container, false);
            let metrics = Metrics::new(node.config());
            let decision = admit(&metrics, &mut node, pod_level.clone());
            assert!(decision.admitted());
            assert_eq!(decision.containers[0].cpus.is_some(), pinned == 1, "{version}");
            assert!(
                metrics
                    .encode()
                    .contains(&format!("topoalign_cpu_manager_pinning_requests_total {pinned}")),
                "{version}"
            );
        }
    }

    #[test]
    fn per_numa_cpus_are_set_while_held_and_kept_after() {
        let before_1_33 = Metrics::new(
            node(
                KubeletVersion::V1_32,
                TopologyPolicyName::None,
                TopologyScope::Container,
                false,
            )
            .config(),
        );
        let node = node(
            KubeletVersion::V1_36,
            TopologyPolicyName::None,
            TopologyScope::Container,
            false,
        );
        let metrics = Metrics::new(node.config());
        let topology = |held: [u64; 2]| Topology {
            numa_nodes: (0..2)
                .map(|id| NumaNodeUsage {
                    id,
                    cpus: CpuSet::new(),
                    resources: BTreeMap::from([(
                        "cpu".to_owned(),
                        Usage {
                            capacity: 4,
                            allocatable: 3,
                            allocated: Some(held[id]),
                        },
                    )]),
                    unpaired: BTreeMap::new(),
                    distances: None,
                })
                .collect(),
            ..Topology::default()
        };
        metrics.set_usage(&topology([0, 2]), 1, 1);
        before_1_33.set_usage(&topology([0, 2]), 1, 1);
        assert!(!before_1_33.encode().contains("allocation_per_numa"));
        let text = metrics.encode();
        assert!(
            text.contains(r#"topoalign_cpu_manager_allocation_per_numa{numa_node="1"} 2"#),
            "{text}"
        );
        assert!(!text.contains(r#"topoalign_cpu_manager_allocation_per_numa{numa_node="0"}"#));
        // Released: the kubelet updates only nodes that still hold CPUs.
        metrics.set_usage(&topology([1, 0]), 1, 2);
        let text = metrics.encode();
        assert!(
            text.contains(r#"topoalign_cpu_manager_allocation_per_numa{numa_node="1"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"topoalign_cpu_manager_allocation_per_numa{numa_node="0"} 1"#));
    }

    /// The usage gauges of a node on NUMA ids `ids` (two nodes of 4 CPUs,
    /// CPU 0 reserved) after admitting a pod of 6 exclusive CPUs (both
    /// NUMA nodes, topology policy none).
    fn usage_text(ids: [usize; 2]) -> String {
        let machine = UniformMachine::new(2, 4)
            .memory_per_numa(8 << 30)
            .numa_ids(ids)
            .build()
            .expect("valid machine");
        let mut config = NodeConfig {
            cpu_policy: CpuPolicyName::Static,
            kubelet_version: KubeletVersion::V1_36,
            reserved_system_cpus: Some(CpuSet::from_iter([0])),
            ..NodeConfig::default()
        };
        config.system_reserved.insert("cpu".into(), Quantity::from_units(1));
        let mut node = Node::start(machine, config).expect("starts");
        let metrics = Metrics::new(node.config());
        assert!(admit(&metrics, &mut node, pod("g", &[6])).admitted());
        metrics.set_usage(&topoalign_usage::node_topology(&node, "none"), 1, 1);
        metrics.encode()
    }

    #[test]
    fn numa_labels_are_the_machines_own_ids() {
        // Topology policy none: the kubelet runs on ids {0, 64} and decides
        // as on {0, 1}; the gauges are those of {0, 1} with node 1 named 64.
        let plain = usage_text([0, 1]);
        let wide = usage_text([0, 64]);
        // (Label sets print in hash order: compare the sorted lines.)
        let lines = |text: &str| {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            lines.sort();
            lines
        };
        assert!(
            plain.contains(r#"topoalign_cpu_manager_allocation_per_numa{numa_node="1"}"#),
            "{plain}"
        );
        assert_eq!(
            lines(&wide),
            lines(&plain.replace(r#"numa_node="1""#, r#"numa_node="64""#))
        );
    }

    #[test]
    fn v1_37_counts_admitted_pods_by_configuration_mode_and_qos() {
        let mut node = node(
            KubeletVersion::V1_37,
            TopologyPolicyName::None,
            TopologyScope::Container,
            false,
        );
        let metrics = Metrics::new(node.config());
        assert!(admit(&metrics, &mut node, pod("g", &[1])).admitted());
        let manifest = serde_json::json!({
            "metadata": {"name": "pl", "namespace": "default"},
            "spec": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}, "containers": [{"name": "c"}]},
        });
        let pod_level = topoalign_k8s::pod_from_value(&manifest, "uid-pl").expect("valid pod");
        let mut v136 = self::node(
            KubeletVersion::V1_36,
            TopologyPolicyName::None,
            TopologyScope::Container,
            false,
        );
        let before_1_37 = Metrics::new(v136.config());
        assert!(admit(&before_1_37, &mut v136, pod_level.clone()).admitted());
        assert!(!before_1_37.encode().contains("pod_level_resources_admission"));
        assert!(admit(&metrics, &mut node, pod_level).admitted());
        let refused = admit(&metrics, &mut node, pod("huge", &[64]));
        assert!(!refused.admitted());
        let text = metrics.encode();
        assert!(text.contains(
            r#"topoalign_pod_level_resources_admission_total{config_mode="container_level",qos_class="guaranteed"} 1"#
        ));
        assert!(
            text.contains(
                r#"topoalign_pod_level_resources_admission_total{config_mode="pod_level",qos_class="burstable"} 1"#
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("topoalign_pod_level_resources_admission_total{").count(),
            2
        );
    }
}

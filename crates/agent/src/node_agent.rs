//! [`NodeAgent`]: the ledger, enforcement, process liveness and metrics
//! together — what the HTTP server and `topoalign run --standalone` drive.
//!
//! Owns the order of things: an admission is decided and made durable by
//! the ledger, then enforced; if enforcement fails it is released again
//! (durably) and the request fails. A release is durable before its cgroup
//! goes. Reconciliation releases allocations whose holder has exited and
//! whose cgroup (if any) is empty, and removes cgroups nobody holds.
//! Logs every change with `tracing`, and tells the change listener (if
//! any, see [`NodeAgent::on_change`]) once the change is durable.
//!
//! Must not touch: HTTP (the server's), decisions (the engine's).

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use serde_json::Value;
use topoalign_enforce::Procfs;
use topoalign_engine::{ContainerPlacement, Node, NodeConfig, TopologyPolicyName};
use topoalign_explain::{Change, Situation, words};
use topoalign_model::CpuSet;

use crate::enforcement::Enforcement;
use crate::ledger::{Admission, Held, Ledger, LedgerError, Recovery};
use crate::metrics::Metrics;
use crate::record::Holder;
use crate::request::Workload;
use crate::usage;
use crate::wire::{AdmitExplanation, AdmitResponse, Allocation, Health, Merge, Released, Topology};

/// Why a request failed; the server maps each to an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The request cannot be used as written (400).
    #[error("{0}")]
    BadRequest(String),
    /// It clashes with what is held (409).
    #[error("{0}")]
    Conflict(String),
    /// No such allocation (404).
    #[error("no allocation {0}; GET /v1/allocations lists them")]
    NotFound(String),
    /// The state cannot be written (503).
    #[error("{0}")]
    Unavailable(String),
    /// The allocation could not be enforced and was released again (500).
    #[error("{0}")]
    Enforcement(String),
}

impl From<LedgerError> for AgentError {
    fn from(error: LedgerError) -> AgentError {
        match error {
            LedgerError::Request(m) => AgentError::BadRequest(m),
            LedgerError::Conflict(m) => AgentError::Conflict(m),
            other => AgentError::Unavailable(other.to_string()),
        }
    }
}

/// The node's allocations, enforced and observed.
#[derive(Debug)]
pub struct NodeAgent {
    ledger: Ledger,
    enforcement: Enforcement,
    procfs: Procfs,
    metrics: Arc<Metrics>,
    /// What readers see: the state after the last committed change,
    /// replaced (never changed in place) by [`NodeAgent::refresh`].
    published: Arc<RwLock<Arc<Committed>>>,
    recovery_notes: Vec<String>,
    listener: Option<ChangeListener>,
    /// The KubeletConfiguration fields the node's configuration was read
    /// from: explanations re-check kubelet fixes with them (without them
    /// no kubelet fix is offered).
    kubelet: Option<Value>,
}

/// The agent's state as of its last committed change: what the read-only
/// endpoints serve, so that no reader waits for an admission in progress
/// (a pod with thousands of init containers, a long fix search).
#[derive(Clone, Debug, Default)]
pub struct Committed {
    pub health: Health,
    pub topology: Topology,
    /// Every allocation, in admission order.
    pub allocations: Vec<Allocation>,
}

impl Committed {
    /// One allocation.
    pub fn allocation(&self, id: &str) -> Option<&Allocation> {
        self.allocations.iter().find(|a| a.id == id)
    }
}

/// A handle on what the agent last committed and on its metrics, for
/// readers: it never takes the agent's lock, so reads are answered while
/// an admission runs.
#[derive(Clone, Debug)]
pub struct Reader {
    published: Arc<RwLock<Arc<Committed>>>,
    metrics: Arc<Metrics>,
}

impl Reader {
    /// The state after the last committed change.
    pub fn committed(&self) -> Arc<Committed> {
        // The lock only guards swapping one `Arc` for another, which
        // cannot be left half done: a poisoned lock still holds a whole
        // state.
        self.published.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Metrics text (the metrics are atomic counters and gauges).
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }
}

/// Called with the engine node after every durable allocation change.
pub type ChangeListenerFn = dyn Fn(&Node) + Send;

struct ChangeListener(Box<ChangeListenerFn>);

impl std::fmt::Debug for ChangeListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeListener")
    }
}

impl NodeAgent {
    /// Wraps a recovered ledger: reconciles it with what runs (releasing
    /// allocations whose holder is gone), re-applies enforcement to the
    /// rest, and removes cgroups no allocation owns.
    pub fn new(ledger: Ledger, recovery: &Recovery, enforcement: Enforcement, procfs: Procfs) -> NodeAgent {
        let mut notes = Vec::new();
        if recovery.created {
            notes.push(format!("new state at {}", ledger.journal_path().display()));
        } else {
            notes.push(format!(
                "recovered {} allocations from {} records of {} (epoch {})",
                recovery.restored.len(),
                recovery.records,
                ledger.journal_path().display(),
                recovery.epoch
            ));
        }
        if let Some(tail) = &recovery.discarded_tail {
            notes.push(format!(
                "dropped {} bytes at offset {} of the journal: a record whose write was never acknowledged (the \
                 agent stopped while writing it): {}",
                tail.bytes, tail.offset, tail.preview
            ));
        }
        if let Some(previous) = &recovery.previous_node {
            notes.push(format!(
                "the state was written for another machine or configuration ({previous}); every allocation \
                 replayed to the same placement"
            ));
        }
        if let Some(reason) = enforcement.fallback_reason() {
            notes.push(format!("enforcement {}: {reason}", enforcement.mode()));
        }
        for note in &notes {
            tracing::info!(target: "topoalign::recovery", "{note}");
        }
        let metrics = Arc::new(Metrics::new(ledger.node().config()));
        let mut agent = NodeAgent {
            ledger,
            enforcement,
            procfs,
            metrics,
            published: Arc::default(),
            recovery_notes: notes,
            listener: None,
            kubelet: None,
        };
        let released = agent.reconcile();
        for r in &released {
            agent
                .recovery_notes
                .push(format!("released {} ({}): {}", r.id, r.name, r.reason));
        }
        for held in agent.ledger.held().to_vec() {
            if let Err(error) = agent.enforce(&held, false) {
                tracing::warn!(id = held.id(), %error, "cannot re-apply enforcement to a recovered allocation");
            }
        }
        agent.refresh();
        agent
    }

    /// Calls `listener` with the node now, and again after every
    /// allocation change once it is on disk (admissions, releases,
    /// reconciliation). It runs while the agent is locked: it must be quick
    /// and must not block (hand the work to another task).
    pub fn on_change(&mut self, listener: impl Fn(&Node) + Send + 'static) {
        listener(self.ledger.node());
        self.listener = Some(ChangeListener(Box::new(listener)));
    }

    /// The KubeletConfiguration fields (as
    /// `topoalign_k8s::KubeletConfiguration::from_value` reads them) the
    /// node's configuration was made from, so that explanations can offer
    /// kubelet fixes, each checked by restarting a copy of the node.
    pub fn set_kubelet_configuration(&mut self, kubelet: Value) {
        self.kubelet = Some(kubelet);
    }

    fn changed(&self) {
        if let Some(ChangeListener(listener)) = &self.listener {
            listener(self.ledger.node());
        }
    }

    /// A handle for readers on the state after the last committed change
    /// (see [`Reader`]).
    pub fn reader(&self) -> Reader {
        Reader {
            published: Arc::clone(&self.published),
            metrics: Arc::clone(&self.metrics),
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The enforcement in force.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Metrics text.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    /// Admits a workload; on success it is durable and enforced.
    ///
    /// # Errors
    /// [`AgentError`]; a rejection by the engine is not an error but an
    /// [`AdmitResponse`] with `admitted: false`.
    pub fn admit(&mut self, workload: &Workload) -> Result<AdmitResponse, AgentError> {
        self.admit_unexplained(workload).map(Unexplained::explain)
    }

    /// Admits a workload like [`NodeAgent::admit`], but leaves the costly
    /// half of a rejection's explanation — `topoalign-explain` and its fix
    /// search, which admits the pod again on copies of the node — to
    /// [`Unexplained::explain`], which needs no access to the agent: the
    /// API server runs it after releasing the agent's lock, so one
    /// expensive rejection does not hold up every other admission.
    ///
    /// # Errors
    /// As [`NodeAgent::admit`].
    pub fn admit_unexplained(&mut self, workload: &Workload) -> Result<Unexplained, AgentError> {
        let started = Instant::now();
        let holder = match workload.options.pid {
            None => None,
            Some(pid) => match self.procfs.identify(pid) {
                Ok(Some(identity)) => Some(Holder::from(identity)),
                Ok(None) => {
                    return Err(AgentError::BadRequest(format!(
                        "process {pid} does not exist: pass the pid of the process that will hold the allocation"
                    )));
                }
                Err(error) => return Err(AgentError::BadRequest(format!("cannot read process {pid}: {error}"))),
            },
        };
        let admission = self.ledger.admit(workload, holder)?;
        self.metrics.record_admission(
            &admission.pod,
            &admission.decision,
            started.elapsed().as_secs_f64(),
            self.ledger.node().machine(),
        );
        let Some(id) = admission.id.clone() else {
            tracing::info!(
                pod = %admission.decision.pod,
                reason = admission.decision.rejection.as_ref().map(|r| r.reason.as_str()).unwrap_or_default(),
                "rejected"
            );
            let rejection = admission.decision.rejection.as_ref();
            let response = AdmitResponse {
                admitted: false,
                allocation: None,
                reason: rejection.map(|r| r.reason.clone()),
                message: rejection.map(|r| r.message.clone()),
                explanation: self.explanation(&admission),
            };
            let rejected = self.rejection(admission);
            return Ok(Unexplained {
                response,
                rejected: Some(rejected),
            });
        };
        let held = self.ledger.get(&id).cloned();
        if let Some(held) = &held
            && let Err(error) = self.enforce(held, true)
        {
            let reason = format!("enforcement failed: {error}");
            tracing::error!(%id, %reason, "releasing the allocation again");
            if let Err(release_error) = self.release_held(&id, &reason) {
                tracing::error!(%id, %release_error, "cannot release an unenforceable allocation");
            }
            return Err(AgentError::Enforcement(format!(
                "the allocation could not be enforced ({error}) and was released again"
            )));
        }
        self.refresh_shared();
        self.refresh();
        self.changed();
        let allocation = self.allocation(&id);
        tracing::info!(
            %id,
            pod = %admission.decision.pod,
            cpus = %allocation.as_ref().map(|a| a.cpus.to_string()).unwrap_or_default(),
            pid = ?workload.options.pid,
            "admitted"
        );
        Ok(Unexplained {
            response: AdmitResponse {
                admitted: true,
                allocation,
                reason: None,
                message: None,
                explanation: self.explanation(&admission),
            },
            rejected: None,
        })
    }

    /// The API's explanation of `admission` as far as it is cheap: the
    /// decision in one line, the merges and warnings about silent no-ops.
    /// A rejection's why and fixes are added by [`Unexplained::explain`].
    fn explanation(&self, admission: &Admission) -> AdmitExplanation {
        let decision = &admission.decision;
        let node = self.ledger.node();
        AdmitExplanation {
            policy: decision.trace.policy.as_str().to_string(),
            scope: decision.trace.scope.as_str().to_string(),
            summary: words::decision_line(node.machine(), decision),
            notes: topoalign_explain::warnings::warnings(node, &admission.pod),
            merges: decision
                .trace
                .merges
                .iter()
                .map(|merge| Merge::of(merge, node.machine()))
                .collect(),
            fixes: Vec::new(),
        }
    }

    /// What explaining a rejection needs, copied while the agent is held:
    /// the node as the request saw it (a rejection leaves the ledger's node
    /// as the request found it).
    fn rejection(&self, admission: Admission) -> Rejected {
        let overridden = admission.decision.trace.policy != self.ledger.node().config().topology_policy;
        Rejected {
            as_requested: self.as_requested(admission.decision.trace.policy),
            kubelet_known: self.kubelet.is_some(),
            overridden,
            admission,
        }
    }

    /// The node as a request under topology policy `policy` sees it, and
    /// the kubelet fields that make it: the ledger's node, or — for a
    /// request that overrides the policy — a copy started with that policy
    /// and the same state.
    fn as_requested(&self, policy: TopologyPolicyName) -> Result<(Node, Value), String> {
        let node = self.ledger.node();
        let mut kubelet = self
            .kubelet
            .clone()
            .unwrap_or_else(|| Value::Object(Default::default()));
        if policy == node.config().topology_policy {
            return Ok((node.clone(), kubelet));
        }
        if let Some(fields) = kubelet.as_object_mut() {
            fields.insert("topologyManagerPolicy".to_string(), Value::from(policy.as_str()));
        }
        let config = NodeConfig {
            topology_policy: policy,
            ..node.config().clone()
        };
        let mut copy = Node::start(node.machine().clone(), config).map_err(|e| e.to_string())?;
        copy.restore(node.snapshot()).map_err(|e| e.to_string())?;
        Ok((copy, kubelet))
    }

    /// Releases allocation `id`.
    ///
    /// # Errors
    /// [`AgentError::NotFound`], or [`AgentError::Unavailable`] when the
    /// release cannot be written (it is then still held).
    pub fn release(&mut self, id: &str) -> Result<Allocation, AgentError> {
        let allocation = self
            .allocation(id)
            .ok_or_else(|| AgentError::NotFound(id.to_string()))?;
        self.release_held(id, "released by a client")?;
        Ok(allocation)
    }

    fn release_held(&mut self, id: &str, reason: &str) -> Result<(), AgentError> {
        let released = self.ledger.release(id, reason)?;
        if let Some(held) = released {
            tracing::info!(%id, name = %held.key, %reason, "released");
            if let Err(error) = self.enforcement.remove(id) {
                tracing::warn!(%id, %error, "cannot remove the allocation's cgroup");
            }
            self.refresh_shared();
            self.refresh();
            self.changed();
        }
        Ok(())
    }

    /// Releases allocations whose holding process has exited (and whose
    /// cgroup, under cgroup enforcement, is empty), and removes cgroups no
    /// allocation owns.
    pub fn reconcile(&mut self) -> Vec<Released> {
        let mut released = Vec::new();
        for held in self.ledger.held().to_vec() {
            let Some(holder) = &held.record.holder else { continue };
            let running = match self.procfs.is_running(&holder.into()) {
                Ok(running) => running,
                Err(error) => {
                    tracing::warn!(id = held.id(), %error, "cannot tell whether the holder runs; keeping it");
                    continue;
                }
            };
            if running || self.enforcement.occupied(held.id()) {
                continue;
            }
            let reason = format!("holder process {} exited", holder.pid);
            match self.release_held(held.id(), &reason) {
                Ok(()) => released.push(Released {
                    id: held.id().to_string(),
                    name: held.key.clone(),
                    reason,
                }),
                Err(error) => tracing::error!(id = held.id(), %error, "cannot release"),
            }
        }
        for id in self.enforcement.cgroup_ids() {
            if self.ledger.get(&id).is_none() {
                tracing::warn!(%id, "removing a cgroup that no allocation owns");
                if let Err(error) = self.enforcement.remove(&id) {
                    tracing::warn!(%id, %error, "cannot remove an orphaned cgroup");
                }
            }
        }
        released
    }

    /// Applies the allocation's CPUs and memory nodes (and, if `attach`,
    /// moves its running holder in).
    fn enforce(&self, held: &Held, attach: bool) -> Result<(), topoalign_enforce::CgroupError> {
        let (cpus, mems, _) = effective(self.ledger.node(), held);
        let pid = held
            .record
            .holder
            .as_ref()
            .filter(|h| attach || self.procfs.is_running(&(*h).into()).unwrap_or(false))
            .map(|h| h.pid);
        self.enforcement.confine(held.id(), &cpus, &mems, pid)
    }

    /// Shared-pool allocations follow the pool as exclusive allocations
    /// come and go.
    fn refresh_shared(&self) {
        for held in self.ledger.held() {
            let (cpus, mems, exclusive) = effective(self.ledger.node(), held);
            if exclusive {
                continue;
            }
            if let Err(error) = self.enforcement.confine(held.id(), &cpus, &mems, None) {
                tracing::warn!(id = held.id(), %error, "cannot update a shared-pool allocation's cgroup");
            }
        }
    }

    /// After every change: the usage gauges, and the state readers see.
    fn refresh(&self) {
        let topology = self.topology();
        self.metrics
            .set_usage(&topology, self.ledger.held().len(), self.ledger.journal_extent().0);
        let committed = Arc::new(Committed {
            health: self.health(),
            topology,
            allocations: self.allocations(),
        });
        *self.published.write().unwrap_or_else(PoisonError::into_inner) = committed;
    }

    /// Every allocation, in admission order.
    pub fn allocations(&self) -> Vec<Allocation> {
        self.ledger.held().iter().map(|h| self.view(h)).collect()
    }

    /// One allocation.
    pub fn allocation(&self, id: &str) -> Option<Allocation> {
        self.ledger.get(id).map(|h| self.view(h))
    }

    /// The topology document.
    pub fn topology(&self) -> Topology {
        usage::topology(&self.ledger, self.enforcement.mode())
    }

    /// The health document.
    pub fn health(&self) -> Health {
        Health {
            status: "ok".to_string(),
            enforcement: self.enforcement.mode().to_string(),
            allocations: self.ledger.held().len(),
            recovery: self.recovery_notes.clone(),
        }
    }

    fn view(&self, held: &Held) -> Allocation {
        let (cpus, _, exclusive) = effective(self.ledger.node(), held);
        let placements = &held.record.placements;
        // Every NUMA id shown is the machine's own (issue #29), as the
        // ledger's placements hold the engine's indices.
        let machine = self.ledger.node().machine();
        let label = |nodes: &Vec<usize>| nodes.iter().map(|&n| machine.numa_label(n)).collect::<Vec<_>>();
        let memory_numa = union_numa(
            placements
                .iter()
                .filter(|p| !p.init)
                .filter_map(|p| p.memory_numa.as_ref()),
        )
        .map(|nodes| label(&nodes));
        let containers = placements.iter().map(|p| p.with_numa_labels(machine)).collect();
        let mut devices: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for placement in placements {
            for (resource, ids) in &placement.devices {
                let list = devices.entry(resource.clone()).or_default();
                list.extend(ids.iter().cloned());
                list.sort();
                list.dedup();
            }
        }
        Allocation {
            id: held.id().to_string(),
            name: held.key.clone(),
            cpus,
            exclusive,
            memory_numa,
            devices,
            pid: held.record.holder.as_ref().map(|h| h.pid),
            policy: held.record.policy.map(|policy| policy.as_str().to_owned()),
            enforcement: self.enforcement.mode().to_string(),
            cgroup: self.enforcement.cgroup_path(held.id()).map(|p| p.display().to_string()),
            containers,
        }
    }
}

/// What an allocation runs on: its app containers' exclusive CPUs, or the
/// shared pool (all CPUs when the CPU manager keeps no pool); its pinned
/// memory nodes, or every node; and whether the CPUs are exclusive.
fn effective(node: &Node, held: &Held) -> (CpuSet, Vec<usize>, bool) {
    let app = held.record.placements.iter().filter(|p| !p.init);
    let exclusive = app
        .filter_map(|p| p.cpus.as_ref())
        .fold(CpuSet::new(), |all, cpus| all.union(cpus));
    let machine = node.machine();
    let mems = cpuset_mems(machine, &held.record.placements);
    if !exclusive.is_empty() {
        return (exclusive, mems, true);
    }
    let shared = node.state().default_cpu_set;
    let cpus = if shared.is_empty() { machine.cpu_set() } else { shared };
    (cpus, mems, false)
}

/// The memory nodes for an allocation's `cpuset.mems`: those its app
/// containers' memory is pinned to, else every NUMA node — as the kernel
/// names them, the machine's own ids (the ledger's placements hold the
/// engine's indices, which differ on a machine with NUMA ids past 63).
fn cpuset_mems(machine: &topoalign_model::Machine, placements: &[ContainerPlacement]) -> Vec<usize> {
    let pinned = union_numa(
        placements
            .iter()
            .filter(|p| !p.init)
            .filter_map(|p| p.memory_numa.as_ref()),
    );
    let indices = pinned.unwrap_or_else(|| machine.numa_nodes().iter().map(|n| n.id).collect());
    indices.into_iter().map(|n| machine.numa_label(n)).collect()
}

fn union_numa<'a>(lists: impl Iterator<Item = &'a Vec<usize>>) -> Option<Vec<usize>> {
    let mut any = false;
    let mut nodes: Vec<usize> = Vec::new();
    for list in lists {
        any = true;
        nodes.extend(list);
    }
    nodes.sort_unstable();
    nodes.dedup();
    any.then_some(nodes)
}

/// An admission whose response is complete but for a rejection's why and
/// fixes (see [`NodeAgent::admit_unexplained`]).
pub struct Unexplained {
    response: AdmitResponse,
    rejected: Option<Rejected>,
}

/// A rejection, with the node as its request saw it.
struct Rejected {
    admission: Admission,
    as_requested: Result<(Node, Value), String>,
    kubelet_known: bool,
    overridden: bool,
}

impl Unexplained {
    /// The new allocation's id, when the workload was admitted.
    pub fn allocation_id(&self) -> Option<&str> {
        self.response.allocation.as_ref().map(|a| a.id.as_str())
    }

    /// The response, with a rejection explained (`topoalign-explain` on
    /// the node as the request saw it) and the fixes it checked by
    /// admitting the pod again.
    pub fn explain(self) -> AdmitResponse {
        let Unexplained { mut response, rejected } = self;
        let Some(rejected) = rejected else { return response };
        let (node, kubelet) = match rejected.as_requested {
            Ok(requested) => requested,
            Err(error) => {
                tracing::warn!(%error, "cannot explain the rejection");
                return response;
            }
        };
        let situation = Situation {
            node: &node,
            kubelet: &kubelet,
            manifest: &rejected.admission.manifest,
            pod: &rejected.admission.pod,
        };
        let why = topoalign_explain::explain(&situation, &rejected.admission.decision);
        let explanation = &mut response.explanation;
        explanation.summary = format!(
            "{} {} Free now: {}.",
            explanation.summary,
            why.summary,
            words::free_now(&node)
        );
        explanation.fixes = why
            .fixes
            .into_iter()
            .filter_map(|fix| match &fix.change {
                // Checked against a configuration that is not the node's.
                Change::Kubelet(_) if !rejected.kubelet_known => None,
                // This request chose its own policy: another one is the
                // request's to ask for, not the kubelet's.
                Change::Kubelet(fields) if rejected.overridden && fields.len() == 1 => fields
                    .get("topologyManagerPolicy")
                    .and_then(Value::as_str)
                    .map(|policy| format!("Ask with policy {policy}: {}.", fix.outcome)),
                _ => Some(fix.description),
            })
            .collect();
        response
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_engine::ContainerPlacement;
    use topoalign_model::{Machine, UniformMachine};

    use super::cpuset_mems;

    fn machine(ids: [usize; 2]) -> Machine {
        UniformMachine::new(2, 2)
            .numa_ids(ids)
            .build()
            .expect("a valid machine")
    }

    fn placement(init: bool, memory_numa: Option<Vec<usize>>) -> ContainerPlacement {
        ContainerPlacement {
            name: if init { "init" } else { "app" }.to_owned(),
            init,
            cpus: None,
            memory_numa,
            devices: BTreeMap::new(),
        }
    }

    /// `cpuset.mems` names NUMA nodes as the kernel does: on {0, 64} the
    /// engine's node 1 is written 64, never 1 (a node that may not exist).
    #[test]
    fn cpuset_mems_are_the_machines_own_ids() {
        let pinned = [placement(true, Some(vec![0])), placement(false, Some(vec![1]))];
        let unpinned = [placement(false, None)];
        assert_eq!(cpuset_mems(&machine([0, 1]), &pinned), vec![1]);
        assert_eq!(cpuset_mems(&machine([0, 64]), &pinned), vec![64]);
        assert_eq!(cpuset_mems(&machine([0, 1]), &unpinned), vec![0, 1]);
        assert_eq!(cpuset_mems(&machine([0, 64]), &unpinned), vec![0, 64]);
    }
}

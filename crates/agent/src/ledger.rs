//! The ledger: the node's allocations, durable.
//!
//! Owns: the engine [`Node`] as the journal's records make it, the list of
//! held allocations, allocation ids, and the rule that nothing changes in
//! memory before it is on disk. Must not touch: processes, cgroups,
//! metrics or HTTP (the [`crate::NodeAgent`] around it).
//!
//! The engine is deterministic, so the journal holds the *history* —
//! every admission (its manifest, with its uid) and every release, in
//! order — and replaying it through a fresh node reproduces the state
//! exactly. Each admission also records the placement it got, and recovery
//! checks the replay gives the same: a changed machine or configuration is
//! found, not silently applied to running workloads.
//!
//! A change is decided on a clone of the node, written and synced, and only
//! then becomes the ledger's state. A failed write leaves the state as it
//! was and *poisons* the ledger (after a failed sync the file's state is
//! uncertain), so it refuses changes until a restart recovers.
//!
//! When the journal has grown past a bound, its history is dropped: a new
//! journal (a new *epoch*) is written atomically holding a start record
//! and, when allocations are held, one snapshot record — the engine's
//! state in the kubelet checkpoints' shape and the held allocations —
//! which recovery restores through the engine's restore path (a
//! restarting kubelet's) before replaying what follows. So recovery costs
//! what the live state costs plus at most the bound's records, whatever
//! history came before (a released allocation is never replayed again).
//! The bound ([`Compaction`]) is on the journal's records, the bytes
//! written since the snapshot, and the snapshot's age: whichever is
//! reached first.
//!
//! The snapshot is written as the new journal (temporary file, sync,
//! rename, directory sync — [`Journal::create_with`]), so there is no
//! step between "snapshot written" and "old journal dropped": a crash
//! at any point leaves the old journal, which replays to the same state,
//! or the new one. The crash tests stop the writer at every step.

use std::fmt::Write as _;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use topoalign_engine::{ContainerPlacement, Decision, Node, NodeConfig, StartupError, TopologyPolicyName};
use topoalign_model::{Machine, Pod};

use crate::journal::{Corruption, DiscardedTail, Journal, JournalError};
use crate::record::{AdmitRecord, Holder, Record};
use crate::request::Workload;

/// The journal's file name in the state directory.
pub const JOURNAL_FILE: &str = "journal";

/// When the ledger starts a new journal holding only the live state
/// (compaction): once the journal holds `records` records, or the records
/// written since the last compaction hold `bytes` bytes (the snapshot's
/// own size is not counted, so a large live state does not compact at
/// every change), or the journal is `age` old and holds any record since
/// (checked at each change: a journal nothing is written to costs no more
/// to restart tomorrow than today). Restart reads one snapshot and fewer
/// than `records` records after it, whatever the history behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    pub records: u64,
    pub bytes: u64,
    pub age: Duration,
}

impl Default for Compaction {
    /// 4,096 records, 8 MiB, 10 minutes.
    fn default() -> Compaction {
        Compaction {
            records: 4096,
            bytes: 8 << 20,
            age: Duration::from_secs(600),
        }
    }
}

/// Why the ledger refused.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The kubelet would refuse this machine and configuration.
    #[error("the kubelet would not start with this configuration on this machine: {0}")]
    Startup(#[from] StartupError),
    /// The state file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// Acknowledged state is damaged; the text says what survives and what
    /// is lost.
    #[error("{0}")]
    Corrupt(String),
    /// The journal does not replay to what it recorded.
    #[error("{0}")]
    Replay(String),
    /// A request that cannot be admitted as written.
    #[error("{0}")]
    Request(String),
    /// A request that clashes with a held allocation.
    #[error("{0}")]
    Conflict(String),
    /// An earlier write failed; no changes until a restart recovers.
    #[error(
        "the agent's state directory failed earlier ({0}); it refuses changes until restarted, when recovery \
         reads what reached the disk"
    )]
    Poisoned(String),
}

/// An allocation the node holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub record: AdmitRecord,
    /// `namespace/name`.
    pub key: String,
}

impl Held {
    /// The allocation id.
    pub fn id(&self) -> &str {
        &self.record.id
    }
}

/// The outcome of [`Ledger::admit`].
#[derive(Clone, Debug)]
pub struct Admission {
    /// The pod as the engine saw it.
    pub pod: Pod,
    /// Its manifest, as admitted (with the id as uid).
    pub manifest: serde_json::Value,
    pub decision: Decision,
    /// The new allocation's id when admitted (it is durable then).
    pub id: Option<String>,
}

/// What opening the ledger found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// No journal existed: a new, empty state.
    pub created: bool,
    pub epoch: u64,
    /// Acknowledged records replayed.
    pub records: u64,
    /// Allocations held after replay, by id.
    pub restored: Vec<String>,
    /// An unacknowledged record dropped from the end of the journal.
    pub discarded_tail: Option<DiscardedTail>,
    /// The machine or configuration the journal was written for, when it
    /// differs from this one (replay still gave the recorded placements).
    pub previous_node: Option<String>,
}

/// The node's allocations, backed by the journal.
#[derive(Debug)]
pub struct Ledger {
    genesis: Node,
    node: Node,
    journal: Journal,
    held: Vec<Held>,
    next_id: u64,
    fingerprint: String,
    description: String,
    compaction: Compaction,
    /// The current journal's records and length as written at its start
    /// (start record, snapshot), and when this process started or opened
    /// it: growth and age are measured from there.
    epoch_base: (u64, u64),
    epoch_started: Instant,
    poisoned: Option<String>,
}

impl Ledger {
    /// Starts the node and recovers its allocations from
    /// `<state_dir>/journal` (created when absent).
    ///
    /// # Errors
    /// [`LedgerError::Startup`], [`LedgerError::Io`],
    /// [`LedgerError::Corrupt`] (with what survives and what is lost) and
    /// [`LedgerError::Replay`]; the caller must not serve on any of them.
    pub fn open(state_dir: &Path, machine: Machine, config: NodeConfig) -> Result<(Ledger, Recovery), LedgerError> {
        let description = format!(
            "{} CPUs, {} NUMA nodes; topology manager {} ({} scope), CPU manager {}, memory manager {}",
            machine.cpus().len(),
            machine.numa_nodes().len(),
            config.topology_policy,
            config.topology_scope,
            config.cpu_policy,
            config.memory_policy,
        );
        let genesis = Node::start(machine, config)?;
        let fingerprint = crate::fingerprint::fingerprint(&genesis);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .map_err(|e| {
                LedgerError::Io(format!(
                    "cannot create the state directory {}: {e}",
                    state_dir.display()
                ))
            })?;
        let path = state_dir.join(JOURNAL_FILE);
        let io = |e: JournalError| LedgerError::Io(e.to_string());
        let recovered = match Journal::open(&path) {
            Ok(recovered) => recovered,
            Err(JournalError::Corrupt(corruption)) => {
                return Err(LedgerError::Corrupt(describe_damage(&corruption)));
            }
            Err(error) => return Err(io(error)),
        };
        let Some(recovered) = recovered else {
            let journal = Journal::create(&path, 0, 1).map_err(io)?;
            let mut ledger = Ledger::new(genesis, journal, fingerprint, description);
            ledger.append_start()?;
            ledger.epoch_begins();
            let recovery = Recovery {
                created: true,
                ..Recovery::default()
            };
            return Ok((ledger, recovery));
        };
        let commit = recovered.journal.commit();
        let mut ledger = Ledger::new(genesis, recovered.journal, fingerprint, description);
        ledger.next_id = commit.next_id.max(1);
        let mut recovery = Recovery {
            epoch: commit.epoch,
            records: recovered.records.len() as u64,
            discarded_tail: recovered.discarded_tail,
            ..Recovery::default()
        };
        let mut started = false;
        // The epoch's head: its start record and snapshot, from which
        // growth is measured.
        let (mut head, mut head_length, mut in_head) = (0, crate::journal::DATA_START, true);
        for (index, payload) in recovered.records.iter().enumerate() {
            let heading = ledger.replay(index + 1, payload, &mut recovery, &mut started)?;
            in_head &= heading;
            if in_head {
                head += 1;
                head_length += 8 + payload.len() as u64;
            }
        }
        ledger.epoch_base = (head, head_length);
        recovery.restored = ledger.held.iter().map(|h| h.id().to_string()).collect();
        // An empty node needs no history: start a clean journal unless it
        // already is one (just the start record, for this node).
        let clean = started && recovery.records == 1 && recovery.previous_node.is_none();
        if ledger.held.is_empty() && !clean {
            ledger.new_epoch()?;
        } else {
            // A long history behind live allocations (a journal written
            // before snapshots, or a crash before compaction): compact now
            // so the next start costs the live state only.
            ledger.compact_when_grown()?;
        }
        Ok((ledger, recovery))
    }

    fn new(genesis: Node, journal: Journal, fingerprint: String, description: String) -> Ledger {
        Ledger {
            node: genesis.clone(),
            genesis,
            journal,
            held: Vec::new(),
            next_id: 1,
            fingerprint,
            description,
            compaction: Compaction::default(),
            epoch_base: (0, crate::journal::DATA_START),
            epoch_started: Instant::now(),
            poisoned: None,
        }
    }

    /// The node as the held allocations make it.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The node with nothing allocated.
    #[cfg(test)]
    pub(crate) fn empty_node(&self) -> &Node {
        &self.genesis
    }

    /// Held allocations, in admission order.
    pub fn held(&self) -> &[Held] {
        &self.held
    }

    /// One held allocation.
    pub fn get(&self, id: &str) -> Option<&Held> {
        self.held.iter().find(|h| h.id() == id)
    }

    /// The journal's path.
    pub fn journal_path(&self) -> &Path {
        self.journal.path()
    }

    /// Acknowledged records in the current journal, and its epoch.
    pub fn journal_extent(&self) -> (u64, u64) {
        let commit = self.journal.commit();
        (commit.records, commit.epoch)
    }

    /// Compacts the journal at other bounds than [`Compaction::default`]
    /// (a record bound of at least 1).
    pub fn set_compaction(&mut self, compaction: Compaction) {
        self.compaction = Compaction {
            records: compaction.records.max(1),
            ..compaction
        };
    }

    /// Compacts once the journal holds `records` records; the tests make
    /// it small.
    #[cfg(test)]
    pub(crate) fn set_compaction_records(&mut self, records: u64) {
        self.set_compaction(Compaction {
            records,
            ..self.compaction
        });
    }

    /// Admits `workload` held by `holder`: decides on a copy of the node;
    /// if admitted, records it durably and only then adopts it.
    ///
    /// # Errors
    /// [`LedgerError::Request`] for a manifest the engine cannot read or a
    /// device resource the machine lacks, [`LedgerError::Conflict`] for a
    /// name already held, [`LedgerError::Io`] / [`LedgerError::Poisoned`]
    /// when the state cannot be written (nothing is admitted then).
    pub fn admit(&mut self, workload: &Workload, holder: Option<Holder>) -> Result<Admission, LedgerError> {
        self.check_writable()?;
        let id = format!("a{}", self.next_id);
        let manifest = with_identity(&workload.manifest, &id, workload.unnamed);
        let pod = topoalign_k8s::pod_from_value(&manifest, &id).map_err(|e| {
            LedgerError::Request(if e.path().is_empty() {
                e.message()
            } else {
                format!("{}: {}", e.path(), e.message())
            })
        })?;
        let machine_devices = self.node.machine().devices();
        for resource in &workload.requested_devices {
            if !machine_devices.contains_key(resource) {
                let known: Vec<&str> = machine_devices.keys().map(String::as_str).collect();
                return Err(LedgerError::Request(format!(
                    "this node has no {resource} devices (device resources here: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        }
        if let Some(other) = self.held.iter().find(|h| h.key == pod.key()) {
            return Err(LedgerError::Conflict(format!(
                "{} is already allocated (id {}): release it first, or use another name",
                other.key,
                other.id()
            )));
        }
        let mut next = self.node.clone();
        let policy = workload.policy().map_err(|e| LedgerError::Request(e.0))?;
        let decision = decide(&mut next, pod.clone(), policy)?;
        if !decision.admitted() {
            return Ok(Admission {
                pod,
                manifest,
                decision,
                id: None,
            });
        }
        let record = AdmitRecord {
            id: id.clone(),
            pod: manifest.clone(),
            policy,
            holder,
            placements: decision.containers.clone(),
        };
        self.next_id += 1;
        self.append(&Record::Admit(record.clone()))?;
        self.node = next;
        self.held.push(Held { record, key: pod.key() });
        self.compact_after_change();
        Ok(Admission {
            pod,
            manifest,
            decision,
            id: Some(id),
        })
    }

    /// Releases allocation `id`, durably; `Ok(None)` when it is not held.
    ///
    /// # Errors
    /// [`LedgerError::Io`] / [`LedgerError::Poisoned`]: nothing is released
    /// then.
    pub fn release(&mut self, id: &str, reason: &str) -> Result<Option<Held>, LedgerError> {
        let Some(position) = self.held.iter().position(|h| h.id() == id) else {
            return Ok(None);
        };
        self.check_writable()?;
        let mut next = self.node.clone();
        next.remove(id);
        self.append(&Record::Release {
            id: id.to_string(),
            reason: reason.to_string(),
        })?;
        self.node = next;
        let held = self.held.remove(position);
        self.compact_after_change();
        Ok(Some(held))
    }

    fn check_writable(&self) -> Result<(), LedgerError> {
        match &self.poisoned {
            Some(reason) => Err(LedgerError::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    fn append(&mut self, record: &Record) -> Result<(), LedgerError> {
        let payload =
            serde_json::to_vec(record).map_err(|e| LedgerError::Io(format!("cannot encode a record: {e}")))?;
        self.journal.append(&payload, self.next_id).map_err(|e| {
            let text = e.to_string();
            self.poisoned = Some(text.clone());
            LedgerError::Io(text)
        })
    }

    fn append_start(&mut self) -> Result<(), LedgerError> {
        self.append(&Record::Start {
            fingerprint: self.fingerprint.clone(),
            node: self.description.clone(),
        })
    }

    /// [`Ledger::compact_when_grown`] after a change. The change is
    /// already durable in the old journal and is answered as made: a
    /// failed compaction has poisoned the ledger (the next change is
    /// refused, naming the failure, until a restart recovers), but must
    /// not report a held allocation as refused, nor a release as failed.
    fn compact_after_change(&mut self) {
        if let Err(error) = self.compact_when_grown() {
            debug_assert!(self.poisoned.is_some(), "a failed compaction poisons: {error}");
        }
    }

    /// Whether the journal has grown, or aged, past [`Compaction`].
    fn grown(&self) -> bool {
        let commit = self.journal.commit();
        let (base_records, base_length) = self.epoch_base;
        commit.records >= self.compaction.records
            || commit.length.saturating_sub(base_length) >= self.compaction.bytes
            || (commit.records > base_records && self.epoch_started.elapsed() >= self.compaction.age)
    }

    /// Marks the current journal as the start of an epoch.
    fn epoch_begins(&mut self) {
        let commit = self.journal.commit();
        self.epoch_base = (commit.records, commit.length);
        self.epoch_started = Instant::now();
    }

    /// Compacts the journal once it has grown past [`Compaction`]: a new
    /// epoch holding the live state only. The change that triggered it is
    /// already durable in the old journal; a failure here poisons the
    /// ledger like any failed write.
    fn compact_when_grown(&mut self) -> Result<(), LedgerError> {
        if !self.grown() {
            return Ok(());
        }
        if self.held.is_empty() {
            return self.new_epoch();
        }
        let encode = |record: &Record| {
            serde_json::to_vec(record).map_err(|e| LedgerError::Io(format!("cannot encode a record: {e}")))
        };
        let start = encode(&Record::Start {
            fingerprint: self.fingerprint.clone(),
            node: self.description.clone(),
        })?;
        let state = serde_json::to_value(topoalign_nrt::StateRecord::of(&self.node))
            .map_err(|e| LedgerError::Io(format!("cannot encode a record: {e}")))?;
        let snapshot = encode(&Record::Snapshot {
            state,
            held: self.held.iter().map(|h| h.record.clone()).collect(),
        })?;
        let commit = self.journal.commit();
        let path = self.journal.path().to_path_buf();
        match Journal::create_with(&path, commit.epoch + 1, self.next_id, &[start, snapshot]) {
            Ok(journal) => {
                self.journal = journal;
                self.epoch_begins();
                Ok(())
            }
            Err(error) => {
                let text = error.to_string();
                self.poisoned = Some(text.clone());
                Err(LedgerError::Io(text))
            }
        }
    }

    /// Replaces the journal with a new, empty one (the node holds nothing).
    fn new_epoch(&mut self) -> Result<(), LedgerError> {
        let commit = self.journal.commit();
        let path = self.journal.path().to_path_buf();
        match Journal::create(&path, commit.epoch + 1, self.next_id) {
            Ok(journal) => self.journal = journal,
            Err(error) => {
                let text = error.to_string();
                self.poisoned = Some(text.clone());
                return Err(LedgerError::Io(text));
            }
        }
        self.node = self.genesis.clone();
        self.append_start()?;
        self.epoch_begins();
        Ok(())
    }

    /// Applies one journal record to the node, checking it replays;
    /// whether it was a start record or a snapshot.
    fn replay(
        &mut self,
        index: usize,
        payload: &[u8],
        recovery: &mut Recovery,
        started: &mut bool,
    ) -> Result<bool, LedgerError> {
        let path = self.journal.path().display().to_string();
        let record: Record = serde_json::from_slice(payload).map_err(|e| {
            LedgerError::Replay(format!(
                "record {index} of {path} has a valid checksum but cannot be read ({e}); was it written by a \
                 newer topoalign?"
            ))
        })?;
        match record {
            Record::Start { fingerprint, node } => {
                *started |= index == 1;
                if fingerprint != self.fingerprint {
                    recovery.previous_node = Some(node);
                }
                return Ok(true);
            }
            Record::Admit(record) => {
                let changed = |what: String| {
                    LedgerError::Replay(format!(
                        "record {index} of {path} does not replay: allocation {} {what}. The machine or the kubelet \
                         configuration differs from the one the state was written for{}. Restore them, or — once \
                         no workload uses the recorded allocations — move {path} away to start empty.",
                        record.id,
                        recovery
                            .previous_node
                            .as_deref()
                            .map(|n| format!(" (then: {n}; now: {})", self.description))
                            .unwrap_or_default(),
                    ))
                };
                let pod = topoalign_k8s::pod_from_value(&record.pod, &record.id)
                    .map_err(|e| changed(format!("has a manifest that no longer reads: {}", e.message())))?;
                let key = pod.key();
                let decision = decide(&mut self.node, pod, record.policy)
                    .map_err(|e| changed(format!("({key}) cannot be decided: {e}")))?;
                if let Some(rejection) = &decision.rejection {
                    return Err(changed(format!(
                        "({key}) was admitted, but is now rejected: {}: {}",
                        rejection.reason, rejection.message
                    )));
                }
                let placements: Vec<ContainerPlacement> = decision.containers.clone();
                if placements != record.placements {
                    return Err(changed(format!(
                        "({key}) was given {}, but is now given {}",
                        describe_placements(&record.placements),
                        describe_placements(&placements)
                    )));
                }
                if let Some(number) = record.id.strip_prefix('a').and_then(|n| n.parse::<u64>().ok()) {
                    self.next_id = self.next_id.max(number + 1);
                }
                self.held.push(Held { record, key });
            }
            Record::Snapshot { state, held } => {
                let damaged = |what: String| {
                    LedgerError::Replay(format!(
                        "record {index} of {path} (a snapshot of the allocations) cannot be restored: {what}. The \
                         machine or the kubelet configuration differs from the one the state was written for{}.",
                        recovery
                            .previous_node
                            .as_deref()
                            .map(|n| format!(" (then: {n}; now: {})", self.description))
                            .unwrap_or_default(),
                    ))
                };
                let view = <topoalign_nrt::StateView<'_> as serde::Deserialize>::deserialize(&state)
                    .map_err(|e| damaged(e.to_string()))?;
                // NUMA ids as `StateRecord` wrote them: the machine's own.
                let snapshot = view
                    .to_snapshot_on(self.genesis.machine())
                    .map_err(|e| damaged(e.to_string()))?;
                let mut node = self.genesis.clone();
                node.restore(snapshot).map_err(|e| damaged(e.to_string()))?;
                let mut restored = Vec::with_capacity(held.len());
                for record in held {
                    let pod = topoalign_k8s::pod_from_value(&record.pod, &record.id)
                        .map_err(|e| damaged(format!("allocation {}: {}", record.id, e.message())))?;
                    if !node.pods().iter().any(|p| p.uid == record.id) {
                        return Err(damaged(format!(
                            "allocation {} is not in the engine's state",
                            record.id
                        )));
                    }
                    if let Some(number) = record.id.strip_prefix('a').and_then(|n| n.parse::<u64>().ok()) {
                        self.next_id = self.next_id.max(number + 1);
                    }
                    restored.push(Held { key: pod.key(), record });
                }
                self.node = node;
                self.held = restored;
                return Ok(true);
            }
            Record::Release { id, .. } => {
                let position = self.held.iter().position(|h| h.id() == id).ok_or_else(|| {
                    LedgerError::Replay(format!(
                        "record {index} of {path} releases allocation {id}, which is not held at that point"
                    ))
                })?;
                self.node.remove(&id);
                self.held.remove(position);
            }
        }
        Ok(false)
    }
}

/// Admits `pod` on `node`, under a policy override if one is named.
fn decide(node: &mut Node, pod: Pod, policy: Option<TopologyPolicyName>) -> Result<Decision, LedgerError> {
    match policy {
        None => Ok(node.admit(pod)),
        Some(policy) => node
            .admit_with_topology_policy(pod, policy)
            .map_err(|e| LedgerError::Request(format!("topology policy {policy} cannot be used on this node: {e}"))),
    }
}

/// The manifest with `metadata.uid` = the allocation id (and
/// `metadata.name` too when the request named none).
fn with_identity(manifest: &Value, id: &str, unnamed: bool) -> Value {
    let mut manifest = manifest.clone();
    if let Value::Object(object) = &mut manifest {
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        if let Value::Object(metadata) = metadata {
            metadata.insert("uid".into(), json!(id));
            if unnamed {
                metadata.insert("name".into(), json!(id));
            }
        }
    }
    manifest
}

/// `main: CPUs 2-3, memory on NUMA [0], nvidia.com/gpu gpu1`.
pub fn describe_placements(placements: &[ContainerPlacement]) -> String {
    let parts: Vec<String> = placements
        .iter()
        .map(|p| {
            let mut text = format!("{}: ", p.name);
            match &p.cpus {
                Some(cpus) => {
                    let _ = write!(text, "CPUs {cpus}");
                }
                None => text.push_str("shared CPUs"),
            }
            if let Some(nodes) = &p.memory_numa {
                let _ = write!(text, ", memory on NUMA {nodes:?}");
            }
            for (resource, ids) in &p.devices {
                let _ = write!(text, ", {resource} {}", ids.join(","));
            }
            text
        })
        .collect();
    parts.join("; ")
}

/// Describes damage for a person: where, what the intact records hold,
/// what is lost, and what to do.
fn describe_damage(corruption: &Corruption) -> String {
    let mut text = format!("{corruption}.\n");
    let intact = corruption.intact.len() as u64;
    match &corruption.commit {
        Some(commit) => {
            let _ = writeln!(
                text,
                "The commit header acknowledges {} records ({} bytes; the file has {}); {intact} are intact, {} \
                 cannot be read.",
                commit.records,
                commit.length,
                corruption.file_length,
                commit.records.saturating_sub(intact)
            );
        }
        None => {
            let _ = writeln!(
                text,
                "Neither commit header can be read, so how many records were acknowledged is unknown; {intact} \
                 records can be read."
            );
        }
    }
    // Which allocations the intact records leave held (decoding leniently:
    // this is a report, not a recovery).
    let mut held: Vec<(String, String)> = Vec::new();
    for payload in &corruption.intact {
        match serde_json::from_slice::<Record>(payload) {
            Ok(Record::Admit(record)) => {
                let name = record
                    .pod
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string();
                held.push((
                    record.id.clone(),
                    format!("{name}: {}", describe_placements(&record.placements)),
                ));
            }
            Ok(Record::Release { id, .. }) => held.retain(|(held_id, _)| *held_id != id),
            _ => {}
        }
    }
    if held.is_empty() {
        text.push_str("The intact records leave no allocation held.\n");
    } else {
        let _ = writeln!(text, "The intact records leave {} allocations held:", held.len());
        for (id, what) in &held {
            let _ = writeln!(text, "  {id} ({what})");
        }
    }
    let _ = writeln!(
        text,
        "Lost: whatever the unreadable part admitted or released — allocations made there are unknown to the \
         agent, and some listed above may have been released there."
    );
    let path = corruption.path.display();
    let _ = write!(
        text,
        "The agent does not start on damaged state. Check which workloads still run on these CPUs, then move {path} \
         away (e.g. to {path}.damaged) to start with an empty state."
    );
    text
}

#[cfg(test)]
mod tests;

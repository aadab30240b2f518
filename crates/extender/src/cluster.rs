//! The extender's picture of the cluster and its three verbs.
//!
//! Each known node is an engine [`Node`] in the node's exact state: from the
//! fleet file (`--fleet`: empty nodes) or rebuilt from the node's
//! NodeResourceTopology object and its topoalign exact-state attributes
//! ([`topoalign_nrt::restore`]), plus the pods this extender *assumed* onto
//! it but the node has not reported yet.
//!
//! - `filter`: each candidate node admits the pod, or not, exactly as its
//!   kubelet would (the engine on a copy of its state); a refusal is
//!   reported with its one-line summary, under `FailedAndUnresolvableNodes`
//!   when even an empty node of that shape would refuse (preempting pods
//!   cannot help). Where the kubelet would crash admitting the pod (a
//!   machine with NUMA ids past 63: `Decision::kubelet_panic`), the node
//!   fails with a reason saying so ([`crash_reason`]), never passes. Nodes
//!   the extender does not know pass through.
//! - `prioritize`: the [`Strategy`] score of the placement the engine made.
//!   With `assume_on_prioritize`, the pod is assumed on the best-scored node
//!   (the scheduler's own choice is not sent to extenders that do not
//!   bind); `bind` records the scheduler's actual choice.
//! - An assumed pod holds its resources until the node's NRT object lists it
//!   or `assume_timeout` passes.
//!
//! Speed: nodes in the same state — the same machine and configuration and
//! the same pods, in the same order — give the same answer, so answers are
//! cached by pod shape then state key, and a call for a new shape runs the
//! engine once per distinct trial key ([`Node::trial_key`], kept per node
//! and worked out when the node changes, not per call), spread over worker
//! threads. A node that already holds the pod asked about (same uid:
//! assumed there, or reported; the scheduler asks again after a failed
//! bind) is judged without it, keyed apart with the pod's place. A call
//! for a shape
//! already answered is two map lookups per candidate (names hashed with
//! foldhash, state keys used as their own hash); `expire` scans the
//! assumptions only when the oldest may have expired. A listing of NRT
//! objects rebuilds only the nodes whose spec or state attribute changed
//! (or whose assumptions were disturbed since: moved, expired), and the
//! rebuilding itself ([`Cluster::rebuild`]) needs no cluster, so the
//! poller does it without the lock.
//!
//! Owns: node states, assumptions, the answer cache. No I/O: time comes in
//! as an argument.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topoalign_engine::Node;
use topoalign_model::{Pod, ResourceList};
use topoalign_nrt::NodeResourceTopology;

use crate::dra::{Dra, Judgement, PodClaims};
use crate::scoring::{Scores, Strategy, score_trial};

/// How the extender behaves.
#[derive(Clone, Debug)]
pub struct ExtenderConfig {
    pub strategy: Strategy,
    /// How long an assumed pod holds its resources without the node
    /// reporting it.
    pub assume_timeout: Duration,
    /// Assume the pod on the best-scored node at `prioritize`.
    pub assume_on_prioritize: bool,
    /// `filter` passes only the best-scored node that admits the pod and
    /// assumes the pod there: the scheduler then has one node left and
    /// binds it, so no later `filter` ever judges a state in which the
    /// scheduler's choice differs from the extender's assumption (its own
    /// scoring is bypassed).
    pub choose_in_filter: bool,
    /// Worker threads for engine evaluations.
    pub threads: usize,
}

impl Default for ExtenderConfig {
    fn default() -> Self {
        ExtenderConfig {
            strategy: Strategy::LeastAllocated,
            assume_timeout: Duration::from_secs(30),
            assume_on_prioritize: true,
            choose_in_filter: false,
            threads: 1,
        }
    }
}

/// The engine's answer for one pod shape on one node state.
#[derive(Clone, Debug)]
struct Trial {
    admitted: bool,
    summary: String,
    scores: Scores,
    /// The NUMA nodes of the exclusive CPUs and pinned memory (for
    /// `--dra-align`).
    pinned: BTreeSet<usize>,
}

#[derive(Clone)]
struct KnownNode {
    node: Node,
    spec_key: u64,
    state_key: u64,
    /// [`uid_key`] of each pod the node holds: whether it holds the pod
    /// asked about is one lookup (confirmed on its pods, as keys may
    /// collide).
    holds: KeySet,
    /// One bit per [`uid_key`] in `holds` ([`uid_bit`]; bits of pods
    /// removed may stay): most nodes tell they do not hold a pod without a
    /// lookup.
    held_bits: u64,
    /// The hash of the spec key and [`Node::trial_key`], worked out when
    /// the node changes ([`KnownNode::changed`]), so that a call for a new
    /// pod shape hashes no node.
    trial_key: u64,
}

impl KnownNode {
    fn new(node: Node, spec_key: u64, state_key: u64) -> KnownNode {
        let holds: KeySet = node.pods().iter().map(|p| uid_key(&p.uid)).collect();
        let held_bits = holds.iter().fold(0, |bits, &key| bits | uid_bit(key));
        let trial_key = hash(&(spec_key, node.trial_key()));
        KnownNode {
            node,
            spec_key,
            state_key,
            holds,
            held_bits,
            trial_key,
        }
    }

    /// `node` changed (a pod admitted or removed): its trial key again.
    fn changed(&mut self) {
        self.trial_key = hash(&(self.spec_key, self.node.trial_key()));
    }

    /// The place of the pod `uid` (`key`: its [`uid_key`]) among the
    /// node's pods, when the node holds it.
    fn place_of(&self, uid: &str, key: u64) -> Option<usize> {
        if self.held_bits & uid_bit(key) == 0 || !self.holds.contains(&key) {
            return None;
        }
        self.node.pods().iter().position(|p| p.uid == uid)
    }

    /// The node's state as an admission of the pod `uid` meets it
    /// (`held`: whether any node may hold a pod of that uid, see
    /// [`Held::may_hold`]).
    fn state_for(&self, uid: &str, key: u64, held: bool) -> State {
        match held.then(|| self.place_of(uid, key)).flatten() {
            None => State {
                key: self.state_key,
                spec: self.spec_key,
                holds_pod: false,
            },
            Some(place) => State {
                key: hash(&(self.state_key, "holding", place)),
                spec: self.spec_key,
                holds_pod: true,
            },
        }
    }
}

/// How many known nodes hold each pod uid ([`uid_key`]; counted over the
/// nodes' [`KnownNode::holds`], so a removed pod may still count): a call
/// for a pod no node holds — almost every call — checks no node for it.
/// Kept by [`Cluster::put_node`], [`Cluster::drop_node`], [`admit_into`]
/// and [`Cluster::unassume`], the only places that change `holds`.
#[derive(Default)]
struct Held(Keyed<u32>);

impl Held {
    /// Whether some node may hold the pod of this [`uid_key`].
    fn may_hold(&self, key: u64) -> bool {
        !self.0.is_empty() && self.0.contains_key(&key)
    }

    fn add(&mut self, key: u64) {
        *self.0.entry(key).or_default() += 1;
    }

    fn sub(&mut self, key: u64) {
        if let Some(count) = self.0.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.0.remove(&key);
            }
        }
    }
}

/// A candidate node's state as an admission of one pod meets it.
#[derive(Clone, Copy, Debug)]
struct State {
    /// The answer cache's key under the pod's shape: the node's state key;
    /// for a node that already holds a pod of the asked pod's uid
    /// (assumed or reported: the scheduler asks again after a failed bind
    /// or a Permit rejection), that key and the pod's place among the
    /// node's — such a node is judged without that pod (its own
    /// resources never block it), so it shares no answer with a node in
    /// the same state holding another pod there.
    key: u64,
    spec: u64,
    /// The node holds the pod asked about: its answer is a trial on a copy
    /// without it.
    holds_pod: bool,
}

/// An NRT object's node rebuilt by [`Cluster::rebuild`], for
/// [`Cluster::install`].
pub struct Rebuilt {
    name: String,
    result: Result<RebuiltNode, Unrestorable>,
}

impl Rebuilt {
    /// The warnings of the node spec this rebuild started
    /// ([`topoalign_nrt::warnings::warnings`]: start hazards, a kubelet
    /// that crashes on NUMA ids past 63), when the cluster (`started`: its
    /// nodes by spec key) has not started it before.
    fn new_spec_hazards(&self, started: &HashMap<u64, Node>) -> impl Iterator<Item = String> {
        match &self.result {
            Ok(RebuiltNode {
                known,
                empty: Some(node),
                ..
            }) if !started.contains_key(&known.spec_key) => topoalign_nrt::warnings::warnings(node),
            _ => Vec::new(),
        }
        .into_iter()
    }
}

struct RebuiltNode {
    /// The node and its keys, worked out here (on the worker threads of
    /// [`Cluster::rebuild_all`]), not while installing under the lock.
    known: KnownNode,
    /// The node of this spec as started, before the state was restored,
    /// when this rebuild started it (not found in its [`Starts`]).
    empty: Option<Node>,
    spec_text: Arc<str>,
    state_text: String,
}

/// Started nodes by spec key (the hash of an NRT object's spec text):
/// [`Cluster::rebuild_with`] starts each spec's node once. With them the
/// spec texts, which the nodes of one spec share (a text of kilobytes that
/// thousands of nodes would otherwise each keep a copy of in [`Applied`]).
#[derive(Clone, Default)]
pub struct Starts {
    nodes: HashMap<u64, Node>,
    spec_texts: HashMap<u64, Arc<str>>,
}

/// Why an object's node cannot be rebuilt: the node passes through for
/// `reason`; `error` when the object is malformed (not merely another
/// exporter's, or of unknown state).
struct Unrestorable {
    reason: String,
    error: Option<String>,
}

/// What a node's state was last rebuilt from ([`Cluster::apply_nrt`]):
/// the only parts of its NRT object the rebuild reads, and the pods the
/// object listed.
struct Applied {
    /// Shared by the nodes of one spec (see [`Starts`]).
    spec_text: Arc<str>,
    state_text: String,
    /// The [`uid_key`]s of the pods the object listed (the rebuilt node's
    /// [`KnownNode::holds`] before any assumption was laid on it): a key
    /// only, no copy of each uid. A uid whose key is here may still be
    /// another pod's (two uids of one key): [`Cluster::unchanged`] then
    /// rebuilds the node, which is exact, only not needed.
    reported: KeySet,
    /// A pod assumed on the node was taken off it since (moved elsewhere or
    /// expired): its state is no longer the rebuilt one plus assumptions
    /// laid in order.
    disturbed: bool,
}

struct Assumption {
    node: String,
    pod: Pod,
    since: Instant,
    /// When it was made, among all assumptions: they are laid over a
    /// node's reported state in this order, the order the kubelet meets
    /// the pods (binding order).
    order: u64,
    /// Its Binding was made or refused: it no longer holds back the
    /// Bindings of pods assumed after it on its node
    /// ([`Cluster::binding_waits_for_earlier`]).
    binding_settled: bool,
}

/// What `filter` decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterOutcome {
    /// Candidates that pass, in request order (unknown nodes included).
    /// With `choose_in_filter`, only the chosen node: the others that
    /// admit the pod are in no field (kube-scheduler keeps only the nodes
    /// passed).
    pub passed: Vec<String>,
    pub failed: BTreeMap<String, String>,
    pub unresolvable: BTreeMap<String, String>,
}

/// Nodes of one node spec whose kubelet configuration is dangerous, and
/// the warning ([`Cluster::warnings`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeWarning {
    /// The nodes, by name.
    pub nodes: Vec<String>,
    pub warning: String,
}

impl std::fmt::Display for NodeWarning {
    /// `node a: warning: …`, or `nodes a, b and 3 more (5 of one kubelet
    /// configuration): warning: …` (ten names at most).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMED: usize = 10;
        match self.nodes.as_slice() {
            [one] => write!(f, "node {one}")?,
            nodes => {
                write!(f, "nodes {}", nodes[..nodes.len().min(NAMED)].join(", "))?;
                if nodes.len() > NAMED {
                    write!(f, " and {} more", nodes.len() - NAMED)?;
                }
                write!(f, " ({} of one kubelet configuration)", nodes.len())?;
            }
        }
        write!(f, ": warning: {}", self.warning)
    }
}

/// Why a pod cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("invalid pod: {0}")]
    Pod(String),
    #[error("invalid NodeResourceTopology {name}: {message}")]
    Nrt { name: String, message: String },
    /// An engine evaluation panicked: a bug, reported instead of an
    /// answer (nothing of it is cached).
    #[error("internal error: the engine failed evaluating the pod: {0}")]
    Engine(String),
}

/// A node group of the fleet file the kubelet would not start
/// ([`Cluster::from_fleet`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{group}: {source}")]
pub struct FleetStartError {
    /// The group's name in the fleet file.
    pub group: String,
    #[source]
    pub source: topoalign_nrt::RestoreError,
}

/// A worker thread panicked ([`Cluster::rebuild_all`]): a bug, reported
/// with the panic's text instead of an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WorkerPanic {
    pub message: String,
}

/// `bind` for a pod no `filter` or `prioritize` has seen (an extender
/// restarted between the scheduler's calls, or the pod's entry expired).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pod {uid} was not seen by filter or prioritize")]
pub struct UnseenPod {
    pub uid: String,
}

/// What [`Cluster::sync_nrt`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Objects that could not be taken (their nodes keep their last
    /// state).
    pub errors: Vec<ClusterError>,
    /// Nodes listed before and not any more, now forgotten.
    pub removed: Vec<String>,
    /// Nodes now passed through (no exact state), with the reason: an
    /// object saying its state is unknown, or another exporter's object.
    /// Each only when its reason is new.
    pub passed: Vec<(String, String)>,
    /// Warnings about node specs started for the first time (a kubelet
    /// configuration the kubelet runs with but answers dangerously on,
    /// `topoalign_engine::StartHazard`): the node that brought the spec,
    /// and the warning. The nodes are judged as their kubelets would judge.
    pub hazards: Vec<(String, String)>,
}

/// The cluster as the extender sees it.
pub struct Cluster {
    config: ExtenderConfig,
    /// Changed only through [`Cluster::put_node`] and
    /// [`Cluster::drop_node`] (and `holds` as [`Held`] says).
    nodes: Named<KnownNode>,
    held: Held,
    /// An empty node per spec key, for "would preemption help?".
    empty: HashMap<u64, Node>,
    /// The spec text of each spec key of an NRT object (see [`Starts`]).
    spec_texts: HashMap<u64, Arc<str>>,
    assumed: HashMap<String, Assumption>,
    /// No assumption is older than this (it may be younger: removals do
    /// not move it), so `expire` scans only when something may expire.
    oldest_assumed: Option<Instant>,
    /// Assumptions made so far (the next one's `order`).
    assumptions_made: u64,
    /// Pods seen by `filter` / `prioritize`, for `bind` (which sends only
    /// names): uid → pod and when it was seen.
    seen: HashMap<String, (Pod, Instant)>,
    /// No entry of `seen` is older than this (as `oldest_assumed`).
    oldest_seen: Option<Instant>,
    /// The answer cache: pod shape → node state → the engine's answer.
    trials: Keyed<Keyed<Trial>>,
    /// Answers in `trials`.
    trial_count: usize,
    empty_trials: HashMap<(u64, u64), bool>,
    /// Nodes the last [`Cluster::sync_nrt`] listed.
    listed: HashSet<String>,
    /// Nodes whose object could not be restored, passed through, and why.
    passing: HashMap<String, String>,
    /// Nodes rebuilt from an NRT object, and from what.
    applied: Named<Applied>,
    /// `--dra-align`: the cluster's DRA objects ([`Cluster::enable_dra`]).
    dra: Option<Dra>,
}

/// Answers kept before the cache is dropped and rebuilt.
const TRIAL_CACHE_LIMIT: usize = 500_000;

impl Cluster {
    /// An empty cluster.
    pub fn new(config: ExtenderConfig) -> Cluster {
        Cluster {
            config,
            nodes: Named::default(),
            held: Held::default(),
            empty: HashMap::new(),
            spec_texts: HashMap::new(),
            assumed: HashMap::new(),
            oldest_assumed: None,
            assumptions_made: 0,
            seen: HashMap::new(),
            oldest_seen: None,
            trials: Keyed::default(),
            trial_count: 0,
            empty_trials: HashMap::new(),
            listed: HashSet::new(),
            passing: HashMap::new(),
            applied: Named::default(),
            dra: None,
        }
    }

    /// A cluster of the fleet file's nodes, all empty, each under its own
    /// kubelet configuration.
    ///
    /// # Errors
    /// [`FleetStartError`]: the node group the kubelet would not start,
    /// and why.
    pub fn from_fleet(fleet: &topoalign_fleet::Fleet, config: ExtenderConfig) -> Result<Cluster, FleetStartError> {
        let mut cluster = Cluster::new(config);
        for (g, group) in fleet.groups.iter().enumerate() {
            let node = topoalign_nrt::start_node(&group.spec).map_err(|source| FleetStartError {
                group: group.name.clone(),
                source,
            })?;
            let spec_key = hash(&("fleet", g, &group.name));
            cluster.empty.insert(spec_key, node.clone());
            let known = KnownNode::new(node.clone(), spec_key, spec_key);
            for i in 0..group.count {
                cluster.put_node(group.node_name(i), known.clone());
            }
        }
        Ok(cluster)
    }

    /// `--dra-align`: pods with claims pass only nodes where the devices
    /// the scheduler's DRA allocator picks share a NUMA node with the CPUs
    /// and memory the kubelet pins ([`crate::dra`]).
    pub fn enable_dra(&mut self, dra: Dra) {
        self.dra = Some(dra);
    }

    /// The DRA side, when `--dra-align` is on (to sync its objects).
    pub fn dra_mut(&mut self) -> Option<&mut Dra> {
        self.dra.as_mut()
    }

    /// The warnings of the known nodes' kubelet configurations
    /// ([`topoalign_nrt::warnings::warnings`]: a NUMA node reserving more
    /// memory than it has; a machine with NUMA ids past 63 whose kubelet
    /// crashes admitting pods), each once, with its nodes (sorted by name),
    /// in the order of their first node. The nodes are judged as their
    /// kubelets would judge them all the same.
    pub fn warnings(&self) -> Vec<NodeWarning> {
        let mut by_spec: HashMap<u64, Vec<String>> = HashMap::new();
        for (name, known) in self.nodes.iter() {
            by_spec.entry(known.spec_key).or_default().push(name.clone());
        }
        let mut warnings: Vec<NodeWarning> = Vec::new();
        for (spec_key, mut nodes) in by_spec {
            let Some(node) = self.empty.get(&spec_key) else {
                continue;
            };
            nodes.sort();
            for warning in topoalign_nrt::warnings::warnings(node) {
                warnings.push(NodeWarning {
                    nodes: nodes.clone(),
                    warning,
                });
            }
        }
        warnings.sort_by(|a, b| (&a.nodes, &a.warning).cmp(&(&b.nodes, &b.warning)));
        warnings
    }

    /// Number of known nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node is known.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Takes a node's NRT object: its state is rebuilt from the topoalign
    /// attributes; assumed pods it now lists are confirmed, the others (not
    /// expired) are laid on top again. An object without topoalign
    /// attributes, or saying its state is unknown, makes the node unknown
    /// (passed through, never filtered on its last state).
    ///
    /// # Errors
    /// [`ClusterError::Nrt`] for malformed attributes, a configuration the
    /// kubelet would not start or a state it would not restore; the node
    /// is then passed through too.
    pub fn apply_nrt(&mut self, object: &NodeResourceTopology, now: Instant) -> Result<(), ClusterError> {
        self.install(Cluster::rebuild(object), now)
    }

    /// The part of [`Cluster::apply_nrt`] that reads only the object: its
    /// node rebuilt (the engine restoring its state) and keyed, or why it
    /// cannot be. Needs no cluster, so it runs without the cluster's lock
    /// ([`crate::poll`]).
    pub fn rebuild(object: &NodeResourceTopology) -> Rebuilt {
        Cluster::rebuild_with(object, &mut Starts::default())
    }

    /// The nodes this cluster has started, one per node spec, for
    /// [`Cluster::rebuild_with`].
    pub fn starts(&self) -> Starts {
        Starts {
            nodes: self.empty.clone(),
            spec_texts: self.spec_texts.clone(),
        }
    }

    /// [`Cluster::rebuild`], starting the object's node from `starts` when
    /// its spec was started before (a clone: what starting it again would
    /// give), and keeping the node it starts there otherwise. Objects of
    /// one node shape share the spec, so a cluster of a few shapes parses
    /// and starts a few nodes, not one per object.
    pub fn rebuild_with(object: &NodeResourceTopology, starts: &mut Starts) -> Rebuilt {
        let name = object.metadata.name.clone();
        let unrestorable = |e: topoalign_nrt::RestoreError| {
            let (reason, error) = match (object.attribute(topoalign_nrt::STATE_UNKNOWN_ATTRIBUTE), &e) {
                (Some(reason), _) => (format!("its exporter does not know its state: {reason}"), None),
                (None, topoalign_nrt::RestoreError::Missing(attribute)) => (
                    format!("no exact state ({attribute} missing: another exporter's object)"),
                    None,
                ),
                (None, _) => (e.to_string(), Some(e.to_string())),
            };
            Rebuilt {
                name: name.clone(),
                result: Err(Unrestorable { reason, error }),
            }
        };
        let text = |attribute: &str| object.attribute(attribute).unwrap_or_default().to_owned();
        let spec = object
            .attribute(topoalign_nrt::exact::NODE_SPEC_ATTRIBUTE)
            .unwrap_or_default();
        let spec_key = hash(&("nrt", spec));
        // The text of an earlier object of this spec when it reads the same
        // (compared, not taken on the key's word): one copy for them all.
        let spec_text = match starts.spec_texts.get(&spec_key) {
            Some(known) if **known == *spec => Arc::clone(known),
            _ => Arc::from(spec),
        };
        let mut started = None;
        let empty = match starts.nodes.get(&spec_key) {
            // The spec text is the one that started it: present and valid.
            Some(node) => node,
            None => {
                let node = topoalign_nrt::read_spec(object).and_then(|spec| topoalign_nrt::start_node(&spec));
                match node {
                    Ok(node) => {
                        started = Some(node.clone());
                        starts.spec_texts.insert(spec_key, Arc::clone(&spec_text));
                        starts.nodes.entry(spec_key).or_insert(node)
                    }
                    Err(e) => return unrestorable(e),
                }
            }
        };
        let restored = topoalign_nrt::read_state(object).and_then(|state| {
            let key = state_key(spec_key, &state);
            topoalign_nrt::restore_onto(empty.clone(), &state).map(|node| (key, node))
        });
        let (state_key, node) = match restored {
            Ok(restored) => restored,
            Err(e) => {
                // The node started here reaches the cluster with a restored
                // object only: the next object of this spec starts it again.
                if started.is_some() {
                    starts.nodes.remove(&spec_key);
                    starts.spec_texts.remove(&spec_key);
                }
                return unrestorable(e);
            }
        };
        Rebuilt {
            name,
            result: Ok(RebuiltNode {
                known: KnownNode::new(node, spec_key, state_key),
                empty: started,
                state_text: text(topoalign_nrt::exact::STATE_ATTRIBUTE),
                spec_text,
            }),
        }
    }

    /// [`Cluster::rebuild_with`] of each object marked in `rebuild`
    /// (`None` for the others), in order, spread over `threads` worker
    /// threads, each part starting from its own copy of `starts`. A
    /// rebuild depends on nothing but its object, so this is what rebuilding
    /// them one by one gives.
    ///
    /// # Errors
    /// [`WorkerPanic`]: a worker's panic.
    pub fn rebuild_all(
        objects: &[NodeResourceTopology],
        rebuild: &[bool],
        starts: &Starts,
        threads: usize,
    ) -> Result<Vec<Option<Rebuilt>>, WorkerPanic> {
        let wanted: Vec<&NodeResourceTopology> = objects
            .iter()
            .zip(rebuild)
            .filter_map(|(object, &rebuild)| rebuild.then_some(object))
            .collect();
        let mut done = Vec::with_capacity(wanted.len());
        if !wanted.is_empty() {
            let threads = threads.max(1).min(wanted.len());
            let parts = on_threads(wanted.chunks(wanted.len().div_ceil(threads)), |part| {
                let mut starts = starts.clone();
                part.iter()
                    .map(|object| Cluster::rebuild_with(object, &mut starts))
                    .collect::<Vec<_>>()
            })?;
            done = parts.into_iter().flatten().collect();
        }
        let mut done = done.into_iter();
        Ok(rebuild
            .iter()
            .map(|&rebuild| if rebuild { done.next() } else { None })
            .collect())
    }

    /// Worker threads for engine work ([`ExtenderConfig::threads`]).
    pub fn threads(&self) -> usize {
        self.config.threads
    }

    /// The part of [`Cluster::apply_nrt`] that changes the cluster: the
    /// rebuilt node replaces the known one (or the node passes through),
    /// then the pods assumed on it are confirmed or laid on top again.
    ///
    /// # Errors
    /// As [`Cluster::apply_nrt`].
    pub fn install(&mut self, rebuilt: Rebuilt, now: Instant) -> Result<(), ClusterError> {
        let Rebuilt { name, result } = rebuilt;
        let error = |message: String| ClusterError::Nrt {
            name: name.clone(),
            message,
        };
        self.applied.remove(&name);
        let rebuilt = match result {
            Ok(rebuilt) => rebuilt,
            Err(Unrestorable { reason, error: message }) => {
                self.drop_node(&name);
                self.passing.insert(name.clone(), reason);
                return message.map_or(Ok(()), |message| Err(error(message)));
            }
        };
        self.passing.remove(&name);
        let RebuiltNode {
            known,
            empty,
            spec_text,
            state_text,
        } = rebuilt;
        if let Some(empty) = empty {
            self.empty.entry(known.spec_key).or_insert(empty);
            self.spec_texts
                .entry(known.spec_key)
                .or_insert_with(|| Arc::clone(&spec_text));
        }
        // Assumptions on this node: confirmed (the object lists the pod:
        // the rebuilt node, before any assumption is laid on it, holds
        // exactly the pods the object lists), or laid on top again.
        let mut mine: Vec<(u64, String)> = self
            .assumed
            .iter()
            .filter(|(_, a)| a.node == name)
            .map(|(uid, a)| (a.order, uid.clone()))
            .collect();
        mine.sort();
        let mine: Vec<(String, bool)> = mine
            .into_iter()
            .map(|(_, uid)| {
                let listed = known.place_of(&uid, uid_key(&uid)).is_some();
                (uid, listed)
            })
            .collect();
        let reported = known.holds.clone();
        self.put_node(name.clone(), known);
        for (uid, listed) in mine {
            if listed {
                self.assumed.remove(&uid);
                continue;
            }
            let expired = self
                .assumed
                .get(&uid)
                .is_some_and(|a| now.duration_since(a.since) > self.config.assume_timeout);
            let pod = self.assumed.get(&uid).map(|a| a.pod.clone());
            match (expired, pod) {
                (false, Some(pod)) => {
                    if let Some(known) = self.nodes.get_mut(&name) {
                        admit_into(known, pod, &mut self.held);
                    }
                }
                _ => {
                    self.assumed.remove(&uid);
                }
            }
        }
        self.applied.insert(
            name,
            Applied {
                spec_text,
                state_text,
                reported,
                disturbed: false,
            },
        );
        Ok(())
    }

    /// Whether [`Cluster::apply_nrt`] would leave the node exactly as it
    /// is: the object's spec and state read the same as when the node was
    /// last rebuilt, no pod assumed there was taken off since, and of the
    /// pods assumed there (`mine`), none is listed by the object or
    /// expired — so the rebuild would lay the same assumptions, in the same
    /// order, on the same state.
    fn unchanged(&self, object: &NodeResourceTopology, mine: &[&Assumption], now: Instant) -> bool {
        let Some(applied) = self.applied.get(&object.metadata.name) else {
            return false;
        };
        let text = |attribute: &str| object.attribute(attribute).unwrap_or_default();
        !applied.disturbed
            && self.nodes.contains_key(&object.metadata.name)
            && text(topoalign_nrt::exact::STATE_ATTRIBUTE) == applied.state_text
            && text(topoalign_nrt::exact::NODE_SPEC_ATTRIBUTE) == &*applied.spec_text
            && mine.iter().all(|a| {
                !applied.reported.contains(&uid_key(&a.pod.uid))
                    && now.duration_since(a.since) <= self.config.assume_timeout
            })
    }

    /// Takes a whole listing of NRT objects (the API server's, read again
    /// and again): each object as [`Cluster::apply_nrt`] takes it, and
    /// every node the previous listing had and this one lacks is removed,
    /// with the pods assumed on it. Nodes from the fleet file or from
    /// objects given one by one are never removed here.
    pub fn sync_nrt(&mut self, objects: &[NodeResourceTopology], now: Instant) -> SyncReport {
        self.sync_rebuilt(objects, Vec::new(), now)
    }

    /// Which of `objects` a sync at `now` would rebuild: those whose node
    /// state the cluster does not already hold ([`Cluster::unchanged`]).
    pub fn stale(&self, objects: &[NodeResourceTopology], now: Instant) -> Vec<bool> {
        let mut assumed_on: HashMap<&str, Vec<&Assumption>> = HashMap::new();
        for assumption in self.assumed.values() {
            assumed_on.entry(assumption.node.as_str()).or_default().push(assumption);
        }
        objects
            .iter()
            .map(|object| {
                let mine = assumed_on
                    .get(object.metadata.name.as_str())
                    .map_or(&[][..], Vec::as_slice);
                !self.unchanged(object, mine, now)
            })
            .collect()
    }

    /// [`Cluster::sync_nrt`] with some objects already rebuilt
    /// (`rebuilt[i]`: [`Cluster::rebuild`] of `objects[i]`, done without
    /// the lock; missing ones are rebuilt here when needed). The same
    /// outcome as `sync_nrt`: a rebuild depends on nothing but its object.
    pub fn sync_rebuilt(
        &mut self,
        objects: &[NodeResourceTopology],
        mut rebuilt: Vec<Option<Rebuilt>>,
        now: Instant,
    ) -> SyncReport {
        let mut report = SyncReport::default();
        let mut listed = HashSet::with_capacity(objects.len());
        let stale = self.stale(objects, now);
        rebuilt.resize_with(objects.len(), || None);
        for (object, rebuilt) in objects.iter().zip(&mut rebuilt) {
            if rebuilt.as_ref().is_some_and(|r| r.name != object.metadata.name) {
                *rebuilt = None;
            }
        }
        // The missing rebuilds, on the worker threads (a panic there is
        // met again below, on this thread).
        let missing: Vec<bool> = stale.iter().zip(&rebuilt).map(|(&s, r)| s && r.is_none()).collect();
        if missing.contains(&true)
            && let Ok(done) = Cluster::rebuild_all(objects, &missing, &self.starts(), self.config.threads)
        {
            for (slot, done) in rebuilt.iter_mut().zip(done) {
                if done.is_some() {
                    *slot = done;
                }
            }
        }
        let mut starts: Option<Starts> = None;
        for ((object, stale), rebuilt) in objects.iter().zip(stale).zip(rebuilt) {
            let name = &object.metadata.name;
            listed.insert(name.clone());
            if !stale {
                continue;
            }
            let rebuilt = match rebuilt {
                Some(rebuilt) => rebuilt,
                None => Cluster::rebuild_with(object, starts.get_or_insert_with(|| self.starts())),
            };
            report.hazards.extend(
                rebuilt
                    .new_spec_hazards(&self.empty)
                    .map(|warning| (name.clone(), warning)),
            );
            let before = self.passing.get(name).cloned();
            let result = self.install(rebuilt, now);
            let after = self.passing.get(name);
            if after.is_none() || after == before.as_ref() {
                continue;
            }
            match result {
                Err(error) => report.errors.push(error),
                Ok(()) => report.passed.push((name.clone(), after.cloned().unwrap_or_default())),
            }
        }
        let mut vanished: Vec<String> = self.listed.difference(&listed).cloned().collect();
        vanished.sort();
        for name in &vanished {
            self.forget(name);
        }
        report.removed = vanished;
        self.listed = listed;
        report
    }

    /// Forgets a node and the pods assumed on it.
    fn forget(&mut self, name: &str) {
        self.drop_node(name);
        self.applied.remove(name);
        self.passing.remove(name);
        self.assumed.retain(|_, assumption| assumption.node != name);
    }

    /// Reads the pod of a request.
    ///
    /// # Errors
    /// [`ClusterError::Pod`] naming the field.
    pub fn read_pod(manifest: &serde_json::Value) -> Result<Pod, ClusterError> {
        let mut pod = topoalign_k8s::pod_from_value(manifest, "").map_err(|e| {
            let path = e.path().to_string();
            ClusterError::Pod(if path.is_empty() {
                e.message()
            } else {
                format!("{path}: {}", e.message())
            })
        })?;
        if pod.uid.is_empty() {
            // kube-scheduler always sends a uid; a hand-made request may
            // not. The pod's `namespace/name` stands for it, so that two
            // such pods are never taken for one already held by a node.
            pod.uid = pod.key();
        }
        Ok(pod)
    }

    /// `filter`.
    ///
    /// # Errors
    /// [`ClusterError::Engine`] when an evaluation panicked.
    pub fn filter(&mut self, pod: &Pod, candidates: Vec<String>, now: Instant) -> Result<FilterOutcome, ClusterError> {
        self.filter_with(pod, None, candidates, now)
    }

    /// `filter` of a pod with DRA claims (`claims`; ignored unless
    /// `--dra-align` is on): the nodes that admit it pass only where its
    /// devices and its pinned CPUs and memory share a NUMA node.
    ///
    /// # Errors
    /// [`ClusterError::Engine`] when an evaluation panicked.
    pub fn filter_with(
        &mut self,
        pod: &Pod,
        claims: Option<&PodClaims>,
        candidates: Vec<String>,
        now: Instant,
    ) -> Result<FilterOutcome, ClusterError> {
        self.expire(now);
        self.see(pod, now);
        let shape = shape_key(pod);
        let states = self.states_of(pod, &candidates);
        self.evaluate(pod, shape, &candidates, &states)?;
        let mut outcome = FilterOutcome {
            passed: Vec::with_capacity(candidates.len()),
            ..FilterOutcome::default()
        };
        // (name, state key, spec key) of the refusing nodes; names are moved,
        // never copied.
        let mut refused: Vec<(String, u64, u64)> = Vec::new();
        let answers = self.trials.get(&shape);
        for (name, state) in candidates.into_iter().zip(&states) {
            match (state, answers) {
                (Some(state), Some(answers)) if !answers[&state.key].admitted => {
                    refused.push((name, state.key, state.spec));
                }
                _ => outcome.passed.push(name),
            }
        }
        for (name, state_key, spec_key) in refused {
            let summary = self.trials[&shape][&state_key].summary.clone();
            if self.empty_admits(spec_key, shape, pod) {
                outcome.failed.insert(name, summary);
            } else {
                outcome
                    .unresolvable
                    .insert(name, format!("{summary} (even on an empty node)"));
            }
        }
        let mut judged: HashMap<String, Judgement> = HashMap::new();
        if let Some(claims) = claims.filter(|_| self.dra.is_some()) {
            let passed_states = self.states_of(pod, &outcome.passed);
            let judgements = self.dra_judge(shape, claims, &outcome.passed, &passed_states);
            let mut kept = Vec::with_capacity(outcome.passed.len());
            for (name, judgement) in outcome.passed.drain(..).zip(judgements) {
                match judgement {
                    Some(judgement) => match &judgement.verdict {
                        Ok(()) => {
                            judged.insert(name.clone(), judgement);
                            kept.push(name);
                        }
                        Err(reason) => {
                            outcome.failed.insert(name, reason.clone());
                        }
                    },
                    None => kept.push(name),
                }
            }
            outcome.passed = kept;
        }
        if self.config.choose_in_filter {
            let passed_states = self.states_of(pod, &outcome.passed);
            if let Some(best) = best_of(&self.scored(shape, &passed_states)) {
                let best = outcome.passed.swap_remove(best);
                self.assume(pod, &best, now);
                self.dra_assume(claims, &best, judged.get(&best), now);
                outcome.passed = vec![best];
            }
        }
        Ok(outcome)
    }

    /// [`Dra::judge`] on each candidate (already evaluated; `states`:
    /// theirs) that admits the pod; `None` for the others and unknown
    /// nodes.
    fn dra_judge(
        &mut self,
        shape: u64,
        claims: &PodClaims,
        candidates: &[String],
        states: &[Option<State>],
    ) -> Vec<Option<Judgement>> {
        let Some(dra) = &mut self.dra else {
            return vec![None; candidates.len()];
        };
        dra.see(claims, Instant::now());
        let answers = self.trials.get(&shape);
        candidates
            .iter()
            .zip(states)
            .map(|(name, state)| {
                let trial = &answers?[&(*state)?.key];
                let machine = self.nodes.get(name).map(|known| known.node.machine());
                trial
                    .admitted
                    .then(|| dra.judge_on(claims, name, machine, &trial.pinned))
            })
            .collect()
    }

    /// The pod goes to `node`: its predicted DRA devices are in use there.
    fn dra_assume(&mut self, claims: Option<&PodClaims>, node: &str, judgement: Option<&Judgement>, now: Instant) {
        if let (Some(dra), Some(claims), Some(judgement)) = (&mut self.dra, claims, judgement) {
            dra.assume(claims, node, judgement, now);
        }
    }

    /// Records `pod` as seen now (for `bind`).
    fn see(&mut self, pod: &Pod, now: Instant) {
        self.seen.insert(pod.uid.clone(), (pod.clone(), now));
        self.oldest_seen = Some(self.oldest_seen.map_or(now, |oldest| oldest.min(now)));
    }

    /// Each candidate's state as an admission of `pod` meets it; `None`
    /// for unknown nodes.
    fn states_of(&self, pod: &Pod, candidates: &[String]) -> Vec<Option<State>> {
        let uid = uid_key(&pod.uid);
        let held = self.held.may_hold(uid);
        candidates
            .iter()
            .map(|name| self.nodes.get(name).map(|known| known.state_for(&pod.uid, uid, held)))
            .collect()
    }

    /// Sets the known node `name`, keeping [`Cluster::held`].
    fn put_node(&mut self, name: String, known: KnownNode) {
        known.holds.iter().for_each(|&key| self.held.add(key));
        if let Some(old) = self.nodes.insert(name, known) {
            old.holds.iter().for_each(|&key| self.held.sub(key));
        }
    }

    /// Forgets the known node `name`, keeping [`Cluster::held`].
    fn drop_node(&mut self, name: &str) {
        if let Some(old) = self.nodes.remove(name) {
            old.holds.iter().for_each(|&key| self.held.sub(key));
        }
    }

    /// Each candidate's score for the pod (already evaluated), and whether
    /// it admits it; unknown nodes: 0, not admitting.
    fn scored(&self, shape: u64, states: &[Option<State>]) -> Vec<(i64, bool)> {
        let strategy = self.config.strategy;
        let answers = self.trials.get(&shape);
        states
            .iter()
            .map(|state| match (state, answers) {
                (Some(state), Some(answers)) => {
                    let trial = &answers[&state.key];
                    let score = if trial.admitted { trial.scores.get(strategy) } else { 0 };
                    (score, trial.admitted)
                }
                _ => (0, false),
            })
            .collect()
    }

    /// `prioritize`: a score per candidate (unknown or refusing nodes: 0).
    /// With `assume_on_prioritize`, the pod is assumed on the first of the
    /// best-scored nodes that admit it.
    ///
    /// # Errors
    /// [`ClusterError::Engine`] when an evaluation panicked.
    pub fn prioritize(
        &mut self,
        pod: &Pod,
        candidates: Vec<String>,
        now: Instant,
    ) -> Result<Vec<(String, i64)>, ClusterError> {
        self.prioritize_with(pod, None, candidates, now)
    }

    /// `prioritize` of a pod with DRA claims (`claims`; ignored unless
    /// `--dra-align` is on): a node whose devices and pinned CPUs and
    /// memory do not share a NUMA node scores 0 and is not assumed.
    ///
    /// # Errors
    /// [`ClusterError::Engine`] when an evaluation panicked.
    pub fn prioritize_with(
        &mut self,
        pod: &Pod,
        claims: Option<&PodClaims>,
        candidates: Vec<String>,
        now: Instant,
    ) -> Result<Vec<(String, i64)>, ClusterError> {
        self.expire(now);
        self.see(pod, now);
        let shape = shape_key(pod);
        let states = self.states_of(pod, &candidates);
        self.evaluate(pod, shape, &candidates, &states)?;
        let mut scores = self.scored(shape, &states);
        let mut judgements: Vec<Option<Judgement>> = Vec::new();
        if let Some(claims) = claims.filter(|_| self.dra.is_some()) {
            judgements = self.dra_judge(shape, claims, &candidates, &states);
            for (score, judgement) in scores.iter_mut().zip(&judgements) {
                if judgement.as_ref().is_some_and(|j| j.verdict.is_err()) {
                    *score = (0, false);
                }
            }
        }
        if self.config.assume_on_prioritize
            && let Some(best) = best_of(&scores)
        {
            self.assume(pod, &candidates[best], now);
            let judgement = judgements.get(best).and_then(Option::as_ref);
            self.dra_assume(claims, &candidates[best], judgement, now);
        }
        Ok(candidates
            .into_iter()
            .zip(scores)
            .map(|(name, (score, _))| (name, score))
            .collect())
    }

    /// `bind`: the scheduler chose `node` for the pod `uid` (seen by an
    /// earlier `filter` or `prioritize`).
    ///
    /// # Errors
    /// [`UnseenPod`] when the pod was never seen.
    pub fn bind(&mut self, uid: &str, node: &str, now: Instant) -> Result<(), UnseenPod> {
        self.expire(now);
        let Some((pod, _)) = self.seen.get(uid).cloned() else {
            return Err(UnseenPod { uid: uid.to_owned() });
        };
        self.assume(&pod, node, now);
        self.binding_settled(uid);
        if self.dra.is_some() {
            let shape = shape_key(&pod);
            let names = [node.to_owned()];
            let states = self.states_of(&pod, &names);
            let pinned = states[0]
                .and_then(|state| self.trials.get(&shape)?.get(&state.key))
                .map(|trial| trial.pinned.clone())
                .unwrap_or_default();
            let machine = self.nodes.get(node).map(|known| known.node.machine());
            if let Some(dra) = &mut self.dra {
                dra.bound(uid, node, machine, &pinned, now);
            }
        }
        Ok(())
    }

    /// Whether the Binding of pod `uid` to `node` should wait: a pod
    /// assumed on that node before it has no Binding made or refused yet.
    /// The kubelet admits a node's pods in the order their Bindings reach
    /// the API server, and the assumptions are laid over the node's state
    /// in the order they were made; kube-scheduler calls `bind` from
    /// concurrent binding cycles, so without waiting two pods on one node
    /// can be bound the other way round, and the kubelet can then give the
    /// first NUMA node to the pod this extender predicted on the second —
    /// and refuse the other.
    pub fn binding_waits_for_earlier(&self, uid: &str, node: &str) -> bool {
        let Some(order) = self.assumed.get(uid).filter(|a| a.node == node).map(|a| a.order) else {
            return false;
        };
        self.assumed
            .values()
            .any(|a| a.order < order && a.node == node && !a.binding_settled)
    }

    /// The Binding of pod `uid` was made or refused: later pods on its node
    /// need not wait for it.
    pub fn binding_settled(&mut self, uid: &str) {
        if let Some(assumption) = self.assumed.get_mut(uid) {
            assumption.binding_settled = true;
        }
    }

    /// Assumes `pod` on `node` (moving it if it was assumed elsewhere).
    pub fn assume(&mut self, pod: &Pod, node: &str, now: Instant) {
        if let Some(previous) = self.assumed.get(&pod.uid) {
            if previous.node == node {
                return;
            }
            self.unassume(&pod.uid);
        }
        let Some(known) = self.nodes.get_mut(node) else {
            return;
        };
        // A pod the node already holds under the same uid: admitting it
        // again, even refused, releases what the holder has, so the node is
        // no longer its rebuilt state plus assumptions.
        if known.node.pods().iter().any(|p| p.uid == pod.uid)
            && let Some(applied) = self.applied.get_mut(node)
        {
            applied.disturbed = true;
        }
        if admit_into(known, pod.clone(), &mut self.held) {
            self.assumptions_made += 1;
            self.oldest_assumed = Some(self.oldest_assumed.map_or(now, |oldest| oldest.min(now)));
            self.assumed.insert(
                pod.uid.clone(),
                Assumption {
                    node: node.to_string(),
                    pod: pod.clone(),
                    since: now,
                    order: self.assumptions_made,
                    binding_settled: false,
                },
            );
        }
    }

    /// The pods assumed and not yet confirmed or expired: uid → node.
    pub fn assumptions(&self) -> BTreeMap<String, String> {
        self.assumed
            .iter()
            .map(|(uid, a)| (uid.clone(), a.node.clone()))
            .collect()
    }

    fn unassume(&mut self, uid: &str) {
        let Some(assumption) = self.assumed.remove(uid) else {
            return;
        };
        if let Some(applied) = self.applied.get_mut(&assumption.node) {
            applied.disturbed = true;
        }
        if let Some(known) = self.nodes.get_mut(&assumption.node)
            && let Some(position) = known.node.pods().iter().position(|p| p.uid == uid)
        {
            known.node.remove(uid);
            let key = uid_key(uid);
            if known.holds.remove(&key) {
                self.held.sub(key);
            }
            known.state_key = hash(&(known.state_key, "remove", position));
            known.changed();
        }
    }

    /// Drops assumptions older than the timeout, and pods seen long ago.
    /// Scans only when the oldest entry may have expired.
    fn expire(&mut self, now: Instant) {
        if let Some(dra) = &mut self.dra {
            dra.expire(now);
        }
        let timeout = self.config.assume_timeout;
        if self
            .oldest_assumed
            .is_some_and(|oldest| now.duration_since(oldest) > timeout)
        {
            let expired: Vec<String> = self
                .assumed
                .iter()
                .filter(|(_, a)| now.duration_since(a.since) > timeout)
                .map(|(uid, _)| uid.clone())
                .collect();
            for uid in expired {
                self.unassume(&uid);
            }
            self.oldest_assumed = self.assumed.values().map(|a| a.since).min();
        }
        let kept_for = timeout.max(Duration::from_secs(60));
        if self
            .oldest_seen
            .is_some_and(|oldest| now.duration_since(oldest) > kept_for)
        {
            let assumed = &self.assumed;
            self.seen
                .retain(|uid, (_, at)| assumed.contains_key(uid) || now.duration_since(*at) <= kept_for);
            self.oldest_seen = self.seen.values().map(|(_, at)| *at).min();
        }
    }

    /// Fills the answer cache for every distinct state among `candidates`
    /// (`states`: theirs, from [`Cluster::states_of`]).
    fn evaluate(
        &mut self,
        pod: &Pod,
        shape: u64,
        candidates: &[String],
        states: &[Option<State>],
    ) -> Result<(), ClusterError> {
        if self.trial_count > TRIAL_CACHE_LIMIT {
            self.trials.clear();
            self.trial_count = 0;
        }
        let answers = self.trials.get(&shape);
        let mut missing: Vec<(State, &KnownNode)> = Vec::new();
        let mut queued: Keyed<()> = Keyed::default();
        for (name, state) in candidates.iter().zip(states) {
            if let Some(state) = state
                && answers.is_none_or(|answers| !answers.contains_key(&state.key))
                && queued.insert(state.key, ()).is_none()
                && let Some(known) = self.nodes.get(name)
            {
                missing.push((*state, known));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        // States of one spec whose trial keys ([`Node::trial_key`]) are
        // equal give the same answer for any pod they do not hold: one
        // trial per spec and trial key.
        // A node holding the pod: a copy without it, its own trial.
        let without: Vec<Node> = missing
            .iter()
            .filter(|(state, _)| state.holds_pod)
            .map(|(_, known)| {
                let mut copy = known.node.clone();
                copy.remove(&pod.uid);
                copy
            })
            .collect();
        let mut without = without.iter();
        let mut first_of: Keyed<usize> = Keyed::default();
        let mut trials: Vec<&Node> = Vec::new();
        let mut answer_of: Vec<(u64, usize)> = Vec::with_capacity(missing.len());
        for &(state, known) in &missing {
            let copy = if state.holds_pod { without.next() } else { None };
            let (trial_key, node) = match copy {
                Some(copy) => (hash(&("without", state.key)), copy),
                None => (known.trial_key, &known.node),
            };
            let at = *first_of.entry(trial_key).or_insert_with(|| {
                trials.push(node);
                trials.len() - 1
            });
            answer_of.push((state.key, at));
        }
        let threads = self.config.threads.max(1).min(trials.len());
        let requested = topoalign_engine::fit::pod_request_totals(pod);
        let results = on_threads(trials.chunks(trials.len().div_ceil(threads)), |part| {
            part.iter().map(|node| trial(node, pod, &requested)).collect::<Vec<_>>()
        })
        .map_err(|panic| ClusterError::Engine(panic.message))?;
        let results: Vec<Trial> = results.into_iter().flatten().collect();
        let answers = self.trials.entry(shape).or_default();
        for (state_key, at) in answer_of {
            answers.insert(state_key, results[at].clone());
            self.trial_count += 1;
        }
        Ok(())
    }

    fn empty_admits(&mut self, spec_key: u64, shape: u64, pod: &Pod) -> bool {
        if let Some(&known) = self.empty_trials.get(&(spec_key, shape)) {
            return known;
        }
        let admits = self
            .empty
            .get(&spec_key)
            .is_some_and(|node| trial(node, pod, &topoalign_engine::fit::pod_request_totals(pod)).admitted);
        self.empty_trials.insert((spec_key, shape), admits);
        admits
    }
}

/// `work` on every part, each on its own thread (a single part on the
/// calling thread); the results in order, or a worker's panic.
fn on_threads<P, R, I>(parts: I, work: impl Fn(P) -> R + Sync) -> Result<Vec<R>, WorkerPanic>
where
    I: Iterator<Item = P>,
    P: Send,
    R: Send,
{
    let work = &work;
    let mut parts = parts.peekable();
    let first = parts.next();
    if parts.peek().is_none() {
        // One part: on this thread (no thread to start), panics caught the
        // same way.
        return first
            .map(|part| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(part))).map_err(|payload| WorkerPanic {
                    message: panic_message(payload.as_ref(), "a worker thread panicked"),
                })
            })
            .into_iter()
            .collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = first
            .into_iter()
            .chain(parts)
            .map(|part| scope.spawn(move || work(part)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().map_err(|payload| WorkerPanic {
                    message: panic_message(payload.as_ref(), "a worker thread panicked"),
                })
            })
            .collect()
    })
}

/// The text a panic was raised with; `fallback` when it carries none.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send), fallback: &str) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| fallback.to_owned())
}

/// The position of the first of the best-scored nodes that admit the pod.
fn best_of(scores: &[(i64, bool)]) -> Option<usize> {
    scores
        .iter()
        .enumerate()
        .filter(|(_, (_, admitted))| *admitted)
        .max_by(|a, b| a.1.0.cmp(&b.1.0).then(std::cmp::Ordering::Greater))
        .map(|(i, _)| i)
}

/// Admits `pod` into a known node for real, keeping its state key.
fn admit_into(known: &mut KnownNode, pod: Pod, held: &mut Held) -> bool {
    let shape = shape_key(&pod);
    let uid = uid_key(&pod.uid);
    // A pod the node already holds under this uid: admitting it again
    // changes the node even when refused (what the holder has is
    // released), and not as a new pod would.
    let again = known.place_of(&pod.uid, uid);
    let admitted = known.node.admit(pod).admitted();
    match again {
        Some(place) => known.state_key = hash(&(known.state_key, "again", place, shape, admitted)),
        None if admitted => known.state_key = hash(&(known.state_key, "add", shape)),
        None => return false,
    }
    known.changed();
    if admitted {
        if known.holds.insert(uid) {
            held.add(uid);
        }
        known.held_bits |= uid_bit(uid);
    }
    admitted
}

/// The engine's answer for `pod` on `node`: a trial admission
/// ([`Node::try_admit`], the decision of a real admission, the node left as
/// it is) and, when admitted, the placement's scores (`requested`: the
/// pod's request totals, see [`score_trial`]).
fn trial(node: &Node, pod: &Pod, requested: &ResourceList) -> Trial {
    let trial = node.try_admit(pod);
    let refused = |summary: String| Trial {
        admitted: false,
        summary,
        scores: Scores::default(),
        pinned: BTreeSet::new(),
    };
    if let Some(panic) = &trial.decision.kubelet_panic {
        return refused(crash_reason(panic));
    }
    match &trial.decision.rejection {
        Some(_) => refused(topoalign_explain::words::refusal(&trial.decision)),
        None => {
            let machine = node.machine();
            Trial {
                admitted: true,
                summary: String::new(),
                scores: score_trial(&trial, requested),
                // By the machine's own NUMA ids, as DRA devices name them.
                pinned: topoalign_scenario::dra::pinned_numa_nodes(&trial.decision.containers, |cpu| {
                    machine.cpu(cpu).map(|c| c.numa)
                })
                .into_iter()
                .map(|numa| machine.numa_label(numa))
                .collect(),
            }
        }
    }
}

/// The filter's reason for a node whose kubelet would crash admitting the
/// pod: not a rejection (the kubelet never answers), the pod must not go
/// there. The panic's explanation, shortened to one line.
pub fn crash_reason(panic: &topoalign_engine::KubeletPanic) -> String {
    let site = match &panic.site {
        topoalign_engine::PanicSite::TopologyManager(policy) => format!(
            "topology manager policy {} builds NUMA masks for every pod; only policy none runs on this machine",
            policy.as_str()
        ),
        topoalign_engine::PanicSite::MemoryDefaultHint { container } => format!(
            "under topology manager policy none the Static memory manager's default hint for container {container:?} \
             builds NUMA masks"
        ),
    };
    format!(
        "{}: the v{} kubelet would crash admitting this pod (a Go panic, not a rejection): NUMA node id {} does not \
         fit its 64-bit NUMA masks, and {site}",
        topoalign_engine::KubeletPanic::REASON,
        panic.release,
        panic.numa_id
    )
}

/// The key of the state `record` restores on the node of `spec_key`: same
/// machine, same pods, same placements → same key, whoever the pods are.
/// Uids are replaced by their pod's place in the admission order (state
/// kept for a uid no pod has is released by the restore: it counts as
/// nobody's); names are left out. Read from the record itself, so that
/// keying costs a walk over it, not a second snapshot and serialization;
/// two texts of one state (quantities written otherwise) may get two keys,
/// which only shares fewer answers.
fn state_key(spec_key: u64, record: &topoalign_nrt::StateView<'_>) -> u64 {
    let mut hasher = key_hasher();
    spec_key.hash(&mut hasher);
    let place: Places = record.uids().enumerate().map(|(i, uid)| (uid, i)).collect();
    record.pods.len().hash(&mut hasher);
    for pod in &record.pods {
        pod.hash_resources(&mut hasher);
    }
    // Per pod place, in that order: the maps are in uid order, which
    // differs between nodes holding the same pods.
    fn by_place<'a, V: Hash>(
        place: &Places,
        entries: &'a topoalign_nrt::exact::Pairs<topoalign_nrt::exact::Text<'_>, V>,
        hasher: &mut impl Hasher,
    ) {
        let mut placed: Vec<(Option<usize>, &'a V)> = entries
            .iter()
            .map(|(uid, v)| (place.get(uid.as_str()).copied(), v))
            .collect();
        placed.sort_by_key(|(p, _)| *p);
        for (p, v) in placed.into_iter().filter(|(p, _)| p.is_some()) {
            (p, v).hash(hasher);
        }
        entries.0.len().hash(hasher);
    }
    record.memory.is_some().hash(&mut hasher);
    record.cpu.default_cpu_set.hash(&mut hasher);
    by_place(&place, &record.cpu.entries, &mut hasher);
    by_place(&place, &record.cpu.pod_entries, &mut hasher);
    if let Some(memory) = &record.memory {
        memory.machine_state.hash(&mut hasher);
        by_place(&place, &memory.entries, &mut hasher);
        by_place(&place, &memory.pod_entries, &mut hasher);
    }
    by_place(&place, &record.devices, &mut hasher);
    hasher.finish()
}

/// Pods with equal resources get equal answers: the key ignores identity
/// (but see [`State`] for a node holding the pod asked about).
fn shape_key(pod: &Pod) -> u64 {
    hash(&pod.shape())
}

/// A pod uid's key in [`KnownNode::holds`].
fn uid_key(uid: &str) -> u64 {
    hash(&uid)
}

/// A uid key's bit in [`KnownNode::held_bits`].
fn uid_bit(key: u64) -> u64 {
    1 << (key >> 58)
}

/// Maps keyed by node name.
type Named<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// Pod uid → its place in the admission order ([`state_key`]).
type Places<'a> = HashMap<&'a str, usize, foldhash::fast::RandomState>;

/// Maps keyed by a [`hash`] (already well mixed): the key is its own hash.
type Keyed<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// A set of [`hash`]es, hashed as [`Keyed`] maps are.
type KeySet = HashSet<u64, BuildHasherDefault<KeyHasher>>;

/// The hasher of [`Keyed`] maps.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

fn hash<T: Hash>(value: &T) -> u64 {
    let mut hasher = key_hasher();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The hasher of every key ([`hash`], [`state_key`]): well mixed, fixed
/// (the same keys on every thread) and several times cheaper than
/// `DefaultHasher` on the long texts and states keyed at start.
fn key_hasher() -> foldhash::quality::FoldHasher<'static> {
    use std::hash::BuildHasher;
    static KEYS: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x746f_706f_616c_6967);
    KEYS.build_hasher()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's panic comes back as an error with its message, not as
    /// an empty answer.
    #[test]
    fn a_worker_panic_is_reported_not_swallowed() {
        let result = on_threads([1, 2, 3].into_iter(), |n| {
            assert!(n != 2, "evaluation {n} failed");
            n * 10
        });
        assert_eq!(
            result,
            Err(WorkerPanic {
                message: "evaluation 2 failed".to_owned()
            })
        );
        assert_eq!(on_threads([1, 2].into_iter(), |n| n * 10), Ok(vec![10, 20]));
        // A single part runs on the calling thread, its panic reported the
        // same way.
        let alone = on_threads([2].into_iter(), |n| {
            assert!(n != 2, "evaluation {n} failed");
            n
        });
        assert_eq!(
            alone,
            Err(WorkerPanic {
                message: "evaluation 2 failed".to_owned()
            })
        );
        assert_eq!(on_threads([3].into_iter(), |n| n * 10), Ok(vec![30]));
    }
}

//! The simulator: every requested policy × scope × scheduler over one
//! fleet and workload, runs spread over worker threads.
//!
//! Owns: setting each run up (the kubelet configuration with the policy
//! and scope laid over each node shape's, started once per shape) and
//! collecting the reports. The event loop is [`run`]; state sharing
//! between nodes is [`classes`].

pub(crate) mod capacity;
mod classes;
mod nrt_filter;
mod run;
mod shapes;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use topoalign_engine::{Node, TopologyPolicyName, TopologyScope};
use topoalign_scenario::dra::DraState;

use crate::fleet::Fleet;
use crate::report::{Report, RunReport};
use crate::workload::{Event, Workload};
use crate::{Scheduler, Scoring};

use run::{GroupSetup, RunInput};
use shapes::{ResourceTable, Shapes};

/// A run's report and its per-node logs.
type RunResult = Result<(RunReport, Option<Vec<Vec<Event>>>), SimulateError>;

/// A simulation that cannot run: a fleet entry's kubelet would not start
/// under a policy (and scope) asked for. Names the entry as the fleet file
/// does (`nodes[<index>]`, with its name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nodes[{entry}] ({name}).kubelet: the kubelet would not start with topologyManagerPolicy {policy}{}: {error}",
    scope.as_ref().map(|s| format!(", topologyManagerScope {s}")).unwrap_or_default())]
pub struct SimulateError {
    /// Index of the entry in the fleet file's `nodes`.
    pub entry: usize,
    pub name: String,
    pub policy: String,
    /// The scope laid over the entry's, when the run set one.
    pub scope: Option<String>,
    /// The kubelet's refusal (boxed: the error stays small beside the
    /// simulation it stands for).
    pub error: Box<StartError>,
}

/// Why a fleet entry's node does not start ([`start_group`],
/// [`start_group_with_dra`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The kubelet refuses to start, or its block is malformed.
    #[error(transparent)]
    Kubelet(#[from] topoalign_nrt::RestoreError),
    /// The fleet publishes devices through DRA and the node's kubelet
    /// release is one whose scheduler allocator is not reproduced.
    #[error(
        "the kubelet release is {release}; the scheduler's DRA allocator is reproduced for 1.34 to 1.37 ({message})"
    )]
    DraRelease { release: String, message: String },
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Options {
    pub policies: Vec<TopologyPolicyName>,
    /// `None`: keep each node shape's own scope.
    pub scopes: Option<Vec<TopologyScope>>,
    pub schedulers: Vec<Scheduler>,
    pub scoring: Scoring,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Keep per-node event logs for [`crate::replay_check`].
    pub keep_logs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policies: TopologyPolicyName::ALL.to_vec(),
            scopes: None,
            schedulers: vec![Scheduler::Unaware, Scheduler::Nrt, Scheduler::Exact],
            scoring: Scoring::LeastAllocated,
            threads: 1,
            keep_logs: false,
        }
    }
}

/// One run's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunKey {
    pub policy: TopologyPolicyName,
    pub scope: Option<TopologyScope>,
    pub scheduler: Scheduler,
}

/// The report, and per run the node-by-node event logs when
/// [`Options::keep_logs`] was set (`None` for a run that could not start).
pub struct Simulation {
    pub report: Report,
    pub keys: Vec<RunKey>,
    pub logs: Vec<Option<Vec<Vec<Event>>>>,
}

/// Runs the simulation. `progress` is called with the number of workload
/// events processed since its last call, from any worker thread.
///
/// # Errors
/// [`SimulateError`] when a fleet entry's kubelet would not start under a
/// policy (and scope) asked for; checked before any run starts.
pub fn simulate(
    fleet: &Fleet,
    workload: &Workload,
    options: &Options,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Simulation, SimulateError> {
    let mut resources = ResourceTable::new();
    let classes = fleet
        .dra
        .as_ref()
        .map(|dra| dra.objects.device_classes.as_slice())
        .unwrap_or_default();
    let shapes = Shapes::intern(&workload.pods, |i| workload.claims_of(i), classes, &mut resources);
    let names = fleet.node_names();
    let node_groups: Vec<u32> = names
        .iter()
        .map(|&(_, g)| u32::try_from(g).unwrap_or(u32::MAX))
        .collect();
    let node_names: Vec<String> = names.into_iter().map(|(name, _)| name).collect();

    let scopes: Vec<Option<TopologyScope>> = match &options.scopes {
        None => vec![None],
        Some(list) => list.iter().copied().map(Some).collect(),
    };
    let mut keys = Vec::new();
    for &policy in &options.policies {
        for &scope in &scopes {
            for &scheduler in &options.schedulers {
                keys.push(RunKey {
                    policy,
                    scope,
                    scheduler,
                });
            }
        }
    }

    // Every entry must start under every policy and scope asked for: a
    // node that would not start is the fleet's error, not a result.
    for &policy in &options.policies {
        for &scope in &scopes {
            for (entry, group) in fleet.groups.iter().enumerate() {
                start_group_with_dra(group, fleet.dra.as_ref(), policy, scope)
                    .map_err(|error| start_error(entry, group, policy, scope, error))?;
            }
        }
    }

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; keys.len()]);
    let worker = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(key) = keys.get(i) else { break };
            let outcome = match setup_groups(fleet, key, &mut resources.clone()) {
                Err(error) => {
                    progress(workload.events.len() as u64);
                    Err(error)
                }
                Ok(groups) => {
                    let output = run::run(
                        RunInput {
                            groups,
                            node_groups: &node_groups,
                            node_names: &node_names,
                            shapes: &shapes,
                            resources: resources.len(),
                            workload,
                            scheduler: key.scheduler,
                            scoring: options.scoring,
                            keep_logs: options.keep_logs,
                        },
                        progress,
                    );
                    Ok((output.report, output.logs))
                }
            };
            if let Ok(mut results) = results.lock() {
                results[i] = Some(outcome);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..options.threads.max(1).min(keys.len().max(1)) {
            scope.spawn(worker);
        }
        worker();
    });

    let results = results.into_inner().unwrap_or_default();
    let mut report = Report {
        nodes: node_groups.len(),
        pods: workload.adds(),
        events: workload.events.len(),
        skipped: workload.skipped.clone(),
        runs: Vec::new(),
    };
    let mut logs = Vec::new();
    for (key, result) in keys.iter().zip(results) {
        let (mut run, log) = result.transpose()?.unwrap_or_default();
        run.policy = key.policy.as_str().to_string();
        run.scope = key.scope.map_or("as-configured", TopologyScope::as_str).to_string();
        run.scheduler = key.scheduler.as_str().to_string();
        report.runs.push(run);
        logs.push(log);
    }
    Ok(Simulation { report, keys, logs })
}

fn start_error(
    entry: usize,
    group: &crate::NodeGroup,
    policy: TopologyPolicyName,
    scope: Option<TopologyScope>,
    error: StartError,
) -> SimulateError {
    SimulateError {
        entry,
        name: group.name.clone(),
        policy: policy.as_str().to_string(),
        scope: scope.map(|s| s.as_str().to_string()),
        error: Box::new(error),
    }
}

/// Each node shape's kubelet configuration with the run's policy (and
/// scope) laid over it, started.
///
/// A resource DRA serves on a group's nodes (its release serves extended
/// resources through DRA, a DeviceClass of the fleet names it, and the
/// node's allocatable has none of it) gets [`DRA_SERVED`] as its
/// allocatable: the scheduler's `NodeResourcesFit` leaves it to the
/// DynamicResources plugin (`shouldDelegateResourceToDRA`), which finds
/// the devices or refuses the node.
fn setup_groups(fleet: &Fleet, key: &RunKey, resources: &mut ResourceTable) -> Result<Vec<GroupSetup>, SimulateError> {
    let mut groups = Vec::new();
    for (entry, group) in fleet.groups.iter().enumerate() {
        let (node, dra) = start_group_with_dra(group, fleet.dra.as_ref(), key.policy, key.scope)
            .map_err(|error| start_error(entry, group, key.policy, key.scope, error))?;
        let allocatable_list = node.resources().allocatable.clone();
        let mut allocatable = resources.dense(&allocatable_list);
        if let (Some(state), Some(block)) = (&dra, &fleet.dra)
            && topoalign_dra::extended::enabled_by_default(state.release()).unwrap_or(false)
        {
            let classes = topoalign_dra::extended::ClassResolver::new(&block.objects.device_classes);
            for (index, name) in resources.names().iter().enumerate() {
                let served = classes.get(name).is_some() && allocatable.get(index).copied().unwrap_or(0) <= 0;
                if served {
                    if allocatable.len() <= index {
                        allocatable.resize(index + 1, 0);
                    }
                    allocatable[index] = DRA_SERVED;
                }
            }
        }
        groups.push(GroupSetup {
            policy: node.config().topology_policy,
            scope: node.config().topology_scope,
            root: node,
            dra,
            allocatable,
            allocatable_list,
        });
    }
    Ok(groups)
}

/// The allocatable the scheduler's resource fit gives a resource DRA
/// serves on a node: it never checks one ([`setup_groups`]).
pub(crate) const DRA_SERVED: i64 = i64::MAX;

/// Starts one node of `group` under `policy` (and `scope`, when given).
///
/// # Errors
/// [`StartError::Kubelet`]: the kubelet's start-up refusal, or a malformed
/// kubelet block.
pub fn start_group(
    group: &crate::NodeGroup,
    policy: TopologyPolicyName,
    scope: Option<TopologyScope>,
) -> Result<Node, StartError> {
    start_spec(&group.spec, policy, scope)
}

/// [`start_group`] on a fleet with a `dra:` block: the node without the
/// devices its drivers publish, and its DRA side (the scheduler's
/// allocator of the node's kubelet release).
///
/// # Errors
/// [`StartError`]: the kubelet's start-up refusal, a malformed kubelet
/// block, or a kubelet release whose scheduler allocator topoalign does not
/// reproduce.
pub fn start_group_with_dra(
    group: &crate::NodeGroup,
    dra: Option<&crate::dra::FleetDra>,
    policy: TopologyPolicyName,
    scope: Option<TopologyScope>,
) -> Result<(Node, Option<DraState>), StartError> {
    let Some(dra) = dra else {
        return Ok((start_group(group, policy, scope)?, None));
    };
    // The release first, from the node as configured.
    let release = start_spec(&group.spec, policy, scope)?
        .config()
        .kubelet_version
        .to_string();
    if let Err(e) = topoalign_dra::features::scheduler_defaults(&release) {
        return Err(StartError::DraRelease {
            release,
            message: e.to_string(),
        });
    }
    let (spec, state) = dra.group(group, &release);
    Ok((start_spec(&spec, policy, scope)?, Some(state)))
}

fn start_spec(
    spec: &topoalign_nrt::NodeSpec,
    policy: TopologyPolicyName,
    scope: Option<TopologyScope>,
) -> Result<Node, StartError> {
    let mut kubelet = match &spec.kubelet {
        serde_json::Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    kubelet.insert("topologyManagerPolicy".into(), policy.as_str().into());
    if let Some(scope) = scope {
        kubelet.insert("topologyManagerScope".into(), scope.as_str().into());
    }
    let spec = topoalign_nrt::NodeSpec {
        topology: spec.topology.clone(),
        kubelet: serde_json::Value::Object(kubelet),
    };
    Ok(topoalign_nrt::start_node(&spec)?)
}

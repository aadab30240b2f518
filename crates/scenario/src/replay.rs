//! Playing a scenario's events through a [`Node`], as a kubelet with the
//! scenario's configuration would see them.

use std::collections::HashMap;

use topoalign_engine::{Decision, MergeStrategy, Node, NodeState};
use topoalign_model::Pod;

use crate::document::TypedScenario;
use crate::result::{EventResult, FinalState, ResultDocument};
use crate::{Scenario, ScenarioError};

/// A replay's outcome: the kubelet ran the events, or refused to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replay {
    Completed(ResultDocument),
    /// The kubelet's start-up error text.
    Refused(String),
}

/// One event, read and checked before anything runs.
enum Event {
    Add(Pod),
    Delete { key: String },
}

/// Replays `scenario`.
///
/// # Errors
/// [`ScenarioError`] when the scenario itself is malformed (a bad pod, a
/// bad topology, an event that is neither `add` nor `delete`); a
/// configuration the kubelet refuses is a [`Replay::Refused`], not an error.
pub fn replay(scenario: &Scenario) -> Result<Replay, ScenarioError> {
    replay_with(scenario, MergeStrategy::Fast)
}

/// [`replay`] with a chosen merge algorithm (the answer must not depend on
/// it; tests check that).
///
/// # Errors
/// As [`replay`].
pub fn replay_with(scenario: &Scenario, strategy: MergeStrategy) -> Result<Replay, ScenarioError> {
    run(
        &scenario.topology,
        &scenario.kubelet,
        || read_raw_events(scenario),
        strategy,
    )
}

/// A scenario read for [`ReplayInput::replay`]: from JSON text, each pod
/// deserialized once, straight into the Kubernetes type, and converted
/// into the engine's pod while reading. Replaying it answers exactly as
/// [`Scenario::parse`] then [`replay`] (same results, same errors: any text
/// the direct reading does not take goes through them).
pub struct ReplayInput {
    /// The `kubelet:` block (raw, as in [`Scenario`]).
    pub kubelet: serde_json::Value,
    topology: crate::TopologySpec,
    events: Events,
}

/// The events of a [`ReplayInput`]: read already, or still raw (read at
/// replay time, after the topology, for errors in [`replay`]'s order).
enum Events {
    Read(Vec<Event>),
    Raw(Scenario),
}

impl ReplayInput {
    /// Reads scenario text (JSON or YAML).
    ///
    /// # Errors
    /// As [`Scenario::parse`].
    pub fn parse(text: &str) -> Result<ReplayInput, ScenarioError> {
        if let Some(typed) = TypedScenario::parse_json(text)
            && let Ok(events) = read_events(
                typed
                    .events
                    .iter()
                    .map(|e| (e.add.as_deref().map(Manifest::Typed), e.delete.as_ref())),
            )
        {
            return Ok(ReplayInput {
                kubelet: typed.kubelet,
                topology: typed.topology,
                events: Events::Read(events),
            });
        }
        let scenario = Scenario::parse(text)?;
        Ok(ReplayInput {
            kubelet: scenario.kubelet.clone(),
            topology: scenario.topology.clone(),
            events: Events::Raw(scenario),
        })
    }

    /// Replays it, as [`replay`] replays the scenario.
    ///
    /// # Errors
    /// As [`replay`].
    pub fn replay(self) -> Result<Replay, ScenarioError> {
        let ReplayInput {
            kubelet,
            topology,
            events,
        } = self;
        let events = || match events {
            Events::Read(events) => Ok(events),
            Events::Raw(scenario) => read_raw_events(&scenario),
        };
        run(&topology, &kubelet, events, MergeStrategy::Fast)
    }
}

/// The replay: the machine, the events, the kubelet's start, the events
/// played, the result document.
fn run(
    topology: &crate::TopologySpec,
    kubelet: &serde_json::Value,
    events: impl FnOnce() -> Result<Vec<Event>, ScenarioError>,
    strategy: MergeStrategy,
) -> Result<Replay, ScenarioError> {
    let machine = topology.to_machine()?;
    let events = events()?;
    let mut node = match topoalign_k8s::start_node(machine, kubelet) {
        Ok(node) => node,
        Err(topoalign_k8s::ConfigError::Refused(text)) => return Ok(Replay::Refused(text)),
        Err(topoalign_k8s::ConfigError::Invalid { path, message }) => {
            return Err(ScenarioError::Field {
                path: join_path("kubelet", &path),
                message,
            });
        }
    };
    node.set_merge_strategy(strategy);

    let results = apply_events(&mut node, events)
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| match outcome {
            EventOutcome::Admission(decision) => admission_result(index, decision),
            EventOutcome::Deletion { pod, found: true } => EventResult {
                deleted: Some(true),
                ..blank(index, pod)
            },
            EventOutcome::Deletion { pod, found: false } => EventResult {
                deleted: Some(false),
                message: Some("pod not found".into()),
                ..blank(index, pod)
            },
        })
        .collect();
    Ok(Replay::Completed(ResultDocument {
        results,
        final_state: final_state(&node.state()),
    }))
}

/// What one event did to the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventOutcome {
    /// An `add`: the engine's decision.
    Admission(Decision),
    /// A `delete` of `namespace/name`; `found` is false when no such pod
    /// was added (or it was deleted already).
    Deletion { pod: String, found: bool },
}

/// Plays a scenario's events onto a started `node` (its adds and deletes
/// in order, a delete removing the newest pod of that name), the way
/// [`replay`] does. Every event is read before the first is played, so a
/// malformed scenario leaves the node untouched.
///
/// # Errors
/// [`ScenarioError`] naming the malformed event.
pub fn play_events(node: &mut Node, scenario: &Scenario) -> Result<Vec<EventOutcome>, ScenarioError> {
    let events = read_raw_events(scenario)?;
    Ok(apply_events(node, events))
}

fn apply_events(node: &mut Node, events: Vec<Event>) -> Vec<EventOutcome> {
    // Pods added and not yet deleted: (namespace/name, uid), newest last.
    let mut added: Vec<(String, String)> = Vec::new();
    events
        .into_iter()
        .map(|event| match event {
            Event::Add(pod) => {
                added.push((pod.key(), pod.uid.clone()));
                EventOutcome::Admission(node.admit(pod))
            }
            Event::Delete { key } => match added.iter().rposition(|(k, _)| *k == key) {
                Some(position) => {
                    let (_, uid) = added.remove(position);
                    node.remove(&uid);
                    EventOutcome::Deletion { pod: key, found: true }
                }
                None => EventOutcome::Deletion { pod: key, found: false },
            },
        })
        .collect()
}

/// A pod manifest of an `add` event.
#[derive(Clone, Copy)]
enum Manifest<'a> {
    /// As [`Scenario`] holds it.
    Raw(&'a serde_json::Value),
    /// As [`TypedScenario`] holds it.
    Typed(&'a k8s_openapi::api::core::v1::Pod),
}

impl Manifest<'_> {
    fn pod(self, default_uid: &str) -> Result<Pod, topoalign_k8s::PodError> {
        match self {
            Manifest::Raw(value) => topoalign_k8s::pod_from_value(value, default_uid),
            Manifest::Typed(pod) => topoalign_k8s::pod_from_k8s(pod, default_uid),
        }
    }
}

fn read_raw_events(scenario: &Scenario) -> Result<Vec<Event>, ScenarioError> {
    read_events(
        scenario
            .events
            .iter()
            .map(|e| (e.add.as_ref().map(Manifest::Raw), e.delete.as_ref())),
    )
}

/// Reads and checks the events (`add` manifest, `delete` key), in order.
fn read_events<'a>(
    specs: impl ExactSizeIterator<Item = (Option<Manifest<'a>>, Option<&'a String>)>,
) -> Result<Vec<Event>, ScenarioError> {
    let mut events = Vec::with_capacity(specs.len());
    // The API server holds one pod per namespace/name (and per uid) until it
    // is deleted; a second add would make two pods answer to one name.
    let mut live: HashMap<String, (usize, String)> = HashMap::new();
    let mut uids: HashMap<String, usize> = HashMap::new();
    for (index, spec) in specs.enumerate() {
        let at = || format!("events[{index}]");
        events.push(match spec {
            (Some(manifest), None) => {
                // A pod without metadata.uid gets one unique to this event.
                let uid = format!("topoalign-event-{index}");
                let pod = manifest.pod(&uid).map_err(|e| ScenarioError::Field {
                    path: join_path(&format!("{}.add", at()), e.path()),
                    message: e.message(),
                })?;
                if let Some((earlier, _)) = live.get(&pod.key()) {
                    return Err(ScenarioError::Field {
                        path: format!("{}.add.metadata.name", at()),
                        message: format!(
                            "pod {} is already on the node (added by events[{earlier}]); delete it first: \
                             the API server holds one pod per namespace/name",
                            pod.key()
                        ),
                    });
                }
                if let Some(earlier) = uids.insert(pod.uid.clone(), index) {
                    return Err(ScenarioError::Field {
                        path: format!("{}.add.metadata.uid", at()),
                        message: format!("uid {:?} is already used by events[{earlier}]", pod.uid),
                    });
                }
                live.insert(pod.key(), (index, pod.uid.clone()));
                Event::Add(pod)
            }
            (None, Some(key)) => {
                let key = if key.contains('/') {
                    key.clone()
                } else {
                    format!("default/{key}")
                };
                if !topoalign_k8s::is_valid_pod_key(&key) {
                    return Err(ScenarioError::Field {
                        path: format!("{}.delete", at()),
                        message: format!(
                            "{key:?} is not a pod's namespace/name (lowercase letters, digits, '-' and '.')"
                        ),
                    });
                }
                if let Some((_, uid)) = live.remove(&key) {
                    uids.remove(&uid);
                }
                Event::Delete { key }
            }
            _ => {
                return Err(ScenarioError::Field {
                    path: at(),
                    message: "an event has exactly one of `add` (a Pod) or `delete` (namespace/name)".into(),
                });
            }
        });
    }
    Ok(events)
}

/// `parent.child`, or `parent` when the error is about the whole value.
fn join_path(parent: &str, child: &str) -> String {
    if child.is_empty() {
        parent.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

fn blank(event: usize, pod: String) -> EventResult {
    EventResult {
        event,
        pod,
        admitted: None,
        deleted: None,
        reason: None,
        message: None,
        containers: None,
    }
}

fn admission_result(index: usize, decision: Decision) -> EventResult {
    match decision.rejection {
        Some(rejection) => EventResult {
            admitted: Some(false),
            reason: Some(rejection.reason),
            message: Some(rejection.message),
            ..blank(index, decision.pod)
        },
        None => EventResult {
            admitted: Some(true),
            containers: Some(decision.containers),
            ..blank(index, decision.pod)
        },
    }
}

fn final_state(state: &NodeState) -> FinalState {
    FinalState {
        default_cpu_set: state.default_cpu_set.to_string(),
        cpu_assignments: state
            .cpu_assignments
            .iter()
            .map(|(pod, containers)| {
                (
                    pod.clone(),
                    containers
                        .iter()
                        .map(|(name, cpus)| (name.clone(), cpus.to_string()))
                        .collect(),
                )
            })
            .collect(),
        memory_assignments: state.memory_assignments.clone(),
        pod_cpu_assignments: state
            .pod_cpu_assignments
            .iter()
            .map(|(pod, cpus)| (pod.clone(), cpus.to_string()))
            .collect(),
        pod_memory_assignments: state.pod_memory_assignments.clone(),
    }
}

//! Playing a scenario's events through a [`Node`], as a kubelet with the
//! scenario's configuration would see them.

use std::collections::HashMap;

use topoalign_engine::{Decision, MergeStrategy, Node, NodeState, ResizeDecision, ResizeError, ResizeOutcome};
use topoalign_model::{Pod, QosClass, Quantity};

use crate::document::{ResizeSpec, RestartSpec, TypedScenario};
use crate::dra::{DraEventInput, DraEventResult, DraSpec};
use crate::result::{EventResult, FinalState, Readmission, ResultDocument};
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
    Delete {
        key: String,
    },
    /// The pod as the API server holds it after the resize: its
    /// containers' `cpu`/`memory` are the desired sizes.
    Resize {
        desired: Pod,
        /// The pod's `spec.priority` (0 when unset): the order of pending
        /// resizes reads it.
        priority: i32,
    },
    /// The kubelet restarts with these fields laid over its block.
    Restart {
        kubelet: serde_json::Map<String, serde_json::Value>,
    },
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
        |notes| read_raw_events(scenario, notes),
        strategy,
        scenario.dra.as_deref().map(|dra| (dra, dra_events(scenario))),
    )
}

/// A scenario's events as the DRA walk reads them: the pods added (their
/// `spec.resourceClaims`), the pods deleted. A manifest that is not a pod
/// is left to the kubelet's reading, which refuses it.
fn dra_events(scenario: &Scenario) -> Vec<DraEvent> {
    scenario
        .events
        .iter()
        .map(|event| match (&event.add, &event.delete) {
            (Some(manifest), None) => serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(manifest.clone())
                .map_or(DraEvent::Other, |pod| DraEvent::Add(Box::new(pod))),
            (None, Some(key)) => DraEvent::Delete(if key.contains('/') {
                key.clone()
            } else {
                format!("default/{key}")
            }),
            _ => DraEvent::Other,
        })
        .collect()
}

/// One event for the DRA walk ([`dra_events`]).
enum DraEvent {
    Add(Box<k8s_openapi::api::core::v1::Pod>),
    Delete(String),
    Other,
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
    /// With the warnings reading them gave.
    Read(Vec<Event>, Vec<String>),
    Raw(Scenario),
}

impl ReplayInput {
    /// Reads scenario text (JSON or YAML).
    ///
    /// # Errors
    /// As [`Scenario::parse`].
    pub fn parse(text: &str) -> Result<ReplayInput, ScenarioError> {
        let mut notes = Vec::new();
        if let Some(typed) = TypedScenario::parse_json(text)
            && typed.dra.is_none()
            && let Ok(events) = read_events(
                typed.events.iter().map(|e| {
                    (
                        e.add.as_deref().map(Manifest::Typed),
                        e.delete.as_ref(),
                        e.resize.as_ref(),
                        e.restart.as_ref(),
                    )
                }),
                topoalign_k8s::PodLevelField::of_kubelet(&typed.kubelet),
                &mut notes,
            )
        {
            return Ok(ReplayInput {
                kubelet: typed.kubelet,
                topology: typed.topology,
                events: Events::Read(events, notes),
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
        match events {
            Events::Read(events, read_notes) => run(
                &topology,
                &kubelet,
                |notes| {
                    notes.extend(read_notes);
                    Ok(events)
                },
                MergeStrategy::Fast,
                None,
            ),
            Events::Raw(scenario) => run(
                &topology,
                &kubelet,
                |notes| read_raw_events(&scenario, notes),
                MergeStrategy::Fast,
                scenario.dra.as_deref().map(|dra| (dra, dra_events(&scenario))),
            ),
        }
    }
}

/// The replay: the machine, the events, the kubelet's start, the events
/// played, the result document.
fn run(
    topology: &crate::TopologySpec,
    kubelet: &serde_json::Value,
    events: impl FnOnce(&mut Vec<String>) -> Result<Vec<Event>, ScenarioError>,
    strategy: MergeStrategy,
    dra: Option<(&DraSpec, Vec<DraEvent>)>,
) -> Result<Replay, ScenarioError> {
    let machine = topology.to_machine_with_numa_labels()?;
    // The DRA walk maps the pinned CPUs to NUMA nodes.
    let dra_machine = dra.as_ref().map(|_| machine.clone());
    let mut notes = Vec::new();
    let events = events(&mut notes)?;
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

    let mut results: Vec<EventResult> = apply_events(&mut node, kubelet, events)?
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| match outcome {
            EventOutcome::Admission(decision) => admission_result(index, decision),
            EventOutcome::Deletion {
                pod,
                found: true,
                accepted_pending,
            } => EventResult {
                deleted: Some(true),
                accepted_pending,
                ..blank(index, pod)
            },
            EventOutcome::Deletion { pod, found: false, .. } => EventResult {
                deleted: Some(false),
                message: Some("pod not found".into()),
                ..blank(index, pod)
            },
            EventOutcome::Resize(decision) => resize_result(index, decision),
            EventOutcome::ResizeOfAbsentPod { pod } => EventResult {
                resized: Some(false),
                message: Some(NOT_ADMITTED.into()),
                ..blank(index, pod)
            },
            EventOutcome::Restart(Ok(decisions)) => EventResult {
                restarted: Some(true),
                pods: Some(decisions.into_iter().map(readmission).collect()),
                ..blank(index, String::new())
            },
            EventOutcome::Restart(Err(text)) => EventResult {
                restarted: Some(false),
                message: Some(text),
                ..blank(index, String::new())
            },
        })
        .collect();
    // A machine numbered anew (NUMA ids past 63) answers with its own ids.
    let mut final_state = final_state(&node.state());
    if node.machine().numa_labels().is_some() {
        label_numa_ids(node.machine(), &mut results, &mut final_state);
    }
    let dra = match (dra, dra_machine) {
        (Some((spec, dra_events)), Some(machine)) => dra_results(spec, kubelet, &machine, &dra_events, &results)?,
        _ => Vec::new(),
    };
    Ok(Replay::Completed(ResultDocument {
        results,
        final_state,
        dra,
        warnings: node
            .start_hazards()
            .iter()
            .map(ToString::to_string)
            .chain(notes)
            .collect(),
    }))
}

/// What the scheduler's DRA allocator gives each pod with claims, beside
/// the kubelet's placement of its CPUs and memory ([`crate::dra::walk`]),
/// for the scenario's release.
fn dra_results(
    spec: &DraSpec,
    kubelet: &serde_json::Value,
    machine: &topoalign_model::Machine,
    events: &[DraEvent],
    results: &[EventResult],
) -> Result<Vec<DraEventResult>, ScenarioError> {
    let release = match kubelet.get(topoalign_k8s::kubelet_config::KUBELET_VERSION_FIELD) {
        Some(value) => topoalign_k8s::parse_kubelet_version(value).map_err(|error| ScenarioError::Field {
            path: format!("kubelet.{}", topoalign_k8s::kubelet_config::KUBELET_VERSION_FIELD),
            message: error.to_string(),
        })?,
        None => topoalign_model::KubeletVersion::default(),
    }
    .to_string();
    if !topoalign_dra::features::RELEASES.contains(&release.as_str()) {
        return Err(ScenarioError::Field {
            path: "dra".to_owned(),
            message: format!(
                "the kubelet release is {release}; DRA allocation is reproduced for {}",
                topoalign_dra::features::RELEASES.join(", ")
            ),
        });
    }
    let inputs = events.iter().zip(results).map(|(event, result)| match event {
        DraEvent::Add(pod) => DraEventInput::Add {
            pod,
            placements: result.containers.as_deref().unwrap_or_default(),
        },
        DraEvent::Delete(key) if result.deleted == Some(true) => DraEventInput::Delete { pod: key },
        _ => DraEventInput::Other,
    });
    let spec = crate::dra::with_device_plugin_allocatable(spec, machine);
    crate::dra::walk(&spec, &release, inputs, |cpu| {
        machine.cpu(cpu).map(|c| machine.numa_label(c.numa))
    })
    .map_err(
        |(event, crate::dra::DraError::Claim { index, message })| ScenarioError::Field {
            path: format!("events[{event}].add.spec.resourceClaims[{index}]"),
            message,
        },
    )
}

/// What one event did to the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventOutcome {
    /// An `add`: the engine's decision.
    Admission(Decision),
    /// A `delete` of `namespace/name`; `found` is false when no such pod
    /// was added (or it was deleted already); `accepted_pending`, the pods
    /// whose pending resize the retry after the removal accepted.
    Deletion {
        pod: String,
        found: bool,
        accepted_pending: Vec<String>,
    },
    /// A `resize` of an admitted pod: the engine's decision.
    Resize(ResizeDecision),
    /// A `resize` of a pod the node refused (`namespace/name`).
    ResizeOfAbsentPod { pod: String },
    /// A `restart`: the decision for each pod running before it, admitted
    /// again in admission order (`topoalign_k8s::restart_node`); or the
    /// kubelet's text when the new process does not start, after which no
    /// event is played and the node is as the old process left it.
    Restart(Result<Vec<Decision>, String>),
}

/// The warning for a pod-level `spec.resources` the API server drops.
pub const DROPPED_POD_LEVEL: &str = "ignored: the PodLevelResources feature gate is off in this release (alpha and \
    off by default in 1.32 and 1.33), so the API server drops the field when it creates the pod and the kubelet \
    never sees it; enable the gate (API server and kubelet) to use pod-level resources";

/// The message of a resize of a pod the node did not admit.
const NOT_ADMITTED: &str = "pod not admitted";

/// Plays a scenario's events onto a started `node` (its adds and deletes
/// in order, a delete removing the newest pod of that name), the way
/// [`replay`] does. Every event is read before the first is played, so a
/// malformed scenario leaves the node untouched.
///
/// # Errors
/// [`ScenarioError`] naming the malformed event.
///
/// `kubelet` is the configuration `node` was started with: a `restart`
/// event lays its fields over it.
pub fn play_events(
    node: &mut Node,
    kubelet: &serde_json::Value,
    scenario: &Scenario,
) -> Result<Vec<EventOutcome>, ScenarioError> {
    let events = read_raw_events(scenario, &mut Vec::new())?;
    apply_events(node, kubelet, events)
}

fn apply_events(
    node: &mut Node,
    kubelet: &serde_json::Value,
    events: Vec<Event>,
) -> Result<Vec<EventOutcome>, ScenarioError> {
    // Pods added and not yet deleted: (namespace/name, uid), newest last.
    let mut added: Vec<(String, String)> = Vec::new();
    let mut outcomes = Vec::with_capacity(events.len());
    for (index, event) in events.into_iter().enumerate() {
        let outcome = match event {
            Event::Add(pod) => {
                added.push((pod.key(), pod.uid.clone()));
                let decision = node.admit(pod);
                if let Some(panic) = &decision.kubelet_panic {
                    return Err(kubelet_crash(&format!("events[{index}].add"), panic));
                }
                EventOutcome::Admission(decision)
            }
            Event::Delete { key } => match added.iter().rposition(|(k, _)| *k == key) {
                Some(position) => {
                    let (_, uid) = added.remove(position);
                    EventOutcome::Deletion {
                        pod: key,
                        found: true,
                        accepted_pending: node.delete(&uid).accepted_pending,
                    }
                }
                None => EventOutcome::Deletion {
                    pod: key,
                    found: false,
                    accepted_pending: Vec::new(),
                },
            },
            Event::Resize { desired, priority } => match node.resize_with_priority(&desired, priority) {
                Ok(decision) => EventOutcome::Resize(decision),
                Err(ResizeError::NotAdmitted(_)) => EventOutcome::ResizeOfAbsentPod { pod: desired.key() },
                Err(error @ ResizeError::NotReproduced(_)) => {
                    return Err(ScenarioError::Field {
                        path: format!("events[{index}].resize"),
                        message: error.to_string(),
                    });
                }
            },
            Event::Restart { kubelet: fields } => {
                match topoalign_k8s::restart_node(node, &laid_over(kubelet, &fields)) {
                    Ok((restarted, decisions)) => {
                        if let Some((decision, panic)) =
                            decisions.iter().find_map(|d| d.kubelet_panic.as_ref().map(|p| (d, p)))
                        {
                            return Err(ScenarioError::Field {
                                path: format!("events[{index}].restart"),
                                message: format!("admitting {} again after the restart: {panic}", decision.pod),
                            });
                        }
                        *node = restarted;
                        // A pod refused now is Failed: a later delete
                        // still names it, as the API server keeps it.
                        EventOutcome::Restart(Ok(decisions))
                    }
                    Err(topoalign_k8s::ConfigError::Refused(text)) => {
                        outcomes.push(EventOutcome::Restart(Err(text)));
                        break;
                    }
                    Err(topoalign_k8s::ConfigError::Invalid { path, message }) => {
                        return Err(ScenarioError::Field {
                            path: join_path(&format!("events[{index}].restart.kubelet"), &path),
                            message,
                        });
                    }
                }
            }
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The answer for an event at which the kubelet crashes: no result
/// document (the kubelet has none to give; it dies, and after its restart
/// dies again re-admitting the same pod), an error naming the event and
/// why.
fn kubelet_crash(path: &str, panic: &topoalign_engine::KubeletPanic) -> ScenarioError {
    ScenarioError::Field {
        path: path.to_owned(),
        message: panic.to_string(),
    }
}

/// `base` (a `kubelet:` block) with `fields` laid over it: each replaces
/// the block's field of its name; `null` removes it.
fn laid_over(base: &serde_json::Value, fields: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    let mut merged = base.as_object().cloned().unwrap_or_default();
    for (name, value) in fields {
        if value.is_null() {
            merged.remove(name);
        } else {
            merged.insert(name.clone(), value.clone());
        }
    }
    serde_json::Value::Object(merged)
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
    /// The pod as an API server keeping or dropping `spec.resources`
    /// creates it; whether it was dropped.
    fn pod(
        self,
        default_uid: &str,
        pod_level: topoalign_k8s::PodLevelField,
    ) -> Result<(Pod, bool), topoalign_k8s::PodError> {
        match self {
            Manifest::Raw(value) => topoalign_k8s::pod_from_value_created(value, default_uid, pod_level),
            Manifest::Typed(pod) => topoalign_k8s::pod_from_k8s_created(pod, default_uid, pod_level),
        }
    }

    /// `spec.priority` (0 when unset), which orders the kubelet's pending
    /// resizes; `Err` with the message when it is no 32-bit integer.
    fn priority(self) -> Result<i32, String> {
        match self {
            Manifest::Raw(value) => match value.pointer("/spec/priority") {
                None | Some(serde_json::Value::Null) => Ok(0),
                Some(v) => v
                    .as_i64()
                    .and_then(|p| i32::try_from(p).ok())
                    .ok_or_else(|| format!("{v} is not a 32-bit integer")),
            },
            Manifest::Typed(pod) => Ok(pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)),
        }
    }
}

/// Reads a scenario's events, as an API server with the scenario's gates
/// creates its pods; `notes` gets a warning per pod-level `spec.resources`
/// such a server drops.
fn read_raw_events(scenario: &Scenario, notes: &mut Vec<String>) -> Result<Vec<Event>, ScenarioError> {
    read_events(
        scenario.events.iter().map(|e| {
            (
                e.add.as_ref().map(Manifest::Raw),
                e.delete.as_ref(),
                e.resize.as_ref(),
                e.restart.as_ref(),
            )
        }),
        topoalign_k8s::PodLevelField::of_kubelet(&scenario.kubelet),
        notes,
    )
}

/// One event as written: its `add` manifest, `delete` key, `resize`,
/// `restart`.
type EventParts<'a> = (
    Option<Manifest<'a>>,
    Option<&'a String>,
    Option<&'a ResizeSpec>,
    Option<&'a RestartSpec>,
);

/// Reads and checks the events (`add` manifest, `delete` key, `resize`),
/// in order.
fn read_events<'a>(
    specs: impl ExactSizeIterator<Item = EventParts<'a>>,
    pod_level: topoalign_k8s::PodLevelField,
    notes: &mut Vec<String>,
) -> Result<Vec<Event>, ScenarioError> {
    let mut events = Vec::with_capacity(specs.len());
    // The API server holds one pod per namespace/name (and per uid) until it
    // is deleted; a second add would make two pods answer to one name.
    let mut live: HashMap<String, (usize, String)> = HashMap::new();
    let mut uids: HashMap<String, usize> = HashMap::new();
    // The API server's pod of each live namespace/name that was resized:
    // later resizes change it further.
    let mut resized: HashMap<String, Pod> = HashMap::new();
    // `spec.priority` of each live namespace/name.
    let mut priorities: HashMap<String, i32> = HashMap::new();
    // The first resize event: a restart after it is not modelled.
    let mut first_resize: Option<usize> = None;
    for (index, spec) in specs.enumerate() {
        let at = || format!("events[{index}]");
        events.push(match spec {
            (Some(manifest), None, None, None) => {
                // A pod without metadata.uid gets one unique to this event.
                let uid = format!("topoalign-event-{index}");
                let (pod, dropped) = manifest.pod(&uid, pod_level).map_err(|e| ScenarioError::Field {
                    path: join_path(&format!("{}.add", at()), e.path()),
                    message: e.message(),
                })?;
                if dropped {
                    notes.push(format!("{}.add.spec.resources: {DROPPED_POD_LEVEL}", at()));
                }
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
                let priority = manifest.priority().map_err(|message| ScenarioError::Field {
                    path: format!("{}.add.spec.priority", at()),
                    message,
                })?;
                priorities.insert(pod.key(), priority);
                live.insert(pod.key(), (index, pod.uid.clone()));
                Event::Add(pod)
            }
            (None, Some(key), None, None) => {
                let key = pod_key(key, &format!("{}.delete", at()))?;
                if let Some((_, uid)) = live.remove(&key) {
                    uids.remove(&uid);
                }
                resized.remove(&key);
                Event::Delete { key }
            }
            (None, None, None, Some(spec)) => {
                let path = format!("{}.restart", at());
                if let Some(earlier) = first_resize {
                    return Err(ScenarioError::Field {
                        path,
                        message: format!(
                            "a restart after a resize (events[{earlier}]) is not modelled: the allocation \
                             manager's checkpoint is not reproduced"
                        ),
                    });
                }
                if spec.kubelet.contains_key("kubeletVersion") {
                    return Err(ScenarioError::Field {
                        path: format!("{path}.kubelet.kubeletVersion"),
                        message: "a restart keeps the kubelet's release".into(),
                    });
                }
                Event::Restart {
                    kubelet: spec.kubelet.clone(),
                }
            }
            (None, None, Some(spec), None) => {
                first_resize.get_or_insert(index);
                let path = format!("{}.resize", at());
                let key = pod_key(&spec.pod, &format!("{path}.pod"))?;
                let Some((added_by, _)) = live.get(&key) else {
                    return Err(ScenarioError::Field {
                        path: format!("{path}.pod"),
                        message: format!("pod {key} is not on the node (no add before this event, or deleted)"),
                    });
                };
                let current = match (resized.get(&key), &events[*added_by]) {
                    (Some(pod), _) | (None, Event::Add(pod)) => pod,
                    (None, _) => {
                        return Err(ScenarioError::Field {
                            path: format!("{path}.pod"),
                            message: format!("pod {key} is not on the node"),
                        });
                    }
                };
                let desired = resized_pod(current, spec, &path)?;
                let priority = priorities.get(&key).copied().unwrap_or(0);
                resized.insert(key, desired.clone());
                Event::Resize { desired, priority }
            }
            _ => {
                return Err(ScenarioError::Field {
                    path: at(),
                    message: "an event has exactly one of `add` (a Pod), `delete` (namespace/name), `resize` or \
                              `restart`"
                        .into(),
                });
            }
        });
    }
    Ok(events)
}

/// `namespace/name` of a `delete` or `resize` (`name` alone: `default`).
fn pod_key(key: &str, path: &str) -> Result<String, ScenarioError> {
    let key = if key.contains('/') {
        key.to_string()
    } else {
        format!("default/{key}")
    };
    if !topoalign_k8s::is_valid_pod_key(&key) {
        return Err(ScenarioError::Field {
            path: path.to_string(),
            message: format!("{key:?} is not a pod's namespace/name (lowercase letters, digits, '-' and '.')"),
        });
    }
    Ok(key)
}

/// `pod` with the sizes of a `resize` event, checked as the API server
/// checks a resize: only `cpu` and `memory` of app containers and sidecars,
/// requests within limits, and the same QoS class.
fn resized_pod(pod: &Pod, spec: &ResizeSpec, path: &str) -> Result<Pod, ScenarioError> {
    let field = |path: String, message: String| ScenarioError::Field { path, message };
    if spec.containers.is_empty() {
        return Err(field(
            format!("{path}.containers"),
            "a resize names at least one container".into(),
        ));
    }
    let mut desired = pod.clone();
    for (i, change) in spec.containers.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        if spec.containers[..i].iter().any(|c| c.name == change.name) {
            return Err(field(
                format!("{at}.name"),
                format!("container {:?} is named twice", change.name),
            ));
        }
        let container = desired
            .containers
            .iter_mut()
            .chain(desired.init_containers.iter_mut().filter(|c| c.restartable))
            .find(|c| c.name == change.name)
            .ok_or_else(|| {
                field(
                    format!("{at}.name"),
                    format!(
                        "{} has no container or sidecar (restartPolicy: Always init container) named {:?}; \
                         init containers that run to completion are not resized",
                        pod.key(),
                        change.name
                    ),
                )
            })?;
        for (list, amounts, name) in [
            (&mut container.requests, &change.resources.requests, "requests"),
            (&mut container.limits, &change.resources.limits, "limits"),
        ] {
            for (resource, value) in amounts {
                let at = format!("{at}.resources.{name}.{resource}");
                if resource != "cpu" && resource != "memory" {
                    return Err(field(at, "only cpu and memory are resized in place".into()));
                }
                list.insert(
                    resource.clone(),
                    resize_quantity(value).map_err(|m| field(at.clone(), m))?,
                );
            }
        }
        // core/v1 `SetDefaults_Pod`, as the API server defaults the
        // patched pod: a limit without a request is also the request.
        for (resource, limit) in &container.limits {
            container.requests.entry(resource.clone()).or_insert(*limit);
        }
        for resource in ["cpu", "memory"] {
            if let (Some(request), Some(limit)) = (container.requests.get(resource), container.limits.get(resource))
                && request > limit
            {
                return Err(field(
                    format!("{at}.resources.requests.{resource}"),
                    format!("must be less than or equal to the {resource} limit"),
                ));
            }
        }
    }
    if pod.pod_resources.is_none() {
        let before = QosClass::of_containers(&pod.init_containers, &pod.containers);
        let after = QosClass::of_containers(&desired.init_containers, &desired.containers);
        if before != after {
            return Err(field(
                format!("{path}.containers"),
                format!(
                    "the pod's QoS class would change from {before:?} to {after:?}; the API server refuses that (Pod QoS is immutable)"
                ),
            ));
        }
    }
    Ok(desired)
}

/// A quantity of a `resize` event: a string or a number, positive, as
/// the kubelet gets it. A resize is a PATCH of the pod (1.33+: of its
/// `resize` subresource), and the API server's patch handler decodes the
/// patched pod with defaulting (apiserver `handlers/patch.go`:
/// `applyPatchToObject` calls `defaulter.Default`; the JSON and merge
/// patchers decode through the codec, which defaults): core/v1
/// `SetDefaults_ResourceList` rounds every amount up to a thousandth
/// ([`topoalign_k8s::defaulting::round_up_milli`]) before validation and
/// before the kubelet sees it (`1.0005` is `1001m`).
fn resize_quantity(value: &serde_json::Value) -> Result<Quantity, String> {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        other => return Err(format!("expected a quantity, found {other}")),
    };
    // The resize subresource's body is read as any pod's: trimmed as
    // Quantity.UnmarshalJSON trims.
    let quantity = topoalign_k8s::parse_quantity_field(&text).map_err(|e| format!("{text:?}: {e}"))?;
    if quantity.is_negative() {
        return Err(format!("{text:?} must be greater than or equal to 0"));
    }
    Ok(topoalign_k8s::defaulting::round_up_milli(quantity))
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
        resized: None,
        restarted: None,
        reason: None,
        message: None,
        containers: None,
        pods: None,
        accepted_pending: Vec::new(),
    }
}

/// A pod admitted again after a restart.
fn readmission(decision: Decision) -> Readmission {
    match decision.rejection {
        Some(rejection) => Readmission {
            pod: decision.pod,
            admitted: false,
            reason: Some(rejection.reason),
            message: Some(rejection.message),
            containers: None,
        },
        None => Readmission {
            pod: decision.pod,
            admitted: true,
            reason: None,
            message: None,
            containers: Some(decision.containers),
        },
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

fn resize_result(index: usize, decision: ResizeDecision) -> EventResult {
    let result = |pod| EventResult {
        accepted_pending: decision.accepted_pending.clone(),
        ..blank(index, pod)
    };
    match decision.outcome {
        // Taken unchecked (`InPlacePodVerticalScaling` off): the desired
        // sizes are what the kubelet counts, as the real kubelet's answer
        // reads (no condition).
        ResizeOutcome::Applied | ResizeOutcome::Unchecked => EventResult {
            resized: Some(true),
            ..result(decision.pod)
        },
        ResizeOutcome::Pending { reason, message } => EventResult {
            resized: Some(false),
            reason: Some(reason.as_str().into()),
            message: Some(message),
            ..result(decision.pod)
        },
    }
}

/// The NUMA ids of a result on a machine numbered anew, written as the
/// scenario's own ids.
fn label_numa_ids(machine: &topoalign_model::Machine, results: &mut [EventResult], state: &mut FinalState) {
    let relabel = |nodes: &mut Vec<usize>| nodes.iter_mut().for_each(|n| *n = machine.numa_label(*n));
    for result in results {
        let containers = result.containers.iter_mut().flatten().chain(
            result
                .pods
                .iter_mut()
                .flatten()
                .flat_map(|pod| pod.containers.iter_mut().flatten()),
        );
        for container in containers {
            container.memory_numa.iter_mut().for_each(relabel);
        }
    }
    for nodes in state
        .memory_assignments
        .values_mut()
        .flat_map(|containers| containers.values_mut())
        .chain(state.pod_memory_assignments.values_mut())
    {
        relabel(nodes);
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

//! The node a command works on: [`read_node_file`] for the machine (and a
//! scenario's blocks), [`read_kubelet_config`] for a configuration file,
//! and [`start`], which puts them together with the command line's
//! [`Overrides`] and starts the engine node.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use topoalign_engine::{
    CpuPolicyName, MemoryPolicyName, Node, ResizeDecision, ResizeOutcome, TopologyPolicyName, TopologyScope,
};
use topoalign_k8s::{ConfigError, KubeletConfiguration};
use topoalign_model::Machine;
use topoalign_scenario::{EventOutcome, Scenario, play_events};

use crate::{IntakeError, invalid, read_text};

/// A machine read from a node file, or from this machine.
#[derive(Clone, Debug)]
pub struct NodeFile {
    pub machine: Machine,
    /// The scenario the machine came from, if it did: its `kubelet:` block
    /// and events belong to the node too.
    pub scenario: Option<Scenario>,
    /// Where the machine came from, for people.
    pub source: String,
    /// Discovery's warnings and notes about the machine.
    pub notes: Vec<String>,
}

/// What kind of node file a path is; [`NodeFileKind::Detect`] decides
/// from the path and the text, the others are a command line's explicit
/// choice (`topology --sysfs`, `--hwloc`, `--scenario`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeFileKind {
    /// A directory or an archive name is a sysfs tree; `.xml` or text
    /// starting with `<` is hwloc XML; anything else a scenario.
    #[default]
    Detect,
    /// A sysfs tree (a directory holding `sys/`, or `/sys` itself) or a
    /// capture archive of one.
    Sysfs,
    /// An hwloc XML export.
    Hwloc,
    /// A scenario (JSON or YAML).
    Scenario,
}

/// Whether `path` is a sysfs tree or a capture archive of one.
fn is_sysfs(path: &Path) -> bool {
    let name = path.to_string_lossy();
    path.is_dir()
        || [".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

/// A node file as read: discovery's machine, or a scenario.
enum Read {
    Discovered(topoalign_discovery::Topology),
    Scenario {
        scenario: Scenario,
        machine: Machine,
        path: PathBuf,
    },
}

fn read(path: Option<&Path>, kind: NodeFileKind) -> Result<Read, IntakeError> {
    let Some(path) = path else {
        return Ok(Read::Discovered(
            topoalign_discovery::read_local().map_err(IntakeError::Local)?,
        ));
    };
    let kind = match kind {
        NodeFileKind::Detect if is_sysfs(path) => NodeFileKind::Sysfs,
        other => other,
    };
    if kind == NodeFileKind::Sysfs {
        return Ok(Read::Discovered(topoalign_discovery::read_sysfs(path)?));
    }
    let text = read_text(path)?;
    let hwloc = match kind {
        NodeFileKind::Hwloc => true,
        NodeFileKind::Detect => path.extension().is_some_and(|e| e == "xml") || text.trim_start().starts_with('<'),
        _ => false,
    };
    if hwloc {
        return Ok(Read::Discovered(topoalign_discovery::parse_hwloc_file(&text, path)?));
    }
    let scenario = Scenario::parse(&text).map_err(|e| invalid(path, e))?;
    // NUMA ids up to 1023, as the kubelet takes them: past 63 the machine
    // is numbered anew and keeps the ids as labels (`Machine::numa_label`).
    let machine = scenario
        .topology
        .to_machine_with_numa_labels()
        .map_err(|e| invalid(path, e))?;
    Ok(Read::Scenario {
        scenario,
        machine,
        path: path.to_path_buf(),
    })
}

/// Reads a node file — a sysfs tree or capture archive (`.tar`, `.tar.gz`,
/// `.tgz`, `.tar.bz2`, `.tar.xz`), an hwloc XML export (`.xml`, or text
/// starting with `<`), or a scenario (JSON or YAML; `-` reads standard
/// input) — or, with `None`, this machine (sysfs and NVML).
///
/// # Errors
/// [`IntakeError`] naming the file and what is wrong with it.
pub fn read_node_file(path: Option<&Path>) -> Result<NodeFile, IntakeError> {
    let topology = match read(path, NodeFileKind::Detect)? {
        Read::Discovered(topology) => topology,
        Read::Scenario {
            scenario,
            machine,
            path,
        } => {
            // What discovery warns about a machine read from a node, said
            // of a scenario's too.
            let past_masks: Vec<usize> = machine
                .numa_labels()
                .unwrap_or_default()
                .iter()
                .copied()
                .filter(|&id| id >= topoalign_model::MAX_NUMA_NODES)
                .collect();
            let notes = if past_masks.is_empty() {
                Vec::new()
            } else {
                vec![topoalign_discovery::Warning::NumaIdsPastMasks { nodes: past_masks }.to_string()]
            };
            return Ok(NodeFile {
                machine,
                scenario: Some(scenario),
                source: path.display().to_string(),
                notes,
            });
        }
    };
    let machine = topology
        .to_machine()
        .map_err(|e| invalid(Path::new(&topology.source), e))?;
    let mut notes: Vec<String> = topology.warnings.iter().map(ToString::to_string).collect();
    notes.extend(topology.notes.iter().cloned());
    Ok(NodeFile {
        machine,
        scenario: None,
        source: topology.source.clone(),
        notes,
    })
}

/// Reads a node file as discovery's richer [`Topology`](topoalign_discovery::Topology)
/// (packages, caches, PCI devices, warnings) for `topology` to show: the
/// same files as [`read_node_file`], a scenario's `topology:` block as the
/// machine it describes.
///
/// # Errors
/// [`IntakeError`] naming the file and what is wrong with it.
pub fn read_topology(path: Option<&Path>, kind: NodeFileKind) -> Result<topoalign_discovery::Topology, IntakeError> {
    Ok(match read(path, kind)? {
        Read::Discovered(topology) => topology,
        Read::Scenario { machine, path, .. } => {
            topoalign_discovery::Topology::from_machine(&machine, format!("scenario {}", path.display()))
        }
    })
}

/// The fields of a KubeletConfiguration file (`/var/lib/kubelet/config.yaml`),
/// checked to be one (`apiVersion`, `kind`, field types).
///
/// # Errors
/// [`IntakeError::Read`], or [`IntakeError::Invalid`] naming the field.
pub fn read_kubelet_config(path: &Path) -> Result<Value, IntakeError> {
    let text = read_text(path)?;
    KubeletConfiguration::from_file_text(&text).map_err(|e| invalid(path, e))?;
    topoalign_k8s::file_fields(&text).map_err(|e| invalid(path, e))
}

/// The command line's single-field changes to the kubelet configuration,
/// as given (`--policy`, `--cpu-policy-option KEY=VALUE`, …).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `topologyManagerPolicy`.
    pub policy: Option<TopologyPolicyName>,
    /// `topologyManagerScope`.
    pub scope: Option<TopologyScope>,
    /// `cpuManagerPolicy`.
    pub cpu_policy: Option<CpuPolicyName>,
    /// `memoryManagerPolicy`.
    pub memory_policy: Option<MemoryPolicyName>,
    /// `reservedSystemCPUs`.
    pub reserved_cpus: Option<String>,
    /// `cpuManagerPolicyOptions` entries, `KEY=VALUE`.
    pub cpu_policy_options: Vec<String>,
    /// `topologyManagerPolicyOptions` entries, `KEY=VALUE`.
    pub topology_policy_options: Vec<String>,
    /// `featureGates` entries, `NAME=BOOL`.
    pub feature_gates: Vec<String>,
    /// `--kubelet-version`: the release of a configuration that does not
    /// name one (see `topoalign_k8s::apply_kubelet_version`).
    pub kubelet_version: Option<topoalign_model::KubeletVersion>,
}

impl Overrides {
    /// Lays the overrides over `kubelet` (made an object when it is not).
    ///
    /// # Errors
    /// [`IntakeError::Override`] for an entry that is not `KEY=VALUE` (or
    /// `NAME=true|false` for a feature gate).
    pub fn apply(&self, kubelet: &mut Value) -> Result<(), IntakeError> {
        if !kubelet.is_object() {
            *kubelet = json!({});
        }
        let Some(fields) = kubelet.as_object_mut() else {
            return Ok(());
        };
        for (field, value) in [
            ("topologyManagerPolicy", self.policy.map(TopologyPolicyName::as_str)),
            ("topologyManagerScope", self.scope.map(TopologyScope::as_str)),
            ("cpuManagerPolicy", self.cpu_policy.map(CpuPolicyName::as_str)),
            ("memoryManagerPolicy", self.memory_policy.map(MemoryPolicyName::as_str)),
            ("reservedSystemCPUs", self.reserved_cpus.as_deref()),
        ] {
            if let Some(value) = value {
                fields.insert(field.to_owned(), json!(value));
            }
        }
        for (field, flag, entries) in [
            (
                "cpuManagerPolicyOptions",
                "--cpu-policy-option",
                &self.cpu_policy_options,
            ),
            (
                "topologyManagerPolicyOptions",
                "--topology-policy-option",
                &self.topology_policy_options,
            ),
        ] {
            for entry in entries {
                let (key, value) = key_value(entry, flag, "expected KEY=VALUE")?;
                insert_into(fields, field, key, json!(value));
            }
        }
        for entry in &self.feature_gates {
            let expected = "expected NAME=true or NAME=false";
            let (name, value) = key_value(entry, "--feature-gate", expected)?;
            let enabled: bool = value.parse().map_err(|_| IntakeError::Override {
                flag: "--feature-gate",
                value: entry.clone(),
                expected,
            })?;
            insert_into(fields, "featureGates", name, json!(enabled));
        }
        Ok(())
    }
}

fn key_value<'a>(text: &'a str, flag: &'static str, expected: &'static str) -> Result<(&'a str, &'a str), IntakeError> {
    text.split_once('=')
        .filter(|(key, _)| !key.is_empty())
        .ok_or_else(|| IntakeError::Override {
            flag,
            value: text.to_owned(),
            expected,
        })
}

/// Inserts `key: value` into the map under `field` (made one if it is
/// missing or not a map).
fn insert_into(fields: &mut Map<String, Value>, field: &str, key: &str, value: Value) {
    let mut map = match fields.remove(field) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    map.insert(key.to_owned(), value);
    fields.insert(field.to_owned(), Value::Object(map));
}

/// What to do with a scenario's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Events {
    /// Replay them: they are the pods already running.
    Replay,
    /// Ignore them (the state comes from elsewhere, or the node starts
    /// empty).
    Ignore,
}

/// The configuration when neither a file nor a scenario gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithoutConfig {
    /// The kubelet's own defaults (CPU manager `none`, topology manager
    /// `none`): what a kubelet started without a file would do.
    KubeletDefaults,
    /// What an allocating agent needs to be useful: the static CPU manager
    /// (so Guaranteed workloads get exclusive CPUs) with the lowest CPU
    /// reserved for everything else, and the best-effort topology policy.
    AgentDefaults,
}

impl WithoutConfig {
    fn fields(self, machine: &Machine) -> Value {
        match self {
            WithoutConfig::KubeletDefaults => json!({}),
            WithoutConfig::AgentDefaults => {
                let lowest = machine.cpus().iter().map(|c| c.id).min().unwrap_or(0);
                json!({
                    "cpuManagerPolicy": "static",
                    "reservedSystemCPUs": lowest.to_string(),
                    "topologyManagerPolicy": "best-effort",
                })
            }
        }
    }

    fn source(self) -> &'static str {
        match self {
            WithoutConfig::KubeletDefaults => "kubelet defaults",
            WithoutConfig::AgentDefaults => "the agent's defaults (static CPU manager, best-effort)",
        }
    }
}

/// Where a command's node comes from.
#[derive(Clone, Debug)]
pub struct NodeInputs<'a> {
    /// The node file ([`read_node_file`]); `None`: this machine.
    pub node: Option<&'a Path>,
    /// A KubeletConfiguration file; replaces a scenario's `kubelet:` block
    /// and the fallback.
    pub kubelet_config: Option<&'a Path>,
    /// Read when `kubelet_config` is not given, before a scenario's block
    /// (diagnose: the kubelet directory's own file).
    pub fallback_kubelet_config: Option<PathBuf>,
    /// The configuration when nothing gives one.
    pub without_config: WithoutConfig,
    /// Laid over whichever configuration was chosen.
    pub overrides: &'a Overrides,
    pub events: Events,
}

impl<'a> NodeInputs<'a> {
    /// A node file and a configuration file, no overrides, events ignored,
    /// the kubelet's defaults otherwise.
    pub fn new(node: Option<&'a Path>, kubelet_config: Option<&'a Path>, overrides: &'a Overrides) -> Self {
        NodeInputs {
            node,
            kubelet_config,
            fallback_kubelet_config: None,
            without_config: WithoutConfig::KubeletDefaults,
            overrides,
            events: Events::Ignore,
        }
    }
}

/// A started node and what it was made from.
#[derive(Clone, Debug)]
pub struct StartedNode {
    pub node: Node,
    /// The effective KubeletConfiguration fields.
    pub kubelet: Value,
    /// Where the machine came from, for people.
    pub machine_source: String,
    /// Where the kubelet configuration came from, for people.
    pub kubelet_source: String,
    /// Things people should know: discovery's warnings, replayed events
    /// the node did not admit.
    pub notes: Vec<String>,
    /// `namespace/name` of the pods running once the events are replayed.
    pub running_before: Vec<String>,
    /// How many of a scenario's events were not played ([`Events::Ignore`]).
    pub ignored_events: usize,
}

/// Reads the node file and the configuration, starts the node with
/// [`topoalign_k8s::start_node`] and, with [`Events::Replay`], replays a
/// scenario's events onto it.
///
/// # Errors
/// [`IntakeError`]: a file that cannot be read or is malformed (named),
/// a bad override, or [`IntakeError::Refused`] with the kubelet's text.
pub fn start(inputs: &NodeInputs<'_>) -> Result<StartedNode, IntakeError> {
    let NodeFile {
        machine,
        scenario,
        source: machine_source,
        mut notes,
    } = read_node_file(inputs.node)?;
    let scenario_block = scenario
        .as_ref()
        .map(|s| s.kubelet.clone())
        .filter(|block| !block.is_null());
    let file = inputs.kubelet_config.or(inputs.fallback_kubelet_config.as_deref());
    let (mut kubelet, kubelet_source) = match file {
        Some(path) => (read_kubelet_config(path)?, path.display().to_string()),
        None if scenario.is_some() => (
            scenario_block.unwrap_or_else(|| json!({})),
            format!("the kubelet block of {machine_source}"),
        ),
        None => (
            inputs.without_config.fields(&machine),
            inputs.without_config.source().to_owned(),
        ),
    };
    notes.extend(
        topoalign_k8s::unknown_field_warnings(&kubelet)
            .into_iter()
            .map(|warning| format!("{kubelet_source}: {warning}")),
    );
    inputs.overrides.apply(&mut kubelet)?;
    if let Some(version) = inputs.overrides.kubelet_version {
        topoalign_k8s::apply_kubelet_version(&mut kubelet, version).map_err(|error| IntakeError::Kubelet {
            origin: kubelet_source.clone(),
            error,
        })?;
    }
    let mut node = topoalign_k8s::start_node(machine, &kubelet).map_err(|error| match error {
        ConfigError::Refused(text) => IntakeError::Refused(text),
        invalid @ ConfigError::Invalid { .. } => IntakeError::Kubelet {
            origin: kubelet_source.clone(),
            error: invalid,
        },
    })?;
    // What the kubelet starts with but answers dangerously on: a warning
    // beside every answer, never a refusal (the kubelet does not refuse).
    notes.extend(
        node.start_hazards()
            .iter()
            .map(|hazard| format!("{kubelet_source}: warning: {hazard}")),
    );
    if let (Events::Replay, Some(scenario)) = (inputs.events, &scenario) {
        let outcomes = play_events(&mut node, &kubelet, scenario).map_err(|e| IntakeError::Invalid {
            path: PathBuf::from(&machine_source),
            message: e.to_string(),
        })?;
        // The last event after which each pod's resize was accepted (by its
        // own resize or, from 1.34, by a later event's retry): an earlier
        // pending resize is no longer what the pod keeps.
        let mut accepted_at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (index, outcome) in outcomes.iter().enumerate() {
            let accepted: &[String] = match outcome {
                EventOutcome::Resize(decision) => {
                    if matches!(decision.outcome, ResizeOutcome::Applied | ResizeOutcome::Unchecked) {
                        accepted_at.insert(decision.pod.clone(), index);
                    }
                    &decision.accepted_pending
                }
                EventOutcome::Deletion { accepted_pending, .. } => accepted_pending,
                _ => &[],
            };
            for pod in accepted {
                accepted_at.insert(pod.clone(), index);
            }
        }
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                EventOutcome::Admission(decision) => {
                    if let Some(rejection) = decision.rejection {
                        notes.push(format!(
                            "{} (event {index}) was not admitted on this node: {}",
                            decision.pod, rejection.reason
                        ));
                    }
                }
                EventOutcome::Resize(ResizeDecision {
                    pod,
                    outcome: ResizeOutcome::Pending { reason, message },
                    ..
                }) if accepted_at.get(&pod).is_none_or(|&at| at < index) => notes.push(format!(
                    "{pod} (event {index}) keeps its allocated resources: resize {}: {message}",
                    reason.as_str()
                )),
                EventOutcome::Resize(ResizeDecision {
                    pod,
                    outcome: ResizeOutcome::Unchecked,
                    ..
                }) => notes.push(format!(
                    "{pod} (event {index}) resized unchecked: InPlacePodVerticalScaling is disabled, so the \
                     kubelet did not look at the resize and counts the desired sizes from now on (the \
                     managers keep what they allocated at admission)"
                )),
                EventOutcome::Restart(Ok(decisions)) => {
                    for decision in decisions.iter().filter(|d| !d.admitted()) {
                        notes.push(format!(
                            "{} was not admitted again when the kubelet restarted (event {index}): {}",
                            decision.pod,
                            decision.rejection.as_ref().map_or("", |r| r.reason.as_str())
                        ));
                    }
                }
                EventOutcome::Restart(Err(text)) => notes.push(format!(
                    "the kubelet does not start again at event {index}; the node is as it was before: {text}"
                )),
                _ => {}
            }
        }
    }
    let running_before = node.pods().iter().map(|p| p.key()).collect();
    let ignored_events = match (inputs.events, &scenario) {
        (Events::Ignore, Some(scenario)) => scenario.events.len(),
        _ => 0,
    };
    Ok(StartedNode {
        node,
        kubelet,
        machine_source,
        kubelet_source,
        notes,
        running_before,
        ignored_events,
    })
}

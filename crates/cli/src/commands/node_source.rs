//! The node `admit`, `explain` and `diagnose` work on, resolved from the
//! command line: the machine (a scenario's `topology:` block, an hwloc XML
//! export, a sysfs tree or capture, or this machine), the kubelet
//! configuration (the scenario's `kubelet:` block or a real
//! KubeletConfiguration file, then single-field overrides), and — for a
//! scenario — its events, replayed as the pods already running.
//!
//! Every failure is bad input (exit status 2) with a message naming the file
//! and, where there is one, the field.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use topoalign_engine::{Node, NodeConfig};
use topoalign_k8s::{KubeletConfiguration, node_config};
use topoalign_model::Machine;
use topoalign_scenario::{EventOutcome, Scenario, play_events};

/// Bad input: the message is printed as is and the exit status is 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl<T: std::fmt::Display> From<T> for BadInput {
    fn from(message: T) -> Self {
        BadInput(message.to_string())
    }
}

#[derive(clap::Args, Clone, Debug, Default)]
pub struct NodeArgs {
    /// The node: a scenario (its topology and kubelet blocks; its events are
    /// replayed first, as the pods already running), an hwloc XML export, or
    /// a sysfs tree or capture archive. Default: this machine.
    #[arg(long, value_name = "FILE")]
    pub node: Option<PathBuf>,
    /// A KubeletConfiguration file (the node's /var/lib/kubelet/config.yaml);
    /// replaces the scenario's kubelet block.
    #[arg(long, value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,
    /// Override topologyManagerPolicy.
    #[arg(long, value_parser = ["none", "best-effort", "restricted", "single-numa-node"])]
    pub policy: Option<String>,
    /// Override topologyManagerScope.
    #[arg(long, value_parser = ["container", "pod"])]
    pub scope: Option<String>,
    /// Override cpuManagerPolicy.
    #[arg(long, value_parser = ["none", "static"])]
    pub cpu_policy: Option<String>,
    /// Override memoryManagerPolicy.
    #[arg(long, value_parser = ["None", "Static"])]
    pub memory_policy: Option<String>,
    /// Override reservedSystemCPUs (a CPU list such as 0,24).
    #[arg(long, value_name = "CPUS")]
    pub reserved_cpus: Option<String>,
    /// Set one cpuManagerPolicyOptions entry (repeatable).
    #[arg(long = "cpu-policy-option", value_name = "KEY=VALUE")]
    pub cpu_policy_options: Vec<String>,
    /// Set one topologyManagerPolicyOptions entry (repeatable).
    #[arg(long = "topology-policy-option", value_name = "KEY=VALUE")]
    pub topology_policy_options: Vec<String>,
    /// Set one feature gate (repeatable).
    #[arg(long = "feature-gate", value_name = "NAME=BOOL")]
    pub feature_gates: Vec<String>,
}

/// A started node and what it was made from.
pub struct ResolvedNode {
    pub node: Node,
    /// The effective KubeletConfiguration fields.
    pub kubelet: Value,
    /// Where the machine came from, for people.
    pub machine_source: String,
    /// Where the kubelet configuration came from, for people.
    pub kubelet_source: String,
    /// Things people should know (discovery warnings, replayed events that
    /// were rejected).
    pub notes: Vec<String>,
    /// `namespace/name` of the pods running before any pod of the command.
    pub running_before: Vec<String>,
}

/// What to do with a scenario's events.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Events {
    /// Replay them: they are the pods already running.
    Replay,
    /// Ignore them (the state comes from elsewhere).
    Ignore,
}

pub fn read_text(path: &Path) -> Result<String, BadInput> {
    if path.as_os_str() == "-" {
        return std::io::read_to_string(std::io::stdin())
            .map_err(|e| BadInput(format!("cannot read standard input: {e}")));
    }
    std::fs::read_to_string(path).map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))
}

fn is_sysfs(path: &Path) -> bool {
    let name = path.to_string_lossy();
    path.is_dir()
        || [".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// Resolves the node. `fallback_kubelet_config` is read when neither
/// `--kubelet-config` nor a scenario gives a configuration (diagnose: the
/// kubelet directory's file).
pub fn resolve(
    args: &NodeArgs,
    events: Events,
    fallback_kubelet_config: Option<&Path>,
) -> Result<ResolvedNode, BadInput> {
    let mut notes = Vec::new();
    let (machine, scenario, machine_source) = read_machine(args, &mut notes)?;

    let (mut kubelet, kubelet_source) = match (&args.kubelet_config, &scenario, fallback_kubelet_config) {
        (Some(path), _, _) => (read_kubelet_config(path)?, path.display().to_string()),
        (None, _, Some(path)) => (read_kubelet_config(path)?, path.display().to_string()),
        (None, Some((path, scenario)), None) => (
            if scenario.kubelet.is_null() {
                json!({})
            } else {
                scenario.kubelet.clone()
            },
            format!("the kubelet block of {}", path.display()),
        ),
        (None, None, None) => (json!({}), "kubelet defaults".to_owned()),
    };
    notes.extend(
        topoalign_k8s::unknown_field_warnings(&kubelet)
            .into_iter()
            .map(|warning| format!("{kubelet_source}: {warning}")),
    );
    apply_overrides(&mut kubelet, args)?;
    let config = node_config_for(&kubelet, &machine, &kubelet_source)?;
    let mut node = Node::start(machine, config)
        .map_err(|e| BadInput(format!("the kubelet would refuse to start on this node: {e}")))?;

    if let (Events::Replay, Some((path, scenario))) = (events, &scenario) {
        replay_events(&mut node, scenario, path, &mut notes)?;
    }
    let running_before = node.pods().iter().map(|p| p.key()).collect();
    Ok(ResolvedNode {
        running_before,
        node,
        kubelet,
        machine_source,
        kubelet_source,
        notes,
    })
}

/// A machine, the scenario it came from (if any), and where it came from.
type MachineSource = (Machine, Option<(PathBuf, Scenario)>, String);

fn read_machine(args: &NodeArgs, notes: &mut Vec<String>) -> Result<MachineSource, BadInput> {
    let topology = match &args.node {
        None => topoalign_discovery::read_local().map_err(|e| {
            BadInput(format!(
                "cannot read this machine ({e}); give the node with --node FILE"
            ))
        })?,
        Some(path) if is_sysfs(path) => topoalign_discovery::read_sysfs(path)?,
        Some(path) => {
            let text = read_text(path)?;
            if path.extension().is_some_and(|e| e == "xml") || text.trim_start().starts_with('<') {
                topoalign_discovery::parse_hwloc_xml(&text, &format!("hwloc XML {}", path.display()))?
            } else {
                let scenario = Scenario::parse(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
                let machine = scenario
                    .topology
                    .to_machine()
                    .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
                let source = path.display().to_string();
                return Ok((machine, Some((path.clone(), scenario)), source));
            }
        }
    };
    notes.extend(topology.warnings.iter().map(ToString::to_string));
    notes.extend(topology.notes.iter().cloned());
    let machine = topology
        .to_machine()
        .map_err(|e| BadInput(format!("{}: {e}", topology.source)))?;
    Ok((machine, None, topology.source.clone()))
}

fn read_kubelet_config(path: &Path) -> Result<Value, BadInput> {
    let text = read_text(path)?;
    KubeletConfiguration::from_file_text(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    Ok(value)
}

fn key_value<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str), BadInput> {
    text.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| BadInput(format!("{flag} {text:?}: expected KEY=VALUE")))
}

fn apply_overrides(kubelet: &mut Value, args: &NodeArgs) -> Result<(), BadInput> {
    if !kubelet.is_object() {
        *kubelet = json!({});
    }
    let Some(fields) = kubelet.as_object_mut() else {
        return Ok(());
    };
    for (field, value) in [
        ("topologyManagerPolicy", &args.policy),
        ("topologyManagerScope", &args.scope),
        ("cpuManagerPolicy", &args.cpu_policy),
        ("memoryManagerPolicy", &args.memory_policy),
        ("reservedSystemCPUs", &args.reserved_cpus),
    ] {
        if let Some(value) = value {
            fields.insert(field.to_owned(), json!(value));
        }
    }
    for (field, flag, entries) in [
        (
            "cpuManagerPolicyOptions",
            "--cpu-policy-option",
            &args.cpu_policy_options,
        ),
        (
            "topologyManagerPolicyOptions",
            "--topology-policy-option",
            &args.topology_policy_options,
        ),
    ] {
        for entry in entries {
            let (key, value) = key_value(entry, flag)?;
            let map = fields.entry(field).or_insert_with(|| Value::Object(Map::new()));
            if let Some(map) = map.as_object_mut() {
                map.insert(key.to_owned(), json!(value));
            }
        }
    }
    for entry in &args.feature_gates {
        let (name, value) = key_value(entry, "--feature-gate")?;
        let enabled: bool = value
            .parse()
            .map_err(|_| BadInput(format!("--feature-gate {entry:?}: expected NAME=true or NAME=false")))?;
        let map = fields
            .entry("featureGates")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(map) = map.as_object_mut() {
            map.insert(name.to_owned(), json!(enabled));
        }
    }
    Ok(())
}

fn node_config_for(kubelet: &Value, machine: &Machine, source: &str) -> Result<NodeConfig, BadInput> {
    let config = KubeletConfiguration::from_value(kubelet).map_err(|e| BadInput(format!("{source}: {e}")))?;
    node_config(&config, machine).map_err(|e| BadInput(format!("the kubelet would refuse to start: {e}")))
}

/// Plays the scenario's events: its adds and deletes are the node's
/// history, and the pods still admitted are the pods running now.
fn replay_events(node: &mut Node, scenario: &Scenario, path: &Path, notes: &mut Vec<String>) -> Result<(), BadInput> {
    let outcomes = play_events(node, scenario).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    for (index, outcome) in outcomes.into_iter().enumerate() {
        if let EventOutcome::Admission(decision) = outcome
            && let Some(rejection) = decision.rejection
        {
            notes.push(format!(
                "{} (event {index}) was not admitted on this node: {}",
                decision.pod, rejection.reason
            ));
        }
    }
    Ok(())
}

/// One line about the node for people.
pub fn describe(resolved: &ResolvedNode) -> String {
    let node = &resolved.node;
    let machine = node.machine();
    let config = node.config();
    let gib = machine.total_memory() as f64 / f64::from(1u32 << 30);
    format!(
        "{}: {} NUMA node{}, {} CPUs, {gib:.0}Gi; topologyManagerPolicy {} (scope {}), cpuManagerPolicy {}, memoryManagerPolicy {}",
        resolved.machine_source,
        machine.numa_nodes().len(),
        if machine.numa_nodes().len() == 1 { "" } else { "s" },
        machine.cpus().len(),
        config.topology_policy.as_str(),
        config.topology_scope.as_str(),
        match config.cpu_policy {
            topoalign_engine::CpuPolicyName::None => "none",
            topoalign_engine::CpuPolicyName::Static => "static",
        },
        match config.memory_policy {
            topoalign_engine::MemoryPolicyName::None => "None",
            topoalign_engine::MemoryPolicyName::Static => "Static",
        },
    )
}

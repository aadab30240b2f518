//! The node flags of `admit`, `explain` and `diagnose` (`--node`,
//! `--kubelet-config` and single-field overrides), handed to
//! `topoalign_intake::start`, and the one line about the started node
//! people read.

use std::path::{Path, PathBuf};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use topoalign_engine::{CpuPolicyName, MemoryPolicyName, TopologyPolicyName, TopologyScope};
use topoalign_intake::{Events, NodeInputs, Overrides, StartedNode, WithoutConfig};
use topoalign_model::{KubeletVersion, UnknownName};

/// A flag taking one of a kubelet vocabulary enum's names (`T::NAMES`,
/// shown as the possible values), parsed into the enum.
pub fn kubelet_name<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = UnknownName> + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
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
    #[arg(long, value_parser = kubelet_name::<TopologyPolicyName>(TopologyPolicyName::NAMES))]
    pub policy: Option<TopologyPolicyName>,
    /// Override topologyManagerScope.
    #[arg(long, value_parser = kubelet_name::<TopologyScope>(TopologyScope::NAMES))]
    pub scope: Option<TopologyScope>,
    /// Override cpuManagerPolicy.
    #[arg(long, value_parser = kubelet_name::<CpuPolicyName>(CpuPolicyName::NAMES))]
    pub cpu_policy: Option<CpuPolicyName>,
    /// Override memoryManagerPolicy.
    #[arg(long, value_parser = kubelet_name::<MemoryPolicyName>(MemoryPolicyName::NAMES))]
    pub memory_policy: Option<MemoryPolicyName>,
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
    #[command(flatten)]
    pub version: KubeletVersionArg,
}

/// `--kubelet-version`, on every command that decides.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct KubeletVersionArg {
    /// The kubelet release whose decisions to reproduce (1.32, v1.33,
    /// 1.34.4, ...), for configurations that do not name one (naming
    /// another is an error). Default: the newest the engine reproduces.
    #[arg(long = "kubelet-version", value_name = "VERSION", value_parser = parse_kubelet_version)]
    pub kubelet_version: Option<KubeletVersion>,
}

fn parse_kubelet_version(text: &str) -> Result<KubeletVersion, String> {
    KubeletVersion::parse(text).map_err(|e| e.to_string())
}

impl KubeletVersionArg {
    /// Applies the flag to a `kubelet:` block read from `origin`.
    ///
    /// # Errors
    /// The block names another release, naming `origin` and the field.
    pub fn apply(&self, kubelet: &mut serde_json::Value, origin: &Path) -> super::Result<()> {
        if let Some(version) = self.kubelet_version {
            topoalign_k8s::apply_kubelet_version(kubelet, version)
                .map_err(|error| super::Error::bad_input(format!("{}: kubelet.{error}", origin.display())))?;
        }
        Ok(())
    }
}

impl NodeArgs {
    /// The overrides as the intake takes them.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            policy: self.policy,
            scope: self.scope,
            cpu_policy: self.cpu_policy,
            memory_policy: self.memory_policy,
            reserved_cpus: self.reserved_cpus.clone(),
            cpu_policy_options: self.cpu_policy_options.clone(),
            topology_policy_options: self.topology_policy_options.clone(),
            feature_gates: self.feature_gates.clone(),
            kubelet_version: self.version.kubelet_version,
        }
    }

    /// Starts the node these flags describe (`fallback`: the kubelet
    /// configuration file read when `--kubelet-config` is not given).
    ///
    /// # Errors
    /// The intake's error, naming the file.
    pub fn start(&self, events: Events, fallback: Option<&Path>) -> super::Result<StartedNode> {
        let overrides = self.overrides();
        let inputs = NodeInputs {
            node: self.node.as_deref(),
            kubelet_config: self.kubelet_config.as_deref(),
            fallback_kubelet_config: fallback.map(Path::to_path_buf),
            without_config: WithoutConfig::KubeletDefaults,
            overrides: &overrides,
            events,
        };
        Ok(topoalign_intake::start(&inputs)?)
    }
}

/// One line about the node for people.
pub fn describe(started: &StartedNode) -> String {
    let node = &started.node;
    let machine = node.machine();
    let config = node.config();
    let gib = machine.total_memory() as f64 / f64::from(1u32 << 30);
    // A machine numbered anew (ids past 63) names its own ids.
    let ids = machine.numa_labels().map_or_else(String::new, |labels| {
        let ids: Vec<String> = labels.iter().map(ToString::to_string).collect();
        format!(" (ids {})", ids.join(", "))
    });
    format!(
        "{}: {} NUMA node{}{ids}, {} CPUs, {gib:.0}Gi; topologyManagerPolicy {} (scope {}), cpuManagerPolicy {}, memoryManagerPolicy {}",
        started.machine_source,
        machine.numa_nodes().len(),
        if machine.numa_nodes().len() == 1 { "" } else { "s" },
        machine.cpus().len(),
        config.topology_policy,
        config.topology_scope,
        config.cpu_policy,
        config.memory_policy,
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        node: NodeArgs,
    }

    #[test]
    fn policy_flags_take_the_kubelets_names_and_only_those() {
        let parsed = Command::try_parse_from([
            "x",
            "--policy",
            "single-numa-node",
            "--scope",
            "pod",
            "--cpu-policy",
            "static",
            "--memory-policy",
            "Static",
        ])
        .unwrap();
        let overrides = parsed.node.overrides();
        assert_eq!(overrides.policy, Some(TopologyPolicyName::SingleNumaNode));
        assert_eq!(overrides.scope, Some(TopologyScope::Pod));
        assert_eq!(overrides.cpu_policy, Some(CpuPolicyName::Static));
        assert_eq!(overrides.memory_policy, Some(MemoryPolicyName::Static));

        // The memory policy is capitalised, as in a KubeletConfiguration.
        let error = Command::try_parse_from(["x", "--memory-policy", "static"])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("[possible values: None, Static]"), "{error}");
    }
}

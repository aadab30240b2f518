//! `topoalign nrt`: the NodeResourceTopology (`topology.node.k8s.io/v1alpha2`)
//! objects of nodes — one node after a scenario's events (or any node file
//! `--node` takes elsewhere), or every node of a fleet (empty) — as YAML or
//! JSON, on standard output or into a file, for clusters that want the data
//! without the agent, and for `topoalign extender --nrt`.

use std::path::PathBuf;

use anyhow::Context;
use topoalign_intake::{Events, NodeInputs, Overrides, read_fleet};
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec, build};

use super::output::Output;
use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// A node file: a scenario (docs/scenario.md; the object of its node
    /// after all its events), an hwloc XML export, or a sysfs tree or
    /// capture.
    #[arg(conflicts_with = "fleet", required_unless_present = "fleet", value_name = "NODE")]
    node: Option<PathBuf>,
    /// A KubeletConfiguration file for the node (replaces a scenario's
    /// kubelet block).
    #[arg(long, value_name = "FILE", conflicts_with = "fleet")]
    kubelet_config: Option<PathBuf>,
    /// A fleet file instead: one object per node, all empty.
    #[arg(long, value_name = "FILE")]
    fleet: Option<PathBuf>,
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
    /// The node's name (not for a fleet).
    #[arg(long, default_value = "node")]
    name: String,
    /// Leave out topoalign's exact-state attributes (machine, kubelet
    /// configuration, pods and their placements).
    #[arg(long)]
    no_exact_state: bool,
    #[command(flatten)]
    output: Output<NrtFormat>,
    /// Also server-side apply the objects to the API server of the
    /// in-cluster configuration or the kubeconfig (the CRD must be
    /// installed: deploy/noderesourcetopology-crd.yaml); each object is
    /// checked against the CRD first.
    #[arg(long)]
    publish: bool,
}

#[derive(Clone, Copy, Default, clap::ValueEnum)]
enum NrtFormat {
    /// One YAML document per object (the default).
    #[default]
    Yaml,
    /// One object, or a `List` of them.
    Json,
}

pub fn run(args: &Args) -> Result {
    let objects = objects(args)?;
    let text = match args.output.format() {
        NrtFormat::Yaml => {
            let mut text = String::new();
            for object in &objects {
                text.push_str("---\n");
                text.push_str(&serde_yaml_ng::to_string(object)?);
            }
            text
        }
        NrtFormat::Json => {
            let value = match objects.as_slice() {
                [one] => serde_json::to_value(one)?,
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    if args.output.file.is_some() || !args.publish {
        args.output.write(text.as_bytes())?;
    }
    if args.publish {
        let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
        runtime.block_on(async {
            let publisher = topoalign_nrt_publisher::Publisher::connect()
                .await
                .map_err(|e| Error::bad_input(format!("--publish: {e}")))?;
            for object in &objects {
                let version = publisher
                    .apply(object)
                    .await
                    .with_context(|| format!("noderesourcetopology/{}", object.metadata.name))?;
                println!(
                    "applied noderesourcetopology/{} (resourceVersion {version})",
                    object.metadata.name
                );
            }
            Ok::<(), Error>(())
        })?;
    }
    Ok(Outcome::Success)
}

fn objects(args: &Args) -> Result<Vec<NodeResourceTopology>> {
    if let Some(path) = &args.fleet {
        let fleet = read_fleet(path, args.version.kubelet_version)?;
        let mut objects = Vec::new();
        for group in &fleet.groups {
            let node = topoalign_nrt::start_node(&group.spec)
                .map_err(|e| Error::bad_input(format!("{}: {}: {e}", path.display(), group.name)))?;
            for warning in topoalign_nrt::warnings::warnings(&node) {
                eprintln!("topoalign: {}: {}: warning: {warning}", path.display(), group.name);
            }
            let exact = (!args.no_exact_state).then_some(&group.spec);
            for i in 0..group.count {
                objects.push(build(&group.node_name(i), &node, BuildOptions { exact_state: exact }));
            }
        }
        return Ok(objects);
    }
    let overrides = Overrides {
        kubelet_version: args.version.kubelet_version,
        ..Overrides::default()
    };
    let inputs = NodeInputs {
        events: Events::Replay,
        ..NodeInputs::new(args.node.as_deref(), args.kubelet_config.as_deref(), &overrides)
    };
    let started = topoalign_intake::start(&inputs)?;
    // The notes carry the node's start hazards (a kubelet that crashes
    // on pods, NUMA ids past 63): published all the same, as it runs.
    for note in &started.notes {
        eprintln!("topoalign: {note}");
    }
    let spec = NodeSpec {
        topology: topoalign_nrt::topology_spec(started.node.machine()),
        kubelet: started.kubelet,
    };
    let exact = (!args.no_exact_state).then_some(&spec);
    Ok(vec![build(
        &args.name,
        &started.node,
        BuildOptions { exact_state: exact },
    )])
}

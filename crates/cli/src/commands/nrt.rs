//! `topoalign nrt`: the NodeResourceTopology (`topology.node.k8s.io/v1alpha2`)
//! objects of nodes — one scenario's node after its events, or every node
//! of a fleet (empty) — as YAML or JSON, on standard output or into a file,
//! for clusters that want the data without the agent, and for `topoalign
//! extender --nrt`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use topoalign_nrt::{BuildOptions, NodeResourceTopology, build};

use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {
    /// A scenario (docs/scenario.md): the object of its node after all
    /// its events.
    #[arg(conflicts_with = "fleet", required_unless_present = "fleet")]
    scenario: Option<PathBuf>,
    /// A fleet file instead: one object per node, all empty.
    #[arg(long, value_name = "FILE")]
    fleet: Option<PathBuf>,
    /// The node's name (scenario only).
    #[arg(long, default_value = "node")]
    name: String,
    /// Leave out topoalign's exact-state attributes (machine, kubelet
    /// configuration, pods and their placements).
    #[arg(long)]
    no_exact_state: bool,
    /// Output format.
    #[arg(short = 'o', long = "format", value_enum, default_value_t = Format::Yaml)]
    format: Format,
    /// Write here instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Also server-side apply the objects to the API server of the
    /// in-cluster configuration or the kubeconfig (the CRD must be
    /// installed: deploy/noderesourcetopology-crd.yaml).
    #[arg(long)]
    publish: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    /// One YAML document per object.
    Yaml,
    /// One object, or a `List` of them.
    Json,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let objects = match objects(args) {
        Ok(objects) => objects,
        Err(error) => {
            eprintln!("topoalign: {error:#}");
            return Ok(Outcome::BadInput);
        }
    };
    let text = match args.format {
        Format::Yaml => {
            let mut text = String::new();
            for object in &objects {
                text.push_str("---\n");
                text.push_str(&serde_yaml_ng::to_string(object)?);
            }
            text
        }
        Format::Json => {
            let value = match objects.as_slice() {
                [one] => serde_json::to_value(one)?,
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    match &args.output {
        Some(path) => std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?,
        None if args.publish => {}
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    if args.publish {
        let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
        runtime.block_on(async {
            let publisher = topoalign_nrt_publisher::Publisher::connect().await?;
            for object in &objects {
                let version = publisher.apply(object).await?;
                println!(
                    "applied noderesourcetopology/{} (resourceVersion {version})",
                    object.metadata.name
                );
            }
            Ok::<(), topoalign_nrt_publisher::PublishError>(())
        })?;
    }
    Ok(Outcome::Success)
}

fn objects(args: &Args) -> anyhow::Result<Vec<NodeResourceTopology>> {
    if let Some(path) = &args.fleet {
        let text = read(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let fleet = topoalign_fleet::Fleet::parse(&text, |p| {
            std::fs::read_to_string(base.join(p)).map_err(|e| e.to_string())
        })
        .with_context(|| format!("invalid fleet: {}", path.display()))?;
        let mut objects = Vec::new();
        for group in &fleet.groups {
            let node = topoalign_nrt::start_node(&group.spec).map_err(|e| anyhow::anyhow!("{}: {e}", group.name))?;
            let exact = (!args.no_exact_state).then_some(&group.spec);
            for i in 0..group.count {
                objects.push(build(
                    &format!("{}-{i}", group.name),
                    &node,
                    BuildOptions { exact_state: exact },
                ));
            }
        }
        return Ok(objects);
    }
    let path = args.scenario.as_ref().context("give a scenario or --fleet")?;
    let scenario = topoalign_scenario::Scenario::parse(&read(path)?)
        .with_context(|| format!("invalid scenario: {}", path.display()))?;
    let (spec, node) =
        topoalign_nrt::scenario_node(&scenario).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let exact = (!args.no_exact_state).then_some(&spec);
    Ok(vec![build(&args.name, &node, BuildOptions { exact_state: exact })])
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

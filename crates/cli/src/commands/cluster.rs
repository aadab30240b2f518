//! The live cluster's commands: `topoalign explain pod/NAME` (per node,
//! would its kubelet admit the pod, where, and if not why; then the
//! cheapest verified fix across the cluster; for a pod with
//! ResourceClaims, per node where DRA puts its devices beside the kubelet's
//! NUMA nodes) and `topoalign nodes` (per node and NUMA node: free,
//! stranded, held by whom, DRA devices included), read through
//! `topoalign-cluster` with kubectl's flags (`--kubeconfig`, `--context`,
//! `-n`). Installed as `kubectl-topoalign` on the PATH (a link to this
//! binary) they are `kubectl topoalign explain pod/NAME` and `kubectl
//! topoalign nodes` ([`parse_cli`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use topoalign_cluster::{ClusterSnapshot, Connection, DraVerdict, NodeView, PodAnswer, Verdict};

use super::admit::DocumentFormat;
use super::output::Output;
use super::{Error, Outcome, Result, render};

/// The name kubectl finds a plugin by: `kubectl topoalign …` runs
/// `kubectl-topoalign …`.
pub const PLUGIN_NAME: &str = "kubectl-topoalign";

/// kubectl's connection flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ClusterArgs {
    /// The live cluster's kubeconfig (`explain pod/NAME`, `nodes`)
    /// [default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// service account].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context [default: its current one].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of `explain pod/NAME`'s pod [default: the context's];
    /// `nodes` reads every namespace.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl ClusterArgs {
    fn connection(&self) -> Connection {
        Connection {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// `topoalign nodes`.
#[derive(clap::Args)]
pub struct NodesArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub output: Output<DocumentFormat>,
}

/// Parses the command line as `C`, named `kubectl topoalign` in help and
/// errors when this binary runs as the kubectl plugin (`argv[0]` is
/// [`PLUGIN_NAME`]).
pub fn parse_cli<C: clap::Parser>() -> C {
    let plugin = std::env::args_os()
        .next()
        .as_deref()
        .and_then(|arg0| Path::new(arg0).file_name())
        .is_some_and(|name| name == PLUGIN_NAME);
    if !plugin {
        return C::parse();
    }
    let matches = C::command()
        .name("kubectl topoalign")
        .bin_name("kubectl topoalign")
        .get_matches();
    C::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// The pod's name when `explain`'s only argument is `pod/NAME` (or
/// `pods/NAME`, `po/NAME`, as kubectl spells it) and no such file exists.
pub fn pod_argument(arguments: &[PathBuf]) -> Option<&str> {
    let [only] = arguments else { return None };
    if only.exists() {
        return None;
    }
    let text = only.to_str()?;
    let (kind, name) = text.split_once('/')?;
    matches!(kind, "pod" | "pods" | "po").then_some(name)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Failed(anyhow::Error::new(e).context("cannot start the runtime")))
}

fn read_error(error: topoalign_cluster::ReadError) -> Error {
    Error::bad_input(error)
}

/// `topoalign explain pod/NAME`.
pub fn explain_pod(name: &str, cluster: &ClusterArgs, output: &Output<DocumentFormat>, full: bool) -> Result {
    if name.is_empty() {
        return Err(Error::bad_input("pod/NAME: the pod's name is empty"));
    }
    let (snapshot, pod) = runtime()?.block_on(async {
        let client = cluster.connection().connect().await.map_err(read_error)?;
        // The pod first, so that a missing one is said plainly.
        topoalign_cluster::read_pod(&client.client, &client.namespace, name)
            .await
            .map_err(read_error)?;
        let snapshot = topoalign_cluster::read(&client.client).await.map_err(read_error)?;
        Ok::<_, Error>((snapshot, client.namespace))
    })?;
    let Some(pod) = snapshot.pod(&pod, name) else {
        return Err(Error::bad_input(format!(
            "pod {pod}/{name} was deleted while the cluster was read"
        )));
    };
    let answer = topoalign_cluster::explain_pod(&snapshot, pod);
    let text = match output.format() {
        DocumentFormat::Json => serde_json::to_string_pretty(&answer)? + "\n",
        DocumentFormat::Yaml => serde_yaml_ng::to_string(&answer)?,
        DocumentFormat::Text => answer_text(&answer, full),
    };
    output.write(text.as_bytes())?;
    Ok(Outcome::Success)
}

/// The answer for people.
fn answer_text(answer: &PodAnswer, full: bool) -> String {
    let mut out = render::wrap(&format!("pod {}: ", answer.pod), "    ", &answer.status);
    for note in &answer.notes {
        out.push_str(&render::wrap("note: ", "    ", note));
    }
    for node in &answer.nodes {
        out.push('\n');
        let mut head = format!("{} ({})", node.node, node.state);
        if !node.cautions.is_empty() {
            let _ = write!(head, " [{}]", node.cautions.join(", "));
        }
        out.push_str(&render::wrap("node ", "    ", &head));
        match &node.verdict {
            Verdict::Admitted { line, .. } => out.push_str(&render::wrap("  admits it: ", "    ", line)),
            Verdict::Rejected { line, explanation } => {
                out.push_str(&render::wrap("  rejects it: ", "    ", line));
                if full {
                    out.push_str(&render::explanation_text(explanation));
                } else {
                    out.push_str(&render::wrap("  why: ", "    ", &explanation.summary));
                }
            }
            Verdict::NotJudged { why } => out.push_str(&render::wrap("  not judged: ", "    ", why)),
        }
        match &node.dra {
            Some(DraVerdict::Explained(explanation)) => out.push_str(&super::dra_input::dra_text(explanation)),
            Some(DraVerdict::NotJudged { why }) => out.push_str(&render::wrap("  DRA not judged: ", "    ", why)),
            None => {}
        }
    }
    out.push('\n');
    match &answer.fix {
        Some(fix) => out.push_str(&render::wrap("fix: ", "    ", &fix.words())),
        None => out.push_str(&render::wrap(
            "fix: ",
            "    ",
            "none found: no node judged admits it, evicting pods of its priority or lower does not make room, and \
             explain proposes no change of the pod",
        )),
    }
    out
}

/// `topoalign nodes`.
pub fn nodes(args: &NodesArgs) -> Result {
    let snapshot: ClusterSnapshot = runtime()?.block_on(async {
        let client = args.cluster.connection().connect().await.map_err(read_error)?;
        topoalign_cluster::read(&client.client).await.map_err(read_error)
    })?;
    let views = topoalign_cluster::nodes_view(&snapshot);
    let text = match args.output.format() {
        DocumentFormat::Json => serde_json::to_string_pretty(&json!({ "nodes": views }))? + "\n",
        DocumentFormat::Yaml => serde_yaml_ng::to_string(&json!({ "nodes": views }))?,
        DocumentFormat::Text => nodes_text(&views),
    };
    args.output.write(text.as_bytes())?;
    Ok(Outcome::Success)
}

/// The nodes for people.
fn nodes_text(views: &[NodeView]) -> String {
    let mut out = String::new();
    for view in views {
        let mut head = format!("{} ({})", view.node, view.state);
        if !view.cautions.is_empty() {
            let _ = write!(head, " [{}]", view.cautions.join(", "));
        }
        out.push_str(&render::wrap("node ", "    ", &head));
        for numa in &view.numa {
            let mut free: Vec<String> = numa
                .free
                .iter()
                .map(|(resource, amount)| format!("{resource} {amount}"))
                .collect();
            if let Some(cpus) = &numa.free_cpus {
                free.push(format!("CPUs {}", if cpus.is_empty() { "-" } else { cpus }));
            }
            let stranded = if numa.stranded { " (stranded)" } else { "" };
            out.push_str(&render::wrap(
                &format!("  NUMA {}: free{stranded}: ", numa.numa),
                "      ",
                &if free.is_empty() {
                    "-".to_owned()
                } else {
                    free.join(", ")
                },
            ));
            for held in &numa.held {
                let mut parts = Vec::new();
                if let Some(cpus) = &held.cpus {
                    parts.push(format!("CPUs {cpus}"));
                }
                if held.memory {
                    parts.push("memory".to_owned());
                }
                parts.extend(held.devices.iter().cloned());
                parts.extend(held.dra_devices.iter().map(|d| format!("DRA {d}")));
                out.push_str(&render::wrap(
                    &format!("    {} (priority {}): ", held.pod, held.priority),
                    "        ",
                    &parts.join(", "),
                ));
            }
        }
        if !view.stranded_for.is_empty() {
            out.push_str(&render::wrap(
                "  stranded: ",
                "      ",
                &format!(
                    "an empty node of this shape would admit {}, this node admits none of them now",
                    view.stranded_for.join(", ")
                ),
            ));
        }
    }
    out
}

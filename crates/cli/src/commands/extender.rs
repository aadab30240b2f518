//! `topoalign extender`: serve the kube-scheduler extender API (`/filter`,
//! `/prioritize`, `/bind`) over HTTP, answering with the engine run on each
//! node's exact state — from a fleet file (`--fleet`) and/or
//! NodeResourceTopology objects with topoalign's attributes (`--nrt`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use topoalign_extender::binder::{ApiServerBinder, Binder};
use topoalign_extender::{Cluster, ExtenderConfig, Strategy, server};
use topoalign_fleet::Fleet;

use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {
    /// Serve this fleet (the simulator's fleet file): every node empty.
    #[arg(long, value_name = "FILE")]
    fleet: Option<PathBuf>,
    /// NodeResourceTopology objects (YAML documents or a JSON list, as
    /// `topoalign nrt` writes them) giving nodes' exact states.
    #[arg(long, value_name = "FILE")]
    nrt: Vec<PathBuf>,
    /// Read NodeResourceTopology objects from the API server (in-cluster
    /// configuration or kubeconfig), again every `--nrt-poll` seconds.
    #[arg(long)]
    nrt_from_cluster: bool,
    /// `/bind` creates the pod's Binding through the API server
    /// (in-cluster configuration or kubeconfig), then records the
    /// placement. Needed where kube-scheduler's configuration sets
    /// `bindVerb`: the scheduler then leaves binding to the extender.
    #[arg(long)]
    create_bindings: bool,
    /// Seconds between two reads of the API server's objects.
    #[arg(long, default_value_t = 5)]
    nrt_poll: u64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8888")]
    listen: String,
    /// How `prioritize` scores nodes.
    #[arg(long, value_enum, default_value_t = ScoringArg::LeastAllocated)]
    scoring: ScoringArg,
    /// Seconds an assumed pod holds its resources until its node reports it.
    #[arg(long, default_value_t = 30)]
    assume_timeout: u64,
    /// Do not assume the pod on the best-scored node at `prioritize` (only
    /// `bind` records placements).
    #[arg(long)]
    no_assume_on_prioritize: bool,
    /// Worker threads for engine evaluations (default: the machine's
    /// parallelism).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScoringArg {
    #[value(name = "LeastAllocated")]
    LeastAllocated,
    #[value(name = "MostAllocated")]
    MostAllocated,
    #[value(name = "BalancedAllocation")]
    BalancedAllocation,
    #[value(name = "LeastNUMANodes")]
    LeastNumaNodes,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let config = ExtenderConfig {
        strategy: match args.scoring {
            ScoringArg::LeastAllocated => Strategy::LeastAllocated,
            ScoringArg::MostAllocated => Strategy::MostAllocated,
            ScoringArg::BalancedAllocation => Strategy::BalancedAllocation,
            ScoringArg::LeastNumaNodes => Strategy::LeastNumaNodes,
        },
        assume_timeout: Duration::from_secs(args.assume_timeout),
        assume_on_prioritize: !args.no_assume_on_prioritize,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
    };
    let cluster = match load(args, config) {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("topoalign: {error:#}");
            return Ok(Outcome::BadInput);
        }
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(cluster));
        if args.nrt_from_cluster {
            let source = topoalign_nrt_publisher::Publisher::connect().await?;
            tokio::spawn(poll_cluster(
                source,
                shared.clone(),
                Duration::from_secs(args.nrt_poll.max(1)),
            ));
        }
        let binder: Option<Arc<dyn Binder>> = if args.create_bindings {
            Some(Arc::new(
                ApiServerBinder::connect()
                    .await
                    .map_err(|e| anyhow::anyhow!("--create-bindings: {e}"))?,
            ))
        } else {
            None
        };
        let nodes = shared.lock().map(|c| c.len()).unwrap_or_default();
        println!("topoalign extender: {nodes} nodes, listening on http://{address}");
        let shutdown = async {
            tokio::signal::ctrl_c().await.ok();
        };
        server::serve(listener, shared, binder, shutdown)
            .await
            .context("the server failed")
    })?;
    Ok(Outcome::Success)
}

fn load(args: &Args, config: ExtenderConfig) -> anyhow::Result<Cluster> {
    if args.fleet.is_none() && args.nrt.is_empty() && !args.nrt_from_cluster {
        anyhow::bail!(
            "give --fleet FILE, --nrt FILE and/or --nrt-from-cluster: the extender needs nodes to answer for"
        );
    }
    let mut cluster = match &args.fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let base = path.parent().map(PathBuf::from).unwrap_or_default();
            let fleet = Fleet::parse(&text, |p| {
                std::fs::read_to_string(base.join(p)).map_err(|e| e.to_string())
            })
            .with_context(|| format!("invalid fleet: {}", path.display()))?;
            Cluster::from_fleet(&fleet, config).map_err(anyhow::Error::msg)?
        }
        None => Cluster::new(config),
    };
    let now = Instant::now();
    for path in &args.nrt {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let (objects, mut skipped) = topoalign_nrt::object::parse_objects_skipping_bad(&text)
            .map_err(|e| anyhow::anyhow!("invalid NodeResourceTopology objects: {}: {e}", path.display()))?;
        for object in &objects {
            // One malformed object must not keep the extender from serving
            // the other nodes: that node is left out, with the reason.
            if let Err(error) = cluster.apply_nrt(object, now) {
                skipped.push(error.to_string());
            }
        }
        // Only bad objects and nothing else to serve: refuse to start.
        if !skipped.is_empty() && cluster.is_empty() {
            anyhow::bail!(
                "invalid NodeResourceTopology objects: {}: no usable object: {}",
                path.display(),
                skipped.join("; ")
            );
        }
        for reason in skipped {
            eprintln!("topoalign extender: {}: skipped: {reason}", path.display());
        }
    }
    Ok(cluster)
}

/// Reads every NRT object from the API server, again and again, into the
/// cluster; errors are reported and the next round tries again.
async fn poll_cluster(source: topoalign_nrt_publisher::Publisher, cluster: Arc<Mutex<Cluster>>, every: Duration) {
    loop {
        match source.list().await {
            Ok(objects) => {
                if let Ok(mut cluster) = cluster.lock() {
                    for object in &objects {
                        if let Err(error) = cluster.apply_nrt(object, Instant::now()) {
                            eprintln!("topoalign extender: {error}");
                        }
                    }
                }
            }
            Err(error) => eprintln!("topoalign extender: cannot list NodeResourceTopology objects: {error}"),
        }
        tokio::time::sleep(every).await;
    }
}

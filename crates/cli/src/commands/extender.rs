//! `topoalign extender`: serve the kube-scheduler extender API (`/filter`,
//! `/prioritize`, `/bind`) over HTTP, answering with the engine run on each
//! node's exact state — from a fleet file (`--fleet`) and/or
//! NodeResourceTopology objects with topoalign's attributes (`--nrt`, or
//! `--nrt-from-cluster`, read again and again by `topoalign_extender::poll`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use topoalign_extender::binder::{ApiServerBinder, Binder};
use topoalign_extender::poll::poll;
use topoalign_extender::{Cluster, ExtenderConfig, Strategy, server};
use topoalign_intake::{read_fleet, read_text};

use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// Serve this fleet (the simulator's fleet file): every node empty.
    #[arg(long, value_name = "FILE")]
    fleet: Option<PathBuf>,
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
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
    /// `/filter` passes only the node the extender chooses (its best-scored
    /// node that admits the pod) and assumes the pod there, so the
    /// scheduler binds it and the extender's view never differs from the
    /// scheduler's choice while a binding is in flight. The scheduler's own
    /// scoring is bypassed.
    #[arg(long)]
    choose_in_filter: bool,
    /// Worker threads for engine evaluations (default: the machine's
    /// parallelism).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    limits: topoalign_serve::LimitArgs,
    /// MiB of request bodies held at once across requests (at least the
    /// 64 MiB one request may have); a request waits, within its
    /// deadline, for its bytes to fit.
    #[arg(long, value_name = "MIB", default_value_t = (server::DEFAULT_BYTES_IN_FLIGHT >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(64..=65536))]
    max_mib_in_flight: u64,
    /// Pods with DRA claims pass only nodes where the devices the
    /// scheduler's DRA allocator will pick and the CPUs and memory the
    /// kubelet will pin share a NUMA node (scored and chosen likewise).
    /// The ResourceSlices, DeviceClasses, ResourceClaims and Nodes come
    /// from `--dra-objects` files, or from the API server every
    /// `--nrt-poll` seconds with `--nrt-from-cluster`. The allocator is the
    /// `--kubelet-version` release's (default: the newest).
    #[arg(long)]
    dra_align: bool,
    /// Manifests of ResourceSlices, DeviceClasses, ResourceClaims and a
    /// Node for `--dra-align` (`kubectl get ... -o yaml`).
    #[arg(long, value_name = "FILE", requires = "dra_align")]
    dra_objects: Vec<PathBuf>,
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

pub fn run(args: &Args) -> Result {
    let config = ExtenderConfig {
        strategy: match args.scoring {
            ScoringArg::LeastAllocated => Strategy::LeastAllocated,
            ScoringArg::MostAllocated => Strategy::MostAllocated,
            ScoringArg::BalancedAllocation => Strategy::BalancedAllocation,
            ScoringArg::LeastNumaNodes => Strategy::LeastNumaNodes,
        },
        assume_timeout: Duration::from_secs(args.assume_timeout),
        assume_on_prioritize: !args.no_assume_on_prioritize,
        choose_in_filter: args.choose_in_filter,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
    };
    let cluster = load(args, config)?;
    let nodes = cluster.len();
    // Dangerous kubelet configurations among the nodes loaded (those the
    // poller finds later are told as it finds them): judged as their
    // kubelets would judge them, with a warning once.
    for warning in cluster.warnings() {
        eprintln!("topoalign extender: {warning}");
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        // The kernel's largest backlog (topoalign-serve's).
        let listener = topoalign_serve::bind_tcp(&args.listen)
            .await
            .context("the extender's listener")?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(cluster));
        if args.dra_align && args.nrt_from_cluster {
            let client = topoalign_extender::dra::connect()
                .await
                .map_err(|e| Error::bad_input(format!("--dra-align: {e}")))?;
            tokio::spawn(topoalign_extender::dra::poll(
                client,
                shared.clone(),
                Duration::from_secs(args.nrt_poll.max(1)),
                |message| eprintln!("topoalign extender: {message}"),
            ));
        }
        if args.nrt_from_cluster {
            let source = topoalign_nrt_publisher::Publisher::connect()
                .await
                .map_err(|e| Error::bad_input(format!("--nrt-from-cluster: {e}")))?;
            tokio::spawn(poll(
                move || {
                    let source = source.clone();
                    async move { source.list().await }
                },
                shared.clone(),
                Duration::from_secs(args.nrt_poll.max(1)),
                |message| eprintln!("topoalign extender: {message}"),
            ));
        }
        let binder: Option<Arc<dyn Binder>> = if args.create_bindings {
            Some(Arc::new(
                ApiServerBinder::connect()
                    .await
                    .map_err(|e| Error::bad_input(format!("--create-bindings: {e}")))?,
            ))
        } else {
            None
        };
        println!("topoalign extender: {nodes} nodes, listening on http://{address}");
        let shutdown = async {
            tokio::signal::ctrl_c().await.ok();
        };
        let mut limits = args.limits.tcp();
        if let Some(message) = topoalign_serve::fit_to_descriptors(&mut [&mut limits]) {
            eprintln!("topoalign extender: {message}");
        }
        let options = server::ServeOptions {
            limits,
            bytes_in_flight: usize::try_from(args.max_mib_in_flight << 20).unwrap_or(usize::MAX),
        };
        server::serve_with(listener, shared, binder, options, shutdown)
            .await
            .context("the server failed")?;
        Ok(Outcome::Success)
    })
}

/// The nodes of the fleet file and the NRT object files.
fn load(args: &Args, config: ExtenderConfig) -> Result<Cluster> {
    if args.fleet.is_none() && args.nrt.is_empty() && !args.nrt_from_cluster {
        return Err(Error::bad_input(
            "give --fleet FILE, --nrt FILE and/or --nrt-from-cluster: the extender needs nodes to answer for",
        ));
    }
    let mut cluster = match &args.fleet {
        Some(path) => {
            let fleet = read_fleet(path, args.version.kubelet_version)?;
            Cluster::from_fleet(&fleet, config).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?
        }
        None => Cluster::new(config),
    };
    if args.dra_align {
        let release = args
            .version
            .kubelet_version
            .unwrap_or(topoalign_model::KubeletVersion::NEWEST);
        let mut dra = topoalign_extender::dra::Dra::new(release.as_str(), Duration::from_secs(args.assume_timeout))
            .map_err(Error::bad_input)?;
        let mut objects = topoalign_extender::dra::DraObjects::default();
        for path in &args.dra_objects {
            let read = topoalign_extender::dra::DraObjects::from_manifests(&read_text(path)?)
                .map_err(|e| Error::bad_input(format!("--dra-objects {}: {e}", path.display())))?;
            objects.nodes.extend(read.nodes);
            objects.device_classes.extend(read.device_classes);
            objects.resource_slices.extend(read.resource_slices);
            objects.resource_claims.extend(read.resource_claims);
        }
        dra.sync(objects);
        cluster.enable_dra(dra);
    }
    let now = Instant::now();
    for path in &args.nrt {
        let (objects, mut skipped) = topoalign_nrt::object::parse_objects_skipping_bad(&read_text(path)?)
            .map_err(|e| Error::bad_input(format!("invalid NodeResourceTopology objects: {}: {e}", path.display())))?;
        for object in &objects {
            // One malformed object must not keep the extender from serving
            // the other nodes: that node is left out, with the reason.
            if let Err(error) = cluster.apply_nrt(object, now) {
                skipped.push(error.to_string());
            }
        }
        // Only bad objects and nothing else to serve: refuse to start.
        if !skipped.is_empty() && cluster.is_empty() {
            return Err(Error::bad_input(format!(
                "invalid NodeResourceTopology objects: {}: no usable object: {}",
                path.display(),
                skipped.join("; ")
            )));
        }
        for reason in skipped {
            eprintln!("topoalign extender: {}: skipped: {reason}", path.display());
        }
    }
    Ok(cluster)
}

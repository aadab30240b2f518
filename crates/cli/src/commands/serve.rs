//! `topoalign serve`: the live page of a cluster (`topoalign-webview`) —
//! the fleet and each node's machine picture with its pods' CPUs, memory
//! and devices, stranded capacity, the waiting pods explained — read from
//! the API server every `--poll` seconds (kubeconfig or in-cluster
//! configuration, `--kubeconfig`, `--context`), or from a manifests file
//! (`--from FILE`: Nodes, NodeResourceTopology objects, Pods, DRA objects), read again
//! whenever it changes. Served under the listener limits of every daemon
//! (`topoalign-serve`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use topoalign_webview::{Live, objects_from_manifests};

use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// Read the cluster from this manifests file (YAML documents or JSON:
    /// Nodes, NodeResourceTopology objects, Pods, DeviceClasses,
    /// ResourceSlices, ResourceClaims, ResourceClaimTemplates, Lists of
    /// them) instead of the API server; read again when it changes.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    from: Option<PathBuf>,
    /// The kubeconfig (default: $KUBECONFIG, ~/.kube/config, else the
    /// in-cluster service account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current one).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Seconds between two readings of the API server (with --from: of
    /// the file).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    poll: f64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8890")]
    listen: String,
    #[command(flatten)]
    limits: topoalign_serve::LimitArgs,
}

pub fn run(args: &Args) -> Result {
    if !(args.poll.is_finite() && (0.05..=3600.0).contains(&args.poll)) {
        return Err(Error::bad_input("--poll: give seconds between 0.05 and 3600"));
    }
    let poll = Duration::from_secs_f64(args.poll);
    let mut limits = args.limits.tcp();
    if let Some(message) = topoalign_serve::fit_to_descriptors(&mut [&mut limits]) {
        eprintln!("topoalign serve: {message}");
    }
    // A fragment request waits for a change at most this long: well
    // inside the request deadline, so a long poll ends with 204, not 503.
    let long_poll = (limits.request_timeout / 2).min(Duration::from_secs(25));
    let (live, rendered) = Live::new();
    let live = Arc::new(Mutex::new(live));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = match &args.from {
            Some(path) => {
                // The first reading before listening: a bad file is an error
                // at start, not a notice on the page.
                let text = topoalign_intake::read_text(path)?;
                let objects =
                    objects_from_manifests(&text).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
                show(&live, objects).await?;
                tokio::spawn(follow_file(path.clone(), text, live.clone(), poll));
                None
            }
            None => {
                let connection = topoalign_cluster::Connection {
                    kubeconfig: args.kubeconfig.clone(),
                    context: args.context.clone(),
                    namespace: None,
                };
                Some(connection.connect().await.map_err(Error::bad_input)?)
            }
        };
        if let Some(client) = client {
            tokio::spawn(follow_cluster(client, live.clone(), poll));
        }
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr()?;
        println!("topoalign serve: listening on http://{address}");
        let stats = Arc::new(topoalign_serve::Stats::new(limits));
        let shutdown = async {
            tokio::signal::ctrl_c().await.ok();
        };
        topoalign_serve::serve(
            listener,
            topoalign_webview::router(rendered, long_poll),
            stats,
            shutdown,
        )
        .await
        .context("the server failed")?;
        Ok(Outcome::Success)
    })
}

/// Shows one reading (the page is built off the async threads: it asks
/// the engine for every waiting pod on every node).
async fn show(live: &Arc<Mutex<Live>>, objects: topoalign_cluster::Objects) -> Result<()> {
    let live = live.clone();
    tokio::task::spawn_blocking(move || {
        if let Ok(mut live) = live.lock() {
            live.show_objects(objects);
        }
    })
    .await
    .context("building the page failed")?;
    Ok(())
}

fn fail(live: &Arc<Mutex<Live>>, notice: &str) {
    fail_logged(live, notice, notice);
}

/// `notice` on the page, `log` (the whole error) in the log.
fn fail_logged(live: &Arc<Mutex<Live>>, notice: &str, log: &str) {
    eprintln!("topoalign serve: {log}");
    if let Ok(mut live) = live.lock() {
        live.fail(notice);
    }
}

/// Reads the file every `poll` and shows it when its text changed; a
/// reading that fails keeps the last page, with the reason above it.
async fn follow_file(path: PathBuf, mut last: String, live: Arc<Mutex<Live>>, poll: Duration) {
    let mut failing = false;
    loop {
        tokio::time::sleep(poll).await;
        let read = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || topoalign_intake::read_text(&path)).await
        };
        let text = match read {
            Ok(Ok(text)) => text,
            Ok(Err(error)) => {
                fail(&live, &format!("cannot read {}: {error}", path.display()));
                failing = true;
                continue;
            }
            Err(_) => continue,
        };
        if text == last && !failing {
            continue;
        }
        match objects_from_manifests(&text) {
            Ok(objects) => {
                if show(&live, objects).await.is_ok() {
                    failing = false;
                }
            }
            Err(error) => {
                fail(&live, &format!("{}: {error}", path.display()));
                failing = true;
            }
        }
        last = text;
    }
}

/// Reads the cluster every `poll`; a reading that fails keeps the last
/// page, with the reason above it (the API server's HTTP code and Status
/// message; the whole error goes to the log).
async fn follow_cluster(client: topoalign_cluster::Client, live: Arc<Mutex<Live>>, poll: Duration) {
    loop {
        match topoalign_cluster::read_objects(&client.client).await {
            Ok(objects) => {
                let _ = show(&live, objects).await;
            }
            Err(error) => fail_logged(&live, &error.brief(), &error.to_string()),
        }
        tokio::time::sleep(poll).await;
    }
}

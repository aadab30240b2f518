//! `topoalign serve` in a real browser: Debian's Chromium, driven through
//! chromedriver (WebDriver, the `fantoccini` crate), against the real
//! binary serving a manifests file (`--from`). Checked in the DOM and in
//! screenshots: the page's parts are there, the CPUs the node's
//! NodeResourceTopology object gives a pod are drawn in that pod's colour
//! (the pixels of each cell, not only its markup), and the page changes by
//! itself when the input does — a waiting pod appears with its verdict and
//! the node's free CPUs turn stranded red.
//!
//! Needs `chromium` and `chromedriver` (`apt-get install chromium
//! chromium-driver`; .ci/run installs them): without them the test fails,
//! saying so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use topoalign_model::CpuSet;

const TOPOALIGN: &str = env!("CARGO_BIN_EXE_topoalign");
const CHROMIUM: &str = "/usr/bin/chromium";
/// The stranded red and the reserved grey of the page (crates/webview's
/// model, repeated here as the colours a person sees).
const STRANDED: [u8; 3] = [248, 113, 113];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first line of `child`'s standard output that contains `marker`.
fn line_with(child: &mut Child, marker: &str) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) if line.contains(marker) => {
                // Keep draining, so the child never blocks on a full pipe.
                std::thread::spawn(move || lines.for_each(drop));
                return line;
            }
            Some(Ok(_)) => {}
            other => panic!("the process ended before printing {marker:?}: {other:?}"),
        }
    }
}

fn chromedriver() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("chromedriver"))
        .find(|path| path.is_file());
    match found {
        Some(path) if Path::new(CHROMIUM).is_file() => path,
        _ => panic!(
            "this test needs Chromium and chromedriver ({CHROMIUM} and chromedriver on PATH): \
             apt-get install chromium chromium-driver"
        ),
    }
}

/// The node's NRT object (exact state), as `topoalign nrt` writes it.
fn nrt_object(dir: &Path) -> String {
    let output = Command::new(TOPOALIGN)
        .args(["nrt", "--name", "node-a"])
        .arg(repo("testdata/serve/gpu-node.yaml"))
        .output()
        .expect("topoalign nrt");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).expect("utf-8");
    std::fs::write(dir.join("nrt.yaml"), &text).expect("write");
    text
}

/// Each pod's exclusive CPUs, as the object's exact state says.
fn cpus_by_pod(object: &str) -> Vec<(String, CpuSet)> {
    let objects = topoalign_nrt::object::parse_objects(object).expect("NRT objects");
    let restored = topoalign_nrt::restore(&objects[0]).expect("exact state");
    let state = restored.node.state();
    state
        .cpu_assignments
        .iter()
        .map(|(pod, containers)| {
            (
                pod.clone(),
                containers.values().fold(CpuSet::new(), |acc, set| acc.union(set)),
            )
        })
        .collect()
}

/// Writes `text` as the served file in one step (a reader never sees half).
fn write_input(path: &Path, text: &str) {
    let staged = path.with_extension("new");
    std::fs::write(&staged, text).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

async fn browser(driver_url: &str, profile: &Path) -> Client {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1600",
        "--force-device-scale-factor=1",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(driver_url)
        .await
        .expect("a Chromium session")
}

/// A point inside the first element `selector` finds, clear of its
/// rounded corners and of a label at its centre (CSS pixels: the
/// screenshot's, at scale 1 and scrolled to the top).
async fn inside(client: &Client, selector: &str) -> (f64, f64) {
    let script = "const r=document.querySelector(arguments[0]).getBoundingClientRect();\
                  return [r.left,r.top,r.width,r.height];";
    let value = client
        .execute(script, vec![Value::from(selector)])
        .await
        .expect("script");
    let numbers: Vec<f64> = value
        .as_array()
        .expect("a box")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(numbers[2] > 8.0 && numbers[3] > 8.0, "{selector} is drawn: {numbers:?}");
    (numbers[0] + numbers[2] * 0.15, numbers[1] + numbers[3] * 0.5)
}

/// The screenshot's pixel at (x, y), RGB.
fn pixel(png_bytes: &[u8], x: f64, y: f64) -> [u8; 3] {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buffer = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buffer).expect("a frame");
    let channels = info.color_type.samples();
    let (px, py) = (x.round() as usize, y.round() as usize);
    assert!(
        px < info.width as usize && py < info.height as usize,
        "({px}, {py}) is on the screenshot"
    );
    let at = py * info.line_size + px * channels;
    [buffer[at], buffer[at + 1], buffer[at + 2]]
}

/// Keeps a screenshot for people to look at:
/// `target/tmp/serve-browser/NAME`.
fn keep(name: &str, png_bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-browser");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    std::fs::write(dir.join(name), png_bytes).expect("screenshot");
}

fn rgb(hex: &str) -> [u8; 3] {
    let value = u32::from_str_radix(hex.trim_start_matches('#'), 16).expect("#rrggbb");
    [(value >> 16) as u8, (value >> 8) as u8, value as u8]
}

/// A CPU cell's selector: the cell's rectangle inside node-a's picture.
fn cell(cpu: u32) -> String {
    format!(r#"section.node[data-node="node-a"] .picture g[id="cpu-{cpu}"] rect"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_in_chromium() {
    let driver = chromedriver();
    let dir = tempfile::tempdir().expect("temp dir");
    let object = nrt_object(dir.path());
    let input = dir.path().join("cluster.yaml");
    write_input(&input, &object);

    let mut serve = Command::new(TOPOALIGN)
        .args(["serve", "--listen", "127.0.0.1:0", "--poll", "0.1", "--from"])
        .arg(&input)
        .stdout(Stdio::piped())
        .spawn()
        .expect("topoalign serve");
    let line = line_with(&mut serve, "listening on");
    let _serve = Killed(serve);
    let address = line.rsplit(' ').next().expect("an address").to_owned();

    // chromedriver on a port the kernel chose.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut chromedriver = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("chromedriver");
    line_with(&mut chromedriver, "started successfully");
    let _chromedriver = Killed(chromedriver);

    let client = browser(&format!("http://127.0.0.1:{port}"), &dir.path().join("profile")).await;
    // The node's page: its picture first, so it is on the first screen.
    client.goto(&format!("{address}/node/node-a")).await.expect("the page");
    client
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css(r#"section.node[data-node="node-a"] .picture svg"#))
        .await
        .expect("node-a's picture");
    // Everything the page uses is its own: no scripts, styles or images
    // from elsewhere.
    let outside = client
        .execute(
            "return [...document.querySelectorAll('script[src],link[href],img[src],iframe')].length;",
            vec![],
        )
        .await
        .expect("script");
    assert_eq!(outside, json!(0));

    // Each pod's CPUs are drawn in its colour, where the object says.
    let screenshot = client.screenshot().await.expect("a screenshot");
    keep("before.png", &screenshot);
    let held = cpus_by_pod(&object);
    assert!(held.len() >= 2, "the scenario's pods hold CPUs: {held:?}");
    let mut all_held = CpuSet::new();
    for (pod, cpus) in &held {
        let row = client
            .find(Locator::Css(&format!(r#"tr.pod[data-pod="{pod}"]"#)))
            .await
            .unwrap_or_else(|e| panic!("{pod}'s row: {e}"));
        let colour = row.attr("data-colour").await.expect("attr").expect("a colour");
        assert_eq!(row.attr("data-cpus").await.expect("attr"), Some(cpus.to_string()));
        for cpu in cpus.iter() {
            let rect = client.find(Locator::Css(&cell(cpu))).await.expect("a cell");
            assert_eq!(
                rect.attr("fill").await.expect("attr").as_deref(),
                Some(colour.as_str()),
                "{pod}: CPU {cpu}"
            );
            let (x, y) = inside(&client, &cell(cpu)).await;
            assert_eq!(pixel(&screenshot, x, y), rgb(&colour), "{pod}: CPU {cpu} on screen");
        }
        all_held.union_with(cpus);
    }
    // A CPU no pod holds is not drawn in a pod's colour.
    let pod_colours: Vec<[u8; 3]> = {
        let mut colours = Vec::new();
        for (pod, _) in &held {
            let row = client
                .find(Locator::Css(&format!(r#"tr.pod[data-pod="{pod}"]"#)))
                .await
                .expect("row");
            colours.push(rgb(&row.attr("data-colour").await.expect("attr").expect("colour")));
        }
        colours
    };
    let free: Vec<u32> = (0..16).filter(|cpu| !all_held.contains(*cpu)).collect();
    for &cpu in &free {
        let (x, y) = inside(&client, &cell(cpu)).await;
        let seen = pixel(&screenshot, x, y);
        assert!(!pod_colours.contains(&seen), "CPU {cpu} is free but drawn as a pod's");
        assert_ne!(seen, STRANDED, "nothing is stranded before a pod waits");
    }
    assert!(
        client.find(Locator::Css("section.waiting")).await.is_err(),
        "no pod waits yet"
    );

    // The input changes: a pod now waits for the node's one GPU. The page
    // updates by itself.
    let waiting = std::fs::read_to_string(repo("testdata/serve/waiting.yaml")).expect("waiting pods");
    write_input(&input, &format!("{object}\n---\n{waiting}"));
    client
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css(
            r#"section.waiting[data-pod="ml/train-2"] li.verdict[data-node="node-a"]"#,
        ))
        .await
        .expect("the waiting pod appears without a reload");
    let verdict = client
        .find(Locator::Css(
            r#"section.waiting[data-pod="ml/train-2"] li.verdict[data-node="node-a"]"#,
        ))
        .await
        .expect("verdict");
    assert_eq!(
        verdict.attr("data-admitted").await.expect("attr").as_deref(),
        Some("false")
    );
    assert!(verdict.text().await.expect("text").contains("TopologyAffinityError"));
    let node = client
        .find(Locator::Css(r#"section.node[data-node="node-a"]"#))
        .await
        .expect("node");
    assert_eq!(node.attr("data-stranded").await.expect("attr").as_deref(), Some("true"));
    // Its free CPUs, now stranded, are red on screen; the pods' stay theirs.
    let screenshot = client.screenshot().await.expect("a screenshot");
    keep("after.png", &screenshot);
    let reserved: Vec<u32> = {
        let objects = topoalign_nrt::object::parse_objects(&object).expect("objects");
        topoalign_nrt::restore(&objects[0])
            .expect("state")
            .node
            .reserved_cpus()
            .to_vec()
    };
    let mut stranded_seen = 0;
    for &cpu in free.iter().filter(|cpu| !reserved.contains(cpu)) {
        let (x, y) = inside(&client, &cell(cpu)).await;
        assert_eq!(pixel(&screenshot, x, y), STRANDED, "free CPU {cpu} is stranded");
        stranded_seen += 1;
    }
    assert!(stranded_seen > 0);
    for (pod, cpus) in &held {
        let cpu = cpus.first().expect("a CPU");
        let (x, y) = inside(&client, &cell(cpu)).await;
        assert_ne!(pixel(&screenshot, x, y), STRANDED, "{pod}'s CPU {cpu}");
    }
    let live = client.find(Locator::Id("live")).await.expect("live");
    assert_eq!(live.text().await.expect("text"), "live");
    // The fleet's page lists the node, stranded, and the waiting pod.
    client.goto(&format!("{address}/")).await.expect("the fleet page");
    let row = client
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css(r#"table#nodes tr[data-node="node-a"]"#))
        .await
        .expect("node-a's row");
    assert!(
        row.text().await.expect("text").contains("yes"),
        "stranded in the summary"
    );
    client
        .find(Locator::Css(
            r#"section.waiting[data-pod="ml/train-2"] .explanation[data-node="node-a"] li.fix"#,
        ))
        .await
        .expect("a verified fix for the waiting pod");
    client.close().await.expect("closed");
}

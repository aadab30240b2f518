//! `topoalign run`: the command runs inside its allocation (its own
//! `/proc/self/status` says so), its status passes through, and the
//! allocation is released however it ends.

mod agent_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_support::{AgentProcess, LocalAgent, TestResult, binary, wait_with_deadline, write_test_node};
use topoalign_model::CpuSet;

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix([':', '=']))
        .map(str::trim)
}

fn run(socket: &Path, args: &[&str]) -> std::io::Result<Output> {
    Command::new(binary())
        .arg("run")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
}

/// On this machine, discovered, with the enforcement the host allows
/// (cgroups where writable, else affinity).
#[test]
fn the_command_runs_on_exactly_its_allocation() -> TestResult {
    confined_run(&[])
}

/// The affinity fallback, forced even where cgroups are writable.
#[test]
fn the_command_runs_on_exactly_its_allocation_without_cgroups() -> TestResult {
    confined_run(&["--no-cgroups"])
}

fn confined_run(extra: &[&str]) -> TestResult {
    let dir = tempfile::tempdir()?;
    let local = LocalAgent::start(
        dir.path(),
        "best-effort",
        format!("topoalign-test-run-{}-{}", std::process::id(), extra.len()),
        extra,
    )?;
    let agent = &local.agent;
    let enforcement = agent.client().health()?.enforcement;
    assert!(
        ["cgroup-v1", "cgroup-v2", "affinity"].contains(&enforcement.as_str()),
        "{enforcement}"
    );
    if !extra.is_empty() {
        assert_eq!(enforcement, "affinity");
    }
    let script = "echo CPUS=$TOPOALIGN_CPUS; echo MEMS=$TOPOALIGN_MEMS; cat /proc/self/status; \
                  head -n 1 /proc/self/numa_maps 2>/dev/null";
    let output = run(
        &agent.socket,
        &["--cpus", "1", "--memory", "64Mi", "--", "sh", "-c", script],
    )?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{}", agent.log_text());
    assert!(stderr.contains("topoalign run: allocation a1: CPUs"), "{stderr}");

    let cpus = field(&stdout, "CPUS").ok_or("no TOPOALIGN_CPUS")?;
    let mems = field(&stdout, "MEMS").ok_or("no TOPOALIGN_MEMS")?;
    assert_eq!(CpuSet::parse(cpus)?.len(), 1, "one exclusive CPU");
    assert_eq!(
        field(&stdout, "Cpus_allowed_list"),
        Some(cpus),
        "{enforcement}: {stdout}"
    );
    let mems_allowed = field(&stdout, "Mems_allowed_list").ok_or("no Mems_allowed_list")?;
    if enforcement == "affinity" {
        // Without cgroups the memory binding is a policy (numa_maps shows
        // it), and the cpuset's Mems_allowed_list stays as it was.
        if stdout.contains("kernelpagesize") {
            assert!(
                stdout.contains(&format!(" bind:{mems} ")),
                "memory not bound to {mems}: {stdout}"
            );
        }
    } else {
        assert_eq!(mems_allowed, mems, "{enforcement}: {stdout}");
    }
    assert!(
        agent.client().allocations()?.is_empty(),
        "released when the command ended"
    );
    if enforcement.starts_with("cgroup") {
        let parent_dir = ["/sys/fs/cgroup/cpuset", "/sys/fs/cgroup"]
            .iter()
            .map(|root| Path::new(root).join(&local.parent.0))
            .find(|p| p.is_dir())
            .ok_or("the agent's cgroup parent is missing")?;
        let left: Vec<_> = std::fs::read_dir(&parent_dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("alloc-"))
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "cgroups left behind: {left:?}");
        // A cgroup no allocation owns (state lost, or a crash between the
        // two) is removed by reconciliation.
        std::fs::create_dir(parent_dir.join("alloc-orphan"))?;
        agent.client().reconcile()?;
        assert!(
            !parent_dir.join("alloc-orphan").exists(),
            "the orphaned cgroup is still there"
        );
    }
    Ok(())
}

#[test]
fn status_passes_through_and_every_ending_releases() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let client = agent.client();
    for (command, expected) in [
        (vec!["sh", "-c", "exit 7"], 7),
        (vec!["sh", "-c", "kill -TERM $$"], 128 + 15),
        (vec!["/nonexistent/program"], 127),
        (vec!["/"], 126),
    ] {
        let mut args = vec!["--cpus", "2", "--memory", "1Gi", "--gpus", "1", "--"];
        args.extend(&command);
        let output = run(&agent.socket, &args)?;
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{command:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(client.allocations()?.is_empty(), "{command:?}: not released");
    }
    // The devices are visible to the command, by id.
    let output = run(
        &agent.socket,
        &[
            "--cpus",
            "1",
            "--memory",
            "1Gi",
            "--gpus",
            "2",
            "--",
            "sh",
            "-c",
            "echo $CUDA_VISIBLE_DEVICES",
        ],
    )?;
    let gpus = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(["GPU-0a,GPU-0b", "GPU-1a,GPU-1b"].contains(&gpus.as_str()), "{gpus}");
    Ok(())
}

#[test]
fn a_rejected_request_explains_and_does_not_start_the_command() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let marker = dir.path().join("started");
    let touch = format!("touch {}", marker.display());
    let output = run(
        &agent.socket,
        &[
            "--cpus",
            "9",
            "--memory",
            "1Gi",
            "--policy",
            "single-numa-node",
            "--",
            "sh",
            "-c",
            &touch,
        ],
    )?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("not started") && stderr.contains("TopologyAffinityError"),
        "{stderr}"
    );
    // The fixes are the engine's, each checked by admitting the request again.
    assert!(
        stderr.contains("fix: Ask for cpu: 8 instead of 9 in container main (the largest that fits now): admitted"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fix: Ask with policy best-effort: admitted, aligned to NUMA 0+1."),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command must not run");
    // No agent at all: also 125, with what to do.
    let output = run(&dir.path().join("nobody.sock"), &["--", "true"])?;
    assert_eq!(output.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--standalone"));
    Ok(())
}

#[test]
fn killing_run_kills_the_command_and_the_agent_reclaims_the_allocation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let client = agent.client();
    let pid_file = dir.path().join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 600", pid_file.display());
    let mut launcher = Command::new(binary())
        .arg("run")
        .arg("--socket")
        .arg(&agent.socket)
        .args(["--cpus", "2", "--memory", "1Gi", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // Bounded wait for the command to have started.
    let deadline = Instant::now() + Duration::from_secs(20);
    let child_pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let held = client.allocations()?;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].pid, Some(launcher.id()));

    launcher.kill()?;
    wait_with_deadline(&mut launcher, Duration::from_secs(10))?;
    // The command dies with its launcher, then reconciliation releases.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let command_gone = !Path::new(&format!("/proc/{child_pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{child_pid}/stat")).is_ok_and(|s| s.contains(") Z "));
        if command_gone && !client.reconcile()?.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the allocation was not reclaimed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(client.allocations()?.is_empty());
    Ok(())
}

#[test]
fn standalone_runs_share_a_state_directory_under_its_lock() -> TestResult {
    let dir = tempfile::tempdir()?;
    let node = write_test_node(dir.path())?;
    let state = dir.path().join("standalone");
    let standalone = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["run", "--standalone", "--node"]
            .iter()
            .map(ToString::to_string)
            .collect();
        args.push(node.display().to_string());
        args.push("--state-dir".into());
        args.push(state.display().to_string());
        args.extend(extra.iter().map(ToString::to_string));
        args
    };
    // The outer run holds its CPUs while the inner one asks for more.
    let inner = standalone(&[
        "--cpus",
        "2",
        "--memory",
        "1Gi",
        "--",
        "sh",
        "-c",
        "echo INNER=$TOPOALIGN_CPUS",
    ]);
    let mut outer = standalone(&["--cpus", "3", "--memory", "1Gi", "--", binary()]);
    outer.extend(inner);
    let output = Command::new(binary()).args(&outer).output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let outer_cpus = stderr
        .lines()
        .find_map(|l| l.strip_prefix("topoalign run: allocation a1: CPUs "))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or("no outer allocation line")?;
    let inner_cpus = field(&String::from_utf8_lossy(&output.stdout), "INNER")
        .ok_or("no inner output")?
        .to_string();
    let (outer_cpus, inner_cpus) = (CpuSet::parse(outer_cpus)?, CpuSet::parse(&inner_cpus)?);
    assert_eq!((outer_cpus.len(), inner_cpus.len()), (3, 2));
    assert!(
        outer_cpus.intersection(&inner_cpus).is_empty(),
        "{outer_cpus} and {inner_cpus} overlap"
    );

    // Both released: all 14 allocatable CPUs fit again.
    let output = Command::new(binary())
        .args(standalone(&["--cpus", "14", "--memory", "1Gi", "--", "true"]))
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

/// Under cgroup enforcement an allocation stays while anything runs in its
/// cgroup, even after the process that asked for it has gone.
#[test]
fn a_cgroup_keeps_its_allocation_while_anything_runs_in_it() -> TestResult {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir()?;
    let local = LocalAgent::start(
        dir.path(),
        "best-effort",
        format!("topoalign-test-keep-{}", std::process::id()),
        &[],
    )?;
    let agent = &local.agent;
    let client = agent.client();
    // Not a skip: without a writable cpuset hierarchy this test cannot
    // check anything, so it fails and says why.
    let enforcement = client.health()?.enforcement;
    assert!(
        enforcement.starts_with("cgroup"),
        "this test needs a writable cpuset cgroup hierarchy (run it as root); the agent chose {enforcement}"
    );
    let mut holder = Command::new("sh")
        .args(["-c", "read go; sleep 600 & echo $!; wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let answer = client.admit(&serde_json::json!({"cpus": 1, "memory": "64Mi", "pid": holder.id()}))?;
    assert!(answer.admitted, "{answer:?}");
    // Now in the cgroup, the holder starts a worker there, and dies.
    writeln!(holder.stdin.as_mut().ok_or("no stdin")?, "go")?;
    let mut line = String::new();
    BufReader::new(holder.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
    let worker: u32 = line.trim().parse()?;
    holder.kill()?;
    wait_with_deadline(&mut holder, Duration::from_secs(10))?;
    assert!(client.reconcile()?.is_empty(), "the worker still runs in the cgroup");
    assert_eq!(client.allocations()?.len(), 1);

    Command::new("kill").args(["-KILL", &worker.to_string()]).status()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.reconcile()?.is_empty() {
        assert!(Instant::now() < deadline, "not released after the worker died");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(client.allocations()?.is_empty());
    Ok(())
}

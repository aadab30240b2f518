//! The ledger against a small two-NUMA-node machine: what is admitted is
//! recovered exactly, rejections leave no trace, damage and changed
//! configurations are reported.

use serde_json::json;
use topoalign_model::{Machine, UniformMachine};

use super::*;
use crate::request::{AdmitOptions, read_body};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// 2 NUMA nodes × 4 single-thread cores (CPUs 0–3 and 4–7), 4Gi and one
/// GPU each.
fn two_node_machine() -> Machine {
    UniformMachine::new(2, 4)
        .sockets(2)
        .memory_per_numa(4 << 30)
        .remote_distance(20)
        .devices("nvidia.com/gpu", "gpu", 1)
        .build()
        .expect("a valid machine")
}

fn config(reserved: &str) -> NodeConfig {
    let kubelet = json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": reserved,
        "topologyManagerPolicy": "best-effort",
    });
    topoalign_k8s::node_config_from_value(&kubelet, &two_node_machine()).expect("a valid configuration")
}

fn open(dir: &Path) -> Result<(Ledger, Recovery), LedgerError> {
    Ledger::open(dir, two_node_machine(), config("0"))
}

fn plain(body: &str) -> Workload {
    read_body(body.as_bytes(), false, &AdmitOptions::default()).expect("a valid request")
}

fn admit(ledger: &mut Ledger, body: &str) -> Result<Admission, LedgerError> {
    ledger.admit(&plain(body), None)
}

fn cpus_of(ledger: &Ledger, id: &str) -> Option<String> {
    Some(ledger.get(id)?.record.placements.first()?.cpus.as_ref()?.to_string())
}

#[test]
fn a_new_state_directory_starts_empty() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (ledger, recovery) = open(dir.path())?;
    assert!(recovery.created);
    assert!(ledger.held().is_empty());
    assert_eq!(ledger.journal_extent(), (1, 0), "just the start record");
    // Reopening a clean journal keeps it.
    let (ledger, recovery) = open(dir.path())?;
    assert!(!recovery.created);
    assert_eq!(ledger.journal_extent(), (1, 0));
    Ok(())
}

#[test]
fn the_history_replays_to_the_same_state() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    let a = admit(&mut ledger, r#"{"name": "a", "cpus": 2, "memory": "1Gi"}"#)?;
    let b = admit(&mut ledger, r#"{"name": "b", "cpus": 2, "memory": "1Gi"}"#)?;
    assert_eq!((a.id.as_deref(), b.id.as_deref()), (Some("a1"), Some("a2")));
    ledger.release("a1", "test")?;
    // c is placed in the hole a left: only the history says where that is.
    let c = admit(
        &mut ledger,
        r#"{"name": "c", "cpus": 3, "memory": "1Gi", "devices": {"nvidia.com/gpu": 1}}"#,
    )?;
    assert_eq!(c.id.as_deref(), Some("a3"));
    let before = (ledger.node().state(), ledger.held().to_vec());

    let (recovered, recovery) = open(dir.path())?;
    assert_eq!(recovery.restored, vec!["a2".to_string(), "a3".to_string()]);
    assert_eq!(recovery.records, 5);
    assert_eq!((recovered.node().state(), recovered.held().to_vec()), before);
    // Ids continue after the last one ever given.
    let (mut recovered, _) = open(dir.path())?;
    let d = admit(&mut recovered, r#"{"cpus": 1, "memory": "1Gi"}"#)?;
    assert_eq!(d.id.as_deref(), Some("a4"));
    assert_eq!(recovered.get("a4").map(|h| h.key.as_str()), Some("topoalign/a4"));
    Ok(())
}

#[test]
fn a_rejection_writes_nothing_and_changes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    let state = ledger.node().state();
    let rejected = admit(&mut ledger, r#"{"cpus": 64, "memory": "1Gi"}"#)?;
    assert!(!rejected.decision.admitted());
    assert_eq!(rejected.id, None);
    assert_eq!(ledger.journal_extent().0, 1);
    assert_eq!(ledger.node().state(), state);
    Ok(())
}

#[test]
fn clashing_names_and_missing_devices_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    admit(&mut ledger, r#"{"name": "job", "cpus": 1, "memory": "1Gi"}"#)?;
    let clash = admit(&mut ledger, r#"{"name": "job", "cpus": 1, "memory": "1Gi"}"#);
    assert!(matches!(clash, Err(LedgerError::Conflict(m)) if m.contains("topoalign/job is already allocated (id a1)")));
    let missing = admit(
        &mut ledger,
        r#"{"cpus": 1, "memory": "1Gi", "devices": {"example.com/fpga": 1}}"#,
    );
    assert!(
        matches!(missing, Err(LedgerError::Request(m)) if m.contains("no example.com/fpga devices (device resources here: nvidia.com/gpu)"))
    );
    Ok(())
}

#[test]
fn a_policy_override_applies_to_its_request_only() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    // 5 exclusive CPUs fit on no single NUMA node (3 free on node 0, 4 on 1).
    let strict = admit(
        &mut ledger,
        r#"{"cpus": 5, "memory": "1Gi", "policy": "single-numa-node"}"#,
    )?;
    assert_eq!(
        strict.decision.rejection.map(|r| r.reason).as_deref(),
        Some("TopologyAffinityError")
    );
    let loose = admit(&mut ledger, r#"{"cpus": 5, "memory": "1Gi"}"#)?;
    assert!(loose.decision.admitted());
    // The override is recorded, and replays.
    let held = admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi", "policy": "restricted"}"#)?;
    assert!(held.decision.admitted());
    let (recovered, _) = open(dir.path())?;
    assert_eq!(
        recovered.get("a2").and_then(|h| h.record.policy),
        Some(topoalign_engine::TopologyPolicyName::Restricted)
    );
    Ok(())
}

#[test]
fn an_empty_node_starts_a_new_journal_and_keeps_counting_ids() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    ledger.set_compaction_records(4);
    admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi"}"#)?;
    admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi"}"#)?;
    assert_eq!(ledger.journal_extent(), (3, 0));
    ledger.release("a1", "test")?;
    assert_eq!(
        ledger.journal_extent(),
        (2, 1),
        "a2 still held: a new epoch of the start record and a snapshot"
    );
    ledger.release("a2", "test")?;
    assert_eq!(ledger.journal_extent(), (3, 1), "below the bound: no compaction");
    let (mut recovered, recovery) = open(dir.path())?;
    assert_eq!(recovery.epoch, 1);
    assert_eq!(recovered.journal_extent(), (1, 2), "reopened empty: a clean journal");
    assert_eq!(recovered.node().state(), recovered.empty_node().state());
    assert_eq!(
        admit(&mut recovered, r#"{"cpus": 1, "memory": "1Gi"}"#)?.id.as_deref(),
        Some("a3")
    );
    Ok(())
}

/// Restart replayed the whole journal, released allocations included, and
/// compaction happened only on an empty node: one long history behind a
/// held allocation made every later restart replay all of it. Now the
/// journal is compacted into a snapshot whatever is held, and recovery
/// restores it: the same state, the same next placement.
#[test]
fn restart_does_not_replay_released_history() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    ledger.set_compaction_records(8);
    admit(&mut ledger, r#"{"name": "long", "cpus": 2, "memory": "1Gi"}"#)?;
    for round in 0..100 {
        let body = format!(
            r#"{{"name": "short-{round}", "cpus": {}, "memory": "1Gi"}}"#,
            1 + round % 3
        );
        let id = admit(&mut ledger, &body)?.id.ok_or("admitted")?;
        // Every third allocation stays, so the CPUs left are scattered.
        if round % 3 != 0 || ledger.held().len() > 3 {
            ledger.release(&id, "test")?;
        }
        let (records, _) = ledger.journal_extent();
        assert!(records <= 8, "round {round}: {records} records");
    }
    let before = (ledger.node().state(), ledger.held().to_vec());
    let (mut recovered, recovery) = open(dir.path())?;
    assert!(recovery.records <= 8, "{} records replayed", recovery.records);
    assert_eq!((recovered.node().state(), recovered.held().to_vec()), before);
    let next = r#"{"name": "next", "cpus": 3, "memory": "1Gi", "devices": {"nvidia.com/gpu": 1}}"#;
    let placed = admit(&mut recovered, next)?;
    // The node that lived through the whole history places it alike.
    let expected = ledger.node().clone().admit(placed.pod.clone());
    assert!(placed.decision.admitted());
    assert_eq!(placed.decision.containers, expected.containers);
    Ok(())
}

#[test]
fn a_changed_configuration_that_moves_allocations_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    admit(&mut ledger, r#"{"name": "pinned", "cpus": 2, "memory": "1Gi"}"#)?;
    assert_eq!(cpus_of(&ledger, "a1").as_deref(), Some("1-2"));
    drop(ledger);
    // Reserving CPU 1 instead of 0 would hand out other CPUs.
    let error = Ledger::open(dir.path(), two_node_machine(), config("1"));
    let Err(LedgerError::Replay(message)) = error else {
        panic!("a changed configuration must not replay silently");
    };
    assert!(
        message.contains("allocation a1 (topoalign/pinned) was given main: CPUs 1-2"),
        "{message}"
    );
    assert!(message.contains("now given main: CPUs 0,2"), "{message}");
    assert!(message.contains("move"), "{message}");
    // Nothing was lost: with the old configuration it recovers.
    let (ledger, recovery) = open(dir.path())?;
    assert_eq!(recovery.restored, vec!["a1".to_string()]);
    assert_eq!(cpus_of(&ledger, "a1").as_deref(), Some("1-2"));
    Ok(())
}

#[test]
fn a_damaged_journal_is_refused_with_what_survives() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    admit(&mut ledger, r#"{"name": "first", "cpus": 2, "memory": "1Gi"}"#)?;
    admit(&mut ledger, r#"{"name": "second", "cpus": 1, "memory": "1Gi"}"#)?;
    let path = ledger.journal_path().to_path_buf();
    drop(ledger);
    let mut bytes = std::fs::read(&path)?;
    let last = bytes.len() - 10;
    bytes[last] ^= 0x20;
    std::fs::write(&path, &bytes)?;
    let Err(LedgerError::Corrupt(message)) = open(dir.path()) else {
        panic!("damage must be reported");
    };
    assert!(message.contains("(record 3): checksum mismatch"), "{message}");
    assert!(message.contains("acknowledges 3 records"), "{message}");
    assert!(message.contains("2 are intact, 1 cannot be read"), "{message}");
    assert!(message.contains("a1 (first: main: CPUs 1-2)"), "{message}");
    assert!(message.contains(&format!("move {}", path.display())), "{message}");
    // The file is left as it was for a person to inspect.
    assert_eq!(std::fs::read(&path)?, bytes);
    Ok(())
}

/// The node's state and held allocations, to compare restarts by.
type State = (topoalign_engine::NodeState, Vec<Held>);

fn state_of(ledger: &Ledger) -> State {
    (ledger.node().state(), ledger.held().to_vec())
}

/// Restart cost grew with history between compactions, which came only
/// every 4,096 records (issue 32): the journal is now compacted by bytes
/// and by age too.
#[test]
fn the_journal_is_compacted_by_bytes_and_by_age() -> TestResult {
    for (what, compaction) in [
        (
            "bytes",
            Compaction {
                records: u64::MAX,
                bytes: 1,
                age: Duration::MAX,
            },
        ),
        (
            "age",
            Compaction {
                records: u64::MAX,
                bytes: u64::MAX,
                age: Duration::ZERO,
            },
        ),
    ] {
        let dir = tempfile::tempdir()?;
        let (mut ledger, _) = open(dir.path())?;
        ledger.set_compaction(compaction);
        admit(&mut ledger, r#"{"name": "a", "cpus": 2, "memory": "1Gi"}"#)?;
        assert_eq!(ledger.journal_extent(), (2, 1), "{what}: start and snapshot, epoch 1");
        admit(&mut ledger, r#"{"name": "b", "cpus": 1, "memory": "1Gi"}"#)?;
        assert_eq!(ledger.journal_extent(), (2, 2), "{what}: compacted again");
        let before = state_of(&ledger);
        let (recovered, recovery) = open(dir.path())?;
        assert_eq!(recovery.records, 2, "{what}: only the snapshot's epoch is read");
        assert_eq!(state_of(&recovered), before, "{what}");
    }
    // Under the default bounds, a journal is not compacted at each change.
    let dir = tempfile::tempdir()?;
    let (mut ledger, _) = open(dir.path())?;
    admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi"}"#)?;
    admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi"}"#)?;
    assert_eq!(ledger.journal_extent(), (3, 0));
    Ok(())
}

/// A compaction stopped at each of its steps (temporary file created,
/// half written, written, synced, renamed, directory synced): the change
/// that triggered it is answered as made, the ledger refuses further
/// changes until restarted, and the restart recovers exactly the state
/// the change left — from the old journal or the new, whichever the
/// crash left in place — and compacts again over the leftovers.
#[test]
fn a_crash_at_any_step_of_a_compaction_restarts_to_the_same_state() -> TestResult {
    use crate::journal::{Step, crash_at};
    let compaction_steps = [
        Step::Created,
        Step::HalfWritten,
        Step::Written,
        Step::Synced,
        Step::Renamed,
        Step::DirectorySynced,
    ];
    for step in compaction_steps {
        // A snapshot compaction (an allocation held) and a new empty epoch.
        for keep_one in [true, false] {
            let context = format!("{step:?}, {}", if keep_one { "snapshot" } else { "empty" });
            let dir = tempfile::tempdir()?;
            let (mut ledger, _) = open(dir.path())?;
            admit(&mut ledger, r#"{"name": "a", "cpus": 2, "memory": "1Gi"}"#)?;
            admit(&mut ledger, r#"{"name": "b", "cpus": 1, "memory": "1Gi"}"#)?;
            if !keep_one {
                ledger.release("a1", "test")?;
            }
            // Releasing b is the change that reaches the bound.
            ledger.set_compaction_records(1);
            crash_at(Some(step));
            let released = ledger.release("a2", "test");
            crash_at(None);
            assert!(
                matches!(released, Ok(Some(_))),
                "{context}: the release is durable before the compaction: {released:?}"
            );
            let after = state_of(&ledger);
            let refused = admit(&mut ledger, r#"{"cpus": 1, "memory": "1Gi"}"#);
            assert!(
                matches!(&refused, Err(LedgerError::Poisoned(m)) if m.contains("simulated crash")),
                "{context}: {refused:?}"
            );
            drop(ledger);

            let (mut recovered, _) = open(dir.path())?;
            assert_eq!(state_of(&recovered), after, "{context}");
            // Ids are never given twice, whichever journal survived.
            let next = admit(&mut recovered, r#"{"name": "c", "cpus": 1, "memory": "1Gi"}"#)?;
            assert_eq!(next.id.as_deref(), Some("a3"), "{context}");
            // Compaction works again over whatever the crash left.
            recovered.set_compaction_records(1);
            recovered.release("a3", "test")?;
            let compacted = state_of(&recovered);
            drop(recovered);
            let (again, _) = open(dir.path())?;
            assert_eq!(state_of(&again), compacted, "{context}");
        }
    }
    Ok(())
}

/// An append stopped at each of its steps: the change is refused (not
/// acknowledged) and the ledger poisoned; the restart recovers the state
/// before the change when the commit slot was not written, and after it
/// when it was (a killed process leaves written bytes to the kernel) —
/// never anything between.
#[test]
fn a_crash_at_any_step_of_an_append_restarts_to_before_or_after() -> TestResult {
    use crate::journal::{Step, crash_at};
    for step in [Step::RecordWritten, Step::RecordSynced, Step::CommitWritten] {
        let dir = tempfile::tempdir()?;
        let (mut ledger, _) = open(dir.path())?;
        admit(&mut ledger, r#"{"name": "a", "cpus": 2, "memory": "1Gi"}"#)?;
        let before = state_of(&ledger);
        let body = r#"{"name": "b", "cpus": 3, "memory": "1Gi"}"#;
        // What the change would leave, decided on a copy of the node.
        let mut expected_node = ledger.node().clone();
        crash_at(Some(step));
        let admitted = admit(&mut ledger, body);
        crash_at(None);
        assert!(matches!(admitted, Err(LedgerError::Io(_))), "{step:?}: {admitted:?}");
        assert_eq!(state_of(&ledger), before, "{step:?}: nothing adopted in memory");
        drop(ledger);

        let (recovered, recovery) = open(dir.path())?;
        if step == Step::CommitWritten {
            let held: Vec<&str> = recovered.held().iter().map(Held::id).collect();
            assert_eq!(held, vec!["a1", "a2"], "{step:?}");
            let pod = recovered.get("a2").ok_or("a2 held")?;
            let decided = expected_node.admit(topoalign_k8s::pod_from_value(&pod.record.pod, "a2")?);
            assert_eq!(decided.containers, pod.record.placements, "{step:?}");
            assert_eq!(recovered.node().state(), expected_node.state(), "{step:?}");
        } else {
            assert_eq!(state_of(&recovered), before, "{step:?}");
            assert!(
                recovery.discarded_tail.is_some(),
                "{step:?}: the unacknowledged record is reported"
            );
        }
    }
    Ok(())
}

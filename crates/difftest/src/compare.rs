//! Judging the engine's answer against the oracle's, as the conformance
//! test does (the same result document, field for field), and naming the
//! kind of a difference so that shrinking keeps the same one.

use serde_json::Value;

use crate::answer::Answer;

/// How the engine's answer differs from the oracle's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Difference {
    /// The engine panicked.
    EnginePanic,
    /// The engine calls the scenario malformed; the kubelet runs it.
    EngineInvalid,
    /// The oracle calls the scenario malformed; the engine runs it (a
    /// generator or harness bug).
    OracleInvalid,
    /// One side starts the node, the other refuses to.
    StartUp,
    /// Both refuse to start, with different texts.
    RefusalText,
    /// Both run the events; an admission, a reason, a message, a CPU, a
    /// NUMA node or a device differs.
    Event,
    /// Every event agrees; the final state does not.
    Final,
}

/// What a comparison found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Same,
    /// The oracle did not answer (timeout, harness failure): not judged.
    Unjudged,
    Differs(Difference),
}

pub fn judge(oracle: &Answer, engine: &Answer) -> Verdict {
    match (oracle, engine) {
        (Answer::Timeout | Answer::Failed(_) | Answer::Panic(_), _) => Verdict::Unjudged,
        (_, Answer::Panic(_)) => Verdict::Differs(Difference::EnginePanic),
        (Answer::Invalid(_), Answer::Invalid(_)) => Verdict::Same,
        (Answer::Invalid(_), _) => Verdict::Differs(Difference::OracleInvalid),
        (_, Answer::Invalid(_)) => Verdict::Differs(Difference::EngineInvalid),
        (Answer::Document(o), Answer::Document(e)) if o == e || same_refusal_in_map_order(o, e) => Verdict::Same,
        (Answer::Document(o), Answer::Document(e)) => Verdict::Differs(document_difference(o, e)),
        (_, Answer::Timeout | Answer::Failed(_)) => Verdict::Unjudged,
    }
}

/// Two start-up refusals listing the same feature gate dependency errors in
/// another order: the kubelet walks its dependency map (a Go map) and
/// aggregates what it finds (`[A is enabled, but depends on features that
/// are disabled: [X], B is enabled, ...]`), so the order varies run to run.
fn same_refusal_in_map_order(oracle: &Value, engine: &Value) -> bool {
    let (Some(a), Some(b)) = (
        oracle.get("error").and_then(Value::as_str),
        engine.get("error").and_then(Value::as_str),
    ) else {
        return false;
    };
    match (dependency_errors(a), dependency_errors(b)) {
        (Some((pa, mut ea)), Some((pb, mut eb))) => {
            ea.sort_unstable();
            eb.sort_unstable();
            pa == pb && ea == eb
        }
        _ => false,
    }
}

/// The text before an aggregated list of dependency errors, and the errors.
fn dependency_errors(text: &str) -> Option<(&str, Vec<&str>)> {
    const DEPENDS: &str = " is enabled, but depends on features that are disabled: [";
    let start = text.find("error: [")? + "error: [".len();
    let inner = text[start..].strip_suffix(']')?;
    let errors: Vec<&str> = inner.split("], ").collect();
    let all_dependencies = errors.iter().all(|e| e.contains(DEPENDS));
    (errors.len() > 1 && all_dependencies)
        .then(|| (&text[..start], errors.iter().map(|e| e.trim_end_matches(']')).collect()))
}

fn document_difference(oracle: &Value, engine: &Value) -> Difference {
    match (oracle.get("error"), engine.get("error")) {
        (Some(_), Some(_)) => Difference::RefusalText,
        (Some(_), None) | (None, Some(_)) => Difference::StartUp,
        (None, None) if oracle.get("results") == engine.get("results") => Difference::Final,
        (None, None) => Difference::Event,
    }
}

/// Whether the engine's answer is made of the oracle's answers event by
/// event: several replays of one scenario that differ only in the
/// `message` of some events (the kubelet picks the text in Go map order,
/// e.g. which of two short device resources `allocateContainerResources`
/// names first, walking the container's `Limits` map), and the engine's
/// result for each event is what one of those replays said. Everything
/// else (admission, reason, placements, the final state) must agree among
/// the replays and with the engine.
pub fn same_event_by_event(oracle: &[Answer], engine: &Answer) -> bool {
    let Answer::Document(e) = engine else {
        return false;
    };
    let docs: Vec<&Value> = oracle
        .iter()
        .filter_map(|a| match a {
            Answer::Document(d) => Some(d),
            _ => None,
        })
        .collect();
    let Some(first) = docs.first() else {
        return false;
    };
    let without = |v: &Value, key: &str| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove(key);
        }
        v
    };
    // Beyond the events, one answer for all.
    if docs.iter().any(|d| without(d, "results") != without(first, "results"))
        || without(e, "results") != without(first, "results")
    {
        return false;
    }
    let results = |v: &Value| v.get("results").and_then(Value::as_array).cloned();
    let Some(engine_results) = results(e) else {
        return false;
    };
    let mut all = Vec::new();
    for d in &docs {
        match results(d) {
            Some(r) if r.len() == engine_results.len() => all.push(r),
            _ => return false,
        }
    }
    engine_results.iter().enumerate().all(|(i, mine)| {
        let theirs: Vec<&Value> = all.iter().map(|r| &r[i]).collect();
        theirs
            .iter()
            .all(|t| without(t, "message") == without(theirs[0], "message"))
            && theirs.contains(&mine)
    })
}

/// The index of the first event whose results differ (`None` when the
/// events agree or a side has no results).
pub fn first_differing_event(oracle: &Value, engine: &Value) -> Option<usize> {
    let a = oracle.get("results")?.as_array()?;
    let b = engine.get("results")?.as_array()?;
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(v: Value) -> Answer {
        Answer::Document(v)
    }

    #[test]
    fn messages_in_go_map_order_are_judged_event_by_event() {
        let short = |r: &str| format!("Allocate failed due to requested number of devices unavailable for {r}. ...");
        let run = |a: &str, b: &str| {
            doc(json!({"results": [
                {"event": 0, "admitted": false, "message": short(a)},
                {"event": 1, "admitted": false, "message": short(b)},
            ], "final": {"defaultCpuSet": "0-3"}}))
        };
        let replays = [run("gpu", "nic"), run("nic", "gpu")];
        // Each event's text came from some replay.
        assert!(same_event_by_event(&replays, &run("nic", "nic")));
        assert!(same_event_by_event(&replays, &run("gpu", "gpu")));
        // A text no replay gave is not.
        assert!(!same_event_by_event(&replays, &run("fpga", "nic")));
        // Replays that differ in more than a message prove nothing.
        let admitted = doc(json!({"results": [
            {"event": 0, "admitted": true, "message": short("gpu")},
            {"event": 1, "admitted": false, "message": short("gpu")},
        ], "final": {"defaultCpuSet": "0-3"}}));
        assert!(!same_event_by_event(&[run("gpu", "nic"), admitted], &run("nic", "gpu")));
        // Nor does a final state the engine does not share.
        let other_final = doc(json!({"results": [
            {"event": 0, "admitted": false, "message": short("gpu")},
            {"event": 1, "admitted": false, "message": short("nic")},
        ], "final": {"defaultCpuSet": "0-2"}}));
        assert!(!same_event_by_event(&replays, &other_final));
    }

    #[test]
    fn kinds_of_difference() {
        let run = |cpus: &str| doc(json!({"results": [{"event": 0, "cpus": cpus}], "final": {"defaultCpuSet": "0-3"}}));
        assert_eq!(judge(&run("1"), &run("1")), Verdict::Same);
        assert_eq!(judge(&run("1"), &run("2")), Verdict::Differs(Difference::Event));
        let refused = |text: &str| doc(json!({"error": text}));
        assert_eq!(
            judge(&refused("a"), &refused("b")),
            Verdict::Differs(Difference::RefusalText)
        );
        assert_eq!(judge(&refused("a"), &run("1")), Verdict::Differs(Difference::StartUp));
        let final_differs = doc(json!({"results": [{"event": 0, "cpus": "1"}], "final": {"defaultCpuSet": "0-2"}}));
        assert_eq!(judge(&run("1"), &final_differs), Verdict::Differs(Difference::Final));
        assert_eq!(judge(&Answer::Timeout, &run("1")), Verdict::Unjudged);
        assert_eq!(
            judge(&run("1"), &Answer::Panic("boom".into())),
            Verdict::Differs(Difference::EnginePanic)
        );
        assert_eq!(
            judge(&run("1"), &Answer::Invalid("x".into())),
            Verdict::Differs(Difference::EngineInvalid)
        );
        assert_eq!(
            judge(&Answer::Invalid("x".into()), &Answer::Invalid("y".into())),
            Verdict::Same
        );
    }

    #[test]
    fn dependency_errors_in_another_order_are_the_same_refusal() {
        let refused = |text: &str| doc(json!({ "error": format!("panic: x, error: [{text}]") }));
        let a = "A is enabled, but depends on features that are disabled: [X]";
        let b = "B is enabled, but depends on features that are disabled: [X Y]";
        assert_eq!(
            judge(&refused(&format!("{a}, {b}")), &refused(&format!("{b}, {a}"))),
            Verdict::Same
        );
        assert_eq!(
            judge(&refused(&format!("{a}, {a}")), &refused(&format!("{b}, {a}"))),
            Verdict::Differs(Difference::RefusalText)
        );
    }

    #[test]
    fn the_first_differing_event_is_found() {
        let a = json!({"results": [{"e": 0}, {"e": 1}, {"e": 2}]});
        let b = json!({"results": [{"e": 0}, {"e": 9}, {"e": 2}]});
        assert_eq!(first_differing_event(&a, &b), Some(1));
        assert_eq!(first_differing_event(&a, &a), None);
        let shorter = json!({"results": [{"e": 0}]});
        assert_eq!(first_differing_event(&a, &shorter), Some(1));
    }
}

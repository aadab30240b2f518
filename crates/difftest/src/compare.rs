//! Judging the engine's answer against the oracle's, as the conformance
//! test does (the same result document, field for field), and naming the
//! kind of a difference so that shrinking keeps the same one.

use std::borrow::Cow;

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
        (Answer::Document(o), Answer::Document(e)) => {
            let (o, e) = (without_dec_addresses(o), without_dec_addresses(e));
            if o == e || same_refusal_in_map_order(&o, &e) {
                Verdict::Same
            } else {
                Verdict::Differs(document_difference(&o, &e))
            }
        }
        (_, Answer::Timeout | Answer::Failed(_)) => Verdict::Unjudged,
    }
}

/// Where the kubelet's text holds a pointer: `validateNodeAllocatable`
/// prints each over-reserved amount with `%v` of the `resource.Quantity`
/// value (`Resource %q has a reservation of %v but capacity of %v. ...`),
/// i.e. Go's internal struct `{i int64Amount; d infDecAmount; s string;
/// Format}`. A reservation summed past `int64` is held as an `inf.Dec`
/// (`i` zeroed, `s` empty after `Add`), and `d`, a struct around a
/// `*inf.Dec`, prints as the pointer's address:
/// `{{0 0} {0x1c928f773620}  DecimalSI}` — a heap address no one can
/// reproduce. This fragment, and
/// nothing else, has its address replaced by `0x…` on both sides, so the
/// rest (the zero `int64Amount`, the format, every other word) is still
/// compared. (The capacity is always an `int64Amount`: cAdvisor's
/// numbers.)
const DEC_RESERVATION: &str = "has a reservation of {{0 0} {0x";
const DEC_ADDRESS_TEXT: &str = "0x\u{2026}";

/// `doc` with the address of every [`DEC_RESERVATION`] fragment of its
/// start-up refusal replaced by `0x…` (borrowed when there is none).
fn without_dec_addresses(doc: &Value) -> Cow<'_, Value> {
    let Some(text) = doc.get("error").and_then(Value::as_str) else {
        return Cow::Borrowed(doc);
    };
    match dec_addresses_replaced(text) {
        Some(replaced) => {
            let mut doc = doc.clone();
            doc["error"] = Value::String(replaced);
            Cow::Owned(doc)
        }
        None => Cow::Borrowed(doc),
    }
}

/// `text` with the address in each whole fragment `has a reservation of
/// {{0 0} {0x<hex>}  <Format>} but capacity of ` replaced by `0x…`; `None`
/// when there is no such fragment.
fn dec_addresses_replaced(text: &str) -> Option<String> {
    const FORMATS: [&str; 3] = ["DecimalSI", "BinarySI", "DecimalExponent"];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut replaced = false;
    while let Some(at) = rest.find(DEC_RESERVATION) {
        let hex_start = at + DEC_RESERVATION.len();
        let hex_len = rest[hex_start..]
            .bytes()
            .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            .count();
        let after = &rest[hex_start + hex_len..];
        let whole = hex_len > 0
            && after.strip_prefix("}  ").is_some_and(|tail| {
                FORMATS.iter().any(|format| {
                    tail.strip_prefix(format)
                        .is_some_and(|t| t.starts_with("} but capacity of "))
                })
            });
        let end = if whole { hex_start + hex_len } else { hex_start };
        out.push_str(&rest[..hex_start - "0x".len()]);
        if whole {
            out.push_str(DEC_ADDRESS_TEXT);
            replaced = true;
        } else {
            out.push_str("0x");
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    replaced.then_some(out)
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

    /// The kubelet's own texts (difftest 1.32 seeds 516 and 974, 1.37 seed
    /// 1306: reservations summed past `int64`, held as `inf.Dec`).
    const KUBELET_DEC_REFUSALS: [&str; 3] = [
        "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of \
         {{0 0} {0x1c928f773620}  DecimalSI} but capacity of {{68719476736 0} {<nil>}  BinarySI}. \
         Expected capacity >= reservation.",
        "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of \
         {{0 0} {0xa24769cd200}  DecimalExponent} but capacity of {{34359738368 0} {<nil>}  BinarySI}. \
         Expected capacity >= reservation.",
        "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of \
         {{0 0} {0xe91848bda0}  DecimalSI} but capacity of {{68719476736 0} {<nil>}  BinarySI}. \
         Expected capacity >= reservation.",
    ];

    #[test]
    fn the_address_of_an_inf_dec_reservation_is_not_compared() {
        let refused = |text: &str| doc(json!({ "error": text }));
        let at = |text: &str, address: &str| text.replacen("{0x", &format!("{{0x{address}"), 1);
        for kubelet in KUBELET_DEC_REFUSALS {
            let address = kubelet.split("{0x").nth(1).and_then(|s| s.split('}').next()).unwrap();
            // Any other address: the same refusal.
            let other = kubelet.replacen(address, "c000012345", 1);
            assert_eq!(judge(&refused(kubelet), &refused(&other)), Verdict::Same, "{kubelet}");
            assert_eq!(judge(&refused(&other), &refused(kubelet)), Verdict::Same);
            // Everything else is still compared: the zero int64 part, the
            // format, the capacity, the words.
            let differs = |engine: String| {
                assert_eq!(
                    judge(&refused(kubelet), &refused(&engine)),
                    Verdict::Differs(Difference::RefusalText),
                    "{engine}"
                );
            };
            differs(other.replacen("{{0 0} {0x", "{{1 0} {0x", 1));
            let reformatted = other.replacen("  DecimalSI} but", "  BinarySI} but", 1).replacen(
                "  DecimalExponent} but",
                "  DecimalSI} but",
                1,
            );
            assert_ne!(reformatted, other);
            differs(reformatted);
            differs(
                other
                    .replace("68719476736", "68719476737")
                    .replace("34359738368", "34359738369"),
            );
            differs(other.replace("Expected capacity", "expected capacity"));
            differs(other.replace("{0xc000012345}", "{<nil>}"));
            // The int64 text the engine printed before: a difference.
            differs(kubelet.replacen(
                &format!("{{{{0 0}} {{0x{address}}}"),
                "{{18446744073709551616 0} {<nil>}",
                1,
            ));
            // Not hexadecimal, or not the whole fragment: not normalised.
            differs(at(kubelet, "g"));
        }
        // A pointer anywhere else is not normalised.
        let capacity = |address: &str| {
            format!(
                "invalid Node Allocatable configuration. Resource \"cpu\" has a reservation of \
                 {{{{10 0}} {{<nil>}}  DecimalSI}} but capacity of {{{{0 0}} {{0x{address}}}  DecimalSI}}. \
                 Expected capacity >= reservation."
            )
        };
        assert_eq!(
            judge(&refused(&capacity("c000000001")), &refused(&capacity("c000000002"))),
            Verdict::Differs(Difference::RefusalText)
        );
        // Several over-reserved resources: each address.
        let two = |a: &str, b: &str| {
            format!(
                "invalid Node Allocatable configuration. \
                 Resource \"cpu\" has a reservation of {{{{0 0}} {{0x{a}}}  DecimalSI}} but capacity of \
                 {{{{8000 -3}} {{<nil>}}  DecimalSI}}. Expected capacity >= reservation. \
                 Resource \"memory\" has a reservation of {{{{0 0}} {{0x{b}}}  BinarySI}} but capacity of \
                 {{{{1024 0}} {{<nil>}}  BinarySI}}. Expected capacity >= reservation."
            )
        };
        assert_eq!(
            judge(&refused(&two("c1", "c2")), &refused(&two("ab", "cd"))),
            Verdict::Same
        );
        // Documents that run events are compared whole.
        let run = |m: &str| doc(json!({"results": [{"event": 0, "message": m}]}));
        assert_eq!(
            judge(&run(KUBELET_DEC_REFUSALS[0]), &run(&at(KUBELET_DEC_REFUSALS[0], "1"))),
            Verdict::Differs(Difference::Event)
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

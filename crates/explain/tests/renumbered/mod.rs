//! The answers of a machine numbered `0..n` written with another
//! machine's NUMA ids: on a machine with NUMA ids of 64 and more read by
//! `Machine::with_numa_labels`, the kubelet under topology policy `none`
//! decides as on the machine numbered anew, so a test computes the
//! expected document or text there and maps its NUMA ids here — never
//! writing the answer down.
//!
//! Shared by the explain crate's tests (`numa_labels.rs`) and the cli's
//! (`admit_numa_labels.rs`, `explain_numa_labels.rs`, which include this
//! file by path). `map` takes an index `0..n` to the id of that node.
#![allow(dead_code, reason = "each test file uses a different part")]

use serde_json::Value;

/// The fields of report, explain and admit documents that hold NUMA ids
/// (one id or a list of ids).
const NUMA_ID_FIELDS: [&str; 4] = ["node", "merged", "affinity", "memoryNuma"];

/// `value` with its NUMA ids mapped by `map`: the ids of the fields that
/// hold them ([`NUMA_ID_FIELDS`], at any depth; other values of those
/// fields as they are), and the ids written in every sentence
/// ([`map_text`]).
pub fn map_document(value: &Value, map: &dyn Fn(usize) -> usize) -> Value {
    let id = |n: &Value| {
        let n = n.as_u64().and_then(|n| usize::try_from(n).ok()).expect("a NUMA id");
        Value::from(map(n))
    };
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| {
                    let mapped = match field {
                        Value::Number(_) if NUMA_ID_FIELDS.contains(&key.as_str()) => id(field),
                        Value::Array(list) if NUMA_ID_FIELDS.contains(&key.as_str()) => list.iter().map(id).collect(),
                        _ if NUMA_ID_FIELDS.contains(&key.as_str()) => field.clone(),
                        _ => map_document(field, map),
                    };
                    (key.clone(), mapped)
                })
                .collect(),
        ),
        Value::Array(list) => Value::Array(list.iter().map(|v| map_document(v, map)).collect()),
        Value::String(text) => Value::String(map_text(text, map)),
        other => other.clone(),
    }
}

/// `text` with every set of NUMA ids written after `NUMA ` mapped by
/// `map`. A set is written as `hints::nodes_text` writes one: ids joined
/// by `+`, runs of three or more consecutive ids as a range (`0`, `0+1`,
/// `0-3`, `0+1+128-130`); the mapped set is written the same way. A `+`
/// or `-` after the set's last digit is the sentence's; what does not
/// read as a set is kept.
pub fn map_text(text: &str, map: &dyn Fn(usize) -> usize) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("NUMA ") {
        out.push_str(&rest[..at + 5]);
        rest = &rest[at + 5..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '+' || c == '-'))
            .unwrap_or(rest.len());
        let set = rest[..end].trim_end_matches(['+', '-']);
        match read_set(set) {
            Some(ids) => {
                let mapped: Vec<usize> = ids.into_iter().map(map).collect();
                out.push_str(&write_set(&mapped));
            }
            None => out.push_str(set),
        }
        rest = &rest[set.len()..];
    }
    out.push_str(rest);
    out
}

/// The ids of a set written `0+1+128-130`; `None` if `text` is no set.
fn read_set(text: &str) -> Option<Vec<usize>> {
    let mut ids = Vec::new();
    for part in text.split('+') {
        match part.split_once('-') {
            Some((first, last)) => ids.extend(first.parse::<usize>().ok()?..=last.parse::<usize>().ok()?),
            None => ids.push(part.parse::<usize>().ok()?),
        }
    }
    Some(ids)
}

/// `ids` as a set is written: joined by `+`, runs of three or more
/// consecutive ids as a range.
fn write_set(ids: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut start = 0;
    while start < ids.len() {
        let mut end = start;
        while end + 1 < ids.len() && ids[end + 1] == ids[end] + 1 {
            end += 1;
        }
        if end - start >= 2 {
            parts.push(format!("{}-{}", ids[start], ids[end]));
        } else {
            parts.extend(ids[start..=end].iter().map(ToString::to_string));
        }
        start = end + 1;
    }
    parts.join("+")
}

//! Vector sets from generated scenarios: `scenarios/gen-<seed>.json` and
//! the oracle's `expected/gen-<seed>.json`, their `index.json` entries
//! (with every text the kubelet was seen to give where it follows Go map
//! order) and a `README-gen.md` with the provenance. The layout is that of
//! `testdata/conformance/1.32`, so the conformance test and `oracle check`
//! read the files as they are.
//!
//! The scenarios picked first are those whose answer depends on the
//! release: the same scenario (with the other release named) gets another
//! answer from an older release's oracle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};

use crate::answer::{Answer, Oracle};
use crate::generate::generate;
use crate::release::Release;

#[derive(Clone, Debug)]
pub struct VectorOptions {
    pub oracle: Oracle,
    /// An older release's oracle: scenarios it answers differently are
    /// preferred.
    pub baseline: Option<Oracle>,
    pub seed: u64,
    pub count: usize,
    /// Most seeds tried.
    pub tries: u64,
    /// Times each kept scenario is replayed again to collect texts in Go
    /// map order.
    pub repeats: usize,
    pub out: PathBuf,
}

/// One kept vector.
struct Vector {
    seed: u64,
    scenario: String,
    expected: Value,
    tags: Vec<String>,
    differs_from_baseline: bool,
    alternatives: BTreeMap<String, Vec<String>>,
}

/// Writes the vector set; returns how many vectors differ from the
/// baseline release.
///
/// # Errors
/// When files cannot be written, or fewer than `count` usable scenarios
/// were found in `tries` seeds.
pub fn make_vectors(options: &VectorOptions) -> anyhow::Result<(usize, usize)> {
    let scratch = std::env::temp_dir().join(format!("topoalign-difftest-vectors-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let file = scratch.join("scenario.json");
    let release = options.oracle.release;
    // Scenarios whose answer differs from the baseline's fill up to 60 %;
    // refusals at most 15 %; the rest are plain random scenarios.
    let want_differing = if options.baseline.is_some() {
        options.count * 6 / 10
    } else {
        0
    };
    let want_refused = options.count * 15 / 100;
    let mut differing = Vec::new();
    let mut refused = Vec::new();
    let mut plain = Vec::new();
    let bar = indicatif::ProgressBar::new(options.count as u64);
    for seed in options.seed..options.seed.saturating_add(options.tries) {
        let chosen = differing.len() + refused.len() + plain.len().min(options.count);
        if differing.len() >= want_differing && chosen >= options.count {
            break;
        }
        let g = generate(seed, release);
        let text = serde_json::to_string(&g.scenario)?;
        std::fs::write(&file, &text)?;
        let Answer::Document(expected) = options.oracle.answer(&file) else {
            continue;
        };
        let is_refusal = expected.get("error").is_some();
        let differs = match &options.baseline {
            Some(base) => {
                let mut older = g.scenario.clone();
                older.kubelet["kubeletVersion"] = json!(base.release.name());
                std::fs::write(&file, serde_json::to_string(&older)?)?;
                matches!(base.answer(&file), Answer::Document(d) if d != expected)
            }
            None => false,
        };
        let vector = Vector {
            seed,
            scenario: text,
            expected,
            tags: g.tags,
            differs_from_baseline: differs,
            alternatives: BTreeMap::new(),
        };
        if differs && !is_refusal && differing.len() < want_differing {
            differing.push(vector);
        } else if is_refusal && refused.len() < want_refused {
            refused.push(vector);
        } else if !is_refusal && plain.len() < options.count {
            plain.push(vector);
        }
        bar.set_position((differing.len() + refused.len() + plain.len()).min(options.count) as u64);
    }
    bar.finish_and_clear();
    // Differing first, then refusals, then plain scenarios in seed order.
    let mut vectors: Vec<Vector> = differing.into_iter().chain(refused).chain(plain).collect();
    vectors.truncate(options.count);
    vectors.sort_by_key(|v| v.seed);
    if vectors.len() < options.count {
        bail!("only {} usable scenarios in {} seeds", vectors.len(), options.tries);
    }
    for v in &mut vectors {
        std::fs::write(&file, &v.scenario)?;
        for _ in 0..options.repeats {
            if let Answer::Document(again) = options.oracle.answer(&file) {
                collect_alternatives(&v.expected, &again, &mut v.alternatives);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    write_set(options, &vectors)?;
    let differing = vectors.iter().filter(|v| v.differs_from_baseline).count();
    Ok((vectors.len(), differing))
}

/// Texts of `again` that differ from `expected` where the two documents
/// otherwise agree: `"error"` or `"event N message"`.
fn collect_alternatives(expected: &Value, again: &Value, into: &mut BTreeMap<String, Vec<String>>) {
    let mut add = |place: String, first: &Value, other: &Value| {
        if let (Some(a), Some(b)) = (first.as_str(), other.as_str()) {
            let texts = into.entry(place).or_default();
            for t in [a, b] {
                if !texts.iter().any(|x| x == t) {
                    texts.push(t.to_owned());
                }
            }
        }
    };
    if let (Some(a), Some(b)) = (expected.get("error"), again.get("error")) {
        if a != b {
            add("error".into(), a, b);
        }
        return;
    }
    let (Some(a), Some(b)) = (
        expected.get("results").and_then(Value::as_array),
        again.get("results").and_then(Value::as_array),
    ) else {
        return;
    };
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x != y && x.get("message") != y.get("message") {
            add(format!("event {i} message"), &x["message"], &y["message"]);
        }
    }
}

#[derive(Serialize)]
struct IndexEntry<'a> {
    description: String,
    kind: &'static str,
    seed: u64,
    #[serde(rename = "alternativeTexts", skip_serializing_if = "BTreeMap::is_empty")]
    alternative_texts: &'a BTreeMap<String, Vec<String>>,
}

fn write_set(options: &VectorOptions, vectors: &[Vector]) -> anyhow::Result<()> {
    let out = &options.out;
    for sub in ["scenarios", "expected"] {
        std::fs::create_dir_all(out.join(sub)).with_context(|| format!("creating {}", out.join(sub).display()))?;
    }
    // index.json may hold other vectors' entries (1.32's); gen-* entries
    // are replaced, the rest kept.
    let index_path = out.join("index.json");
    let mut index: BTreeMap<String, Value> = match std::fs::read_to_string(&index_path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("reading {}", index_path.display()))?,
        Err(_) => BTreeMap::new(),
    };
    index.retain(|name, _| !name.starts_with("gen-"));
    for old in std::fs::read_dir(out.join("scenarios"))?.chain(std::fs::read_dir(out.join("expected"))?) {
        let path = old?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("gen-"))
        {
            std::fs::remove_file(&path)?;
        }
    }
    for v in vectors {
        let name = format!("gen-{}", v.seed);
        std::fs::write(
            out.join("scenarios").join(format!("{name}.json")),
            format!("{}\n", v.scenario),
        )?;
        std::fs::write(
            out.join("expected").join(format!("{name}.json")),
            format!("{}\n", v.expected),
        )?;
        let entry = IndexEntry {
            description: v.tags.join(" "),
            kind: "generated",
            seed: v.seed,
            alternative_texts: &v.alternatives,
        };
        index.insert(name, serde_json::to_value(entry)?);
    }
    let mut text = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut text, serde_json::ser::PrettyFormatter::with_indent(b" "));
    index.serialize(&mut ser)?;
    text.push(b'\n');
    std::fs::write(&index_path, text)?;
    std::fs::write(out.join("README-gen.md"), readme(options, vectors))?;
    Ok(())
}

fn readme(options: &VectorOptions, vectors: &[Vector]) -> String {
    let release = options.oracle.release.name();
    let differing = vectors.iter().filter(|v| v.differs_from_baseline).count();
    let refusals = vectors.iter().filter(|v| v.expected.get("error").is_some()).count();
    let with_alternatives = vectors.iter().filter(|v| !v.alternatives.is_empty()).count();
    let mut tags: BTreeMap<&str, usize> = BTreeMap::new();
    for v in vectors {
        for t in &v.tags {
            *tags.entry(t.as_str()).or_insert(0) += 1;
        }
    }
    let coverage: Vec<String> = tags.iter().map(|(t, n)| format!("`{t}` {n}")).collect();
    let baseline = match &options.baseline {
        Some(b) => format!(
            "Picked first: scenarios whose answer from the v{} oracle (the same scenario naming \
             `kubeletVersion: \"{}\"`) differs: {differing} of them.",
            b.release.name(),
            b.release.name()
        ),
        None => "Picked in seed order.".to_owned(),
    };
    format!(
        "# kubelet v{release} vectors: `gen-*` (generated scenarios, the real kubelet's answers)\n\n\
         `scenarios/gen-<seed>.json` is the scenario the project's random generator \
         (`crates/difftest`, `difftest gen --version {release} --seed <seed>`) makes from that seed \
         for kubelet {release}; `expected/gen-<seed>.json` is the result document the real kubelet \
         code of **Kubernetes v{release}** gives for it (`oracle replay`, built with \
         `oracle/build.sh {release}`, unmodified output). Remade with\n\n\
         ```sh\n\
         cargo run -p topoalign-difftest -- vectors --version {release} --seed {} --count {} --out \
         testdata/conformance/{release}{}\n\
         ```\n\n\
         {} vectors from seeds {}..{}; {refusals} are configurations the kubelet refuses to start \
         with. {baseline} Seeds whose replay did not finish within {} s were skipped. Each kept \
         scenario was replayed {} more times; texts that followed Go map order ({with_alternatives} \
         vectors) are listed under `alternativeTexts` in `index.json`, whose `description` lists \
         what the scenario exercises.\n\n\
         This file is named `README-gen.md` so that it does not collide with other vectors' \
         READMEs in this directory.\n\n\
         Coverage (vectors with each feature): {}.\n",
        options.seed,
        options.count,
        options
            .baseline
            .as_ref()
            .map(|b| format!(" --differs-from {}", b.release.name()))
            .unwrap_or_default(),
        vectors.len(),
        options.seed,
        vectors.iter().map(|v| v.seed).max().unwrap_or(options.seed),
        options.oracle.timeout.as_secs(),
        options.repeats,
        coverage.join(", ")
    )
}

/// Where `oracle` answers for `release` go by default.
pub fn default_out(release: Release) -> PathBuf {
    Path::new("testdata/conformance").join(release.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_order_texts_are_collected() {
        let a = json!({"results": [{"event": 0, "message": "x"}, {"event": 1, "message": "gpu first"}]});
        let b = json!({"results": [{"event": 0, "message": "x"}, {"event": 1, "message": "nic first"}]});
        let mut alts = BTreeMap::new();
        collect_alternatives(&a, &b, &mut alts);
        assert_eq!(alts.len(), 1);
        assert_eq!(alts["event 1 message"], vec!["gpu first", "nic first"]);
        let mut alts = BTreeMap::new();
        collect_alternatives(&json!({"error": "p"}), &json!({"error": "q"}), &mut alts);
        assert_eq!(alts["error"], vec!["p", "q"]);
    }
}

//! The merge differential without Go: the wire format, the generator's
//! reach and bounds, the engine's answers on cases worked out by hand from
//! the kubelet's merge rules, and the run's comparing and shrinking against
//! a stand-in oracle.

use std::collections::BTreeSet;
use std::path::PathBuf;

use topoalign_model::{KubeletVersion, NumaMask, TopologyHint};
use topoalign_topology_manager::TopologyPolicyName;

use super::case::{Answer, Case, Engine, Hints, Path, Provider};
use super::generate::{self, MAX_HINTS, MAX_PERMUTATIONS_RARE};
use super::{MergeOptions, POLICIES, run};
use crate::release::Release;

fn mask(nodes: &[usize]) -> NumaMask {
    NumaMask::from_nodes(nodes.iter().copied())
}

fn hint(nodes: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(mask(nodes), preferred)
}

fn case(nodes: usize, providers: Vec<Provider>) -> Case {
    Case {
        id: 1,
        nodes: (0..nodes).collect(),
        distances: None,
        max_allowable: None,
        providers,
        from_rules: false,
    }
}

fn one(resource: &str, hints: Hints) -> Provider {
    Provider::Resources(vec![(resource.to_owned(), hints)])
}

fn answer(mask: Option<&[usize]>, preferred: bool, admit: bool) -> Answer {
    Answer {
        mask: mask.map(|nodes| NumaMask::from_nodes(nodes.iter().copied()).bits()),
        preferred,
        admit,
    }
}

/// Every engine path's answer under each policy equals `want` (in
/// [`POLICIES`] order).
fn check(case: &Case, want: [Answer; 3]) {
    for version in [KubeletVersion::V1_32, KubeletVersion::V1_37] {
        let engine = Engine::start(case, &POLICIES, version).expect("starts");
        for (i, want) in want.iter().enumerate() {
            for &path in Path::for_case(case) {
                assert_eq!(
                    engine.answer(case, i, path),
                    *want,
                    "{} along {}",
                    POLICIES[i],
                    path.name()
                );
            }
        }
    }
}

#[test]
fn the_wire_keeps_nil_and_empty_apart() {
    let mut c = case(
        2,
        vec![
            Provider::Nil,
            Provider::Empty,
            Provider::Resources(vec![
                (
                    "cpu".into(),
                    Hints::List(vec![hint(&[0], true), TopologyHint::any(false)]),
                ),
                ("memory".into(), Hints::NoPreference),
                ("example.com/gpu".into(), Hints::Impossible),
            ]),
        ],
    );
    c.id = 42;
    c.distances = Some(vec![vec![10, 21], vec![21, 10]]);
    c.max_allowable = Some(9);
    assert_eq!(
        c.wire(&[TopologyPolicyName::BestEffort, TopologyPolicyName::SingleNumaNode]),
        concat!(
            r#"{"id":42,"nodes":[0,1],"closest":true,"distances":[[10,21],[21,10]],"maxNodes":9,"#,
            r#""policies":["best-effort","single-numa-node"],"providers":[null,{},{"cpu":[{"mask":1,"preferred":true},"#,
            r#"{"mask":null,"preferred":false}],"memory":null,"example.com/gpu":[]}]}"#,
            "\n"
        )
    );
}

/// Worked out from policy.go: preferred {0} and {1} in both lists, {0}
/// the narrower by value.
#[test]
fn agreeing_single_nodes_merge_to_the_lowest() {
    let list = || Hints::List(vec![hint(&[0], true), hint(&[1], true), hint(&[0, 1], false)]);
    let c = case(2, vec![one("cpu", list()), one("memory", list())]);
    let want = answer(Some(&[0]), true, true);
    check(&c, [want, want, want]);
}

/// An empty list is a non-preferred "any" hint: every node, not preferred;
/// single-numa-node filters it out and reports every node as "any".
#[test]
fn an_empty_list_cannot_be_placed() {
    let c = case(2, vec![one("example.com/gpu", Hints::Impossible)]);
    check(
        &c,
        [
            answer(Some(&[0, 1]), false, true),
            answer(Some(&[0, 1]), false, false),
            answer(None, false, false),
        ],
    );
}

/// Nil lists and nil or empty maps have no preference.
#[test]
fn no_preference_admits_everywhere() {
    let c = case(2, vec![one("cpu", Hints::NoPreference), Provider::Nil, Provider::Empty]);
    check(
        &c,
        [
            answer(Some(&[0, 1]), true, true),
            answer(Some(&[0, 1]), true, true),
            answer(None, true, true),
        ],
    );
    let none = case(3, Vec::new());
    check(
        &none,
        [
            answer(Some(&[0, 1, 2]), true, true),
            answer(Some(&[0, 1, 2]), true, true),
            answer(None, true, true),
        ],
    );
}

/// {0,1} and {0,2}: the narrower by value is {0,1}, the closer {0,2}
/// (average distance 10.5 against 20); single-numa-node keeps neither.
#[test]
fn prefer_closest_numa_nodes_reads_the_distances() {
    let list = Hints::List(vec![hint(&[0, 1], true), hint(&[0, 2], true)]);
    let mut c = case(3, vec![one("cpu", list)]);
    let single = answer(None, false, false);
    let narrowest = answer(Some(&[0, 1]), true, true);
    check(&c, [narrowest, narrowest, single]);
    c.distances = Some(vec![vec![10, 30, 11], vec![30, 10, 30], vec![11, 30, 10]]);
    let closest = answer(Some(&[0, 2]), true, true);
    check(&c, [closest, closest, single]);
}

/// What the generator reaches in a few thousand seeds, and that every case
/// stays within what the kubelet merges quickly and the engine starts with.
#[test]
fn the_generator_reaches_every_shape_within_bounds() {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut node_counts = BTreeSet::new();
    for seed in 0..4000 {
        let version = if seed % 2 == 0 {
            KubeletVersion::V1_32
        } else {
            KubeletVersion::V1_37
        };
        let c = generate::case(seed, version);
        assert_eq!(c, generate::case(seed, version), "seed {seed} names one case");
        assert!(c.permutations() <= MAX_PERMUTATIONS_RARE, "seed {seed}");
        let hints: usize = c.resources().map(|(_, h)| h.kubelet_list().map_or(0, <[_]>::len)).sum();
        assert!(hints <= MAX_HINTS, "seed {seed}");
        Engine::start(&c, &POLICIES, version).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let universe = mask(&c.nodes);
        for (_, h) in c.resources() {
            for hint in h.kubelet_list().unwrap_or_default() {
                assert!(
                    hint.affinity.is_none_or(|m| !m.is_empty() && m.is_subset_of(universe)),
                    "seed {seed}: a hint outside the machine"
                );
            }
        }
        node_counts.insert(c.nodes.len());
        let mut saw = |what, yes: bool| {
            if yes {
                seen.insert(what);
            }
        };
        saw("rules", c.from_rules);
        saw("explicit", !c.from_rules);
        saw("rule kept", c.has_rules());
        saw("closest", c.closest());
        saw("max-allowable", c.max_allowable.is_some());
        saw("sparse ids", c.nodes.last().is_some_and(|&l| l + 1 != c.nodes.len()));
        saw("no providers", c.providers.is_empty());
        saw("nil provider", c.providers.iter().any(|p| matches!(p, Provider::Nil)));
        saw(
            "empty provider",
            c.providers.iter().any(|p| matches!(p, Provider::Empty)),
        );
        saw("many permutations", c.permutations() > 4096);
        for (name, h) in c.resources() {
            saw("nil list", matches!(h, Hints::NoPreference));
            saw("empty list", matches!(h, Hints::Impossible));
            let list = h.kubelet_list().unwrap_or_default();
            saw("any hint", list.iter().any(|h| h.affinity.is_none()));
            saw("non-preferred hint", list.iter().any(|h| !h.preferred));
            if let Hints::Rule(..) = h {
                saw(
                    match name.as_str() {
                        "cpu" => "cpu rule",
                        "memory" => "memory rule",
                        n if n.starts_with("hugepages-") => "huge pages rule",
                        _ => "device rule",
                    },
                    true,
                );
                saw("big rule case", c.nodes.len() > 8);
            }
        }
    }
    let want = [
        "rules",
        "explicit",
        "rule kept",
        "closest",
        "max-allowable",
        "sparse ids",
        "no providers",
        "nil provider",
        "empty provider",
        "many permutations",
        "nil list",
        "empty list",
        "any hint",
        "non-preferred hint",
        "cpu rule",
        "memory rule",
        "huge pages rule",
        "device rule",
        "big rule case",
    ];
    let missing: Vec<&&str> = want.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    assert!(
        (1..=16).all(|n| node_counts.contains(&n)),
        "NUMA node counts: {node_counts:?}"
    );
    assert!(node_counts.iter().any(|&n| n > 16), "never more than 16 NUMA nodes");
}

/// A stand-in for `oracle merge`: answers every policy of every case with
/// `answer` (a JSON object), or with an error when `answer` is `None`.
fn stand_in(name: &str, answer: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoalign-merge-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let path = dir.join("oracle");
    let reply = match answer {
        // One answer per policy: the case's "policies" array has as many
        // strings as commas plus one.
        Some(a) => format!(
            r#"n=$(printf '%s' "$line" | sed 's/.*"policies":\[\([^]]*\)\].*/\1/' | tr -cd , | wc -c)
  one='{a}'; answers=$one; i=0; while [ "$i" -lt "$n" ]; do answers="$answers,$one"; i=$((i+1)); done
  printf '{{"id":%s,"answers":[%s]}}\n' "$id" "$answers""#
        ),
        None => r#"printf '{"id":%s,"error":"no"}\n' "$id""#.to_owned(),
    };
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = merge ] || exit 2\nwhile IFS= read -r line; do\n  id=$(printf '%s' \"$line\" | sed 's/^{{\"id\":\\([0-9]*\\),.*/\\1/')\n  {reply}\ndone\n"
    );
    std::fs::write(&path, script).expect("writes the stand-in");
    let mut permissions = std::fs::metadata(&path).expect("exists").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).expect("executable");
    path
}

fn options(oracle: PathBuf, count: u64) -> MergeOptions {
    MergeOptions {
        release: Release(37),
        oracle,
        seed: 1000,
        count: Some(count),
        duration: None,
        policies: POLICIES.to_vec(),
        shrink_budget: 40,
        show: 2,
    }
}

/// An oracle that always answers "any, preferred, admitted" agrees with
/// the engine only where that is the merge's answer; the run counts the
/// rest, and shrinks what it shows.
#[test]
fn the_run_counts_and_shrinks_differences() {
    let oracle = stand_in("any", Some(r#"{"mask":null,"preferred":true,"admit":true}"#));
    let summary = run(&options(oracle, 40)).expect("runs");
    assert_eq!(summary.cases, 40);
    assert_eq!(summary.same + summary.differ, 40);
    assert!(summary.harness_failures.is_empty(), "{:?}", summary.harness_failures);
    assert!(summary.differ > 0);
    // Best-effort and restricted never answer a nil affinity.
    assert_eq!(summary.differ_by_policy[&TopologyPolicyName::BestEffort], 40);
    assert_eq!(summary.findings.len(), 2);
    for finding in &summary.findings {
        assert!(finding.report.contains("minimal case"), "{}", finding.report);
        assert!(finding.report.contains("<- differs"), "{}", finding.report);
        assert!(!finding.unstable);
    }
}

#[test]
fn oracle_errors_are_harness_failures() {
    let oracle = stand_in("error", None);
    let summary = run(&options(oracle, 10)).expect("runs");
    assert_eq!(summary.cases, 10);
    assert_eq!(summary.harness_failures.len(), 10);
    assert_eq!(summary.same + summary.differ, 0);
}

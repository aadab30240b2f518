//! A differing merge case made small: providers, resources, hints and NUMA
//! nodes are dropped, rules given as their lists, the options turned off —
//! each step kept only while the kubelet and the engine still disagree
//! under the policy. Greedy, first simplification that keeps the
//! difference, until none does or the budget of oracle calls is spent.

use topoalign_model::{KubeletVersion, NumaMask, TopologyHint};
use topoalign_topology_manager::TopologyPolicyName;

use super::case::{Answer, Case, Engine, Hints, Path, Provider};
use super::oracle::MergeOracle;

/// What the kubelet and each of the engine's paths answer for one policy.
#[derive(Clone, Debug)]
pub struct Answers {
    pub kubelet: Answer,
    pub engine: Vec<(Path, Answer)>,
}

impl Answers {
    pub fn differ(&self) -> bool {
        self.engine.iter().any(|(_, a)| *a != self.kubelet)
    }
}

/// Both sides' answers for `case` under `policy`.
///
/// # Errors
/// When the oracle fails or refuses the case, or the engine does not start.
pub fn answers(
    case: &Case,
    policy: TopologyPolicyName,
    version: KubeletVersion,
    oracle: &mut MergeOracle,
) -> anyhow::Result<Answers> {
    let engine = Engine::start(case, &[policy], version).map_err(anyhow::Error::msg)?;
    let kubelet = oracle.ask(case, &[policy])?[0];
    let engine = Path::for_case(case)
        .iter()
        .map(|&path| (path, engine.answer(case, 0, path)))
        .collect();
    Ok(Answers { kubelet, engine })
}

/// The smallest case found that still differs under `policy`, and the
/// oracle calls spent.
pub fn shrink(
    case: &Case,
    policy: TopologyPolicyName,
    version: KubeletVersion,
    oracle: &mut MergeOracle,
    budget: usize,
) -> (Case, usize) {
    let mut current = case.clone();
    let mut calls = 0;
    'progress: while calls < budget {
        for candidate in simpler(&current) {
            if calls >= budget {
                break 'progress;
            }
            calls += 1;
            if answers(&candidate, policy, version, oracle).is_ok_and(|a| a.differ()) {
                current = candidate;
                continue 'progress;
            }
        }
        break;
    }
    (current, calls)
}

/// Every one-step simplification of `case`, the biggest steps first.
fn simpler(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let with = |change: &dyn Fn(&mut Case)| {
        let mut c = case.clone();
        change(&mut c);
        c
    };
    for p in 0..case.providers.len() {
        out.push(with(&|c| {
            c.providers.remove(p);
        }));
    }
    if case.nodes.len() > 1 {
        out.push(with(&drop_last_node));
    }
    for (p, provider) in case.providers.iter().enumerate() {
        let Provider::Resources(resources) = provider else {
            continue;
        };
        for (r, (_, hints)) in resources.iter().enumerate() {
            let set = |c: &mut Case, to: Hints| {
                if let Provider::Resources(resources) = &mut c.providers[p] {
                    resources[r].1 = to;
                }
            };
            if resources.len() > 1 {
                out.push(with(&|c| {
                    if let Provider::Resources(resources) = &mut c.providers[p] {
                        resources.remove(r);
                    }
                }));
            }
            match hints {
                Hints::Rule(_, list) => out.push(with(&|c| set(c, Hints::List(list.clone())))),
                Hints::List(list) => {
                    out.push(with(&|c| set(c, Hints::NoPreference)));
                    out.push(with(&|c| set(c, Hints::Impossible)));
                    if list.len() > 1 {
                        for k in 0..list.len() {
                            let mut shorter = list.clone();
                            shorter.remove(k);
                            out.push(with(&|c| set(c, Hints::List(shorter.clone()))));
                        }
                    }
                }
                Hints::Impossible => out.push(with(&|c| set(c, Hints::NoPreference))),
                Hints::NoPreference => {}
            }
        }
    }
    if case.distances.is_some() {
        out.push(with(&|c| c.distances = None));
    }
    if case.max_allowable.is_some() && case.nodes.len() <= 8 {
        out.push(with(&|c| c.max_allowable = None));
    }
    out
}

/// The machine without its highest NUMA id: masks lose it, hints left
/// without a node go, rules become their lists (a rule's universe is the
/// machine's).
fn drop_last_node(c: &mut Case) {
    let Some(last) = c.nodes.pop() else {
        return;
    };
    let gone = NumaMask::single(last);
    let trim = |list: &[TopologyHint]| -> Vec<TopologyHint> {
        list.iter()
            .filter_map(|h| match h.affinity {
                None => Some(*h),
                Some(mask) => {
                    let mask = mask.without(gone);
                    (!mask.is_empty()).then_some(TopologyHint::new(mask, h.preferred))
                }
            })
            .collect()
    };
    for provider in &mut c.providers {
        if let Provider::Resources(resources) = provider {
            for (_, hints) in resources.iter_mut() {
                if let Hints::List(list) | Hints::Rule(_, list) = hints {
                    *hints = Hints::from_list(trim(list));
                }
            }
        }
    }
    if let Some(rows) = &mut c.distances {
        let end = c.nodes.last().map_or(0, |&id| id + 1);
        rows.truncate(end);
        for row in rows.iter_mut() {
            row.truncate(end);
        }
    }
}

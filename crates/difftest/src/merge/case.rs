//! One merge case — NUMA nodes, distances, options and the providers'
//! hints —, what the kubelet's `Policy.Merge` is given for it (the JSON
//! line `oracle merge` reads) and what the engine answers for it.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::Deserialize;
use topoalign_model::{
    FeatureGates, KubeletVersion, Machine, NumaMask, NumaNode, ProviderHints, ResourceHints, SharedHintRule,
    TopologyHint,
};
use topoalign_topology_manager::{MergeStrategy, TopologyManager, TopologyPolicyName, TopologyScope};

/// The policies that merge (`none` never does).
pub const POLICIES: [TopologyPolicyName; 3] = [
    TopologyPolicyName::BestEffort,
    TopologyPolicyName::Restricted,
    TopologyPolicyName::SingleNumaNode,
];

/// A merge case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The seed it was generated from.
    pub id: u64,
    /// NUMA ids, ascending.
    pub nodes: Vec<usize>,
    /// With `prefer-closest-numa-nodes`: one row per NUMA id up to the
    /// largest, indexed by NUMA id (the rows of ids that are not nodes are
    /// empty).
    pub distances: Option<Vec<Vec<u64>>>,
    /// `max-allowable-numa-nodes`, when set.
    pub max_allowable: Option<usize>,
    pub providers: Vec<Provider>,
    /// Made from the providers' rules (per-NUMA numbers), not drawn as lists.
    pub from_rules: bool,
}

/// What one hint provider gives: the kubelet's `map[string][]TopologyHint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provider {
    /// A nil map.
    Nil,
    /// An empty map.
    Empty,
    /// Hints per resource (distinct names, at least one).
    Resources(Vec<(String, Hints)>),
}

/// One resource's hints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hints {
    /// A nil list.
    NoPreference,
    /// An empty list.
    Impossible,
    /// A list (never empty).
    List(Vec<TopologyHint>),
    /// The engine is given the rule, the kubelet its list (`to_list`).
    Rule(SharedHintRule, Vec<TopologyHint>),
}

impl Hints {
    /// The engine's form of a provider's resource hints: a rule stays a
    /// rule, so the engine's candidate search is what answers.
    pub fn from_engine(hints: &ResourceHints) -> Hints {
        match hints {
            ResourceHints::NoPreference => Hints::NoPreference,
            ResourceHints::Impossible => Hints::Impossible,
            ResourceHints::Hints(list) => Hints::from_list(list.clone()),
            ResourceHints::Rule(rule) => {
                let list = rule.to_list();
                if list.is_empty() {
                    Hints::Impossible
                } else {
                    Hints::Rule(rule.clone(), list)
                }
            }
        }
    }

    /// A list; an empty one is "cannot be placed".
    pub fn from_list(list: Vec<TopologyHint>) -> Hints {
        if list.is_empty() {
            Hints::Impossible
        } else {
            Hints::List(list)
        }
    }

    /// The list the kubelet is given (`None`: a nil list).
    pub fn kubelet_list(&self) -> Option<&[TopologyHint]> {
        match self {
            Hints::NoPreference => None,
            Hints::Impossible => Some(&[]),
            Hints::List(list) | Hints::Rule(_, list) => Some(list),
        }
    }

    /// How many hints the kubelet's merge walks for this resource (a nil or
    /// empty list becomes one "any" hint).
    pub fn walked(&self) -> usize {
        self.kubelet_list().map_or(1, |list| list.len().max(1))
    }

    fn to_engine(&self, rules: bool) -> ResourceHints {
        match self {
            Hints::NoPreference => ResourceHints::NoPreference,
            Hints::Impossible => ResourceHints::Impossible,
            Hints::List(list) => ResourceHints::Hints(list.clone()),
            Hints::Rule(rule, _) if rules => ResourceHints::Rule(rule.clone()),
            Hints::Rule(_, list) => ResourceHints::Hints(list.clone()),
        }
    }
}

impl Case {
    /// Whether `prefer-closest-numa-nodes` is on.
    pub fn closest(&self) -> bool {
        self.distances.is_some()
    }

    /// Whether some provider gives a rule.
    pub fn has_rules(&self) -> bool {
        self.resources().any(|(_, h)| matches!(h, Hints::Rule(..)))
    }

    /// Every resource of every provider.
    pub fn resources(&self) -> impl Iterator<Item = &(String, Hints)> {
        self.providers.iter().flat_map(|p| match p {
            Provider::Resources(resources) => resources.as_slice(),
            Provider::Nil | Provider::Empty => &[],
        })
    }

    /// The kubelet's permutations: the product of the lists' lengths (a
    /// provider without resources adds one "any" hint, a factor of 1).
    pub fn permutations(&self) -> u128 {
        self.resources().map(|(_, h)| h.walked() as u128).product()
    }

    /// The line `oracle merge` reads.
    pub fn wire(&self, policies: &[TopologyPolicyName]) -> String {
        let mut out = String::with_capacity(256);
        let _ = write!(out, r#"{{"id":{},"nodes":["#, self.id);
        join(&mut out, self.nodes.iter(), |out, n| {
            let _ = write!(out, "{n}");
        });
        out.push(']');
        if let Some(rows) = &self.distances {
            out.push_str(r#","closest":true,"distances":["#);
            join(&mut out, rows.iter(), |out, row| {
                out.push('[');
                join(out, row.iter(), |out, d| {
                    let _ = write!(out, "{d}");
                });
                out.push(']');
            });
            out.push(']');
        }
        let _ = write!(
            out,
            r#","maxNodes":{},"policies":["#,
            self.max_allowable
                .unwrap_or(topoalign_topology_manager::DEFAULT_MAX_ALLOWABLE_NUMA_NODES)
        );
        join(&mut out, policies.iter(), |out, p| {
            let _ = write!(out, r#""{p}""#);
        });
        out.push_str(r#"],"providers":["#);
        join(&mut out, self.providers.iter(), |out, provider| match provider {
            Provider::Nil => out.push_str("null"),
            Provider::Empty => out.push_str("{}"),
            Provider::Resources(resources) => {
                out.push('{');
                join(out, resources.iter(), |out, (name, hints)| {
                    let _ = write!(out, r#""{name}":"#);
                    match hints.kubelet_list() {
                        None => out.push_str("null"),
                        Some(list) => {
                            out.push('[');
                            join(out, list.iter(), |out, h| match h.affinity {
                                Some(mask) => {
                                    let _ = write!(out, r#"{{"mask":{},"preferred":{}}}"#, mask.bits(), h.preferred);
                                }
                                None => {
                                    let _ = write!(out, r#"{{"mask":null,"preferred":{}}}"#, h.preferred);
                                }
                            });
                            out.push(']');
                        }
                    }
                });
                out.push('}');
            }
        });
        out.push_str("]}\n");
        out
    }
}

fn join<T>(out: &mut String, items: impl Iterator<Item = T>, mut each: impl FnMut(&mut String, T)) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(out, item);
    }
}

/// A merge's outcome: the merged hint and the admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct Answer {
    /// The affinity's bits; `None`: the "any" (nil) affinity.
    pub mask: Option<u64>,
    pub preferred: bool,
    pub admit: bool,
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mask {
            Some(bits) => write!(f, "{}", NumaMask::from_bits(bits))?,
            None => f.write_str("any")?,
        }
        write!(
            f,
            " {}, {}",
            if self.preferred { "preferred" } else { "not preferred" },
            if self.admit { "admitted" } else { "refused" }
        )
    }
}

/// One line of `oracle merge`.
#[derive(Clone, Debug, Deserialize)]
pub struct Reply {
    pub id: u64,
    #[serde(default)]
    pub answers: Option<Vec<Answer>>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Up to how many NUMA nodes explicit lists also go through the forced
/// candidate search.
pub const SEARCHED_NODES: usize = 8;

/// Which of the engine's ways to the merged hint answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Path {
    /// `TopologyManager::decide` as admissions call it: sets on explicit
    /// lists, candidate search once a provider gives a rule.
    Fast,
    /// The candidate search forced on explicit lists
    /// (`MergeStrategy::CandidateSearch`).
    Search,
    /// A case made from rules, with each rule given as its list instead.
    FastOnLists,
}

impl Path {
    pub fn name(self) -> &'static str {
        match self {
            Path::Fast => "fast merge",
            Path::Search => "candidate search",
            Path::FastOnLists => "fast merge on the rules' lists",
        }
    }

    /// The paths that apply to a case. With a rule the fast merge is the
    /// candidate search already. On explicit lists the search is forced
    /// only up to 8 NUMA nodes: its covering test is exponential in the
    /// nodes a candidate leaves out, and on bigger machines with several
    /// lists it can take minutes and gigabytes (the engine never searches
    /// explicit lists itself; see oracle/README.md, "The hint merge alone").
    pub fn for_case(case: &Case) -> &'static [Path] {
        if case.has_rules() {
            &[Path::Fast, Path::FastOnLists]
        } else if case.nodes.len() <= SEARCHED_NODES {
            &[Path::Fast, Path::Search]
        } else {
            &[Path::Fast]
        }
    }
}

/// Why [`Engine::start`] refused a case (a generator bug: every case is
/// one the kubelet starts with).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("the case's machine is refused: {0}")]
    Machine(#[from] topoalign_model::MachineError),
    #[error("the engine's topology manager does not start under {policy}: {source}")]
    Manager {
        policy: TopologyPolicyName,
        #[source]
        source: topoalign_topology_manager::TopologyManagerStartError,
    },
}

/// The engine's topology manager for a case's machine, one per policy.
pub struct Engine {
    managers: Vec<(TopologyPolicyName, TopologyManager)>,
}

impl Engine {
    /// Starts the topology manager of `version` under each policy on a
    /// machine with the case's NUMA nodes and distances.
    ///
    /// # Errors
    /// [`StartError`] when the machine or the options are refused.
    pub fn start(case: &Case, policies: &[TopologyPolicyName], version: KubeletVersion) -> Result<Engine, StartError> {
        let nodes = case
            .nodes
            .iter()
            .map(|&id| NumaNode {
                id,
                memory: 1 << 30,
                hugepages: BTreeMap::new(),
                distances: case.distances.as_ref().map(|rows| rows[id].clone()),
            })
            .collect();
        let machine = Machine::new(nodes, Vec::new(), BTreeMap::new())?;
        let mut options = BTreeMap::new();
        if case.closest() {
            options.insert("prefer-closest-numa-nodes".to_owned(), "true".to_owned());
        }
        if let Some(max) = case.max_allowable {
            options.insert("max-allowable-numa-nodes".to_owned(), max.to_string());
        }
        let managers = policies
            .iter()
            .map(|&policy| {
                TopologyManager::start(
                    &machine,
                    policy,
                    TopologyScope::Container,
                    &options,
                    &FeatureGates::default(),
                    version,
                )
                .map(|manager| (policy, manager))
                .map_err(|source| StartError::Manager { policy, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(Engine { managers })
    }

    /// The engine's answer under the `index`-th policy along `path`.
    pub fn answer(&self, case: &Case, index: usize, path: Path) -> Answer {
        let (_, manager) = &self.managers[index];
        let mut manager = manager.clone();
        manager.set_merge_strategy(match path {
            Path::Fast | Path::FastOnLists => MergeStrategy::Fast,
            Path::Search => MergeStrategy::CandidateSearch,
        });
        let providers = engine_providers(case, path != Path::FastOnLists);
        let decision = manager.decide(&providers);
        Answer {
            mask: decision.best.affinity.map(NumaMask::bits),
            preferred: decision.best.preferred,
            admit: decision.admit,
        }
    }
}

/// The providers as the engine's managers give them.
fn engine_providers(case: &Case, rules: bool) -> Vec<ProviderHints> {
    case.providers
        .iter()
        .map(|provider| match provider {
            Provider::Nil | Provider::Empty => ProviderHints::no_preference(),
            Provider::Resources(resources) => ProviderHints {
                by_resource: resources
                    .iter()
                    .map(|(name, hints)| (name.clone(), hints.to_engine(rules)))
                    .collect(),
            },
        })
        .collect()
}

/// A case for a person: machine, options, and every list.
pub fn describe(case: &Case) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  NUMA nodes {}{}",
        NumaMask::from_nodes(case.nodes.iter().copied()),
        case.max_allowable
            .map(|m| format!(", max-allowable-numa-nodes {m}"))
            .unwrap_or_default()
    );
    if let Some(rows) = &case.distances {
        let _ = writeln!(out, "  prefer-closest-numa-nodes, distances:");
        for &id in &case.nodes {
            let _ = writeln!(out, "    {id}: {:?}", rows[id]);
        }
    }
    if case.providers.is_empty() {
        let _ = writeln!(out, "  no hint providers");
    }
    for (i, provider) in case.providers.iter().enumerate() {
        match provider {
            Provider::Nil => {
                let _ = writeln!(out, "  provider {i}: nil (no preference)");
            }
            Provider::Empty => {
                let _ = writeln!(out, "  provider {i}: {{}} (no preference)");
            }
            Provider::Resources(resources) => {
                let _ = writeln!(out, "  provider {i}:");
                for (name, hints) in resources {
                    let text = match hints {
                        Hints::NoPreference => "nil (no preference)".to_owned(),
                        Hints::Impossible => "[] (cannot be placed)".to_owned(),
                        Hints::List(list) => hint_list(list),
                        Hints::Rule(rule, list) => format!("{} from the rule {rule:?}", hint_list(list)),
                    };
                    let _ = writeln!(out, "    {name}: {text}");
                }
            }
        }
    }
    out
}

/// `[{0}+ {0,1} any+]`: `+` marks a preferred hint.
pub fn hint_list(list: &[TopologyHint]) -> String {
    let hints: Vec<String> = list
        .iter()
        .map(|h| {
            format!(
                "{}{}",
                h.affinity.map_or("any".to_owned(), |m| m.to_string()),
                if h.preferred { "+" } else { "" }
            )
        })
        .collect();
    format!("[{}]", hints.join(" "))
}

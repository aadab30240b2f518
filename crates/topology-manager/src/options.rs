//! [`PolicyOptions`]: `topologyManagerPolicyOptions`, parsed and checked the
//! way the kubelet's topology manager does at start-up.

use std::collections::BTreeMap;

use topoalign_model::{FeatureGates, KubeletVersion, OptionMaturity, OptionsOf, go_parse_bool};

use crate::TopologyManagerStartError;

topoalign_model::kubelet_vocabulary! {
    /// The options the topology manager knows (`topologyManagerPolicyOptions` keys).
    pub enum TopologyPolicyOption("Topology Manager Policy option") {
        /// GA in v1.32.
        PreferClosestNumaNodes = "prefer-closest-numa-nodes",
        /// Beta in v1.32-v1.34, GA from v1.35.
        MaxAllowableNumaNodes = "max-allowable-numa-nodes",
    }
}

/// The kubelet refuses machines with more NUMA nodes than this unless
/// `max-allowable-numa-nodes` raises it.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;

/// The topology manager's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyOptions {
    /// Among equally wide hints prefer the one with the smallest average
    /// NUMA distance (not under `single-numa-node`, where all are one node).
    pub prefer_closest_numa: bool,
    /// How many NUMA nodes the machine may have.
    pub max_allowable_numa_nodes: usize,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            prefer_closest_numa: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        }
    }
}

/// The option's maturity in `version`.
fn maturity(option: TopologyPolicyOption, version: KubeletVersion) -> OptionMaturity {
    match option {
        TopologyPolicyOption::PreferClosestNumaNodes => OptionMaturity::Stable,
        TopologyPolicyOption::MaxAllowableNumaNodes if version.at_least(KubeletVersion::V1_35) => {
            OptionMaturity::Stable
        }
        TopologyPolicyOption::MaxAllowableNumaNodes => OptionMaturity::Beta,
    }
}

impl PolicyOptions {
    /// Parses the option map. Options are checked in name order; the kubelet
    /// walks a Go map, so with several bad options it may name any of them.
    ///
    /// # Errors
    /// The kubelet's text for an unknown option, a gated option, or a bad
    /// value.
    pub fn parse(
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
        version: KubeletVersion,
    ) -> Result<PolicyOptions, TopologyManagerStartError> {
        let mut parsed = PolicyOptions::default();
        let fail = |text: String| Err(TopologyManagerStartError(text));
        for (name, value) in options {
            let Ok(option) = name.parse::<TopologyPolicyOption>() else {
                return fail(format!("unknown Topology Manager Policy option: {name:?}"));
            };
            if let Some(missing) = maturity(option, version).gate_missing(OptionsOf::TopologyManager, gates) {
                let level = if missing == OptionMaturity::Alpha {
                    "Alpha"
                } else {
                    "Beta"
                };
                // v1.33 lower-cased the text.
                let what = format!("Topology Manager Policy {level}-level Options");
                let what = if version.at_least(KubeletVersion::V1_33) {
                    what.to_lowercase()
                } else {
                    what
                };
                return fail(format!("{what} not enabled, but option {name:?} provided"));
            }
            if option == TopologyPolicyOption::PreferClosestNumaNodes {
                match go_parse_bool(value) {
                    Some(flag) => parsed.prefer_closest_numa = flag,
                    None => {
                        return fail(format!(
                            "bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
                        ));
                    }
                }
            } else {
                let count = go_atoi(value).map_err(|why| {
                    TopologyManagerStartError(format!(
                        "unable to convert policy option to integer {name:?}: strconv.Atoi: parsing {value:?}: {why}"
                    ))
                })?;
                if count < DEFAULT_MAX_ALLOWABLE_NUMA_NODES as i64 {
                    return fail(format!(
                        "the minimum value of {name:?} should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
                    ));
                }
                // Anything above the NUMA ids a mask can hold behaves like "no limit".
                parsed.max_allowable_numa_nodes = usize::try_from(count).unwrap_or(usize::MAX);
            }
        }
        Ok(parsed)
    }
}

/// Go's `strconv.Atoi` on 64-bit: optional sign, decimal digits, i64 range.
/// The error is the part after `parsing "...": `.
fn go_atoi(text: &str) -> Result<i64, &'static str> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    text.parse::<i64>().map_err(|_| "value out of range")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<PolicyOptions, String> {
        let map = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        PolicyOptions::parse(&map, &FeatureGates::default(), KubeletVersion::V1_32).map_err(|e| e.0)
    }

    #[test]
    fn options_parse_like_the_kubelet() {
        assert_eq!(parse(&[]).unwrap(), PolicyOptions::default());
        let opts = parse(&[
            ("prefer-closest-numa-nodes", "True"),
            ("max-allowable-numa-nodes", "16"),
        ])
        .unwrap();
        assert!(opts.prefer_closest_numa);
        assert_eq!(opts.max_allowable_numa_nodes, 16);
    }

    #[test]
    fn bad_options_give_the_kubelet_texts() {
        for (pairs, text) in [
            (
                vec![("max-allowable-numa-nodes", "4")],
                r#"the minimum value of "max-allowable-numa-nodes" should not be less than 8"#,
            ),
            (
                vec![("max-allowable-numa-nodes", "x")],
                r#"unable to convert policy option to integer "max-allowable-numa-nodes": strconv.Atoi: parsing "x": invalid syntax"#,
            ),
            (
                vec![("prefer-closest-numa-nodes", "yes")],
                r#"bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "yes": invalid syntax"#,
            ),
            (
                vec![("bogus", "1")],
                r#"unknown Topology Manager Policy option: "bogus""#,
            ),
        ] {
            assert_eq!(parse(&pairs).unwrap_err(), text);
        }
    }

    #[test]
    fn beta_options_need_their_gate() {
        let map = [("max-allowable-numa-nodes".to_string(), "16".to_string())]
            .into_iter()
            .collect();
        let gates = FeatureGates {
            topology_manager_policy_beta_options: false,
            ..FeatureGates::default()
        };
        for (version, text) in [
            (
                KubeletVersion::V1_32,
                r#"Topology Manager Policy Beta-level Options not enabled, but option "max-allowable-numa-nodes" provided"#,
            ),
            (
                KubeletVersion::V1_33,
                r#"topology manager policy beta-level options not enabled, but option "max-allowable-numa-nodes" provided"#,
            ),
            (
                KubeletVersion::V1_34,
                r#"topology manager policy beta-level options not enabled, but option "max-allowable-numa-nodes" provided"#,
            ),
        ] {
            assert_eq!(
                PolicyOptions::parse(&map, &gates, version).unwrap_err().0,
                text,
                "{version}"
            );
        }
        // GA from 1.35: no gate needed.
        for version in [KubeletVersion::V1_35, KubeletVersion::V1_36, KubeletVersion::V1_37] {
            let opts = PolicyOptions::parse(&map, &gates, version).unwrap();
            assert_eq!(opts.max_allowable_numa_nodes, 16, "{version}");
        }
    }
}

//! How `topoalign run` leaves its decision with the command: variables in
//! the command's environment, which the kernel keeps as the process's
//! `/proc/PID/environ` (the environment it was started with, whatever the
//! command does later). `verify --pid` reads them back; so does a command
//! that wants to know its CPUs.
//!
//! | variable | value |
//! |---|---|
//! | `TOPOALIGN_ALLOCATION` | the allocation's id (`a1`) |
//! | `TOPOALIGN_CPUS` | its CPUs, list syntax |
//! | `TOPOALIGN_EXCLUSIVE` | `1` exclusive CPUs, `0` the shared pool |
//! | `TOPOALIGN_MEMS` | the NUMA nodes memory is pinned to (absent: not pinned) |
//! | `TOPOALIGN_DEVICES` | `resource=id,id;resource=id` (absent: none) |
//! | `TOPOALIGN_POLICY` | the topology manager policy it was admitted under |
//! | `TOPOALIGN_ENFORCEMENT` | `cgroup-v2`, `cgroup-v1`, `affinity` or `none` |
//! | `TOPOALIGN_CGROUP` | the allocation's cgroup directory, under cgroup enforcement |
//!
//! A process started by an older `run` has only the first three (and
//! `TOPOALIGN_MEMS`): its CPUs are then taken as the shared pool's, the
//! one reading that cannot wrongly call it drifted.

use std::collections::BTreeMap;

use topoalign_model::CpuSet;
use topoalign_topology_manager::TopologyPolicyName;

use crate::facts::{Decided, DecidedCpus, DecidedDevice, NodeSet, nodes_text};

pub const ALLOCATION: &str = "TOPOALIGN_ALLOCATION";
pub const CPUS: &str = "TOPOALIGN_CPUS";
pub const EXCLUSIVE: &str = "TOPOALIGN_EXCLUSIVE";
pub const MEMS: &str = "TOPOALIGN_MEMS";
pub const DEVICES: &str = "TOPOALIGN_DEVICES";
pub const POLICY: &str = "TOPOALIGN_POLICY";
pub const ENFORCEMENT: &str = "TOPOALIGN_ENFORCEMENT";
pub const CGROUP: &str = "TOPOALIGN_CGROUP";

/// Every variable of the record.
pub const VARIABLES: [&str; 8] = [ALLOCATION, CPUS, EXCLUSIVE, MEMS, DEVICES, POLICY, ENFORCEMENT, CGROUP];

/// A variable of the record that does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?}: {reason}")]
pub struct RecordError {
    pub variable: &'static str,
    pub value: String,
    pub reason: String,
}

/// What `run` decided for its command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    pub allocation: String,
    pub cpus: CpuSet,
    pub exclusive: bool,
    pub memory_nodes: Option<NodeSet>,
    /// Device ids per resource.
    pub devices: BTreeMap<String, Vec<String>>,
    pub policy: Option<TopologyPolicyName>,
    pub enforcement: Option<String>,
    pub cgroup: Option<String>,
}

impl RunRecord {
    /// The variables to set, in [`VARIABLES`] order (absent ones left out).
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            (ALLOCATION, self.allocation.clone()),
            (CPUS, self.cpus.to_string()),
            (EXCLUSIVE, if self.exclusive { "1" } else { "0" }.to_string()),
        ];
        if let Some(nodes) = &self.memory_nodes {
            env.push((MEMS, nodes_text(nodes)));
        }
        if !self.devices.is_empty() {
            let devices: Vec<String> = self
                .devices
                .iter()
                .map(|(resource, ids)| format!("{resource}={}", ids.join(",")))
                .collect();
            env.push((DEVICES, devices.join(";")));
        }
        if let Some(policy) = self.policy {
            env.push((POLICY, policy.as_str().to_string()));
        }
        if let Some(enforcement) = &self.enforcement {
            env.push((ENFORCEMENT, enforcement.clone()));
        }
        if let Some(cgroup) = &self.cgroup {
            env.push((CGROUP, cgroup.clone()));
        }
        env
    }

    /// The record in a process's environment; `None` when it has no
    /// `TOPOALIGN_ALLOCATION` (not started by `run`).
    ///
    /// # Errors
    /// [`RecordError`] naming the variable that does not read.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Option<RunRecord>, RecordError> {
        let Some(allocation) = env.get(ALLOCATION) else {
            return Ok(None);
        };
        let error = |variable: &'static str, value: &str, reason: String| RecordError {
            variable,
            value: value.to_string(),
            reason,
        };
        let cpus_text = env
            .get(CPUS)
            .ok_or_else(|| error(CPUS, "", format!("missing next to {ALLOCATION}")))?;
        let cpus = CpuSet::parse(cpus_text).map_err(|e| error(CPUS, cpus_text, e.to_string()))?;
        let exclusive = match env.get(EXCLUSIVE).map(String::as_str) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => return Err(error(EXCLUSIVE, other, "expected 1 or 0".into())),
        };
        let memory_nodes = env
            .get(MEMS)
            .map(|text| {
                CpuSet::parse(text)
                    .map(|set| set.iter().map(|n| n as usize).collect::<NodeSet>())
                    .map_err(|e| error(MEMS, text, e.to_string()))
            })
            .transpose()?;
        let mut devices = BTreeMap::new();
        if let Some(text) = env.get(DEVICES).filter(|t| !t.is_empty()) {
            for entry in text.split(';') {
                let (resource, ids) = entry
                    .split_once('=')
                    .filter(|(r, _)| !r.is_empty())
                    .ok_or_else(|| error(DEVICES, text, format!("{entry:?} is not resource=id,id")))?;
                devices.insert(
                    resource.to_string(),
                    ids.split(',').filter(|i| !i.is_empty()).map(str::to_string).collect(),
                );
            }
        }
        let policy = env
            .get(POLICY)
            .map(|text| {
                text.parse()
                    .map_err(|e: topoalign_model::UnknownName| error(POLICY, text, e.to_string()))
            })
            .transpose()?;
        Ok(Some(RunRecord {
            allocation: allocation.clone(),
            cpus,
            exclusive,
            memory_nodes,
            devices,
            policy,
            enforcement: env.get(ENFORCEMENT).cloned(),
            cgroup: env.get(CGROUP).cloned(),
        }))
    }

    /// The decision, with each device's NUMA nodes from `device_numa`
    /// (resource, id → nodes; `None` where the machine does not say).
    pub fn decided(&self, device_numa: impl Fn(&str, &str) -> Option<NodeSet>) -> Decided {
        Decided {
            by: format!("topoalign run allocation {}", self.allocation),
            cpus: if self.exclusive {
                DecidedCpus::Exclusive {
                    cpus: self.cpus.clone(),
                }
            } else {
                DecidedCpus::Shared { pool: None }
            },
            memory_nodes: self.memory_nodes.clone(),
            devices: self
                .devices
                .iter()
                .flat_map(|(resource, ids)| {
                    ids.iter().map(|id| DecidedDevice {
                        resource: resource.clone(),
                        id: id.clone(),
                        numa: device_numa(resource, id),
                    })
                })
                .collect(),
            cgroup: self.cgroup.clone(),
            policy: self.policy,
            not_enforced: self.enforcement.as_deref() == Some("none"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_record_reads_back_as_written() -> Result<(), RecordError> {
        let record = RunRecord {
            allocation: "a7".into(),
            cpus: CpuSet::from_iter([2, 3, 10]),
            exclusive: true,
            memory_nodes: Some([0, 1].into()),
            devices: [(
                "nvidia.com/gpu".to_string(),
                vec!["GPU-a".to_string(), "GPU-b".to_string()],
            )]
            .into(),
            policy: Some(TopologyPolicyName::SingleNumaNode),
            enforcement: Some("cgroup-v2".into()),
            cgroup: Some("/sys/fs/cgroup/topoalign/alloc-a7".into()),
        };
        let written: BTreeMap<String, String> = record.to_env().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(written.get(CPUS).map(String::as_str), Some("2-3,10"));
        assert_eq!(written.get(MEMS).map(String::as_str), Some("0-1"));
        assert_eq!(
            written.get(DEVICES).map(String::as_str),
            Some("nvidia.com/gpu=GPU-a,GPU-b")
        );
        assert_eq!(RunRecord::from_env(&written)?, Some(record));
        Ok(())
    }

    #[test]
    fn older_and_foreign_environments() -> Result<(), RecordError> {
        assert_eq!(RunRecord::from_env(&env(&[("PATH", "/bin")]))?, None);
        let older = RunRecord::from_env(&env(&[(ALLOCATION, "a1"), (CPUS, "3")]))?;
        let decided = older.map(|r| r.decided(|_, _| None));
        assert_eq!(decided.map(|d| d.cpus), Some(DecidedCpus::Shared { pool: None }));
        Ok(())
    }

    #[test]
    fn bad_variables_are_named() {
        for (pairs, variable) in [
            (vec![(ALLOCATION, "a1")], CPUS),
            (vec![(ALLOCATION, "a1"), (CPUS, "x")], CPUS),
            (vec![(ALLOCATION, "a1"), (CPUS, "1"), (EXCLUSIVE, "yes")], EXCLUSIVE),
            (vec![(ALLOCATION, "a1"), (CPUS, "1"), (MEMS, "0-")], MEMS),
            (vec![(ALLOCATION, "a1"), (CPUS, "1"), (DEVICES, "gpu")], DEVICES),
            (vec![(ALLOCATION, "a1"), (CPUS, "1"), (POLICY, "numa")], POLICY),
        ] {
            let result = RunRecord::from_env(&env(&pairs));
            assert_eq!(result.err().map(|e| e.variable), Some(variable), "{pairs:?}");
        }
    }
}

//! The workload generator: a document with a `generator:` key instead of
//! Kubernetes objects.
//!
//! ```yaml
//! generator:
//!   pods: 100000          # pod adds
//!   seed: 7
//!   sizes:                # the size distribution: weighted pod shapes
//!     - {weight: 6, cpu: "2", memory: 4Gi}
//!     - {weight: 3, cpu: "4", memory: 16Gi}
//!     - {weight: 1, cpu: "16", memory: 64Gi}
//!   gpuShare: 0.1         # this fraction of pods also asks for `gpus` devices
//!   gpuResource: nvidia.com/gpu
//!   gpus: 1
//!   guaranteedShare: 1.0  # the rest are Burstable (requests, no limits)
//!   churn: 0.2            # after each add, with this probability a random running pod is deleted
//! ```
//!
//! Every pod is one container `app` in namespace `default`, named
//! `gen-<i>`. Owns: turning the spec into pods and events, deterministically
//! for a seed.

use serde::Deserialize;
use topoalign_model::{Container, Pod, QosClass, Quantity, ResourceList};

use crate::rng::Rng;
use crate::workload::{Event, Workload, index_u32};

/// The `generator:` block.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorSpec {
    pub pods: u32,
    #[serde(default)]
    pub seed: u64,
    pub sizes: Vec<SizeSpec>,
    #[serde(default)]
    pub gpu_share: f64,
    #[serde(default = "default_gpu_resource")]
    pub gpu_resource: String,
    #[serde(default = "one")]
    pub gpus: u32,
    #[serde(default = "all")]
    pub guaranteed_share: f64,
    #[serde(default)]
    pub churn: f64,
}

/// One weighted pod size.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeSpec {
    #[serde(default = "one")]
    pub weight: u32,
    pub cpu: String,
    pub memory: String,
}

fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}

fn one() -> u32 {
    1
}

fn all() -> f64 {
    1.0
}

impl GeneratorSpec {
    /// The workload this spec describes.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn generate(&self) -> Result<Workload, String> {
        if self.pods as usize > topoalign_k8s::MAX_PODS {
            return Err(format!(
                "pods: {} pods: a workload has at most {} (refused before any is made)",
                self.pods,
                topoalign_k8s::MAX_PODS
            ));
        }
        let total_weight: u64 = self.sizes.iter().map(|s| u64::from(s.weight)).sum();
        if total_weight == 0 {
            return Err("sizes: at least one size with a positive weight is needed".into());
        }
        for (name, share) in [
            ("gpuShare", self.gpu_share),
            ("guaranteedShare", self.guaranteed_share),
            ("churn", self.churn),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(format!("{name}: {share} is not between 0 and 1"));
            }
        }
        let mut sizes = Vec::new();
        for (i, size) in self.sizes.iter().enumerate() {
            let parse = |field: &str, text: &str| {
                topoalign_k8s::parse_quantity(text).map_err(|e| format!("sizes[{i}].{field}: {e}"))
            };
            sizes.push((
                u64::from(size.weight),
                parse("cpu", &size.cpu)?,
                parse("memory", &size.memory)?,
            ));
        }
        let gpus = Quantity::from_units(i128::from(self.gpus));

        let mut rng = Rng::new(self.seed);
        let mut workload = Workload::default();
        let mut running: Vec<u32> = Vec::new();
        for i in 0..self.pods {
            let mut pick = rng.below(total_weight);
            let &(_, cpu, memory) = sizes
                .iter()
                .find(|(weight, _, _)| {
                    if pick < *weight {
                        true
                    } else {
                        pick -= weight;
                        false
                    }
                })
                .unwrap_or(&sizes[0]);
            let mut requests = ResourceList::from_iter([("cpu".to_string(), cpu), ("memory".to_string(), memory)]);
            if rng.unit() < self.gpu_share {
                requests.insert(self.gpu_resource.clone(), gpus);
            }
            let guaranteed = rng.unit() < self.guaranteed_share;
            let limits = if guaranteed {
                requests.clone()
            } else {
                // Device-plugin resources need limits; Burstable keeps only those.
                requests
                    .iter()
                    .filter(|(r, _)| topoalign_model::resource_name::is_extended(r))
                    .map(|(r, q)| (r.clone(), *q))
                    .collect()
            };
            let container = Container {
                name: "app".into(),
                requests,
                limits,
                restartable: false,
            };
            let qos = topoalign_model::QosClass::of_containers(&[], std::slice::from_ref(&container));
            debug_assert!(!guaranteed || qos == QosClass::Guaranteed);
            let index = index_u32(workload.pods.len());
            workload.pods.push(Pod {
                namespace: "default".into(),
                name: format!("gen-{i}"),
                uid: String::new(),
                qos,
                init_containers: Vec::new(),
                containers: vec![container],
                overhead: ResourceList::new(),
                pod_resources: None,
            });
            workload.events.push(Event::Add(index));
            running.push(index);
            if rng.unit() < self.churn && !running.is_empty() {
                let victim = usize::try_from(rng.below(running.len() as u64)).unwrap_or(0);
                let pod = running.swap_remove(victim);
                workload.events.push(Event::Delete(pod));
            }
        }
        workload.assign_uids();
        Ok(workload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(churn: f64) -> GeneratorSpec {
        GeneratorSpec {
            pods: 2000,
            seed: 11,
            sizes: vec![
                SizeSpec {
                    weight: 3,
                    cpu: "2".into(),
                    memory: "4Gi".into(),
                },
                SizeSpec {
                    weight: 1,
                    cpu: "8".into(),
                    memory: "32Gi".into(),
                },
            ],
            gpu_share: 0.25,
            gpu_resource: "nvidia.com/gpu".into(),
            gpus: 1,
            guaranteed_share: 0.5,
            churn,
        }
    }

    #[test]
    fn shares_and_weights_come_out_roughly_as_asked() {
        let workload = spec(0.0).generate().unwrap();
        assert_eq!(workload.adds(), 2000);
        let share = |f: &dyn Fn(&Pod) -> bool| workload.pods.iter().filter(|p| f(p)).count() as f64 / 2000.0;
        let big = share(&|p| p.containers[0].request("cpu") == Quantity::from_units(8));
        let gpu = share(&|p| p.containers[0].requests.contains_key("nvidia.com/gpu"));
        let guaranteed = share(&|p| p.qos == QosClass::Guaranteed);
        assert!((0.2..0.3).contains(&big), "{big}");
        assert!((0.2..0.3).contains(&gpu), "{gpu}");
        assert!((0.45..0.55).contains(&guaranteed), "{guaranteed}");
    }

    #[test]
    fn churn_deletes_only_running_pods_once() {
        let workload = spec(0.3).generate().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let mut deleted = std::collections::BTreeSet::new();
        for event in &workload.events {
            match *event {
                Event::Add(p) => assert!(seen.insert(p)),
                Event::Delete(p) => {
                    assert!(seen.contains(&p));
                    assert!(deleted.insert(p));
                }
            }
        }
        let rate = deleted.len() as f64 / 2000.0;
        assert!((0.25..0.35).contains(&rate), "{rate}");
    }

    #[test]
    fn bad_specs_name_the_field() {
        let mut bad = spec(0.0);
        bad.churn = 1.5;
        assert_eq!(bad.generate().unwrap_err(), "churn: 1.5 is not between 0 and 1");
        let mut bad = spec(0.0);
        bad.sizes[1].cpu = "eight".into();
        assert!(bad.generate().unwrap_err().starts_with("sizes[1].cpu:"));
    }
}

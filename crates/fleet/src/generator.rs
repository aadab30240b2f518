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
//! `gen-<i>`. Every size is checked before any pod is made: `pods` at most
//! `topoalign_k8s::MAX_PODS`; each size's `cpu` (at least 1m, at most
//! [`MAX_SIZE_CPUS`]) and `memory` (at least 1 byte, at most
//! [`MAX_SIZE_MEMORY`]) positive; weights summing to more than 0; `gpus` at
//! least 1 and at most [`MAX_SIZE_GPUS`] and `gpuResource` an extended
//! resource name when `gpuShare` is above 0; shares between 0 and 1.
//! Errors name the field (`sizes[1].cpu: ...`).
//!
//! Owns: turning the spec into pods and events, deterministically for a
//! seed.

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
    /// A quantity (`"2"`, `1500m`, or a bare number).
    #[serde(deserialize_with = "quantity_text")]
    pub cpu: String,
    /// A quantity (`4Gi`, or a bare number of bytes).
    #[serde(deserialize_with = "quantity_text")]
    pub memory: String,
}

/// A quantity as written: a string, or a bare YAML/JSON number (`cpu: 2`).
fn quantity_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        String(String),
        Integer(i64),
        Float(f64),
    }
    Ok(match Text::deserialize(deserializer)? {
        Text::String(text) => text,
        Text::Integer(n) => n.to_string(),
        Text::Float(x) => x.to_string(),
    })
}

/// The largest CPU request of one size (a million CPUs): far beyond any
/// machine, small enough that sums of requests cannot overflow.
pub const MAX_SIZE_CPUS: i128 = 1_000_000;
/// The largest memory request of one size: 1 EiB.
pub const MAX_SIZE_MEMORY: i128 = 1 << 60;
/// The most devices one pod asks for.
pub const MAX_SIZE_GPUS: u32 = 1_000_000;

fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}

fn one() -> u32 {
    1
}

fn all() -> f64 {
    1.0
}

/// A generator spec that makes no workload: the field (`sizes[1].cpu`,
/// `churn`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct GeneratorError {
    /// The field's path inside the `generator:` block.
    pub field: String,
    pub message: String,
}

fn invalid(field: impl Into<String>, message: String) -> GeneratorError {
    GeneratorError {
        field: field.into(),
        message,
    }
}

impl GeneratorSpec {
    /// The workload this spec describes.
    ///
    /// # Errors
    /// [`GeneratorError`] naming the bad field.
    pub fn generate(&self) -> Result<Workload, GeneratorError> {
        if self.pods as usize > topoalign_k8s::MAX_PODS {
            return Err(invalid(
                "pods",
                format!(
                    "{} pods: a workload has at most {} (refused before any is made)",
                    self.pods,
                    topoalign_k8s::MAX_PODS
                ),
            ));
        }
        let total_weight: u64 = self.sizes.iter().map(|s| u64::from(s.weight)).sum();
        if total_weight == 0 {
            return Err(invalid(
                "sizes",
                "at least one size with a positive weight is needed".into(),
            ));
        }
        for (name, share) in [
            ("gpuShare", self.gpu_share),
            ("guaranteedShare", self.guaranteed_share),
            ("churn", self.churn),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(invalid(name, format!("{share} is not between 0 and 1")));
            }
        }
        if self.gpu_share > 0.0 {
            if self.gpus == 0 || self.gpus > MAX_SIZE_GPUS {
                return Err(invalid(
                    "gpus",
                    format!(
                        "{} is not between 1 and {MAX_SIZE_GPUS} (gpuShare is {})",
                        self.gpus, self.gpu_share
                    ),
                ));
            }
            if !topoalign_model::resource_name::is_extended(&self.gpu_resource) {
                return Err(invalid(
                    "gpuResource",
                    format!(
                        "{:?} is not an extended resource name (like nvidia.com/gpu)",
                        self.gpu_resource
                    ),
                ));
            }
        }
        let mut sizes = Vec::new();
        for (i, size) in self.sizes.iter().enumerate() {
            let cpu = size_quantity(i, "cpu", &size.cpu, Quantity::milli, MAX_SIZE_CPUS * 1000, "1m")?;
            let memory = size_quantity(i, "memory", &size.memory, Quantity::value, MAX_SIZE_MEMORY, "1")?;
            sizes.push((u64::from(size.weight), cpu, memory));
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

/// One size's `cpu` or `memory`: a quantity between the smallest step
/// (`1m` CPU, 1 byte) and `max` (in the unit `amount` reads).
fn size_quantity(
    index: usize,
    field: &str,
    text: &str,
    amount: fn(Quantity) -> i128,
    max: i128,
    least: &str,
) -> Result<Quantity, GeneratorError> {
    let at = format!("sizes[{index}].{field}");
    let quantity = topoalign_k8s::parse_quantity(text).map_err(|e| invalid(at.clone(), e.to_string()))?;
    let value = amount(quantity);
    if value <= 0 {
        return Err(invalid(
            at,
            format!("{text:?} is not positive: a size asks for at least {least}"),
        ));
    }
    if value > max {
        return Err(invalid(
            at,
            format!(
                "{text:?} is too large (at most {max} {})",
                if field == "cpu" { "millicores" } else { "bytes" }
            ),
        ));
    }
    Ok(quantity)
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
        assert_eq!(
            bad.generate().unwrap_err(),
            GeneratorError {
                field: "churn".into(),
                message: "1.5 is not between 0 and 1".into()
            }
        );
        let mut bad = spec(0.0);
        bad.sizes[1].cpu = "eight".into();
        assert_eq!(bad.generate().unwrap_err().field, "sizes[1].cpu");
    }

    #[test]
    fn every_size_is_checked_and_named() {
        type Change = dyn Fn(&mut GeneratorSpec);
        let cases: [(&Change, &str); 9] = [
            (
                &|s| s.sizes[0].cpu = "-2".into(),
                "sizes[0].cpu: \"-2\" is not positive",
            ),
            (&|s| s.sizes[1].cpu = "0".into(), "sizes[1].cpu: \"0\" is not positive"),
            (
                &|s| s.sizes[1].cpu = "2000000".into(),
                "sizes[1].cpu: \"2000000\" is too large",
            ),
            (
                &|s| s.sizes[0].memory = "-4Gi".into(),
                "sizes[0].memory: \"-4Gi\" is not positive",
            ),
            (
                &|s| s.sizes[0].memory = "0".into(),
                "sizes[0].memory: \"0\" is not positive",
            ),
            (
                &|s| s.sizes[0].memory = "2Ei".into(),
                "sizes[0].memory: \"2Ei\" is too large",
            ),
            (&|s| s.gpus = 0, "gpus: 0 is not between 1 and"),
            (
                &|s| s.gpu_resource = "cpu".into(),
                "gpuResource: \"cpu\" is not an extended resource",
            ),
            (
                &|s| s.guaranteed_share = f64::NAN,
                "guaranteedShare: NaN is not between 0 and 1",
            ),
        ];
        for (change, expected) in cases {
            let mut bad = spec(0.0);
            change(&mut bad);
            let error = bad.generate().unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error} (expected {expected})");
        }
        // No GPU pods: gpus and gpuResource do not matter.
        let mut fine = spec(0.0);
        fine.gpu_share = 0.0;
        fine.gpus = 0;
        assert!(fine.generate().is_ok());
        // Bare numbers are quantities too.
        let read = Workload::parse("generator: {pods: 2, sizes: [{cpu: 2, memory: 1073741824}]}").unwrap();
        assert_eq!(read.pods[0].containers[0].request("cpu"), Quantity::from_units(2));
        let error = Workload::parse("generator: {pods: 2, sizes: [{cpu: -2, memory: 1Gi}]}").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("generator.sizes[0].cpu: \"-2\" is not positive"),
            "{error}"
        );
        // Negative counts are refused when read, naming the field.
        for (text, field) in [
            (
                "generator: {pods: -5, sizes: [{cpu: '1', memory: 1Gi}]}",
                "generator.pods",
            ),
            (
                "generator: {pods: 5, sizes: [{weight: -1, cpu: '1', memory: 1Gi}]}",
                "generator.sizes[0].weight",
            ),
            (
                "generator: {pods: 5, seed: -1, sizes: [{cpu: '1', memory: 1Gi}]}",
                "generator.seed",
            ),
            (
                "generator: {pods: 5, gpus: -1, sizes: [{cpu: '1', memory: 1Gi}]}",
                "generator.gpus",
            ),
        ] {
            let error = Workload::parse(text).unwrap_err().to_string();
            assert!(error.starts_with(&format!("{field}: ")), "{error} (expected {field})");
        }
    }
}

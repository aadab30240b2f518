//! Random DRA allocation cases: a node with GPU and NIC drivers' slices
//! (several pools and slices, other nodes' slices, node selectors, pools
//! being updated, older generations, taints, partitionable devices and
//! shared devices where the release allocates them), device classes, devices
//! other claims hold, and a pod's claims with counts, `All`, CEL selectors,
//! `firstAvailable`, admin access and constraints on NUMA node and PCIe root.
//!
//! Some cases also carry a pod with DRA-backed extended resources
//! ([`pod`]: its own step, on a stream of its own).
//!
//! A seed names one case; the case is built as the API's JSON and read into
//! [`AllocationCase`] (or [`PodCase`]), so what the oracle reads is exactly
//! what the engine reads.

mod pod;

use serde::Serialize;
use serde_json::{Value, json};
use topoalign_dra::{AllocationCase, PodCase, PodOutcome};

use crate::release::Release;
use crate::rng::Rng;

const GPU: &str = "gpu.example.com";
const NIC: &str = "nic.example.com";
const NODE: &str = "node-1";
const OTHER_NODE: &str = "node-2";
const STANDARD: &str = "resource.kubernetes.io";

/// A generated case: slices, classes and claims, or those and a pod.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum DraCase {
    Plain(Box<AllocationCase>),
    /// With a pod whose extended resources DRA may serve.
    Pod(Box<PodCase>),
}

impl DraCase {
    /// Topoalign's answer: the allocator's, or the DynamicResources
    /// plugin's for a case with a pod.
    pub fn decide(&self) -> PodOutcome {
        match self {
            DraCase::Plain(case) => topoalign_dra::allocate(case).into(),
            DraCase::Pod(case) => topoalign_dra::allocate_pod(case),
        }
    }

    pub fn has_pod(&self) -> bool {
        matches!(self, DraCase::Pod(_))
    }
}

/// The case of a seed.
pub fn case(release: Release, seed: u64) -> DraCase {
    let (mut value, mut rng) = base(release, seed);
    // After the base case, so that the pod step changes no base case.
    let mut pod_rng = rng.fork(1);
    if pod::add(&mut pod_rng, &mut value) {
        DraCase::Pod(Box::new(
            serde_json::from_value(value).expect("the generator writes valid cases"),
        ))
    } else {
        DraCase::Plain(Box::new(
            serde_json::from_value(value).expect("the generator writes valid cases"),
        ))
    }
}

/// The case before the pod step (the whole case before it existed), and the
/// stream that made it.
fn base(release: Release, seed: u64) -> (Value, Rng) {
    let mut rng = Rng::new(seed ^ 0x6472_615f_6361_7365);
    let value = Builder {
        rng: &mut rng,
        release,
        counter_set: None,
    }
    .case();
    (value, rng)
}

struct Builder<'r> {
    rng: &'r mut Rng,
    release: Release,
    /// The counter set of the pool being made, if it is partitionable.
    counter_set: Option<String>,
}

/// One device as generated, remembered to make claims that can hold it.
struct Made {
    driver: &'static str,
    pool: String,
    name: String,
}

impl Builder<'_> {
    fn case(&mut self) -> Value {
        let numa_nodes = *self.rng.pick(&[1u64, 2, 2, 4, 4, 8]);
        let mut slices = Vec::new();
        let mut made = Vec::new();
        for driver in [GPU, NIC] {
            let pools = *self.rng.weighted(&[(70, 1usize), (25, 2), (5, 3)]);
            for pool_index in 0..pools {
                self.pool(driver, pool_index, numa_nodes, &mut slices, &mut made);
            }
        }
        if self.rng.chance(30) {
            // Another node's slice, which this node must not use.
            slices.push(self.slice(
                GPU,
                "node-2-gpu",
                0,
                1,
                1,
                json!({"nodeName": OTHER_NODE}),
                numa_nodes,
                &mut Vec::new(),
                "gpu-remote",
            ));
        }
        // The API server lists slices in no particular order.
        self.shuffle(&mut slices);
        let classes = self.classes();
        let allocated = self.allocated(&made);
        let claims: Vec<Value> = (0..*self.rng.weighted(&[(60, 1usize), (30, 2), (10, 3)]))
            .map(|i| self.claim(i, numa_nodes))
            .collect();
        json!({
            "release": self.release.name(),
            "node": {"metadata": {"name": NODE, "labels": {
                "kubernetes.io/hostname": NODE,
                "topology.kubernetes.io/zone": *self.rng.pick(&["zone-a", "zone-b"]),
            }}},
            "deviceClasses": classes,
            "resourceSlices": slices,
            "allocatedClaims": allocated,
            "claims": claims,
        })
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// One pool of a driver: its slices (sometimes one missing, sometimes an
    /// older generation beside the current one).
    fn pool(
        &mut self,
        driver: &'static str,
        index: usize,
        numa_nodes: u64,
        slices: &mut Vec<Value>,
        made: &mut Vec<Made>,
    ) {
        let short = if driver == GPU { "gpu" } else { "nic" };
        let pool = format!("{NODE}-{short}-{index}");
        let count = *self.rng.weighted(&[(70, 1usize), (25, 2), (5, 3)]);
        let generation = *self.rng.pick(&[1i64, 1, 2]);
        let published = if self.rng.chance(8) {
            count.saturating_sub(1).max(1)
        } else {
            count
        };
        let declared = if published < count { count } else { published };
        let selection = match self.rng.below(10) {
            0 => json!({"allNodes": true}),
            1 => json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}}),
            _ => json!({"nodeName": NODE}),
        };
        // A partitionable pool: one more slice with the pool's shared
        // counters, which the devices consume (1.36+ allocate them).
        let counters = (driver == GPU && self.rng.chance(15)).then(|| format!("{short}-{index}-memory"));
        let (declared, published) = match &counters {
            Some(_) => (declared + 1, published),
            None => (declared, published),
        };
        if let Some(set) = &counters {
            slices.push(json!({"metadata": {"name": format!("{pool}-counters-g{generation}")}, "spec": {
                "driver": driver,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": declared},
                "sharedCounters": [{"name": set, "counters": {"memory": {"value": *self.rng.pick(&["80Gi", "160Gi"])}}}],
                "nodeName": NODE,
            }}));
        }
        self.counter_set = counters;
        for slice_index in 0..published {
            let prefix = format!("{short}-{index}-{slice_index}");
            slices.push(self.slice(
                driver,
                &pool,
                generation,
                declared,
                slice_index,
                selection.clone(),
                numa_nodes,
                made,
                &prefix,
            ));
        }
        if generation > 1 && self.rng.chance(40) {
            // What the driver published before: ignored.
            let prefix = format!("{short}-{index}-old");
            slices.push(self.slice(
                driver,
                &pool,
                generation - 1,
                1,
                9,
                selection,
                numa_nodes,
                &mut Vec::new(),
                &prefix,
            ));
        }
        self.counter_set = None;
    }

    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        driver: &'static str,
        pool: &str,
        generation: i64,
        count: usize,
        index: usize,
        selection: Value,
        numa_nodes: u64,
        made: &mut Vec<Made>,
        prefix: &str,
    ) -> Value {
        let devices: Vec<Value> = (0..self.rng.urange(1, 6))
            .map(|d| {
                let name = format!("{prefix}-{d}");
                made.push(Made {
                    driver,
                    pool: pool.to_owned(),
                    name: name.clone(),
                });
                self.device(driver, &name, numa_nodes)
            })
            .collect();
        let mut spec = json!({
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        });
        if self.rng.chance(5) {
            // Each device names its node.
            spec["perDeviceNodeSelection"] = json!(true);
            for device in spec["devices"].as_array_mut().into_iter().flatten() {
                device["nodeName"] = json!(*self.rng.pick(&[NODE, NODE, OTHER_NODE]));
            }
        } else if let (Value::Object(spec), Value::Object(selection)) = (&mut spec, selection) {
            spec.extend(selection);
        }
        json!({"metadata": {"name": format!("{pool}-slice-{index}-g{generation}")}, "spec": spec})
    }

    fn device(&mut self, driver: &str, name: &str, numa_nodes: u64) -> Value {
        let numa = self.rng.below(numa_nodes) as i64;
        let mut attributes = serde_json::Map::new();
        if !self.rng.chance(5) {
            attributes.insert("numaNode".into(), json!({"int": numa}));
        }
        if self.rng.chance(60) {
            attributes.insert(format!("{STANDARD}/numaNode"), json!({"int": numa}));
        }
        if !self.rng.chance(10) {
            attributes.insert(
                format!("{STANDARD}/pcieRoot"),
                json!({"string": format!("pci0000:{:02x}", numa * 16 + self.rng.below(2) as i64)}),
            );
        }
        let mut capacity = serde_json::Map::new();
        if driver == GPU {
            attributes.insert(
                "model".into(),
                json!({"string": *self.rng.pick(&["A100", "H100", "H200", "L4"])}),
            );
            attributes.insert(
                "driverVersion".into(),
                json!({"version": *self.rng.pick(&["1.0.0", "1.2.3", "2.0.0"])}),
            );
            capacity.insert(
                "memory".into(),
                json!({"value": *self.rng.pick(&["24Gi", "40Gi", "80Gi", "141Gi"])}),
            );
        } else {
            attributes.insert("speed".into(), json!({"int": *self.rng.pick(&[25i64, 100, 200, 400])}));
            attributes.insert("rdma".into(), json!({"bool": self.rng.chance(70)}));
        }
        if self.rng.chance(1) {
            // A list attribute (DRAListTypeAttributes): the NUMA nodes nearest.
            attributes.insert(
                format!("{STANDARD}/numaNodes"),
                json!({"ints": [numa, (numa + 1) % numa_nodes as i64]}),
            );
        }
        let shared = driver == NIC && self.rng.chance(15);
        if shared {
            capacity.insert(
                "bandwidth".into(),
                json!({"value": "200G", "requestPolicy": {
                "default": "10G", "validRange": {"min": "1G", "step": *self.rng.pick(&["1G", "5G"])}}}),
            );
        }
        let mut device = json!({"name": name, "attributes": attributes, "capacity": capacity});
        if shared {
            device["allowMultipleAllocations"] = json!(true);
        }
        if let Some(set) = &self.counter_set {
            device["consumesCounters"] = json!([{"counterSet": set, "counters": {"memory": {"value": *self.rng.pick(&["20Gi", "40Gi", "80Gi"])}}}]);
        }
        if self.rng.chance(4) {
            device["bindingConditions"] = json!(["example.com/attached"]);
            device["bindingFailureConditions"] = json!(["example.com/failed"]);
        }
        if self.rng.chance(8) {
            device["taints"] = json!([{"key": "example.com/unhealthy", "value": "true",
                "effect": *self.rng.pick(&["NoSchedule", "NoExecute", "None"])}]);
        }
        device
    }

    fn classes(&mut self) -> Value {
        let mut classes = vec![
            json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU}\"")}}]}}),
            json!({"metadata": {"name": "nic"}, "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{NIC}\"")}}]}}),
            json!({"metadata": {"name": "any"}, "spec": {}}),
        ];
        if self.rng.chance(30) {
            classes.push(json!({"metadata": {"name": "big-gpu"}, "spec": {
                "selectors": [
                    {"cel": {"expression": format!("device.driver == \"{GPU}\"")}},
                    {"cel": {"expression": format!("device.capacity[\"{GPU}\"].memory.compareTo(quantity(\"40Gi\")) >= 0")}},
                ],
                "config": [{"opaque": {"driver": GPU, "parameters": {"sharing": "none"}}}],
            }}));
        }
        Value::Array(classes)
    }

    /// Claims of other pods that hold some of the devices.
    fn allocated(&mut self, made: &[Made]) -> Value {
        let mut results = Vec::new();
        for device in made {
            if self.rng.chance(20) {
                let mut result =
                    json!({"request": "r", "driver": device.driver, "pool": device.pool, "device": device.name});
                if self.rng.chance(15) {
                    result["adminAccess"] = json!(true);
                }
                results.push(result);
            }
        }
        if results.is_empty() {
            return json!([]);
        }
        json!([{"metadata": {"name": "other", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}])
    }

    fn claim(&mut self, index: usize, numa_nodes: u64) -> Value {
        let mut requests = Vec::new();
        let count = *self.rng.weighted(&[(50, 1usize), (35, 2), (15, 3)]);
        for r in 0..count {
            requests.push(self.request(&format!("req-{r}"), numa_nodes));
        }
        let names: Vec<String> = requests
            .iter()
            .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        let mut constraints = Vec::new();
        if self.rng.chance(45) {
            let attribute = *self.rng.pick(&[
                "resource.kubernetes.io/numaNode",
                "resource.kubernetes.io/pcieRoot",
                "gpu.example.com/numaNode",
            ]);
            let mut constraint = json!({"matchAttribute": attribute});
            if self.rng.chance(50) && names.len() > 1 {
                constraint["requests"] = json!(names[..2]);
            }
            constraints.push(constraint);
        }
        if self.rng.chance(15) {
            constraints.push(json!({"distinctAttribute": *self.rng.pick(&["resource.kubernetes.io/pcieRoot", "gpu.example.com/numaNode"])}));
        }
        let mut devices = json!({"requests": requests});
        if !constraints.is_empty() {
            devices["constraints"] = Value::Array(constraints);
        }
        if self.rng.chance(20) {
            devices["config"] =
                json!([{"requests": [names[0]], "opaque": {"driver": GPU, "parameters": {"mode": "exclusive"}}}]);
        }
        json!({"metadata": {"name": format!("claim-{index}"), "namespace": "default"}, "spec": {"devices": devices}})
    }

    fn request(&mut self, name: &str, numa_nodes: u64) -> Value {
        if self.rng.chance(20) {
            let subs: Vec<Value> = (0..self.rng.urange(2, 3))
                .map(|i| {
                    let mut sub = self.exact(numa_nodes, false);
                    sub["name"] = json!(format!("alt-{i}"));
                    sub
                })
                .collect();
            return json!({"name": name, "firstAvailable": subs});
        }
        json!({"name": name, "exactly": self.exact(numa_nodes, true)})
    }

    /// An exact request (or a subrequest's fields).
    fn exact(&mut self, numa_nodes: u64, admin_allowed: bool) -> Value {
        let class = *self
            .rng
            .weighted(&[(45, "gpu"), (35, "nic"), (10, "any"), (10, "big-gpu")]);
        let mut request = json!({"deviceClassName": class});
        if self.rng.chance(10) {
            request["allocationMode"] = json!("All");
        } else {
            request["allocationMode"] = json!("ExactCount");
            request["count"] = json!(*self.rng.weighted(&[(70, 1i64), (20, 2), (8, 3), (2, 5)]));
        }
        if self.rng.chance(40) {
            let selector = self.selector(class, numa_nodes);
            request["selectors"] = json!([{"cel": {"expression": selector}}]);
        }
        if admin_allowed && self.rng.chance(4) {
            request["adminAccess"] = json!(true);
        }
        if class == "nic" && self.rng.chance(15) {
            request["capacity"] = json!({"requests": {"bandwidth": *self.rng.pick(&["10G", "33G", "50G", "150G"])}});
        }
        if self.rng.chance(10) {
            request["tolerations"] = json!([{"key": "example.com/unhealthy", "operator": "Exists"}]);
        }
        request
    }

    fn selector(&mut self, class: &str, numa_nodes: u64) -> String {
        let numa = self.rng.below(numa_nodes);
        let domain = if class == "nic" { NIC } else { GPU };
        match self.rng.below(12) {
            0 => format!("device.attributes[\"{domain}\"].numaNode == {numa}"),
            1 => format!(
                "device.attributes[\"{STANDARD}\"].pcieRoot.startsWith(\"pci0000:{:x}\")",
                numa
            ),
            2 => format!(
                "\"numaNode\" in device.attributes[\"{domain}\"] && device.attributes[\"{domain}\"].numaNode <= {numa}"
            ),
            3 if domain == GPU => format!(
                "device.attributes[\"{GPU}\"].model == \"{}\"",
                self.rng.pick(&["A100", "H100"])
            ),
            4 if domain == GPU => format!(
                "device.capacity[\"{GPU}\"].memory.compareTo(quantity(\"{}\")) >= 0",
                self.rng.pick(&["40Gi", "80Gi"])
            ),
            5 if domain == GPU => {
                "device.attributes[\"gpu.example.com\"].driverVersion.isGreaterThan(semver(\"1.1.0\"))".to_owned()
            }
            6 if domain == NIC => format!("device.attributes[\"{NIC}\"].speed >= {}", self.rng.pick(&[100, 200])),
            7 if domain == NIC => format!("device.attributes[\"{NIC}\"].rdma"),
            8 => format!(
                "has(device.attributes[\"{STANDARD}\"].numaNode) && device.attributes[\"{STANDARD}\"].numaNode == {numa}"
            ),
            // A selector the devices of the other driver cannot evaluate:
            // a CEL runtime error unless the class filters them out first.
            9 if self.rng.chance(30) => format!("device.attributes[\"{domain}\"].numaNode == {numa}"),
            10 if self.rng.chance(10) => "device.attributes[\"gpu.example.com\"].missing == 1".to_owned(),
            _ => format!("device.driver == \"{domain}\""),
        }
    }
}

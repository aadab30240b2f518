//! Pod shapes and the scheduler's resource vector.
//!
//! Pods that differ only in identity (namespace, name, uid) get the same
//! decisions from the engine, so the simulator interns them into *shapes*
//! and caches decisions per shape. Each shape also carries what the
//! schedulers need without touching the engine: its requests as a sparse
//! vector over the fleet's resources (the scheduler's `NodeResourcesFit`
//! view) and its "non-zero" CPU and memory requests for scoring.
//!
//! Owns: interning, resource indexing, those derived numbers.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::DeviceClass;
use topoalign_dra::extended::{ClassResolver, is_dra_extended_resource_name};
use topoalign_model::{Pod, PodShape, ResourceList};

/// Index of a resource in the fleet's resource vector.
pub(crate) type ResourceIndex = usize;

pub(crate) const CPU: ResourceIndex = 0;
pub(crate) const MEMORY: ResourceIndex = 1;
pub(crate) const PODS: ResourceIndex = 2;

/// The kube-scheduler's defaults for containers without a request, used
/// only for scoring (`DefaultMilliCPURequest`, `DefaultMemoryRequest`).
const DEFAULT_MILLI_CPU: i64 = 100;
const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// Resource names ↔ indices; `cpu`, `memory`, `pods` come first.
#[derive(Clone, Debug)]
pub(crate) struct ResourceTable {
    names: Vec<String>,
    index: HashMap<String, ResourceIndex>,
}

impl ResourceTable {
    pub fn new() -> Self {
        let mut table = ResourceTable {
            names: Vec::new(),
            index: HashMap::new(),
        };
        for name in ["cpu", "memory", "pods"] {
            table.intern(name);
        }
        table
    }

    pub fn intern(&mut self, name: &str) -> ResourceIndex {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The resources' names, by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A resource list as a dense vector (cpu in millicores, everything
    /// else in whole units); unknown names are interned.
    pub fn dense(&mut self, list: &ResourceList) -> Vec<i64> {
        let mut out = vec![0; self.len()];
        for (name, amount) in list {
            let i = self.intern(name);
            if out.len() <= i {
                out.resize(i + 1, 0);
            }
            out[i] = amount_of(i, *amount);
        }
        out
    }
}

fn amount_of(index: ResourceIndex, amount: topoalign_model::Quantity) -> i64 {
    let raw = if index == CPU { amount.milli() } else { amount.value() };
    i64::try_from(raw).unwrap_or(if raw < 0 { i64::MIN } else { i64::MAX })
}

/// One pod shape.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// A pod of this shape (identity to be replaced).
    pub template: Pod,
    /// Non-zero requests, `pods` = 1 included.
    pub request: Vec<(ResourceIndex, i64)>,
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    /// Index of its request in [`Shapes::requirements`].
    pub requirement: usize,
    /// The DRA claims its pods take; `None` when they take none.
    pub dra: Option<DraPod>,
}

/// What a pod asks of DRA: its namespace (where its templates are), its
/// `spec.resourceClaims`, and — when it requests an extended resource some
/// DeviceClass of the fleet serves (`extendedResourceName`, or the class's
/// implicit `deviceclass.resource.kubernetes.io/<class>`) — its containers'
/// requests, from which the scheduler builds the special claim on nodes
/// whose allocatable lacks the resource (KEP-5004,
/// `topoalign_dra::extended`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DraPod {
    pub namespace: String,
    pub claims: Vec<(String, Option<String>, Option<String>)>,
    pub extended: Option<ContainerRequests>,
}

/// Resource names and amounts as the API writes them (`"2"`, `"1Gi"`).
pub(crate) type Amounts = Vec<(String, String)>;

/// A pod's containers' requests (init containers, then containers) and its
/// overhead, as the API server stores them: what the DynamicResources
/// plugin reads to build the special claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ContainerRequests {
    /// Per init container: its name, its requests (name, amount as the API
    /// writes it) and whether it keeps running (`restartPolicy: Always`).
    pub init_containers: Vec<(String, Amounts, bool)>,
    /// Per container: its name and requests.
    pub containers: Vec<(String, Amounts)>,
    pub overhead: Amounts,
}

impl ContainerRequests {
    /// The requests of `pod` when one of them is a DRA extended resource
    /// name that a class of `classes` serves; `None` otherwise.
    fn of(pod: &Pod, classes: &ClassResolver<'_>) -> Option<ContainerRequests> {
        let served = |name: &str| is_dra_extended_resource_name(name) && classes.get(name).is_some();
        let asks = pod
            .all_containers()
            .flat_map(|(c, _)| c.requests.iter())
            .chain(pod.overhead.iter())
            .any(|(name, amount)| !amount.is_zero() && served(name));
        if !asks {
            return None;
        }
        let list = |l: &ResourceList| l.iter().map(|(n, q)| (n.clone(), q.to_string())).collect::<Vec<_>>();
        Some(ContainerRequests {
            init_containers: pod
                .init_containers
                .iter()
                .map(|c| (c.name.clone(), list(&c.requests), c.restartable))
                .collect(),
            containers: pod
                .containers
                .iter()
                .map(|c| (c.name.clone(), list(&c.requests)))
                .collect(),
            overhead: list(&pod.overhead),
        })
    }

    fn k8s_container(
        name: &str,
        requests: &[(String, String)],
        restartable: bool,
    ) -> k8s_openapi::api::core::v1::Container {
        use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        Container {
            name: name.to_owned(),
            restart_policy: restartable.then(|| "Always".to_owned()),
            resources: Some(ResourceRequirements {
                requests: Some(requests.iter().map(|(n, q)| (n.clone(), Quantity(q.clone()))).collect()),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }
    }
}

impl DraPod {
    fn of(pod: &Pod, claims: &[PodResourceClaim], classes: &ClassResolver<'_>) -> Option<DraPod> {
        let extended = ContainerRequests::of(pod, classes);
        (!claims.is_empty() || extended.is_some()).then(|| DraPod {
            namespace: pod.namespace.clone(),
            claims: claims
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        c.resource_claim_name.clone(),
                        c.resource_claim_template_name.clone(),
                    )
                })
                .collect(),
            extended,
        })
    }

    /// The pod as the scheduler's DRA side reads it, named `name`: its
    /// claims, and its containers' requests when DRA may serve one.
    pub fn k8s_pod(&self, name: &str) -> k8s_openapi::api::core::v1::Pod {
        use k8s_openapi::api::core::v1::{Pod as K8sPod, PodSpec};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let mut spec = PodSpec {
            resource_claims: Some(
                self.claims
                    .iter()
                    .map(|(name, claim, template)| PodResourceClaim {
                        name: name.clone(),
                        resource_claim_name: claim.clone(),
                        resource_claim_template_name: template.clone(),
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        };
        if let Some(extended) = &self.extended {
            spec.init_containers = Some(
                extended
                    .init_containers
                    .iter()
                    .map(|(name, requests, restartable)| ContainerRequests::k8s_container(name, requests, *restartable))
                    .collect(),
            );
            spec.containers = extended
                .containers
                .iter()
                .map(|(name, requests)| ContainerRequests::k8s_container(name, requests, false))
                .collect();
            spec.overhead = (!extended.overhead.is_empty()).then(|| {
                extended
                    .overhead
                    .iter()
                    .map(|(n, q)| (n.clone(), Quantity(q.clone())))
                    .collect()
            });
        }
        K8sPod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    /// `namespace/name` of the pod named `name`.
    pub fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }
}

/// Shapes of a workload's pods.
#[derive(Clone, Debug)]
pub(crate) struct Shapes {
    pub shapes: Vec<Shape>,
    /// Pod index → shape id.
    pub of_pod: Vec<u32>,
    /// The distinct request vectors of the shapes; one per shape when
    /// [`Shapes::one_per_shape`].
    pub requirements: Vec<Vec<(ResourceIndex, i64)>>,
    pub one_per_shape: bool,
}

/// Up to this many shapes, each has its own requirement (and so its own
/// candidate index in the simulator, from which rejected classes can be
/// dropped); beyond, shapes with equal requests share one.
const SHAPES_WITH_OWN_REQUIREMENT: usize = 32;

impl Shapes {
    /// `claims(i)`: the DRA claims of pod `i`; `classes`: the fleet's
    /// DeviceClasses (which extended resources DRA may serve).
    pub fn intern<'p>(
        pods: &'p [Pod],
        claims: impl Fn(usize) -> &'p [PodResourceClaim],
        classes: &[DeviceClass],
        resources: &mut ResourceTable,
    ) -> Shapes {
        let classes = ClassResolver::new(classes);
        let mut by_key: HashMap<(PodShape<'_>, Option<DraPod>), u32> = HashMap::new();
        let mut shapes = Vec::new();
        let mut of_pod = Vec::with_capacity(pods.len());
        for (i, pod) in pods.iter().enumerate() {
            let dra = DraPod::of(pod, claims(i), &classes);
            let id = *by_key.entry((pod.shape(), dra.clone())).or_insert_with(|| {
                let mut shape = shape_of(pod, resources);
                shape.dra = dra;
                shapes.push(shape);
                u32::try_from(shapes.len() - 1).unwrap_or(u32::MAX)
            });
            of_pod.push(id);
        }
        let one_per_shape = shapes.len() <= SHAPES_WITH_OWN_REQUIREMENT;
        let mut requirements: Vec<Vec<(ResourceIndex, i64)>> = Vec::new();
        for shape in &mut shapes {
            let mut request = shape.request.clone();
            request.sort_unstable();
            let existing = if one_per_shape {
                None
            } else {
                requirements.iter().position(|r| *r == request)
            };
            shape.requirement = existing.unwrap_or_else(|| {
                requirements.push(request);
                requirements.len() - 1
            });
        }
        Shapes {
            shapes,
            of_pod,
            requirements,
            one_per_shape,
        }
    }
}

fn shape_of(pod: &Pod, resources: &mut ResourceTable) -> Shape {
    let totals = topoalign_engine::fit::pod_request_totals(pod);
    let mut request: Vec<(ResourceIndex, i64)> = totals
        .iter()
        .map(|(name, amount)| {
            let i = resources.intern(name);
            (i, amount_of(i, *amount))
        })
        .filter(|&(i, amount)| amount > 0 && i != PODS)
        .collect();
    request.push((PODS, 1));
    let nonzero = |resource: &str, default: i64, index: ResourceIndex| {
        let of = |c: &topoalign_model::Container| c.requests.get(resource).map_or(default, |q| amount_of(index, *q));
        let apps: i64 = pod.containers.iter().map(of).sum();
        let inits = pod.init_containers.iter().map(of).max().unwrap_or(0);
        let overhead = pod.overhead.get(resource).map_or(0, |q| amount_of(index, *q));
        apps.max(inits) + overhead
    };
    Shape {
        template: pod.clone(),
        request,
        nonzero_cpu: nonzero("cpu", DEFAULT_MILLI_CPU, CPU),
        nonzero_memory: nonzero("memory", DEFAULT_MEMORY, MEMORY),
        requirement: 0,
        dra: None,
    }
}

//! The one reading of [`STATE_ATTRIBUTE`](super::STATE_ATTRIBUTE), the
//! format [`StateRecord`](super::StateRecord) writes: read without copying
//! — strings borrowed from the text, objects kept as the lists of pairs
//! they are written as — and turned straight into the engine's
//! [`NodeSnapshot`]. A reader that restores thousands of objects (the
//! extender at start) pays for one parse and the node it builds, not for a
//! tree of owned strings it throws away. Every reader goes through it: the
//! NRT attribute ([`read_state`](super::read_state)), the agent's journal
//! snapshots, tests. `StateRecord` only writes.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use topoalign_engine::{
    CpuManagerState, MemoryBlock, MemoryManagerState, MemoryTableState, NodeSnapshot, NumaMemoryState,
};
use topoalign_model::{Container, CpuSet, Machine, Pod, PodResources, ResourceList, fold_amounts};

use super::TableRecord;

pub use topoalign_k8s::text::Text;

/// A list of the view, read as a slice, whose only element is held in
/// place: most lists of the state hold one — a pod's containers, a pod's
/// CPU and memory entries, a container's memory blocks, a block's NUMA
/// nodes —, and a reader that restores thousands of objects would
/// otherwise allocate (and free) each of them.
#[derive(Clone, Debug, Default)]
pub enum Few<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T> Few<T> {
    /// An empty list with room for `capacity` elements (held in place
    /// below two).
    fn with_capacity(capacity: usize) -> Few<T> {
        if capacity > 1 {
            Few::Many(Vec::with_capacity(capacity.min(4096)))
        } else {
            Few::Empty
        }
    }

    fn push(&mut self, item: T) {
        *self = match std::mem::take(self) {
            Few::Empty => Few::One(item),
            Few::One(first) => {
                let mut items = Vec::with_capacity(4);
                items.push(first);
                items.push(item);
                Few::Many(items)
            }
            Few::Many(mut items) => {
                items.push(item);
                Few::Many(items)
            }
        };
    }
}

impl<T> Deref for Few<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Few::Empty => &[],
            Few::One(item) => std::slice::from_ref(item),
            Few::Many(items) => items,
        }
    }
}

/// As slices: one list held in place or not.
impl<T: PartialEq> PartialEq for Few<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for Few<T> {}

/// As a slice (and so as a `Vec` of the same elements).
impl<T: Hash> Hash for Few<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Few<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FewVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FewVisitor<T> {
            type Value = Few<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // A `Vec`'s words: the errors read as before.
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Few::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(items)
            }
        }
        deserializer.deserialize_seq(FewVisitor(PhantomData))
    }
}

/// A JSON object as its pairs, in document order (a later duplicate key
/// wins when turned into a map, as it does in a `BTreeMap`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pairs<K, V>(pub Few<(K, V)>);

impl<K, V> Default for Pairs<K, V> {
    fn default() -> Self {
        Pairs(Few::Empty)
    }
}

impl<K, V> Pairs<K, V> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.0.iter()
    }
}

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Pairs<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for PairsVisitor<K, V> {
            type Value = Pairs<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut pairs = Few::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor(PhantomData))
    }
}

/// Resource name → quantity text.
type Amounts<'a> = Pairs<Text<'a>, Text<'a>>;
/// Pod uid → container → `T`.
type PerContainer<'a, T> = Pairs<Text<'a>, Pairs<Text<'a>, T>>;

/// [`StateRecord`](super::StateRecord), borrowed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateView<'a> {
    #[serde(borrow)]
    pub pods: Vec<PodView<'a>>,
    #[serde(borrow)]
    pub cpu: CpuView<'a>,
    #[serde(default, borrow)]
    pub memory: Option<MemoryView<'a>>,
    #[serde(default, borrow)]
    pub devices: PerContainer<'a, Pairs<Text<'a>, Few<Text<'a>>>>,
}

/// [`PodRecord`](super::PodRecord), borrowed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView<'a> {
    #[serde(borrow)]
    pub namespace: Text<'a>,
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(borrow)]
    pub uid: Text<'a>,
    #[serde(default, borrow)]
    pub init_containers: Few<ContainerView<'a>>,
    #[serde(borrow)]
    pub containers: Few<ContainerView<'a>>,
    #[serde(default, borrow)]
    pub overhead: Amounts<'a>,
    #[serde(default, borrow)]
    pub pod_resources: Option<PodResourcesView<'a>>,
}

/// [`PodResourcesRecord`](super::PodResourcesRecord), borrowed.
#[derive(Debug, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourcesView<'a> {
    #[serde(default, borrow)]
    pub requests: Amounts<'a>,
    #[serde(default, borrow)]
    pub limits: Amounts<'a>,
}

/// [`ContainerRecord`](super::ContainerRecord), borrowed.
#[derive(Debug, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView<'a> {
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(default, borrow)]
    pub requests: Amounts<'a>,
    #[serde(default, borrow)]
    pub limits: Amounts<'a>,
    #[serde(default)]
    pub restartable: bool,
}

/// [`CpuRecord`](super::CpuRecord), borrowed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuView<'a> {
    #[serde(borrow)]
    pub default_cpu_set: Text<'a>,
    #[serde(default, borrow)]
    pub entries: PerContainer<'a, Text<'a>>,
    /// Pod uid → the pod's CPUs (`podEntries`).
    #[serde(default, borrow)]
    pub pod_entries: Pairs<Text<'a>, Text<'a>>,
}

/// [`MemoryRecord`](super::MemoryRecord), borrowed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryView<'a> {
    #[serde(borrow)]
    pub machine_state: Pairs<usize, NumaMemoryView<'a>>,
    #[serde(default, borrow)]
    pub entries: PerContainer<'a, Few<BlockView<'a>>>,
    /// Pod uid → the pod's memory blocks (`podEntries`).
    #[serde(default, borrow)]
    pub pod_entries: Pairs<Text<'a>, Few<BlockView<'a>>>,
}

/// [`NumaMemoryRecord`](super::NumaMemoryRecord), borrowed.
#[derive(Debug, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaMemoryView<'a> {
    pub number_of_assignments: i64,
    #[serde(borrow)]
    pub memory_map: Pairs<Text<'a>, TableRecord>,
    pub cells: Vec<usize>,
}

/// [`BlockRecord`](super::BlockRecord), borrowed.
#[derive(Debug, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockView<'a> {
    pub numa_affinity: Few<usize>,
    #[serde(rename = "type", borrow)]
    pub resource: Text<'a>,
    pub size: u64,
}

/// A part of a state that does not read: where it is (`pod ns/name: c:
/// cpu`, `cpu.entries.<uid>.<container>`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct StateError {
    pub at: String,
    pub problem: String,
}

impl StateError {
    fn new(at: impl Into<String>, problem: impl ToString) -> StateError {
        StateError {
            at: at.into(),
            problem: problem.to_string(),
        }
    }

    /// The error with `outer` in front of where it is.
    fn within(self, outer: &str) -> StateError {
        StateError {
            at: format!("{outer}: {}", self.at),
            ..self
        }
    }
}

/// How the NUMA ids a state was written with ([`Machine::numa_label`])
/// read as the machine's own: through [`Machine::numa_id_of_label`] on a
/// machine numbered anew (NUMA ids past 63), as written otherwise (a NUMA
/// node the machine lacks is then the restore's to refuse, in the
/// kubelet's words).
#[derive(Clone, Copy)]
struct NumaIds<'m>(Option<&'m Machine>);

impl NumaIds<'_> {
    /// The machine's index of NUMA id `id` read at `at`.
    fn index(self, id: usize, at: &dyn Fn() -> String) -> Result<usize, StateError> {
        let Some(machine) = self.0 else {
            return Ok(id);
        };
        machine.numa_id_of_label(id).ok_or_else(|| {
            let ids: Vec<String> = machine
                .numa_labels()
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect();
            StateError::new(
                at(),
                format!(
                    "NUMA node {id} is not on this machine (its NUMA nodes: {})",
                    ids.join(", ")
                ),
            )
        })
    }

    /// [`NumaIds::index`] of each id.
    fn indices(self, ids: &[usize], at: &dyn Fn() -> String) -> Result<Vec<usize>, StateError> {
        match self.0 {
            None => Ok(ids.to_vec()),
            Some(_) => exact_vec(ids.len(), ids.iter().map(|&id| self.index(id, at))),
        }
    }
}

impl StateView<'_> {
    /// The engine's snapshot this state describes, its NUMA ids read as
    /// written: for a machine whose NUMA ids are all below 64 (not numbered
    /// anew). [`StateView::to_snapshot_on`] reads them for any machine.
    ///
    /// # Errors
    /// [`StateError`] naming the malformed part (a bad quantity or CPU
    /// list).
    pub fn to_snapshot(&self) -> Result<NodeSnapshot, StateError> {
        self.snapshot(NumaIds(None))
    }

    /// The engine's snapshot this state describes on `machine`: the NUMA
    /// ids [`StateRecord`](super::StateRecord) wrote (the machine's own,
    /// [`Machine::numa_label`]) read back as the machine's indices
    /// ([`Machine::numa_id_of_label`]). On a machine whose ids are all
    /// below 64, [`StateView::to_snapshot`].
    ///
    /// # Errors
    /// [`StateError`] naming the malformed part (a bad quantity or CPU
    /// list; on a machine numbered anew, a NUMA id it lacks).
    pub fn to_snapshot_on(&self, machine: &Machine) -> Result<NodeSnapshot, StateError> {
        self.snapshot(NumaIds(machine.numa_labels().map(|_| machine)))
    }

    fn snapshot(&self, numa_ids: NumaIds<'_>) -> Result<NodeSnapshot, StateError> {
        let pods = exact_vec(
            self.pods.len(),
            self.pods.iter().map(|view| {
                view.to_pod()
                    .map_err(|e| e.within(&format!("pod {}/{}", view.namespace.as_str(), view.name.as_str())))
            }),
        )?;
        let cpu_list = |text: &str, at: &dyn Fn() -> String| CpuSet::parse(text).map_err(|e| StateError::new(at(), e));
        let default_cpu_set = cpu_list(self.cpu.default_cpu_set.as_str(), &|| "cpu.defaultCpuSet".to_string())?;
        // The maps by uid are collected (see `per_container`); a later
        // duplicate uid replaces an earlier one whole, as inserting did.
        let assignments = self
            .cpu
            .entries
            .iter()
            .map(|(uid, containers)| {
                let mut parsed = BTreeMap::new();
                for (container, cpus) in containers.iter() {
                    let at = || format!("cpu.entries.{}.{}", uid.as_str(), container.as_str());
                    parsed.insert(container.as_str().to_owned(), cpu_list(cpus.as_str(), &at)?);
                }
                Ok((uid.as_str().to_owned(), parsed))
            })
            .collect::<Result<BTreeMap<_, _>, StateError>>()?;
        let pod_assignments = self
            .cpu
            .pod_entries
            .iter()
            .map(|(uid, cpus)| {
                let at = || format!("cpu.podEntries.{}", uid.as_str());
                Ok((uid.as_str().to_owned(), cpu_list(cpus.as_str(), &at)?))
            })
            .collect::<Result<BTreeMap<_, _>, StateError>>()?;
        Ok(NodeSnapshot {
            pods,
            cpu: CpuManagerState {
                default_cpu_set,
                assignments,
                pod_assignments,
            },
            memory: self
                .memory
                .as_ref()
                .map(|memory| memory.to_state(numa_ids))
                .transpose()?,
            devices: per_container(&self.devices, |devices| {
                let mut resources = BTreeMap::new();
                for (resource, ids) in devices.iter() {
                    let ids = ids.iter().map(|id| id.as_str().to_owned()).collect();
                    resources.insert(resource.as_str().to_owned(), ids);
                }
                resources
            }),
        })
    }

    /// The pod uids, in admission order.
    pub fn uids(&self) -> impl Iterator<Item = &str> {
        self.pods.iter().map(|p| p.uid.as_str())
    }
}

/// `entries` as the engine's nested maps, each item converted.
fn per_container<'a, T, U>(
    entries: &PerContainer<'a, T>,
    convert: impl Fn(&T) -> U,
) -> BTreeMap<String, BTreeMap<String, U>> {
    // A pod's few containers are inserted: collecting a map sorts a vector
    // first, which costs more than it saves on maps of a few entries. The
    // pods are collected: the writer lists them in uid order, a run that
    // sorting only checks, and a map built from a sorted run costs one
    // pass instead of a search per pod (a later duplicate still wins).
    entries
        .iter()
        .map(|(uid, containers)| {
            let mut converted = BTreeMap::new();
            for (container, item) in containers.iter() {
                converted.insert(container.as_str().to_owned(), convert(item));
            }
            (uid.as_str().to_owned(), converted)
        })
        .collect()
}

impl MemoryView<'_> {
    fn to_state(&self, numa_ids: NumaIds<'_>) -> Result<MemoryManagerState, StateError> {
        let mut machine_state = BTreeMap::new();
        for (numa, view) in self.machine_state.iter() {
            let at = || format!("memory.machineState.{numa}");
            let index = numa_ids.index(*numa, &at)?;
            let mut memory = BTreeMap::new();
            for (resource, table) in view.memory_map.iter() {
                memory.insert(resource.as_str().to_owned(), table.into());
            }
            let node = NumaMemoryState {
                number_of_assignments: view.number_of_assignments,
                memory,
                cells: numa_ids.indices(&view.cells, &|| format!("{}.cells", at()))?,
            };
            machine_state.insert(index, node);
        }
        // As `per_container` builds them, each block's NUMA ids read.
        let assignments = self
            .entries
            .iter()
            .map(|(uid, containers)| {
                let mut converted = BTreeMap::new();
                for (container, blocks) in containers.iter() {
                    let at = || format!("memory.entries.{}.{}", uid.as_str(), container.as_str());
                    converted.insert(container.as_str().to_owned(), blocks_of(blocks, numa_ids, &at)?);
                }
                Ok((uid.as_str().to_owned(), converted))
            })
            .collect::<Result<_, StateError>>()?;
        let pod_assignments = self
            .pod_entries
            .iter()
            .map(|(uid, blocks)| {
                let at = || format!("memory.podEntries.{}", uid.as_str());
                Ok((uid.as_str().to_owned(), blocks_of(blocks, numa_ids, &at)?))
            })
            .collect::<Result<_, StateError>>()?;
        Ok(MemoryManagerState {
            machine_state,
            assignments,
            pod_assignments,
        })
    }
}

impl From<&TableRecord> for MemoryTableState {
    fn from(t: &TableRecord) -> Self {
        MemoryTableState {
            total: t.total,
            system_reserved: t.system_reserved,
            allocatable: t.allocatable,
            reserved: t.reserved,
            free: t.free,
        }
    }
}

/// The engine's memory blocks of `blocks` (read at `at`).
fn blocks_of(
    blocks: &[BlockView<'_>],
    numa_ids: NumaIds<'_>,
    at: &dyn Fn() -> String,
) -> Result<Vec<MemoryBlock>, StateError> {
    exact_vec(
        blocks.len(),
        blocks.iter().enumerate().map(|(i, b)| {
            Ok(MemoryBlock {
                numa_affinity: numa_ids.indices(&b.numa_affinity, &|| format!("{}[{i}].numaAffinity", at()))?,
                resource: b.resource.as_str().to_owned(),
                size: b.size,
            })
        }),
    )
}

impl PodView<'_> {
    /// The engine's pod (QoS recomputed from the containers; the engine
    /// takes it from the pod-level resources when it restores the pod).
    ///
    /// # Errors
    /// [`StateError`] naming the bad quantity.
    pub fn to_pod(&self) -> Result<Pod, StateError> {
        let container = |c: &ContainerView<'_>| -> Result<Container, StateError> {
            Ok(Container {
                name: c.name.as_str().to_owned(),
                requests: quantities(&c.requests).map_err(|e| e.within(c.name.as_str()))?,
                limits: quantities(&c.limits).map_err(|e| e.within(c.name.as_str()))?,
                restartable: c.restartable,
            })
        };
        let init_containers = exact_vec(self.init_containers.len(), self.init_containers.iter().map(container))?;
        let containers = exact_vec(self.containers.len(), self.containers.iter().map(container))?;
        Ok(Pod {
            namespace: self.namespace.as_str().to_owned(),
            name: self.name.as_str().to_owned(),
            uid: self.uid.as_str().to_owned(),
            qos: topoalign_model::QosClass::of_containers(&init_containers, &containers),
            init_containers,
            containers,
            overhead: quantities(&self.overhead)?,
            pod_resources: self
                .pod_resources
                .as_ref()
                .map(|r| -> Result<PodResources, StateError> {
                    Ok(PodResources {
                        requests: quantities(&r.requests).map_err(|e| e.within("podResources.requests"))?,
                        limits: quantities(&r.limits).map_err(|e| e.within("podResources.limits"))?,
                    })
                })
                .transpose()?,
        })
    }

    /// Hashes what the node holds for this pod's resources — containers,
    /// overhead, pod-level resources — and not who it is.
    pub fn hash_resources<H: Hasher>(&self, hasher: &mut H) {
        (
            &self.init_containers,
            &self.containers,
            &self.overhead,
            &self.pod_resources,
        )
            .hash(hasher);
    }
}

/// `items` in a `Vec` of exactly `len` elements, or the first error: the
/// restored node keeps these lists, and a `collect` of `Result`s, knowing
/// no length, would leave room for more (four at least, then doubling).
fn exact_vec<T, E>(len: usize, items: impl Iterator<Item = Result<T, E>>) -> Result<Vec<T>, E> {
    let mut exact = Vec::with_capacity(len);
    for item in items {
        exact.push(item?);
    }
    Ok(exact)
}

/// The amounts as a resource list, with room for exactly its entries (the
/// restored node keeps two per container).
fn quantities(texts: &Amounts<'_>) -> Result<ResourceList, StateError> {
    let mut list = ResourceList::with_capacity(texts.0.len());
    let mut failed = None;
    let parsed = texts
        .iter()
        .map_while(|(name, text)| match topoalign_k8s::parse_quantity(text.as_str()) {
            Ok(quantity) => Some((name.as_str(), quantity)),
            Err(e) => {
                failed = Some(StateError::new(name.as_str(), e));
                None
            }
        });
    // The object is remote input: names out of order or repeated (the
    // later amount kept, as JSON readers do) cost one sort, not an insert
    // each.
    fold_amounts(&mut list, parsed, str::to_owned, |kept, later| *kept = later);
    match failed {
        Some(error) => Err(error),
        None => Ok(list),
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::{Amounts, Few, Pairs, quantities};

    /// Resource names in any order read as the sorted list, a repeated name
    /// as its last amount — and 20,000 names in reverse order are put in
    /// place by one sort (an insert each would shift the whole list).
    #[test]
    fn resource_names_out_of_order_read_sorted_with_the_last_amount() {
        let amounts: Amounts<'_> =
            serde_json::from_str(r#"{"memory": "1Gi", "cpu": "2", "memory": "2Gi", "a/b": "1"}"#).expect("json");
        let list = quantities(&amounts).expect("quantities");
        let read: Vec<(&str, String)> = list.iter().map(|(name, q)| (name.as_str(), q.to_string())).collect();
        assert_eq!(
            read,
            [
                ("a/b", "1".to_owned()),
                ("cpu", "2".to_owned()),
                ("memory", "2Gi".to_owned())
            ]
        );

        let text = format!(
            "{{{}}}",
            (0..20_000)
                .rev()
                .map(|i| format!(r#""r{i:05}": "1""#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let amounts: Amounts<'_> = serde_json::from_str(&text).expect("json");
        let list = quantities(&amounts).expect("quantities");
        assert_eq!(list.len(), 20_000);
        assert!(list.iter().zip(list.iter().skip(1)).all(|((a, _), (b, _))| a < b));
    }

    /// A list held in place or not reads, compares and hashes as the `Vec`
    /// of the same JSON, and refuses what a `Vec` refuses with its words.
    #[test]
    fn a_few_reads_as_the_vec_of_the_same_json() {
        let state = std::collections::hash_map::RandomState::new();
        for text in ["[]", "[7]", "[7,8]", "[1,2,3,4,5,6]"] {
            let few: Few<u32> = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let vec: Vec<u32> = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(&*few, vec.as_slice(), "{text}");
            assert_eq!(state.hash_one(&few), state.hash_one(&vec), "{text}");
            // Read from a tree too (a size hint), as the agent reads its journal.
            let value: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let from_value: Few<u32> = serde_json::from_value(value).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(from_value, few, "{text}");
        }
        // One element held in place or in a vector: the same list.
        let one = Few::One(3u32);
        let many = Few::Many(vec![3u32]);
        assert_eq!(one, many);
        assert_eq!(state.hash_one(&one), state.hash_one(&many));
        let few_error = serde_json::from_str::<Few<u32>>("{}").err().map(|e| e.to_string());
        let vec_error = serde_json::from_str::<Vec<u32>>("{}").err().map(|e| e.to_string());
        assert!(few_error.is_some());
        assert_eq!(few_error, vec_error);
    }

    /// An object's pairs keep document order and duplicates, held in place
    /// or not.
    #[test]
    fn pairs_keep_every_pair_in_order() {
        let pairs: Pairs<String, u32> =
            serde_json::from_str(r#"{"b":1,"a":2,"b":3}"#).unwrap_or_else(|e| panic!("{e}"));
        let read: Vec<(&str, u32)> = pairs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(read, [("b", 1), ("a", 2), ("b", 3)]);
        let one: Pairs<String, u32> = serde_json::from_str(r#"{"a":2}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(one.iter().count(), 1);
        assert!(!one.is_empty());
    }
}

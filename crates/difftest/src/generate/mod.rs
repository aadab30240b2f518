//! The random scenario generator: a seed and a kubelet release name one
//! scenario (docs/scenario.md), the same on every machine and with every
//! build. The machine depends on the seed only, so one seed gives the same
//! node under every release; the `kubelet:` block and the pods follow the
//! release (its options, gates and defaults). Now and then the scenario's
//! quantities are then respelled (`spelling.rs`: every form Kubernetes
//! accepts, listed in its docs), from a random stream of their own, so
//! that a seed the step leaves alone names the scenario it named before.
//! Restarts are put between the events the same way (`restart.rs`), as is
//! a pod-level `spec.resources` the API server drops where the
//! `PodLevelResources` gate is off (`pod_level.rs`), and,
//! before either, the resizes of the releases whose pod stream draws none
//! (`resize.rs`: 1.32-1.35).

mod kubelet;
mod machine;
mod pod_level;
mod pods;
mod resize;
mod restart;
mod spelling;

use topoalign_scenario::Scenario;

use crate::release::Release;
use crate::rng::Rng;

/// One generated scenario and what it exercises.
#[derive(Clone, Debug)]
pub struct Generated {
    pub scenario: Scenario,
    /// What the scenario contains (`numa-4`, `cpu-option:full-pcpus-only`,
    /// `pod:PodLevel`, `sidecar`, ...), sorted, for coverage counts and for
    /// picking vectors.
    pub tags: Vec<String>,
}

/// The scenario of `seed` for `release`.
pub fn generate(seed: u64, release: Release) -> Generated {
    generate_profiled(seed, release, Profile::Standard)
}

/// The scenario of `seed` for `release` under `profile`.
pub fn generate_profiled(seed: u64, release: Release, profile: Profile) -> Generated {
    generate_with(seed, release, LaterSteps::All, profile)
}

/// Which machines and how costly a pod may be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Every machine size (1-16 NUMA nodes, weighted towards the common
    /// ones) and every policy; pods made cheaper past
    /// [`pods::MERGE_BUDGET`] hint permutations.
    #[default]
    Standard,
    /// Big machines only (9, 10, 12 or 16 NUMA nodes, past the kubelet's
    /// default limit of 8), an aligning topology policy always, and a merge
    /// budget [`pods::BIG_MERGE_BUDGET`] ten times the standard one: CPU,
    /// memory, huge pages and devices aligned together where the kubelet's
    /// merge can still enumerate them (all of them under single-numa-node;
    /// three lists on 9 NUMA nodes under best-effort and restricted). The
    /// long background ledger (testdata/difftest-big-ledger.tsv); its
    /// scenarios take the oracle minutes, not milliseconds.
    Big,
    /// Wide machines: 65 to 128 NUMA nodes of one or two small cores (or
    /// none), numbered densely, sparsely up to id 1023, or with a block of
    /// CPU-less nodes (CXL-like memory with high ids, GPU-memory-like nodes
    /// after the CPU nodes); devices on the high nodes. Topology policy
    /// `none` (the only one the kubelet runs past 64 nodes) but now and
    /// then another one, which the kubelet refuses at start-up
    /// (max-allowable-numa-nodes is never raised); memory manager `None`
    /// only (the Static one crashes the kubelet at the first Guaranteed
    /// container there). Tagged `numa-wide`. Its ledger is
    /// testdata/difftest-wide-ledger.tsv.
    Wide,
}

impl Profile {
    /// Its name in a ledger's options column (`profile=big`), none for the
    /// standard profile.
    pub fn ledger_option(self) -> Option<&'static str> {
        match self {
            Profile::Standard => None,
            Profile::Big => Some("profile=big"),
            Profile::Wide => Some("profile=wide"),
        }
    }
}

/// The steps after the base scenario, each from a random stream of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LaterSteps {
    /// None: the scenario the seed named before the steps existed.
    None,
    /// The resizes of 1.32-1.35 only (the respelling test's scenario
    /// before respelling).
    #[cfg(test)]
    Resizes,
    /// Resizes, then respelling (its test compares it with `Resizes`).
    #[cfg(test)]
    Respelling,
    /// Resizes, respelling, then restarts.
    All,
}

impl LaterSteps {
    fn respells(self) -> bool {
        match self {
            LaterSteps::None => false,
            #[cfg(test)]
            LaterSteps::Resizes => false,
            _ => true,
        }
    }
}

/// The scenario of `seed` for `release`, with the later steps (resizes,
/// respelling, restarts) or without them (tests: without them every
/// scenario is the one the seed named before the steps existed).
fn generate_with(seed: u64, release: Release, steps: LaterSteps, profile: Profile) -> Generated {
    let mut root = Rng::new(seed);
    let mut machine_rng = root.fork(1);
    let mut kubelet_rng = root.fork(2);
    let mut pods_rng = root.fork(3);
    // Its own stream: what the step draws moves nothing above.
    let mut spelling_rng = root.fork(4);
    // Likewise for the restarts.
    let mut restart_rng = root.fork(5);
    // And for the resizes of the releases whose pod stream draws none.
    let mut resize_rng = root.fork(6);
    // And for the pod-level resources an API server drops.
    let mut pod_level_rng = root.fork(7);
    // And for the exclusive-CPU resize gate of 1.32/1.33.
    let mut exclusive_rng = root.fork(8);
    // And for the sidecar resizes of 1.32/1.33.
    let mut sidecar_rng = root.fork(9);
    // And for the resize amounts written finer than a thousandth.
    let mut sub_milli_rng = root.fork(10);
    let mut tags = Vec::new();
    let (topology, facts) = machine::machine(&mut machine_rng, profile, &mut tags);
    let (kubelet, kubelet_facts) = kubelet::kubelet(&mut kubelet_rng, release, profile, &facts, &mut tags);
    let pod_tags = tags.len();
    let events = pods::events(&mut pods_rng, &facts, &kubelet_facts, &mut tags);
    let mut scenario = Scenario {
        topology,
        kubelet,
        events,
        dra: None,
    };
    if steps != LaterSteps::None {
        resize::add_resizes(
            &mut resize_rng,
            release,
            &mut scenario,
            &facts,
            &kubelet_facts,
            pod_tags,
            &mut tags,
        );
        resize::add_sidecar_resizes(
            &mut sidecar_rng,
            release,
            &mut scenario,
            &facts,
            &kubelet_facts,
            &mut tags,
        );
        resize::add_exclusive_cpus_gate(&mut exclusive_rng, release, &mut scenario, &kubelet_facts, &mut tags);
        resize::drop_init_memory_by_status(release, &mut scenario, &facts, &kubelet_facts, &mut tags);
        resize::sub_milli_amounts(&mut sub_milli_rng, &mut scenario, &mut tags);
    }
    if steps.respells() {
        spelling::respell(&mut spelling_rng, &mut scenario, &mut tags);
    }
    if steps == LaterSteps::All {
        pod_level::add_dropped(
            &mut pod_level_rng,
            release,
            &mut scenario,
            &facts,
            &kubelet_facts,
            &mut tags,
        );
        restart::add_restarts(&mut restart_rng, profile, &mut scenario, &mut tags);
    }
    tags.sort();
    tags.dedup();
    Generated { scenario, tags }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::RELEASES;

    fn text(g: &Generated) -> String {
        serde_json::to_string(&g.scenario).expect("scenarios serialise")
    }

    #[test]
    fn a_seed_names_one_scenario() {
        for seed in 0..50 {
            assert_eq!(text(&generate(seed, Release(35))), text(&generate(seed, Release(35))));
        }
        assert_ne!(text(&generate(1, Release(35))), text(&generate(2, Release(35))));
    }

    #[test]
    fn the_machine_depends_on_the_seed_only() {
        let a = generate(9, Release(32));
        let b = generate(9, Release(37));
        assert_eq!(
            serde_json::to_value(&a.scenario.topology).expect("serialises"),
            serde_json::to_value(&b.scenario.topology).expect("serialises")
        );
        assert_eq!(a.scenario.kubelet["kubeletVersion"], "1.32");
        assert_eq!(b.scenario.kubelet["kubeletVersion"], "1.37");
    }

    /// Every scenario reads back as a scenario whose machine builds, and
    /// its pods pass the engine's API-server validation: a refusal in a
    /// run is then the kubelet's, not the generator's. Except amounts past
    /// 64 bits (`quantity-huge`), which the API server accepts and the
    /// engine refuses (its pod validation's `TooLarge`).
    #[test]
    fn generated_scenarios_are_valid_input() {
        for release in RELEASES {
            for seed in 0..300 {
                let g = generate(seed, release);
                let back = Scenario::parse(&text(&g)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                back.topology
                    .to_machine()
                    .unwrap_or_else(|e| panic!("seed {seed} {release:?}: {e}"));
                let huge = g.tags.iter().any(|t| t == "quantity-huge");
                for (i, event) in back.events.iter().enumerate() {
                    if let Some(pod) = &event.add
                        && let Err(e) = topoalign_k8s::pod_from_value_created(
                            pod,
                            "00000000-0000-0000-0000-000000000001",
                            topoalign_k8s::PodLevelField::of_kubelet(&back.kubelet),
                        )
                    {
                        let too_large = e
                            .to_string()
                            .contains("is too large: Kubernetes holds resource amounts");
                        assert!(huge && too_large, "seed {seed} {release:?} event {i}: {e}: {pod}");
                    }
                }
            }
        }
    }

    /// Without the respelling step every seed names the scenario it named
    /// before the step existed (FNV-1a of the JSON of seeds 0..200 and
    /// 1,100,000..1,100,100 — where the long runs of the ledger start — of
    /// every release, taken at commit 6477bb1, the generator before the
    /// step). A change to the generator that is meant to change scenarios
    /// updates the number (and leaves the ledger's seeds meaning other
    /// scenarios); the respelling step never may.
    #[test]
    fn without_the_respelling_step_seeds_name_their_old_scenarios() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for release in RELEASES {
            for seed in (0..200).chain(1_100_000..1_100_100) {
                for byte in text(&generate_with(seed, release, LaterSteps::None, Profile::Standard)).bytes() {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
        assert_eq!(hash, 0x0e58_677d_231a_6a4e, "the scenarios of old seeds changed");
    }

    /// The big profile makes only machines past 8 NUMA nodes, always with
    /// an aligning policy, and pods that align CPU, memory, huge pages and
    /// devices at once on them.
    #[test]
    fn the_big_profile_makes_big_machines_with_everything_aligned() {
        let mut all_resources = 0;
        let mut numa_sizes = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let g = generate_profiled(seed, Release(37), Profile::Big);
            let numa = g
                .tags
                .iter()
                .find_map(|t| t.strip_prefix("numa-")?.parse::<usize>().ok())
                .expect("a numa-N tag");
            assert!(numa > 8, "seed {seed}: {numa} NUMA nodes");
            numa_sizes.insert(numa);
            let policy = g.scenario.kubelet["topologyManagerPolicy"].as_str();
            assert!(
                matches!(policy, Some("best-effort" | "restricted" | "single-numa-node")),
                "seed {seed}: policy {policy:?}"
            );
            all_resources += usize::from(g.tags.iter().any(|t| t == "all-resources"));
        }
        assert_eq!(numa_sizes.into_iter().collect::<Vec<_>>(), [9, 10, 12, 16]);
        assert!(
            all_resources >= 10,
            "only {all_resources} of 200 scenarios align everything"
        );
    }

    /// The wide profile: a seed names one scenario; every machine has 65
    /// to 128 NUMA nodes (ids at most 1023, always some past 63: it does
    /// not fit the kubelet's masks) and builds with its ids; the topology
    /// policy is `none` (or unset) but for a few start-up refusals, where
    /// max-allowable-numa-nodes stays below the machine's count; the
    /// memory manager is never Static, not after a restart either; the
    /// pods pass the API server's validation; devices name existing ids,
    /// some of them past 63; every layout of ids comes.
    #[test]
    fn the_wide_profile_makes_machines_past_64_numa_nodes_under_policy_none() {
        let (mut none, mut refused, mut high_devices, mut restarts) = (0, 0, 0, 0);
        let mut seen = std::collections::BTreeSet::new();
        for release in [Release(32), Release(37)] {
            for seed in 0..150 {
                let g = generate_profiled(seed, release, Profile::Wide);
                assert_eq!(text(&g), text(&generate_profiled(seed, release, Profile::Wide)));
                assert!(g.tags.iter().any(|t| t == "numa-wide"), "seed {seed}: {:?}", g.tags);
                seen.extend(g.tags.iter().filter(|t| t.starts_with("numa-")).cloned());
                let back = Scenario::parse(&text(&g)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let machine = back
                    .topology
                    .to_machine_with_numa_labels()
                    .unwrap_or_else(|e| panic!("seed {seed} {release:?}: {e}"));
                let numa = machine.numa_nodes().len();
                assert!((65..=128).contains(&numa), "seed {seed}: {numa} NUMA nodes");
                assert!(!machine.fits_numa_masks(), "seed {seed}");
                let ids: Vec<usize> = back.topology.numa_nodes.iter().map(|n| n.id).collect();
                assert!(ids.iter().all(|&id| id <= 1023), "seed {seed}: {ids:?}");
                for device in back.topology.devices.values().flatten() {
                    assert!(device.numa.iter().all(|n| ids.contains(n)), "seed {seed}: {device:?}");
                    high_devices += usize::from(device.numa.iter().any(|&n| n >= 64));
                }
                let kubelet = &back.kubelet;
                match kubelet.get("topologyManagerPolicy").and_then(serde_json::Value::as_str) {
                    None | Some("none") => none += 1,
                    Some(policy) => {
                        refused += 1;
                        let limit = kubelet
                            .pointer("/topologyManagerPolicyOptions/max-allowable-numa-nodes")
                            .and_then(serde_json::Value::as_str)
                            .map(|v| v.parse::<usize>().expect("a number"));
                        assert!(limit.is_none_or(|l| l < numa), "seed {seed}: {policy} with {limit:?}");
                    }
                }
                let mut memory_policies = vec![kubelet.get("memoryManagerPolicy")];
                memory_policies.extend(
                    back.events
                        .iter()
                        .filter_map(|e| e.restart.as_ref())
                        .map(|r| r.kubelet.get("memoryManagerPolicy")),
                );
                for policy in memory_policies.into_iter().flatten() {
                    assert_ne!(policy, "Static", "seed {seed} {release:?}");
                }
                restarts += usize::from(back.events.iter().any(|e| e.restart.is_some()));
                let huge = g.tags.iter().any(|t| t == "quantity-huge");
                for (i, event) in back.events.iter().enumerate() {
                    if let Some(pod) = &event.add
                        && let Err(e) = topoalign_k8s::pod_from_value_created(
                            pod,
                            "00000000-0000-0000-0000-000000000001",
                            topoalign_k8s::PodLevelField::of_kubelet(&back.kubelet),
                        )
                    {
                        assert!(huge, "seed {seed} {release:?} event {i}: {e}: {pod}");
                    }
                }
            }
        }
        for wanted in [
            "numa-ids:dense",
            "numa-ids:sparse",
            "numa-ids:cxl",
            "numa-ids:gpu-memory",
            "numa-cpuless",
        ] {
            assert!(seen.contains(wanted), "no scenario has {wanted}; seen {seen:?}");
        }
        assert!(none > 200 && refused > 10, "{none} under none, {refused} refused");
        assert!(
            high_devices > 50 && restarts > 10,
            "{high_devices} devices past 63, {restarts} restarts"
        );
    }

    /// The generator reaches what it promises, over a few hundred seeds.
    #[test]
    fn coverage_over_a_few_hundred_seeds() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..400 {
            seen.extend(generate(seed, Release(36)).tags);
        }
        for wanted in [
            "numa-1",
            "numa-16",
            "smt",
            "hybrid",
            "offline-cpus",
            "uncore-group",
            "hugepages",
            "hugepages-request",
            "devices-none",
            "devices-subset",
            "device-request",
            "policy:best-effort",
            "policy:single-numa-node",
            "scope:pod",
            "cpu-option:prefer-align-cpus-by-uncorecache",
            "cpu-option:strict-cpu-reservation",
            "topology-option:max-allowable-numa-nodes",
            "gate:PodLevelResourceManagers=true",
            "pod:PodLevel",
            "pod:GuaranteedFractional",
            "sidecar",
            "init",
            "delete",
            "delete-unknown",
            "quantity-spelling",
        ] {
            assert!(seen.contains(wanted), "no scenario has {wanted}; seen {seen:?}");
        }
    }
}

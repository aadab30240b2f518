//! The kubelet's `cpu_assignment_test.go` tables, on the same named
//! machines, plus the invariants every answer must keep.

use proptest::prelude::*;
use topoalign_model::CpuSet;

use super::*;
use crate::machines::*;

fn set(text: &str) -> CpuSet {
    CpuSet::parse(text).unwrap()
}

fn acc<'t>(topology: &'t CpuTopology, available: &str) -> Accumulator<'t> {
    Accumulator::new(topology, &set(available), 0, CpuSortingStrategy::Packed)
}

fn free_groups(acc: &Accumulator<'_>, level: Level) -> Vec<u32> {
    acc.sorted(level)
        .into_iter()
        .filter(|&id| acc.is_free(level, id))
        .collect()
}

#[test]
fn free_sockets() {
    let cases: &[(&str, CpuTopology, &str, &[u32])] = &[
        ("single socket HT, 1 socket free", single_socket_ht(), "0-7", &[0]),
        ("single socket HT, 0 sockets free", single_socket_ht(), "1-7", &[]),
        ("dual socket HT, 2 sockets free", dual_socket_ht(), "0-11", &[0, 1]),
        ("dual socket HT, 1 socket free", dual_socket_ht(), "0-9,11", &[1]),
        ("dual socket HT, 0 sockets free", dual_socket_ht(), "0,2-9,11", &[]),
        (
            "multi numa per socket, 2 free",
            dual_socket_multi_numa_per_socket_ht(),
            "0-79",
            &[0, 1],
        ),
        (
            "multi numa per socket, 1 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-79",
            &[1],
        ),
        (
            "multi numa per socket, 0 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-78",
            &[],
        ),
        (
            "multi socket per numa, 4 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-79",
            &[0, 1, 2, 3],
        ),
        (
            "multi socket per numa, 3 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-19,21-79",
            &[0, 1, 3],
        ),
        (
            "multi socket per numa, 2 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-59,61-78",
            &[0, 1],
        ),
        (
            "multi socket per numa, 1 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "1-19,21-38,41-60,61-78",
            &[1],
        ),
        (
            "multi socket per numa, 0 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-40,42-49,51-68,71-79",
            &[],
        ),
    ];
    for (name, topology, available, expected) in cases {
        let mut got = free_groups(&acc(topology, available), Level::Socket);
        got.sort_unstable();
        assert_eq!(&got, expected, "{name}");
    }
}

#[test]
fn free_numa_nodes_in_order() {
    let cases: &[(&str, CpuTopology, &str, &[u32])] = &[
        ("single socket HT, 1 free", single_socket_ht(), "0-7", &[0]),
        ("single socket HT, 0 free", single_socket_ht(), "1-7", &[]),
        ("dual socket HT, 2 free", dual_socket_ht(), "0-11", &[0, 1]),
        ("dual socket HT, 1 free", dual_socket_ht(), "0-9,11", &[1]),
        (
            "multi numa per socket, 4 free",
            dual_socket_multi_numa_per_socket_ht(),
            "0-79",
            &[0, 1, 2, 3],
        ),
        (
            "multi numa per socket, 3 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-79",
            &[1, 2, 3],
        ),
        (
            "multi numa per socket, 2 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-9,11-79",
            &[2, 3],
        ),
        (
            "multi numa per socket, 1 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-9,11-59,61-79",
            &[3],
        ),
        (
            "multi numa per socket, 0 free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-9,11-59,61-78",
            &[],
        ),
        (
            "multi socket per numa, 2 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-79",
            &[0, 1],
        ),
        (
            "multi socket per numa, 1 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-9,11-79",
            &[1],
        ),
        (
            "multi socket per numa, 0 free",
            fake_multi_socket_dual_socket_per_numa_ht(),
            "0-9,11-59,61-79",
            &[],
        ),
        // Sockets and NUMA nodes together: socket 0 is not free, NUMA 2 and 3 are.
        (
            "1 socket / 2 NUMA free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-9,11-79",
            &[2, 3],
        ),
        (
            "0 socket / 2 NUMA free",
            dual_socket_multi_numa_per_socket_ht(),
            "1-59,61-79",
            &[1, 3],
        ),
    ];
    for (name, topology, available, expected) in cases {
        assert_eq!(&free_groups(&acc(topology, available), Level::Numa), expected, "{name}");
    }
}

#[test]
fn free_cores_in_order() {
    let cases: &[(&str, CpuTopology, &str, &[u32])] = &[
        (
            "single socket HT, 4 cores free",
            single_socket_ht(),
            "0-7",
            &[0, 1, 2, 3],
        ),
        (
            "single socket HT, 3 cores free",
            single_socket_ht(),
            "0-2,4-6",
            &[0, 1, 2],
        ),
        (
            "single socket HT, 3 free, 1 partial",
            single_socket_ht(),
            "0-6",
            &[0, 1, 2],
        ),
        ("single socket HT, 0 cores free", single_socket_ht(), "", &[]),
        ("single socket HT, 4 partial", single_socket_ht(), "0-3", &[]),
        (
            "dual socket HT, 6 cores free",
            dual_socket_ht(),
            "0-11",
            &[0, 2, 4, 1, 3, 5],
        ),
        (
            "dual socket HT, 5 free (1 used on socket 0)",
            dual_socket_ht(),
            "1-5,7-11",
            &[2, 4, 1, 3, 5],
        ),
        (
            "dual socket HT, 4 free (1 used on each)",
            dual_socket_ht(),
            "2-5,8-11",
            &[2, 4, 3, 5],
        ),
    ];
    for (name, topology, available, expected) in cases {
        assert_eq!(&free_groups(&acc(topology, available), Level::Core), expected, "{name}");
    }
}

#[test]
fn free_cpus_in_order() {
    let cases: &[(&str, CpuTopology, &str, &[u32])] = &[
        (
            "single socket HT, 8 free",
            single_socket_ht(),
            "0-7",
            &[0, 4, 1, 5, 2, 6, 3, 7],
        ),
        ("single socket HT, 5 free", single_socket_ht(), "3-7", &[4, 5, 6, 3, 7]),
        (
            "dual socket HT, 12 free",
            dual_socket_ht(),
            "0-11",
            &[0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
        ),
        (
            "dual socket HT, 11 free",
            dual_socket_ht(),
            "1-11",
            &[6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
        ),
        (
            "dual socket HT, 10 free",
            dual_socket_ht(),
            "1-5,7-11",
            &[2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
        ),
        (
            "triple socket HT, 12 free",
            triple_socket_ht(),
            "0-3,6-13",
            &[12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11],
        ),
    ];
    for (name, topology, available, expected) in cases {
        assert_eq!(&acc(topology, available).sorted_cpus(), expected, "{name}");
    }
}

#[test]
fn take_counts_what_it_takes() {
    let topology = single_socket_ht();
    let mut a = Accumulator::new(&topology, &set("0-2"), 4, CpuSortingStrategy::Packed);
    a.take(&set("0"));
    a.take(&set("1"));
    assert!(!a.is_satisfied());
    assert!(a.is_failed(), "2 more needed, 1 free");
    assert_eq!(a.needed, 2);
    assert_eq!(a.free, set("2"));
    assert_eq!(a.result, set("0-1"));
}

type Case = (
    &'static str,
    CpuTopology,
    StaticPolicyOptions,
    &'static str,
    i64,
    Result<&'static str, &'static str>,
);

fn plain() -> StaticPolicyOptions {
    StaticPolicyOptions::default()
}

/// `commonTakeByTopologyTestCases`.
fn common_cases() -> Vec<Case> {
    vec![
        (
            "take more cpus than are available from single socket with HT",
            single_socket_ht(),
            plain(),
            "0,2,4,6",
            5,
            Err("not enough cpus available to satisfy request: requested=5, available=4"),
        ),
        (
            "take zero cpus from single socket with HT",
            single_socket_ht(),
            plain(),
            "0-7",
            0,
            Ok(""),
        ),
        (
            "take one cpu from single socket with HT",
            single_socket_ht(),
            plain(),
            "0-7",
            1,
            Ok("0"),
        ),
        (
            "take one cpu from single socket with HT, some cpus are taken",
            single_socket_ht(),
            plain(),
            "1,3,5-7",
            1,
            Ok("6"),
        ),
        (
            "take two cpus from single socket with HT",
            single_socket_ht(),
            plain(),
            "0-7",
            2,
            Ok("0,4"),
        ),
        (
            "take all cpus from single socket with HT",
            single_socket_ht(),
            plain(),
            "0-7",
            8,
            Ok("0-7"),
        ),
        (
            "take two cpus from single socket with HT, only one core totally free",
            single_socket_ht(),
            plain(),
            "0-3,6",
            2,
            Ok("2,6"),
        ),
        (
            "take a socket of cpus from dual socket with HT",
            dual_socket_ht(),
            plain(),
            "0-11",
            6,
            Ok("0,2,4,6,8,10"),
        ),
        (
            "take a socket of cpus from dual socket with multi-numa-per-socket with HT",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "0-79",
            40,
            Ok("0-19,40-59"),
        ),
        (
            "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "0-79",
            20,
            Ok("0-9,40-49"),
        ),
        (
            "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "10-39,50-79",
            20,
            Ok("10-19,50-59"),
        ),
        (
            "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "0-79",
            60,
            Ok("0-29,40-69"),
        ),
        (
            "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "1-39,41-79",
            60,
            Ok("10-39,50-79"),
        ),
    ]
}

fn uncore() -> StaticPolicyOptions {
    StaticPolicyOptions {
        prefer_align_by_uncore_cache: true,
        ..Default::default()
    }
}

fn check(
    cases: Vec<Case>,
    take: impl Fn(&CpuTopology, &StaticPolicyOptions, &CpuSet, i64) -> Result<CpuSet, TakeError>,
) {
    for (name, topology, options, available, count, expected) in cases {
        let got = take(&topology, &options, &set(available), count);
        match expected {
            Ok(cpus) => assert_eq!(got, Ok(set(cpus)), "{name}"),
            Err(text) => assert_eq!(got.map_err(|e| e.to_string()), Err(text.to_string()), "{name}"),
        }
    }
}

#[test]
fn numa_packed() {
    let mut cases = common_cases();
    cases.extend(vec![
        (
            "take one cpu from dual socket with HT - core from Socket 0",
            dual_socket_ht(),
            plain(),
            "1-5,7-11",
            1,
            Ok("2"),
        ),
        (
            "allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second NUMA node",
            dual_socket_ht(),
            plain(),
            "0-11",
            8,
            Ok("0,6,2,8,4,10,1,7"),
        ),
        (
            "allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the fourth NUMA node",
            dual_socket_multi_numa_per_socket_ht(),
            plain(),
            "0-79",
            64,
            Ok("0-29,40-69,30,31,70,71"),
        ),
        (
            "take cpus from two full UncoreCaches and partial from a single UncoreCache",
            uncore_single_socket_no_smt(),
            uncore(),
            "1-15",
            10,
            Ok("1,2,4-11"),
        ),
        (
            "take one cpu from dual socket with HT - core from Socket 0 (uncore)",
            dual_socket_ht(),
            uncore(),
            "1-5,7-11",
            1,
            Ok("2"),
        ),
        (
            "take first available UncoreCache from first socket",
            uncore_dual_socket_no_smt(),
            uncore(),
            "0-15",
            4,
            Ok("0-3"),
        ),
        (
            "take all available UncoreCache from first socket",
            uncore_dual_socket_no_smt(),
            uncore(),
            "2-15",
            6,
            Ok("2-7"),
        ),
        (
            "take first available UncoreCache from second socket",
            uncore_dual_socket_no_smt(),
            uncore(),
            "8-15",
            4,
            Ok("8-11"),
        ),
        (
            "take first available UncoreCache from available NUMA",
            uncore_single_socket_multi_numa(),
            uncore(),
            "3,4-8,12",
            2,
            Ok("4-5"),
        ),
        (
            "take cpus from best available UncoreCache group of multi uncore cache single socket - SMT enabled",
            uncore_single_socket_smt(),
            uncore(),
            "2-3,10-11,4-7,12-15",
            6,
            Ok("4-6,12-14"),
        ),
        (
            "take cpus from multiple UncoreCache of single socket - SMT enabled",
            uncore_single_socket_smt(),
            uncore(),
            "1-7,9-15",
            10,
            Ok("4-7,12-15,1,9"),
        ),
    ]);
    check(cases, take_by_topology);
}

#[test]
fn spread_over_cores() {
    let spread = || StaticPolicyOptions {
        distribute_cpus_across_cores: true,
        ..Default::default()
    };
    let cases: Vec<Case> = vec![
        (
            "single socket HT, 3 cpus",
            single_socket_ht(),
            spread(),
            "0-7",
            3,
            Ok("0-2"),
        ),
        (
            "dual socket HT, 2 cpus",
            dual_socket_ht(),
            spread(),
            "0-11",
            2,
            Ok("0,2"),
        ),
        (
            "dual socket HT, 3 cpus",
            dual_socket_ht(),
            spread(),
            "0-11",
            3,
            Ok("0,2,4"),
        ),
        (
            "dual socket HT, 6 cpus",
            dual_socket_ht(),
            spread(),
            "0-11",
            6,
            Ok("0,2,4,6,8,10"),
        ),
        (
            "dual socket HT, 8 cpus",
            dual_socket_ht(),
            spread(),
            "0-11",
            8,
            Ok("0,2,4,6,8,10,1,3"),
        ),
        (
            "dual socket without HT, 2 cpus",
            dual_socket_no_ht(),
            spread(),
            "0-7",
            2,
            Ok("0-1"),
        ),
        (
            "dual socket with multi numa per socket and HT, 8 cpus",
            dual_socket_multi_numa_per_socket_ht(),
            spread(),
            "0-79",
            8,
            Ok("0-7"),
        ),
    ];
    check(cases, take_by_topology);
}

#[test]
fn numa_distributed() {
    let distributed = |group_size: usize| {
        move |topology: &CpuTopology, _: &StaticPolicyOptions, available: &CpuSet, count: i64| {
            take_numa_distributed(
                topology,
                available,
                count,
                group_size,
                CpuSortingStrategy::Packed,
                false,
            )
        }
    };
    // Every common case holds for group size 1.
    let mut cases = common_cases();
    let multi = dual_socket_multi_numa_per_socket_ht;
    cases.extend(vec![
        (
            "allocate 4 full cores with 2 distributed across each NUMA node",
            dual_socket_ht(),
            plain(),
            "0-11",
            8,
            Ok("0,6,2,8,1,7,3,9"),
        ),
        (
            "allocate 32 full cores with 8 distributed across each NUMA node",
            multi(),
            plain(),
            "0-79",
            64,
            Ok("0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
        ),
        (
            "allocate 24 full cores with 8 distributed across the first 3 NUMA nodes",
            multi(),
            plain(),
            "0-79",
            48,
            Ok("0-7,10-17,20-27,40-47,50-57,60-67"),
        ),
        (
            "allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)",
            multi(),
            plain(),
            "1-29,32-39,41-69,72-79",
            48,
            Ok("1-8,10-17,20-27,41-48,50-57,60-67"),
        ),
        (
            "allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)",
            multi(),
            plain(),
            "2-29,31-39,42-69,71-79",
            48,
            Ok("10-17,20-27,31-38,50-57,60-67,71-78"),
        ),
        (
            "allocate 8 full cores with 2 distributed across each NUMA node",
            multi(),
            plain(),
            "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71",
            16,
            Ok("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
        ),
        (
            "take one cpu from dual socket with HT - core from Socket 0",
            dual_socket_ht(),
            plain(),
            "1-5,7-11",
            1,
            Ok("1"),
        ),
        (
            "allocate 13 full cores distributed across the first 2 NUMA nodes",
            multi(),
            plain(),
            "0-79",
            26,
            Ok("0-6,10-16,40-45,50-55"),
        ),
        (
            "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1",
            multi(),
            plain(),
            "0-79",
            62,
            Ok("0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
        ),
        (
            "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)",
            multi(),
            plain(),
            "0-8,10-18,20-39,40-48,50-58,60-79",
            62,
            Ok("0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
        ),
        (
            "ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request",
            multi(),
            plain(),
            "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76",
            34,
            Ok("0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
        ),
        (
            "ensure previous failure encountered on live machine has been fixed (1/1)",
            dual_socket_multi_numa_per_socket_ht_large(),
            plain(),
            "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255",
            28,
            Ok("43-47,75-79,96,101-105,171-174,203-206,229-232"),
        ),
    ]);
    check(cases, distributed(1));

    let cases: Vec<Case> = vec![
        (
            "take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2",
            dual_socket_ht(),
            plain(),
            "1-5,7-11",
            1,
            Ok("2"),
        ),
        (
            "allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)",
            multi(),
            plain(),
            "0-79",
            26,
            Ok("0-6,10-15,40-46,50-55"),
        ),
        (
            "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)",
            multi(),
            plain(),
            "0-79",
            62,
            Ok("0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
        ),
        (
            "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)",
            multi(),
            plain(),
            "0-8,10-18,20-39,40-48,50-58,60-79",
            62,
            Ok("0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
        ),
    ];
    check(cases, distributed(2));
}

#[test]
fn go_slices_alias_like_go() {
    // Combinations of 4 share the backing array of their 3-prefix: a
    // combination kept from an earlier call shows the last element written.
    let mut kept: Vec<(Vec<u32>, GoSlice)> = Vec::new();
    iterate_combinations(&[0, 1, 2, 3, 4], 4, &mut |combo| {
        kept.push((combo.contents(), combo.clone()));
        LoopControl::Continue
    });
    let seen: Vec<Vec<u32>> = kept.iter().map(|(v, _)| v.clone()).collect();
    assert_eq!(
        seen,
        vec![
            vec![0, 1, 2, 3],
            vec![0, 1, 2, 4],
            vec![0, 1, 3, 4],
            vec![0, 2, 3, 4],
            vec![1, 2, 3, 4]
        ]
    );
    assert_eq!(kept[0].1.contents(), vec![0, 1, 2, 4], "overwritten by its sibling");
    assert_eq!(kept[2].1.contents(), vec![0, 1, 3, 4], "fresh array: prefix changed");
    // Up to three elements every combination gets its own array.
    let mut pairs = Vec::new();
    iterate_combinations(&[5, 6, 7], 2, &mut |combo| {
        pairs.push(combo.clone());
        LoopControl::Continue
    });
    let pairs: Vec<Vec<u32>> = pairs.iter().map(GoSlice::contents).collect();
    assert_eq!(pairs, vec![vec![5, 6], vec![5, 7], vec![6, 7]]);
}

#[test]
fn balance_is_rounded_like_the_kubelet() {
    assert_eq!(standard_deviation([2i64, 4, 4, 4, 5, 5, 7, 9].iter()), 2.0);
    assert_eq!(standard_deviation([1i64, 2].iter()), 0.5);
    assert_eq!(standard_deviation([0i64, 0, 1].iter()), 0.471);
}

fn any_options() -> impl Strategy<Value = StaticPolicyOptions> {
    (any::<bool>(), 0..4u8).prop_map(|(full, mode)| StaticPolicyOptions {
        full_pcpus_only: full,
        distribute_cpus_across_numa: mode == 1,
        distribute_cpus_across_cores: mode == 2 && !full,
        prefer_align_by_uncore_cache: mode == 3,
        ..Default::default()
    })
}

proptest! {
    /// On regular machines every success is exactly `count` CPUs out of the
    /// free ones, and a failure means there were too few.
    #[test]
    fn takes_exactly_what_is_asked_from_what_is_free(
        machine_index in 0usize..5,
        free in proptest::collection::btree_set(0u32..80, 0..80),
        count in 0i64..40,
        options in any_options(),
    ) {
        let topology = [
            dual_socket_multi_numa_per_socket_ht(),
            fake_multi_socket_dual_socket_per_numa_ht(),
            dual_socket_ht(),
            uncore_single_socket_smt(),
            uncore_dual_socket_no_smt(),
        ][machine_index].clone();
        let available: CpuSet = free.into_iter().filter(|&c| topology.cpu(c).is_some()).collect();
        match take_by_topology(&topology, &options, &available, count) {
            Ok(cpus) => {
                prop_assert_eq!(cpus.len() as i64, count);
                prop_assert!(cpus.is_subset(&available));
            }
            Err(e) => prop_assert!(count > available.len() as i64, "{e}"),
        }
    }
}

/// Regression (kubelet quirk, reproduced on purpose): with four or more
/// NUMA nodes in a combination, the kubelet remembers its best combination
/// in a slice that later combinations overwrite. On an idle 8-node EPYC, 100
/// CPUs spread over 4 nodes: {0,1,2,3} is found first and never beaten
/// (every 4-combination balances equally), but the remembered slice ends as
/// {0,1,2,7}, the last combination with the same 3-prefix — and that is
/// where the kubelet takes the CPUs from.
#[test]
fn numa_distribution_uses_the_kubelets_overwritten_combination() {
    let topology = dual_socket_multi_numa_per_socket_ht_large();
    let got = take_numa_distributed(
        &topology,
        topology.all_cpus(),
        100,
        1,
        CpuSortingStrategy::Packed,
        false,
    );
    assert_eq!(got, Ok(set("0-12,16-28,32-44,112-124,128-139,144-155,160-171,240-251")));
}

/// v1.34 changed how a part of an uncore cache serves an odd request on an
/// SMT machine: the cores needed are rounded up and the highest CPU of the
/// last one is left out, so 3 CPUs can come from one cache. Before, 3 CPUs
/// needed "one core" of a cache, never enough, and the packed fallback chose.
/// Machine: 8 cores, siblings N and N+8; cache 0 = cores 0-3 (one CPU of each
/// free: 1-3 and 8), cache 1 = cores 4-7 (all free).
#[test]
fn partial_uncore_cache_for_an_odd_request_from_v1_34() {
    let options = |odd_partial: bool| StaticPolicyOptions {
        prefer_align_by_uncore_cache: true,
        partial_uncore_takes_odd_requests: odd_partial,
        ..Default::default()
    };
    let cases: Vec<Case> = vec![
        (
            "v1.34: cores 4-5 of cache 1, without 13",
            uncore_single_socket_smt(),
            options(true),
            "1-3,8,4-7,12-15",
            3,
            Ok("4-5,12"),
        ),
        (
            "v1.32/v1.33: no cache part fits; whole core 4, then the CPU alone on its core",
            uncore_single_socket_smt(),
            options(false),
            "1-3,8,4-7,12-15",
            3,
            Ok("4,8,12"),
        ),
        (
            "v1.34: an even request is unchanged",
            uncore_single_socket_smt(),
            options(true),
            "1-3,8,4-7,12-15",
            2,
            Ok("4,12"),
        ),
    ];
    check(cases, take_by_topology);
}

/// v1.37: `align-by-socket` with `distribute-cpus-across-numa` prefers a
/// combination of NUMA nodes within one socket over any across sockets,
/// asking no node for more than it has free. 24 CPUs with 10, 4, 10 and 20
/// free on NUMA 0-3 (sockets {0,1} and {2,3}): no pair holds an even 12 each,
/// so before 1.37 three nodes share them; 1.37 takes 10 from node 2 and the
/// rest from node 3, its socket neighbour.
#[test]
fn v1_37_distributes_within_one_socket_with_align_by_socket() {
    let topology = dual_socket_multi_numa_per_socket_ht();
    let available = set("0-4,10-11,20-24,30-39,40-44,50-51,60-64,70-79");
    let options = |by_socket| StaticPolicyOptions {
        distribute_cpus_across_numa: true,
        align_by_socket: true,
        distribution_aligns_by_socket: by_socket,
        ..StaticPolicyOptions::default()
    };
    let got = take_by_topology(&topology, &options(true), &available, 24).unwrap();
    assert_eq!(got, set("20-24,30-36,60-64,70-76"));
    let before = take_by_topology(&topology, &options(false), &available, 24).unwrap();
    assert_ne!(before, got);
    assert_eq!(before.len(), 24);
}

//! The target: one extender call over 5,000 nodes under 10 ms.
//!
//! A fleet of 5,000 nodes in three shapes, each node holding a few pods
//! (up to five, of three sizes, in node-dependent order: about a thousand
//! distinct node states). Measured: `filter` then `prioritize` for one pod
//! over all 5,000 node names —
//! - `warm`: a pod shape already asked about (the usual case: replicas of
//!   a Deployment), answers from the cache;
//! - `cold`: a pod shape never seen before, so the engine runs once per
//!   distinct node state.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::{cluster, pod};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let (mut cluster, names) = cluster(std::thread::available_parallelism().map_or(2, usize::from));
    let mut group = c.benchmark_group("extender 5000 nodes");
    group.sample_size(20);
    let asked = pod("web", 3, 6000);
    group.bench_function("filter + prioritize, warm", |b| {
        b.iter(|| {
            let now = Instant::now();
            let kept = cluster.filter(&asked, &names, now).expect("evaluated");
            black_box(cluster.prioritize(&asked, &kept.passed, now).expect("evaluated"));
        });
    });
    let mut fresh = 0u32;
    group.bench_function("filter + prioritize, cold", |b| {
        b.iter(|| {
            fresh += 1;
            let new_shape = pod(&format!("p{fresh}"), 3, 6000 + fresh);
            let now = Instant::now();
            let kept = cluster.filter(&new_shape, &names, now).expect("evaluated");
            black_box(cluster.prioritize(&new_shape, &kept.passed, now).expect("evaluated"));
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

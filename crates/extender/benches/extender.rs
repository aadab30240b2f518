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
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let (mut cluster, names) = cluster(std::thread::available_parallelism().map_or(2, usize::from));
    let mut group = c.benchmark_group("extender 5000 nodes");
    group.sample_size(20);
    let asked = pod("web", 3, 6000);
    // The names are the request's, moved in (`iter_batched` copies them
    // outside the timing, as the server takes them out of the request).
    group.bench_function("filter + prioritize, warm", |b| {
        b.iter_batched(
            || names.clone(),
            |names| {
                let now = Instant::now();
                let kept = cluster.filter(&asked, names, now).expect("evaluated");
                black_box(cluster.prioritize(&asked, kept.passed, now).expect("evaluated"));
            },
            BatchSize::LargeInput,
        );
    });
    let mut fresh = 0u32;
    group.bench_function("filter + prioritize, cold", |b| {
        b.iter_batched(
            || {
                fresh += 1;
                (pod(&format!("p{fresh}"), 3, 6000 + fresh), names.clone())
            },
            |(new_shape, names)| {
                let now = Instant::now();
                let kept = cluster.filter(&new_shape, names, now).expect("evaluated");
                black_box(cluster.prioritize(&new_shape, kept.passed, now).expect("evaluated"));
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Reading a 1,024-CPU machine (4 sockets, 8 NUMA nodes, 512 cores, 64 L3
//! groups, 17 PCI devices) from a synthetic sysfs tree in a temporary
//! directory must take well under 100 ms. Run: `cargo bench -p
//! topoalign-discovery`.

#[path = "../tests/support/synthetic.rs"]
mod synthetic;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use synthetic::{Shape, write_sysfs};

fn read_large_machine(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let shape = Shape::large();
    write_sysfs(dir.path(), &shape);
    let topology = topoalign_discovery::read_sysfs(dir.path()).expect("reads");
    assert_eq!(topology.cpus.len() as u32, shape.cpus());
    c.bench_function("read_sysfs 1024 CPUs", |b| {
        b.iter(|| topoalign_discovery::read_sysfs(black_box(dir.path())).expect("reads"))
    });
    c.bench_function("read_sysfs 1024 CPUs + to_machine", |b| {
        b.iter(|| {
            topoalign_discovery::read_sysfs(black_box(dir.path()))
                .expect("reads")
                .to_machine()
                .expect("machine")
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = read_large_machine
}
criterion_main!(benches);

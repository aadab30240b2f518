//! Exactly one admission of the benchmark's pod (`benches/common`) onto an
//! empty node, for valgrind's callgrind: instruction counts repeat exactly
//! from run to run, where wall-clock time on a shared machine does not.
//!
//! ```text
//! cargo build --release -p topoalign-engine --example one_admission
//! valgrind --tool=callgrind --toggle-collect='one_admission::measured' \
//!     target/release/examples/one_admission single-numa-node 2
//! ```
//!
//! Only [`measured`] — the admission itself — is counted under that
//! toggle; building the machine, starting the node, cloning it (as the
//! benchmark and the extender do) and dropping the results are not.
//! `bench/speed.sh` runs it for each policy and machine size.
//!
//! With a third argument `--no-admission` everything but the admission
//! happens: valgrind's dhat counts the heap blocks of a run with and of a
//! run without it, and the difference is the admission's allocations
//! (`bench/speed.sh` prints it; callgrind's call counts into the allocator
//! are not a count of allocations, as they take jumps inside glibc's
//! `malloc` for calls).

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::process::ExitCode;

use topoalign_engine::{Decision, Node, TopologyPolicyName};
use topoalign_model::Pod;

#[inline(never)]
fn measured(node: &mut Node, pod: Pod) -> Decision {
    node.admit(pod)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(policy), Some(numa_nodes)) = (args.first(), args.get(1)) else {
        eprintln!("usage: one_admission <single-numa-node|restricted|best-effort> <NUMA nodes> [--no-admission]");
        return ExitCode::from(2);
    };
    let policy: TopologyPolicyName = match policy.parse() {
        Ok(policy) => policy,
        Err(error) => {
            eprintln!("one_admission: policy {policy:?}: {error}");
            return ExitCode::from(2);
        }
    };
    let numa_nodes: usize = match numa_nodes.parse() {
        Ok(n) if n >= 1 => n,
        _ => {
            eprintln!("one_admission: NUMA nodes {numa_nodes:?}: expected a whole number ≥ 1");
            return ExitCode::from(2);
        }
    };
    let node = match Node::start(common::machine(numa_nodes), common::config(policy, numa_nodes)) {
        Ok(node) => node,
        Err(error) => {
            eprintln!("one_admission: the node does not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let admission = match args.get(2).map(String::as_str) {
        None => true,
        Some("--no-admission") => false,
        Some(other) => {
            eprintln!("one_admission: unknown argument {other:?} (expected --no-admission)");
            return ExitCode::from(2);
        }
    };
    let mut trial = node.clone();
    let pod = common::pod();
    if !admission {
        black_box((trial, pod));
        return ExitCode::SUCCESS;
    }
    let decision = black_box(measured(&mut trial, pod));
    if let Some(rejection) = &decision.rejection {
        eprintln!("one_admission: the pod was rejected: {}", rejection.message);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

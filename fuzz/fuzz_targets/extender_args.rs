//! The extender's `ExtenderArgs` body (filter and prioritize), as the
//! server decodes it, then judged as the server judges it: the pod read,
//! the candidate names taken (`NodeNames` or a `v1.NodeList`), filter and
//! prioritize run on a cluster holding one node restored from an NRT
//! object (the `nrt_object` seed).
#![no_main]
use std::sync::OnceLock;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use topoalign_extender::{Cluster, ExtenderConfig};
use topoalign_nrt::object::NodeResourceTopology;

fn known_nodes() -> &'static [NodeResourceTopology] {
    static NODES: OnceLock<Vec<NodeResourceTopology>> = OnceLock::new();
    NODES.get_or_init(|| {
        topoalign_nrt::object::parse_objects_skipping_bad(include_str!("../seeds/nrt_object/two-socket-gpu.yaml"))
            .map(|(objects, _)| objects)
            .unwrap_or_default()
    })
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(args) = serde_json::from_slice::<topoalign_extender::api::ExtenderArgs>(bytes) else {
        return;
    };
    let Some(manifest) = &args.pod else { return };
    let Ok(pod) = Cluster::read_pod(manifest) else { return };
    let mut names = args
        .node_names
        .clone()
        .or_else(|| args.nodes.as_ref().map(topoalign_extender::api::node_list_names))
        .unwrap_or_default();
    let now = Instant::now();
    let mut cluster = Cluster::new(ExtenderConfig::default());
    for object in known_nodes() {
        let _ = cluster.apply_nrt(object, now);
        names.push(object.metadata.name.clone());
    }
    let _ = cluster.filter(&pod, names.clone(), now);
    let _ = cluster.prioritize(&pod, names, now);
});

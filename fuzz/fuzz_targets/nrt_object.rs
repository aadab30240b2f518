//! NodeResourceTopology objects (YAML/JSON), and the exact state some carry
//! restored into an engine node.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok((objects, _skipped)) = topoalign_nrt::object::parse_objects_skipping_bad(text) {
        for object in &objects {
            let _ = topoalign_nrt::exact::restore(object);
        }
    }
});

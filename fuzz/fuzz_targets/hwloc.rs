//! hwloc XML exports (v1 and v2).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(topology) = topoalign_discovery::parse_hwloc_xml(text, "fuzz.xml") {
        let _ = topology.to_machine();
    }
});

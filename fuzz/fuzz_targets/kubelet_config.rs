//! KubeletConfiguration files, read and turned into a node configuration.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = topoalign_k8s::KubeletConfiguration::from_file_text(text);
});

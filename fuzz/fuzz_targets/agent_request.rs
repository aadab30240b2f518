//! The agent's allocation request body: plain JSON or a Pod in YAML.
#![no_main]
use libfuzzer_sys::fuzz_target;
use topoalign_agent::request::{AdmitOptions, read_body};

fuzz_target!(|bytes: &[u8]| {
    let options = AdmitOptions::default();
    let _ = read_body(bytes, false, &options);
    let _ = read_body(bytes, true, &options);
});

//! The extender's `ExtenderArgs` body (filter and prioritize), as the
//! server decodes it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = serde_json::from_slice::<topoalign_extender::api::ExtenderArgs>(bytes);
});

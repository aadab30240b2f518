//! CPU lists (`0-3,8,10-11`): ids bounded by the kernel's limit, so memory
//! follows the text, not the numbers in it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(set) = topoalign_model::CpuSet::parse(text) {
        assert_eq!(topoalign_model::CpuSet::parse(&set.to_string()).ok(), Some(set));
    }
});

//! Scenarios: parsed, and when valid replayed through the engine.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(scenario) = topoalign_scenario::Scenario::parse(text) {
        let _ = topoalign_scenario::replay(&scenario);
    }
});

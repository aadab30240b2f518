//! The replay benchmark's whole run once (reading the scenario text,
//! replaying every event, writing the result document), for valgrind's
//! callgrind: instruction counts repeat exactly from run to run, where
//! wall-clock time on a shared machine does not.
//!
//! ```text
//! cargo build --release -p topoalign-scenario --example replay_events
//! valgrind --tool=callgrind --toggle-collect='replay_events::measured' \
//!     target/release/examples/replay_events
//! ```
//!
//! Prints the number of events; the collected instructions divided by it
//! are the instructions per event. Generating the scenario text is not
//! counted. `bench/speed.sh --callgrind` runs it.

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::process::ExitCode;

use topoalign_scenario::ReplayInput;

#[inline(never)]
fn measured(text: &str) -> Option<String> {
    let input = ReplayInput::parse(text).ok()?;
    Some(common::document(input.replay().ok()?))
}

fn main() -> ExitCode {
    let text = common::scenario();
    let Some(document) = black_box(measured(&text)) else {
        eprintln!("replay_events: the bench scenario does not replay");
        return ExitCode::FAILURE;
    };
    println!("events: {} (document: {} bytes)", common::EVENTS, document.len());
    ExitCode::SUCCESS
}

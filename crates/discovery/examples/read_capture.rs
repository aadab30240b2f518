//! Reads one sysfs tree or capture archive as every command does
//! ([`topoalign_discovery::read_sysfs`]) and says what it found, or the
//! error: the program `bench/archive-bomb.sh` measures (time and peak
//! resident memory) on decompression bombs beside a real capture.
//!
//! `cargo run --release -p topoalign-discovery --example read_capture -- PATH`
//! (exit status 0 when read, 1 with the error on standard error).

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: read_capture PATH");
        return std::process::ExitCode::from(2);
    };
    match topoalign_discovery::read_sysfs(std::path::Path::new(&path)) {
        Ok(topology) => {
            println!("read: {} CPUs", topology.cpus.len());
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::ExitCode::FAILURE
        }
    }
}

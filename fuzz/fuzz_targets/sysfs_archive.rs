//! A sysfs capture archive (tar, optionally compressed): every member read
//! bounded; the machine built or a clear error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // The format is told by its first bytes (gzip, bzip2, xz or a plain
    // tar), not by the file's name.
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("capture.tar");
    if std::fs::write(&path, bytes).is_ok() {
        let _ = topoalign_discovery::read_sysfs(&path).map(|t| t.to_machine());
    }
});

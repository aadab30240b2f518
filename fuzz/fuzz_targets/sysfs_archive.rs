//! A sysfs capture archive (tar, optionally compressed): every member read
//! bounded; the machine built or a clear error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    for name in ["capture.tar", "capture.tar.gz"] {
        let path = dir.path().join(name);
        if std::fs::write(&path, bytes).is_ok() {
            let _ = topoalign_discovery::read_sysfs(&path).map(|t| t.to_machine());
        }
    }
});

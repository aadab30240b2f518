//! The kubelet's checkpoint files: cpu_manager_state, memory_manager_state,
//! kubelet_internal_checkpoint (every layout, checksums verified).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = topoalign_k8s::CpuCheckpoint::parse(bytes);
    let _ = topoalign_k8s::MemoryCheckpoint::parse(bytes);
    let _ = topoalign_k8s::DeviceCheckpoint::parse(bytes);
});

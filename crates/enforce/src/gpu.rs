//! Making only the allocated GPUs visible to a command.
//!
//! NVIDIA's runtime libraries read `CUDA_VISIBLE_DEVICES` and the container
//! toolkit reads `NVIDIA_VISIBLE_DEVICES`; both accept GPU UUIDs
//! (`GPU-8f3c…`), which is how discovery names NVIDIA devices, so the
//! allocation's device ids are passed through unchanged.

use std::collections::BTreeMap;

/// Device-plugin resources whose devices are NVIDIA GPUs.
pub const NVIDIA_GPU_RESOURCES: &[&str] = &["nvidia.com/gpu"];

/// The environment for a command given `devices` (resource → device ids).
/// With no GPU resource among them, nothing is set: the command sees what
/// its environment already says.
pub fn visible_devices_env(devices: &BTreeMap<String, Vec<String>>) -> Vec<(String, String)> {
    let gpus: Vec<&str> = devices
        .iter()
        .filter(|(resource, _)| NVIDIA_GPU_RESOURCES.contains(&resource.as_str()))
        .flat_map(|(_, ids)| ids.iter().map(String::as_str))
        .collect();
    if gpus.is_empty() {
        return Vec::new();
    }
    let list = gpus.join(",");
    vec![
        ("CUDA_VISIBLE_DEVICES".to_string(), list.clone()),
        ("NVIDIA_VISIBLE_DEVICES".to_string(), list),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gpu_resources_become_visible_devices() {
        let devices: BTreeMap<String, Vec<String>> = [
            (
                "nvidia.com/gpu".to_string(),
                vec!["GPU-aaaa".to_string(), "GPU-bbbb".to_string()],
            ),
            ("example.com/nic".to_string(), vec!["nic0".to_string()]),
        ]
        .into();
        assert_eq!(
            visible_devices_env(&devices),
            vec![
                ("CUDA_VISIBLE_DEVICES".to_string(), "GPU-aaaa,GPU-bbbb".to_string()),
                ("NVIDIA_VISIBLE_DEVICES".to_string(), "GPU-aaaa,GPU-bbbb".to_string()),
            ]
        );
        let nics: BTreeMap<String, Vec<String>> = [("example.com/nic".to_string(), vec!["nic0".to_string()])].into();
        assert!(visible_devices_env(&nics).is_empty());
    }
}

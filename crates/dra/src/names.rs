//! Names topoalign gives DRA objects it writes (devices, slices, claim
//! templates): Kubernetes DNS labels made from free text. Pure.

/// `text` as a DNS label: lower case, `-` for anything else, no leading or
/// trailing `-`; `device` when nothing is left.
pub fn dns_label(text: &str) -> String {
    let label: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let label = label.trim_matches('-');
    if label.is_empty() {
        "device".to_owned()
    } else {
        label.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::dns_label;

    #[test]
    fn labels() {
        assert_eq!(dns_label("nvidia.com/GPU_0"), "nvidia-com-gpu-0");
        assert_eq!(dns_label("--x--"), "x");
        assert_eq!(dns_label("/"), "device");
    }
}

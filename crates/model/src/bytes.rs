//! Byte counts for people: the one spelling every command prints.

/// `bytes` for people, in the largest binary unit that keeps the number at
/// least 1, with one decimal (`512 B`, `8.0 MiB`, `31.9 GiB`, `2.0 TiB`).
///
/// Every human-facing text (`discover`, `verify`, error messages naming a
/// size limit) spells sizes this way; Kubernetes quantities (`64Gi`) are
/// [`crate::Quantity`]'s business.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(12 * (1 << 20) + (1 << 19)), "12.5 MiB");
        assert_eq!(human_bytes(34_243_170_304), "31.9 GiB");
        assert_eq!(human_bytes(2 << 40), "2.0 TiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }
}

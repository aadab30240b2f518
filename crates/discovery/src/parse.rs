//! Pure parsers for the text of kernel and hwloc files: CPU lists and hex
//! masks, `meminfo`, distance rows, sizes, PCI ids.
//!
//! Owns: the syntax of single files. Must not touch: paths or I/O — the
//! readers add the path to a [`ParseError`].

use topoalign_model::CpuSet;

/// Text that does not have the expected syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}, found {found:?}")]
pub struct ParseError {
    /// What the text should have been.
    pub expected: &'static str,
    /// The offending text (trimmed, shortened).
    pub found: String,
}

impl ParseError {
    pub(crate) fn new(expected: &'static str, found: &str) -> ParseError {
        let found: String = found.trim().chars().take(80).collect();
        ParseError { expected, found }
    }
}

/// A kernel CPU list (`0-3,8,10-11`); empty text is the empty set.
///
/// # Errors
/// [`ParseError`] for anything else.
pub fn parse_cpu_list(text: &str) -> Result<CpuSet, ParseError> {
    CpuSet::parse(text).map_err(|e| match e {
        topoalign_model::CpuSetParseError::TooLarge { .. } => {
            ParseError::new("a CPU list with ids the kernel can have (at most 16383)", text)
        }
        _ => ParseError::new("a CPU list like 0-3,8", text),
    })
}

/// A hex bit mask, as the kernel writes it (`00000000,0000ffff`: 32-bit
/// words, most significant first) or hwloc does (`0x000000fc,,0x00fc0000`:
/// an empty word is zero; a leading `0xf...f` word means "all higher bits
/// set" and is ignored, since no real CPU or node lives there).
///
/// # Errors
/// [`ParseError`] for non-hex words or words wider than 32 bits.
pub fn parse_hex_mask(text: &str) -> Result<CpuSet, ParseError> {
    let bad = || ParseError::new("a hex mask like 0000ffff,00000000", text);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad());
    }
    let words: Vec<&str> = trimmed.split(',').collect();
    let mut set = CpuSet::new();
    for (index_from_right, word) in words.iter().rev().enumerate() {
        let word = word.trim();
        let digits = word
            .strip_prefix("0x")
            .or_else(|| word.strip_prefix("0X"))
            .unwrap_or(word);
        if digits == "f...f" {
            continue;
        }
        if digits.is_empty() {
            continue;
        }
        if digits.len() > 8 {
            return Err(bad());
        }
        let value = u32::from_str_radix(digits, 16).map_err(|_| bad())?;
        let base = u32::try_from(index_from_right)
            .ok()
            .and_then(|i| i.checked_mul(32))
            .filter(|&b| b <= CpuSet::MAX_CPU_ID)
            .ok_or_else(bad)?;
        for bit in 0..32 {
            if value & (1 << bit) != 0 {
                set.insert(base + bit);
            }
        }
    }
    Ok(set)
}

/// A whole number that may be negative (`physical_package_id` can be -1).
///
/// # Errors
/// [`ParseError`] when the text is not one.
pub fn parse_int(text: &str) -> Result<i64, ParseError> {
    text.trim().parse().map_err(|_| ParseError::new("a whole number", text))
}

/// A non-negative whole number.
///
/// # Errors
/// [`ParseError`] when the text is not one.
pub fn parse_count(text: &str) -> Result<u64, ParseError> {
    text.trim()
        .parse()
        .map_err(|_| ParseError::new("a non-negative whole number", text))
}

/// Total and free memory from a `meminfo` file, in bytes: the per-node form
/// (`Node 0 MemTotal:  32980312 kB`) or `/proc/meminfo` (`MemTotal: … kB`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    pub total: Option<u64>,
    pub free: Option<u64>,
}

/// Reads `MemTotal` and `MemFree` from a `meminfo` file.
///
/// # Errors
/// [`ParseError`] when a `MemTotal`/`MemFree` line has no number of kB.
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ParseError> {
    let mut info = MemInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.split_whitespace().last().unwrap_or("");
        let slot = match key {
            "MemTotal" => &mut info.total,
            "MemFree" => &mut info.free,
            _ => continue,
        };
        let mut parts = value.split_whitespace();
        let number = parts.next().and_then(|n| n.parse::<u64>().ok());
        let unit = parts.next().unwrap_or("kB");
        let multiplier = match unit {
            "kB" | "KB" | "kb" => 1024,
            "B" => 1,
            _ => return Err(ParseError::new("a size in kB", line)),
        };
        *slot = Some(
            number
                .and_then(|n| n.checked_mul(multiplier))
                .ok_or_else(|| ParseError::new("a size in kB", line))?,
        );
    }
    Ok(info)
}

/// A node's `distance` row: numbers separated by white space.
///
/// # Errors
/// [`ParseError`] for anything else, or an empty row.
pub fn parse_distance_row(text: &str) -> Result<Vec<u64>, ParseError> {
    let row: Result<Vec<u64>, _> = text.split_whitespace().map(str::parse).collect();
    match row {
        Ok(row) if !row.is_empty() => Ok(row),
        _ => Err(ParseError::new("distances like 10 21", text)),
    }
}

/// The page size in bytes named by a huge page directory
/// (`hugepages-2048kB` → 2097152).
pub fn parse_hugepage_dir(name: &str) -> Option<u64> {
    name.strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// A cache size (`28160K`, `32M`, `1024`) in bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    let (digits, multiplier) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1u64 << 10),
        (i, 'M') => (&text[..i], 1 << 20),
        (i, 'G') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(multiplier)
}

/// A sysfs hex number (`0x030200`, `0x10de`).
///
/// # Errors
/// [`ParseError`] when it is not hex.
pub fn parse_hex(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let digits = t.strip_prefix("0x").unwrap_or(t);
    u32::from_str_radix(digits, 16).map_err(|_| ParseError::new("a hex number like 0x10de", text))
}

/// The first CPU model name in `/proc/cpuinfo` (`model name` on x86,
/// `cpu` on POWER).
pub fn parse_cpuinfo_model(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        (key == "model name" || key == "cpu" || key == "Processor")
            .then(|| value.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|v| !v.is_empty())
    })
}

/// hwloc's `pci_type` attribute (`0302 [10de:1db1] [10de:1212] a1`):
/// class (base and sub class), vendor and device id.
pub fn parse_hwloc_pci_type(text: &str) -> Option<(u16, u16, u16)> {
    let mut parts = text.split_whitespace();
    let class = u16::from_str_radix(parts.next()?, 16).ok()?;
    let ids = parts.next()?.strip_prefix('[')?.strip_suffix(']')?;
    let (vendor, device) = ids.split_once(':')?;
    Some((
        class,
        u16::from_str_radix(vendor, 16).ok()?,
        u16::from_str_radix(device, 16).ok()?,
    ))
}

/// A PCI address in the kernel's form (`0000:3b:00.0`, lower case), from
/// any common spelling (NVML's `00000000:3B:00.0` included).
pub fn normalize_pci_address(text: &str) -> Option<String> {
    let text = text.trim();
    let (domain, rest) = match text.matches(':').count() {
        2 => text.split_once(':')?,
        1 => ("0", text),
        _ => return None,
    };
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let device = u8::from_str_radix(device, 16).ok()?;
    let function = u8::from_str_radix(function, 16).ok()?;
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(list: &str) -> CpuSet {
        CpuSet::parse(list).unwrap()
    }

    #[test]
    fn hex_masks_in_kernel_and_hwloc_spelling() {
        let cases = [
            ("0000ffff", "0-15"),
            ("00000000,0000ffff", "0-15"),
            ("00000001,00000000", "32"),
            ("0x000000fc,,0x00fc0000", "18-23,66-71"),
            ("0x0", ""),
            ("0xf...f,0x00000001", "0"),
            ("ff\n", "0-7"),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_hex_mask(text).unwrap(), set(expected), "{text}");
        }
        for bad in ["", "zz", "0x123456789", "1,,g"] {
            assert!(parse_hex_mask(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn meminfo_per_node_and_global() {
        let node = "Node 0 MemTotal:       32980312 kB\nNode 0 MemFree:        29193784 kB\nNode 0 MemUsed: 1 kB\n";
        assert_eq!(
            parse_meminfo(node).unwrap(),
            MemInfo {
                total: Some(32980312 * 1024),
                free: Some(29193784 * 1024)
            }
        );
        let global = "\nMemTotal:        7881912 kB\nMemFree: 5 kB\n";
        assert_eq!(parse_meminfo(global).unwrap().total, Some(7881912 * 1024));
        assert_eq!(parse_meminfo("").unwrap(), MemInfo::default());
        assert!(parse_meminfo("Node 0 MemTotal: lots kB").is_err());
    }

    #[test]
    fn small_file_formats() {
        assert_eq!(parse_distance_row("10 21 11 21\n").unwrap(), vec![10, 21, 11, 21]);
        assert!(parse_distance_row("10 x").is_err());
        assert!(parse_distance_row("").is_err());
        assert_eq!(parse_hugepage_dir("hugepages-2048kB"), Some(2 << 20));
        assert_eq!(parse_hugepage_dir("hugepages-1048576kB"), Some(1 << 30));
        assert_eq!(parse_hugepage_dir("nr_hugepages"), None);
        assert_eq!(parse_size("28160K"), Some(28160 * 1024));
        assert_eq!(parse_size("32M\n"), Some(32 << 20));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_hex("0x030200\n").unwrap(), 0x030200);
        assert_eq!(parse_int("-1\n").unwrap(), -1);
        assert!(parse_int("").is_err());
        assert_eq!(parse_cpu_list("0-3,8\n").unwrap(), set("0-3,8"));
        assert!(parse_cpu_list("0-x").is_err());
    }

    #[test]
    fn pci_spellings() {
        assert_eq!(
            parse_hwloc_pci_type("0302 [10de:1db1] [10de:1212] a1"),
            Some((0x0302, 0x10de, 0x1db1))
        );
        assert_eq!(parse_hwloc_pci_type("0302"), None);
        assert_eq!(
            normalize_pci_address("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(normalize_pci_address("0004:05:00.1").as_deref(), Some("0004:05:00.1"));
        assert_eq!(normalize_pci_address("3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(normalize_pci_address("pci0000:00"), None);
    }

    proptest::proptest! {
        /// A set written as the kernel writes masks reads back the same.
        #[test]
        fn kernel_masks_round_trip(cpus in proptest::collection::btree_set(0u32..300, 0..60)) {
            let words = 300usize.div_ceil(32);
            let mut mask = vec![0u32; words];
            for &cpu in &cpus {
                mask[cpu as usize / 32] |= 1 << (cpu % 32);
            }
            let text: Vec<String> = mask.iter().rev().map(|w| format!("{w:08x}")).collect();
            let parsed = parse_hex_mask(&text.join(",")).unwrap();
            proptest::prop_assert_eq!(parsed.to_vec(), cpus.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn cpu_models() {
        let x86 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU           L5640  @ 2.27GHz\n";
        assert_eq!(
            parse_cpuinfo_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) CPU L5640 @ 2.27GHz")
        );
        assert_eq!(
            parse_cpuinfo_model("cpu\t\t: POWER7 (architected)\n").as_deref(),
            Some("POWER7 (architected)")
        );
        assert_eq!(parse_cpuinfo_model("flags: x\n"), None);
    }
}

//! SR-IOV virtual functions recognised by their PCI ids, for captures and
//! hwloc files that keep no `physfn` link. The live sysfs reader trusts the
//! kernel's `physfn` link first.

/// Well-known virtual-function device ids (vendor, device) of NICs.
const VIRTUAL_FUNCTIONS: &[(u16, u16)] = &[
    (0x8086, 0x10ca), // 82576 VF
    (0x8086, 0x10ed), // 82599 VF
    (0x8086, 0x1515), // X540 VF
    (0x8086, 0x1520), // I350 VF
    (0x8086, 0x154c), // X710/XL710 VF
    (0x8086, 0x1565), // X550 VF
    (0x8086, 0x1889), // E810 adaptive VF (iavf)
    (0x15b3, 0x1002), // ConnectX-2 VF
    (0x15b3, 0x1004), // ConnectX-3 VF
    (0x15b3, 0x1012), // ConnectX-4 VF
    (0x15b3, 0x1014), // ConnectX-4 VF
    (0x15b3, 0x1016), // ConnectX-4 Lx VF
    (0x15b3, 0x1018), // ConnectX-5 VF
    (0x15b3, 0x101a), // ConnectX-5 Ex VF
    (0x15b3, 0x101c), // ConnectX-6 VF
    (0x15b3, 0x101e), // ConnectX family VF
    (0x14e4, 0x16dc), // NetXtreme-E VF
    (0x14e4, 0x1807), // NetXtreme-E VF
    (0x1137, 0x00cf), // Cisco VIC usNIC VF
    (0x1924, 0x1903), // Solarflare VF
];

/// Whether the ids are those of a known NIC virtual function.
pub(crate) fn is_known_virtual_function(vendor: Option<u16>, device: Option<u16>) -> bool {
    match (vendor, device) {
        (Some(vendor), Some(device)) => VIRTUAL_FUNCTIONS.contains(&(vendor, device)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i350_vf_is_known_and_its_pf_is_not() {
        assert!(is_known_virtual_function(Some(0x8086), Some(0x1520)));
        assert!(!is_known_virtual_function(Some(0x8086), Some(0x1521)));
        assert!(!is_known_virtual_function(None, Some(0x1520)));
    }
}

//! `reservedSystemCPUs`: the Linux CPU list syntax (`0-3,8,10-11`) read the
//! way the kubelet reads it (`k8s.io/utils/cpuset.Parse`), and checked
//! against the machine the way `getReservedCPUs` (cmd/kubelet) does.
//!
//! Owns: the Go parser's exact acceptance and error texts. A list is kept
//! as ranges until it is known to fit the machine, so `0-4000000000` costs
//! nothing.

use topoalign_model::{CpuSet, Machine};

use crate::go;

/// Why `cpuset.Parse` refused a list; the message is Go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// A part that is not a decimal integer:
    /// `strconv.Atoi: parsing "x": invalid syntax`.
    #[error("strconv.Atoi: parsing {}: {reason}", go::quote(.part))]
    Number { part: String, reason: &'static str },
    /// A range whose start is above its end: `invalid range "3-1" (3 > 1)`.
    #[error("invalid range {} ({start} > {end})", go::quote(.part))]
    Range { part: String, start: i64, end: i64 },
}

/// Why `getReservedCPUs` refused `reservedSystemCPUs`; the message is the
/// kubelet's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReservedCpusError {
    /// The machine has no CPUs to reserve from.
    #[error("unable to discover CPU topology info: could not detect number of cpus")]
    NoCpus,
    #[error("unable to parse reserved-cpus list: {0}")]
    Unparsable(#[from] CpuListError),
    /// The list names a CPU the machine does not have.
    #[error("reserved-cpus: {list} is not a subset of online-cpus: {online}")]
    NotOnline { list: String, online: CpuSet },
}

/// A parsed CPU list: inclusive ranges as written (ids are Go `int`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList {
    ranges: Vec<(i64, i64)>,
}

/// `cpuset.Parse`: comma-separated ids or `a-b` ranges; the empty string is
/// the empty set.
///
/// # Errors
/// [`CpuListError`], whose message is Go's: `strconv.Atoi: parsing "x":
/// invalid syntax`, `invalid range "3-1" (3 > 1)`.
pub fn parse_cpu_list(text: &str) -> Result<CpuList, CpuListError> {
    let mut ranges = Vec::new();
    if text.is_empty() {
        return Ok(CpuList { ranges });
    }
    let atoi = |s: &str| {
        go::parse_int64(s).map_err(|error| CpuListError::Number {
            part: s.to_owned(),
            reason: error.reason(),
        })
    };
    for part in text.split(',') {
        match part.split_once('-') {
            None => {
                let cpu = atoi(part)?;
                ranges.push((cpu, cpu));
            }
            Some((start, end)) => {
                let (start, end) = (atoi(start)?, atoi(end)?);
                if start > end {
                    return Err(CpuListError::Range {
                        part: part.to_owned(),
                        start,
                        end,
                    });
                }
                ranges.push((start, end));
            }
        }
    }
    Ok(CpuList { ranges })
}

impl CpuList {
    /// The listed CPUs, if every one of them is one of `online`'s.
    fn within(&self, online: &CpuSet) -> Option<CpuSet> {
        let mut set = CpuSet::new();
        for &(start, end) in &self.ranges {
            for cpu in start..=end {
                let cpu = u32::try_from(cpu).ok().filter(|&cpu| online.contains(cpu))?;
                set.insert(cpu);
            }
        }
        Some(set)
    }

    /// The listed CPUs as a set, if no id is negative or above `max_id`.
    pub fn to_cpu_set(&self, max_id: i64) -> Option<CpuSet> {
        let mut set = CpuSet::new();
        for &(start, end) in &self.ranges {
            if start < 0 || end > max_id {
                return None;
            }
            set.insert_range(u32::try_from(start).ok()?, u32::try_from(end).ok()?);
        }
        Some(set)
    }

    /// Whether the list names no CPU at all.
    fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// The kubelet's `getReservedCPUs`: `reservedSystemCPUs` parsed and checked
/// to be a subset of the machine's CPUs. `None` for an empty list.
///
/// # Errors
/// [`ReservedCpusError`], with the kubelet's text: `unable to discover CPU
/// topology info: ...`, `unable to parse reserved-cpus list: ...`,
/// `reserved-cpus: 15-16 is not a subset of online-cpus: 0-15`.
pub fn reserved_cpus(text: &str, machine: &Machine) -> Result<Option<CpuSet>, ReservedCpusError> {
    if text.is_empty() {
        return Ok(None);
    }
    if machine.cpus().is_empty() {
        return Err(ReservedCpusError::NoCpus);
    }
    let list = parse_cpu_list(text)?;
    let online = machine.cpu_set();
    // Bounds first, so a huge range is rejected without being walked.
    let max_online = online.iter().last().map(i64::from);
    let fits = |&(start, end): &(i64, i64)| start >= 0 && max_online.is_some_and(|max| end <= max);
    let reserved = if list.ranges.iter().all(fits) {
        list.within(&online)
    } else {
        None
    };
    let reserved = reserved.ok_or_else(|| ReservedCpusError::NotOnline {
        list: text.to_owned(),
        online: online.clone(),
    })?;
    Ok((!list.is_empty()).then_some(reserved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_model::UniformMachine;

    fn machine(cpus: u32) -> Machine {
        UniformMachine::new(1, cpus).build().unwrap()
    }

    #[test]
    fn go_parse_errors() {
        let table = [
            ("a", r#"strconv.Atoi: parsing "a": invalid syntax"#),
            ("1,", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("-1", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("3-1", r#"invalid range "3-1" (3 > 1)"#),
            ("1--2", r#"invalid range "1--2" (1 > -2)"#),
            (" 1", r#"strconv.Atoi: parsing " 1": invalid syntax"#),
            ("0-x", r#"strconv.Atoi: parsing "x": invalid syntax"#),
            (
                "99999999999999999999",
                r#"strconv.Atoi: parsing "99999999999999999999": value out of range"#,
            ),
        ];
        for (text, expected) in table {
            assert_eq!(parse_cpu_list(text).unwrap_err().to_string(), expected, "{text:?}");
        }
        assert!(parse_cpu_list("+1,2-2,0-3").is_ok());
    }

    #[test]
    fn reserved_cpus_must_be_online() {
        let m = machine(16);
        assert_eq!(reserved_cpus("", &m), Ok(None));
        assert_eq!(reserved_cpus("0-1,8", &m), Ok(Some(CpuSet::parse("0-1,8").unwrap())));
        let refused = |text: &str, machine: &Machine| reserved_cpus(text, machine).unwrap_err().to_string();
        assert_eq!(
            refused("15-16", &m),
            "reserved-cpus: 15-16 is not a subset of online-cpus: 0-15"
        );
        assert_eq!(
            refused("0-3", &machine(2)),
            "reserved-cpus: 0-3 is not a subset of online-cpus: 0-1"
        );
        assert_eq!(
            refused("0-4000000000", &m),
            "reserved-cpus: 0-4000000000 is not a subset of online-cpus: 0-15"
        );
        assert_eq!(
            refused("x", &m),
            r#"unable to parse reserved-cpus list: strconv.Atoi: parsing "x": invalid syntax"#
        );
    }
}

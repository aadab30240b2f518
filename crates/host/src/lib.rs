//! What the kernel applies to a host's processes, read and never
//! written — the read side of `topoalign-enforce`, for `topoalign verify`
//! and the kubelet follower (neither may link the crate that writes).
//!
//! Owns: [`Host::process`] — a process's cpuset cgroup (found through its
//! `/proc/PID/cgroup` and the mounts in `/proc/self/mountinfo`, v1 and v2,
//! with its effective CPUs and memory nodes), the CPUs its threads may run
//! on and the memory nodes it may use (`status`), its resident pages per
//! NUMA node (`numa_maps`), chosen variables of its environment
//! (`environ`), and the devices its cgroup lets it open (v1
//! `devices.list`; v2's device controller is an eBPF program the kernel
//! does not show); [`Host::cgroup_memberships`], every process's
//! `/proc/PID/cgroup` (how a container's processes are found). The text of
//! each file is read by a pure `parse_*` function. [`CgroupVersion`] and
//! [`unescape_mount_path`] are shared with the writer.
//!
//! The whole host is under one injectable root ([`Host::under`]): `proc/`
//! and every mount point named in `proc/self/mountinfo` are looked up
//! beneath it, so captured trees read as a live machine does.
//!
//! Must not touch: anything it reads (no writes), the judgement (that is
//! `topoalign-verify`'s).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use topoalign_model::CpuSet;

/// Which cgroup interface holds the cpuset controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// `cgroup-v1` / `cgroup-v2`, as the agent reports its enforcement.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cgroup-v1",
            CgroupVersion::V2 => "cgroup-v2",
        }
    }
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
pub fn unescape_mount_path(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..=i + 3].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let value = bytes[i + 1..=i + 3]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a process could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No such process (or only its zombie is left).
    #[error("no process {pid} (looked in {path})")]
    NoProcess { pid: u32, path: PathBuf },
    /// A file that exists could not be read.
    #[error("read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file's text is not what the kernel writes.
    #[error("{path}: {what}")]
    Parse { path: PathBuf, what: String },
}

/// A host whose processes are read.
#[derive(Clone, Debug)]
pub struct Host {
    root: PathBuf,
}

/// What the kernel applies to one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessFacts {
    pub pid: u32,
    /// `comm`.
    pub command: String,
    /// Its cpuset cgroup; `None` when none is mounted or its path is not
    /// under the mount this host sees.
    pub cgroup: Option<CgroupFacts>,
    /// The union of its threads' `Cpus_allowed_list`.
    pub cpus: CpuSet,
    /// `Mems_allowed_list`.
    pub mems_allowed: Vec<usize>,
    /// `numa_maps`; `None` when not readable (another user's process).
    pub numa_maps: Option<NumaMaps>,
    /// The variables asked for that its environment has; `None` when
    /// `environ` is not readable.
    pub environment: Option<BTreeMap<String, String>>,
    pub devices: DeviceFacts,
}

/// A process's cpuset cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupFacts {
    pub version: CgroupVersion,
    /// Its directory as the host names it (mount point + cgroup path; the
    /// injected root not included), as the agent records a leaf's.
    pub path: PathBuf,
    /// Effective CPUs (`cpuset.cpus.effective`, v1
    /// `cpuset.effective_cpus`), from the nearest cgroup up that has them.
    pub cpus: Option<CpuSet>,
    /// Effective memory nodes.
    pub mems: Option<Vec<usize>>,
}

/// The devices a process's cgroup lets it open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceFacts {
    /// v1: the `devices.list` rules, with the NUMA node of each device a
    /// rule names exactly, where sysfs gives one.
    V1 { path: PathBuf, rules: Vec<DeviceRule> },
    /// v2: an eBPF program, not readable.
    V2,
    /// No device controller found.
    Unknown,
}

/// One `devices.list` rule (`c 195:0 rwm`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRule {
    pub text: String,
    /// `a *:* rwm`: every device.
    pub all: bool,
    pub numa: Option<usize>,
}

/// Resident memory per NUMA node from `numa_maps`, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaMaps {
    /// Mappings with anonymous pages (heap, stacks, written private
    /// mappings) and those of no file.
    pub anonymous: BTreeMap<usize, u64>,
    /// hugetlbfs mappings (`huge`).
    pub huge_pages: BTreeMap<usize, u64>,
    /// File mappings with no anonymous pages: shared page cache.
    pub file: BTreeMap<usize, u64>,
    /// The nodes of `bind:` when every mapping shows the same bind policy.
    pub bind: Option<Vec<usize>>,
}

impl Default for Host {
    fn default() -> Self {
        Host::live()
    }
}

impl Host {
    /// This machine.
    pub fn live() -> Host {
        Host { root: "/".into() }
    }

    /// A captured or fake host: `<root>/proc` and the mount points of
    /// `<root>/proc/self/mountinfo` under `<root>`.
    pub fn under(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    fn path(&self, absolute: &Path) -> PathBuf {
        self.root.join(absolute.strip_prefix("/").unwrap_or(absolute))
    }

    fn proc(&self, rest: &str) -> PathBuf {
        self.root.join("proc").join(rest)
    }

    /// The processes in a cgroup directory (as the host names it), from its
    /// `cgroup.procs`.
    ///
    /// # Errors
    /// [`HostError`] when the file cannot be read.
    pub fn cgroup_processes(&self, cgroup: &Path) -> Result<Vec<u32>, HostError> {
        let path = self.path(cgroup).join("cgroup.procs");
        let text = read(&path)?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Every process under `proc/` and its `cgroup` file's text, in pid
    /// order; a process whose file cannot be read (gone since, or not
    /// ours to read) is left out.
    ///
    /// # Errors
    /// [`HostError::Io`] when `proc/` itself cannot be listed.
    pub fn cgroup_memberships(&self) -> Result<Vec<(u32, String)>, HostError> {
        let proc = self.root.join("proc");
        let entries = std::fs::read_dir(&proc).map_err(|source| HostError::Io {
            path: proc.clone(),
            source,
        })?;
        let mut found: Vec<(u32, String)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .filter_map(|pid: u32| {
                let text = std::fs::read_to_string(proc.join(pid.to_string()).join("cgroup")).ok()?;
                Some((pid, text))
            })
            .collect();
        found.sort_unstable_by_key(|(pid, _)| *pid);
        Ok(found)
    }

    /// What the kernel applies to process `pid`; `environment` lists the
    /// variables to keep from its environment (no others are kept).
    ///
    /// # Errors
    /// [`HostError::NoProcess`], or a file of the process that exists
    /// but cannot be read or parsed (`numa_maps` and `environ` of another
    /// user's process are left `None` instead).
    pub fn process(&self, pid: u32, environment: &[&str]) -> Result<ProcessFacts, HostError> {
        let dir = self.proc(&pid.to_string());
        let status_path = dir.join("status");
        let status = match std::fs::read_to_string(&status_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(HostError::NoProcess { pid, path: dir });
            }
            Err(source) => {
                return Err(HostError::Io {
                    path: status_path,
                    source,
                });
            }
        };
        if status_field(&status, "State").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
            return Err(HostError::NoProcess { pid, path: dir });
        }
        let list = |text: &str, field: &str, path: &Path| -> Result<CpuSet, HostError> {
            let value = status_field(text, field).ok_or_else(|| HostError::Parse {
                path: path.to_path_buf(),
                what: format!("no {field}"),
            })?;
            CpuSet::parse(value).map_err(|e| HostError::Parse {
                path: path.to_path_buf(),
                what: format!("{field}: {e}"),
            })
        };
        let mut cpus = list(&status, "Cpus_allowed_list", &status_path)?;
        // Threads may have narrowed (or, outside a cpuset, changed) their
        // own affinity; a thread that exits meanwhile is skipped.
        if let Ok(tasks) = std::fs::read_dir(dir.join("task")) {
            for task in tasks.filter_map(Result::ok) {
                let path = task.path().join("status");
                if let Ok(text) = std::fs::read_to_string(&path)
                    && let Ok(thread) = list(&text, "Cpus_allowed_list", &path)
                {
                    cpus.union_with(&thread);
                }
            }
        }
        let mems_allowed = to_nodes(&list(&status, "Mems_allowed_list", &status_path)?);
        // A process that exits while it is read is gone, not an error.
        let gone = |error: HostError| match error {
            HostError::Io { source, .. }
                if source.kind() == io::ErrorKind::NotFound || source.raw_os_error() == Some(libc::ESRCH) =>
            {
                HostError::NoProcess { pid, path: dir.clone() }
            }
            other => other,
        };
        let command = read(&dir.join("comm")).map_err(gone)?.trim().to_string();
        let memberships = parse_proc_cgroup(&read(&dir.join("cgroup")).map_err(gone)?);
        let mountinfo_path = self.proc("self/mountinfo");
        let mounts = parse_mountinfo(&read(&mountinfo_path)?);
        let cgroup = self.cpuset_of(&mounts, &memberships)?;
        let devices = self.devices_of(&mounts, &memberships)?;

        let numa_maps = match std::fs::read_to_string(dir.join("numa_maps")) {
            Ok(text) => Some(parse_numa_maps(&text)),
            Err(e) if is_denied_or_missing(&e) => None,
            Err(source) => {
                return Err(HostError::Io {
                    path: dir.join("numa_maps"),
                    source,
                });
            }
        };
        let environment = match std::fs::read(dir.join("environ")) {
            Ok(bytes) => Some(parse_environ(&bytes, environment)),
            Err(e) if is_denied_or_missing(&e) => None,
            Err(source) => {
                return Err(HostError::Io {
                    path: dir.join("environ"),
                    source,
                });
            }
        };
        Ok(ProcessFacts {
            pid,
            command,
            cgroup,
            cpus,
            mems_allowed,
            numa_maps,
            environment,
            devices,
        })
    }

    fn cpuset_of(&self, mounts: &[Mount], memberships: &[Membership]) -> Result<Option<CgroupFacts>, HostError> {
        // As `cgroup::find_cpuset_mount`: a v1 cpuset mount wins.
        let v1 = mounts.iter().find(|m| m.fs_type == "cgroup" && m.has_option("cpuset"));
        let (mount, version) = match v1 {
            Some(mount) => (mount, CgroupVersion::V1),
            None => match mounts.iter().find(|m| m.fs_type == "cgroup2") {
                Some(mount) => (mount, CgroupVersion::V2),
                None => return Ok(None),
            },
        };
        let Some(dir) = membership_dir(mount, version, "cpuset", memberships) else {
            return Ok(None);
        };
        let (cpus_file, mems_file, fallback) = match version {
            CgroupVersion::V2 => ("cpuset.cpus.effective", "cpuset.mems.effective", None),
            CgroupVersion::V1 => (
                "cpuset.effective_cpus",
                "cpuset.effective_mems",
                Some(("cpuset.cpus", "cpuset.mems")),
            ),
        };
        let cpus = self.nearest_list(&dir, &mount.point, cpus_file, fallback.map(|f| f.0))?;
        let mems = self
            .nearest_list(&dir, &mount.point, mems_file, fallback.map(|f| f.1))?
            .map(|set| to_nodes(&set));
        Ok(Some(CgroupFacts {
            version,
            path: dir,
            cpus,
            mems,
        }))
    }

    /// A list file of `dir`, or of the nearest parent up to `top` that has
    /// it (v2 shows cpuset files only where the controller is enabled).
    fn nearest_list(
        &self,
        dir: &Path,
        top: &Path,
        file: &str,
        fallback: Option<&str>,
    ) -> Result<Option<CpuSet>, HostError> {
        let mut current = Some(dir);
        while let Some(at) = current {
            for name in std::iter::once(file).chain(fallback) {
                let path = self.path(at).join(name);
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        return CpuSet::parse(text.trim()).map(Some).map_err(|e| HostError::Parse {
                            path,
                            what: e.to_string(),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(source) => return Err(HostError::Io { path, source }),
                }
            }
            if at == top {
                break;
            }
            current = at.parent();
        }
        Ok(None)
    }

    fn devices_of(&self, mounts: &[Mount], memberships: &[Membership]) -> Result<DeviceFacts, HostError> {
        if let Some(mount) = mounts.iter().find(|m| m.fs_type == "cgroup" && m.has_option("devices")) {
            let Some(dir) = membership_dir(mount, CgroupVersion::V1, "devices", memberships) else {
                return Ok(DeviceFacts::Unknown);
            };
            let path = self.path(&dir).join("devices.list");
            let rules = match std::fs::read_to_string(&path) {
                Ok(text) => parse_devices_list(&text),
                Err(e) if is_denied_or_missing(&e) => return Ok(DeviceFacts::Unknown),
                Err(source) => return Err(HostError::Io { path, source }),
            };
            let rules = rules
                .into_iter()
                .map(|mut rule| {
                    rule.numa = self.device_numa(&rule.text);
                    rule
                })
                .collect();
            return Ok(DeviceFacts::V1 { path: dir, rules });
        }
        if mounts.iter().any(|m| m.fs_type == "cgroup2") && memberships.iter().any(|m| m.hierarchy == 0) {
            return Ok(DeviceFacts::V2);
        }
        Ok(DeviceFacts::Unknown)
    }

    /// The NUMA node of the device a `c M:m`/`b M:m` rule names, from
    /// `/sys/dev/<char|block>/M:m/device/numa_node` (-1: none).
    fn device_numa(&self, rule: &str) -> Option<usize> {
        let mut words = rule.split_whitespace();
        let kind = match words.next()? {
            "c" => "char",
            "b" => "block",
            _ => return None,
        };
        let numbers = words.next().filter(|n| !n.contains('*'))?;
        let path = self
            .path(Path::new("/sys/dev"))
            .join(kind)
            .join(numbers)
            .join("device/numa_node");
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }
}

fn read(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|source| HostError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn is_denied_or_missing(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound)
        || matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::ESRCH))
}

fn to_nodes(set: &CpuSet) -> Vec<usize> {
    set.iter().map(|n| n as usize).collect()
}

/// The value of `Field:` in a `status` text.
pub fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':').map(str::trim))
}

/// One line of `/proc/PID/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// 0 for cgroup v2.
    pub hierarchy: u32,
    /// v1 controllers (`cpu,cpuacct`), empty for v2.
    pub controllers: Vec<String>,
    pub path: String,
}

/// `/proc/PID/cgroup` text; lines that do not read are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy = parts.next()?.parse().ok()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some(Membership {
                hierarchy,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A mount from `mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The directory of the filesystem mounted here (`/` normally; a
    /// cgroup namespace's root otherwise).
    pub root: PathBuf,
    pub point: PathBuf,
    pub fs_type: String,
    pub super_options: String,
}

impl Mount {
    fn has_option(&self, option: &str) -> bool {
        self.super_options.split(',').any(|o| o == option)
    }
}

/// `mountinfo` text; lines that do not read are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fields = before.split(' ');
            let root = fields.nth(3)?;
            let point = fields.next()?;
            let mut after = after.split(' ');
            let fs_type = after.next()?;
            let _source = after.next()?;
            let super_options = after.next()?;
            Some(Mount {
                root: unescape_mount_path(root).into(),
                point: unescape_mount_path(point).into(),
                fs_type: fs_type.to_string(),
                super_options: super_options.to_string(),
            })
        })
        .collect()
}

/// The directory of the cgroup holding `controller` (v1) or the v2 cgroup,
/// under `mount`; `None` when the process's path lies outside what is
/// mounted there.
fn membership_dir(
    mount: &Mount,
    version: CgroupVersion,
    controller: &str,
    memberships: &[Membership],
) -> Option<PathBuf> {
    let membership = memberships.iter().find(|m| match version {
        CgroupVersion::V2 => m.hierarchy == 0 && m.controllers.is_empty(),
        CgroupVersion::V1 => m.controllers.iter().any(|c| c == controller),
    })?;
    let relative = Path::new(&membership.path).strip_prefix(&mount.root).ok()?;
    Some(if relative.as_os_str().is_empty() {
        mount.point.clone()
    } else {
        mount.point.join(relative)
    })
}

/// `numa_maps` text: each mapping's `N<node>=<pages>` times its page size
/// (`kernelpagesize_kB`), as anonymous, huge page or file memory.
pub fn parse_numa_maps(text: &str) -> NumaMaps {
    let mut maps = NumaMaps::default();
    let mut binds: Option<Option<String>> = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(_address), Some(policy)) = (words.next(), words.next()) else {
            continue;
        };
        let bind = policy
            .strip_prefix("bind")
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, n)| n.to_string());
        binds = match binds {
            None => Some(bind),
            Some(previous) if previous == bind => Some(previous),
            Some(_) => Some(None),
        };
        let mut page_kib: u64 = 4;
        let mut pages: Vec<(usize, u64)> = Vec::new();
        let (mut file, mut anon, mut huge) = (false, false, false);
        for word in words {
            if let Some(value) = word.strip_prefix("kernelpagesize_kB=") {
                page_kib = value.parse().unwrap_or(4);
            } else if word.starts_with("file=") {
                file = true;
            } else if word.starts_with("anon=") || word == "heap" || word == "stack" {
                anon = true;
            } else if word == "huge" {
                huge = true;
            } else if let Some((node, count)) = word.strip_prefix('N').and_then(|w| w.split_once('='))
                && let (Ok(node), Ok(count)) = (node.parse(), count.parse())
            {
                pages.push((node, count));
            }
        }
        let into = if huge {
            &mut maps.huge_pages
        } else if file && !anon {
            &mut maps.file
        } else {
            &mut maps.anonymous
        };
        for (node, count) in pages {
            *into.entry(node).or_default() += count * page_kib * 1024;
        }
    }
    maps.bind = binds
        .flatten()
        .and_then(|nodes| CpuSet::parse(&nodes).ok())
        .map(|set| to_nodes(&set));
    maps
}

/// The variables named in `keep` from `environ` bytes (`NAME=value\0`…).
pub fn parse_environ(bytes: &[u8], keep: &[&str]) -> BTreeMap<String, String> {
    bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let entry = std::str::from_utf8(entry).ok()?;
            let (name, value) = entry.split_once('=')?;
            keep.contains(&name).then(|| (name.to_string(), value.to_string()))
        })
        .collect()
}

/// `devices.list` text: one rule a line (`a *:* rwm`, `c 195:0 rw`).
pub fn parse_devices_list(text: &str) -> Vec<DeviceRule> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| DeviceRule {
            text: line.to_string(),
            all: line.starts_with("a "),
            numa: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn numa_maps_count_pages_by_kind_and_page_size() {
        let text = "\
55d0 default file=/usr/bin/sleep mapped=2 N0=2 kernelpagesize_kB=4
55e0 default file=/usr/bin/sleep anon=1 dirty=1 N1=1 kernelpagesize_kB=4
5600 default heap anon=256 dirty=256 N0=200 N1=56 kernelpagesize_kB=4
7f00 default file=/dev/hugepages/x huge dirty=2 N1=2 kernelpagesize_kB=2048
7f10 default anon=512 dirty=512 N0=512 kernelpagesize_kB=4
7ffc default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";
        let maps = parse_numa_maps(text);
        assert_eq!(maps.file, BTreeMap::from([(0, 2 * 4096)]));
        assert_eq!(
            maps.anonymous,
            BTreeMap::from([(0, (200 + 512 + 3) * 4096), (1, 57 * 4096)])
        );
        assert_eq!(maps.huge_pages, BTreeMap::from([(1, 4 * MIB)]));
        assert_eq!(maps.bind, None);
    }

    #[test]
    fn a_bind_policy_on_every_mapping_is_the_process_binding() {
        let bound = "1000 bind:1 anon=1 N1=1 kernelpagesize_kB=4\n2000 bind:1 file=/x N0=1 kernelpagesize_kB=4\n";
        assert_eq!(parse_numa_maps(bound).bind, Some(vec![1]));
        let mixed = "1000 bind:1 anon=1 N1=1 kernelpagesize_kB=4\n2000 default N0=1 kernelpagesize_kB=4\n";
        assert_eq!(parse_numa_maps(mixed).bind, None);
        let static_flag = "1000 bind=static:0-1 anon=1 N1=1 kernelpagesize_kB=4\n";
        assert_eq!(parse_numa_maps(static_flag).bind, Some(vec![0, 1]));
    }

    #[test]
    fn cgroup_lines_and_mounts_resolve_to_directories() {
        let memberships = parse_proc_cgroup(
            "12:cpuset:/kubepods/pod1/abc\n5:devices:/kubepods/pod1/abc\n1:name=systemd:/x\n0::/user.slice\n",
        );
        assert_eq!(memberships.len(), 4);
        let mounts = parse_mountinfo(
            "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
             41 31 0:38 /kubepods /sys/fs/cgroup/ns\\040root rw - cgroup2 cgroup2 rw\n",
        );
        assert_eq!(
            membership_dir(&mounts[0], CgroupVersion::V1, "cpuset", &memberships),
            Some(PathBuf::from("/sys/fs/cgroup/cpuset/kubepods/pod1/abc"))
        );
        // The v2 mount's root is /kubepods; /user.slice is not under it.
        assert_eq!(membership_dir(&mounts[1], CgroupVersion::V2, "", &memberships), None);
        assert_eq!(mounts[1].point, PathBuf::from("/sys/fs/cgroup/ns root"));
    }

    #[test]
    fn environ_keeps_only_the_names_asked_for() {
        let bytes = b"PATH=/bin\0TOPOALIGN_CPUS=1-2\0SECRET=x\0NVIDIA_VISIBLE_DEVICES=GPU-a\0odd\0";
        assert_eq!(
            parse_environ(bytes, &["TOPOALIGN_CPUS", "NVIDIA_VISIBLE_DEVICES"]),
            BTreeMap::from([
                ("NVIDIA_VISIBLE_DEVICES".to_string(), "GPU-a".to_string()),
                ("TOPOALIGN_CPUS".to_string(), "1-2".to_string()),
            ])
        );
    }

    #[test]
    fn this_process_reads() -> Result<(), HostError> {
        let me = Host::live().process(std::process::id(), &["PATH"])?;
        assert!(!me.cpus.is_empty());
        assert!(!me.mems_allowed.is_empty());
        assert!(me.numa_maps.is_some_and(|m| !m.anonymous.is_empty()));
        assert!(me.environment.is_some());
        Ok(())
    }

    #[test]
    fn a_missing_process_says_so() {
        let error = Host::live().process(u32::MAX - 1, &[]);
        assert!(matches!(error, Err(HostError::NoProcess { .. })), "{error:?}");
    }
}

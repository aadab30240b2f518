//! Cpuset cgroups, one leaf per allocation.
//!
//! Owns: finding the cpuset hierarchy in `/proc/self/mountinfo`
//! ([`find_cpuset_mount`]), preparing topoalign's parent cgroup
//! ([`Cpusets::open`]), and the leaf operations — create and write
//! `cpuset.cpus` / `cpuset.mems` ([`Cpusets::apply`]), move a process in
//! ([`Cpusets::attach`]), list its processes, and remove it after moving
//! stragglers back to the hierarchy's root ([`Cpusets::remove`]).
//!
//! Names are never taken from users: a leaf is `alloc-<id>` where the id is
//! checked by [`LeafName::for_allocation`] (lowercase letters, digits and
//! dashes), so no request can name a path outside the parent.
//!
//! v1 (the `cpuset` controller on its own mount, as hybrid hosts have it):
//! a new cgroup starts with empty `cpuset.cpus`/`cpuset.mems` and refuses
//! tasks until both are written, so the parent copies the root's sets and
//! every leaf writes both before a process is attached. v2: the controller
//! must be listed in the root's `cgroup.controllers` and enabled with
//! `+cpuset` in `cgroup.subtree_control` of the root and the parent.
//!
//! Must not touch: anything outside `<mount>/<parent>` except moving
//! processes back to `<mount>/cgroup.procs`.

use std::io;
use std::path::{Path, PathBuf};

use topoalign_model::CpuSet;

use crate::node_list;
pub use topoalign_host::CgroupVersion;
use topoalign_host::unescape_mount_path;

/// Where the cpuset hierarchy is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpusetMount {
    pub version: CgroupVersion,
    pub path: PathBuf,
}

/// Why a cpuset cgroup could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Neither a v1 `cpuset` mount nor a cgroup2 mount was found.
    #[error("no cpuset cgroup hierarchy is mounted (looked for cgroup v1 `cpuset` and cgroup2 in {0})")]
    NotMounted(PathBuf),
    /// cgroup2 is mounted but its root does not offer `cpuset`.
    #[error("cgroup2 at {0} does not offer the cpuset controller (not in cgroup.controllers)")]
    NoCpusetController(PathBuf),
    /// A name that could escape its parent or is not ours.
    #[error("{0:?} is not a valid cgroup name: use letters, digits, '.', '_' and '-', not starting with '.'")]
    BadName(String),
    /// A cgroupfs operation failed; `path` is the file or directory.
    #[error("{operation} {path}: {source}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl CgroupError {
    /// Whether the error means "not allowed here" (read-only cgroupfs, not
    /// root, no delegation) rather than something broken.
    pub fn is_permission(&self) -> bool {
        match self {
            CgroupError::Io { source, .. } => {
                matches!(source.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::EROFS))
            }
            _ => false,
        }
    }
}

fn io_error<'a>(operation: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        operation,
        path: path.to_path_buf(),
        source,
    }
}

/// The leaf cgroup of one allocation: `alloc-<id>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LeafName(String);

impl LeafName {
    const PREFIX: &'static str = "alloc-";

    /// The leaf for allocation `id`.
    ///
    /// # Errors
    /// [`CgroupError::BadName`] unless `id` is 1–64 lowercase ASCII
    /// letters, digits or dashes, starting with a letter or digit.
    pub fn for_allocation(id: &str) -> Result<LeafName, CgroupError> {
        let valid = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !id.starts_with('-');
        if valid {
            Ok(LeafName(format!("{}{id}", Self::PREFIX)))
        } else {
            Err(CgroupError::BadName(id.to_string()))
        }
    }

    /// The allocation id of a directory name, if it is one of our leaves.
    pub fn allocation_id(dir_name: &str) -> Option<&str> {
        let id = dir_name.strip_prefix(Self::PREFIX)?;
        LeafName::for_allocation(id).ok().map(|_| id)
    }

    /// The directory name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A parent directory name: a single path component of safe characters.
fn check_parent_name(name: &str) -> Result<(), CgroupError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(CgroupError::BadName(name.to_string()))
    }
}

/// Finds the cpuset hierarchy in `/proc/self/mountinfo` text: a v1
/// `cgroup` mount whose super options include `cpuset` wins (on hybrid
/// hosts that is where the controller is), otherwise the first `cgroup2`
/// mount.
pub fn find_cpuset_mount(mountinfo: &str) -> Option<CpusetMount> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        // `id parent major:minor root mountpoint options [optional...] - fstype source superoptions`
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = before.split(' ').nth(4);
        let mut after = after.split(' ');
        let (Some(fs_type), Some(_source), Some(super_options)) = (after.next(), after.next(), after.next()) else {
            continue;
        };
        let Some(mount_point) = mount_point else { continue };
        let path = PathBuf::from(unescape_mount_path(mount_point));
        match fs_type {
            "cgroup" if super_options.split(',').any(|o| o == "cpuset") => {
                return Some(CpusetMount {
                    version: CgroupVersion::V1,
                    path,
                });
            }
            "cgroup2" if v2.is_none() => {
                v2 = Some(CpusetMount {
                    version: CgroupVersion::V2,
                    path,
                });
            }
            _ => {}
        }
    }
    v2
}

/// topoalign's parent cgroup in the cpuset hierarchy, ready for leaves.
#[derive(Clone, Debug)]
pub struct Cpusets {
    version: CgroupVersion,
    mount: PathBuf,
    parent: PathBuf,
}

impl Cpusets {
    /// Finds the hierarchy in `<proc_root>/self/mountinfo` and prepares
    /// `<mount>/<parent_name>`.
    ///
    /// # Errors
    /// As [`Cpusets::open`], plus [`CgroupError::NotMounted`].
    pub fn detect(proc_root: &Path, parent_name: &str) -> Result<Cpusets, CgroupError> {
        let path = proc_root.join("self/mountinfo");
        let text = std::fs::read_to_string(&path).map_err(io_error("read", &path))?;
        let mount = find_cpuset_mount(&text).ok_or(CgroupError::NotMounted(path))?;
        Cpusets::open(mount, parent_name)
    }

    /// Prepares `<mount>/<parent_name>` (creating it if needed) so leaves
    /// can be made under it. This is also the writability probe: on a host
    /// where cgroups are not ours to write, it fails with an error for which
    /// [`CgroupError::is_permission`] holds.
    ///
    /// # Errors
    /// [`CgroupError`] naming the file that could not be read or written.
    pub fn open(mount: CpusetMount, parent_name: &str) -> Result<Cpusets, CgroupError> {
        check_parent_name(parent_name)?;
        let parent = mount.path.join(parent_name);
        match mount.version {
            CgroupVersion::V1 => {
                create_dir(&parent)?;
                // A v1 cpuset starts empty and refuses tasks until both sets
                // are written; give the parent everything the root has.
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let all = read_trimmed(&mount.path.join(file))?;
                    write_file(&parent.join(file), &all)?;
                }
            }
            CgroupVersion::V2 => {
                let controllers = read_trimmed(&mount.path.join("cgroup.controllers"))?;
                if !controllers.split_whitespace().any(|c| c == "cpuset") {
                    return Err(CgroupError::NoCpusetController(mount.path.clone()));
                }
                enable_cpuset(&mount.path)?;
                create_dir(&parent)?;
                enable_cpuset(&parent)?;
            }
        }
        Ok(Cpusets {
            version: mount.version,
            mount: mount.path,
            parent,
        })
    }

    /// v1 or v2.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// `<mount>/<parent>`.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// The directory of a leaf.
    pub fn leaf_path(&self, leaf: &LeafName) -> PathBuf {
        self.parent.join(leaf.as_str())
    }

    /// Creates the leaf if needed and sets its CPUs and memory nodes
    /// (`cpus` before `mems`, both before any process is attached).
    ///
    /// # Errors
    /// [`CgroupError::Io`]; v1 refuses CPUs outside the parent with ERANGE.
    pub fn apply(&self, leaf: &LeafName, cpus: &CpuSet, mems: &[usize]) -> Result<(), CgroupError> {
        let dir = self.leaf_path(leaf);
        create_dir(&dir)?;
        write_file(&dir.join("cpuset.cpus"), &cpus.to_string())?;
        write_file(&dir.join("cpuset.mems"), &node_list(mems))
    }

    /// Moves process `pid` (all its threads) into the leaf.
    ///
    /// # Errors
    /// [`CgroupError::Io`], e.g. ESRCH when the process is gone.
    pub fn attach(&self, leaf: &LeafName, pid: u32) -> Result<(), CgroupError> {
        write_file(&self.leaf_path(leaf).join("cgroup.procs"), &pid.to_string())
    }

    /// The processes in the leaf; `None` when the leaf does not exist.
    ///
    /// # Errors
    /// [`CgroupError::Io`] for a leaf that exists but cannot be read.
    pub fn processes(&self, leaf: &LeafName) -> Result<Option<Vec<u32>>, CgroupError> {
        let dir = self.leaf_path(leaf);
        let path = dir.join("cgroup.procs");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(dir.is_dir().then(Vec::new)),
            Err(e) => Err(io_error("read", &path)(e)),
        }
    }

    /// Removes the leaf. Processes still in it are moved back to the
    /// hierarchy's root first (they keep running, no longer confined).
    /// A leaf that does not exist is already removed.
    ///
    /// # Errors
    /// [`CgroupError::Io`] when the leaf stays busy.
    pub fn remove(&self, leaf: &LeafName) -> Result<(), CgroupError> {
        let dir = self.leaf_path(leaf);
        let root_procs = self.mount.join("cgroup.procs");
        // A process may fork while we move its siblings; a few passes
        // settle it (bounded: a fork bomb is not ours to win against).
        let mut last_error = None;
        for _ in 0..5 {
            let Some(pids) = self.processes(leaf)? else {
                return Ok(());
            };
            for pid in pids {
                // ESRCH: it exited meanwhile, which is what we want anyway.
                if let Err(e) = std::fs::write(&root_procs, pid.to_string())
                    && e.raw_os_error() != Some(libc::ESRCH)
                {
                    return Err(io_error("move a process out to", &root_procs)(e));
                }
            }
            match std::fs::remove_dir(&dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => last_error = Some(e),
            }
        }
        Err(io_error("remove", &dir)(
            last_error.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EBUSY)),
        ))
    }

    /// The allocation ids of the leaves that exist under the parent.
    ///
    /// # Errors
    /// [`CgroupError::Io`] when the parent cannot be listed.
    pub fn leaves(&self) -> Result<Vec<String>, CgroupError> {
        let entries = std::fs::read_dir(&self.parent).map_err(io_error("list", &self.parent))?;
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name();
                LeafName::allocation_id(&name.to_string_lossy()).map(str::to_string)
            })
            .collect();
        ids.sort();
        Ok(ids)
    }
}

fn create_dir(path: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_error("create", path)(e)),
    }
}

fn read_trimmed(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .map_err(io_error("read", path))
}

fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(io_error("write", path))
}

/// Adds `+cpuset` to a v2 cgroup's `cgroup.subtree_control` unless it is
/// there already (writing it again is harmless, but a read avoids needless
/// writes on hosts where the file is read-only and the controller already
/// on).
fn enable_cpuset(dir: &Path) -> Result<(), CgroupError> {
    let control = dir.join("cgroup.subtree_control");
    let current = read_trimmed(&control)?;
    if current.split_whitespace().any(|c| c == "cpuset") {
        return Ok(());
    }
    write_file(&control, "+cpuset")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
36 31 0:31 / /sys/fs/cgroup/cpu\\040set rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpuset
37 31 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
";

    const UNIFIED: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn finds_the_hierarchy_that_holds_cpuset() {
        for (mountinfo, expected) in [
            (
                HYBRID,
                Some(CpusetMount {
                    version: CgroupVersion::V1,
                    path: "/sys/fs/cgroup/cpu set".into(),
                }),
            ),
            (
                UNIFIED,
                Some(CpusetMount {
                    version: CgroupVersion::V2,
                    path: "/sys/fs/cgroup".into(),
                }),
            ),
            ("25 30 0:23 / /sys rw - sysfs sysfs rw\nnonsense line\n", None),
        ] {
            assert_eq!(find_cpuset_mount(mountinfo), expected);
        }
    }

    #[test]
    fn leaf_names_cannot_escape_the_parent() {
        assert_eq!(
            LeafName::for_allocation("a17").map(|l| l.0).ok().as_deref(),
            Some("alloc-a17")
        );
        for bad in ["", "../x", "a/b", "A1", "-a", ".", "a b", "a\0", &"a".repeat(65)] {
            assert!(LeafName::for_allocation(bad).is_err(), "{bad:?}");
        }
        assert_eq!(LeafName::allocation_id("alloc-a3"), Some("a3"));
        assert_eq!(LeafName::allocation_id("alloc-../x"), None);
        assert_eq!(LeafName::allocation_id("user.slice"), None);
        for bad in ["", "..", ".hidden", "a/b", "a b"] {
            assert!(check_parent_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_parent_name("topoalign-test_1.x").is_ok());
    }

    /// A fake v1 cpuset mount: the root's files as a kernel would show them.
    fn fake_v1(root: &Path) -> CpusetMount {
        std::fs::write(root.join("cpuset.cpus"), "0-7\n").ok();
        std::fs::write(root.join("cpuset.mems"), "0-1\n").ok();
        std::fs::write(root.join("cgroup.procs"), "").ok();
        CpusetMount {
            version: CgroupVersion::V1,
            path: root.to_path_buf(),
        }
    }

    #[test]
    fn v1_parent_copies_the_roots_sets_and_leaves_write_both() -> Result<(), CgroupError> {
        let dir = tempfile::tempdir().map_err(io_error("tempdir", Path::new("/tmp")))?;
        let cpusets = Cpusets::open(fake_v1(dir.path()), "topoalign")?;
        let parent = dir.path().join("topoalign");
        assert_eq!(
            std::fs::read_to_string(parent.join("cpuset.cpus")).ok().as_deref(),
            Some("0-7")
        );
        assert_eq!(
            std::fs::read_to_string(parent.join("cpuset.mems")).ok().as_deref(),
            Some("0-1")
        );

        let leaf = LeafName::for_allocation("a1")?;
        cpusets.apply(&leaf, &CpuSet::from_iter([2, 3, 5]), &[1])?;
        let leaf_dir = parent.join("alloc-a1");
        assert_eq!(
            std::fs::read_to_string(leaf_dir.join("cpuset.cpus")).ok().as_deref(),
            Some("2-3,5")
        );
        assert_eq!(
            std::fs::read_to_string(leaf_dir.join("cpuset.mems")).ok().as_deref(),
            Some("1")
        );
        // A plain directory has no cgroup.procs until something attaches.
        cpusets.attach(&leaf, 4242)?;
        assert_eq!(cpusets.processes(&leaf)?, Some(vec![4242]));
        assert_eq!(cpusets.leaves()?, vec!["a1".to_string()]);
        // Files in a fake leaf make rmdir fail; clear them as the kernel would.
        for file in ["cpuset.cpus", "cpuset.mems", "cgroup.procs"] {
            std::fs::remove_file(leaf_dir.join(file)).ok();
        }
        cpusets.remove(&leaf)?;
        assert!(!leaf_dir.exists());
        assert_eq!(cpusets.processes(&leaf)?, None);
        cpusets.remove(&leaf)?;
        Ok(())
    }

    #[test]
    fn v2_needs_the_controller_and_enables_it_down_to_the_parent() -> Result<(), CgroupError> {
        let dir = tempfile::tempdir().map_err(io_error("tempdir", Path::new("/tmp")))?;
        let root = dir.path();
        let mount = CpusetMount {
            version: CgroupVersion::V2,
            path: root.to_path_buf(),
        };
        std::fs::write(root.join("cgroup.controllers"), "cpu io memory pids\n").ok();
        std::fs::write(root.join("cgroup.subtree_control"), "").ok();
        assert!(matches!(
            Cpusets::open(mount.clone(), "topoalign"),
            Err(CgroupError::NoCpusetController(_))
        ));

        std::fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory pids\n").ok();
        // The kernel creates subtree_control with the directory; fake it.
        std::fs::create_dir(root.join("topoalign")).ok();
        std::fs::write(root.join("topoalign/cgroup.subtree_control"), "").ok();
        let cpusets = Cpusets::open(mount, "topoalign")?;
        assert_eq!(cpusets.version(), CgroupVersion::V2);
        assert_eq!(
            std::fs::read_to_string(root.join("cgroup.subtree_control"))
                .ok()
                .as_deref(),
            Some("+cpuset")
        );
        assert_eq!(
            std::fs::read_to_string(root.join("topoalign/cgroup.subtree_control"))
                .ok()
                .as_deref(),
            Some("+cpuset")
        );
        Ok(())
    }

    #[test]
    fn a_read_only_hierarchy_is_a_permission_error() {
        let error = CgroupError::Io {
            operation: "create",
            path: "/sys/fs/cgroup/topoalign".into(),
            source: io::Error::from_raw_os_error(libc::EROFS),
        };
        assert!(error.is_permission());
        assert!(!CgroupError::NotMounted("/proc/self/mountinfo".into()).is_permission());
    }

    /// On a host where cgroups are ours to write (root, v1 or v2 with the
    /// cpuset controller), a process attached to a leaf runs on the leaf's
    /// CPUs. Elsewhere there is nothing to check here: the agent falls back
    /// to affinity, which `spawn`'s tests cover.
    #[test]
    fn live_leaf_confines_an_attached_process() -> Result<(), Box<dyn std::error::Error>> {
        use std::io::{BufRead, Write};
        let parent_name = format!("topoalign-test-{}", std::process::id());
        let cpusets = match Cpusets::detect(Path::new("/proc"), &parent_name) {
            Ok(cpusets) => cpusets,
            Err(error) => {
                eprintln!("cgroups not writable here ({error}); nothing to check");
                return Ok(());
            }
        };
        let mems = read_trimmed(&cpusets.parent().join(match cpusets.version() {
            CgroupVersion::V1 => "cpuset.mems",
            CgroupVersion::V2 => "cpuset.mems.effective",
        }))?;
        let first_node: usize = mems.split([',', '-']).next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let own = std::fs::read_to_string("/proc/self/status")?;
        let allowed = own
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("0")
            .trim();
        let last = CpuSet::parse(allowed)?.iter().max().unwrap_or(0);

        let leaf = LeafName::for_allocation("live-test")?;
        cpusets.apply(&leaf, &CpuSet::from_iter([last]), &[first_node])?;
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "read go; grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        cpusets.attach(&leaf, child.id())?;
        assert_eq!(cpusets.processes(&leaf)?, Some(vec![child.id()]));
        if let Some(stdin) = child.stdin.as_mut() {
            writeln!(stdin, "go")?;
        }
        let mut lines = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            for line in std::io::BufReader::new(stdout).lines() {
                lines.push(line?);
            }
        }
        child.wait()?;
        cpusets.remove(&leaf)?;
        std::fs::remove_dir(cpusets.parent())?;
        let text = lines.join("\n");
        assert!(text.contains(&format!("Cpus_allowed_list:\t{last}")), "{text}");
        assert!(text.contains(&format!("Mems_allowed_list:\t{first_node}")), "{text}");
        Ok(())
    }
}

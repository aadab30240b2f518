//! Which process holds an allocation, and whether it still runs.
//!
//! Owns: reading `/proc/<pid>/stat` and the boot id ([`Procfs`]). A pid
//! alone is not an identity — pids are reused, and all of them die with a
//! reboot — so a [`ProcessIdentity`] is the pid, the process's start time
//! (clock ticks since boot, field 22 of `stat`) and the boot id. The proc
//! root is injectable for tests.

use std::io;
use std::path::{Path, PathBuf};

/// A process, identified so that a reused pid or a reboot does not match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
}

/// A procfs mount.
#[derive(Clone, Debug)]
pub struct Procfs {
    root: PathBuf,
}

impl Default for Procfs {
    fn default() -> Self {
        Procfs::new("/proc")
    }
}

impl Procfs {
    /// The procfs at `root` (`/proc` on a live system).
    pub fn new(root: impl Into<PathBuf>) -> Procfs {
        Procfs { root: root.into() }
    }

    /// The root path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This boot's id.
    ///
    /// # Errors
    /// The read error.
    pub fn boot_id(&self) -> io::Result<String> {
        std::fs::read_to_string(self.root.join("sys/kernel/random/boot_id")).map(|s| s.trim().to_string())
    }

    /// The identity of running process `pid`; `None` when there is no such
    /// process or it has exited and only its zombie remains.
    ///
    /// # Errors
    /// A read error other than "no such process", or a `stat` line that
    /// does not parse.
    pub fn identify(&self, pid: u32) -> io::Result<Option<ProcessIdentity>> {
        let path = self.root.join(pid.to_string()).join("stat");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ESRCH) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let (state, start_time) = parse_stat(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: unreadable stat line", path.display()),
            )
        })?;
        if matches!(state, 'Z' | 'X') {
            return Ok(None);
        }
        Ok(Some(ProcessIdentity {
            pid,
            start_time,
            boot_id: self.boot_id()?,
        }))
    }

    /// Whether the process `identity` names still runs: same boot, same pid
    /// and the same start time.
    ///
    /// # Errors
    /// As [`Procfs::identify`].
    pub fn is_running(&self, identity: &ProcessIdentity) -> io::Result<bool> {
        if self.boot_id()? != identity.boot_id {
            return Ok(false);
        }
        Ok(self
            .identify(identity.pid)?
            .is_some_and(|now| now.start_time == identity.start_time))
    }
}

/// The state letter and start time of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may itself contain spaces
/// and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<(char, u64)> {
    let after_name = &line[line.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Field 3 is the state; field 22 is 19 fields later.
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some((state, start_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_awkward_names_parse() {
        let fields: Vec<String> = (4..=52).map(|n| n.to_string()).collect();
        let tail = fields.join(" ");
        for (name, state) in [("(sleep)", 'S'), ("(a) b) (c)", 'R'), ("()", 'Z')] {
            let line = format!("123 {name} {state} {tail}\n");
            assert_eq!(parse_stat(&line), Some((state, 22)), "{line}");
        }
        assert_eq!(parse_stat("123 (x) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_running_and_a_changed_start_time_is_not() -> io::Result<()> {
        let procfs = Procfs::default();
        let me = procfs.identify(std::process::id())?;
        let Some(me) = me else {
            panic!("the test process must be visible in /proc");
        };
        assert!(procfs.is_running(&me)?);
        let reused = ProcessIdentity {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert!(!procfs.is_running(&reused)?);
        let other_boot = ProcessIdentity {
            boot_id: "another-boot".into(),
            ..me
        };
        assert!(!procfs.is_running(&other_boot)?);
        Ok(())
    }

    #[test]
    fn an_exited_and_reaped_child_is_gone() -> io::Result<()> {
        let procfs = Procfs::default();
        let mut child = std::process::Command::new("true").spawn()?;
        let pid = child.id();
        child.wait()?;
        assert_eq!(procfs.identify(pid)?, None);
        Ok(())
    }
}

//! One owner per state directory: an exclusive `flock` on `<dir>/lock`,
//! held by the agent for its whole life and by `topoalign run
//! --standalone` for each read-modify-write. Two agents on one directory
//! would hand out the same CPUs twice; the lock makes that impossible.
//! The file also names its holder, so the refusal can say who it is.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Who takes the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The agent: fails at once when the directory is taken.
    Agent,
    /// `run --standalone`: waits for other standalone runs, fails when an
    /// agent owns the directory.
    Standalone,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Standalone => "standalone",
        }
    }
}

/// The held lock; dropping it releases the directory.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    dir: PathBuf,
}

impl StateLock {
    /// Creates `dir` (mode 0700) if needed and locks it for `role`.
    ///
    /// # Errors
    /// I/O errors naming the path; `WouldBlock` with the holder's name when
    /// the directory is taken (and the caller must not wait).
    pub fn acquire(dir: &Path, role: Role) -> io::Result<StateLock> {
        let named = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| named(e, "cannot create the state directory"))?;
        let path = dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| named(e, "cannot open the lock in"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let agent_holds = holder.starts_with("agent");
                if role == Role::Agent || agent_holds {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "the state directory {} is in use by {}; {}",
                            dir.display(),
                            if holder.is_empty() {
                                "another process".to_string()
                            } else {
                                holder.replace(' ', " pid ")
                            },
                            if agent_holds && role == Role::Standalone {
                                "an agent owns it: run without --standalone to ask the agent"
                            } else {
                                "only one agent may own a state directory"
                            }
                        ),
                    ));
                }
                file.lock().map_err(|e| named(e, "cannot lock"))?;
            }
            Err(TryLockError::Error(e)) => return Err(named(e, "cannot lock")),
        }
        file.set_len(0)
            .and_then(|()| file.write_all(format!("{} {}\n", role.as_str(), std::process::id()).as_bytes()))
            .map_err(|e| named(e, "cannot write the lock in"))?;
        Ok(StateLock {
            _file: file,
            dir: dir.to_path_buf(),
        })
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_agent_per_directory_and_standalone_runs_stay_out() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let state = dir.path().join("state");
        let held = StateLock::acquire(&state, Role::Agent)?;
        assert_eq!(std::fs::metadata(&state)?.permissions().mode_bits(), 0o700);
        for role in [Role::Agent, Role::Standalone] {
            let error = StateLock::acquire(&state, role)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                error.contains(&format!("in use by agent pid {}", std::process::id())),
                "{error}"
            );
        }
        drop(held);
        let _standalone = StateLock::acquire(&state, Role::Standalone)?;
        Ok(())
    }

    trait ModeBits {
        fn mode_bits(&self) -> u32;
    }
    impl ModeBits for std::fs::Permissions {
        fn mode_bits(&self) -> u32 {
            use std::os::unix::fs::PermissionsExt;
            self.mode() & 0o777
        }
    }
}

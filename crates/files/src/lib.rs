//! Reading files whose path comes from a configuration or a directory
//! listing — sysfs attributes, a kubelet's checkpoint files and
//! `config.yaml` — where something other than a regular file can sit:
//! opening a FIFO blocks until a writer appears (a command that never
//! returns, a daemon deaf to SIGTERM), and `/dev/zero` never ends.
//!
//! [`read_regular`] opens with `O_NONBLOCK` (so opening a FIFO returns at
//! once), checks the *opened* file's type with `fstat` (no window between
//! a check and the open), refuses anything but a regular file with an
//! error saying what was found, and reads at most a bound. [`read_any`] is
//! for a path a person named (`<(command)` is a pipe on purpose): a normal
//! open, the size bound alone. [`check_socket`] says whether a Unix socket
//! is where a socket should be, before a client connects to it.
//!
//! Owns: opening and the type check. Must not interpret contents. Errors
//! are `std::io::Error`s (`InvalidInput` for a wrong type or size); the
//! caller names the path.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use topoalign_model::human_bytes;

/// Whether the last component of a path may be a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Follow it (the file it points to must still be regular).
    Follow,
    /// Refuse it (`O_NOFOLLOW`): for files a privileged reader opens in a
    /// directory others may write.
    Refuse,
}

/// What a file type is, in words, for errors.
pub fn describe(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn wrong_type(found: FileType, wanted: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}, not {wanted}", describe(found)),
    )
}

/// Opens `path` for reading without blocking and returns it only when it
/// is a regular file (checked on the opened descriptor).
///
/// # Errors
/// The open error (`NotFound` for no file; `ELOOP` for a link refused by
/// [`Links::Refuse`]); `InvalidInput` naming what was found instead of a
/// regular file.
pub fn open_regular(path: &Path, links: Links) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(wrong_type(file_type, "a regular file"));
    }
    Ok(file)
}

/// The whole of a regular file of at most `limit` bytes, opened by
/// [`open_regular`].
///
/// # Errors
/// As [`open_regular`]; the read error; `InvalidInput` for a file larger
/// than `limit`.
pub fn read_regular(path: &Path, limit: u64, links: Links) -> io::Result<Vec<u8>> {
    read_bounded(open_regular(path, links)?, limit)
}

/// [`read_regular`], with no file at `path` as `None`.
///
/// # Errors
/// As [`read_regular`], but for `NotFound`.
pub fn read_regular_if_present(path: &Path, limit: u64, links: Links) -> io::Result<Option<Vec<u8>>> {
    match read_regular(path, limit, links) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if is_absent(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The whole of whatever `path` is (a path a person named: a pipe such as
/// `<(command)` is meant), at most `limit` bytes: a normal, blocking open.
///
/// # Errors
/// The open or read error; `InvalidInput` for more than `limit` bytes.
pub fn read_any(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_bounded(File::open(path)?, limit)
}

fn read_bounded(file: File, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("larger than {}", human_bytes(limit)),
        ));
    }
    Ok(bytes)
}

/// Whether the path names nothing: no file, or a directory on its way
/// that is a file.
pub fn is_absent(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::NotFound || error.raw_os_error() == Some(libc::ENOTDIR)
}

/// Checks that `path` is a Unix socket (following links, as a client
/// connecting does); `Ok(false)` when there is nothing there.
///
/// # Errors
/// The `stat` error; `InvalidInput` naming what is there instead.
pub fn check_socket(path: &Path) -> io::Result<bool> {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.file_type().is_socket() => Ok(true),
        Ok(metadata) => Err(wrong_type(metadata.file_type(), "a socket")),
        Err(error) if is_absent(&error) => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a panic is how a test reports failure

    use super::*;

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("cpu_manager_state");
        mkfifo(&fifo);
        // No writer: a blocking open would never return.
        let error = read_regular(&fifo, 1024, Links::Follow).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "a FIFO (named pipe), not a regular file");
        let error = read_regular_if_present(&fifo, 1024, Links::Refuse).unwrap_err();
        assert!(error.to_string().contains("FIFO"), "{error}");
        assert_eq!(
            check_socket(&fifo).unwrap_err().to_string(),
            "a FIFO (named pipe), not a socket"
        );
    }

    #[test]
    fn directories_devices_and_links_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = read_regular(dir.path(), 1024, Links::Follow).unwrap_err();
        assert_eq!(error.to_string(), "a directory, not a regular file");
        let error = read_regular(Path::new("/dev/zero"), 1024, Links::Follow).unwrap_err();
        assert_eq!(error.to_string(), "a character device, not a regular file");

        let target = dir.path().join("target");
        std::fs::write(&target, b"abc").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_regular(&link, 1024, Links::Follow).unwrap(), b"abc");
        let refused = read_regular(&link, 1024, Links::Refuse).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn absent_files_and_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        assert_eq!(read_regular_if_present(&file, 4, Links::Follow).unwrap(), None);
        assert!(!check_socket(&file).unwrap());
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5, Links::Follow).unwrap(), b"12345");
        let error = read_regular(&file, 4, Links::Follow).unwrap_err();
        assert_eq!(error.to_string(), "larger than 4 B");
        assert_eq!(read_any(&file, 5).unwrap(), b"12345");
        // A file on the way is "no such file" too.
        assert_eq!(
            read_regular_if_present(&file.join("x"), 4, Links::Follow).unwrap(),
            None
        );
        assert_eq!(
            check_socket(&file).unwrap_err().to_string(),
            "a regular file, not a socket"
        );
    }
}

//! [`Tree`]: the files a sysfs reader looks at, either under a directory
//! (the live `/`, or an unpacked capture) or inside a capture archive
//! (`.tar`, `.tar.gz`/`.tgz`, `.tar.bz2`, `.tar.xz`) held in memory.
//!
//! Owns: opening, decompressing and unpacking archives, reading and listing
//! by relative path, following symbolic links. Every error names its path
//! (`archive:member` inside archives). Must not interpret file contents.
//!
//! Every read is bounded by the size of what a real machine holds, not by
//! what a file claims: a file inside a directory tree must be a regular file
//! (opened non-blocking and its type checked on the descriptor, by
//! `topoalign-files`, so a FIFO cannot block and a
//! link to `/dev/zero` cannot fill memory) of at most [`MAX_FILE_BYTES`];
//! an archive member is at most as large, and the archive itself (packed
//! and unpacked) at most [`MAX_INPUT_BYTES`].

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::DiscoveryError;

/// Where files come from.
pub(crate) enum Tree {
    Directory { root: PathBuf },
    Archive(ArchiveTree),
}

/// An unpacked archive.
pub(crate) struct ArchiveTree {
    archive: PathBuf,
    files: HashMap<String, Vec<u8>>,
    symlinks: HashMap<String, String>,
    hardlinks: HashMap<String, String>,
    dirs: HashMap<String, BTreeSet<String>>,
}

/// How many symbolic links one lookup may follow before giving up (loops).
const MAX_LINKS: usize = 40;

/// The largest file discovery reads. A sysfs attribute is at most one page
/// (4-64 KiB); the largest file read is `/proc/cpuinfo`, about 1.5 KiB per
/// CPU, so 12 MiB on a machine of 8,192 CPUs.
pub(crate) const MAX_FILE_BYTES: u64 = 16 << 20;

/// The largest file a person names (a capture archive, an hwloc export, a
/// scenario), and the most an archive may unpack to (tar headers
/// included). Captures of the largest machines in the test set unpack to a
/// few MiB; this leaves room for machines a hundred times larger and stops
/// a decompression bomb long before it exhausts memory.
pub(crate) const MAX_INPUT_BYTES: u64 = 512 << 20;

/// Reads a whole file of at most `limit` bytes.
///
/// With `regular_only`, anything but a regular file is refused without
/// blocking (`topoalign_files::read_regular`: opened non-blocking, its
/// type checked on the open descriptor): opening a FIFO blocks until a
/// writer appears, and a device such as `/dev/zero` never ends. Without it
/// (a path a person named, which may be `<(command)`), the size bound alone
/// keeps the read finite.
///
/// # Errors
/// The open or read error; `InvalidInput` for a file of another type or
/// one larger than `limit`.
pub(crate) fn read_bounded(path: &Path, limit: u64, regular_only: bool) -> io::Result<Vec<u8>> {
    if regular_only {
        topoalign_files::read_regular(path, limit, topoalign_files::Links::Follow)
    } else {
        topoalign_files::read_any(path, limit)
    }
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("larger than {} MiB, more than any real machine's file", limit >> 20),
    )
}

impl Tree {
    /// Opens a directory, or an archive file.
    ///
    /// # Errors
    /// [`DiscoveryError::Io`] when the path cannot be read,
    /// [`DiscoveryError::Archive`] when a file is not a readable archive.
    pub(crate) fn open(path: &Path) -> Result<Tree, DiscoveryError> {
        let metadata = std::fs::metadata(path).map_err(|error| DiscoveryError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        if metadata.is_dir() {
            Ok(Tree::Directory {
                root: path.to_path_buf(),
            })
        } else {
            let bytes = read_bounded(path, MAX_INPUT_BYTES, false).map_err(|error| DiscoveryError::Io {
                path: path.to_path_buf(),
                error,
            })?;
            Ok(Tree::Archive(ArchiveTree::unpack(path, &bytes)?))
        }
    }

    /// The path to show a person for `rel`.
    pub(crate) fn display(&self, rel: &str) -> PathBuf {
        match self {
            Tree::Directory { root } => root.join(rel),
            Tree::Archive(archive) => PathBuf::from(format!("{}:{rel}", archive.archive.display())),
        }
    }

    /// The file's text; `None` when it does not exist.
    ///
    /// # Errors
    /// [`DiscoveryError::Io`] when it exists but cannot be read.
    pub(crate) fn read(&self, rel: &str) -> Result<Option<String>, DiscoveryError> {
        let io_error = |error| DiscoveryError::Io {
            path: self.display(rel),
            error,
        };
        match self {
            Tree::Directory { root } => match read_bounded(&root.join(rel), MAX_FILE_BYTES, true) {
                Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
                Err(e) if absent(&e) => Ok(None),
                Err(e) => Err(io_error(e)),
            },
            Tree::Archive(archive) => {
                let Some(resolved) = archive.resolve(rel) else {
                    return Ok(None);
                };
                if let Some(bytes) = archive.file(&resolved) {
                    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
                } else if archive.dirs.contains_key(&resolved) {
                    Err(io_error(io::Error::other("is a directory")))
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// The names in a directory, sorted; `None` when it does not exist.
    ///
    /// # Errors
    /// [`DiscoveryError::Io`] when it exists but cannot be listed.
    pub(crate) fn list(&self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError> {
        match self {
            Tree::Directory { root } => {
                let entries = match std::fs::read_dir(root.join(rel)) {
                    Ok(entries) => entries,
                    Err(e) if absent(&e) => return Ok(None),
                    Err(error) => {
                        return Err(DiscoveryError::Io {
                            path: self.display(rel),
                            error,
                        });
                    }
                };
                let mut names = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|error| DiscoveryError::Io {
                        path: self.display(rel),
                        error,
                    })?;
                    names.push(entry.file_name().to_string_lossy().into_owned());
                }
                names.sort();
                Ok(Some(names))
            }
            Tree::Archive(archive) => Ok(archive
                .resolve(rel)
                .and_then(|resolved| archive.dirs.get(&resolved))
                .map(|names| names.iter().cloned().collect())),
        }
    }

    /// Whether `rel` is a directory.
    pub(crate) fn is_dir(&self, rel: &str) -> bool {
        match self {
            Tree::Directory { root } => root.join(rel).is_dir(),
            Tree::Archive(archive) => archive.resolve(rel).is_some_and(|r| archive.dirs.contains_key(&r)),
        }
    }

    /// `rel` with every symbolic link followed, relative to the root; `None`
    /// when it does not exist or leads outside the root.
    pub(crate) fn resolve(&self, rel: &str) -> Option<String> {
        match self {
            Tree::Directory { root } => {
                let canonical_root = std::fs::canonicalize(root).ok()?;
                let canonical = std::fs::canonicalize(root.join(rel)).ok()?;
                let inside = canonical.strip_prefix(&canonical_root).ok()?;
                Some(inside.to_string_lossy().into_owned())
            }
            Tree::Archive(archive) => archive.resolve(rel),
        }
    }

    /// Every directory path in the tree ending with `suffix` (archives only;
    /// directories are not searched, they may be the whole live `/`).
    pub(crate) fn archive_dirs_ending_with(&self, suffix: &str) -> Vec<String> {
        match self {
            Tree::Directory { .. } => Vec::new(),
            Tree::Archive(archive) => archive
                .dirs
                .keys()
                .filter(|d| *d == suffix || d.ends_with(&format!("/{suffix}")))
                .cloned()
                .collect(),
        }
    }

    /// Whether the tree is an archive.
    pub(crate) fn is_archive(&self) -> bool {
        matches!(self, Tree::Archive(_))
    }
}

/// The error kinds that mean "not there" rather than "cannot read".
fn absent(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

impl ArchiveTree {
    /// Decompresses (by magic bytes, not by name) and unpacks an archive.
    ///
    /// # Errors
    /// [`DiscoveryError::Archive`] naming the archive for anything that is
    /// not a complete tar archive.
    fn unpack(path: &Path, bytes: &[u8]) -> Result<ArchiveTree, DiscoveryError> {
        ArchiveTree::unpack_limited(path, bytes, MAX_INPUT_BYTES)
    }

    /// [`ArchiveTree::unpack`] with `limit` unpacked bytes at most.
    fn unpack_limited(path: &Path, bytes: &[u8], limit: u64) -> Result<ArchiveTree, DiscoveryError> {
        let archive_error = |detail: String| DiscoveryError::Archive {
            path: path.to_path_buf(),
            detail,
        };
        let mut tree = ArchiveTree {
            archive: path.to_path_buf(),
            files: HashMap::new(),
            symlinks: HashMap::new(),
            hardlinks: HashMap::new(),
            dirs: HashMap::new(),
        };
        tree.dirs.insert(String::new(), BTreeSet::new());
        let result = if bytes.starts_with(&[0x1f, 0x8b]) {
            tree.read_tar(Bounded::new(flate2::read::MultiGzDecoder::new(bytes), limit))
        } else if bytes.starts_with(b"BZh") {
            tree.read_tar(Bounded::new(bzip2::read::MultiBzDecoder::new(bytes), limit))
        } else if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            let mut plain = Bounded::new(Vec::new(), limit);
            lzma_rs::xz_decompress(&mut io::BufReader::new(bytes), &mut plain)
                .map_err(|e| archive_error(format!("xz: {e}")))?;
            tree.read_tar(plain.inner.as_slice())
        } else if bytes.get(257..262) == Some(b"ustar") {
            tree.read_tar(Bounded::new(bytes, limit))
        } else {
            return Err(archive_error(
                "not a tar archive (.tar, .tar.gz, .tgz, .tar.bz2 or .tar.xz) nor a directory".into(),
            ));
        };
        result.map_err(|e| archive_error(e.to_string()))?;
        if tree.files.is_empty() {
            return Err(archive_error("the archive holds no files".into()));
        }
        Ok(tree)
    }

    fn read_tar<R: Read>(&mut self, reader: R) -> io::Result<()> {
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries()? {
            let entry = entry?;
            let raw = entry.path()?.to_string_lossy().into_owned();
            let Some(path) = normalize(&raw) else {
                continue;
            };
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                self.add_dir(&path);
            } else if kind.is_symlink() {
                if let Some(target) = entry.link_name()? {
                    self.symlinks
                        .insert(path.clone(), target.to_string_lossy().into_owned());
                    self.add_parents(&path);
                }
            } else if kind.is_hard_link() {
                if let Some(target) = entry.link_name()?.and_then(|t| normalize(&t.to_string_lossy())) {
                    self.hardlinks.insert(path.clone(), target);
                    self.add_parents(&path);
                }
            } else if kind.is_file() {
                // Judged by the header, before anything is decompressed.
                let size = entry.header().size()?;
                if size > MAX_FILE_BYTES {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{path}: {size} bytes, {}", too_large(MAX_FILE_BYTES)),
                    ));
                }
                let mut content = Vec::new();
                entry.take(MAX_FILE_BYTES).read_to_end(&mut content)?;
                self.files.insert(path.clone(), content);
                self.add_parents(&path);
            }
        }
        Ok(())
    }

    fn add_dir(&mut self, path: &str) {
        self.dirs.entry(path.to_string()).or_default();
        self.add_parents(path);
    }

    fn add_parents(&mut self, path: &str) {
        let mut child = path;
        while let Some((parent, name)) = split_last(child) {
            let names = self.dirs.entry(parent.to_string()).or_default();
            // A known name means its ancestors were registered with it.
            if !names.insert(name.to_string()) || parent.is_empty() {
                break;
            }
            child = parent;
        }
    }

    fn file(&self, resolved: &str) -> Option<&[u8]> {
        let path = self.hardlinks.get(resolved).map_or(resolved, String::as_str);
        self.files.get(path).map(Vec::as_slice)
    }

    /// Follows symbolic links component by component. Absolute targets are
    /// taken relative to the capture's root: the directory above the `sys`
    /// that holds the link.
    fn resolve(&self, rel: &str) -> Option<String> {
        let mut pending: Vec<String> = rel.split('/').rev().map(str::to_string).collect();
        let mut done: Vec<String> = Vec::new();
        let mut followed = 0;
        while let Some(component) = pending.pop() {
            match component.as_str() {
                "" | "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => done.push(component),
            }
            let current = done.join("/");
            if let Some(target) = self.symlinks.get(&current) {
                followed += 1;
                if followed > MAX_LINKS {
                    return None;
                }
                done.pop();
                if target.starts_with('/') {
                    // `/sys/...` inside a capture rooted at `machine/`.
                    let sys_at = done.iter().position(|c| c == "sys").unwrap_or(0);
                    done.truncate(sys_at);
                }
                pending.extend(target.split('/').rev().map(str::to_string));
            }
        }
        let path = done.join("/");
        (self.files.contains_key(&path) || self.hardlinks.contains_key(&path) || self.dirs.contains_key(&path))
            .then_some(path)
    }
}

/// A decompressed stream (reader) or buffer (writer) that fails, rather
/// than ends, once it passes `limit` bytes: a truncated stream would be
/// misreported as a broken archive.
struct Bounded<T> {
    inner: T,
    seen: u64,
    limit: u64,
}

impl<T> Bounded<T> {
    fn new(inner: T, limit: u64) -> Bounded<T> {
        Bounded { inner, seen: 0, limit }
    }

    fn count(&mut self, n: usize) -> io::Result<usize> {
        self.seen += n as u64;
        if self.seen > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unpacks to more than {} bytes, more than any real capture", self.limit),
            ));
        }
        Ok(n)
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count(n)
    }
}

impl io::Write for Bounded<Vec<u8>> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.count(buf.len())?;
        self.inner.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A tar member path without `./` or `/` in front; `None` for the root.
fn normalize(raw: &str) -> Option<String> {
    let parts: Vec<&str> = raw.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

fn split_last(path: &str) -> Option<(&str, &str)> {
    if path.is_empty() {
        return None;
    }
    Some(path.rsplit_once('/').unwrap_or(("", path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, link, content) in entries {
            let mut header = tar::Header::new_gnu();
            match link {
                Some(target) => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    builder.append_link(&mut header, path, target).unwrap();
                }
                None => {
                    header.set_size(content.len() as u64);
                    header.set_mode(0o644);
                    builder.append_data(&mut header, path, *content).unwrap();
                }
            }
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn symlinks_resolve_relative_and_absolute() {
        let bytes = tar_of(&[
            ("m/sys/devices/pci0000:00/0000:00:01.0/class", None, b"0x060400\n"),
            (
                "m/sys/bus/pci/devices/0000:00:01.0",
                Some("../../../devices/pci0000:00/0000:00:01.0"),
                b"",
            ),
            (
                "m/sys/bus/pci/devices/abs",
                Some("/sys/devices/pci0000:00/0000:00:01.0"),
                b"",
            ),
            ("m/sys/loop", Some("loop"), b""),
        ]);
        let tree = Tree::Archive(ArchiveTree::unpack(Path::new("x.tar"), &bytes).unwrap());
        assert_eq!(
            tree.read("m/sys/bus/pci/devices/0000:00:01.0/class")
                .unwrap()
                .as_deref(),
            Some("0x060400\n")
        );
        assert_eq!(
            tree.resolve("m/sys/bus/pci/devices/abs").as_deref(),
            Some("m/sys/devices/pci0000:00/0000:00:01.0")
        );
        assert_eq!(tree.read("m/sys/loop/x").unwrap(), None);
        assert_eq!(
            tree.list("m/sys/bus/pci/devices").unwrap().unwrap(),
            vec!["0000:00:01.0".to_string(), "abs".to_string()]
        );
        assert!(
            tree.read("m/sys/devices").is_err(),
            "a directory is not a readable file"
        );
    }

    #[test]
    fn unpacking_stops_at_the_limit_in_every_format() {
        let member = vec![0u8; 64 << 10];
        let entries: Vec<(String, Option<&str>, &[u8])> = (0..20)
            .map(|i| (format!("m/sys/f{i}"), None, member.as_slice()))
            .collect();
        let entries: Vec<(&str, Option<&str>, &[u8])> = entries.iter().map(|(p, l, c)| (p.as_str(), *l, *c)).collect();
        let tar = tar_of(&entries);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut gz, &tar).unwrap();
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut io::Cursor::new(&tar), &mut xz).unwrap();
        for (name, bytes) in [
            ("m.tar", tar.clone()),
            ("m.tgz", gz.finish().unwrap()),
            ("m.tar.xz", xz),
        ] {
            // The whole archive is about 1.3 MiB unpacked.
            assert!(
                ArchiveTree::unpack_limited(Path::new(name), &bytes, 4 << 20).is_ok(),
                "{name}"
            );
            let error = ArchiveTree::unpack_limited(Path::new(name), &bytes, 1 << 20)
                .err()
                .unwrap();
            assert!(
                error.to_string().contains("unpacks to more than 1048576 bytes"),
                "{name}: {error}"
            );
        }
    }

    #[test]
    fn garbage_is_not_an_archive() {
        let error = ArchiveTree::unpack(Path::new("junk.bin"), b"hello world")
            .err()
            .unwrap();
        assert!(
            error
                .to_string()
                .starts_with("junk.bin: cannot unpack the capture: not a tar archive")
        );
    }
}

//! The write-ahead journal: an append-only file of checksummed records
//! with a double-buffered commit header, so that every acknowledged record
//! survives `kill -9` or power loss, and damage — a flipped bit, a torn or
//! truncated file — is found and described rather than silently dropped.
//!
//! Owns the file format and its crash-safety protocol; records are opaque
//! bytes here (the ledger decides what they mean).
//!
//! ```text
//! offset 0     commit slot 0  ┐ 56 bytes each, in separate 512-byte sectors:
//! offset 512   commit slot 1  ┘ magic, version, epoch, sequence, length, records, next id, CRC-32
//! offset 1024  record 1: length u32 LE | CRC-32 of payload u32 LE | payload
//!              record 2 ...
//! ```
//!
//! Appending ([`Journal::append`]): write the record after the committed
//! length and `fdatasync`; then write the *older* commit slot with the new
//! length and a higher sequence and `fdatasync` again; only then is the
//! record acknowledged. The newest valid slot is the truth:
//! - bytes past its length were never acknowledged (a crash between the two
//!   syncs, or a torn slot write — the other slot still holds the previous
//!   commit): they are dropped and reported ([`DiscardedTail`]);
//! - any record before its length that is short or fails its checksum, a
//!   file shorter than it, or no valid slot at all, is damage to
//!   acknowledged state: [`Corruption`], and the caller refuses to start.
//!
//! A new journal (first start, or a new epoch) is written to a temporary
//! file, synced and renamed over the old one, and the directory synced:
//! a crash leaves either the old journal or the new, never a mix.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::crc32::crc32;

const MAGIC: &[u8; 8] = b"TOPOJRNL";
const VERSION: u32 = 1;
const SLOT_OFFSETS: [u64; 2] = [0, 512];
const SLOT_SIZE: usize = 56;
/// Where records start.
pub const DATA_START: u64 = 1024;
const FRAME_HEADER: u64 = 8;
/// No record is this large; a length above it is damage, not data.
const MAX_RECORD: u32 = 16 << 20;

/// What a commit slot holds: the durable extent of the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Starts at 0 for each new journal file.
    pub epoch: u64,
    /// Increases by one per commit; the higher valid slot wins.
    pub sequence: u64,
    /// End of the last acknowledged record.
    pub length: u64,
    /// Number of acknowledged records.
    pub records: u64,
    /// The ledger's id counter, carried across epochs.
    pub next_id: u64,
}

impl Commit {
    fn encode(&self) -> [u8; SLOT_SIZE] {
        let mut slot = [0u8; SLOT_SIZE];
        slot[..8].copy_from_slice(MAGIC);
        slot[8..12].copy_from_slice(&VERSION.to_le_bytes());
        for (i, value) in [self.epoch, self.sequence, self.length, self.records, self.next_id]
            .into_iter()
            .enumerate()
        {
            slot[12 + i * 8..20 + i * 8].copy_from_slice(&value.to_le_bytes());
        }
        let crc = crc32(&slot[..52]);
        slot[52..].copy_from_slice(&crc.to_le_bytes());
        slot
    }

    fn decode(slot: &[u8]) -> Option<Commit> {
        if slot.len() < SLOT_SIZE || &slot[..8] != MAGIC {
            return None;
        }
        let word = |at: usize| -> Option<u64> { Some(u64::from_le_bytes(slot.get(at..at + 8)?.try_into().ok()?)) };
        let stored_crc = u32::from_le_bytes(slot[52..56].try_into().ok()?);
        let version = u32::from_le_bytes(slot[8..12].try_into().ok()?);
        if stored_crc != crc32(&slot[..52]) || version != VERSION {
            return None;
        }
        Some(Commit {
            epoch: word(12)?,
            sequence: word(20)?,
            length: word(28)?,
            records: word(36)?,
            next_id: word(44)?,
        })
    }
}

/// Why the journal cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file system refused an operation.
    #[error("{operation} {path}: {source}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Acknowledged state is damaged.
    #[error("{0}")]
    Corrupt(Box<Corruption>),
}

fn io_error<'a>(operation: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        operation,
        path: path.to_path_buf(),
        source,
    }
}

/// Damage found in acknowledged state: where, what, and what survives.
#[derive(Debug)]
pub struct Corruption {
    pub path: PathBuf,
    /// Byte offset of the damage.
    pub offset: u64,
    /// 1-based number of the first record that cannot be read (0: the
    /// commit header itself).
    pub record: u64,
    pub problem: String,
    /// What the newest valid commit slot says was acknowledged, if any slot
    /// is valid.
    pub commit: Option<Commit>,
    pub file_length: u64,
    /// The records before the damage, readable and checksummed.
    pub intact: Vec<Vec<u8>>,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "state file {} is damaged at byte {}",
            self.path.display(),
            self.offset
        )?;
        if self.record > 0 {
            write!(f, " (record {})", self.record)?;
        }
        write!(f, ": {}", self.problem)
    }
}

/// Bytes after the last commit: a record whose write was never
/// acknowledged, dropped at recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscardedTail {
    pub offset: u64,
    pub bytes: u64,
    /// The start of the record's payload as text, for the log.
    pub preview: String,
}

/// An open journal, positioned after its last commit.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    commit: Commit,
}

/// What [`Journal::open`] found.
#[derive(Debug)]
pub struct Recovered {
    pub journal: Journal,
    /// The acknowledged records' payloads, in order.
    pub records: Vec<Vec<u8>>,
    pub discarded_tail: Option<DiscardedTail>,
}

impl Journal {
    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current commit.
    pub fn commit(&self) -> Commit {
        self.commit
    }

    /// Writes a new, empty journal at `path` atomically (temporary file,
    /// sync, rename, sync of the directory), replacing any old one.
    ///
    /// # Errors
    /// [`JournalError::Io`].
    pub fn create(path: &Path, epoch: u64, next_id: u64) -> Result<Journal, JournalError> {
        Journal::create_with(path, epoch, next_id, &[])
    }

    /// Writes a new journal at `path` holding `records`, atomically like
    /// [`Journal::create`]: a crash leaves the old journal or this one
    /// with every record, never a part (a compaction's snapshot).
    ///
    /// # Errors
    /// [`JournalError::Io`], also for a record larger than any record may be.
    pub fn create_with(path: &Path, epoch: u64, next_id: u64, records: &[Vec<u8>]) -> Result<Journal, JournalError> {
        let mut image = vec![0u8; usize::try_from(DATA_START).unwrap_or(1024)];
        for payload in records {
            let length = u32::try_from(payload.len())
                .ok()
                .filter(|&l| l <= MAX_RECORD)
                .ok_or_else(|| JournalError::Io {
                    operation: "create",
                    path: path.to_path_buf(),
                    source: io::Error::new(io::ErrorKind::InvalidInput, "record too large"),
                })?;
            image.extend_from_slice(&length.to_le_bytes());
            image.extend_from_slice(&crc32(payload).to_le_bytes());
            image.extend_from_slice(payload);
        }
        let commit = Commit {
            epoch,
            sequence: 1,
            length: image.len() as u64,
            records: records.len() as u64,
            next_id,
        };
        let encoded = commit.encode();
        for offset in SLOT_OFFSETS {
            let at = usize::try_from(offset).unwrap_or(0);
            image[at..at + SLOT_SIZE].copy_from_slice(&encoded);
        }
        let temporary = path.with_extension("new");
        {
            let mut file = File::create(&temporary).map_err(io_error("create", &temporary))?;
            crash_point(Step::Created, &temporary)?;
            let (first, rest) = image.split_at(image.len() / 2);
            file.write_all(first).map_err(io_error("write", &temporary))?;
            crash_point(Step::HalfWritten, &temporary)?;
            file.write_all(rest).map_err(io_error("write", &temporary))?;
            crash_point(Step::Written, &temporary)?;
            file.sync_all().map_err(io_error("sync", &temporary))?;
            crash_point(Step::Synced, &temporary)?;
        }
        std::fs::rename(&temporary, path).map_err(io_error("rename into place", path))?;
        crash_point(Step::Renamed, path)?;
        sync_directory(path)?;
        crash_point(Step::DirectorySynced, path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_error("open", path))?;
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            commit,
        })
    }

    /// Opens and verifies the journal at `path`; `Ok(None)` when there is
    /// none. A torn tail is cut off (and reported) so appends continue
    /// from the last commit.
    ///
    /// # Errors
    /// [`JournalError::Corrupt`] for damage to acknowledged state,
    /// [`JournalError::Io`] otherwise.
    pub fn open(path: &Path) -> Result<Option<Recovered>, JournalError> {
        let mut file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("open", path)(e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_error("read", path))?;
        let Verified {
            commit,
            records,
            discarded_tail,
        } = verify(path, &bytes)?;
        if discarded_tail.is_some() {
            file.set_len(commit.length).map_err(io_error("truncate", path))?;
            file.sync_all().map_err(io_error("sync", path))?;
        }
        Ok(Some(Recovered {
            journal: Journal {
                file,
                path: path.to_path_buf(),
                commit,
            },
            records,
            discarded_tail,
        }))
    }

    /// Appends one record and commits it; when this returns `Ok`, the
    /// record is on disk. `next_id` is carried in the commit.
    ///
    /// # Errors
    /// [`JournalError::Io`]. After an error the file's state is uncertain
    /// (the record may or may not be committed): stop writing and recover
    /// by reopening.
    pub fn append(&mut self, payload: &[u8], next_id: u64) -> Result<(), JournalError> {
        let length = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l <= MAX_RECORD)
            .ok_or_else(|| JournalError::Io {
                operation: "append to",
                path: self.path.clone(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "record too large"),
            })?;
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&length.to_le_bytes());
        frame.extend_from_slice(&crc32(payload).to_le_bytes());
        frame.extend_from_slice(payload);
        self.file
            .write_all_at(&frame, self.commit.length)
            .map_err(io_error("append to", &self.path))?;
        crash_point(Step::RecordWritten, &self.path)?;
        self.file.sync_data().map_err(io_error("sync", &self.path))?;
        crash_point(Step::RecordSynced, &self.path)?;
        let commit = Commit {
            sequence: self.commit.sequence + 1,
            length: self.commit.length + frame.len() as u64,
            records: self.commit.records + 1,
            next_id,
            ..self.commit
        };
        // The slot not holding the current commit: a torn write here leaves
        // the current one intact.
        let slot = SLOT_OFFSETS[usize::from(commit.sequence % 2 == 1)];
        self.file
            .write_all_at(&commit.encode(), slot)
            .map_err(io_error("commit", &self.path))?;
        crash_point(Step::CommitWritten, &self.path)?;
        self.file.sync_data().map_err(io_error("sync", &self.path))?;
        self.commit = commit;
        Ok(())
    }
}

/// The points of writing where a crash leaves a distinct state on disk:
/// the crash tests stop the writer at each (an I/O error, which leaves
/// the files as a killed process would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A new journal: the temporary file exists, empty.
    Created,
    /// Half of it is written.
    HalfWritten,
    /// All of it is written, not synced.
    Written,
    /// Synced, not yet renamed into place.
    Synced,
    /// Renamed over the old journal; the directory not synced.
    Renamed,
    /// The directory synced; the new journal not yet opened.
    DirectorySynced,
    /// An append: the record written after the commit, not synced.
    RecordWritten,
    /// The record synced; the commit slot not written.
    RecordSynced,
    /// The commit slot written, not synced.
    CommitWritten,
}

#[cfg(test)]
thread_local! {
    static CRASH_AT: std::cell::Cell<Option<Step>> = const { std::cell::Cell::new(None) };
}

/// Makes this thread's next write that reaches `step` stop there, as if
/// the process died (tests only).
#[cfg(test)]
pub(crate) fn crash_at(step: Option<Step>) {
    CRASH_AT.with(|at| at.set(step));
}

#[cfg(test)]
fn crash_point(step: Step, path: &Path) -> Result<(), JournalError> {
    if CRASH_AT.with(|at| at.get()) == Some(step) {
        CRASH_AT.with(|at| at.set(None));
        return Err(JournalError::Io {
            operation: "simulated crash at",
            path: path.to_path_buf(),
            source: io::Error::other(format!("{step:?}")),
        });
    }
    Ok(())
}

#[cfg(not(test))]
#[inline]
fn crash_point(_step: Step, _path: &Path) -> Result<(), JournalError> {
    Ok(())
}

/// Syncs the directory holding `path`, so a rename in it is durable.
fn sync_directory(path: &Path) -> Result<(), JournalError> {
    let directory = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(directory)
        .and_then(|d| d.sync_all())
        .map_err(io_error("sync directory", directory))
}

/// Checks a journal image: the newest valid commit, the records it
/// covers, and any unacknowledged tail.
/// A journal image that checked out.
struct Verified {
    commit: Commit,
    records: Vec<Vec<u8>>,
    discarded_tail: Option<DiscardedTail>,
}

fn verify(path: &Path, bytes: &[u8]) -> Result<Verified, JournalError> {
    let file_length = bytes.len() as u64;
    let corrupt = |offset: u64, record: u64, problem: String, commit: Option<Commit>, intact: Vec<Vec<u8>>| {
        JournalError::Corrupt(Box::new(Corruption {
            path: path.to_path_buf(),
            offset,
            record,
            problem,
            commit,
            file_length,
            intact,
        }))
    };
    let slot = |offset: u64| {
        let at = usize::try_from(offset).ok()?;
        Commit::decode(bytes.get(at..at + SLOT_SIZE)?)
    };
    let commit = match (slot(SLOT_OFFSETS[0]), slot(SLOT_OFFSETS[1])) {
        (Some(a), Some(b)) => {
            if a.sequence >= b.sequence {
                a
            } else {
                b
            }
        }
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => {
            let (intact, _) = read_records(bytes, file_length, u64::MAX);
            return Err(corrupt(
                0,
                0,
                if file_length < DATA_START {
                    format!("the file is {file_length} bytes long, shorter than its {DATA_START}-byte header")
                } else {
                    "neither commit header is valid (bad magic, version or checksum)".to_string()
                },
                None,
                intact,
            ));
        }
    };
    if file_length < commit.length {
        let (intact, _) = read_records(bytes, file_length, commit.records);
        let read = intact.len() as u64;
        return Err(corrupt(
            file_length,
            read + 1,
            format!(
                "the file is truncated: {file_length} bytes, but {} bytes holding {} records were acknowledged",
                commit.length, commit.records
            ),
            Some(commit),
            intact,
        ));
    }
    let (records, stop) = read_records(bytes, commit.length, commit.records);
    if let Some(damage) = stop {
        return Err(corrupt(
            damage.offset,
            records.len() as u64 + 1,
            damage.problem,
            Some(commit),
            records,
        ));
    }
    if records.len() as u64 != commit.records {
        let end = DATA_START + records.iter().map(|r| r.len() as u64 + FRAME_HEADER).sum::<u64>();
        return Err(corrupt(
            end,
            records.len() as u64 + 1,
            format!(
                "{} records read, but the commit header acknowledges {}",
                records.len(),
                commit.records
            ),
            Some(commit),
            records,
        ));
    }
    let discarded_tail = (file_length > commit.length).then(|| {
        let start = usize::try_from(commit.length).unwrap_or(usize::MAX);
        let tail = bytes.get(start..).unwrap_or_default();
        let payload = tail.get(8..).unwrap_or_default();
        let preview: String = String::from_utf8_lossy(payload).chars().take(160).collect();
        DiscardedTail {
            offset: commit.length,
            bytes: file_length - commit.length,
            preview,
        }
    });
    Ok(Verified {
        commit,
        records,
        discarded_tail,
    })
}

/// Where reading records stopped early, and why.
struct Damage {
    offset: u64,
    problem: String,
}

/// Reads up to `limit` records from [`DATA_START`] to `end`.
fn read_records(bytes: &[u8], end: u64, limit: u64) -> (Vec<Vec<u8>>, Option<Damage>) {
    let mut records = Vec::new();
    let mut offset = DATA_START;
    while offset < end && (records.len() as u64) < limit {
        let damage = |problem: String| Some(Damage { offset, problem });
        if end - offset < FRAME_HEADER {
            return (
                records,
                damage(format!("a record header needs 8 bytes, {} remain", end - offset)),
            );
        }
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        let word = |i: usize| {
            bytes
                .get(at + i..at + i + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let (Some(length), Some(stored_crc)) = (word(0), word(4)) else {
            return (records, damage("the record header is cut off".to_string()));
        };
        if length > MAX_RECORD {
            return (records, damage(format!("implausible record length {length}")));
        }
        let payload_end = offset + FRAME_HEADER + u64::from(length);
        if payload_end > end {
            return (
                records,
                damage(format!(
                    "a {length}-byte record runs past the acknowledged end at byte {end}"
                )),
            );
        }
        let payload = &bytes[at + 8..at + 8 + length as usize];
        if crc32(payload) != stored_crc {
            return (records, damage("checksum mismatch".to_string()));
        }
        records.push(payload.to_vec());
        offset = payload_end;
    }
    if offset != end && (records.len() as u64) >= limit && limit != u64::MAX {
        return (
            records,
            Some(Damage {
                offset,
                problem: format!(
                    "{} unexpected bytes before the acknowledged end at byte {end}",
                    end - offset
                ),
            }),
        );
    }
    (records, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn journal_with(dir: &Path, payloads: &[&str]) -> Result<PathBuf, JournalError> {
        let path = dir.join("journal");
        let mut journal = Journal::create(&path, 0, 1)?;
        for (i, payload) in payloads.iter().enumerate() {
            journal.append(payload.as_bytes(), i as u64 + 2)?;
        }
        Ok(path)
    }

    type Opened = Option<(Vec<String>, Option<DiscardedTail>)>;

    fn open_records(path: &Path) -> Result<Opened, JournalError> {
        Ok(Journal::open(path)?.map(|r| {
            (
                r.records
                    .iter()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect(),
                r.discarded_tail,
            )
        }))
    }

    fn corruption(result: Result<Option<Recovered>, JournalError>) -> Option<Box<Corruption>> {
        match result {
            Err(JournalError::Corrupt(c)) => Some(c),
            _ => None,
        }
    }

    #[test]
    fn appended_records_come_back_in_order() -> TestResult {
        let dir = tempfile::tempdir()?;
        assert!(Journal::open(&dir.path().join("journal"))?.is_none());
        let path = journal_with(dir.path(), &["one", "two", "three"])?;
        assert_eq!(
            open_records(&path)?,
            Some((vec!["one".into(), "two".into(), "three".into()], None))
        );
        let recovered = Journal::open(&path)?.ok_or("journal vanished")?;
        assert_eq!(recovered.journal.commit().records, 3);
        assert_eq!(recovered.journal.commit().next_id, 4);
        // Appending after a reopen continues the same file.
        let mut journal = recovered.journal;
        journal.append(b"four", 5)?;
        assert_eq!(open_records(&path)?.map(|(r, _)| r.len()), Some(4));
        Ok(())
    }

    #[test]
    fn an_unacknowledged_tail_is_dropped_and_reported() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = journal_with(dir.path(), &["kept"])?;
        // A record written but never committed (the agent died between the
        // record's sync and the commit's), then a torn half record.
        let mut bytes = std::fs::read(&path)?;
        let payload = b"{\"op\":\"admit\",\"id\":\"a9\"}";
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32(payload).to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes.extend_from_slice(&[7, 0, 0]);
        std::fs::write(&path, &bytes)?;
        let (records, tail) = open_records(&path)?.ok_or("journal vanished")?;
        assert_eq!(records, vec!["kept".to_string()]);
        let tail = tail.ok_or("tail not reported")?;
        assert_eq!(tail.bytes, 8 + payload.len() as u64 + 3);
        assert!(tail.preview.contains("\"id\":\"a9\""), "{}", tail.preview);
        // The tail was cut off: the next open is clean.
        assert_eq!(open_records(&path)?, Some((vec!["kept".to_string()], None)));
        Ok(())
    }

    #[test]
    fn a_torn_commit_slot_falls_back_to_the_previous_commit() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = journal_with(dir.path(), &["one", "two"])?;
        // The last commit (sequence 3) went to slot 1; tear it.
        let mut bytes = std::fs::read(&path)?;
        bytes[512 + 30] ^= 0xFF;
        std::fs::write(&path, &bytes)?;
        let (records, tail) = open_records(&path)?.ok_or("journal vanished")?;
        assert_eq!(records, vec!["one".to_string()]);
        assert!(tail.is_some_and(|t| t.preview == "two"));
        Ok(())
    }

    #[test]
    fn damage_to_acknowledged_records_is_corruption_with_what_survives() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = journal_with(dir.path(), &["first", "second", "third"])?;
        let pristine = std::fs::read(&path)?;
        let second_payload = DATA_START as usize + (8 + 5) + 8;

        // A flipped bit in record 2.
        let mut flipped = pristine.clone();
        flipped[second_payload + 1] ^= 0x01;
        std::fs::write(&path, &flipped)?;
        let damage = corruption(Journal::open(&path)).ok_or("bit flip not detected")?;
        assert_eq!((damage.record, damage.problem.as_str()), (2, "checksum mismatch"));
        assert_eq!(damage.intact, vec![b"first".to_vec()]);
        assert_eq!(damage.commit.map(|c| c.records), Some(3));

        // Truncated in the middle of record 3, and exactly at its start.
        for cut in [pristine.len() - 2, pristine.len() - (8 + 5)] {
            std::fs::write(&path, &pristine[..cut])?;
            let damage = corruption(Journal::open(&path)).ok_or("truncation not detected")?;
            assert_eq!(damage.record, 3, "cut at {cut}");
            assert!(damage.problem.contains("truncated"), "{}", damage.problem);
            assert_eq!(damage.intact.len(), 2);
            assert!(damage.to_string().contains("is damaged at byte"));
        }

        // Both commit slots destroyed, or the header cut off.
        let mut headless = pristine.clone();
        headless[3] ^= 1;
        headless[515] ^= 1;
        std::fs::write(&path, &headless)?;
        let damage = corruption(Journal::open(&path)).ok_or("lost header not detected")?;
        assert_eq!((damage.record, damage.intact.len()), (0, 3));
        std::fs::write(&path, &pristine[..40])?;
        assert!(corruption(Journal::open(&path)).is_some_and(|d| d.problem.contains("shorter than")));
        std::fs::write(&path, b"")?;
        assert!(corruption(Journal::open(&path)).is_some());
        Ok(())
    }

    #[test]
    fn create_replaces_a_journal_atomically() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = journal_with(dir.path(), &["old"])?;
        let journal = Journal::create(&path, 7, 42)?;
        assert_eq!((journal.commit().epoch, journal.commit().next_id), (7, 42));
        let recovered = Journal::open(&path)?.ok_or("journal vanished")?;
        assert!(recovered.records.is_empty());
        assert_eq!(recovered.journal.commit().epoch, 7);
        assert!(!path.with_extension("new").exists());
        Ok(())
    }

    const PAYLOADS: [&str; 4] = ["alpha", "beta-beta", "gamma-gamma-gamma", "delta"];

    /// A journal holding [`PAYLOADS`], built once.
    fn pristine() -> &'static [u8] {
        static IMAGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        IMAGE.get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temporary directory for the test");
            let path = journal_with(dir.path(), &PAYLOADS).expect("a journal in it");
            std::fs::read(path).expect("its bytes")
        })
    }

    fn fail(error: impl std::fmt::Display) -> proptest::test_runner::TestCaseError {
        proptest::test_runner::TestCaseError::fail(error.to_string())
    }

    proptest::proptest! {
        /// Whatever single byte is damaged, the journal either still reads
        /// every acknowledged record, or reports corruption — it never
        /// returns fewer records silently.
        #[test]
        fn any_damaged_byte_is_detected_or_harmless(position in 0usize..4096, flip in 1u8..=255) {
            let mut bytes = pristine().to_vec();
            let position = position % bytes.len();
            bytes[position] ^= flip;
            let dir = tempfile::tempdir().map_err(fail)?;
            let path = dir.path().join("journal");
            std::fs::write(&path, &bytes).map_err(fail)?;
            match Journal::open(&path) {
                Ok(Some(recovered)) => {
                    let read: Vec<&[u8]> = recovered.records.iter().map(Vec::as_slice).collect();
                    let expected: Vec<&[u8]> = PAYLOADS.iter().map(|p| p.as_bytes()).collect();
                    // A damaged newest slot falls back to the previous commit:
                    // the last record was then, as far as the file can tell,
                    // never acknowledged — the only allowed loss, and reported.
                    if read.len() == expected.len() {
                        proptest::prop_assert_eq!(read, expected);
                    } else {
                        proptest::prop_assert_eq!(read.len(), expected.len() - 1);
                        proptest::prop_assert!(recovered.discarded_tail.is_some());
                        proptest::prop_assert!((512..512 + SLOT_SIZE).contains(&position));
                    }
                }
                Ok(None) => proptest::prop_assert!(false, "journal vanished"),
                Err(JournalError::Corrupt(_)) => {}
                Err(other) => proptest::prop_assert!(false, "unexpected error {other}"),
            }
        }
    }
}

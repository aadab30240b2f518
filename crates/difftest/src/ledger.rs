//! The long-run ledger: one line per finished `difftest run` (a release, the
//! seeds it played, what came of them, when, with which engine commit and
//! oracle build), so runs of several sessions add up to one honest count.
//!
//! The file is tab-separated with a header (`testdata/difftest-ledger.tsv`
//! in the repository). A run records only when it ends normally (count or
//! time used up; a killed run records nothing), and its seeds are always one
//! range `first..=last`: workers take seeds in order and each one they take
//! before the end is played. A new range must not overlap one the ledger
//! already has for the release, so no scenario is counted twice;
//! `--resume` starts a release where its highest range ends.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};

use crate::release::Release;

/// The ledger's columns, in order.
pub const HEADER: [&str; 16] = [
    "release",
    "first_seed",
    "last_seed",
    "scenarios",
    "same",
    "same_refusals",
    "differ",
    "unstable",
    "timeouts",
    "excluded",
    "harness_failures",
    "seconds",
    "finished_utc",
    "commit",
    "oracle",
    "options",
];

/// The counts of a run, or of several added up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub scenarios: u64,
    pub same: u64,
    pub same_refusals: u64,
    pub differ: u64,
    pub unstable: u64,
    pub timeouts: u64,
    pub excluded: u64,
    pub harness_failures: u64,
    pub seconds: u64,
}

impl Counts {
    /// In the ledger's column order (`HEADER[3..12]`).
    fn columns(&self) -> [u64; 9] {
        [
            self.scenarios,
            self.same,
            self.same_refusals,
            self.differ,
            self.unstable,
            self.timeouts,
            self.excluded,
            self.harness_failures,
            self.seconds,
        ]
    }

    fn from_columns(
        [
            scenarios,
            same,
            same_refusals,
            differ,
            unstable,
            timeouts,
            excluded,
            harness_failures,
            seconds,
        ]: [u64; 9],
    ) -> Counts {
        Counts {
            scenarios,
            same,
            same_refusals,
            differ,
            unstable,
            timeouts,
            excluded,
            harness_failures,
            seconds,
        }
    }

    fn add(&mut self, other: &Counts) {
        let mut sum = self.columns();
        for (total, n) in sum.iter_mut().zip(other.columns()) {
            *total += n;
        }
        *self = Counts::from_columns(sum);
    }
}

/// One finished run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub release: Release,
    pub first_seed: u64,
    pub last_seed: u64,
    pub counts: Counts,
    /// `2026-11-27T03:10:00Z`.
    pub finished_utc: String,
    /// The engine's git commit (`+dirty` when crates/ had changes).
    pub commit: String,
    /// The oracle build: the first 12 hex digits of its `oracle.sha256`.
    pub oracle: String,
    /// What else shaped the run: `timeout=10 exclude=pod-level-managers`.
    pub options: String,
}

impl Entry {
    fn line(&self) -> String {
        let mut fields = vec![
            self.release.name(),
            self.first_seed.to_string(),
            self.last_seed.to_string(),
        ];
        fields.extend(self.counts.columns().iter().map(u64::to_string));
        fields.extend([
            self.finished_utc.clone(),
            self.commit.clone(),
            self.oracle.clone(),
            self.options.clone(),
        ]);
        fields.join("\t")
    }

    fn parse(line: &str, path: &Path, number: usize) -> anyhow::Result<Entry> {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != HEADER.len() {
            bail!(
                "{}: line {number}: {} fields, the ledger has {} ({})",
                path.display(),
                fields.len(),
                HEADER.len(),
                HEADER.join(" ")
            );
        }
        let number_at = |i: usize| -> anyhow::Result<u64> {
            fields[i].parse().with_context(|| {
                format!(
                    "{}: line {number}: {} {:?} is not a count",
                    path.display(),
                    HEADER[i],
                    fields[i]
                )
            })
        };
        let release = Release::parse(fields[0]).with_context(|| {
            format!(
                "{}: line {number}: release {:?} is not one the oracle builds",
                path.display(),
                fields[0]
            )
        })?;
        let mut columns = [0; 9];
        for (i, column) in columns.iter_mut().enumerate() {
            *column = number_at(3 + i)?;
        }
        let entry = Entry {
            release,
            first_seed: number_at(1)?,
            last_seed: number_at(2)?,
            counts: Counts::from_columns(columns),
            finished_utc: fields[12].to_owned(),
            commit: fields[13].to_owned(),
            oracle: fields[14].to_owned(),
            options: fields[15].to_owned(),
        };
        if entry.last_seed < entry.first_seed || entry.last_seed - entry.first_seed + 1 != entry.counts.scenarios {
            bail!(
                "{}: line {number}: seeds {}..={} are not {} scenarios",
                path.display(),
                entry.first_seed,
                entry.last_seed,
                entry.counts.scenarios
            );
        }
        Ok(entry)
    }
}

/// Reads a ledger; a missing file is an empty ledger.
///
/// # Errors
/// When the file cannot be read, its header is not the ledger's, a line
/// does not parse, or two ranges of a release overlap.
pub fn read(path: &Path) -> anyhow::Result<Vec<Entry>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header == HEADER.join("\t") => {}
        None => return Ok(Vec::new()),
        Some(_) => bail!(
            "{}: line 1 is not the ledger's header ({})",
            path.display(),
            HEADER.join(" ")
        ),
    }
    let mut entries: Vec<Entry> = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let entry = Entry::parse(line, path, i + 1)?;
        if let Some(other) = overlapping(&entries, entry.release, entry.first_seed, entry.last_seed) {
            bail!(
                "{}: line {}: kubelet {} seeds {}..={} overlap {}..={} (counted once only)",
                path.display(),
                i + 1,
                entry.release.name(),
                entry.first_seed,
                entry.last_seed,
                other.first_seed,
                other.last_seed
            );
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn overlapping(entries: &[Entry], release: Release, first: u64, last: u64) -> Option<&Entry> {
    entries
        .iter()
        .find(|e| e.release == release && e.first_seed <= last && first <= e.last_seed)
}

/// Where `release` goes on: after its highest recorded seed, or `default`
/// when the ledger has none for it.
pub fn resume_seed(entries: &[Entry], release: Release, default: u64) -> u64 {
    entries
        .iter()
        .filter(|e| e.release == release)
        .map(|e| e.last_seed + 1)
        .max()
        .unwrap_or(default)
}

/// Checks that seeds `first..` (at most `count`, or unbounded) do not
/// overlap a recorded range of the release, before a run spends its time.
///
/// # Errors
/// Naming the recorded range that overlaps.
pub fn check_free(entries: &[Entry], release: Release, first: u64, count: Option<u64>) -> anyhow::Result<()> {
    let last = count.map_or(u64::MAX, |n| first.saturating_add(n.max(1) - 1));
    if let Some(other) = overlapping(entries, release, first, last) {
        bail!(
            "the ledger already counts kubelet {} seeds {}..={}: start after them (--resume) or elsewhere",
            release.name(),
            other.first_seed,
            other.last_seed
        );
    }
    Ok(())
}

/// Appends a finished run (the header first when the file is new), after
/// checking the ledger still has no overlapping range.
///
/// # Errors
/// When the ledger cannot be read or written, or the range overlaps.
pub fn append(path: &Path, entry: &Entry) -> anyhow::Result<()> {
    let entries = read(path)?;
    if let Some(other) = overlapping(&entries, entry.release, entry.first_seed, entry.last_seed) {
        bail!(
            "{}: kubelet {} seeds {}..={} overlap the recorded {}..={}",
            path.display(),
            entry.release.name(),
            entry.first_seed,
            entry.last_seed,
            other.first_seed,
            other.last_seed
        );
    }
    let new = !path.exists() || std::fs::metadata(path).is_ok_and(|m| m.len() == 0);
    let mut text = String::new();
    if new {
        text.push_str(&HEADER.join("\t"));
        text.push('\n');
    }
    text.push_str(&entry.line());
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Now, as `2026-11-27T03:10:00Z`.
pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(seconds)
}

/// Seconds since 1970 as a UTC date and time, to the second (RFC 3339).
fn utc(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX)
        .to_string()
}

/// Totals of one release over the ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub runs: u64,
    pub counts: Counts,
}

/// The totals per release.
pub fn totals(entries: &[Entry]) -> BTreeMap<Release, Totals> {
    let mut by_release: BTreeMap<Release, Totals> = BTreeMap::new();
    for e in entries {
        let t = by_release.entry(e.release).or_default();
        t.runs += 1;
        t.counts.add(&e.counts);
    }
    by_release
}

/// The totals as a Markdown table (what docs/conformance.md shows).
pub fn table(entries: &[Entry]) -> String {
    let mut out = String::from(
        "| release | scenarios | same (start-up refusals) | differ | unstable | timeouts | skipped (known) | harness failures | minutes | scenarios/s |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (release, Totals { counts: t, .. }) in totals(entries) {
        let rate = if t.seconds == 0 {
            0.0
        } else {
            t.scenarios as f64 / t.seconds as f64
        };
        out.push_str(&format!(
            "| {} | {} | {} ({}) | {} | {} | {} | {} | {} | {:.0} | {:.1} |\n",
            release.name(),
            t.scenarios,
            t.same,
            t.same_refusals,
            t.differ,
            t.unstable,
            t.timeouts,
            t.excluded,
            t.harness_failures,
            t.seconds as f64 / 60.0,
            rate
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(release: u8, first: u64, last: u64) -> Entry {
        Entry {
            release: Release(release),
            first_seed: first,
            last_seed: last,
            counts: Counts {
                scenarios: last - first + 1,
                same: last - first,
                same_refusals: 1,
                timeouts: 1,
                seconds: 10,
                ..Counts::default()
            },
            finished_utc: "2026-11-27T03:00:00Z".into(),
            commit: "0123456789ab".into(),
            oracle: "abcdefabcdef".into(),
            options: "timeout=10".into(),
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("topoalign-ledger-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir.join("ledger.tsv")
    }

    #[test]
    fn runs_add_up_and_resume_after_the_highest_range() {
        let path = scratch("add");
        append(&path, &entry(35, 1000, 1499)).expect("first run");
        append(&path, &entry(37, 1000, 1999)).expect("another release, same seeds");
        append(&path, &entry(35, 1500, 1599)).expect("the next range");
        let entries = read(&path).expect("reads back");
        assert_eq!(entries.len(), 3);
        assert_eq!(resume_seed(&entries, Release(35), 1), 1600);
        assert_eq!(resume_seed(&entries, Release(37), 1), 2000);
        assert_eq!(resume_seed(&entries, Release(32), 77), 77);
        let t = &totals(&entries)[&Release(35)];
        assert_eq!(
            (t.runs, t.counts.scenarios, t.counts.timeouts, t.counts.seconds),
            (2, 600, 2, 20)
        );
        assert!(table(&entries).contains("| 1.35 | 600 | 598 (2) | 0 | 0 | 2 |"));
    }

    #[test]
    fn a_seed_is_counted_once_per_release() {
        let path = scratch("overlap");
        append(&path, &entry(36, 1000, 1499)).expect("first run");
        let err = append(&path, &entry(36, 1499, 1600)).expect_err("overlaps");
        assert!(err.to_string().contains("overlap"), "{err}");
        let entries = read(&path).expect("unchanged");
        assert_eq!(entries.len(), 1);
        assert!(check_free(&entries, Release(36), 1200, Some(10)).is_err());
        assert!(check_free(&entries, Release(36), 900, None).is_err());
        check_free(&entries, Release(36), 1500, Some(10)).expect("after the range");
        check_free(&entries, Release(36), 900, Some(100)).expect("before the range");
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_749_133), "2026-11-27T03:12:13Z");
    }

    #[test]
    fn a_damaged_ledger_is_refused_naming_file_and_line() {
        let path = scratch("damaged");
        append(&path, &entry(32, 1, 10)).expect("first run");
        let mut text = std::fs::read_to_string(&path).expect("reads");
        text.push_str(&entry(32, 20, 29).line().replace("\t10\t", "\t11\t"));
        std::fs::write(&path, text).expect("writes");
        let err = read(&path).expect_err("10 seeds are not 11 scenarios").to_string();
        assert!(err.contains("line 3") && err.contains("ledger.tsv"), "{err}");
    }
}

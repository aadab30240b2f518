//! Semantic versions as CEL selectors see them: version attributes and
//! `semver("1.2.3")`, parsed and ordered as github.com/blang/semver/v4 (the
//! library behind Kubernetes' `kubernetes.Semver`) does, with the Kubernetes
//! library's `normalize` option (`semver("v1.02", true)`).

use std::cmp::Ordering;

/// A version: numbers, pre-release identifiers and build metadata (kept only
/// to be part of the value; it never orders or equals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Semver {
    pub(crate) major: u64,
    pub(crate) minor: u64,
    pub(crate) patch: u64,
    pre: Vec<Prerelease>,
    build: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Prerelease {
    Number(u64),
    Text(String),
}

/// Why a text is not a version; the messages are blang/semver's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SemverError {
    #[error("Version string empty")]
    Empty,
    #[error("No Major.Minor.Patch elements found")]
    NotThreeParts,
    #[error("Invalid character(s) found in {part} number {text:?}")]
    InvalidNumber { part: &'static str, text: String },
    #[error("{part} number must not contain leading zeroes {text:?}")]
    LeadingZeroes { part: &'static str, text: String },
    #[error("strconv.ParseUint: parsing {0:?}: invalid syntax")]
    NotANumber(String),
    #[error("strconv.ParseUint: parsing {0:?}: value out of range")]
    OutOfRange(String),
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    #[error("Numeric PreRelease version must not contain leading zeroes {0:?}")]
    PrereleaseLeadingZeroes(String),
    #[error("Invalid character(s) found in prerelease {0:?}")]
    InvalidPrerelease(String),
    #[error("Build meta data is empty")]
    EmptyBuild,
    #[error("Invalid character(s) found in build meta data {0:?}")]
    InvalidBuild(String),
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithMetadata,
}

fn only_digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

fn only_alphanumerics(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

fn number(part: &'static str, text: &str) -> Result<u64, SemverError> {
    if !only_digits(text) {
        return Err(SemverError::InvalidNumber {
            part,
            text: text.to_owned(),
        });
    }
    if leading_zero(text) {
        let part = match part {
            "major" => "Major",
            "minor" => "Minor",
            _ => "Patch",
        };
        return Err(SemverError::LeadingZeroes {
            part,
            text: text.to_owned(),
        });
    }
    parse_u64(text)
}

/// Go's `strconv.ParseUint(text, 10, 64)` on digits.
fn parse_u64(text: &str) -> Result<u64, SemverError> {
    if text.is_empty() {
        return Err(SemverError::NotANumber(text.to_owned()));
    }
    text.parse().map_err(|_| SemverError::OutOfRange(text.to_owned()))
}

impl Semver {
    /// Parses a strict semantic version (blang's `semver.Parse`).
    pub(crate) fn parse(text: &str) -> Result<Semver, SemverError> {
        if text.is_empty() {
            return Err(SemverError::Empty);
        }
        let mut parts = text.splitn(3, '.');
        let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(SemverError::NotThreeParts);
        };
        let major = number("major", major)?;
        let minor = number("minor", minor)?;
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = number("patch", patch)?;
        let pre = pre
            .map(|pre| pre.split('.').map(Prerelease::parse).collect())
            .transpose()?
            .unwrap_or_default();
        let build = build
            .map(|build| {
                build
                    .split('.')
                    .map(|b| {
                        if b.is_empty() {
                            Err(SemverError::EmptyBuild)
                        } else if !only_alphanumerics(b) {
                            Err(SemverError::InvalidBuild(b.to_owned()))
                        } else {
                            Ok(b.to_owned())
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// Parses after the Kubernetes library's normalization: a leading `v`
    /// dropped, leading zeros of each number dropped, missing minor and patch
    /// numbers taken as 0 (`semver(text, true)`, `isSemver(text, true)`).
    pub(crate) fn parse_normalized(text: &str) -> Result<Semver, SemverError> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts: Vec<String> = text
            .splitn(3, '.')
            .map(|p| {
                if p.len() > 1 {
                    let trimmed = p.trim_start_matches('0');
                    if trimmed.is_empty() || !trimmed.as_bytes()[0].is_ascii_digit() {
                        format!("0{trimmed}")
                    } else {
                        trimmed.to_owned()
                    }
                } else {
                    p.to_owned()
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains('+') || p.contains('-')) {
                return Err(SemverError::ShortWithMetadata);
            }
            parts.resize(3, "0".to_owned());
        }
        Semver::parse(&parts.join("."))
    }

    /// blang's `Version.Compare`: numbers, then pre-releases (a version
    /// without one is the greater); build metadata never counts.
    pub(crate) fn compare(&self, other: &Semver) -> Ordering {
        let numbers = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if numbers != Ordering::Equal {
            return numbers;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                for (a, b) in self.pre.iter().zip(&other.pre) {
                    let order = a.compare(b);
                    if order != Ordering::Equal {
                        return order;
                    }
                }
                self.pre.len().cmp(&other.pre.len())
            }
        }
    }

    /// The build metadata (part of the value, not of its order).
    #[cfg(test)]
    fn build(&self) -> &[String] {
        &self.build
    }
}

impl Prerelease {
    fn parse(text: &str) -> Result<Prerelease, SemverError> {
        if text.is_empty() {
            return Err(SemverError::EmptyPrerelease);
        }
        if only_digits(text) {
            if leading_zero(text) {
                return Err(SemverError::PrereleaseLeadingZeroes(text.to_owned()));
            }
            return parse_u64(text).map(Prerelease::Number);
        }
        if only_alphanumerics(text) {
            return Ok(Prerelease::Text(text.to_owned()));
        }
        Err(SemverError::InvalidPrerelease(text.to_owned()))
    }

    /// A number orders before text; texts order bytewise.
    fn compare(&self, other: &Prerelease) -> Ordering {
        match (self, other) {
            (Prerelease::Number(a), Prerelease::Number(b)) => a.cmp(b),
            (Prerelease::Number(_), Prerelease::Text(_)) => Ordering::Less,
            (Prerelease::Text(_), Prerelease::Number(_)) => Ordering::Greater,
            (Prerelease::Text(a), Prerelease::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Semver {
        Semver::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn strict_parsing() {
        for bad in [
            "",
            "1.2",
            "v1.2.3",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-01",
            "1.2.3-a_b",
            "1..3",
            "1.2.x",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(v("2.0.0-beta.1+build.5").build(), ["build", "5"]);
        assert_eq!(Semver::parse("1.2"), Err(SemverError::NotThreeParts));
    }

    #[test]
    fn normalized_parsing() {
        assert_eq!(Semver::parse_normalized("v1.2").map(|s| s.minor), Ok(2));
        assert_eq!(Semver::parse_normalized("01.02.03").map(|s| s.patch), Ok(3));
        assert_eq!(Semver::parse_normalized("1.2-rc"), Err(SemverError::ShortWithMetadata));
        assert_eq!(Semver::parse_normalized("v2").map(|s| s.major), Ok(2));
    }

    #[test]
    fn semver_precedence() {
        let order = [
            "1.0.0-2",
            "1.0.0-10",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.2.3",
        ];
        for pair in order.windows(2) {
            assert_eq!(v(pair[0]).compare(&v(pair[1])), Ordering::Less, "{pair:?}");
        }
        assert_eq!(v("1.0.0+a").compare(&v("1.0.0+b")), Ordering::Equal);
    }
}

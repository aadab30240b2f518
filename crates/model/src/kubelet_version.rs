//! [`KubeletVersion`]: which kubelet release's rules a node follows. The
//! engine's managers branch on it where a release changed a decision; it is
//! a plain minor number so that those branches are a field compare.

use std::fmt;

/// A kubelet minor release (`1.<minor>`) the engine reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeletVersion(u8);

/// Why a version text names no release the engine reproduces.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeletVersionError {
    #[error("{0:?} is not a kubelet version such as \"1.33\", \"v1.33\" or \"1.33.4\"")]
    Malformed(String),
    #[error("kubelet {text:?} is not supported; the engine reproduces {supported}")]
    Unsupported { text: String, supported: String },
}

impl KubeletVersion {
    pub const V1_32: KubeletVersion = KubeletVersion(32);
    pub const V1_33: KubeletVersion = KubeletVersion(33);
    pub const V1_34: KubeletVersion = KubeletVersion(34);
    pub const V1_35: KubeletVersion = KubeletVersion(35);
    pub const V1_36: KubeletVersion = KubeletVersion(36);
    pub const V1_37: KubeletVersion = KubeletVersion(37);

    /// Every release the engine reproduces, oldest first.
    pub const SUPPORTED: [KubeletVersion; 6] = [
        Self::V1_32,
        Self::V1_33,
        Self::V1_34,
        Self::V1_35,
        Self::V1_36,
        Self::V1_37,
    ];

    /// The newest supported release: what a node follows when nobody says.
    pub const NEWEST: KubeletVersion = Self::SUPPORTED[Self::SUPPORTED.len() - 1];

    /// `"1.33"`, `"v1.33"` and a patch release `"1.33.4"` all name 1.33
    /// (patch releases do not change decisions).
    ///
    /// # Errors
    /// [`KubeletVersionError`] for text that is no version, or a release
    /// outside [`KubeletVersion::SUPPORTED`].
    pub fn parse(text: &str) -> Result<KubeletVersion, KubeletVersionError> {
        let malformed = || KubeletVersionError::Malformed(text.to_owned());
        let mut parts = text.strip_prefix('v').unwrap_or(text).split('.');
        let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(malformed());
        };
        let patch_ok = match (parts.next(), parts.next()) {
            (None, _) => true,
            (Some(patch), None) => is_number(patch),
            _ => false,
        };
        if !is_number(minor) || !patch_ok {
            return Err(malformed());
        }
        let version = minor.parse::<u8>().ok().map(KubeletVersion);
        match version {
            Some(version) if Self::SUPPORTED.contains(&version) => Ok(version),
            _ => Err(KubeletVersionError::Unsupported {
                text: text.to_owned(),
                supported: Self::supported_list(),
            }),
        }
    }

    /// `"1.32, 1.33, ..."`, for messages.
    pub fn supported_list() -> String {
        Self::SUPPORTED
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The minor release number (`33` for 1.33).
    pub fn minor(self) -> u8 {
        self.0
    }

    /// `"1.33"`.
    pub fn as_str(self) -> &'static str {
        match self.0 {
            32 => "1.32",
            33 => "1.33",
            34 => "1.34",
            35 => "1.35",
            36 => "1.36",
            37 => "1.37",
            _ => unreachable!("only supported versions are constructed"),
        }
    }

    /// Whether this release is `other` or newer.
    pub fn at_least(self, other: KubeletVersion) -> bool {
        self >= other
    }
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

impl Default for KubeletVersion {
    fn default() -> Self {
        Self::NEWEST
    }
}

impl fmt::Display for KubeletVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_the_kubelet_names_them() {
        let cases: &[(&str, Result<KubeletVersion, &str>)] = &[
            ("1.32", Ok(KubeletVersion::V1_32)),
            ("v1.33", Ok(KubeletVersion::V1_33)),
            ("1.34.4", Ok(KubeletVersion::V1_34)),
            ("v1.32.10", Ok(KubeletVersion::V1_32)),
            ("1.37.2", Ok(KubeletVersion::V1_37)),
            ("v1.35", Ok(KubeletVersion::V1_35)),
            ("1.38", Err("unsupported")),
            ("1.31", Err("unsupported")),
            ("1.99", Err("unsupported")),
            ("2.32", Err("malformed")),
            ("1.", Err("malformed")),
            ("1.33.x", Err("malformed")),
            ("1.33.4.1", Err("malformed")),
            ("", Err("malformed")),
            ("1.+33", Err("malformed")),
        ];
        for (text, want) in cases {
            let got = KubeletVersion::parse(text).map_err(|e| match e {
                KubeletVersionError::Malformed(_) => "malformed",
                KubeletVersionError::Unsupported { .. } => "unsupported",
            });
            assert_eq!(&got, want, "{text}");
        }
    }

    #[test]
    fn a_version_prints_as_its_minor_release_and_the_default_is_the_newest() {
        for version in KubeletVersion::SUPPORTED {
            assert_eq!(KubeletVersion::parse(version.as_str()), Ok(version));
        }
        assert_eq!(KubeletVersion::default(), KubeletVersion::V1_37);
        assert!(KubeletVersion::V1_34.at_least(KubeletVersion::V1_33));
        assert!(!KubeletVersion::V1_32.at_least(KubeletVersion::V1_33));
        assert_eq!(
            KubeletVersion::parse("1.31").unwrap_err().to_string(),
            "kubelet \"1.31\" is not supported; the engine reproduces 1.32, 1.33, 1.34, 1.35, 1.36, 1.37"
        );
    }
}

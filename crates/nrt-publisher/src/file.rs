//! [`FileSink`]: NRT objects as YAML in a file, replaced atomically (a
//! reader sees the old object or the new one, never half of one), or on
//! standard output, one `---` document per change.

use std::io::Write;
use std::path::PathBuf;

use topoalign_nrt::NodeResourceTopology;

use crate::Destination;

/// A file, or standard output.
#[derive(Clone, Debug)]
pub struct FileSink {
    path: Option<PathBuf>,
}

impl FileSink {
    /// Writes to `path`; `-` means standard output.
    pub fn new(path: PathBuf) -> FileSink {
        let path = (path.as_os_str() != "-").then_some(path);
        FileSink { path }
    }

    /// Writes `object` now (blocking).
    ///
    /// # Errors
    /// I/O errors, with the path in the message.
    pub fn write(&self, object: &NodeResourceTopology) -> Result<(), std::io::Error> {
        let yaml = serde_yaml_ng::to_string(object).map_err(std::io::Error::other)?;
        let Some(path) = &self.path else {
            let mut out = std::io::stdout().lock();
            out.write_all(format!("---\n{yaml}").as_bytes())?;
            return out.flush();
        };
        let with_path = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Same directory, so the rename cannot cross file systems.
        let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&temporary).and_then(|mut file| {
            file.write_all(yaml.as_bytes())?;
            file.sync_all()
        });
        let result = written.and_then(|()| std::fs::rename(&temporary, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result.map_err(with_path)
    }
}

impl Destination for FileSink {
    type Error = std::io::Error;
    async fn deliver(&self, object: &NodeResourceTopology) -> Result<(), std::io::Error> {
        let sink = self.clone();
        let object = object.clone();
        tokio::task::spawn_blocking(move || sink.write(&object))
            .await
            .map_err(std::io::Error::other)?
    }
}

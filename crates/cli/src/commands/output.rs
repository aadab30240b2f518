//! The output flags every command that prints a document shares:
//! `-o/--output FORMAT` (each command has its own formats) and
//! `--out-file FILE` instead of standard output.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

/// `-o/--output FORMAT` and `--out-file FILE`.
#[derive(clap::Args, Clone, Debug)]
pub struct Output<F>
where
    F: clap::ValueEnum + Default + Clone + Send + Sync + 'static,
{
    /// Output format (the default is marked below).
    // Not `default_value_t`: clap derive caches that text in a static
    // shared by every `F`, so all commands would show the first one's.
    #[arg(short = 'o', long = "output", alias = "format", value_enum, value_name = "FORMAT")]
    pub format: Option<F>,
    /// Write the output to FILE instead of standard output.
    #[arg(long = "out-file", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

impl<F> Output<F>
where
    F: clap::ValueEnum + Default + Clone + Send + Sync + 'static,
{
    /// The format asked for, else the command's default.
    pub fn format(&self) -> F {
        self.format.clone().unwrap_or_default()
    }

    /// Writes `bytes` to the file, or standard output.
    ///
    /// # Errors
    /// An I/O error naming the file.
    pub fn write(&self, bytes: &[u8]) -> anyhow::Result<()> {
        match &self.file {
            Some(path) => std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display())),
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .context("cannot write to standard output")
            }
        }
    }
}

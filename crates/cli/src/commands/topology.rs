//! `topoalign topology`: read a machine — the local one (sysfs under `/`
//! and NVML), a sysfs tree or capture archive, an hwloc XML export, or a
//! scenario's `topology:` block — and show it: text for people, JSON/YAML
//! for tools, a scenario ready for `replay`, or a picture (SVG/PNG).
//!
//! `-o/--output FORMAT` chooses the form, `--out-file FILE` where it goes.
//! Exit status 2 for a machine that cannot be read (the message names the
//! path); warnings about the machine go to standard error for the machine
//! formats and into the report for text.

use std::path::PathBuf;

use topoalign_discovery::{render_png, render_svg, render_text};
use topoalign_intake::{NodeFileKind, read_topology};
use topoalign_scenario::Scenario;

use super::output::Output;
use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The node file, as every command reads it: a sysfs tree or capture
    /// archive, an hwloc XML export (`.xml`), or a scenario. Default: this
    /// machine.
    #[arg(long, value_name = "FILE", group = "source")]
    node: Option<PathBuf>,
    /// Read a sysfs tree (a directory holding sys/, or /sys itself) or a
    /// capture archive (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz) instead of
    /// the local machine.
    #[arg(long, value_name = "ROOT", group = "source")]
    sysfs: Option<PathBuf>,
    /// Read an hwloc XML export (`lstopo --of xml`, hwloc 1.x or 2.x).
    #[arg(long, value_name = "FILE", group = "source")]
    hwloc: Option<PathBuf>,
    /// Read the `topology:` block of a scenario (JSON or YAML).
    #[arg(long, value_name = "FILE", group = "source")]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    output: Output<TopologyFormat>,
}

#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum TopologyFormat {
    /// A report for people: sockets, NUMA nodes, cores, memory, devices,
    /// distances, GPU links (the default).
    #[default]
    Text,
    /// Everything discovered, as JSON.
    Json,
    /// Everything discovered, as YAML.
    Yaml,
    /// A scenario document (JSON) whose topology is this machine and whose
    /// events are empty, ready for `topoalign replay`.
    Scenario,
    /// A picture of the machine.
    Svg,
    /// The same picture as PNG (needs --out-file).
    Png,
}

pub fn run(args: &Args) -> Result {
    let format = args.output.format();
    if format == TopologyFormat::Png && args.output.file.is_none() {
        return Err(Error::bad_input(
            "-o png writes an image: give the file with --out-file FILE",
        ));
    }
    let (path, kind) = source(args);
    let topology = read_topology(path, kind).map_err(Error::bad_input)?;
    if format != TopologyFormat::Text {
        for warning in &topology.warnings {
            eprintln!("warning: {warning}");
        }
        for note in &topology.notes {
            eprintln!("note: {note}");
        }
    }
    let bytes = match format {
        TopologyFormat::Text => render_text(&topology).into_bytes(),
        TopologyFormat::Json => (serde_json::to_string_pretty(&topology)? + "\n").into_bytes(),
        TopologyFormat::Yaml => serde_yaml_ng::to_string(&topology)?.into_bytes(),
        TopologyFormat::Scenario => {
            let machine = topology
                .to_machine()
                .map_err(|error| Error::bad_input(format!("this machine cannot be written as a scenario: {error}")))?;
            (serde_json::to_string_pretty(&Scenario::for_machine(&machine))? + "\n").into_bytes()
        }
        TopologyFormat::Svg => render_svg(&topology, None).into_bytes(),
        TopologyFormat::Png => render_png(&render_svg(&topology, None), 2.0).map_err(anyhow::Error::from)?,
    };
    args.output.write(&bytes)?;
    Ok(Outcome::Success)
}

/// The node file and its kind: `--node` is detected like every command's,
/// `--sysfs`, `--hwloc` and `--scenario` say which kind it is.
fn source(args: &Args) -> (Option<&std::path::Path>, NodeFileKind) {
    [
        (&args.node, NodeFileKind::Detect),
        (&args.sysfs, NodeFileKind::Sysfs),
        (&args.hwloc, NodeFileKind::Hwloc),
        (&args.scenario, NodeFileKind::Scenario),
    ]
    .into_iter()
    .find_map(|(path, kind)| path.as_deref().map(|path| (Some(path), kind)))
    .unwrap_or((None, NodeFileKind::Detect))
}

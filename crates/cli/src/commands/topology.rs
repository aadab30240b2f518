//! `topoalign topology`: read a machine — the local one (sysfs under `/`
//! and NVML), a sysfs tree or capture archive, an hwloc XML export, or a
//! scenario's `topology:` block — and show it: text for people, JSON/YAML
//! for tools, a scenario ready for `replay`, or a picture (SVG/PNG).
//!
//! Exit status 2 for a machine that cannot be read (the message names the
//! path); warnings about the machine go to standard error for the machine
//! formats and into the report for text.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use topoalign_discovery::{
    DiscoveryError, Topology, read_hwloc, read_local, read_scenario, read_sysfs, render_png, render_svg, render_text,
};
use topoalign_scenario::Scenario;

use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {
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
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write to FILE instead of standard output (needed for png).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A report for people: sockets, NUMA nodes, cores, memory, devices,
    /// distances, GPU links.
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
    /// The same picture as PNG (needs -o).
    Png,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.format == Format::Png && args.output.is_none() {
        eprintln!("topoalign: --format png writes an image: give the file with -o FILE");
        return Ok(Outcome::BadInput);
    }
    let topology = match read(args) {
        Ok(topology) => topology,
        Err(error) => {
            eprintln!("topoalign: {error}");
            return Ok(Outcome::BadInput);
        }
    };
    if args.format != Format::Text {
        for warning in &topology.warnings {
            eprintln!("warning: {warning}");
        }
        for note in &topology.notes {
            eprintln!("note: {note}");
        }
    }
    let bytes = match args.format {
        Format::Text => render_text(&topology).into_bytes(),
        Format::Json => (serde_json::to_string_pretty(&topology)? + "\n").into_bytes(),
        Format::Yaml => serde_yaml_ng::to_string(&topology)?.into_bytes(),
        Format::Scenario => match topology.to_machine() {
            Ok(machine) => (serde_json::to_string_pretty(&Scenario::for_machine(&machine))? + "\n").into_bytes(),
            Err(error) => {
                eprintln!("topoalign: this machine cannot be written as a scenario: {error}");
                return Ok(Outcome::BadInput);
            }
        },
        Format::Svg => render_svg(&topology, None).into_bytes(),
        Format::Png => render_png(&render_svg(&topology, None), 2.0)?,
    };
    match &args.output {
        Some(path) => std::fs::write(path, &bytes).with_context(|| format!("cannot write {}", path.display()))?,
        None => std::io::stdout()
            .write_all(&bytes)
            .context("cannot write to standard output")?,
    }
    Ok(Outcome::Success)
}

fn read(args: &Args) -> Result<Topology, DiscoveryError> {
    match (&args.sysfs, &args.hwloc, &args.scenario) {
        (Some(root), _, _) => read_sysfs(root),
        (_, Some(file), _) => read_hwloc(file),
        (_, _, Some(file)) => read_scenario(file),
        _ => read_local(),
    }
}

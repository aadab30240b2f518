//! `topoalign topology`: read a machine — the local one (sysfs under `/`
//! and NVML), a sysfs tree or capture archive, an hwloc XML export, or a
//! scenario's `topology:` block — and show it: text for people, JSON/YAML
//! for tools, a scenario ready for `replay`, a picture (SVG/PNG), or DRA
//! ResourceSlices of its PCI devices with the standard locality attributes
//! (`-o resourceslices`, `--node-name`, `--driver`, `--pool`,
//! `--numa-node-form`).
//!
//! `-o/--output FORMAT` chooses the form, `--out-file FILE` where it goes.
//! Exit status 2 for a machine that cannot be read (the message names the
//! path); warnings about the machine go to standard error for the machine
//! formats and into the report for text.

use std::path::PathBuf;

use topoalign_discovery::resourceslices::{
    DEFAULT_DRIVER, NumaNodeForm, SliceOption, SliceOptions, resource_slices, validate_resource_slice,
};
use topoalign_discovery::{Topology, render_png, render_svg, render_text};
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
    /// For -o resourceslices: the Kubernetes node the devices are on.
    /// Default: this machine's hostname; required for a node file.
    #[arg(long, value_name = "NAME")]
    node_name: Option<String>,
    /// For -o resourceslices: the DRA driver name (default
    /// pci.topoalign.io), also the domain of the driver's own attributes.
    #[arg(long, value_name = "NAME")]
    driver: Option<String>,
    /// For -o resourceslices: the pool (default: the node name).
    #[arg(long, value_name = "NAME")]
    pool: Option<String>,
    /// For -o resourceslices: resource.kubernetes.io/numaNode as an int
    /// (`scalar`, the default) or as the KEP-6072 list (`list`: the node,
    /// then the same-socket nodes at the minimum distance; needs the
    /// DRAListTypeAttributes feature gate).
    #[arg(long, value_enum, value_name = "FORM")]
    numa_node_form: Option<NumaNodeFormArg>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum NumaNodeFormArg {
    Scalar,
    List,
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
    /// DRA ResourceSlices (resource.k8s.io/v1, YAML documents for `kubectl
    /// apply -f`) of the PCI devices, with resource.kubernetes.io/pcieRoot
    /// and numaNode.
    #[value(name = "resourceslices")]
    ResourceSlices,
}

pub fn run(args: &Args) -> Result {
    let format = args.output.format();
    if format == TopologyFormat::Png && args.output.file.is_none() {
        return Err(Error::bad_input(
            "-o png writes an image: give the file with --out-file FILE",
        ));
    }
    let slice_options = slice_options(args, format)?;
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
            (serde_json::to_string_pretty(&scenario_of(&machine))? + "\n").into_bytes()
        }
        TopologyFormat::Svg => render_svg(&topology, None).into_bytes(),
        TopologyFormat::Png => render_png(&render_svg(&topology, None), 2.0).map_err(anyhow::Error::from)?,
        TopologyFormat::ResourceSlices => {
            let options = match slice_options {
                Some(options) => options,
                None => default_slice_options(args)?,
            };
            slices_yaml(&topology, &options)?.into_bytes()
        }
    };
    args.output.write(&bytes)?;
    Ok(Outcome::Success)
}

/// The scenario of `machine`, with the machine's own NUMA ids: a machine
/// read with ids past 63 is numbered anew (`Machine::numa_label` gives the
/// ids back); its distance rows list one entry per node in id order, as a
/// replay reads them.
fn scenario_of(machine: &topoalign_model::Machine) -> Scenario {
    let mut scenario = Scenario::for_machine(machine);
    if machine.numa_labels().is_some() {
        let topology = &mut scenario.topology;
        for node in &mut topology.numa_nodes {
            node.id = machine.numa_label(node.id);
        }
        for cpu in &mut topology.cpus {
            cpu.numa = machine.numa_label(cpu.numa);
        }
        for device in topology.devices.values_mut().flatten() {
            device.numa.iter_mut().for_each(|n| *n = machine.numa_label(*n));
        }
    }
    scenario
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

/// The `-o resourceslices` flags, checked before the machine is read: none
/// of them with another format. `None` when the node name is still to be
/// found (this machine's hostname).
fn slice_options(args: &Args, format: TopologyFormat) -> Result<Option<SliceOptions>> {
    if format != TopologyFormat::ResourceSlices {
        let given = [
            ("--node-name", args.node_name.is_some()),
            ("--driver", args.driver.is_some()),
            ("--pool", args.pool.is_some()),
            ("--numa-node-form", args.numa_node_form.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return Err(Error::bad_input(format!("{flag} is only for -o resourceslices")));
        }
        return Ok(None);
    }
    let reads_a_file = source(args).0.is_some();
    match &args.node_name {
        Some(name) => Ok(Some(options_for(args, name.clone()))),
        None if reads_a_file => Err(Error::bad_input(
            "-o resourceslices of a node file needs --node-name NAME (the Kubernetes node the devices are on)",
        )),
        None => Ok(None),
    }
}

/// The options for this machine: its hostname is the node name.
fn default_slice_options(args: &Args) -> Result<SliceOptions> {
    let name = topoalign_nrt_publisher::pipeline::hostname()
        .map_err(|_| Error::bad_input("cannot read this machine's hostname; give --node-name NAME"))?;
    Ok(options_for(args, name))
}

fn options_for(args: &Args, node_name: String) -> SliceOptions {
    SliceOptions {
        node_name,
        driver: args.driver.clone().unwrap_or_else(|| DEFAULT_DRIVER.to_string()),
        pool: args.pool.clone(),
        numa_node_form: match args.numa_node_form {
            Some(NumaNodeFormArg::List) => NumaNodeForm::List,
            Some(NumaNodeFormArg::Scalar) | None => NumaNodeForm::Scalar,
        },
    }
}

/// The slices as `---`-separated YAML documents (what `kubectl apply -f`
/// takes), each checked against the API server's offline validation first;
/// what they leave out goes to standard error.
fn slices_yaml(topology: &Topology, options: &SliceOptions) -> Result<String> {
    let slices = resource_slices(topology, options).map_err(|error| {
        let flag = match error.option {
            SliceOption::NodeName => "--node-name",
            SliceOption::Driver => "--driver",
            SliceOption::Pool => "--pool",
        };
        Error::bad_input(format!("{flag}: {error}"))
    })?;
    for warning in &slices.warnings {
        eprintln!("warning: {warning}");
    }
    let mut text = String::new();
    for slice in &slices.slices {
        let errors = validate_resource_slice(slice);
        if !errors.is_empty() {
            let name = slice.metadata.name.as_deref().unwrap_or_default();
            return Err(anyhow::anyhow!(
                "ResourceSlice {name} would be refused by the API server: {}",
                errors.join("; ")
            )
            .into());
        }
        text.push_str("---\n");
        text.push_str(&serde_yaml_ng::to_string(slice)?);
    }
    Ok(text)
}

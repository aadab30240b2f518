//! The machine as a picture (SVG, and PNG rendered from the same SVG with
//! `resvg` and an embedded DejaVu Sans Mono, so no system fonts are needed):
//! sockets, dies, NUMA nodes, L3 groups, cores and their threads nest by
//! their CPU sets, with memory, huge pages and attached devices at the
//! bottom of the box they belong to.
//!
//! Made to be coloured later: [`render_svg`] takes an optional
//! [`Colouring`] that fills chosen CPU cells and device chips (e.g. one
//! colour per admitted pod) and adds a legend. Every CPU cell has the id
//! `cpu-<N>` and every device chip `pci-<address>`, so other tools can style
//! the SVG too. Owns drawing only; reads nothing but the [`Topology`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use topoalign_model::{CpuSet, human_bytes};

use crate::topology::{DeviceKind, NumaNode, PciDevice, Topology};

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Colour(pub u8, pub u8, pub u8);

impl Colour {
    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    /// Black or white, whichever reads better on this colour.
    fn text(self) -> Colour {
        let luma = 299 * u32::from(self.0) + 587 * u32::from(self.1) + 114 * u32::from(self.2);
        if luma > 140_000 {
            Colour(17, 24, 39)
        } else {
            Colour(255, 255, 255)
        }
    }
}

/// Colours for some CPUs and devices, with a legend: how allocations will
/// be shown. Devices are keyed by PCI address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Colouring {
    pub cpus: BTreeMap<u32, Colour>,
    pub devices: BTreeMap<String, Colour>,
    /// Legend entries, in order: colour and what it means.
    pub legend: Vec<(Colour, String)>,
}

/// Why a PNG could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PictureError {
    #[error("cannot render the picture: {0}")]
    Render(String),
}

const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const FONT_FAMILY: &str = "DejaVu Sans Mono";
/// DejaVu Sans Mono advances every glyph by 0.602 em.
const ADVANCE: f64 = 0.602;

const PAD: f64 = 6.0;
const GAP: f64 = 6.0;
const PU_W: f64 = 30.0;
const PU_H: f64 = 18.0;
const PU_GAP: f64 = 2.0;
const CORE_PAD: f64 = 3.0;
const CHIP_H: f64 = 18.0;

/// What kind of box, for its style.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Package,
    Die,
    Numa,
    L3,
}

struct Style {
    fill: &'static str,
    stroke: &'static str,
    title_size: f64,
}

fn style(level: Level) -> Style {
    match level {
        Level::Package => Style {
            fill: "#f3f4f6",
            stroke: "#4b5563",
            title_size: 13.0,
        },
        Level::Die => Style {
            fill: "#eef2ff",
            stroke: "#6366f1",
            title_size: 11.0,
        },
        Level::Numa => Style {
            fill: "#ecfdf5",
            stroke: "#059669",
            title_size: 12.0,
        },
        Level::L3 => Style {
            fill: "#fffbeb",
            stroke: "#d97706",
            title_size: 10.0,
        },
    }
}

fn device_colour(kind: DeviceKind) -> Colour {
    match kind {
        DeviceKind::Gpu => Colour(22, 163, 74),
        DeviceKind::EthernetNic | DeviceKind::OtherNic => Colour(37, 99, 235),
        DeviceKind::InfinibandNic => Colour(124, 58, 237),
        DeviceKind::Nvme => Colour(234, 88, 12),
        DeviceKind::Accelerator => Colour(219, 39, 119),
        DeviceKind::Display | DeviceKind::Other => Colour(107, 114, 128),
    }
}

const MEMORY_CHIP: Colour = Colour(13, 148, 136);
const PU_FILL: Colour = Colour(219, 234, 254);

/// A chip at the bottom of a box: a device (or a group of SR-IOV VFs) or a
/// memory-only NUMA node.
struct Chip {
    text: String,
    colour: Colour,
    id: Option<String>,
    title: String,
}

/// A box of the picture before layout.
struct Group {
    level: Level,
    cpus: CpuSet,
    titles: Vec<String>,
    lines: Vec<String>,
    numa: Option<usize>,
    children: Vec<Group>,
    cores: Vec<CpuSet>,
    chips: Vec<Chip>,
}

impl Group {
    fn new(level: Level, cpus: CpuSet, title: String) -> Group {
        Group {
            level,
            cpus,
            titles: vec![title],
            lines: Vec::new(),
            numa: None,
            children: Vec::new(),
            cores: Vec::new(),
            chips: Vec::new(),
        }
    }
}

/// Renders the picture as SVG text.
pub fn render_svg(topology: &Topology, colouring: Option<&Colouring>) -> String {
    let empty = Colouring::default();
    let colouring = colouring.unwrap_or(&empty);
    let (mut roots, loose_memory, loose_chips) = build_groups(topology);
    let mut laid: Vec<Laid> = roots.iter_mut().map(layout).collect();
    uniform(&mut laid);

    // Title, sockets grid, loose chips, legend — stacked.
    let title = topology.source.clone();
    let summary = summary_line(topology);
    let mut width = text_width(&title, 15.0).max(text_width(&summary, 11.0)) + 2.0 * PAD;
    let cell_w = laid.iter().map(|l| l.w).fold(0.0, f64::max);
    let cell_h = laid.iter().map(|l| l.h).fold(0.0, f64::max);
    let columns = choose_columns(laid.len(), cell_w, cell_h, 2.5, 1.0);
    let rows = laid.len().div_ceil(columns.max(1));
    let grid_w = columns as f64 * cell_w + (columns.saturating_sub(1)) as f64 * GAP;
    let grid_h = rows as f64 * cell_h + (rows.saturating_sub(1)) as f64 * GAP;
    width = width.max(grid_w + 2.0 * PAD);
    let strips = [
        ("Memory-only NUMA nodes:", loose_memory),
        ("No NUMA affinity:", loose_chips),
    ];
    let label_w = strips.iter().map(|(l, _)| text_width(l, 11.0)).fold(0.0, f64::max) + GAP;
    let legend = legend_entries(topology, colouring);
    let legend_rows = flow_chips(&legend, width - 2.0 * PAD);

    let mut y = PAD;
    let mut body = String::new();
    let _ = write!(
        body,
        r##"<text x="{PAD}" y="{}" font-size="15" font-weight="bold" fill="#111827">{}</text>"##,
        y + 15.0,
        escape(&title)
    );
    y += 20.0;
    let _ = write!(
        body,
        r##"<text x="{PAD}" y="{}" font-size="11" fill="#374151">{}</text>"##,
        y + 11.0,
        escape(&summary)
    );
    y += 16.0 + GAP;
    for (i, item) in laid.iter().enumerate() {
        let x = PAD + (i % columns) as f64 * (cell_w + GAP);
        let yy = y + (i / columns) as f64 * (cell_h + GAP);
        draw(&mut body, item, x, yy, cell_w, cell_h, colouring);
    }
    y += grid_h + GAP;
    for (label, chips) in strips.iter().filter(|(_, chips)| !chips.is_empty()) {
        let rows = flow_chips(chips, (width - 2.0 * PAD - label_w).max(200.0));
        let _ = write!(
            body,
            r##"<text x="{PAD}" y="{}" font-size="11" fill="#374151">{label}</text>"##,
            y + 13.0
        );
        draw_chips(&mut body, chips, &rows, PAD + label_w, y, colouring);
        y += chip_rows_height(&rows) + GAP;
    }
    if !legend.is_empty() {
        draw_chips(&mut body, &legend, &legend_rows, PAD, y, &Colouring::default());
        y += chip_rows_height(&legend_rows) + GAP;
    }
    let height = y + PAD - GAP;
    let (w, h) = (width.ceil(), height.ceil());
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT_FAMILY}, monospace"><rect width="100%" height="100%" fill="#ffffff"/>{body}</svg>
"##
    )
}

/// Renders the SVG as PNG, `scale` times its size.
///
/// # Errors
/// [`PictureError`] when the SVG cannot be rendered or encoded.
pub fn render_png(svg: &str, scale: f32) -> Result<Vec<u8>, PictureError> {
    let mut options = resvg::usvg::Options {
        font_family: FONT_FAMILY.to_string(),
        ..resvg::usvg::Options::default()
    };
    options.fontdb_mut().load_font_data(FONT.to_vec());
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(|e| PictureError::Render(e.to_string()))?;
    let size = tree.size();
    let width = (size.width() * scale).ceil() as u32;
    let height = (size.height() * scale).ceil() as u32;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(width, height)
        .ok_or_else(|| PictureError::Render(format!("a {width}x{height} picture is too large")))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| PictureError::Render(e.to_string()))
}

fn summary_line(t: &Topology) -> String {
    let threads = t.threads_per_core();
    let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    let mut parts = vec![
        plural(t.packages.len(), "socket"),
        plural(t.numa_nodes.len(), "NUMA node"),
        plural(t.cores().len(), "core"),
        plural(t.cpus.len(), "CPU"),
    ];
    if threads > 1 {
        parts.push(format!("SMT{threads}"));
    }
    parts.push(human_bytes(t.total_memory()));
    if let Some(model) = &t.cpu_model {
        parts.push(model.clone());
    }
    parts.join(" · ")
}

/// Builds the nesting: packages, dies (when a package has several), NUMA
/// nodes and L3 groups, each inside the smallest other group holding all
/// its CPUs; equal CPU sets merge into one box with both names. A group
/// that overlaps another without nesting (rare) is left out. Returns the
/// top-level boxes, and the memory-only nodes and devices that belong to no
/// box.
fn build_groups(t: &Topology) -> (Vec<Group>, Vec<Chip>, Vec<Chip>) {
    let mut candidates: Vec<Group> = Vec::new();
    for package in &t.packages {
        candidates.push(Group::new(
            Level::Package,
            package.cpus.clone(),
            format!("Socket {}", package.id),
        ));
        if package.dies.len() > 1 {
            for die in &package.dies {
                candidates.push(Group::new(Level::Die, die.cpus.clone(), format!("Die {}", die.id)));
            }
        }
    }
    for node in t.numa_nodes.iter().filter(|n| !n.cpus.is_empty()) {
        let mut group = Group::new(Level::Numa, node.cpus.clone(), numa_title(node));
        group.lines = numa_lines(node);
        group.numa = Some(node.id);
        candidates.push(group);
    }
    let core_sets: BTreeSet<String> = t.cores().values().map(ToString::to_string).collect();
    for cache in &t.caches {
        let cpus = cache.cpus.intersection(&t.cpu_set());
        // An L3 per core (POWER) is no group worth a box.
        if cpus.len() <= 1 || core_sets.contains(&cpus.to_string()) {
            continue;
        }
        let size = cache.size.map(|s| format!(" {}", human_bytes(s))).unwrap_or_default();
        candidates.push(Group::new(Level::L3, cpus, format!("L3{size}")));
    }
    // Merge equal sets, keeping the outermost level's style.
    candidates.sort_by(|a, b| b.cpus.len().cmp(&a.cpus.len()).then(a.level.cmp(&b.level)));
    let mut merged: Vec<Group> = Vec::new();
    for group in candidates {
        match merged.iter_mut().find(|m| m.cpus == group.cpus) {
            Some(existing) => {
                existing.titles.extend(group.titles);
                existing.lines.extend(group.lines);
                existing.numa = existing.numa.or(group.numa);
            }
            None => merged.push(group),
        }
    }
    // Keep only groups that nest (laminar family), outermost first.
    let mut kept: Vec<Group> = Vec::new();
    for group in merged {
        let nests = kept.iter().all(|k| {
            let shared = k.cpus.intersection_len(&group.cpus);
            shared == 0 || shared == group.cpus.len()
        });
        if nests {
            kept.push(group);
        }
    }
    // Parent of each: the smallest earlier group containing it.
    let parents: Vec<Option<usize>> = (0..kept.len())
        .map(|i| {
            (0..i)
                .filter(|&j| kept[i].cpus.is_subset(&kept[j].cpus))
                .min_by_key(|&j| kept[j].cpus.len())
        })
        .collect();
    // Cores go to the smallest group holding them.
    for core in t.cores().into_values() {
        if let Some(owner) = (0..kept.len())
            .filter(|&j| core.is_subset(&kept[j].cpus))
            .min_by_key(|&j| kept[j].cpus.len())
        {
            kept[owner].cores.push(core);
        }
    }
    // Chips: devices by their NUMA nodes, memory-only nodes by locality.
    let mut loose = Vec::new();
    let mut loose_memory = Vec::new();
    let owner_of_cpus = |kept: &[Group], cpus: &CpuSet| -> Option<usize> {
        (!cpus.is_empty())
            .then(|| {
                (0..kept.len())
                    .filter(|&j| cpus.is_subset(&kept[j].cpus))
                    .min_by_key(|&j| kept[j].cpus.len())
            })
            .flatten()
    };
    for node in t.numa_nodes.iter().filter(|n| n.cpus.is_empty()) {
        let chip = Chip {
            text: format!(
                "NUMA {}{} {}",
                node.id,
                node.subtype.as_ref().map(|s| format!(" {s}")).unwrap_or_default(),
                node.memory.map_or("?".to_string(), human_bytes)
            ),
            colour: MEMORY_CHIP,
            id: Some(format!("numa-{}", node.id)),
            title: format!("memory-only NUMA node {}", node.id),
        };
        // Its CPU locality when the source gives one, else the nearest node
        // with CPUs (a unique smallest distance: MCDRAM, PMem, CXL).
        let nearest = || {
            let mut by_distance: Vec<(u64, usize)> = node
                .distances
                .iter()
                .filter(|&(&to, _)| to != node.id && t.numa_node(to).is_some_and(|n| !n.cpus.is_empty()))
                .map(|(&to, &d)| (d, to))
                .collect();
            by_distance.sort_unstable();
            match by_distance.as_slice() {
                [(d, to), rest @ ..] if rest.first().is_none_or(|(next, _)| next > d) => Some(*to),
                _ => None,
            }
        };
        let owner = owner_of_cpus(&kept, &node.local_cpus)
            .or_else(|| nearest().and_then(|to| kept.iter().position(|g| g.numa == Some(to))));
        match owner {
            Some(owner) => kept[owner].chips.push(chip),
            None => loose_memory.push(chip),
        }
    }
    for (key, devices) in device_groups(t) {
        let nodes = key.0;
        let chip = device_chip(&devices);
        let node_cpus: CpuSet = nodes
            .iter()
            .filter_map(|&n| t.numa_node(n))
            .fold(CpuSet::new(), |acc, n| acc.union(&n.cpus));
        let owner = match nodes.as_slice() {
            [one] => kept
                .iter()
                .position(|g| g.numa == Some(*one))
                .or_else(|| owner_of_cpus(&kept, &node_cpus)),
            [] => None,
            _ => owner_of_cpus(&kept, &node_cpus),
        };
        match owner {
            Some(owner) => kept[owner].chips.push(chip),
            None => loose.push(chip),
        }
    }
    // Assemble the tree bottom-up (children come after parents in `kept`).
    let mut slots: Vec<Option<Group>> = kept.into_iter().map(Some).collect();
    let mut roots = Vec::new();
    for i in (0..slots.len()).rev() {
        let Some(group) = slots[i].take() else { continue };
        match parents[i] {
            Some(parent) => {
                if let Some(p) = slots[parent].as_mut() {
                    p.children.push(group);
                }
            }
            None => roots.push(group),
        }
    }
    roots.reverse();
    for root in &mut roots {
        sort_tree(root);
    }
    (roots, loose_memory, loose)
}

fn sort_tree(group: &mut Group) {
    group.children.sort_by_key(|c| c.cpus.first());
    group.cores.sort_by_key(CpuSet::first);
    for child in &mut group.children {
        sort_tree(child);
    }
}

fn numa_title(node: &NumaNode) -> String {
    format!(
        "NUMA {} · {}",
        node.id,
        node.memory.map_or("? memory".to_string(), human_bytes)
    )
}

fn numa_lines(node: &NumaNode) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(free) = node.memory_free {
        parts.push(format!("{} free", human_bytes(free)));
    }
    let pools: Vec<String> = node
        .hugepages
        .iter()
        .filter(|(_, p)| p.total > 0)
        .map(|(&size, pool)| {
            format!(
                "{}×{}",
                human_bytes(size).replace(".0 ", "").replace(' ', ""),
                pool.total
            )
        })
        .collect();
    if !pools.is_empty() {
        parts.push(format!("hugepages {}", pools.join(" ")));
    }
    if parts.is_empty() {
        Vec::new()
    } else {
        vec![parts.join(" · ")]
    }
}

/// Devices of interest grouped for chips: each device alone, except SR-IOV
/// VFs, which group by parent, ids and NUMA nodes.
fn device_groups(t: &Topology) -> BTreeMap<(Vec<usize>, String), Vec<&PciDevice>> {
    let mut groups: BTreeMap<(Vec<usize>, String), Vec<&PciDevice>> = BTreeMap::new();
    for device in t.pci_devices.iter().filter(|d| d.kind.is_of_interest()) {
        let key = if device.virtual_function {
            format!("vf {:?} {}", device.physical_function, device.ids())
        } else {
            device.address.clone()
        };
        groups.entry((device.numa.clone(), key)).or_default().push(device);
    }
    groups
}

fn device_chip(devices: &[&PciDevice]) -> Chip {
    let first = devices[0];
    let colour = device_colour(first.kind);
    if devices.len() > 1 || first.virtual_function {
        return Chip {
            text: format!("{} {}×VF {}", first.kind.label(), devices.len(), first.ids()),
            colour,
            id: None,
            title: devices.iter().map(|d| d.address.as_str()).collect::<Vec<_>>().join(" "),
        };
    }
    // OpenCL handles say the least about a GPU; prefer CUDA/NVML/RSMI names.
    let name = first
        .names
        .iter()
        .find(|n| !n.starts_with("opencl"))
        .or(first.names.first())
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    Chip {
        text: format!("{} {}{name}", first.kind.label(), first.short_address()),
        colour,
        id: Some(format!("pci-{}", first.address)),
        title: format!("{} {}", first.address, first.description.clone().unwrap_or_default()),
    }
}

fn legend_entries(t: &Topology, colouring: &Colouring) -> Vec<Chip> {
    let mut chips = Vec::new();
    let kinds: BTreeSet<DeviceKind> = t
        .pci_devices
        .iter()
        .filter(|d| d.kind.is_of_interest())
        .map(|d| d.kind)
        .collect();
    let names = |kind: DeviceKind| match kind {
        DeviceKind::Gpu => "GPU",
        DeviceKind::EthernetNic => "NIC Ethernet",
        DeviceKind::InfinibandNic => "IB InfiniBand",
        DeviceKind::OtherNic => "NET network",
        DeviceKind::Nvme => "NVMe storage",
        DeviceKind::Accelerator => "ACC accelerator",
        DeviceKind::Display => "VGA display",
        DeviceKind::Other => "other",
    };
    for kind in kinds {
        chips.push(Chip {
            text: names(kind).into(),
            colour: device_colour(kind),
            id: None,
            title: String::new(),
        });
    }
    if t.numa_nodes.iter().any(|n| n.cpus.is_empty()) {
        chips.push(Chip {
            text: "memory-only NUMA node".into(),
            colour: MEMORY_CHIP,
            id: None,
            title: String::new(),
        });
    }
    for (colour, label) in &colouring.legend {
        chips.push(Chip {
            text: label.clone(),
            colour: *colour,
            id: None,
            title: String::new(),
        });
    }
    chips
}

/// A box after layout: its size and where its parts go (relative).
struct Laid {
    w: f64,
    h: f64,
    level: Level,
    titles: Vec<String>,
    lines: Vec<String>,
    children: Vec<(f64, f64, Laid)>,
    child_cell: (f64, f64),
    cores: Vec<(f64, f64, Vec<u32>)>,
    core_size: (f64, f64),
    chips: Vec<Chip>,
    chip_rows: Vec<Vec<(f64, f64)>>,
    chips_y: f64,
}

fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * ADVANCE
}

/// Columns for `n` cells of `w`×`h` whose grid is closest to `aspect`
/// (width / height), preferring full last rows (`empty_weight` says how
/// much).
fn choose_columns(n: usize, w: f64, h: f64, aspect: f64, empty_weight: f64) -> usize {
    if n == 0 {
        return 1;
    }
    (1..=n)
        .map(|c| {
            let rows = n.div_ceil(c);
            let gw = c as f64 * w + (c - 1) as f64 * GAP;
            let gh = rows as f64 * h + (rows - 1) as f64 * GAP;
            let empty = (rows * c - n) as f64 / c as f64;
            ((gw / gh / aspect).ln().abs() + empty_weight * empty, c)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(1, |(_, c)| c)
}

fn core_cell(threads: usize) -> (usize, usize) {
    match threads {
        0..=2 => (threads.max(1), 1),
        3 | 4 => (2, 2),
        n => {
            let c = (n as f64).sqrt().ceil() as usize;
            (c, n.div_ceil(c))
        }
    }
}

fn layout(group: &mut Group) -> Laid {
    let style = style(group.level);
    let title = group.titles.join(" · ");
    let mut header_h = style.title_size + 6.0;
    header_h += group.lines.len() as f64 * 13.0;
    let mut content_w = text_width(&title, style.title_size);
    for line in &group.lines {
        content_w = content_w.max(text_width(line, 10.0));
    }
    // Sub-boxes.
    let mut children: Vec<Laid> = group.children.iter_mut().map(layout).collect();
    uniform(&mut children);
    let (cw, ch) = children.first().map_or((0.0, 0.0), |c| (c.w, c.h));
    let columns = choose_columns(children.len(), cw, ch, 1.6, 1.0);
    let mut placed = Vec::new();
    let mut y = header_h;
    let mut grid_w = 0.0f64;
    if !children.is_empty() {
        let rows = children.len().div_ceil(columns);
        for (i, child) in children.into_iter().enumerate() {
            placed.push((
                (i % columns) as f64 * (cw + GAP),
                y + (i / columns) as f64 * (ch + GAP),
                child,
            ));
        }
        grid_w = columns as f64 * cw + (columns - 1) as f64 * GAP;
        y += rows as f64 * ch + (rows - 1) as f64 * GAP + GAP;
    }
    // Cores.
    let threads = group.cores.iter().map(CpuSet::len).max().unwrap_or(1);
    let (tc, tr) = core_cell(threads);
    let core_w = tc as f64 * PU_W + (tc - 1) as f64 * PU_GAP + 2.0 * CORE_PAD;
    let core_h = tr as f64 * PU_H + (tr - 1) as f64 * PU_GAP + 2.0 * CORE_PAD;
    let mut cores = Vec::new();
    if !group.cores.is_empty() {
        let n = group.cores.len();
        let columns = choose_columns(n, core_w, core_h, 3.0, 2.0);
        let rows = n.div_ceil(columns);
        for (i, core) in group.cores.iter().enumerate() {
            cores.push((
                (i % columns) as f64 * (core_w + PU_GAP * 2.0),
                y + (i / columns) as f64 * (core_h + PU_GAP * 2.0),
                core.to_vec(),
            ));
        }
        grid_w = grid_w.max(columns as f64 * (core_w + 2.0 * PU_GAP) - 2.0 * PU_GAP);
        y += rows as f64 * (core_h + 2.0 * PU_GAP) - 2.0 * PU_GAP + GAP;
    }
    content_w = content_w.max(grid_w);
    let widest_chip = group.chips.iter().map(|c| chip_width(&c.text)).fold(0.0, f64::max);
    content_w = content_w.max(widest_chip);
    let chips = std::mem::take(&mut group.chips);
    let chip_rows = flow_chips(&chips, content_w);
    let chips_y = y;
    if !chips.is_empty() {
        y += chip_rows_height(&chip_rows) + GAP;
    }
    Laid {
        w: content_w + 2.0 * PAD,
        h: y - GAP + 2.0 * PAD,
        level: group.level,
        titles: group.titles.clone(),
        lines: group.lines.clone(),
        children: placed,
        child_cell: (cw, ch),
        cores,
        core_size: (core_w, core_h),
        chips,
        chip_rows,
        chips_y,
    }
}

/// Siblings are drawn in equal cells: the largest one's size.
fn uniform(items: &mut [Laid]) {
    let w = items.iter().map(|l| l.w).fold(0.0, f64::max);
    let h = items.iter().map(|l| l.h).fold(0.0, f64::max);
    for item in items {
        item.w = w;
        item.h = h;
    }
}

fn chip_width(text: &str) -> f64 {
    text_width(text, 10.0) + 10.0
}

/// Positions of chips in rows no wider than `width`.
fn flow_chips(chips: &[Chip], width: f64) -> Vec<Vec<(f64, f64)>> {
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut x = 0.0;
    for chip in chips {
        let w = chip_width(&chip.text);
        if rows.is_empty() || (x > 0.0 && x + w > width) {
            rows.push(Vec::new());
            x = 0.0;
        }
        let y = (rows.len() - 1) as f64 * (CHIP_H + 3.0);
        if let Some(row) = rows.last_mut() {
            row.push((x, y));
        }
        x += w + 4.0;
    }
    rows
}

fn chip_rows_height(rows: &[Vec<(f64, f64)>]) -> f64 {
    if rows.is_empty() {
        0.0
    } else {
        rows.len() as f64 * (CHIP_H + 3.0) - 3.0
    }
}

fn draw_chips(out: &mut String, chips: &[Chip], rows: &[Vec<(f64, f64)>], x0: f64, y0: f64, colouring: &Colouring) {
    for (chip, &(x, y)) in chips.iter().zip(rows.iter().flatten()) {
        let colour = chip
            .id
            .as_deref()
            .and_then(|id| id.strip_prefix("pci-"))
            .and_then(|address| colouring.devices.get(address))
            .copied()
            .unwrap_or(chip.colour);
        let w = chip_width(&chip.text);
        let id = chip
            .id
            .as_ref()
            .map(|i| format!(r#" id="{}""#, escape(i)))
            .unwrap_or_default();
        let _ = write!(
            out,
            r#"<g{id}><title>{}</title><rect x="{:.1}" y="{:.1}" width="{w:.1}" height="{CHIP_H}" rx="4" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{}">{}</text></g>"#,
            escape(&chip.title),
            x0 + x,
            y0 + y,
            colour.hex(),
            x0 + x + 5.0,
            y0 + y + 12.5,
            colour.text().hex(),
            escape(&chip.text)
        );
    }
}

fn draw(out: &mut String, laid: &Laid, x: f64, y: f64, w: f64, h: f64, colouring: &Colouring) {
    let style = style(laid.level);
    let dashed = if laid.level == Level::L3 {
        r#" stroke-dasharray="4 2""#
    } else {
        ""
    };
    let _ = write!(
        out,
        r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" rx="6" fill="{}" stroke="{}" stroke-width="1.2"{dashed}/>"#,
        style.fill, style.stroke
    );
    let title = laid.titles.join(" · ");
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="{}" font-weight="bold" fill="{}">{}</text>"#,
        x + PAD,
        y + PAD + style.title_size - 1.0,
        style.title_size,
        style.stroke,
        escape(&title)
    );
    for (i, line) in laid.lines.iter().enumerate() {
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#374151">{}</text>"##,
            x + PAD,
            y + PAD + style.title_size + 6.0 + i as f64 * 13.0 + 8.0,
            escape(line)
        );
    }
    for (cx, cy, child) in &laid.children {
        draw(
            out,
            child,
            x + PAD + cx,
            y + PAD + cy,
            laid.child_cell.0,
            laid.child_cell.1,
            colouring,
        );
    }
    let (core_w, core_h) = laid.core_size;
    for (cx, cy, threads) in &laid.cores {
        let (x0, y0) = (x + PAD + cx, y + PAD + cy);
        let _ = write!(
            out,
            r##"<rect x="{x0:.1}" y="{y0:.1}" width="{core_w:.1}" height="{core_h:.1}" rx="3" fill="#ffffff" stroke="#9ca3af" stroke-width="0.8"/>"##
        );
        let (tc, _) = core_cell(threads.len());
        for (i, cpu) in threads.iter().enumerate() {
            let px = x0 + CORE_PAD + (i % tc) as f64 * (PU_W + PU_GAP);
            let py = y0 + CORE_PAD + (i / tc) as f64 * (PU_H + PU_GAP);
            let fill = colouring.cpus.get(cpu).copied().unwrap_or(PU_FILL);
            let label = cpu.to_string();
            let size = if label.len() > 4 { 8.0 } else { 10.0 };
            let _ = write!(
                out,
                r#"<g id="cpu-{cpu}"><rect x="{px:.1}" y="{py:.1}" width="{PU_W}" height="{PU_H}" rx="2" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="{size}" text-anchor="middle" fill="{}">{label}</text></g>"#,
                fill.hex(),
                px + PU_W / 2.0,
                py + PU_H / 2.0 + size * 0.36,
                fill.text().hex()
            );
        }
    }
    if !laid.chips.is_empty() {
        draw_chips(
            out,
            &laid.chips,
            &laid.chip_rows,
            x + PAD,
            y + PAD + laid.chips_y,
            colouring,
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_aspect() {
        assert_eq!(choose_columns(1, 10.0, 10.0, 1.6, 1.0), 1);
        assert_eq!(choose_columns(4, 100.0, 100.0, 1.0, 1.0), 2);
        assert_eq!(choose_columns(2, 100.0, 100.0, 2.0, 1.0), 2);
        // Eight two-thread cores: two full rows of four, not 3+3+2.
        assert_eq!(choose_columns(8, 68.0, 24.0, 3.0, 2.0), 4);
    }

    #[test]
    fn contrast_text() {
        assert_eq!(Colour(255, 255, 255).text(), Colour(17, 24, 39));
        assert_eq!(Colour(22, 163, 74).text(), Colour(255, 255, 255));
        assert_eq!(Colour(1, 2, 255).hex(), "#0102ff");
    }
}

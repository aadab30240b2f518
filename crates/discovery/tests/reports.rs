//! The text report and the picture, on every real machine: nothing is lost
//! (every CPU is drawn once, every node is reported), the SVG is well-formed,
//! and a colouring reaches the CPUs and devices it names.

use std::path::{Path, PathBuf};

use topoalign_discovery::{Colour, Colouring, Topology, read_hwloc, read_sysfs, render_png, render_svg, render_text};

fn machines() -> Vec<(String, Topology)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies");
    let mut all = Vec::new();
    for (dir, xml) in [("hwloc-xml", true), ("sysfs", false)] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .expect("folder")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                let name = p.to_string_lossy();
                if xml {
                    name.ends_with(".xml")
                } else {
                    name.contains(".tar") || name.ends_with(".tgz")
                }
            })
            .collect();
        paths.sort();
        for path in paths {
            let t = if xml { read_hwloc(&path) } else { read_sysfs(&path) }.expect("reads");
            all.push((path.file_name().expect("name").to_string_lossy().into_owned(), t));
        }
    }
    assert_eq!(all.len(), 38);
    all
}

#[test]
fn every_cpu_is_drawn_once_and_the_svg_is_well_formed() {
    for (name, t) in machines() {
        let svg = render_svg(&t, None);
        let document = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut drawn: Vec<u32> = document
            .descendants()
            .filter_map(|n| n.attribute("id")?.strip_prefix("cpu-")?.parse().ok())
            .collect();
        drawn.sort_unstable();
        let expected: Vec<u32> = t.cpus.iter().map(|c| c.id).collect();
        assert_eq!(drawn, expected, "{name}");
    }
}

#[test]
fn every_node_and_gpu_is_in_the_text_report() {
    for (name, t) in machines() {
        let text = render_text(&t);
        for node in &t.numa_nodes {
            assert!(
                text.contains(&format!("NUMA node {} ·", node.id)),
                "{name}: node {}",
                node.id
            );
        }
        for gpu in t.gpus() {
            assert!(text.contains(gpu.short_address()), "{name}: {}", gpu.address);
        }
        for warning in &t.warnings {
            assert!(text.contains(&warning.to_string()), "{name}: {warning}");
        }
    }
}

#[test]
fn a_colouring_fills_cpus_and_devices_and_adds_a_legend() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies");
    let t = read_hwloc(&root.join("hwloc-xml/mpibind-g4dnmetal.xml")).expect("g4dn");
    let pod = Colour(220, 38, 38);
    let mut colouring = Colouring::default();
    for cpu in [2, 3, 50, 51] {
        colouring.cpus.insert(cpu, pod);
    }
    let gpu = t.gpus().next().expect("a GPU").address.clone();
    colouring.devices.insert(gpu.clone(), pod);
    colouring.legend.push((pod, "ml/train-0".into()));
    let plain = render_svg(&t, None);
    let coloured = render_svg(&t, Some(&colouring));
    assert!(!plain.contains("#dc2626"));
    let document = roxmltree::Document::parse(&coloured).expect("svg");
    let fill_of = |id: &str| {
        document
            .descendants()
            .find(|n| n.attribute("id") == Some(id))
            .and_then(|g| g.children().find(|c| c.has_tag_name("rect")))
            .and_then(|r| r.attribute("fill"))
            .map(str::to_string)
    };
    assert_eq!(fill_of("cpu-50").as_deref(), Some("#dc2626"));
    assert_eq!(
        fill_of("cpu-4").as_deref(),
        Some("#dbeafe"),
        "other CPUs keep the default"
    );
    assert_eq!(fill_of(&format!("pci-{gpu}")).as_deref(), Some("#dc2626"));
    assert!(coloured.contains("ml/train-0"));
    let png = render_png(&coloured, 1.0).expect("png");
    assert!(png.starts_with(b"\x89PNG"));
}

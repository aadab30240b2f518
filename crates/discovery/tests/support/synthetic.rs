//! Writes a synthetic Linux sysfs tree the way the kernel lays it out, for
//! tests (broken on purpose) and the benchmark (1,024 CPUs). CPUs are
//! numbered like x86 Linux: the first thread of every core, then the second
//! (siblings `N` and `N + cores`).

#![allow(dead_code)] // Each test binary uses a part.

use std::fs;
use std::path::Path;

/// The shape of a synthetic machine.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub sockets: u32,
    pub nodes_per_socket: u32,
    pub cores_per_node: u32,
    pub threads: u32,
    /// Cores sharing one L3.
    pub cores_per_l3: u32,
    /// One NIC per NUMA node, plus a GPU on node 0.
    pub pci: bool,
}

impl Shape {
    /// Two sockets, two nodes each, four 2-thread cores per node: 32 CPUs.
    pub fn small() -> Shape {
        Shape {
            sockets: 2,
            nodes_per_socket: 2,
            cores_per_node: 4,
            threads: 2,
            cores_per_l3: 4,
            pci: true,
        }
    }

    /// Four sockets, two nodes each, 64 2-thread cores per node: 1,024 CPUs.
    pub fn large() -> Shape {
        Shape {
            sockets: 4,
            nodes_per_socket: 2,
            cores_per_node: 64,
            threads: 2,
            cores_per_l3: 8,
            pci: true,
        }
    }

    pub fn nodes(&self) -> u32 {
        self.sockets * self.nodes_per_socket
    }

    pub fn cores(&self) -> u32 {
        self.nodes() * self.cores_per_node
    }

    pub fn cpus(&self) -> u32 {
        self.cores() * self.threads
    }

    /// The CPUs of a global core index.
    fn threads_of(&self, core: u32) -> Vec<u32> {
        (0..self.threads).map(|t| core + t * self.cores()).collect()
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Writes the machine under `root` (`root/sys/...`, `root/proc/...`).
pub fn write_sysfs(root: &Path, shape: &Shape) {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let all: Vec<u32> = (0..shape.cpus()).collect();
    write(&cpu_dir.join("online"), &format!("{}\n", list(&all)));
    write(&cpu_dir.join("present"), &format!("{}\n", list(&all)));
    write(&cpu_dir.join("possible"), &format!("{}\n", list(&all)));
    for core in 0..shape.cores() {
        let node = core / shape.cores_per_node;
        let socket = node / shape.nodes_per_socket;
        let siblings = shape.threads_of(core);
        let l3 = core / shape.cores_per_l3;
        let l3_cpus: Vec<u32> = (l3 * shape.cores_per_l3..(l3 + 1) * shape.cores_per_l3)
            .flat_map(|c| shape.threads_of(c))
            .collect();
        let package_cpus: Vec<u32> = (0..shape.cores())
            .filter(|c| c / shape.cores_per_node / shape.nodes_per_socket == socket)
            .flat_map(|c| shape.threads_of(c))
            .collect();
        for &cpu in &siblings {
            let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
            write(&topo.join("physical_package_id"), &format!("{socket}\n"));
            write(&topo.join("die_id"), "0\n");
            write(
                &topo.join("core_id"),
                &format!("{}\n", core % (shape.cores_per_node * shape.nodes_per_socket)),
            );
            write(&topo.join("thread_siblings_list"), &format!("{}\n", list(&siblings)));
            write(&topo.join("core_cpus_list"), &format!("{}\n", list(&siblings)));
            write(&topo.join("package_cpus_list"), &format!("{}\n", list(&package_cpus)));
            let cache = cpu_dir.join(format!("cpu{cpu}/cache"));
            for (index, level, kind, size, shared) in [
                (0, 1, "Data", "48K", list(&siblings)),
                (1, 1, "Instruction", "32K", list(&siblings)),
                (2, 2, "Unified", "2048K", list(&siblings)),
                (3, 3, "Unified", "32768K", list(&l3_cpus)),
            ] {
                let dir = cache.join(format!("index{index}"));
                write(&dir.join("level"), &format!("{level}\n"));
                write(&dir.join("type"), &format!("{kind}\n"));
                write(&dir.join("size"), &format!("{size}\n"));
                write(&dir.join("shared_cpu_list"), &format!("{shared}\n"));
                write(&dir.join("id"), &format!("{}\n", if level == 3 { l3 } else { core }));
            }
        }
    }
    let node_dir = root.join("sys/devices/system/node");
    let nodes: Vec<u32> = (0..shape.nodes()).collect();
    write(&node_dir.join("online"), &format!("{}\n", list(&nodes)));
    for node in 0..shape.nodes() {
        let dir = node_dir.join(format!("node{node}"));
        let cpus: Vec<u32> = (node * shape.cores_per_node..(node + 1) * shape.cores_per_node)
            .flat_map(|c| shape.threads_of(c))
            .collect();
        write(&dir.join("cpulist"), &format!("{}\n", list(&cpus)));
        let kb = 32 * 1024 * 1024;
        write(
            &dir.join("meminfo"),
            &format!(
                "Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        {} kB\n",
                kb / 2
            ),
        );
        let row: Vec<String> = (0..shape.nodes())
            .map(|to| {
                if to == node {
                    "10"
                } else if to / shape.nodes_per_socket == node / shape.nodes_per_socket {
                    "12"
                } else {
                    "32"
                }
            })
            .map(str::to_string)
            .collect();
        write(&dir.join("distance"), &format!("{}\n", row.join(" ")));
        for (size, count) in [(2048, 512), (1048576, 0)] {
            let pool = dir.join(format!("hugepages/hugepages-{size}kB"));
            write(&pool.join("nr_hugepages"), &format!("{count}\n"));
            write(&pool.join("free_hugepages"), &format!("{count}\n"));
        }
    }
    if shape.pci {
        let bus = root.join("sys/bus/pci/devices");
        fs::create_dir_all(&bus).expect("mkdir");
        let mut devices: Vec<(String, String, &str, &str, i64)> = Vec::new();
        for node in 0..shape.nodes() {
            // A root port per node with a NIC below it.
            let root_bus = node * 0x20;
            let port = format!("0000:{root_bus:02x}:01.0");
            let nic = format!("0000:{:02x}:00.0", root_bus + 1);
            devices.push((
                format!("pci0000:{root_bus:02x}/{port}"),
                port.clone(),
                "0x060400",
                "0x2030",
                i64::from(node),
            ));
            devices.push((
                format!("pci0000:{root_bus:02x}/{port}/{nic}"),
                nic,
                "0x020000",
                "0x1593",
                i64::from(node),
            ));
        }
        devices.push((
            "pci0000:00/0000:00:01.0/0000:02:00.0".into(),
            "0000:02:00.0".into(),
            "0x030200",
            "0x20b0",
            0,
        ));
        for (path, address, class, device, numa) in devices {
            let dir = root.join("sys/devices").join(&path);
            let vendor = if class == "0x030200" { "0x10de" } else { "0x8086" };
            write(&dir.join("class"), &format!("{class}\n"));
            write(&dir.join("vendor"), &format!("{vendor}\n"));
            write(&dir.join("device"), &format!("{device}\n"));
            write(&dir.join("numa_node"), &format!("{numa}\n"));
            // From sys/bus/pci/devices/ up to sys/.
            let target = format!("../../../devices/{path}");
            std::os::unix::fs::symlink(target, bus.join(&address)).expect("symlink");
        }
    }
    write(
        &root.join("proc/cpuinfo"),
        "processor\t: 0\nmodel name\t: Synthetic CPU @ 2.00GHz\n",
    );
    write(&root.join("proc/meminfo"), "MemTotal:       1 kB\n");
}

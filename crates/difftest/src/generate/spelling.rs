//! The respelling step: quantities of a finished scenario rewritten into
//! the other spellings Kubernetes accepts, so that the engine's reading of
//! quantities is judged against the kubelet's (issue #29).
//!
//! Entry point: [`respell`], called by [`super::generate`] with a random
//! stream of its own, after the machine, the `kubelet:` block and the
//! events are built. It draws one number and changes nothing in 70 % of
//! scenarios, so a seed whose step does nothing names the scenario it named
//! before the step existed. It touches quantity strings only (and adds a
//! zero request now and then, below); never the machine.
//!
//! Where: in pods (`add` events) the `requests` and `limits` of containers,
//! init containers and sidecars, the pod-level `spec.resources` and
//! `spec.overhead`; in `resize` events the new `cpu` and `memory`; in the
//! `kubelet:` block `systemReserved`, `kubeReserved`, `evictionHard` (not
//! percentages) and the `limits` of `reservedMemory`. Each quantity (each
//! resource of a container, with its request and limit) is picked with
//! probability 40 %.
//!
//! The spellings of one amount (the same amount to the last billionth,
//! Kubernetes' finest precision), each drawn at random:
//! - a decimal SI suffix `n u m "" k M G T P E`: `2` as `2000000000n`,
//!   `2000000u`, `2000m`, `0.002k`, `0.000000000000000002E`; `256Mi` as
//!   `268.435456M`;
//! - a binary suffix `Ki Mi Gi Ti Pi Ei` for whole amounts up to 2^63−1,
//!   fractional when the fraction ends within 30 digits: `1536Mi` as
//!   `1.5Gi`, `1572864Ki`, `0.00146484375Ti`; `1Gi` as
//!   `0.000000000931322574615478515625Ei`; `2` CPUs as `0.001953125Ki`;
//! - an exponent `e`/`E` with or without a sign and now and then a leading
//!   zero: `2e0`, `2000E-3`, `0.002e+3`, `20e-01`, `2e-0`;
//! - no suffix: `2`, `0.25`;
//! - and, on any of these, a leading `+`, leading zeros (`02`, `007.5m`), a
//!   point without a fraction (`2.`, `1.Gi`, `2.e3`), trailing zeros in
//!   the fraction (`1.50Gi`), no integer digit (`.5`, `+.25Gi`).
//!
//! Amounts changed on purpose, only where the pod stays one the API server
//! accepts and its QoS class stays (a request at most its limit, an equal
//! request and limit changed together, a container's request or limit
//! only lowered when the pod has pod-level resources, pod-level amounts
//! only raised; `cpu` and `memory` only: huge pages and extended resources
//! keep their exact amounts, which the API server checks):
//! - lowered by less than a thousandth (`2` as `1999999999n`,
//!   `1.999999999`; memory also by less than a byte, `268435455.5`), or to
//!   a tiny amount (`5n`, `999999n`, `1500u`, `0.5m`): amounts finer than a
//!   thousandth, which Kubernetes keeps and rounds up only when asked for
//!   thousandths (`MilliValue`) or units (`Value`) — tag `quantity-lowered`;
//! - in a pod no resize names, a `cpu` or `memory` request equal to its
//!   limit (written or defaulted from it) drawn apart by less than a
//!   thousandth, the request lowered alone — written out when the limit
//!   stood for it — (`1999999999n` against `2`): equal in thousandths,
//!   unequal to Kubernetes, which then counts the pod Burstable (a resize
//!   would make it Guaranteed again, which the API server refuses: hence no
//!   resize) — tags `quantity-lowered`, `quantity-split`;
//! - in a quarter of the scenarios the step changes, raised to a huge
//!   amount: `9Ei`, `8Ei`, `16Ei`, `8192Pi` (all capped at
//!   2^63−1), 2^63−1 in other spellings, `1e19`, 2^64, 26- to 29-digit
//!   numbers, and (in pods, a quarter of the huge ones) amounts past
//!   ±1.7·10^29 units written as they are ([`BEYOND`]: `1e30`, `2.5E+32`,
//!   33- and 34-digit numbers, `1000000000000000000000000000000000m`) —
//!   tag `quantity-huge`;
//! - in the `kubelet:` block (where no API server checks anything: the
//!   kubelet's start-up decides) lowered or raised the same ways;
//! - in 8 % of the scenarios the step changes, `systemReserved` +
//!   `kubeReserved` of `cpu` or `memory` raised past the node's capacity,
//!   spelled `2.5G`, `2500M`, `3e9`, `1500m`, `25e-1` (the kubelet's refusal
//!   prints Go's `int64Amount` of the sum) — tag `quantity-over-capacity`.
//!
//! Zero: a quantity that is zero (`evictionHard` `"0"`) is respelled as
//! another zero, digit-less ones included — `m`, `Gi`, `Ki`, `k`, `E`,
//! `.`, `-`, `+`, `e3`, `-0`, `+0`, `00`, `0.`, `.0`, `0e0`, `0Mi`, `0n`,
//! `-0.0` (Kubernetes reads a quantity without digits as zero); now and
//! then a zero request for `cpu` or `memory` is added to a container that
//! asks for neither request nor limit of it (never in a pod a resize
//! names), and a zero `cpu` or `memory` to `systemReserved` or
//! `kubeReserved` where they have none — tag `quantity-zero`.
//!
//! White space, in pods and resizes only (`Quantity.UnmarshalJSON` trims
//! it; the kubelet's configuration fields are parsed without trimming): a
//! space, U+00A0, U+3000 or U+0085 before and/or after (`" 1Gi"`,
//! `"1Gi\u{a0}"`) — tag `quantity-space`. Never a tab, a line feed or
//! another ASCII control character (JSON escapes them and the escape is no
//! white space to Kubernetes: the API server refuses such a pod), nor
//! U+2028/U+2029 (which Go's encoder escapes too).
//!
//! Tags: `quantity-spelling` on every scenario the step changed, with
//! `quantity-spelling:pod`, `quantity-spelling:resize`,
//! `quantity-spelling:kubelet` saying where, and the tags above; narrower
//! ones for classes of differences: `quantity-space:resize` (white space in
//! a resize), `quantity-spelling:reserved-memory` (a `reservedMemory`
//! limit respelled), `quantity-lowered:kubelet` (an amount of the
//! `kubelet:` block lowered), `quantity-fractional-bytes` (a pod's memory
//! lowered to no whole number of bytes).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use topoalign_scenario::{Scenario, TopologySpec};

use crate::rng::Rng;

/// Billionths per unit: Kubernetes keeps quantities to the billionth.
const NANO: u128 = 1_000_000_000;
/// Billionths per thousandth.
const MILLI: u128 = 1_000_000;
/// Kubernetes caps binary-SI amounts at 2^63−1 units.
const BINARY_CAP: u128 = i64::MAX as u128;

/// Decimal SI suffixes and their powers of ten.
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// Binary SI suffixes and their powers of two.
const BINARY_SUFFIXES: [(&str, u32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

/// Zeros, digit-less ones included.
const ZEROS: [&str; 18] = [
    "m", "Gi", "Ki", "k", "E", ".", "-", "+", "e3", "-0", "+0", "00", "0.", ".0", "0e0", "0Mi", "0n", "-0.0",
];

/// Amounts past ±1.7·10^29 units (beyond `u128` billionths, so written as
/// they are rather than respelled), up to 1.7·10^35 units, where sums of
/// whole thousandths (every pod amount, after the API server's defaulting)
/// stay exact in the engine: Go's `int64Amount` of a large scale, exponent
/// forms, long `inf.Dec`s, a fraction of thousandths.
const BEYOND: [&str; 8] = [
    "1e30",
    "2.5E+32",
    "1E33",
    "170141183460469231731687303715885",
    "1000000000000000000000000000000000m",
    "0.5e35",
    "99999999999999999999999999999999k",
    "123456789012345678901234567890123.456",
];

/// Spellings of 2^63−1 units that Kubernetes reaches by capping.
const CAPPED: [&str; 4] = ["9Ei", "8Ei", "16Ei", "8192Pi"];

/// White space `Quantity.UnmarshalJSON` trims and JSON does not escape.
const SPACES: [&str; 5] = [" ", "  ", "\u{a0}", "\u{3000}", "\u{85}"];

/// What the step may do to a scenario, and which of its changes the
/// scenario got (for its tags).
#[derive(Default)]
struct Seen {
    /// Whether huge amounts may be written (a quarter of the scenarios the
    /// step changes: the engine refuses a pod with one, and a scenario
    /// without any judges the other spellings).
    huge_allowed: bool,
    pod: bool,
    resize: bool,
    kubelet: bool,
    lowered: bool,
    huge: bool,
    split: bool,
    zero: bool,
    space: bool,
    // Narrower classes, for `known-differences`.
    space_in_resize: bool,
    reserved_memory: bool,
    lowered_in_kubelet: bool,
    fractional_bytes: bool,
    over_capacity: bool,
}

impl Seen {
    fn tags(&self, tags: &mut Vec<String>) {
        if !(self.pod || self.resize || self.kubelet) {
            return;
        }
        tags.push("quantity-spelling".into());
        for (on, tag) in [
            (self.pod, "quantity-spelling:pod"),
            (self.resize, "quantity-spelling:resize"),
            (self.kubelet, "quantity-spelling:kubelet"),
            (self.lowered, "quantity-lowered"),
            (self.huge, "quantity-huge"),
            (self.split, "quantity-split"),
            (self.zero, "quantity-zero"),
            (self.space, "quantity-space"),
            (self.space_in_resize, "quantity-space:resize"),
            (self.reserved_memory, "quantity-spelling:reserved-memory"),
            (self.lowered_in_kubelet, "quantity-lowered:kubelet"),
            (self.fractional_bytes, "quantity-fractional-bytes"),
            (self.over_capacity, "quantity-over-capacity"),
        ] {
            if on {
                tags.push(tag.into());
            }
        }
    }
}

/// Respells quantities of `scenario` (see the module docs); usually does
/// nothing.
pub fn respell(rng: &mut Rng, scenario: &mut Scenario, tags: &mut Vec<String>) {
    if !rng.chance(30) {
        return;
    }
    let mut seen = Seen {
        huge_allowed: rng.chance(25),
        ..Seen::default()
    };
    let resized: BTreeSet<String> = scenario
        .events
        .iter()
        .filter_map(|e| e.resize.as_ref())
        .map(|r| {
            if r.pod.contains('/') {
                r.pod.clone()
            } else {
                format!("default/{}", r.pod)
            }
        })
        .collect();
    for event in &mut scenario.events {
        if let Some(pod) = &mut event.add {
            let key = pod_key(pod);
            respell_pod(rng, pod, resized.contains(&key), &mut seen);
        }
        if let Some(resize) = &mut event.resize {
            for container in &mut resize.containers {
                for list in [&mut container.resources.requests, &mut container.resources.limits] {
                    for value in list.values_mut() {
                        if rng.chance(40) && respell_exact(rng, value, true, &mut seen) {
                            seen.resize = true;
                            let text = value.as_str().unwrap_or_default();
                            seen.space_in_resize |= text.trim() != text;
                        }
                    }
                }
            }
        }
    }
    respell_kubelet(rng, &mut scenario.kubelet, &mut seen);
    // Last, so that it moves no draw above.
    if rng.chance(8) {
        over_capacity(rng, &mut scenario.kubelet, &scenario.topology, &mut seen);
    }
    seen.tags(tags);
}

/// `namespace/name` of a pod manifest.
fn pod_key(pod: &Value) -> String {
    let meta = pod.get("metadata");
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    format!("{namespace}/{name}")
}

/// Where a `requests`/`limits` pair sits, for what its amounts may become.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// A container's; `pod_level`: the pod has `spec.resources`.
    Container { pod_level: bool },
    /// The pod's `spec.resources`.
    Pod,
}

/// What happens to one resource's request and limit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    Exact,
    Lowered,
    /// An equal request and limit drawn apart (the request lowered).
    Split,
    Huge,
}

fn respell_pod(rng: &mut Rng, pod: &mut Value, resized: bool, seen: &mut Seen) {
    let Some(spec) = pod.get_mut("spec") else { return };
    let pod_level = spec.get("resources").is_some();
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            if let Some(resources) = container.get_mut("resources") {
                respell_resources(rng, resources, Level::Container { pod_level }, resized, seen);
            }
            if !resized && rng.chance(5) {
                add_zero_request(rng, container, seen);
            }
        }
    }
    if let Some(resources) = spec.get_mut("resources") {
        respell_resources(rng, resources, Level::Pod, resized, seen);
    }
    if let Some(overhead) = spec.get_mut("overhead").and_then(Value::as_object_mut) {
        for value in overhead.values_mut() {
            if rng.chance(40) && respell_exact(rng, value, true, seen) {
                seen.pod = true;
            }
        }
    }
}

/// A zero request (`m`, `Gi`, `0`, ...) for `cpu` or `memory` where the
/// container asks for neither a request nor a limit of it: the QoS class
/// ignores zero requests, and the API server defaults nothing from it.
fn add_zero_request(rng: &mut Rng, container: &mut Value, seen: &mut Seen) {
    let has = |c: &Value, name: &str| {
        ["requests", "limits"].iter().any(|list| {
            c.get("resources")
                .and_then(|r| r.get(*list))
                .and_then(|l| l.get(name))
                .is_some()
        })
    };
    let free: Vec<&str> = ["cpu", "memory"].into_iter().filter(|n| !has(container, n)).collect();
    if free.is_empty() {
        return;
    }
    let name = *rng.pick(&free);
    let mut zero = (*rng.pick(&ZEROS)).to_owned();
    if rng.chance(15) {
        zero = with_space(rng, &zero);
        seen.space = true;
    }
    let Some(object) = container.as_object_mut() else {
        return;
    };
    let resources = object.entry("resources").or_insert_with(|| json!({}));
    let Some(resources) = resources.as_object_mut() else {
        return;
    };
    let requests = resources.entry("requests").or_insert_with(|| json!({}));
    if let Some(requests) = requests.as_object_mut() {
        requests.insert(name.into(), json!(zero));
        seen.zero = true;
        seen.pod = true;
    }
}

/// One `resources` object (`requests`, `limits`) of a container or pod
/// (`resized`: of a pod a resize event names).
fn respell_resources(rng: &mut Rng, resources: &mut Value, level: Level, resized: bool, seen: &mut Seen) {
    let amount = |resources: &Value, list: &str, name: &str| {
        resources
            .get(list)
            .and_then(|l| l.get(name))
            .and_then(Value::as_str)
            .and_then(nanos)
    };
    let names: BTreeSet<String> = ["requests", "limits"]
        .iter()
        .filter_map(|list| resources.get(*list).and_then(Value::as_object))
        .flat_map(|l| l.keys().cloned())
        .collect();
    for name in names {
        if !rng.chance(40) {
            continue;
        }
        let request = amount(resources, "requests", &name);
        let limit = amount(resources, "limits", &name);
        let compute = name == "cpu" || name == "memory";
        let mut change = if compute {
            *rng.weighted(&[
                (70, Change::Exact),
                (15, Change::Lowered),
                (7, Change::Split),
                (8, Change::Huge),
            ])
        } else {
            Change::Exact
        };
        let equal = request.is_some() && request == limit;
        // Lowering a pod-level amount may leave it below the containers';
        // raising a container's, above the pod's; a split changes the QoS
        // class, which a resize could not keep.
        let splittable = limit.is_some() && (request.is_none() || equal);
        if (change == Change::Lowered && level == Level::Pod)
            || (change == Change::Huge && (!seen.huge_allowed || level == (Level::Container { pod_level: true })))
            || (change == Change::Split && (level == Level::Pod || resized || !splittable))
        {
            change = Change::Exact;
        }
        // A huge amount past `u128` billionths, written as it is.
        let mut beyond = None;
        // The fields whose amount changes, and the new amount: an equal
        // request and limit together, else the request when lowered, the
        // limit when raised, or the only one there is.
        let (fields, new): (Vec<&str>, Option<u128>) = match change {
            Change::Exact => (Vec::new(), None),
            Change::Split => {
                let Some(base) = limit.filter(|l| *l >= 2) else {
                    continue;
                };
                let by = rng.range(1, (MILLI - 1).min(base - 1) as u64);
                // A request the limit stood for is written out.
                if request.is_none()
                    && let Some(object) = resources.as_object_mut()
                {
                    let requests = object.entry("requests").or_insert_with(|| json!({}));
                    if let Some(requests) = requests.as_object_mut() {
                        requests.insert(name.clone(), json!(""));
                    }
                }
                (vec!["requests"], Some(base - u128::from(by)))
            }
            Change::Lowered => {
                let (fields, base) = match (request, limit) {
                    (Some(r), Some(_)) if equal => (vec!["requests", "limits"], r),
                    (Some(r), _) => (vec!["requests"], r),
                    (None, Some(l)) => (vec!["limits"], l),
                    (None, None) => continue,
                };
                (fields, lowered(rng, base, name == "memory"))
            }
            Change::Huge => {
                let fields = match (request, limit) {
                    (Some(_), Some(_)) if equal => vec!["requests", "limits"],
                    (_, Some(_)) => vec!["limits"],
                    (Some(_), None) => vec!["requests"],
                    (None, None) => continue,
                };
                if rng.chance(25) {
                    beyond = Some(*rng.pick(&BEYOND));
                }
                (fields, Some(huge(rng)))
            }
        };
        for list in ["requests", "limits"] {
            let Some(value) = resources.get_mut(list).and_then(|l| l.get_mut(&name)) else {
                continue;
            };
            match new {
                Some(amount) if fields.contains(&list) => {
                    seen.fractional_bytes |= name == "memory" && !amount.is_multiple_of(NANO);
                    let mut text = match beyond {
                        Some(text) => text.to_owned(),
                        None => spell_amount(rng, amount),
                    };
                    if rng.chance(15) {
                        text = with_space(rng, &text);
                        seen.space = true;
                    }
                    match change {
                        Change::Huge => seen.huge = true,
                        Change::Split => {
                            seen.split = true;
                            seen.lowered = true;
                        }
                        _ => seen.lowered = true,
                    }
                    *value = json!(text);
                    seen.pod = true;
                }
                // The other field keeps its amount.
                _ => {
                    if rng.chance(75) && respell_exact(rng, value, true, seen) {
                        seen.pod = true;
                    }
                }
            }
        }
    }
}

/// `value` (a quantity string) in another spelling of the same amount,
/// now and then with white space around it (`spaces`); whether it changed.
fn respell_exact(rng: &mut Rng, value: &mut Value, spaces: bool, seen: &mut Seen) -> bool {
    let Some(text) = value.as_str() else { return false };
    let Some(amount) = nanos(text) else { return false };
    let mut new = if amount == 0 {
        seen.zero = true;
        (*rng.pick(&ZEROS)).to_owned()
    } else {
        spell(rng, amount)
    };
    if spaces && rng.chance(15) {
        new = with_space(rng, &new);
        seen.space = true;
    }
    if new == text {
        return false;
    }
    *value = json!(new);
    true
}

/// The `kubelet:` block's quantities (no white space: the kubelet parses
/// them untrimmed).
fn respell_kubelet(rng: &mut Rng, kubelet: &mut Value, seen: &mut Seen) {
    let Some(k) = kubelet.as_object_mut() else { return };
    let mut changed = false;
    for field in ["systemReserved", "kubeReserved", "evictionHard"] {
        if let Some(map) = k.get_mut(field).and_then(Value::as_object_mut) {
            for value in map.values_mut() {
                changed |= rng.chance(40) && respell_config_value(rng, value, seen);
            }
        }
    }
    if let Some(entries) = k.get_mut("reservedMemory").and_then(Value::as_array_mut) {
        for entry in entries {
            if let Some(limits) = entry.get_mut("limits").and_then(Value::as_object_mut) {
                for value in limits.values_mut() {
                    let respelled = rng.chance(40) && respell_config_value(rng, value, seen);
                    seen.reserved_memory |= respelled;
                    changed |= respelled;
                }
            }
        }
    }
    if rng.chance(5) {
        let field = *rng.pick(&["systemReserved", "kubeReserved"]);
        let name = *rng.pick(&["cpu", "memory"]);
        let map = k.entry(field).or_insert_with(|| Value::Object(Map::new()));
        if let Some(map) = map.as_object_mut()
            && !map.contains_key(name)
        {
            map.insert(name.into(), json!(*rng.pick(&ZEROS)));
            seen.zero = true;
            changed = true;
        }
    }
    seen.kubelet |= changed;
}

/// `systemReserved` + `kubeReserved` of `cpu` or `memory` past the node's
/// capacity, each amount written with a decimal suffix, a fraction or an
/// exponent (`1.5G`, `2500M`, `3e9`, `2.5`, `1500m`, `25e-1`): the kubelet
/// refuses to start, printing Go's `int64Amount{value, scale}` of the sum
/// (`validateNodeAllocatable`), which depends on the spelling — tag
/// `quantity-over-capacity`. Not `cpu` where `reservedSystemCPUs` replaces
/// it, nor `memory` under the Static memory policy (whose reservedMemory
/// check would refuse first).
fn over_capacity(rng: &mut Rng, kubelet: &mut Value, topology: &TopologySpec, seen: &mut Seen) {
    let Some(k) = kubelet.as_object_mut() else { return };
    let mut names = Vec::new();
    if !k.contains_key("reservedSystemCPUs") {
        names.push("cpu");
    }
    if k.get("memoryManagerPolicy").and_then(Value::as_str) != Some("Static") {
        names.push("memory");
    }
    if names.is_empty() {
        return;
    }
    let name = *rng.pick(&names);
    // The total in thousandths of a CPU or in megabytes (10^6 bytes).
    let (total, spell): (u128, fn(&mut Rng, u128) -> String) = if name == "cpu" {
        let capacity = topology.cpus.len() as u128 * 1000;
        (capacity + *rng.pick(&[100, 500, 1000, 1500, 2500]), spell_milli_over)
    } else {
        let bytes: u128 = topology
            .numa_nodes
            .iter()
            .filter_map(|n| nanos(&n.memory))
            .sum::<u128>()
            / NANO;
        (
            bytes.div_ceil(1_000_000) + *rng.pick(&[1, 500, 1000, 2500]),
            spell_mega_over,
        )
    };
    let system = total * u128::from(rng.range(1, 9)) / 10;
    let kube = total - system;
    for (field, amount) in [("systemReserved", system), ("kubeReserved", kube)] {
        let text = spell(rng, amount);
        let map = k.entry(field).or_insert_with(|| Value::Object(Map::new()));
        if let Some(map) = map.as_object_mut() {
            map.insert(name.into(), json!(text));
        }
    }
    seen.kubelet = true;
    seen.over_capacity = true;
}

/// `milli` thousandths of a CPU as a decimal amount: `2500m`, `2.5`,
/// `2.500`, `2500e-3`, `25e-1`, `3` or `3e0`.
fn spell_milli_over(rng: &mut Rng, milli: u128) -> String {
    let (units, fraction) = (milli / 1000, milli % 1000);
    let short = format!("{fraction:03}").trim_end_matches('0').to_owned();
    let tenths = milli.is_multiple_of(100);
    match rng.below(5) {
        0 => format!("{milli}m"),
        1 if fraction == 0 => format!("{units}"),
        1 => format!("{units}.{short}"),
        2 => format!("{units}.{fraction:03}"),
        3 if fraction == 0 => format!("{units}e0"),
        3 if tenths => format!("{}e-1", milli / 100),
        _ => format!("{milli}e-3"),
    }
}

/// `mega` megabytes as a decimal amount: `2500M`, `2.5G`, `2.500G`,
/// `2500e6`, `2500000k`, `3G`.
fn spell_mega_over(rng: &mut Rng, mega: u128) -> String {
    let (giga, fraction) = (mega / 1000, mega % 1000);
    let short = format!("{fraction:03}").trim_end_matches('0').to_owned();
    match rng.below(5) {
        0 => format!("{mega}M"),
        1 if fraction == 0 => format!("{giga}G"),
        1 => format!("{giga}.{short}G"),
        2 => format!("{giga}.{fraction:03}G"),
        3 => format!("{mega}e6"),
        _ => format!("{mega}000k"),
    }
}

/// One quantity of the `kubelet:` block: another spelling, now and then a
/// lowered or huge amount; whether it changed.
fn respell_config_value(rng: &mut Rng, value: &mut Value, seen: &mut Seen) -> bool {
    let Some(amount) = value.as_str().and_then(nanos) else {
        return false;
    };
    if amount == 0 {
        return respell_exact(rng, value, false, seen);
    }
    match *rng.weighted(&[(86, Change::Exact), (9, Change::Lowered), (5, Change::Huge)]) {
        Change::Huge if !seen.huge_allowed => respell_exact(rng, value, false, seen),
        Change::Exact | Change::Split => respell_exact(rng, value, false, seen),
        Change::Lowered => match lowered(rng, amount, false) {
            Some(new) => {
                *value = json!(spell_amount(rng, new));
                seen.lowered = true;
                seen.lowered_in_kubelet = true;
                true
            }
            None => respell_exact(rng, value, false, seen),
        },
        Change::Huge => {
            let amount = huge(rng);
            *value = json!(spell_amount(rng, amount));
            seen.huge = true;
            true
        }
    }
}

/// `amount` less a little (under a thousandth; for memory now and then
/// under a unit) or a tiny amount below it; `None` when it is too small to
/// lower and stay above zero.
fn lowered(rng: &mut Rng, amount: u128, memory: bool) -> Option<u128> {
    if amount < 2 {
        return None;
    }
    if rng.chance(30) {
        let tiny = *rng.pick(&[1u128, 5, 999_999, 1_500_000, 500_000, 999, 250_000_000]);
        if tiny < amount {
            return Some(tiny);
        }
    }
    let most = if memory && rng.chance(40) { NANO - 1 } else { MILLI - 1 };
    let by = rng.range(1, most.min(amount - 1) as u64);
    Some(amount - u128::from(by))
}

/// A huge amount in billionths; 2^63−1 units (what binary amounts are
/// capped at) is spelled by [`spell_amount`] now and then as a capped one.
fn huge(rng: &mut Rng) -> u128 {
    let units: u128 = *rng.pick(&[
        BINARY_CAP,
        BINARY_CAP,
        10_000_000_000_000_000_000,             // 1e19
        18_446_744_073_709_551_616,             // 2^64
        12_345_678_901_234_567_890_123_456,     // 26 digits
        100_000_000_000_000_000_000_000_000,    // 1e26
        98_765_432_109_876_543_210_987_654_321, // 29 digits
    ]);
    units * NANO
}

/// A spelling of `amount` (billionths): [`spell`], or for 2^63−1 units now
/// and then a binary amount Kubernetes caps there.
fn spell_amount(rng: &mut Rng, amount: u128) -> String {
    if amount == BINARY_CAP * NANO && rng.chance(50) {
        return (*rng.pick(&CAPPED)).to_owned();
    }
    spell(rng, amount)
}

/// `text` with white space before, after, or both.
fn with_space(rng: &mut Rng, text: &str) -> String {
    match rng.below(3) {
        0 => format!("{}{text}", rng.pick(&SPACES)),
        1 => format!("{text}{}", rng.pick(&SPACES)),
        _ => format!("{}{text}{}", rng.pick(&SPACES), rng.pick(&SPACES)),
    }
}

/// One spelling of `amount` (billionths, above zero), exactly that amount.
fn spell(rng: &mut Rng, amount: u128) -> String {
    #[derive(Clone, Copy)]
    enum Form {
        Plain,
        Decimal,
        Binary,
        Exponent,
    }
    let form = *rng.weighted(&[
        (15, Form::Plain),
        (30, Form::Decimal),
        (25, Form::Binary),
        (30, Form::Exponent),
    ]);
    match form {
        Form::Binary => {
            if let Some((integer, fraction, suffix)) = binary(rng, amount) {
                return format!("{}{suffix}", decorate(rng, integer, fraction));
            }
            let (integer, fraction) = decimal(amount, 9);
            decorate(rng, integer, fraction)
        }
        Form::Plain => {
            let (integer, fraction) = decimal(amount, 9);
            decorate(rng, integer, fraction)
        }
        Form::Decimal => {
            let (suffix, power) = *rng.pick(&DECIMAL_SUFFIXES);
            let (integer, fraction) = decimal(amount, (9 + power) as u32);
            format!("{}{suffix}", decorate(rng, integer, fraction))
        }
        Form::Exponent => {
            let power = rng.range(0, 30) as i32 - 9;
            let (integer, fraction) = decimal(amount, (9 + power) as u32);
            let letter = if rng.chance(50) { "e" } else { "E" };
            let sign = match power {
                ..0 => "-",
                0 if rng.chance(10) => "-",
                _ if rng.chance(30) => "+",
                _ => "",
            };
            let zero = if rng.chance(10) { "0" } else { "" };
            format!(
                "{}{letter}{sign}{zero}{}",
                decorate(rng, integer, fraction),
                power.unsigned_abs()
            )
        }
    }
}

/// `amount` billionths divided by 10^`shift`: integer digits and fraction
/// digits (no trailing zeros), exactly.
fn decimal(amount: u128, shift: u32) -> (String, String) {
    let unit = 10u128.pow(shift);
    let integer = (amount / unit).to_string();
    let rest = amount % unit;
    if rest == 0 {
        return (integer, String::new());
    }
    let fraction = format!("{rest:0width$}", width = shift as usize);
    (integer, fraction.trim_end_matches('0').to_owned())
}

/// `amount` (billionths) with a binary suffix whose fraction ends within
/// 30 digits (and 36 digits in all): integer digits, fraction digits and the suffix; `None` when
/// the amount is no whole number of units, exceeds the binary cap, or no
/// suffix fits.
fn binary(rng: &mut Rng, amount: u128) -> Option<(String, String, &'static str)> {
    if !amount.is_multiple_of(NANO) || amount / NANO > BINARY_CAP {
        return None;
    }
    let units = amount / NANO;
    let fitting: Vec<(String, String, &'static str)> = BINARY_SUFFIXES
        .iter()
        .filter_map(|&(suffix, shift)| {
            let mask = (1u128 << shift) - 1;
            let mut rest = units & mask;
            let mut fraction = String::new();
            while rest != 0 {
                if fraction.len() == 30 {
                    return None;
                }
                rest *= 10;
                fraction.push(char::from(b'0' + (rest >> shift) as u8));
                rest &= mask;
            }
            let integer = (units >> shift).to_string();
            // At most 36 digits in all (what `nanos` reads back).
            (integer.len() + fraction.len() <= 36).then_some((integer, fraction, suffix))
        })
        .collect();
    if fitting.is_empty() {
        return None;
    }
    let at = rng.urange(0, fitting.len() - 1);
    fitting.into_iter().nth(at)
}

/// Digits as Kubernetes accepts them besides the plain ones: a `+`,
/// leading zeros, a point without a fraction, trailing zeros, no integer
/// digit before a fraction.
fn decorate(rng: &mut Rng, mut integer: String, mut fraction: String) -> String {
    if rng.chance(15) {
        fraction.push_str(if rng.chance(50) { "0" } else { "000" });
    }
    if integer == "0" && !fraction.is_empty() && rng.chance(30) {
        integer.clear();
    } else if rng.chance(12) {
        integer.insert_str(0, if rng.chance(70) { "0" } else { "00" });
    }
    let point = if !fraction.is_empty() || rng.chance(12) {
        "."
    } else {
        ""
    };
    let sign = if rng.chance(15) { "+" } else { "" };
    format!("{sign}{integer}{point}{fraction}")
}

/// The amount of a quantity string in billionths, exactly, as Kubernetes
/// reads it (binary amounts capped at 2^63−1, no digits: zero); `None`
/// for what is no quantity, negative, finer than a billionth or beyond
/// `u128`. Reads the generator's own quantities before they are
/// respelled (and checks the respellings in the tests).
fn nanos(text: &str) -> Option<u128> {
    let text = text.strip_prefix('+').unwrap_or(text);
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits_end = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let integer_end = digits_end(text);
    let (integer, rest) = text.split_at(integer_end);
    let (fraction, suffix) = match rest.strip_prefix('.') {
        Some(after) => after.split_at(digits_end(after)),
        None => ("", rest),
    };
    let fraction = fraction.trim_end_matches('0');
    let mut mantissa: u128 = 0;
    for digit in integer.bytes().chain(fraction.bytes()) {
        mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(digit - b'0'))?;
    }
    let scale = fraction.len() as i32;
    let value = if let Some(&(_, shift)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        // mantissa × 2^shift × 10^(9 − scale), exactly: the fives of a
        // finer scale divided out first, then the twos.
        let whole = if scale <= 9 {
            mantissa
                .checked_mul(1u128.checked_shl(shift)?)?
                .checked_mul(10u128.pow(9 - scale as u32))?
        } else {
            let finer = scale as u32 - 9;
            let fives = 5u128.checked_pow(finer)?;
            if !mantissa.is_multiple_of(fives) {
                return None;
            }
            let halves = mantissa / fives;
            if finer > shift {
                let twos = 1u128 << (finer - shift);
                if !halves.is_multiple_of(twos) {
                    return None;
                }
                halves / twos
            } else {
                halves.checked_mul(1u128 << (shift - finer))?
            }
        };
        whole.min(BINARY_CAP * NANO)
    } else {
        let power = match DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
            Some(&(_, power)) => power,
            None => {
                let exponent = suffix.strip_prefix(['e', 'E'])?;
                if exponent.is_empty()
                    || !exponent
                        .trim_start_matches(['+', '-'])
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                exponent.parse::<i32>().ok()?
            }
        };
        let shift = 9 + power - scale;
        if shift >= 0 {
            mantissa.checked_mul(10u128.checked_pow(shift as u32)?)?
        } else {
            let divisor = 10u128.checked_pow((-shift) as u32)?;
            if !mantissa.is_multiple_of(divisor) {
                return None;
            }
            mantissa / divisor
        }
    };
    if negative && value != 0 {
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::generate::{LaterSteps, Profile, generate_with};
    use crate::release::RELEASES;

    /// `text` without the white space the step puts around pod quantities.
    fn untrimmed(text: &str) -> &str {
        text.trim_matches(|c: char| SPACES.iter().any(|s| s.contains(c)))
    }

    /// [`nanos`], and `u128::MAX` for an amount of [`BEYOND`] (past
    /// `u128` billionths): larger than any other.
    fn amount_of(text: &str) -> Option<u128> {
        nanos(text).or_else(|| BEYOND.contains(&text).then_some(u128::MAX))
    }

    /// Amounts from a billionth to 29 digits of units, each spelled many
    /// times: every spelling holds the same amount by our exact reading and
    /// the same thousandths (rounded up) by the engine's parser.
    #[test]
    fn exact_spellings_keep_the_amount() {
        let mut rng = Rng::new(29);
        let amounts: Vec<u128> = vec![
            1,
            5,
            999_999,
            MILLI,
            250 * MILLI,
            NANO,
            2 * NANO,
            1_500 * MILLI,
            (256 << 20) * NANO,
            (1 << 30) * NANO,
            (1536 << 20) * NANO,
            2 * (1 << 20) * NANO,
            100 * (1 << 20) * NANO,
            268_435_455_500_000_000,
            1_999_999_999,
            BINARY_CAP * NANO,
            10_000_000_000_000_000_000 * NANO,
            98_765_432_109_876_543_210_987_654_321 * NANO,
        ];
        let mut forms = BTreeSet::new();
        for &amount in &amounts {
            for _ in 0..400 {
                let text = spell(&mut rng, amount);
                assert_eq!(nanos(&text), Some(amount), "{text:?} is not {amount} billionths");
                let quantity =
                    topoalign_k8s::parse_quantity(&text).unwrap_or_else(|e| panic!("the engine refuses {text:?}: {e}"));
                assert_eq!(quantity.milli(), amount.div_ceil(MILLI) as i128, "{text:?}");
                // The shape of the spelling: its suffix, and its decorations.
                let suffix = text.trim_start_matches(|c: char| c.is_ascii_digit() || "+.".contains(c));
                forms.insert(suffix.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned());
                if text.starts_with('+') {
                    forms.insert("+".into());
                }
                if text.starts_with('.') || text.starts_with("+.") {
                    forms.insert(".5".into());
                }
                if text.starts_with("00") || text.starts_with("+0") && !text.starts_with("+0.") {
                    forms.insert("00".into());
                }
                if text.contains(".e") || text.contains(".E") || text.ends_with('.') || text.contains(".K") {
                    forms.insert("2.".into());
                }
            }
        }
        for wanted in [
            "n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e", "E-", "e+", "+",
            ".5", "00", "2.",
        ] {
            assert!(forms.contains(wanted), "no spelling has {wanted:?}: {forms:?}");
        }
    }

    #[test]
    fn our_reading_of_quantities() {
        for (text, amount) in [
            ("2", Some(2 * NANO)),
            ("1.5Gi", Some(1536 * (1 << 20) * NANO)),
            ("0.002k", Some(2 * NANO)),
            ("2E-3", Some(2 * MILLI)),
            ("2e+0", Some(2 * NANO)),
            (".5", Some(NANO / 2)),
            ("+02.", Some(2 * NANO)),
            ("9Ei", Some(BINARY_CAP * NANO)),
            ("5n", Some(5)),
            ("0.5n", None),
            ("Gi", Some(0)),
            ("-", Some(0)),
            ("e3", Some(0)),
            ("-1", None),
            ("5%", None),
            ("1Kb", None),
        ] {
            assert_eq!(nanos(text), amount, "{text:?}");
        }
        for zero in ZEROS {
            assert_eq!(nanos(zero), Some(0), "{zero:?}");
        }
        for capped in CAPPED {
            assert_eq!(nanos(capped), Some(BINARY_CAP * NANO), "{capped:?}");
        }
    }

    /// A quantity's place in a scenario, by its path.
    fn is_quantity_path(path: &[String]) -> bool {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let list = ["requests", "limits"];
        match p.as_slice() {
            ["kubelet", "systemReserved" | "kubeReserved" | "evictionHard", _]
            | ["kubelet", "reservedMemory", _, "limits", _]
            | ["events", _, "add", "spec", "overhead", _] => true,
            ["events", _, "add", "spec", "resources", l, _] => list.contains(l),
            [
                "events",
                _,
                "add",
                "spec",
                "containers" | "initContainers",
                _,
                "resources",
                l,
                _,
            ]
            | ["events", _, "resize", "containers", _, "resources", l, _] => list.contains(l),
            _ => false,
        }
    }

    /// Where `after` differs from `before`: changed strings and members
    /// added; anything else fails.
    fn differences(
        before: &Value,
        after: &Value,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Option<Value>, Value)>,
    ) {
        match (before, after) {
            (Value::Object(a), Value::Object(b)) => {
                assert!(a.keys().all(|k| b.contains_key(k)), "a member went at {path:?}");
                for (k, v) in b {
                    path.push(k.clone());
                    match a.get(k) {
                        Some(old) => differences(old, v, path, out),
                        None => out.push((path.clone(), None, v.clone())),
                    }
                    path.pop();
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                assert_eq!(a.len(), b.len(), "a list changed length at {path:?}");
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    path.push(i.to_string());
                    differences(x, y, path, out);
                    path.pop();
                }
            }
            (Value::String(a), Value::String(b)) if a != b => {
                out.push((path.clone(), Some(before.clone()), after.clone()));
            }
            _ => assert_eq!(before, after, "at {path:?}"),
        }
    }

    /// Every zero quantity (or object of them) added by the step.
    fn only_zeros(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.values().all(only_zeros),
            Value::String(s) => nanos(untrimmed(s)) == Some(0),
            _ => false,
        }
    }

    /// A pod's exact requests and limits per container (requests defaulted
    /// to limits, as the API server does), and the pod-level pair.
    type Amounts = BTreeMap<String, u128>;
    fn amounts(resources: Option<&Value>) -> (Amounts, Amounts) {
        let read = |list: &str| -> Amounts {
            resources
                .and_then(|r| r.get(list))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, v)| {
                    let text = v.as_str().expect("quantities are strings");
                    let amount = amount_of(untrimmed(text)).unwrap_or_else(|| panic!("{text:?} unread"));
                    (name.clone(), amount)
                })
                .collect()
        };
        let limits = read("limits");
        let mut requests = read("requests");
        for (name, limit) in &limits {
            requests.entry(name.clone()).or_insert(*limit);
        }
        (requests, limits)
    }

    /// Go's `GetPodQOS` over containers (requests and limits of `cpu` and
    /// `memory`, zero ignored), and the pod-level pair's class alone.
    fn qos(spec: &Value) -> (&'static str, Option<&'static str>) {
        let class = |pairs: &[(Amounts, Amounts)]| {
            let mut requests = Amounts::new();
            let mut limits = Amounts::new();
            let mut guaranteed = true;
            for (r, l) in pairs {
                for (name, q) in r.iter().filter(|(n, q)| (*n == "cpu" || *n == "memory") && **q > 0) {
                    let sum = requests.entry(name.clone()).or_default();
                    *sum = sum.saturating_add(*q);
                }
                let mut found = BTreeSet::new();
                for (name, q) in l.iter().filter(|(n, q)| (*n == "cpu" || *n == "memory") && **q > 0) {
                    let sum = limits.entry(name.clone()).or_default();
                    *sum = sum.saturating_add(*q);
                    found.insert(name.as_str());
                }
                guaranteed &= found.len() == 2;
            }
            if requests.is_empty() && limits.is_empty() {
                return "BestEffort";
            }
            if guaranteed && requests == limits {
                "Guaranteed"
            } else {
                "Burstable"
            }
        };
        let containers: Vec<(Amounts, Amounts)> = ["initContainers", "containers"]
            .iter()
            .flat_map(|l| spec.get(*l).and_then(Value::as_array).into_iter().flatten())
            .map(|c| amounts(c.get("resources")))
            .collect();
        let pod = spec.get("resources").map(|r| class(&[amounts(Some(r))]));
        (class(&containers), pod)
    }

    /// What the API server checks of a pod's amounts: requests at most
    /// limits, pod-level requests covering the containers', container
    /// limits within the pod's.
    fn check_api_rules(spec: &Value, what: &str) {
        let containers: Vec<(Amounts, Amounts)> = ["initContainers", "containers"]
            .iter()
            .flat_map(|l| spec.get(*l).and_then(Value::as_array).into_iter().flatten())
            .map(|c| amounts(c.get("resources")))
            .collect();
        for (requests, limits) in &containers {
            for (name, limit) in limits {
                assert!(requests[name] <= *limit, "{what}: {name} request above its limit");
            }
        }
        if let Some(pod) = spec.get("resources") {
            let (pod_requests, pod_limits) = amounts(Some(pod));
            for (name, pod_request) in &pod_requests {
                let sum = containers
                    .iter()
                    .filter_map(|(r, _)| r.get(name))
                    .fold(0_u128, |sum, q| sum.saturating_add(*q));
                assert!(
                    sum <= *pod_request,
                    "{what}: containers ask for more {name} than the pod"
                );
            }
            for (_, limits) in &containers {
                for (name, limit) in limits {
                    if let Some(pod_limit) = pod_limits.get(name) {
                        assert!(limit <= pod_limit, "{what}: a container's {name} limit above the pod's");
                    }
                }
            }
        }
    }

    /// Every scenario the step changed differs from the one without it
    /// only in quantities (and zero requests added), each one that the
    /// engine's parser reads (pods trimmed, the kubelet block untrimmed),
    /// the same amount unless it is a `cpu` or `memory` amount lowered (above
    /// zero) or raised to a huge one; pods keep what the API server checks
    /// and their QoS class (a split request only in a pod no resize names);
    /// the tags say what happened; over many seeds every kind happens.
    #[test]
    fn respelled_scenarios_differ_only_in_quantities() {
        let mut seen = BTreeMap::<String, u32>::new();
        let mut fired = 0;
        let seeds = 0..500u64;
        for release in RELEASES {
            for seed in seeds.clone() {
                let g = generate_with(seed, release, LaterSteps::Respelling, Profile::Standard);
                let plain = generate_with(seed, release, LaterSteps::Resizes, Profile::Standard);
                let after = serde_json::to_value(&g.scenario).expect("serialises");
                let before = serde_json::to_value(&plain.scenario).expect("serialises");
                let mut changes = Vec::new();
                differences(&before, &after, &mut Vec::new(), &mut changes);
                let tagged = g.tags.iter().any(|t| t == "quantity-spelling");
                assert_eq!(
                    tagged,
                    !changes.is_empty(),
                    "seed {seed} {release:?}: tags {:?}",
                    g.tags
                );
                let extra: Vec<&String> = g.tags.iter().filter(|t| !plain.tags.contains(t)).collect();
                assert!(
                    extra.iter().all(|t| t.starts_with("quantity-")),
                    "seed {seed}: {extra:?}"
                );
                for tag in extra {
                    *seen.entry(tag.clone()).or_default() += 1;
                }
                if tagged {
                    fired += 1;
                }
                let resized: BTreeSet<String> = g
                    .scenario
                    .events
                    .iter()
                    .filter_map(|e| e.resize.as_ref())
                    .map(|r| r.pod.clone())
                    .collect();
                for (path, old, new) in &changes {
                    let what = format!("seed {seed} {release:?} at {path:?}: {old:?} -> {new:?}");
                    let in_kubelet = path[0] == "kubelet";
                    let Some(old) = old else {
                        // A zero request, a zero reservation, or a split
                        // request written out (checked against its limit
                        // below).
                        let split =
                            g.tags.iter().any(|t| t == "quantity-split") && path.len() >= 8 && path[7] == "requests";
                        let over = g.tags.iter().any(|t| t == "quantity-over-capacity") && in_kubelet;
                        assert!(only_zeros(new) || split || over, "{what}");
                        let p: Vec<&str> = path.iter().map(String::as_str).collect();
                        assert!(
                            matches!(
                                p.as_slice(),
                                ["kubelet", "systemReserved" | "kubeReserved", ..]
                                    | [
                                        "events",
                                        _,
                                        "add",
                                        "spec",
                                        "containers" | "initContainers",
                                        _,
                                        "resources",
                                        ..
                                    ]
                            ),
                            "{what}"
                        );
                        continue;
                    };
                    assert!(is_quantity_path(path), "{what}");
                    let text = new.as_str().expect("a string");
                    if in_kubelet {
                        topoalign_k8s::parse_quantity(text).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(untrimmed(text), text, "{what}: white space in the kubelet block");
                    } else {
                        topoalign_k8s::parse_quantity_field(text).unwrap_or_else(|e| panic!("{what}: {e}"));
                    }
                    let was = nanos(old.as_str().expect("a string")).expect("the generator's quantities read");
                    let is = amount_of(untrimmed(text)).unwrap_or_else(|| panic!("{what}: unread"));
                    let name = path.last().map(String::as_str).unwrap_or_default();
                    let resize = path[2] == "resize";
                    if is != was {
                        assert!(
                            name == "cpu" || name == "memory" || (in_kubelet && name == "memory.available"),
                            "{what}: the amount of {name} changed"
                        );
                        assert!(!resize, "{what}: a resize's amount changed");
                        let over = in_kubelet && g.tags.iter().any(|t| t == "quantity-over-capacity");
                        assert!(
                            (0 < is && is < was) || is >= 1_000_000_000_000_000_000 * NANO || over,
                            "{what}"
                        );
                    }
                }
                for (i, event) in g.scenario.events.iter().enumerate() {
                    let Some(pod) = &event.add else { continue };
                    let spec = &pod["spec"];
                    let what = format!("seed {seed} {release:?} event {i}");
                    check_api_rules(spec, &what);
                    let was = qos(&plain.scenario.events[i].add.as_ref().expect("the same events")["spec"]);
                    let is = qos(spec);
                    if is != was {
                        let key = format!("default/{}", pod["metadata"]["name"].as_str().unwrap_or_default());
                        let split = was.0 == "Guaranteed" && is.0 == "Burstable" && was.1 == is.1;
                        assert!(split && !resized.contains(&key), "{what}: QoS {was:?} -> {is:?}");
                    }
                }
            }
        }
        let total = RELEASES.len() as u32 * 500;
        assert!(
            (total / 5..total * 2 / 5).contains(&fired),
            "the step fired in {fired} of {total}"
        );
        for tag in [
            "quantity-spelling",
            "quantity-spelling:pod",
            "quantity-spelling:resize",
            "quantity-spelling:kubelet",
            "quantity-lowered",
            "quantity-split",
            "quantity-huge",
            "quantity-zero",
            "quantity-space",
            "quantity-space:resize",
            "quantity-spelling:reserved-memory",
            "quantity-lowered:kubelet",
            "quantity-fractional-bytes",
            "quantity-over-capacity",
        ] {
            assert!(
                seen.get(tag).copied().unwrap_or(0) >= 5,
                "{tag} seldom or never: {seen:?}"
            );
        }
    }
}

//! CEL device selectors against the real Go: every vector of
//! `testdata/dra/cel/<release>.jsonl` (an expression, a device, the feature
//! gates, and what k8s.io/dynamic-resource-allocation/cel of that release
//! answered — see `testdata/dra/cel/README.md`) must get the same verdict
//! from `topoalign_dra::selector`: the same match, or a compile error where
//! Go has one, or a runtime error where Go has one. Messages may differ.
//! Vectors marked `"topoalign": "unsupported"` are what Go evaluates and
//! topoalign knowingly refuses; they must be refused as unsupported.
//!
//! Also: the declaration table matches each release's Go declarations, and
//! no expression makes the selector panic.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};
use proptest::prelude::*;
use serde::Deserialize;
use topoalign_dra::features::Features;
use topoalign_dra::selector::{DeviceView, Release, SelectorEnv, SelectorError, declarations};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    expression: String,
    device: Device,
    features: Features,
    want: Want,
    #[serde(default)]
    topoalign: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Device {
    driver: String,
    #[serde(default)]
    attributes: BTreeMap<String, DeviceAttribute>,
    #[serde(default)]
    capacity: BTreeMap<String, DeviceCapacity>,
    #[serde(default)]
    allow_multiple_allocations: Option<bool>,
}

impl Device {
    fn view(&self) -> DeviceView<'_> {
        DeviceView {
            driver: &self.driver,
            attributes: &self.attributes,
            capacity: &self.capacity,
            allow_multiple_allocations: self.allow_multiple_allocations.unwrap_or(false),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
enum Want {
    Matches(bool),
    CompileError(String),
    RuntimeError(String),
}

impl Want {
    fn message(&self) -> String {
        match self {
            Want::Matches(b) => format!("matches: {b}"),
            Want::CompileError(m) => format!("compile error: {m}"),
            Want::RuntimeError(m) => format!("runtime error: {m}"),
        }
    }
}

/// A verdict, without its message.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Verdict {
    Matches(bool),
    CompileError,
    RuntimeError,
    Unsupported,
}

impl From<&Want> for Verdict {
    fn from(want: &Want) -> Verdict {
        match want {
            Want::Matches(b) => Verdict::Matches(*b),
            Want::CompileError(_) => Verdict::CompileError,
            Want::RuntimeError(_) => Verdict::RuntimeError,
        }
    }
}

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dra/cel")
        .join(name)
}

fn read(name: &str) -> String {
    let path = testdata(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the vectors come from oracle/dracel/vectors.sh and are committed)",
            path.display()
        )
    })
}

/// What topoalign answers, and its message.
fn evaluate(env: &SelectorEnv, expression: &str, device: &DeviceView<'_>) -> (Verdict, String) {
    let outcome = env
        .get_or_compile(expression)
        .and_then(|selector| selector.matches(device));
    match outcome {
        Ok(b) => (Verdict::Matches(b), String::new()),
        Err(e @ SelectorError::Compile { .. }) => (Verdict::CompileError, e.message().to_owned()),
        Err(e @ SelectorError::Runtime { .. }) => (Verdict::RuntimeError, e.message().to_owned()),
        Err(e @ SelectorError::Unsupported { .. }) => (Verdict::Unsupported, e.message().to_owned()),
    }
}

fn check_release(release: Release) {
    let text = read(&format!("{release}.jsonl"));
    let mut envs: HashMap<String, SelectorEnv> = HashMap::new();
    let (mut total, mut unsupported) = (0, 0);
    let mut differences = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let vector: Vector =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{release}.jsonl line {}: {e}", n + 1));
        total += 1;
        let key = serde_json::to_string(&vector.features).unwrap_or_default();
        let env = envs
            .entry(key)
            .or_insert_with(|| SelectorEnv::new(release, &vector.features));
        let (got, message) = evaluate(env, &vector.expression, &vector.device.view());
        let go = Verdict::from(&vector.want);
        let want = match vector.topoalign.as_deref() {
            Some("unsupported") => {
                unsupported += 1;
                assert_ne!(
                    go,
                    Verdict::CompileError,
                    "{release}.jsonl line {}: marked unsupported, but Go refuses it",
                    n + 1
                );
                Verdict::Unsupported
            }
            Some(other) => panic!("{release}.jsonl line {}: unknown marker {other:?}", n + 1),
            None => go,
        };
        if got != want {
            differences.push(format!(
                "line {}: {:?} on {} (ListTypeAttributes {}): Go {}, topoalign {got:?} {message}",
                n + 1,
                vector.expression,
                vector.device.driver,
                vector.features.list_type_attributes,
                vector.want.message(),
            ));
        }
    }
    assert!(total >= 150, "{release}: only {total} vectors");
    assert!(
        differences.is_empty(),
        "{release}: {} of {total} vectors differ from the real Go ({unsupported} marked unsupported):\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[test]
fn release_1_34_vectors() {
    check_release(Release::V1_34);
}

#[test]
fn release_1_35_vectors() {
    check_release(Release::V1_35);
}

#[test]
fn release_1_36_vectors() {
    check_release(Release::V1_36);
}

#[test]
fn release_1_37_vectors() {
    check_release(Release::V1_37);
}

/// The declaration table is each release's Go declarations, overload for
/// overload and in Go's order (the Go side: `dracel decls`).
#[test]
fn declarations_are_the_go_environment() {
    for release in Release::ALL {
        let go: Vec<String> = read(&format!("{release}-decls.txt"))
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("field\t"))
            .map(str::to_owned)
            .collect();
        let ours: Vec<String> = declarations(release).into_iter().map(|d| d.signature).collect();
        let (go_set, our_set): (BTreeSet<_>, BTreeSet<_>) = (go.iter().collect(), ours.iter().collect());
        let missing: Vec<_> = go_set.difference(&our_set).collect();
        let extra: Vec<_> = our_set.difference(&go_set).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{release}: Go declares but the table lacks {missing:#?}; the table has but Go does not {extra:#?}"
        );
        assert_eq!(ours, go, "{release}: the overloads are in another order");
    }
}

fn fuzz_devices() -> Vec<Device> {
    let attr = |json: &str| serde_json::from_str::<DeviceAttribute>(json).expect("an attribute");
    let cap =
        |q: &str| serde_json::from_value::<DeviceCapacity>(serde_json::json!({ "value": q })).expect("a capacity");
    vec![
        Device {
            driver: "gpu.example.com".to_owned(),
            attributes: BTreeMap::from([
                ("model".to_owned(), attr(r#"{"string": "A100"}"#)),
                ("index".to_owned(), attr(r#"{"int": 0}"#)),
                ("v".to_owned(), attr(r#"{"version": "1.2.3-rc.1"}"#)),
                (
                    "resource.kubernetes.io/numaNode".to_owned(),
                    attr(r#"{"ints": [0, 1]}"#),
                ),
            ]),
            capacity: BTreeMap::from([("memory".to_owned(), cap("80Gi")), ("power".to_owned(), cap("1.5"))]),
            allow_multiple_allocations: Some(true),
        },
        Device {
            driver: "nic".to_owned(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            allow_multiple_allocations: None,
        },
    ]
}

/// Pieces of selectors, glued at random: names the environment knows and
/// does not, literals, operators, macros, brackets that may not close.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "device",
        ".",
        "driver",
        "attributes",
        "capacity",
        "allowMultipleAllocations",
        "['gpu.example.com']",
        "['resource.kubernetes.io']",
        "model",
        "index",
        "numaNode",
        "memory",
        "v",
        "x",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "?",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        " in ",
        "1",
        "0",
        "-1",
        "1u",
        "2.5",
        "1e308",
        "'a'",
        "\"A100\"",
        "b'x'",
        "true",
        "false",
        "null",
        "[]",
        "{}",
        "has(",
        "size(",
        "int(",
        "uint(",
        "double(",
        "string(",
        "bool(",
        "dyn(",
        "type(",
        "quantity('1Gi')",
        "quantity(",
        "semver('1.0.0')",
        "semver(",
        "isSemver(",
        "isQuantity(",
        "sign(",
        ".exists(e, ",
        ".all(e, ",
        ".exists_one(e, ",
        ".map(e, ",
        ".filter(e, ",
        "e",
        "cel.bind(b, ",
        "b",
        ".compareTo(",
        ".isGreaterThan(",
        ".add(",
        ".sub(",
        ".asInteger()",
        ".isInteger()",
        ".asApproximateFloat()",
        ".major()",
        ".matches(",
        ".find(",
        ".findAll(",
        "'['",
        "'.*'",
        ".startsWith(",
        ".split(",
        ".join(",
        ".size()",
        ".includes(",
        ".sum()",
        ".max()",
        ".isSorted()",
        ".sort()",
        ".sortBy(e, ",
        "lists.range(",
        "sets.contains(",
        ".?",
        "[?",
        ".orValue(",
        ".hasValue()",
        "optional.of(",
        ".all(i, j, ",
        "ip(",
        "duration(",
        "'%d'.format(",
        "9223372036854775807",
        "18446744073709551615u",
    ])
}

fn expression() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(token(), 0..24).prop_map(|t| t.concat()),
        "[ -~]{0,48}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Compiling and evaluating any text returns a verdict or an error;
    /// it never panics.
    #[test]
    fn selectors_never_panic(expr in expression()) {
        let features = Features { list_type_attributes: true, ..Features::default() };
        let devices = fuzz_devices();
        std::fs::write("/tmp/fuzz_last.txt", &expr).unwrap();
        for release in Release::ALL {
            let env = SelectorEnv::new(release, &features);
            if let Ok(selector) = env.compile(&expr) {
                for device in &devices {
                    let _ = selector.matches(&device.view());
                }
            }
        }
    }
}

/// A deeply nested expression is refused as Go refuses it, without
/// exhausting the stack.
#[test]
fn deep_nesting_is_a_compile_error() {
    let env = SelectorEnv::new(Release::V1_37, &Features::default());
    for n in [250, 2000] {
        let deep = format!("{}true{}", "(".repeat(n), ")".repeat(n));
        assert!(matches!(env.compile(&deep), Err(SelectorError::Compile { .. })), "{n}");
    }
    let chain = |n: usize| format!("{} > 0", vec!["1"; n].join(" + "));
    assert!(env.compile(&chain(250)).is_ok());
    assert!(matches!(env.compile(&chain(251)), Err(SelectorError::Compile { .. })));
    let devices = fuzz_devices();
    // as deep as Go allows
    let shallow = format!("{}true{}", "(".repeat(249), ")".repeat(249));
    let selector = env.compile(&shallow).unwrap();
    assert_eq!(selector.matches(&devices[0].view()), Ok(true));
}

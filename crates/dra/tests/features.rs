//! Each release's feature table against the real one: the
//! `structured.Features` that release's kube-scheduler plugin builds from its
//! default gates, printed by `oracle-dra features` into
//! `testdata/dra/<release>/features.json` (oracle/dra/vectors.sh).

use std::path::PathBuf;

use serde_json::{Map, Value};
use topoalign_dra::features::{Features, RELEASES, scheduler_defaults};

fn features_file(release: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dra")
        .join(release)
        .join("features.json")
}

fn read_object(release: &str) -> Map<String, Value> {
    let path = features_file(release);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => map,
        other => panic!("{}: not a JSON object: {other:?}", path.display()),
    }
}

#[test]
fn scheduler_defaults_are_the_releases_structured_features() {
    for release in RELEASES {
        let real = read_object(release);
        let ours = match serde_json::to_value(scheduler_defaults(release).unwrap()).unwrap() {
            Value::Object(map) => map,
            other => panic!("Features serialized as {other:?}"),
        };
        // Every field the release's struct has, with its value.
        for (name, value) in &real {
            assert_eq!(
                ours.get(name),
                Some(value),
                "release {release}: {name} (features.json says {value})"
            );
        }
        // The fields the release does not have are off.
        for (name, value) in &ours {
            if !real.contains_key(name) {
                assert_eq!(
                    value,
                    &Value::Bool(false),
                    "release {release}: {name} is not a field of its structured.Features"
                );
            }
        }
        // And the file reads as Features (no field this crate does not know).
        let parsed: Features = serde_json::from_value(Value::Object(real)).unwrap();
        assert_eq!(parsed, scheduler_defaults(release).unwrap(), "release {release}");
    }
}

#[test]
fn unknown_release() {
    assert!(scheduler_defaults("1.33").is_err());
    assert!(scheduler_defaults("1.38").is_err());
}

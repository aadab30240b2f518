//! One test per bug found with hostile NodeResourceTopology input, named
//! after what it reproduces (issue 13).

use topoalign_nrt::object::{parse_objects, parse_objects_skipping_bad};

fn object(name: &str) -> String {
    format!(
        "{{\"apiVersion\": \"topology.node.k8s.io/v1alpha2\", \"kind\": \"NodeResourceTopology\", \
         \"metadata\": {{\"name\": \"{name}\"}}, \"zones\": [], \"attributes\": []}}"
    )
}

/// One malformed object in `extender --nrt FILE` stopped the extender from
/// serving at all; the others are read and the bad one is named.
#[test]
fn one_malformed_nrt_object_does_not_hide_the_others() {
    let text = format!(
        "{{\"kind\": \"List\", \"items\": [{}, {{\"metadata\": {{\"name\": \"bad\"}}, \"zones\": 7}}, {}]}}",
        object("a"),
        object("b")
    );
    let (objects, skipped) = parse_objects_skipping_bad(&text).expect("the text is JSON");
    let names: Vec<&str> = objects.iter().map(|o| o.metadata.name.as_str()).collect();
    assert_eq!(names, vec!["a", "b"]);
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].starts_with("bad: "), "{skipped:?}");
    // The strict reader still refuses the whole text.
    assert!(parse_objects(&text).is_err());
}

/// Deep nesting in an NRT file is refused before the YAML parser's
/// quadratic work.
#[test]
fn deeply_nested_nrt_yaml_is_refused_before_parsing() {
    let text = format!("zones: {}", "[".repeat(100_000));
    let error = parse_objects_skipping_bad(&text).expect_err("refused").to_string();
    assert!(error.contains("nested more than 128 levels deep"), "{error}");
}

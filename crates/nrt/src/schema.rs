//! Checking an object against a CRD's OpenAPI v3 schema — the subset
//! CustomResourceDefinitions use and the NRT CRD needs: `type` (object,
//! array, string, integer, number, boolean), `properties`, `required`,
//! `items`, `anyOf`, `pattern`, `format: int64`, and
//! `x-kubernetes-int-or-string`. A field the schema does not declare is
//! reported too: the API server would silently prune it, which for a
//! publisher is as bad as a rejection.
//!
//! Owns: this validation, finding a version's schema in a CRD manifest,
//! and the shipped CRD ([`shipped_schema`]). Used by the tests and by the
//! publisher before it sends.

use serde::Deserialize;
use serde_json::Value;

/// The NodeResourceTopology CRD this repository ships and tells users to
/// install (`deploy/noderesourcetopology-crd.yaml`).
pub const SHIPPED_CRD: &str = include_str!("../../../deploy/noderesourcetopology-crd.yaml");

/// Why a manifest yields no CRD schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("YAML: {0}")]
    Yaml(String),
    #[error("the CRD has no version {version}")]
    NoVersion { version: String },
    #[error("version {version} has no openAPIV3Schema")]
    NoSchema { version: String },
    #[error("no CustomResourceDefinition in the manifest")]
    NoCrd,
}

/// The v1alpha2 `openAPIV3Schema` of [`SHIPPED_CRD`]: what the publisher
/// checks every object against before sending it.
///
/// # Errors
/// [`SchemaError`] if the shipped manifest has no such schema (a unit test
/// proves it has).
pub fn shipped_schema() -> Result<Value, SchemaError> {
    crd_schema(SHIPPED_CRD, crate::object::VERSION)
}

/// The `openAPIV3Schema` of `version` in a CRD manifest (YAML, possibly
/// with several documents; the CRD is the one with
/// `kind: CustomResourceDefinition`).
///
/// # Errors
/// [`SchemaError`] when the text has no such CRD or version.
pub fn crd_schema(manifest: &str, version: &str) -> Result<Value, SchemaError> {
    for document in serde_yaml_ng::Deserializer::from_str(manifest) {
        let value = Value::deserialize(document).map_err(|e| SchemaError::Yaml(e.to_string()))?;
        if value.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            continue;
        }
        let versions = value.pointer("/spec/versions").and_then(Value::as_array);
        for v in versions.into_iter().flatten() {
            if v.get("name").and_then(Value::as_str) == Some(version) {
                return v
                    .pointer("/schema/openAPIV3Schema")
                    .cloned()
                    .ok_or_else(|| SchemaError::NoSchema {
                        version: version.to_owned(),
                    });
            }
        }
        return Err(SchemaError::NoVersion {
            version: version.to_owned(),
        });
    }
    Err(SchemaError::NoCrd)
}

/// Every way `value` breaks `schema`, each as `path: problem`; empty when
/// it conforms.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, value, "", &mut problems);
    problems
}

fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    let at = |p: &str| {
        if p.is_empty() {
            "<root>".to_string()
        } else {
            p.to_string()
        }
    };
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            problems.push(format!("{}: expected an integer or a string, found {value}", at(path)));
            return;
        }
    } else if let Some(any_of) = schema.get("anyOf").and_then(Value::as_array) {
        let fits = any_of.iter().any(|alternative| {
            let mut inner = Vec::new();
            check(alternative, value, path, &mut inner);
            inner.is_empty()
        });
        if !fits {
            problems.push(format!("{}: matches none of anyOf", at(path)));
            return;
        }
    }
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let ok = match kind {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            problems.push(format!("{}: expected {kind}, found {value}", at(path)));
            return;
        }
        if kind == "integer"
            && schema.get("format").and_then(Value::as_str) == Some("int64")
            && value.as_i64().is_none()
        {
            problems.push(format!("{}: {value} does not fit int64", at(path)));
        }
    }
    if let (Some(pattern), Some(text)) = (schema.get("pattern").and_then(Value::as_str), value.as_str()) {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => problems.push(format!("{}: {text:?} does not match {pattern}", at(path))),
            Err(e) => problems.push(format!("{}: the schema's pattern is invalid: {e}", at(path))),
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = required.as_str()
                && !object.contains_key(name)
            {
                problems.push(format!("{}: required field {name} is missing", at(path)));
            }
        }
        if let Some(properties) = properties {
            for (name, field) in object {
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                match properties.get(name) {
                    Some(field_schema) => check(field_schema, field, &child, problems),
                    None => problems.push(format!("{child}: not in the schema (the API server would drop it)")),
                }
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check(items, item, &format!("{path}[{i}]"), problems);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_crd_has_a_v1alpha2_schema_for_the_publisher() {
        let schema = shipped_schema().expect("the shipped CRD's v1alpha2 schema");
        assert_eq!(schema.get("type").and_then(Value::as_str), Some("object"));
        // It does check: an object without its required fields is refused.
        assert!(!validate(&schema, &serde_json::json!({"zones": "none"})).is_empty());
    }
}

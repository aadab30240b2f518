//! Decoding a checkpoint the way Go's `encoding/json` decodes it into the
//! kubelet's structs: unknown fields ignored, field names matched exactly
//! or else case-insensitively, `null` leaving a string or number at its
//! zero value and making a map, slice or pointer nil, numbers that must fit
//! their Go type. Errors carry Go's wording where the kubelet's message
//! shows it.

use serde_json::{Map, Value};

use super::CheckpointError;

/// Parses the file's bytes as one JSON document.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, CheckpointError> {
    serde_json::from_slice(bytes).map_err(|error| {
        CheckpointError::Decode(if error.is_eof() {
            // What Go's json.Unmarshal says for a document cut short
            // (including an empty file).
            "unexpected end of JSON input".to_owned()
        } else {
            format!("invalid JSON: {error}")
        })
    })
}

/// Where a value sits, for errors: the Go struct and the JSON field path.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    pub go_struct: &'a str,
    pub path: &'a str,
}

impl At<'_> {
    /// Go's `UnmarshalTypeError` text.
    pub(crate) fn type_error(self, value: &Value, go_type: &str) -> CheckpointError {
        let what = match value {
            Value::Null => "null".to_owned(),
            Value::Bool(_) => "bool".to_owned(),
            Value::Number(n) => format!("number {n}"),
            Value::String(_) => "string".to_owned(),
            Value::Array(_) => "array".to_owned(),
            Value::Object(_) => "object".to_owned(),
        };
        CheckpointError::Decode(format!(
            "json: cannot unmarshal {what} into Go struct field {}.{} of type {go_type}",
            self.go_struct, self.path
        ))
    }
}

/// The document's top level must be an object (or `null`, which Go decodes
/// into nothing).
pub(crate) fn top_object<'a>(
    value: &'a Value,
    go_type: &str,
) -> Result<Option<&'a Map<String, Value>>, CheckpointError> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(CheckpointError::Decode(format!(
            "json: cannot unmarshal {} into Go value of type {go_type}",
            match other {
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                _ => "array",
            }
        ))),
    }
}

/// A struct field: the exact JSON name, else the first name equal to it
/// ignoring case (Go's rule, simplified to ASCII case folding).
pub(crate) fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// A Go `string`: absent or `null` is "".
pub(crate) fn string(value: Option<&Value>, at: At<'_>) -> Result<String, CheckpointError> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(at.type_error(other, "string")),
    }
}

/// A Go `uint64`: absent or `null` is 0.
pub(crate) fn uint64(value: Option<&Value>, at: At<'_>) -> Result<u64, CheckpointError> {
    match value {
        None | Some(Value::Null) => Ok(0),
        Some(v @ Value::Number(n)) => n.as_u64().ok_or_else(|| at.type_error(v, "uint64")),
        Some(other) => Err(at.type_error(other, "uint64")),
    }
}

/// A Go `int` (64-bit): absent or `null` is 0.
pub(crate) fn int(value: Option<&Value>, at: At<'_>, go_type: &str) -> Result<i64, CheckpointError> {
    match value {
        None | Some(Value::Null) => Ok(0),
        Some(v @ Value::Number(n)) => n.as_i64().ok_or_else(|| at.type_error(v, go_type)),
        Some(other) => Err(at.type_error(other, go_type)),
    }
}

/// A Go map (or struct) field: `None` when absent, `Some(None)` for `null`
/// (a nil map), `Some(Some(..))` for an object.
pub(crate) fn object<'a>(
    value: Option<&'a Value>,
    at: At<'_>,
    go_type: &str,
) -> Result<Option<Option<&'a Map<String, Value>>>, CheckpointError> {
    match value {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::Object(map)) => Ok(Some(Some(map))),
        Some(other) => Err(at.type_error(other, go_type)),
    }
}

/// A Go slice field: `None` for absent or `null` (a nil slice).
pub(crate) fn array<'a>(
    value: Option<&'a Value>,
    at: At<'_>,
    go_type: &str,
) -> Result<Option<&'a [Value]>, CheckpointError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(other) => Err(at.type_error(other, go_type)),
    }
}

//! Decoding a checkpoint the way Go's `encoding/json` decodes it into the
//! kubelet's structs: unknown fields ignored, field names matched exactly
//! or else case-insensitively, `null` leaving a string or number at its
//! zero value and making a map, slice or pointer nil, numbers that must fit
//! their Go type. Errors carry Go's wording where the kubelet's message
//! shows it.

use serde_json::{Map, Value};

use super::CheckpointError;
use super::print::Print;

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

/// Writing JSON the way Go's `json.Marshal` writes the kubelet's structs:
/// fields in declaration order, map keys sorted as strings (so NUMA node
/// `10` comes before `2`), no spaces, strings escaped as Go escapes them.
#[derive(Default)]
pub(crate) struct Writer(String);

impl Writer {
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    pub(crate) fn raw(&mut self, text: &str) -> &mut Self {
        self.0.push_str(text);
        self
    }

    /// A `,` unless the value starts an object or array.
    fn separate(&mut self) {
        if !self.0.ends_with(['{', '[']) && !self.0.is_empty() {
            self.0.push(',');
        }
    }

    /// `"name":` of an object member.
    pub(crate) fn key(&mut self, name: &str) -> &mut Self {
        self.separate();
        self.string(name);
        self.0.push(':');
        self
    }

    /// A Go string: `"`, `\` and control characters escaped (`\n`, `\r`,
    /// `\t`, `\b`, `\f`, else `\u00xx`), and — Go's HTML safety — `<`,
    /// `>`, `&`, U+2028 and U+2029 as `\u` escapes.
    pub(crate) fn string(&mut self, text: &str) -> &mut Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.0.push('"');
        for c in text.chars() {
            match c {
                '"' => self.0.push_str("\\\""),
                '\\' => self.0.push_str("\\\\"),
                '\n' => self.0.push_str("\\n"),
                '\r' => self.0.push_str("\\r"),
                '\t' => self.0.push_str("\\t"),
                '\u{8}' => self.0.push_str("\\b"),
                '\u{c}' => self.0.push_str("\\f"),
                '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                    let b = c as u8;
                    self.0.push_str("\\u00");
                    self.0.push(char::from(HEX[usize::from(b >> 4)]));
                    self.0.push(char::from(HEX[usize::from(b & 0xf)]));
                }
                '\u{2028}' => self.0.push_str("\\u2028"),
                '\u{2029}' => self.0.push_str("\\u2029"),
                c => self.0.push(c),
            }
        }
        self.0.push('"');
        self
    }

    pub(crate) fn number(&mut self, n: impl std::fmt::Display) -> &mut Self {
        use std::fmt::Write;
        let _ = write!(self.0, "{n}");
        self
    }

    /// A map (`None`: Go's nil map, `null`), its keys in Go's order:
    /// sorted as strings.
    pub(crate) fn map<K: ToString, V>(
        &mut self,
        entries: Option<impl IntoIterator<Item = (K, V)>>,
        mut value: impl FnMut(&mut Writer, V),
    ) -> &mut Self {
        let entries = entries.map(|entries| {
            let mut entries: Vec<(String, V)> = entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries
        });
        self.list(entries, "{", "}", |json, (key, v)| {
            json.string(&key).raw(":");
            value(json, v);
        })
    }

    /// A slice (`None`: Go's nil slice, `null`).
    pub(crate) fn slice<T>(
        &mut self,
        items: Option<impl IntoIterator<Item = T>>,
        value: impl FnMut(&mut Writer, T),
    ) -> &mut Self {
        self.list(items, "[", "]", value)
    }
}

impl Print for Writer {
    const NIL: &'static str = "null";
    const SEPARATOR: &'static str = ",";

    fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }
}

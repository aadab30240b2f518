//! YAML read the way Kubernetes reads it: `sigs.k8s.io/yaml`'s
//! `YAMLToJSON`, the step between a YAML file and the JSON decoders of the
//! kubelet's configuration loader, `kubectl` and the API server.
//!
//! That step parses YAML 1.1 (`go.yaml.in/yaml/v2`), not the YAML 1.2 our
//! parser speaks, and writes the result with `encoding/json`. The
//! differences that change what a document says:
//!
//! - plain `yes`/`no`/`on`/`off`/`y`/`n` (in three spellings each) are
//!   booleans, in values and in keys (`y: 1` is the key `"true"`);
//! - plain integers are read by Go's `ParseInt(s, 0, 64)` after dropping
//!   `_`: a leading `0` is octal (`0110` is 72), `0x`, `0o`, `0b` prefixes;
//!   then `ParseUint`, then a float;
//! - a float is written by `json.Marshal`: `110.0` is the integer `110`,
//!   which an integer field then takes; NaN and infinities make the
//!   document fail (`json: unsupported value`);
//! - merge keys (`<<: *base`, `<<: [*a, *b]`) merge in document order: a
//!   merge sets every key of the merged map, a later key overrides it (and
//!   of a list of maps the earlier map wins).
//!
//! Quoted scalars, block scalars and plain scalars over several lines stay
//! strings. Plain and quoted scalars are told apart by the character in
//! front of the scalar in the text (the parser lends us the text of a
//! scalar in place), which is a quote only for a quoted one. Tags
//! (`!!str yes`) are not honoured.
//!
//! Owns: [`to_json`] and [`documents`]. JSON text is not for this module:
//! Kubernetes' decoders read a document starting with `{` as JSON, where
//! `110.0` is no integer ([`is_json`]).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Whether Kubernetes reads `text` as JSON rather than YAML
/// (`utilyaml.IsJSONBuffer`: the first non-space character is `{`).
pub fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// The single YAML document of `text` as `YAMLToJSON` gives it (an empty
/// text is `null`).
///
/// # Errors
/// The YAML parser's error (with line and column), or what `YAMLToJSON`
/// fails with (a NaN, an unsupported key).
pub fn to_json(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    Seed { source: text }.deserialize(serde_yaml_ng::Deserializer::from_str(text))
}

/// Every document of a YAML stream (`---` separated), each as [`to_json`]
/// reads it, in order; an error stands in the place of its document.
pub fn documents(text: &str) -> impl Iterator<Item = Result<Value, serde_yaml_ng::Error>> + '_ {
    serde_yaml_ng::Deserializer::from_str(text).map(move |document| Seed { source: text }.deserialize(document))
}

/// Reads one value; `source` is the whole text, to tell quoted scalars.
#[derive(Clone, Copy)]
struct Seed<'s> {
    source: &'s str,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Seed<'_> {
    /// Whether `scalar`, lent from the text, was written without quotes.
    fn is_plain(self, scalar: &str) -> bool {
        let start = self.source.as_ptr() as usize;
        let at = scalar.as_ptr() as usize;
        if at < start || at > start + self.source.len() {
            return false;
        }
        let offset = at - start;
        offset == 0 || !matches!(self.source.as_bytes()[offset - 1], b'"' | b'\'')
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        float(value).map_err(E::custom)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Value, E> {
        if self.is_plain(value) {
            resolve(value).map_err(E::custom)
        } else {
            Ok(Value::String(value.to_owned()))
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(self))? {
            let value = map.next_value_seed(self)?;
            match key {
                Key::Merge => merge(&mut object, value).map_err(de::Error::custom)?,
                Key::Text(key) => {
                    object.insert(key, value);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// A mapping key: `<<` written plain, or the key's text as `YAMLToJSON`
/// spells a resolved key.
enum Key {
    Merge,
    Text(String),
}

#[derive(Clone, Copy)]
struct KeySeed<'s>(Seed<'s>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        struct Merge<'s>(Seed<'s>);
        impl<'de> Visitor<'de> for Merge<'_> {
            type Value = Option<Value>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping key")
            }
            fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
                if value == "<<" && self.0.is_plain(value) {
                    return Ok(None);
                }
                self.0.visit_borrowed_str(value).map(Some)
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                Ok(Some(Value::String(value.to_owned())))
            }
            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
                Ok(Some(Value::Bool(value)))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                Ok(Some(Value::from(value)))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                Ok(Some(Value::from(value)))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                Ok(Some(Value::from(value)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Some(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                self.0.visit_seq(seq).map(Some)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                self.0.visit_map(map).map(Some)
            }
        }
        let Some(key) = deserializer.deserialize_any(Merge(self.0))? else {
            return Ok(Key::Merge);
        };
        key_text(&key).map(Key::Text).map_err(de::Error::custom)
    }
}

/// How `YAMLToJSON` writes a resolved key: strings as they are, integers
/// in decimal, booleans as `true`/`false`, floats as Go's
/// `FormatFloat(f, 'g', -1, 32)`.
fn key_text(key: &Value) -> Result<String, String> {
    match key {
        Value::String(text) => Ok(text.clone()),
        Value::Bool(value) => Ok(value.to_string()),
        Value::Number(number) if number.is_f64() => Ok(go_float32_g(number.as_f64().unwrap_or_default())),
        Value::Number(number) => Ok(number.to_string()),
        Value::Null => Err("unsupported map key: null".to_owned()),
        Value::Array(_) | Value::Object(_) => Err(format!("invalid map key: {key}")),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` for a key: the shortest
/// `float32` text, exponent form from 1e21 or below 1e-4.
fn go_float32_g(value: f64) -> String {
    #[allow(clippy::cast_possible_truncation, reason = "Go formats the key as a float32")]
    let value = value as f32;
    if value.is_nan() {
        return ".nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    let exponent = if value == 0.0 {
        0
    } else {
        value.abs().log10().floor() as i32
    };
    if (-4..21).contains(&exponent) {
        format!("{value}")
    } else {
        let text = format!("{value:e}");
        // Go writes the exponent signed, with at least two digits.
        match text.split_once('e') {
            Some((mantissa, exp)) => {
                let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
                format!("{mantissa}e{sign}{digits:0>2}")
            }
            None => text,
        }
    }
}

/// A merge key's value merged into `object` as yaml.v2 merges: a mapping's
/// keys are all set (over earlier ones); of a list of mappings, the later
/// ones first, so the earliest wins.
fn merge(object: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    const WANT_MAP: &str = "map merge requires map or sequence of maps as the value";
    match value {
        Value::Object(merged) => {
            object.extend(merged);
            Ok(())
        }
        Value::Array(items) => {
            if !items.iter().all(Value::is_object) {
                return Err(WANT_MAP.to_owned());
            }
            for item in items.into_iter().rev() {
                if let Value::Object(merged) = item {
                    object.extend(merged);
                }
            }
            Ok(())
        }
        _ => Err(WANT_MAP.to_owned()),
    }
}

/// A float as `json.Marshal` writes it, read back as JSON: whole values in
/// the integer range are integers; NaN and infinities fail.
fn float(value: f64) -> Result<Value, String> {
    if !value.is_finite() {
        let shown = if value.is_nan() {
            "NaN"
        } else if value > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        };
        return Err(format!("json: unsupported value: {shown}"));
    }
    // Go writes |f| < 1e21 without an exponent: a whole value is then an
    // integer literal.
    if value.fract() == 0.0 && value.abs() < 1e21 {
        #[allow(clippy::cast_possible_truncation, reason = "whole and in range, checked")]
        if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&value) {
            return Ok(Value::from(value as i64));
        }
        if (0.0..18_446_744_073_709_551_616.0).contains(&value) {
            return Ok(Value::from(value as u64));
        }
    }
    Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
}

/// yaml.v2's `resolve` of a plain scalar our parser left a string.
fn resolve(text: &str) -> Result<Value, String> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false));
        }
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        ".nan" | ".NaN" | ".NAN" => return float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return float(f64::NEG_INFINITY),
        _ => {}
    }
    let string = || Ok(Value::String(text.to_owned()));
    match text.as_bytes()[0] {
        b'.' => match go_decimal_float(text) {
            Some(value) => float(value),
            None => string(),
        },
        b'0'..=b'9' | b'+' | b'-' => {
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            if let Some(value) = go_parse_int(&plain) {
                return Ok(value);
            }
            if is_yaml_float(&plain)
                && let Some(value) = go_decimal_float(&plain)
            {
                return float(value);
            }
            string()
        }
        _ => string(),
    }
}

/// Go's `ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`, then the `0b` /
/// `-0b` binary forms yaml.v2 tries itself: an integer, or `None`.
fn go_parse_int(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(rest) = unsigned.strip_prefix("0x").or_else(|| unsigned.strip_prefix("0X")) {
        (16, rest)
    } else if let Some(rest) = unsigned.strip_prefix("0o").or_else(|| unsigned.strip_prefix("0O")) {
        (8, rest)
    } else if let Some(rest) = unsigned.strip_prefix("0b").or_else(|| unsigned.strip_prefix("0B")) {
        (2, rest)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (8, &unsigned[1..])
    } else {
        (10, unsigned)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        // ParseInt only; ParseUint takes no sign.
        let value = i128::try_from(magnitude).ok().map(|m| -m)?;
        i64::try_from(value).ok().map(Value::from)
    } else if let Ok(value) = i64::try_from(magnitude) {
        Some(Value::from(value))
    } else {
        u64::try_from(magnitude).ok().map(Value::from)
    }
}

/// yaml.v2's `yamlStyleFloat`:
/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(text: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if let Some(after) = rest.strip_prefix('.') {
        let n = digits(after);
        if n == 0 {
            return false;
        }
        rest = &after[n..];
    } else {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
        if let Some(after) = rest.strip_prefix('.') {
            rest = &after[digits(after)..];
        }
    }
    match rest.strip_prefix(['e', 'E']) {
        None => rest.is_empty(),
        Some(exponent) => {
            let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            !exponent.is_empty() && digits(exponent) == exponent.len()
        }
    }
}

/// A decimal float as Go's `ParseFloat(s, 64)` reads it (what reaches here
/// has no underscores, hexadecimal or special names left), `None` for
/// anything else.
fn go_decimal_float(text: &str) -> Option<f64> {
    let valid = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !valid || !text.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse()
        .ok()
        .or_else(|| text.strip_suffix('.').and_then(|t| t.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Expected values: `sigs.k8s.io/yaml` v1.6.0 `YAMLToJSON` of the same
    /// text (a Go program run on these cases), not this module's output.
    #[test]
    fn yaml_1_1_as_kubernetes_reads_it() {
        let table = [
            (
                "a: [yes, Yes, YES, y, Y, no, N, on, On, OFF, off, true, FALSE, \"yes\", 'on', ~, null, Null, nan, inf]",
                json!({"a": [true, true, true, true, true, false, false, true, true, false, false, true, false,
                    "yes", "on", null, null, null, "nan", "inf"]}),
            ),
            (
                "b: [110.0, 1e3, 1.5, 0110, 09, 0x10, 0o17, 0b101, -0b11, 1_000, +12, -0, .5, 5., 1e20, \
                 18446744073709551615, 9223372036854775808, 2001-12-14, 0.0000001]",
                json!({"b": [110, 1000, 1.5, 72, 9, 16, 15, 5, -3, 1000, 12, 0, 0.5, 5,
                    100_000_000_000_000_000_000.0, 18_446_744_073_709_551_615_u64, 9_223_372_036_854_775_808_u64,
                    "2001-12-14", 1e-7]}),
            ),
            (
                "c: {yes: 1, 010: 2, 1.5: 3, true: 4}",
                json!({"c": {"1.5": 3, "8": 2, "true": 4}}),
            ),
            (
                "base: &b {x: 1, y: 2}\nm:\n  x: 3\n  <<: *b\nn:\n  <<: *b\n  x: 3\no:\n  <<: [{x: 1}, {x: 2, z: 5}]\n",
                json!({"base": {"true": 2, "x": 1}, "false": {"true": 2, "x": 3}, "m": {"true": 2, "x": 1},
                    "o": {"x": 1, "z": 5}}),
            ),
            (
                "q: |\n  yes\nr: \"a\n  b\"\ns: yes no\n",
                json!({"q": "yes\n", "r": "a b", "s": "yes no"}),
            ),
        ];
        for (text, expected) in table {
            assert_eq!(to_json(text).unwrap(), expected, "{text}");
        }
        for (text, error) in [
            ("t: .inf", "json: unsupported value: +Inf"),
            ("a: [.nan]", "json: unsupported value: NaN"),
        ] {
            let found = to_json(text).unwrap_err().to_string();
            assert!(found.contains(error), "{text}: {found}");
        }
    }

    #[test]
    fn documents_and_json_detection() {
        let read: Vec<Value> = documents("a: yes\n---\nb: 0110\n").map(Result::unwrap).collect();
        assert_eq!(read, [json!({"a": true}), json!({"b": 72})]);
        assert!(is_json("  {\"a\": 1}") && !is_json("a: {}"));
        assert_eq!(to_json("").unwrap(), Value::Null);
    }
}

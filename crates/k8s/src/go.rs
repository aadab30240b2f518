//! Small re-creations of the Go library behaviour that the kubelet's error
//! texts depend on: `strconv` number parsing and its errors, `%q` quoting,
//! `%v` of a `map[string]string`, and `utilerrors.NewAggregate`.
//!
//! Owns only text and number conventions; no kubelet logic.

use std::collections::BTreeMap;

/// Why Go's `strconv` refused a number (`strconv.ErrSyntax`, `ErrRange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    Syntax,
    Range,
}

impl NumError {
    /// The text of a `*strconv.NumError` from function `func` for `input`,
    /// e.g. `strconv.Atoi: parsing "x": invalid syntax`.
    pub fn text(self, func: &str, input: &str) -> String {
        let reason = match self {
            NumError::Syntax => "invalid syntax",
            NumError::Range => "value out of range",
        };
        format!("strconv.{func}: parsing {}: {reason}", quote(input))
    }
}

/// `strconv.ParseInt(s, 10, 64)` (also `strconv.Atoi` on 64-bit machines):
/// an optional sign and decimal digits, nothing else.
pub fn parse_int64(s: &str) -> Result<i64, NumError> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(NumError::Syntax);
    }
    let mut magnitude: u64 = 0;
    for byte in digits.bytes() {
        if !byte.is_ascii_digit() {
            return Err(NumError::Syntax);
        }
        // Go reports the overflow as soon as it happens, before looking at
        // later characters.
        magnitude = magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(byte - b'0')))
            .ok_or(NumError::Range)?;
    }
    if negative {
        0_i64.checked_sub_unsigned(magnitude).ok_or(NumError::Range)
    } else {
        i64::try_from(magnitude).map_err(|_| NumError::Range)
    }
}

/// `strconv.ParseFloat(s, 32)`: decimal floating-point syntax (digits with
/// an optional point and exponent, underscores between digits), or
/// `inf`/`infinity`/`nan` in any case, rounded to the nearest `float32`.
/// Hexadecimal floats are not accepted (a syntax error here).
pub fn parse_float32(s: &str) -> Result<f32, NumError> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let special = ["inf", "infinity", "nan"]
        .iter()
        .any(|name| unsigned.eq_ignore_ascii_case(name));
    if !special && !is_decimal_float(unsigned) {
        return Err(NumError::Syntax);
    }
    let cleaned: String = s.chars().filter(|&c| c != '_').collect();
    let value: f32 = cleaned.parse().map_err(|_| NumError::Syntax)?;
    if value.is_infinite() && !special {
        return Err(NumError::Range);
    }
    Ok(value)
}

/// `digits [. digits] [e [sign] digits]` with at least one mantissa digit;
/// underscores only between digits.
fn is_decimal_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |part: &str| {
        !part.starts_with('_')
            && !part.ends_with('_')
            && !part.contains("__")
            && part.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    if integer.is_empty() && fraction.is_empty() || !digits_ok(integer) || !digits_ok(fraction) {
        return false;
    }
    match exponent {
        None => true,
        Some(exponent) => {
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            !digits.is_empty() && digits_ok(digits)
        }
    }
}

/// Go's `int64(f)` on amd64: values that do not fit (and NaN) become the
/// most negative int64.
pub fn float_to_int64(value: f64) -> i64 {
    // 2^63 is exactly representable; anything at or beyond it overflows.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if value.is_nan() || !(-LIMIT..LIMIT).contains(&value) {
        i64::MIN
    } else {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "in range by the check above; Go truncates toward zero"
        )]
        let truncated = value as i64;
        truncated
    }
}

/// Go's `%q` / `strconv.Quote` of a string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            ' ' => out.push(' '),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c.is_whitespace() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a `map[string]string`: `map[a:1 b:2]`, keys sorted.
pub fn map_text(map: &BTreeMap<String, String>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", entries.join(" "))
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as is; several,
/// without repeats, as `[a, b]`. `None` when there are none.
pub fn aggregate(messages: &[String]) -> Option<String> {
    match messages {
        [] => None,
        [only] => Some(only.clone()),
        _ => {
            let mut unique: Vec<&String> = Vec::new();
            for message in messages {
                if !unique.contains(&message) {
                    unique.push(message);
                }
            }
            let joined = unique.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ");
            Some(if unique.len() == 1 {
                joined
            } else {
                format!("[{joined}]")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_accepts_what_go_accepts() {
        assert_eq!(parse_int64("42"), Ok(42));
        assert_eq!(parse_int64("+7"), Ok(7));
        assert_eq!(parse_int64("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int64("9223372036854775808"), Err(NumError::Range));
        assert_eq!(parse_int64("99999999999999999999x"), Err(NumError::Range));
        for bad in ["", "+", "-", " 1", "1 ", "1_000", "0x10", "1.0"] {
            assert_eq!(parse_int64(bad), Err(NumError::Syntax), "{bad:?}");
        }
        assert_eq!(
            NumError::Syntax.text("Atoi", "a"),
            r#"strconv.Atoi: parsing "a": invalid syntax"#
        );
        assert_eq!(
            NumError::Range.text("Atoi", "99999999999999999999"),
            r#"strconv.Atoi: parsing "99999999999999999999": value out of range"#
        );
    }

    #[test]
    fn parse_float_accepts_go_decimal_syntax() {
        assert_eq!(parse_float32("10"), Ok(10.0));
        assert_eq!(parse_float32("7.5"), Ok(7.5));
        assert_eq!(parse_float32(".5"), Ok(0.5));
        assert_eq!(parse_float32("5."), Ok(5.0));
        assert_eq!(parse_float32("1e1"), Ok(10.0));
        assert_eq!(parse_float32("-3"), Ok(-3.0));
        assert_eq!(parse_float32("1_0"), Ok(10.0));
        assert!(parse_float32("NaN").is_ok_and(f32::is_nan));
        assert_eq!(parse_float32("-Inf"), Ok(f32::NEG_INFINITY));
        assert_eq!(parse_float32("1e39"), Err(NumError::Range));
        for bad in ["", ".", "e5", "1e", "abc", "1_", "_1", "1__0", "1.2.3", " 1"] {
            assert_eq!(parse_float32(bad), Err(NumError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn quoting_matches_go() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("tab\there"), r#""tab\there""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("é"), "\"é\"");
    }

    #[test]
    fn aggregates_like_utilerrors() {
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(&["a".into()]), Some("a".into()));
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), Some("[a, b]".into()));
        assert_eq!(aggregate(&["a".into(), "a".into()]), Some("a".into()));
    }

    #[test]
    fn go_maps_print_sorted() {
        let map: BTreeMap<String, String> = [("b".into(), "2".into()), ("a".into(), "1".into())].into();
        assert_eq!(map_text(&map), "map[a:1 b:2]");
        assert_eq!(map_text(&BTreeMap::new()), "map[]");
    }

    #[test]
    fn float_conversion_follows_amd64() {
        assert_eq!(float_to_int64(1.9), 1);
        assert_eq!(float_to_int64(-1.9), -1);
        assert_eq!(float_to_int64(f64::NAN), i64::MIN);
        assert_eq!(float_to_int64(1e19), i64::MIN);
    }
}

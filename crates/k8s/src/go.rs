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
    /// Go's words for the error, the end of a `*strconv.NumError`'s text
    /// (`strconv.Atoi: parsing "x": invalid syntax`): `invalid syntax`,
    /// `value out of range`.
    pub fn reason(self) -> &'static str {
        match self {
            NumError::Syntax => "invalid syntax",
            NumError::Range => "value out of range",
        }
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
/// an optional point and exponent, underscores between digits), a
/// hexadecimal float (`0x1.8p3`: hex digits, an optional point, a binary
/// exponent that must be there), or `inf`/`infinity`/`nan` in any case,
/// rounded to the nearest `float32`.
pub fn parse_float32(s: &str) -> Result<f32, NumError> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if let Some(hex) = unsigned.strip_prefix("0x").or_else(|| unsigned.strip_prefix("0X")) {
        return parse_hex_float32(hex, s.starts_with('-'));
    }
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

/// The hexadecimal float after its `0x`, as Go reads one for a `float32`:
/// up to 16 hex digits kept (later nonzero ones only mark the value as
/// inexact), `p` and a decimal power of two required, underscores only
/// between digits (or right after the prefix), then rounded to nearest
/// even; beyond the largest `float32` it is infinite and a range error.
fn parse_hex_float32(text: &str, negative: bool) -> Result<f32, NumError> {
    const KEPT_DIGITS: u32 = 16;
    let (mantissa_text, exponent_text) = text.split_once(['p', 'P']).ok_or(NumError::Syntax)?;
    // Underscores: after the prefix or a digit, and before a digit.
    let mut previous = b'0';
    for &byte in text.as_bytes() {
        if byte == b'_' && previous != b'0' || previous == b'_' && !byte.is_ascii_hexdigit() && byte != b'_' {
            return Err(NumError::Syntax);
        }
        previous = if byte.is_ascii_hexdigit() { b'0' } else { byte };
        if byte == b'p' || byte == b'P' {
            // The exponent's digits are decimal; `e` is no hex digit there.
            break;
        }
    }
    let mut mantissa: u64 = 0;
    let mut kept = 0_u32;
    let mut inexact = false;
    let mut fraction_digits: i64 = 0;
    let mut seen_point = false;
    let mut seen_digit = false;
    for byte in mantissa_text.bytes() {
        match byte {
            b'_' => {}
            b'.' if !seen_point => seen_point = true,
            _ => {
                let digit = char::from(byte).to_digit(16).ok_or(NumError::Syntax)?;
                seen_digit = true;
                if digit == 0 && kept == 0 {
                    // A leading zero: only its place counts.
                    if seen_point {
                        fraction_digits += 1;
                    }
                    continue;
                }
                if kept < KEPT_DIGITS {
                    mantissa = mantissa * 16 + u64::from(digit);
                    kept += 1;
                    if seen_point {
                        fraction_digits += 1;
                    }
                } else {
                    inexact |= digit != 0;
                    if !seen_point {
                        fraction_digits -= 1;
                    }
                }
            }
        }
    }
    if !seen_digit {
        return Err(NumError::Syntax);
    }
    let (exponent_negative, exponent_digits) = match exponent_text.as_bytes().first() {
        Some(b'-') => (true, &exponent_text[1..]),
        Some(b'+') => (false, &exponent_text[1..]),
        _ => (false, exponent_text),
    };
    if !exponent_digits.as_bytes().first().is_some_and(u8::is_ascii_digit)
        || !exponent_digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        || exponent_digits.ends_with('_')
        || exponent_digits.contains("__")
    {
        return Err(NumError::Syntax);
    }
    let mut power: i64 = 0;
    for byte in exponent_digits.bytes().filter(u8::is_ascii_digit) {
        if power < 10_000 {
            power = power * 10 + i64::from(byte - b'0');
        }
    }
    let power = if exponent_negative { -power } else { power };
    let exponent = power - 4 * fraction_digits;
    round_to_float32(mantissa, exponent, inexact, negative)
}

/// `mantissa * 2^exponent` (with `inexact`: a little more than that) as
/// the nearest `float32`, ties to even, subnormals kept; a range error
/// past the largest finite value.
fn round_to_float32(mut mantissa: u64, exponent: i64, inexact: bool, negative: bool) -> Result<f32, NumError> {
    const MANTISSA_BITS: u32 = 23;
    const BIAS: i64 = -127;
    const MAX_EXPONENT: i64 = (1 << 8) + BIAS - 2;
    const MIN_EXPONENT: i64 = BIAS + 1;
    let sign = if negative { 1_u32 << 31 } else { 0 };
    if mantissa == 0 {
        return Ok(f32::from_bits(sign));
    }
    // The value is mantissa / 2^MANTISSA_BITS * 2^exponent from here; keep
    // 1 + 23 bits and two rounding bits, the lowest one sticky.
    let mut exponent = exponent + i64::from(MANTISSA_BITS);
    while mantissa >> (MANTISSA_BITS + 2) == 0 {
        mantissa <<= 1;
        exponent -= 1;
    }
    if inexact {
        mantissa |= 1;
    }
    while mantissa >> (MANTISSA_BITS + 3) != 0 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exponent += 1;
    }
    while mantissa > 1 && exponent < MIN_EXPONENT - 2 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exponent += 1;
    }
    let mut round = mantissa & 3;
    mantissa >>= 2;
    round |= mantissa & 1;
    exponent += 2;
    if round == 3 {
        mantissa += 1;
        if mantissa == 1 << (MANTISSA_BITS + 1) {
            mantissa >>= 1;
            exponent += 1;
        }
    }
    if mantissa >> MANTISSA_BITS == 0 {
        exponent = BIAS;
    }
    if exponent > MAX_EXPONENT {
        return Err(NumError::Range);
    }
    #[allow(
        clippy::cast_possible_truncation,
        reason = "23 mantissa bits and an 8-bit biased exponent"
    )]
    let bits = (mantissa & ((1 << MANTISSA_BITS) - 1)) as u32 | (((exponent - BIAS) as u32 & 0xff) << MANTISSA_BITS);
    Ok(f32::from_bits(sign | bits))
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
        assert_eq!(NumError::Syntax.reason(), "invalid syntax");
        assert_eq!(NumError::Range.reason(), "value out of range");
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

    /// Issue 29: Go's `ParseFloat` reads hexadecimal floats, so the kubelet
    /// takes `evictionHard: {nodefs.available: "0x1p3%"}` (8%). Expected
    /// bits and errors: Go 1.26 `strconv.ParseFloat(s, 32)` of each text.
    #[test]
    fn parse_float_reads_go_hexadecimal_floats() {
        let table: &[(&str, Result<u32, NumError>)] = &[
            ("0x1p3", Ok(1_090_519_040)),
            ("0X1P-2", Ok(1_048_576_000)),
            ("-0x1.8p1", Ok(3_225_419_776)),
            ("+0x.8p1", Ok(1_065_353_216)),
            ("0x0.8p1", Ok(1_065_353_216)),
            ("0x_1p3", Ok(1_090_519_040)),
            ("0x1_0p0", Ok(1_098_907_648)),
            ("0x1p+2", Ok(1_082_130_432)),
            ("0x1.fffffep127", Ok(2_139_095_039)),
            ("0x1.ffffffp127", Err(NumError::Range)),
            ("0x1p128", Err(NumError::Range)),
            ("0x1p-149", Ok(1)),
            ("0x1p-150", Ok(0)),
            ("0x1.8p-150", Ok(1)),
            ("0x1p-126", Ok(8_388_608)),
            ("0x1.000001p0", Ok(1_065_353_216)),
            ("0x1.000003p0", Ok(1_065_353_218)),
            ("0x1.0000010000000000001p0", Ok(1_065_353_217)),
            ("0x123456789abcdef0123p0", Ok(1_670_488_756)),
            ("0xABCp-4", Ok(1_126_940_672)),
            ("0x1p", Err(NumError::Syntax)),
            ("0x1", Err(NumError::Syntax)),
            ("0x.p1", Err(NumError::Syntax)),
            ("0xp1", Err(NumError::Syntax)),
            ("0x1p1_0", Ok(1_149_239_296)),
            ("0x1p1__0", Err(NumError::Syntax)),
            ("0x.0008p0", Ok(956_301_312)),
            ("0x1_.8p0", Err(NumError::Syntax)),
            ("0x1p1_", Err(NumError::Syntax)),
            ("0x1__0p0", Err(NumError::Syntax)),
            ("0x_p1", Err(NumError::Syntax)),
            ("0x1p-1000", Ok(0)),
            ("0x1p1000", Err(NumError::Range)),
            ("0x1.p1", Ok(1_073_741_824)),
            ("0x00001p0", Ok(1_065_353_216)),
            ("0x0p0", Ok(0)),
            ("-0x0p0", Ok(2_147_483_648)),
        ];
        for &(text, expected) in table {
            assert_eq!(parse_float32(text).map(f32::to_bits), expected, "{text}");
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

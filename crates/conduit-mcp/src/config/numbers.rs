//! Numbers a structured edit would change: serde_json holds an integer past 64 bits, or a
//! decimal a double does not hold exactly (more digits than a double keeps, or one its
//! parser without `float_roundtrip` rounds twice, as `1e-30`), as another double, so
//! writing the parsed file back would write another number.

use std::collections::HashMap;

/// Every number in the JSON `text` that serde_json would write back as a different
/// number: as written there, and as serde_json reads it. `text` is JSON that parsed.
pub fn inexact(text: &str) -> Vec<(String, serde_json::Number)> {
    let mut found = Vec::new();
    scan(text, |token, _| {
        if !kept_exactly(token)
            && let Ok(read) = serde_json::from_str::<serde_json::Number>(token)
        {
            found.push((token.to_owned(), read));
        }
    });
    found
}

/// The first inexact number (see [`inexact`]) of each server entry in another app's
/// file, by server name, the entries being the members of the object at `servers` (a
/// path of keys from the top: `["mcpServers"]`, `["mcp", "servers"]`).
pub fn inexact_in_entries(text: &str, servers: &[&str]) -> HashMap<String, String> {
    let mut found = HashMap::new();
    scan(text, |token, open| {
        if kept_exactly(token) {
            return;
        }
        let path: Vec<&str> = open
            .iter()
            .filter_map(|o| match o {
                Open::Object { key, .. } => Some(key.as_deref().unwrap_or_default()),
                Open::Array => None,
            })
            .collect();
        if path.len() > servers.len() && path[..servers.len()] == *servers {
            found
                .entry(path[servers.len()].to_owned())
                .or_insert_with(|| token.to_owned());
        }
    });
    found
}

/// In how many places `value` holds the number `number`.
pub fn times_held(value: &serde_json::Value, number: &serde_json::Number) -> usize {
    match value {
        serde_json::Value::Number(held) => usize::from(held == number),
        serde_json::Value::Array(items) => items.iter().map(|item| times_held(item, number)).sum(),
        serde_json::Value::Object(map) => map.values().map(|item| times_held(item, number)).sum(),
        _ => 0,
    }
}

/// An object or array the scan is inside: an object with the key of the member being
/// read and whether a key comes next.
enum Open {
    Object { key: Option<String>, key_next: bool },
    Array,
}

/// Calls `number` with every number literal of the JSON `text` (which parsed), outside
/// strings, in order, and the objects and arrays around it (outermost first).
fn scan<'t>(text: &'t str, mut number: impl FnMut(&'t str, &[Open])) {
    let bytes = text.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => {
                open.push(Open::Object {
                    key: None,
                    key_next: true,
                });
                at += 1;
            }
            b'[' => {
                open.push(Open::Array);
                at += 1;
            }
            b'}' | b']' => {
                open.pop();
                at += 1;
            }
            b',' => {
                if let Some(Open::Object { key_next, .. }) = open.last_mut() {
                    *key_next = true;
                }
                at += 1;
            }
            b'"' => {
                let start = at;
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at += 1;
                if let Some(Open::Object { key, key_next }) = open.last_mut()
                    && *key_next
                {
                    let written = text.get(start..at.min(bytes.len())).unwrap_or_default();
                    *key = serde_json::from_str::<String>(written).ok();
                    *key_next = false;
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while at < bytes.len()
                    && matches!(bytes[at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    at += 1;
                }
                if let Some(token) = text.get(start..at) {
                    number(token, &open);
                }
            }
            _ => at += 1,
        }
    }
}

/// Whether serde_json writes the number `token` back as the same number (perhaps written
/// otherwise: `1e2` as `100.0`).
fn kept_exactly(token: &str) -> bool {
    // Most numbers in a config are small integers (timeouts, ports): exact without a
    // parse, so reading the file costs next to nothing for them.
    let digits = token.strip_prefix('-').unwrap_or(token);
    if !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let Ok(value) = serde_json::from_str::<serde_json::Number>(token) else {
        return false;
    };
    let written = value.to_string();
    match (Decimal::of(token), Decimal::of(&written)) {
        (Some(read), Some(written)) => read == written,
        _ => false,
    }
}

/// A decimal number as sign, significant digits and power of ten: equal values are equal
/// however they were written (`100`, `1e2`, `100.0`, `0.1e3`).
#[derive(Debug, PartialEq, Eq)]
enum Decimal {
    Zero,
    NonZero {
        negative: bool,
        digits: String,
        /// The value is `digits × 10^exponent`.
        exponent: i64,
    },
}

/// Exponents are compared up to here: past it both sides are out of a double's range.
const EXPONENT_CAP: i64 = 1_000_000;

impl Decimal {
    fn of(token: &str) -> Option<Decimal> {
        let (negative, unsigned) = match token.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, token),
        };
        let (mantissa, written_exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], exponent_of(&unsigned[at + 1..])?),
            None => (unsigned, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let all: String = format!("{whole}{fraction}");
        let significant = all.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        if digits.is_empty() {
            return Some(Decimal::Zero);
        }
        let trailing_zeros = i64::try_from(significant.len() - digits.len()).ok()?;
        let fraction_digits = i64::try_from(fraction.len()).ok()?;
        Some(Decimal::NonZero {
            negative,
            digits: digits.to_owned(),
            exponent: written_exponent - fraction_digits + trailing_zeros,
        })
    }
}

/// An exponent's value, held within [`EXPONENT_CAP`] either way.
fn exponent_of(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut value: i64 = 0;
    for digit in digits.bytes() {
        value = (value * 10 + i64::from(digit - b'0')).min(EXPONENT_CAP);
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_survive_a_write_are_not_reported() {
        for text in [
            r#"{"a": 0, "b": -0, "c": 1, "d": -17, "e": 18446744073709551615}"#,
            r#"{"a": -9223372036854775808, "b": 0.1, "c": 1e2, "d": 1E+2, "e": 2.5e-3}"#,
            r#"{"a": 100.000, "b": 0.1e3, "c": 1.7976931348623157e308, "d": 5e-324}"#,
            r#"{"a": "12345678901234567890123 in a string", "b": "\"99999999999999999999\""}"#,
            r#"{"a": [1, 2.5, {"b": 3}], "c": true, "d": null}"#,
        ] {
            assert_eq!(inexact(text), [], "{text}");
        }
    }

    #[test]
    fn numbers_a_write_would_change_are_reported_as_written() {
        for (text, number) in [
            (
                r#"{"a": 1, "big": 18446744073709551616}"#,
                "18446744073709551616",
            ),
            (r#"{"a": -9223372036854775809}"#, "-9223372036854775809"),
            (
                r#"{"a": [0.12345678901234567890123]}"#,
                "0.12345678901234567890123",
            ),
            (r#"{"s": "1e999", "a": 1e-400}"#, "1e-400"),
            // serde_json's parser (without `float_roundtrip`, 25 KB of the binary) rounds
            // these twice and reads a neighbouring double: a write would change them.
            (r#"{"a": 1e-30}"#, "1e-30"),
            (r#"{"a": 1.602176634e-19}"#, "1.602176634e-19"),
            (
                r#"{"a": 123456789012345678901234567890e-10}"#,
                "123456789012345678901234567890e-10",
            ),
        ] {
            assert_eq!(
                inexact(text).first().map(|(written, _)| written.as_str()),
                Some(number),
                "{text}"
            );
        }
    }

    #[test]
    fn an_imported_files_entries_are_named_by_the_number_they_hold() {
        let claude = r#"{"mcpServers": {"ok": {"command": "a", "x": 1.5, "y": [2]},
            "big": {"command": "b", "x": [{"k": 18446744073709551616}]},
            "esc\"aped": {"n": 99999999999999999999}}, "other": 1e-400}"#;
        let found = inexact_in_entries(claude, &["mcpServers"]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found["big"], "18446744073709551616");
        assert_eq!(found["esc\"aped"], "99999999999999999999");
        let vscode = r#"{"servers": {"s": 1e999}, "mcp": {"servers": {"s": {"url": "http://h", "n": 0.30000000000000000001}}}}"#;
        assert_eq!(
            inexact_in_entries(vscode, &["mcp", "servers"])["s"],
            "0.30000000000000000001"
        );
        assert!(inexact_in_entries(r#"{"servers": [1e-400]}"#, &["servers"]).is_empty());
    }

    #[test]
    fn equal_values_written_otherwise_are_equal() {
        assert_eq!(Decimal::of("100"), Decimal::of("1e2"));
        assert_eq!(Decimal::of("100"), Decimal::of("0.1e3"));
        assert_eq!(Decimal::of("100"), Decimal::of("100.0"));
        assert_eq!(Decimal::of("0"), Decimal::of("-0.0e5"));
        assert_ne!(Decimal::of("100"), Decimal::of("-100"));
        assert_ne!(Decimal::of("0.1"), Decimal::of("0.10000000000000001"));
        assert_eq!(
            Decimal::of("1e99999999999999999999"),
            Decimal::of("1e1000000")
        );
    }
}

//! Human units for config files: durations (`"250ms"`, `"7h47m"`) and rates
//! (`"9k/s"`, `"600/min"`).
//!
//! Durations follow Go's `time.ParseDuration` / Envoy's `Duration` spelling:
//! one or more `<number><unit>` pairs, units `ns`, `us` (or `µs`), `ms`, `s`,
//! `m`, `h`, `d`, fractions allowed (`"1.5s"`). A bare `"0"` is zero. Rates
//! are `<number>[k|M]/<unit>` with unit `s`, `min` or `h`.
//!
//! The `serde` helpers let config structs take these strings directly:
//!
//! ```
//! use serde::Deserialize;
//! use stormbreak_policy::{Nanos, units};
//!
//! #[derive(Deserialize)]
//! struct Timeouts {
//!     #[serde(with = "units::duration")]
//!     per_try: Nanos,
//! }
//! let t: Timeouts = serde_json::from_str(r#"{"per_try": "250ms"}"#).unwrap();
//! assert_eq!(t.per_try, 250_000_000);
//! ```

use crate::Nanos;
use crate::time::{MICROSECOND, MILLISECOND, MINUTE, SECOND};
use std::fmt;

/// Why a duration or rate string was rejected; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    input: String,
    expected: &'static str,
}

impl UnitError {
    fn new(input: &str, expected: &'static str) -> Self {
        UnitError {
            input: input.to_owned(),
            expected,
        }
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value {:?}: expected {}",
            self.input, self.expected
        )
    }
}

impl std::error::Error for UnitError {}

const DURATION_EXPECTED: &str =
    "a duration such as \"250ms\", \"1.5s\", \"7h47m\" (units ns, us, ms, s, m, h, d)";
const RATE_EXPECTED: &str = "a rate such as \"9k/s\", \"250/s\", \"600/min\" or \"1.2M/h\"";

/// Parses a duration such as `"250ms"`, `"1.5s"` or `"7h47m"` into nanoseconds.
///
/// ```
/// use stormbreak_policy::units::parse_duration;
/// assert_eq!(parse_duration("7h47m").unwrap(), (7 * 3600 + 47 * 60) * 1_000_000_000);
/// assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
/// assert!(parse_duration("5 parsecs").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Nanos, UnitError> {
    let s = input.trim();
    let err = || UnitError::new(input, DURATION_EXPECTED);
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(err());
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => MICROSECOND as f64,
            "ms" => MILLISECOND as f64,
            "s" => SECOND as f64,
            "m" => MINUTE as f64,
            "h" => 60.0 * MINUTE as f64,
            "d" => 24.0 * 60.0 * MINUTE as f64,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(err());
    }
    Ok(total.round() as Nanos)
}

/// Formats nanoseconds in the largest units that keep it exact, e.g. `"7h47m"`.
///
/// The output parses back with [`parse_duration`] to the same value.
///
/// ```
/// use stormbreak_policy::units::{format_duration, parse_duration};
/// assert_eq!(format_duration(250_000_000), "250ms");
/// assert_eq!(format_duration(parse_duration("7h47m").unwrap()), "7h47m");
/// ```
pub fn format_duration(n: Nanos) -> String {
    if n == 0 {
        return "0".into();
    }
    const UNITS: [(Nanos, &str); 6] = [
        (3600 * SECOND, "h"),
        (MINUTE, "m"),
        (SECOND, "s"),
        (MILLISECOND, "ms"),
        (MICROSECOND, "us"),
        (1, "ns"),
    ];
    let mut out = String::new();
    let mut rest = n;
    for (scale, name) in UNITS {
        if rest >= scale {
            out.push_str(&format!("{}{}", rest / scale, name));
            rest %= scale;
        }
    }
    out
}

/// Parses a rate such as `"9k/s"`, `"250/s"` or `"600/min"` into events per second.
///
/// ```
/// use stormbreak_policy::units::parse_rate;
/// assert_eq!(parse_rate("9k/s").unwrap(), 9000.0);
/// assert_eq!(parse_rate("600/min").unwrap(), 10.0);
/// assert!(parse_rate("fast").is_err());
/// ```
pub fn parse_rate(input: &str) -> Result<f64, UnitError> {
    let err = || UnitError::new(input, RATE_EXPECTED);
    let (amount, per) = input.trim().split_once('/').ok_or_else(err)?;
    let amount = amount.trim();
    let (digits, multiplier) = match amount.strip_suffix('k') {
        Some(d) => (d, 1e3),
        None => match amount.strip_suffix('M') {
            Some(d) => (d, 1e6),
            None => (amount, 1.0),
        },
    };
    let value: f64 = digits.parse().map_err(|_| err())?;
    if !value.is_finite() || value < 0.0 {
        return Err(err());
    }
    let seconds = match per.trim() {
        "s" => 1.0,
        "min" | "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    Ok(value * multiplier / seconds)
}

/// `#[serde(with = "units::duration")]`: a duration string (or `0`) as [`Nanos`].
pub mod duration {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer, de};

    /// Deserializes `"250ms"`-style strings; the integer `0` is also accepted.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
        }
        match Raw::deserialize(d).map_err(|_| de::Error::custom(DURATION_EXPECTED))? {
            Raw::Text(s) => parse_duration(&s).map_err(de::Error::custom),
            Raw::Int(0) => Ok(0),
            Raw::Int(_) => Err(de::Error::custom(format!(
                "a bare number is ambiguous: expected {DURATION_EXPECTED}"
            ))),
        }
    }

    /// Serializes as the string [`format_duration`] gives.
    pub fn serialize<S: Serializer>(n: &Nanos, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*n))
    }
}

/// `#[serde(with = "units::opt_duration", default)]`: an optional duration.
pub mod opt_duration {
    use super::*;
    use serde::{Deserializer, Serializer};

    /// Deserializes a present value with [`duration`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        super::duration::deserialize(d).map(Some)
    }

    /// Serializes `None` as unit, `Some` as a duration string.
    pub fn serialize<S: Serializer>(n: &Option<Nanos>, s: S) -> Result<S::Ok, S::Error> {
        match n {
            Some(n) => s.serialize_str(&format_duration(*n)),
            None => s.serialize_none(),
        }
    }
}

/// `#[serde(with = "units::rate")]`: a rate string (or plain number, per second) as `f64` per second.
pub mod rate {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer, de};

    /// Deserializes `"9k/s"`-style strings or a plain number of events per second.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Num(f64),
        }
        match Raw::deserialize(d).map_err(|_| de::Error::custom(RATE_EXPECTED))? {
            Raw::Text(s) => parse_rate(&s).map_err(de::Error::custom),
            Raw::Num(n) if n.is_finite() && n >= 0.0 => Ok(n),
            Raw::Num(_) => Err(de::Error::custom(RATE_EXPECTED)),
        }
    }

    /// Serializes as `"<n>/s"`.
    pub fn serialize<S: Serializer>(r: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{r}/s"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration("100ns").unwrap(), 100);
        assert_eq!(parse_duration("10us").unwrap(), 10_000);
        assert_eq!(parse_duration("10µs").unwrap(), 10_000);
        assert_eq!(parse_duration("250ms").unwrap(), 250 * MILLISECOND);
        assert_eq!(parse_duration("2m").unwrap(), 2 * MINUTE);
        assert_eq!(parse_duration("1d").unwrap(), 24 * 60 * MINUTE);
        assert_eq!(parse_duration(" 1h30m ").unwrap(), 90 * MINUTE);
        assert_eq!(parse_duration("0").unwrap(), 0);
    }

    #[test]
    fn malformed_durations_are_rejected_with_the_expectation() {
        for bad in ["", "ms", "10", "10 ms", "1.2.3s", "5parsecs", "-1s", "s10"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.to_string().contains("expected a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn format_round_trips() {
        for n in [
            1,
            999,
            1_500_000_000,
            7 * 3600 * SECOND + 47 * MINUTE,
            86_400 * SECOND,
        ] {
            assert_eq!(parse_duration(&format_duration(n)).unwrap(), n);
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("250/s").unwrap(), 250.0);
        assert_eq!(parse_rate("1.2M/h").unwrap(), 1_200_000.0 / 3600.0);
        assert_eq!(parse_rate("70k/s").unwrap(), 70_000.0);
        for bad in ["", "9k", "k/s", "9k/fortnight", "-1/s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}

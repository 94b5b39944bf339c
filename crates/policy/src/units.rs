//! Human units for config files: durations (`"250ms"`, `"7h47m"`) and rates
//! (`"9k/s"`, `"600/min"`).
//!
//! Durations follow Go's `time.ParseDuration` / Envoy's `Duration` spelling:
//! one or more `<number><unit>` pairs, units `ns`, `us` (or `µs`), `ms`, `s`,
//! `m`, `h`, `d`, fractions allowed (`"1.5s"`). A bare `"0"` is zero. Rates
//! are `<number>[k|M]/<unit>` with unit `s`, `min` or `h`.
//!
//! [`Nanos`] reads and writes these duration strings through serde by
//! itself; rates, which are plain `f64`s per second, take the [`rate`]
//! helper:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stormbreak_policy::{Nanos, units};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Route {
//!     per_try: Nanos,
//!     #[serde(with = "units::rate")]
//!     rate: f64,
//! }
//! let r: Route = serde_json::from_str(r#"{"per_try": "250ms", "rate": "9k/s"}"#).unwrap();
//! assert_eq!(r.per_try, Nanos::from_millis(250));
//! assert_eq!(r.rate, 9000.0);
//! ```

use crate::Nanos;
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

pub(crate) const DURATION_EXPECTED: &str =
    "a duration such as \"250ms\", \"1.5s\", \"7h47m\" (units ns, us, ms, s, m, h, d)";
const RATE_EXPECTED: &str = "a rate such as \"9k/s\", \"250/s\", \"600/min\" or \"1.2M/h\"";

/// Parses a duration such as `"250ms"`, `"1.5s"` or `"7h47m"` into nanoseconds.
///
/// ```
/// use stormbreak_policy::{Nanos, units::parse_duration};
/// assert_eq!(parse_duration("7h47m").unwrap(), Nanos::from_secs(7 * 3600 + 47 * 60));
/// assert_eq!(parse_duration("1.5s").unwrap(), Nanos::from_millis(1500));
/// assert!(parse_duration("5 parsecs").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Nanos, UnitError> {
    let s = input.trim();
    let err = || UnitError::new(input, DURATION_EXPECTED);
    if s == "0" {
        return Ok(Nanos::ZERO);
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
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86_400e9,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(err());
    }
    Ok(Nanos::from_nanos(total.round() as u64))
}

/// Formats nanoseconds in the largest units that keep it exact, e.g. `"7h47m"`.
///
/// The output parses back with [`parse_duration`] to the same value.
///
/// ```
/// use stormbreak_policy::{Nanos, units::{format_duration, parse_duration}};
/// assert_eq!(format_duration(Nanos::from_millis(250)), "250ms");
/// assert_eq!(format_duration(parse_duration("7h47m").unwrap()), "7h47m");
/// ```
pub fn format_duration(n: Nanos) -> String {
    if n.is_zero() {
        return "0".into();
    }
    const UNITS: [(u64, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    let mut out = String::new();
    let mut rest = n.as_nanos();
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
        let d = |s| parse_duration(s).unwrap().as_nanos();
        assert_eq!(d("100ns"), 100);
        assert_eq!(d("10us"), 10_000);
        assert_eq!(d("10µs"), 10_000);
        assert_eq!(d("250ms"), 250_000_000);
        assert_eq!(d("2m"), 120_000_000_000);
        assert_eq!(d("1d"), 86_400_000_000_000);
        assert_eq!(d(" 1h30m "), 5_400_000_000_000);
        assert_eq!(d("0"), 0);
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
            (7 * 3600 + 47 * 60) * 1_000_000_000,
            86_400 * 1_000_000_000,
        ] {
            let n = Nanos::from_nanos(n);
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

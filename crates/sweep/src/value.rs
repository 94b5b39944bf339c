//! The kinds of value an axis can vary — what the field takes, asked of
//! the scenario's own types, not only what the file's literal looks like —
//! and how a swept value is written back in the field's own units.

use stormbreak_policy::Nanos;
use stormbreak_policy::units::{format_duration, parse_duration, parse_rate};
use stormbreak_sim::Scenario;
use toml_edit::{DocumentMut, Value};

use crate::path::FieldPath;

/// What a field holds, as the file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A duration string (`"250ms"`); numbers are nanoseconds.
    Duration,
    /// A rate string (`"9k/s"`); numbers are per second.
    Rate,
    /// A TOML integer.
    Integer,
    /// A TOML float.
    Float,
    /// Any other string: only lists of strings.
    Text,
    /// A boolean: only lists.
    Boolean,
}

impl Kind {
    /// The kind of `v`, and its numeric value for numeric kinds.
    pub fn of(v: &Value) -> Result<(Kind, Option<f64>), String> {
        Ok(match v {
            Value::Integer(i) => (Kind::Integer, Some(*i.value() as f64)),
            Value::Float(f) => (Kind::Float, Some(*f.value())),
            Value::Boolean(_) => (Kind::Boolean, None),
            Value::String(s) => {
                let s = s.value();
                if let Ok(d) = parse_duration(s) {
                    (Kind::Duration, Some(d.as_nanos() as f64))
                } else if let Ok(r) = parse_rate(s) {
                    (Kind::Rate, Some(r))
                } else {
                    (Kind::Text, None)
                }
            }
            _ => return Err("a date, which cannot be swept".to_owned()),
        })
    }

    /// The kind of the field at `path`, and the file's value as a number.
    ///
    /// The literal says what the file holds; the scenario's types say what
    /// the field takes. A number literal is checked against them with a
    /// probe value read by [`Scenario::check_types`]: a field that takes
    /// `"1s"` is a duration (`add = 0`), one that takes `"1/s"` a rate
    /// (`rate = 800`), and an integer literal in a field that takes `5.5`
    /// is a float (`factor = 5`), so its axis values are not rounded to
    /// whole numbers. A document that does not read as a scenario at all
    /// is left to the literal (its own error comes from building it).
    pub fn of_field(doc: &DocumentMut, path: &FieldPath) -> Result<(Kind, Option<f64>), String> {
        let (kind, base) = Kind::of(path.get(doc)?).map_err(|k| format!("{path} is {k}"))?;
        let (Kind::Integer | Kind::Float, Some(n)) = (kind, base) else {
            return Ok((kind, base));
        };
        let reads = |d: &DocumentMut| Scenario::check_types("probe", &d.to_string()).is_ok();
        if !reads(doc) {
            return Ok((kind, base));
        }
        let takes = |probe: Value| {
            let mut d = doc.clone();
            path.set(&mut d, probe).is_ok() && reads(&d)
        };
        Ok(if takes(Value::from("1s")) {
            // A bare number in a duration field is nanoseconds (only 0 is
            // accepted), which is what `n` already is.
            (Kind::Duration, Some(n))
        } else if takes(Value::from("1/s")) {
            (Kind::Rate, Some(n))
        } else if kind == Kind::Integer && takes(Value::from(n + 0.5)) {
            (Kind::Float, Some(n))
        } else {
            (kind, Some(n))
        })
    }

    /// Whether values of this kind have an order (ranges, multipliers,
    /// Latin-hypercube samples).
    pub fn numeric(self) -> bool {
        !matches!(self, Kind::Text | Kind::Boolean)
    }

    /// What a value of this kind looks like, for errors.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Duration => "a duration such as 250ms or 1.5s",
            Kind::Rate => "a rate such as 0.6k/s or 250/s (a plain number is per second)",
            Kind::Integer => "a whole number",
            Kind::Float => "a number",
            Kind::Text => "text",
            Kind::Boolean => "true or false",
        }
    }

    /// Parses one value written in the field's own units.
    pub fn parse(self, s: &str) -> Result<f64, String> {
        let bad = || format!("expected {}, got {s:?}", self.expected());
        let v = match self {
            Kind::Duration => parse_duration(s).map_err(|_| bad())?.as_nanos() as f64,
            Kind::Rate => match s.parse::<f64>() {
                Ok(v) => v,
                Err(_) => parse_rate(s).map_err(|_| bad())?,
            },
            Kind::Integer | Kind::Float => s.parse::<f64>().map_err(|_| bad())?,
            Kind::Text | Kind::Boolean => return Err(bad()),
        };
        if v.is_finite() { Ok(v) } else { Err(bad()) }
    }

    /// The value `v` (nanoseconds, per second, or the number) as the field
    /// writes it. Integers and durations are rounded to whole units.
    pub fn write(self, v: f64) -> Value {
        match self {
            Kind::Duration => Value::from(format_duration(Nanos::from_nanos(
                v.round().max(0.0) as u64
            ))),
            Kind::Rate => Value::from(format!("{}/s", tidy(v))),
            Kind::Integer => Value::from(v.round() as i64),
            Kind::Float => Value::from(tidy(v)),
            Kind::Text | Kind::Boolean => unreachable!("only numeric kinds are computed"),
        }
    }
}

/// `v` rounded to 12 significant digits, so that `0.1 + 0.2` is written
/// as `0.3` and a grid's points read as the user would type them.
pub fn tidy(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 12 - (v.abs().log10().floor() as i32) - 1;
    let p = 10f64.powi(digits.clamp(-300, 300));
    (v * p).round() / p
}

/// A value as it appears in outputs: the TOML text without decoration.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.value().clone(),
        other => {
            let mut o = other.clone();
            o.decor_mut().clear();
            o.to_string()
        }
    }
}

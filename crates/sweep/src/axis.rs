//! The axis grammar: `PATH=SPEC`.
//!
//! ```text
//! AXIS  := PATH "=" SPEC
//! SPEC  := TERM ".." TERM ":" [ "log" ":" ] POINTS     a range, ends included
//!        | TERM { "," TERM }                           an explicit list
//! TERM  := a value in the field's own units            0.6k/s, 30s, 12, 0.25
//!        | NUMBER "x"                                  a multiple of the file's value
//! ```
//!
//! `client.users.rate=0.6k/s..1.0k/s:9`, `action.cut.for=1s..30s:log:12`,
//! `service.db.app.workers=0.8x..1.2x:5`, `client.users.retry.backoff.kind=constant,exponential`.
//! Both ends of a range are values or both multiples. A range's points are
//! evenly spaced (geometrically with `log`); a Latin-hypercube sample
//! draws anywhere inside it. A computed point is rounded to
//! [`COMPUTED_DIGITS`] significant digits (integer fields to whole
//! numbers); the ends and listed values are kept as given (durations to
//! the nanosecond). A grid whose rounded points repeat is refused.

use toml_edit::{DocumentMut, Value};

use crate::path::FieldPath;
use crate::value::{Kind, display, tidy};

/// Most axes in one sweep.
pub const MAX_AXES: usize = 8;
/// Most points on one axis (range or list).
pub const MAX_POINTS: usize = 10_000;

/// One axis as written on the command line, not yet read against a file.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisSpec {
    /// `PATH=SPEC` as given.
    pub text: String,
    /// The field it varies.
    pub path: FieldPath,
    domain: Domain,
}

#[derive(Debug, Clone, PartialEq)]
enum Domain {
    Range {
        lo: Term,
        hi: Term,
        log: bool,
        points: usize,
    },
    List(Vec<Term>),
}

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Value(String),
    Times(f64),
}

impl Term {
    fn parse(s: &str) -> Term {
        let s = s.trim();
        match s.strip_suffix('x').map(str::parse::<f64>) {
            Some(Ok(m)) => Term::Times(m),
            _ => Term::Value(s.to_owned()),
        }
    }
}

impl AxisSpec {
    /// Parses `PATH=SPEC` (see the module docs).
    pub fn parse(text: &str) -> Result<AxisSpec, String> {
        let expected = "expected PATH=LO..HI:N, PATH=LO..HI:log:N or PATH=V1,V2,… \
                        (values in the field's units, or multiples of the file's value such as 0.8x)";
        let (path, spec) = text
            .split_once('=')
            .ok_or_else(|| format!("axis {text:?}: {expected}"))?;
        let path = FieldPath::parse(path.trim()).map_err(|e| format!("axis {text:?}: {e}"))?;
        let spec = spec.trim();
        let domain = if let Some((lo, rest)) = spec.split_once("..") {
            let parts: Vec<&str> = rest.split(':').collect();
            let (hi, log, n) = match parts.as_slice() {
                [hi, n] => (*hi, false, *n),
                [hi, "log", n] => (*hi, true, *n),
                _ => return Err(format!("axis {text:?}: {expected}")),
            };
            let points: usize = n.trim().parse().map_err(|_| {
                format!("axis {text:?}: the number of points must be a whole number, got {n:?}")
            })?;
            if !(2..=MAX_POINTS).contains(&points) {
                return Err(format!(
                    "axis {text:?}: a range needs 2 to {MAX_POINTS} points, got {points}"
                ));
            }
            let (lo, hi) = (Term::parse(lo), Term::parse(hi));
            if matches!(lo, Term::Times(_)) != matches!(hi, Term::Times(_)) {
                return Err(format!(
                    "axis {text:?}: both ends must be values, or both multiples such as 0.8x..1.2x"
                ));
            }
            Domain::Range {
                lo,
                hi,
                log,
                points,
            }
        } else {
            let terms: Vec<Term> = spec.split(',').map(Term::parse).collect();
            if spec.is_empty() || terms.iter().any(|t| *t == Term::Value(String::new())) {
                return Err(format!("axis {text:?}: {expected}"));
            }
            if terms.len() > MAX_POINTS {
                return Err(format!("axis {text:?}: more than {MAX_POINTS} values"));
            }
            Domain::List(terms)
        };
        Ok(AxisSpec {
            text: text.to_owned(),
            path,
            domain,
        })
    }

    /// Reads the axis against the scenario document: the field must exist,
    /// and every value must be of its kind.
    pub fn resolve(&self, doc: &DocumentMut) -> Result<Axis, String> {
        let at = |e: String| format!("axis {:?}: {e}", self.text);
        let (kind, base) = Kind::of_field(doc, &self.path).map_err(at)?;
        let number = |t: &Term| -> Result<f64, String> {
            match t {
                Term::Times(m) => {
                    let b = base.ok_or_else(|| {
                        format!("{} is {}: it has no multiples", self.path, kind.expected())
                    })?;
                    if !m.is_finite() || *m < 0.0 {
                        return Err(format!("multiple {m}x: expected a finite number ≥ 0"));
                    }
                    Ok(b * m)
                }
                Term::Value(s) => kind.parse(s).map_err(|e| format!("{}: {e}", self.path)),
            }
        };
        let values = match &self.domain {
            Domain::Range {
                lo,
                hi,
                log,
                points,
            } => {
                if !kind.numeric() {
                    return Err(at(format!(
                        "{} is {}: a range needs numbers; give a list such as a,b",
                        self.path,
                        kind.expected()
                    )));
                }
                let (lo, hi) = (number(lo).map_err(at)?, number(hi).map_err(at)?);
                if *log && (lo <= 0.0 || hi <= 0.0) {
                    return Err(at("a log range needs both ends > 0".to_owned()));
                }
                Values::Range {
                    lo,
                    hi,
                    log: *log,
                    points: *points,
                }
            }
            Domain::List(terms) if kind.numeric() => Values::Numbers(
                terms
                    .iter()
                    .map(|t| number(t).map_err(at))
                    .collect::<Result<_, _>>()?,
            ),
            Domain::List(terms) => Values::Literals(
                terms
                    .iter()
                    .map(|t| literal(kind, t).map_err(|e| at(format!("{}: {e}", self.path))))
                    .collect::<Result<_, _>>()?,
            ),
        };
        let axis = Axis {
            path: self.path.clone(),
            text: self.text.clone(),
            kind,
            values,
        };
        // Integers and durations round: refuse a grid whose points collide.
        axis.distinct().map_err(at)?;
        Ok(axis)
    }
}

fn literal(kind: Kind, t: &Term) -> Result<Value, String> {
    let Term::Value(s) = t else {
        return Err(format!("{} has no multiples", kind.expected()));
    };
    match kind {
        Kind::Boolean => s
            .parse::<bool>()
            .map(Value::from)
            .map_err(|_| format!("expected true or false, got {s:?}")),
        _ => Ok(Value::from(s.as_str())),
    }
}

/// An axis read against its scenario: the field's kind and the values.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The field it varies.
    pub path: FieldPath,
    /// `PATH=SPEC` as given.
    pub text: String,
    /// The field's kind.
    pub kind: Kind,
    values: Values,
}

#[derive(Debug, Clone)]
enum Values {
    Range {
        lo: f64,
        hi: f64,
        log: bool,
        points: usize,
    },
    Numbers(Vec<f64>),
    Literals(Vec<Value>),
}

impl Axis {
    /// Refuses an axis two of whose points are written the same, naming
    /// both values as given or computed, and the rounding that made them one.
    fn distinct(&self) -> Result<(), String> {
        let shown: Vec<String> = self.points().iter().map(display).collect();
        let raw = self.raw();
        for (j, s) in shown.iter().enumerate() {
            let Some(i) = shown[..j].iter().position(|t| t == s) else {
                continue;
            };
            let (a, b) = (raw[i], raw[j]);
            let why = match (a, b) {
                (Some(a), Some(b)) if a != b => format!(
                    "the values {} and {} (points {} and {}) both become {s}: {}",
                    self.unrounded(a),
                    self.unrounded(b),
                    i + 1,
                    j + 1,
                    self.rounding()
                ),
                _ => format!("{s} is given twice (points {} and {})", i + 1, j + 1),
            };
            return Err(format!(
                "{why}; all points: {}. Use fewer points or a wider range",
                shown.join(", ")
            ));
        }
        Ok(())
    }

    /// A number before rounding, in the field's units.
    fn unrounded(&self, x: f64) -> String {
        match self.kind {
            Kind::Duration => format!("{}ns", tidy(x)),
            Kind::Rate => format!("{}/s", tidy(x)),
            _ => tidy(x).to_string(),
        }
    }

    /// How this axis's values are rounded, for [`Axis::distinct`].
    fn rounding(&self) -> String {
        match self.kind {
            Kind::Integer => format!(
                "{} takes whole numbers, and values are rounded to them",
                self.path
            ),
            Kind::Duration => "durations are rounded to the nanosecond".to_owned(),
            _ => format!(
                "a range's computed points are rounded to {COMPUTED_DIGITS} significant digits"
            ),
        }
    }

    /// Each point's number before rounding (none for lists of text).
    fn raw(&self) -> Vec<Option<f64>> {
        match &self.values {
            Values::Range {
                lo,
                hi,
                log,
                points,
            } => (0..*points)
                .map(|i| {
                    let u = i as f64 / (*points - 1) as f64;
                    Some(if *log {
                        (lo.ln() + u * (hi.ln() - lo.ln())).exp()
                    } else {
                        lo + u * (hi - lo)
                    })
                })
                .collect(),
            Values::Numbers(v) => v.iter().map(|&x| Some(x)).collect(),
            Values::Literals(v) => vec![None; v.len()],
        }
    }

    /// The grid's points, in order.
    pub fn points(&self) -> Vec<Value> {
        match &self.values {
            Values::Range { points, .. } => (0..*points)
                .map(|i| self.at(i as f64 / (*points - 1) as f64))
                .collect(),
            Values::Numbers(v) => v.iter().map(|&x| self.kind.write(x)).collect(),
            Values::Literals(v) => v.clone(),
        }
    }

    /// How many points the grid has on this axis.
    pub fn len(&self) -> usize {
        match &self.values {
            Values::Range { points, .. } => *points,
            Values::Numbers(v) => v.len(),
            Values::Literals(v) => v.len(),
        }
    }

    /// Whether the axis has no points (never, once resolved).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at the fraction `u` in [0, 1] of the axis: inside a range
    /// (linearly, or geometrically for `log`), or the list element
    /// `⌊u·len⌋` of a list — the Latin-hypercube sample's coordinate.
    pub fn at(&self, u: f64) -> Value {
        let u = u.clamp(0.0, 1.0);
        match &self.values {
            Values::Range { lo, hi, log, .. } => {
                let v = if *log {
                    (lo.ln() + u * (hi.ln() - lo.ln())).exp()
                } else {
                    lo + u * (hi - lo)
                };
                // Computed points read as a person would write them
                // (1.459s, not 1s459ms232us803ns); the ends stay exact.
                let v = if u == 0.0 {
                    *lo
                } else if u == 1.0 {
                    *hi
                } else if self.kind == Kind::Integer {
                    v
                } else {
                    significant(v, COMPUTED_DIGITS)
                };
                self.kind.write(v)
            }
            Values::Numbers(v) => self.kind.write(v[pick(u, v.len())]),
            Values::Literals(v) => v[pick(u, v.len())].clone(),
        }
    }
}

/// Significant digits of a computed point of a range (integers round to
/// whole numbers instead).
pub const COMPUTED_DIGITS: i32 = 4;

/// `v` rounded to `digits` significant digits.
fn significant(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

fn pick(u: f64, len: usize) -> usize {
    ((u * len as f64) as usize).min(len - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
[[client]]
name = "users"
rate = "800/s"
timeout = "200ms"
workers = 10
retry = { max_attempts = 3, backoff = { kind = "constant", base = "10ms" } }
"#;

    fn points(axis: &str) -> Result<Vec<String>, String> {
        let doc: DocumentMut = DOC.parse().unwrap();
        let a = AxisSpec::parse(axis)?.resolve(&doc)?;
        Ok(a.points().iter().map(display).collect())
    }

    #[test]
    fn ranges_in_the_fields_units() {
        assert_eq!(
            points("client.users.rate=0.6k/s..1.0k/s:5").unwrap(),
            ["600/s", "700/s", "800/s", "900/s", "1000/s"]
        );
        assert_eq!(
            points("client.users.timeout=1s..30s:log:4").unwrap(),
            ["1s", "3s107ms", "9s655ms", "30s"]
        );
        assert_eq!(
            points("client.users.retry.backoff.base=0.5x..2x:4").unwrap(),
            ["5ms", "10ms", "15ms", "20ms"]
        );
    }

    #[test]
    fn integers_round_and_lists_keep_their_values() {
        assert_eq!(
            points("client.users.workers=0.8x..1.2x:3").unwrap(),
            ["8", "10", "12"]
        );
        assert_eq!(
            points("client.users.retry.max_attempts=1,2,4").unwrap(),
            ["1", "2", "4"]
        );
        assert_eq!(
            points("client.users.retry.backoff.kind=constant,exponential").unwrap(),
            ["constant", "exponential"]
        );
    }

    #[test]
    fn malformed_axes_say_what_is_expected() {
        for bad in [
            "client.users.rate",
            "client.users.rate=1..2",
            "client.users.rate=1..2:1",
            "client..rate=1,2",
        ] {
            assert!(points(bad).is_err(), "{bad}");
        }
        let e = points("client.users.rate=1x..2k/s:3").unwrap_err();
        assert!(
            e.contains("both ends must be values, or both multiples"),
            "{e}"
        );
        let e = points("client.users.retry.backoff.kind=0.5x..2x:3").unwrap_err();
        assert!(e.contains("a range needs numbers"), "{e}");
        let e = points("client.users.timeout=0s..1s:log:3").unwrap_err();
        assert!(e.contains("log range needs both ends > 0"), "{e}");
    }

    /// A whole scenario, so the fields' types can be asked of it.
    const SCENARIO: &str = r#"
[scenario]
name = "typed"
duration = "60s"

[[service]]
name = "svc"
replicas = 1
app = { workers = 4, service_time = { dist = "exponential", mean = "1ms" } }

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
rate = 800
timeout = "1s"

[[action]]
id = "cut"
role = "trigger"
at = "10s"
do = "slow_service"
service = "svc"
factor = 5
add = 0
"#;

    fn typed(axis: &str) -> Result<Vec<String>, String> {
        let doc: DocumentMut = SCENARIO.parse().unwrap();
        let a = AxisSpec::parse(axis)?.resolve(&doc)?;
        Ok(a.points().iter().map(display).collect())
    }

    #[test]
    fn values_take_the_fields_type_not_the_literals() {
        // `factor = 5` is an integer literal in a float field.
        assert_eq!(
            typed("action.cut.factor=2,2.5,2.75").unwrap(),
            ["2.0", "2.5", "2.75"]
        );
        assert_eq!(
            typed("action.cut.factor=2..3:5").unwrap(),
            ["2.0", "2.25", "2.5", "2.75", "3.0"]
        );
        assert_eq!(
            typed("action.cut.factor=0.5x,0.55x").unwrap(),
            ["2.5", "2.75"]
        );
        // `add = 0` is a duration, `rate = 800` a rate.
        assert_eq!(
            typed("action.cut.add=0s..1s:3").unwrap(),
            ["0", "500ms", "1s"]
        );
        assert_eq!(
            typed("client.users.rate=0.6k/s,1x").unwrap(),
            ["600/s", "800/s"]
        );
        // An integer field still takes whole numbers.
        assert_eq!(typed("service.svc.app.workers=2,3").unwrap(), ["2", "3"]);
    }

    #[test]
    fn a_refused_axis_says_which_values_collided_and_why() {
        let e = typed("service.svc.app.workers=2,2.5,2.75").unwrap_err();
        assert!(
            e.contains("the values 2.5 and 2.75 (points 2 and 3) both become 3"),
            "{e}"
        );
        assert!(
            e.contains("service.svc.app.workers takes whole numbers"),
            "{e}"
        );
        assert!(e.contains("all points: 2, 3, 3"), "{e}");
        let e = typed("action.cut.factor=2,2.0").unwrap_err();
        assert!(e.contains("2.0 is given twice (points 1 and 2)"), "{e}");
        let e = typed("action.cut.factor=1..1.0001:5").unwrap_err();
        assert!(e.contains("rounded to 4 significant digits"), "{e}");
    }
}

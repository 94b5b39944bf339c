//! Checks of saved files before they are re-rendered.
//!
//! A `recording.json` or `report-extras.json` can be schema-valid JSON and
//! still make no sense: series of different lengths, a zero interval, a
//! duration that does not match the number of intervals, negative gauges.
//! Rendered unchecked, such a file gives a silently wrong page (or a panic
//! on an out-of-range index); here it gives one line per problem that names
//! the field and what was expected. In-process recordings come straight
//! from the engine and are not checked: [`crate::render`] stays cheap.

use std::collections::HashMap;
use std::fmt;

use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::record::{Cause, ComponentSeries, RouteSeries};

use crate::ReportExtras;

/// At most this many problems are collected: a recording with every series
/// one interval short would otherwise list thousands of the same line.
pub const MAX_PROBLEMS: usize = 20;

/// One thing wrong with a file: where (a path into the document, such as
/// `routes[3] "api"`) and what was found against what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Path of the offending field or entity.
    pub at: String,
    /// What is wrong, and what was expected.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// Collects problems up to [`MAX_PROBLEMS`], counting the rest.
#[derive(Default)]
struct Problems {
    list: Vec<Problem>,
    more: usize,
}

impl Problems {
    fn push(&mut self, at: impl Into<String>, what: impl Into<String>) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(Problem {
                at: at.into(),
                what: what.into(),
            });
        } else {
            self.more += 1;
        }
    }

    fn finish(self) -> Result<(), Invalid> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(Invalid {
                problems: self.list,
                more: self.more,
            })
        }
    }
}

/// The problems found in one document, in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The first [`MAX_PROBLEMS`] problems.
    pub problems: Vec<Problem>,
    /// How many more were found and not listed.
    pub more: usize,
}

impl Invalid {
    /// One line per problem, each prefixed with `file` (e.g. the file's
    /// path), then a count of the problems left out.
    pub fn lines(&self, file: &str) -> String {
        let mut out: Vec<String> = self
            .problems
            .iter()
            .map(|p| format!("{file}: {p}"))
            .collect();
        if self.more > 0 {
            out.push(format!("{file}: … and {} more problem(s)", self.more));
        }
        out.join("\n")
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for p in &self.problems {
            if !first {
                f.write_str("\n")?;
            }
            first = false;
            write!(f, "{p}")?;
        }
        if self.more > 0 {
            write!(f, "\n… and {} more problem(s)", self.more)?;
        }
        Ok(())
    }
}

/// The component kinds the engine records (`docs/outputs.md`).
const KINDS: [&str; 3] = ["lb", "gateway", "service"];

/// Checks that `rec` is internally consistent: a positive interval and
/// scale, every series with one value per interval (`duration /
/// interval`, as the engine records them), finite non-negative gauges,
/// counts whose totals fit in 64 bits, unique names, known component
/// kinds, actions in time order within the run.
pub fn check_recording(rec: &Recording) -> Result<(), Invalid> {
    let mut p = Problems::default();
    if rec.interval == Nanos::ZERO {
        p.push(
            "interval",
            "is 0, expected a positive number of nanoseconds",
        );
    }
    if !(rec.scale.is_finite() && rec.scale > 0.0) {
        p.push("scale", format!("is {}, expected a number > 0", rec.scale));
    }
    if rec.clock_origin_s >= 86_400 {
        p.push(
            "clock_origin_s",
            format!(
                "is {}, expected seconds after midnight (under 86400)",
                rec.clock_origin_s
            ),
        );
    }
    let expected = rec.duration.as_nanos().checked_div(rec.interval.as_nanos());
    if let Some(n) = expected {
        lengths(rec, n, &mut p);
    }
    for (i, r) in rec.routes.iter().enumerate() {
        route(&format!("routes[{i}] {:?}", r.name), r, &mut p);
    }
    for (i, c) in rec.components.iter().enumerate() {
        component(&format!("components[{i}] {:?}", c.name), c, &mut p);
    }
    unique("routes", rec.routes.iter().map(|r| r.name.as_str()), &mut p);
    unique(
        "components",
        rec.components.iter().map(|c| c.name.as_str()),
        &mut p,
    );
    let mut last = Nanos::ZERO;
    for (i, a) in rec.actions.iter().enumerate() {
        if a.at > rec.duration {
            p.push(
                format!("actions[{i}]"),
                format!(
                    "at {} ns is after the end of the run, expected at most the duration ({} ns)",
                    a.at.as_nanos(),
                    rec.duration.as_nanos()
                ),
            );
        } else if a.at < last {
            p.push(
                format!("actions[{i}]"),
                format!(
                    "at {} ns comes before the previous action ({} ns), expected actions in time order",
                    a.at.as_nanos(),
                    last.as_nanos()
                ),
            );
        }
        last = last.max(a.at);
    }
    p.finish()
}

/// The lengths of every series against `n` intervals. When all series
/// agree with each other but not with `n`, that is one problem (the
/// duration or the interval), not one per series.
fn lengths(rec: &Recording, n: u64, p: &mut Problems) {
    let mut series: Vec<(String, &'static str, usize)> = Vec::new();
    for (i, r) in rec.routes.iter().enumerate() {
        let at = format!("routes[{i}] {:?}", r.name);
        for (name, len) in [
            ("first_attempts", r.first_attempts.len()),
            ("attempts", r.attempts.len()),
            ("successes", r.successes.len()),
            ("errors", r.errors.len()),
            ("latency_ms", r.latency_ms.len()),
            ("latency_mean_ms", r.latency_mean_ms.len()),
        ] {
            series.push((at.clone(), name, len));
        }
        // Empty means "no job queue on this route".
        if !r.job_wait_s.is_empty() {
            series.push((at, "job_wait_s", r.job_wait_s.len()));
        }
    }
    for (i, c) in rec.components.iter().enumerate() {
        let at = format!("components[{i}] {:?}", c.name);
        for (name, len) in [
            ("arrivals", c.arrivals.len()),
            ("rejected", c.rejected.len()),
            ("in_flight", c.in_flight.len()),
            ("limit", c.limit.len()),
            ("queue", c.queue.len()),
            ("replicas", c.replicas.len()),
            ("app_utilisation", c.app_utilisation.len()),
        ] {
            series.push((at.clone(), name, len));
        }
        // Empty means "no connection model at this LB".
        if !c.connections.is_empty() {
            series.push((at.clone(), "connections", c.connections.len()));
        }
    }
    let Some(&(_, _, common)) = series.first() else {
        return;
    };
    if common as u64 != n && series.iter().all(|s| s.2 == common) {
        p.push(
            "duration",
            format!(
                "{} ns at an interval of {} ns is {n} intervals, but every series has {common} values",
                rec.duration.as_nanos(),
                rec.interval.as_nanos()
            ),
        );
        return;
    }
    for (at, name, len) in series {
        if len as u64 != n {
            let job = if name == "job_wait_s" {
                ", or none without a job queue"
            } else {
                ""
            };
            p.push(
                at,
                format!(
                    "series {name:?} has {len} values, expected {n} (duration / interval){job}"
                ),
            );
        }
    }
}

fn bad(v: f64) -> bool {
    !(v.is_finite() && v >= 0.0)
}

fn non_negative(at: &str, name: &str, values: &[f64], p: &mut Problems) {
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| bad(**v)) {
        p.push(
            at,
            format!("{name}[{i}] is {v}, expected a finite number ≥ 0"),
        );
    }
}

/// The sum of `values`, `None` past `u64::MAX`: totals are summed in 64
/// bits downstream (summary figures, tables), where an overflow panics in
/// debug builds and wraps in release ones.
fn total(values: impl Iterator<Item = u64>) -> Option<u64> {
    values.into_iter().try_fold(0u64, |a, v| a.checked_add(v))
}

fn too_large(at: &str, name: &str, p: &mut Problems) {
    p.push(
        at,
        format!(
            "the values of {name:?} add up to more than {}, expected counts that fit in 64 bits",
            u64::MAX
        ),
    );
}

fn route(at: &str, r: &RouteSeries, p: &mut Problems) {
    if r.name.is_empty() {
        p.push(at, "name is empty, expected the route's name");
    }
    let latency = r.latency_ms.iter().enumerate().find_map(|(i, q)| {
        let j = q.iter().position(|&v| bad(v))?;
        Some((i, j, q[j]))
    });
    if let Some((i, j, v)) = latency {
        p.push(
            at,
            format!("latency_ms[{i}][{j}] is {v}, expected a finite number of milliseconds ≥ 0"),
        );
    }
    non_negative(at, "latency_mean_ms", &r.latency_mean_ms, p);
    non_negative(at, "job_wait_s", &r.job_wait_s, p);
    for (name, v) in [
        ("first_attempts", &r.first_attempts),
        ("attempts", &r.attempts),
        ("successes", &r.successes),
    ] {
        if total(v.iter().copied()).is_none() {
            too_large(at, name, p);
        }
    }
    // Per interval and over the run, failures are summed over causes and
    // added to successes (the error rate's denominator).
    let answered = || -> Option<u64> {
        for c in 0..Cause::ALL.len() {
            total(r.errors.iter().map(|e| e[c]))?;
        }
        let mut failed = 0u64;
        for (e, s) in r.errors.iter().zip(&r.successes) {
            let f = total(e.iter().copied())?;
            f.checked_add(*s)?;
            failed = failed.checked_add(f)?;
        }
        failed.checked_add(total(r.successes.iter().copied())?)
    };
    if answered().is_none() {
        too_large(at, "errors", p);
    }
}

fn component(at: &str, c: &ComponentSeries, p: &mut Problems) {
    if c.name.is_empty() {
        p.push(at, "name is empty, expected the component's name");
    }
    if !KINDS.contains(&c.kind.as_str()) {
        p.push(
            at,
            format!("kind is {:?}, expected one of {}", c.kind, KINDS.join(", ")),
        );
    }
    for (name, v) in [
        ("in_flight", &c.in_flight),
        ("limit", &c.limit),
        ("queue", &c.queue),
        ("replicas", &c.replicas),
        ("app_utilisation", &c.app_utilisation),
        ("connections", &c.connections),
    ] {
        non_negative(at, name, v, p);
    }
    for (name, v) in [
        ("little.mean_in_system", c.little.mean_in_system),
        ("little.throughput_per_s", c.little.throughput_per_s),
        ("little.mean_sojourn_s", c.little.mean_sojourn_s),
    ] {
        if bad(v) {
            p.push(at, format!("{name} is {v}, expected a finite number ≥ 0"));
        }
    }
    for (name, v) in [("arrivals", &c.arrivals), ("rejected", &c.rejected)] {
        if total(v.iter().copied()).is_none() {
            too_large(at, name, p);
        }
    }
}

fn unique<'a>(list: &str, names: impl Iterator<Item = &'a str>, p: &mut Problems) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, n) in names.enumerate() {
        let first = *seen.entry(n).or_insert(i);
        if first != i {
            p.push(
                format!("{list}[{i}] {n:?}"),
                format!("the name is used by {list}[{first}] too, expected unique names"),
            );
        }
    }
}

/// Checks what serde cannot: every table row fits its columns (a longer
/// row would be shown under blank headers).
pub fn check_extras(extras: &ReportExtras) -> Result<(), Invalid> {
    let mut p = Problems::default();
    for (t, table) in extras.tables.iter().enumerate() {
        let at = format!("tables[{t}] {:?}", table.title);
        if table.columns.is_empty() && !table.rows.is_empty() {
            p.push(&at, "has rows but no columns, expected at least one column");
            continue;
        }
        for (r, row) in table.rows.iter().enumerate() {
            if row.len() > table.columns.len() {
                p.push(
                    &at,
                    format!(
                        "rows[{r}] has {} cells, expected at most {} (one per column)",
                        row.len(),
                        table.columns.len()
                    ),
                );
            }
        }
    }
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_sim::record::AppliedAction;

    const S: Nanos = Nanos::SECOND;

    fn route(name: &str, n: usize) -> RouteSeries {
        RouteSeries {
            name: name.into(),
            first_attempts: vec![10; n],
            attempts: vec![12; n],
            successes: vec![11; n],
            errors: vec![[0; Cause::ALL.len()]; n],
            latency_ms: vec![[1.0, 2.0, 3.0, 4.0]; n],
            latency_mean_ms: vec![1.5; n],
            job_wait_s: Vec::new(),
        }
    }

    fn component(name: &str, n: usize) -> ComponentSeries {
        ComponentSeries {
            name: name.into(),
            kind: "service".into(),
            arrivals: vec![5; n],
            rejected: vec![0; n],
            in_flight: vec![1.0; n],
            limit: vec![4.0; n],
            queue: vec![0.0; n],
            replicas: vec![2.0; n],
            app_utilisation: vec![0.3; n],
            connections: Vec::new(),
            little: Default::default(),
        }
    }

    /// A consistent recording: 6 intervals of 10 s.
    fn good() -> Recording {
        Recording {
            scenario: "s".into(),
            seed: 1,
            scale: 0.01,
            interval: 10 * S,
            duration: 60 * S,
            clock_origin_s: 13 * 3600,
            routes: vec![route("web", 6), route("api", 6)],
            components: vec![component("svc", 6)],
            actions: vec![
                AppliedAction {
                    at: 10 * S,
                    what: "a".into(),
                },
                AppliedAction {
                    at: 60 * S,
                    what: "b".into(),
                },
            ],
            events: 0,
            attempts: 0,
            peak_in_flight: 0,
            peak_events_per_s: 0.0,
            peak_job_backlog: 0,
            bounds_hit: Vec::new(),
        }
    }

    fn problems(rec: &Recording) -> Vec<String> {
        match check_recording(rec) {
            Ok(()) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_consistent_recording_passes() {
        assert_eq!(problems(&good()), Vec::<String>::new());
        // A duration that is not a whole number of intervals: the engine
        // records the whole intervals only.
        let mut rec = good();
        rec.duration = 65 * S;
        assert_eq!(problems(&rec), Vec::<String>::new());
        // An empty run.
        let mut rec = good();
        rec.routes.clear();
        rec.components.clear();
        assert_eq!(problems(&rec), Vec::<String>::new());
    }

    #[test]
    fn a_short_series_names_its_route_and_the_expected_length() {
        let mut rec = good();
        rec.routes[1].successes.truncate(2);
        assert_eq!(
            problems(&rec),
            [
                r#"routes[1] "api": series "successes" has 2 values, expected 6 (duration / interval)"#
            ]
        );
        let mut rec = good();
        rec.routes[0].job_wait_s = vec![0.0; 3];
        rec.components[0].limit.push(1.0);
        assert_eq!(
            problems(&rec),
            [
                r#"routes[0] "web": series "job_wait_s" has 3 values, expected 6 (duration / interval), or none without a job queue"#,
                r#"components[0] "svc": series "limit" has 7 values, expected 6 (duration / interval)"#,
            ]
        );
    }

    #[test]
    fn a_duration_that_disagrees_with_every_series_is_one_problem() {
        let mut rec = good();
        rec.duration = 3600 * S;
        assert_eq!(
            problems(&rec),
            [
                "duration: 3600000000000 ns at an interval of 10000000000 ns is 360 intervals, but every series has 6 values"
            ]
        );
    }

    #[test]
    fn zero_interval_and_bad_scalars_are_named() {
        let mut rec = good();
        rec.interval = Nanos::ZERO;
        rec.scale = f64::NAN;
        rec.clock_origin_s = 90_000;
        assert_eq!(
            problems(&rec),
            [
                "interval: is 0, expected a positive number of nanoseconds",
                "scale: is NaN, expected a number > 0",
                "clock_origin_s: is 90000, expected seconds after midnight (under 86400)",
            ]
        );
    }

    #[test]
    fn non_finite_and_negative_values_are_named_with_their_index() {
        let mut rec = good();
        rec.routes[0].latency_ms[4][2] = f64::INFINITY;
        rec.components[0].queue[3] = -1.0;
        rec.components[0].little.mean_sojourn_s = f64::NAN;
        assert_eq!(
            problems(&rec),
            [
                r#"routes[0] "web": latency_ms[4][2] is inf, expected a finite number of milliseconds ≥ 0"#,
                r#"components[0] "svc": queue[3] is -1, expected a finite number ≥ 0"#,
                r#"components[0] "svc": little.mean_sojourn_s is NaN, expected a finite number ≥ 0"#,
            ]
        );
    }

    #[test]
    fn counts_that_overflow_their_totals_are_rejected() {
        let mut rec = good();
        rec.routes[0].attempts[0] = u64::MAX;
        rec.routes[1].errors[2][0] = u64::MAX;
        rec.components[0].arrivals[5] = u64::MAX;
        let p = problems(&rec);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(
            p[0].starts_with(r#"routes[0] "web": the values of "attempts" add up to more than"#)
        );
        // errors: u64::MAX failures plus 11 successes overflow the
        // interval's answered attempts.
        assert!(p[1].starts_with(r#"routes[1] "api": the values of "errors""#));
        assert!(p[2].starts_with(r#"components[0] "svc": the values of "arrivals""#));
    }

    #[test]
    fn names_kinds_and_actions_are_checked() {
        let mut rec = good();
        rec.routes[1].name = "web".into();
        rec.components[0].kind = "database".into();
        rec.actions.swap(0, 1);
        rec.actions.push(AppliedAction {
            at: 61 * S,
            what: "late".into(),
        });
        assert_eq!(
            problems(&rec),
            [
                r#"components[0] "svc": kind is "database", expected one of lb, gateway, service"#,
                r#"routes[1] "web": the name is used by routes[0] too, expected unique names"#,
                "actions[1]: at 10000000000 ns comes before the previous action (60000000000 ns), expected actions in time order",
                "actions[2]: at 61000000000 ns is after the end of the run, expected at most the duration (60000000000 ns)",
            ]
        );
    }

    #[test]
    fn problems_are_capped_and_counted() {
        let mut rec = good();
        for r in &mut rec.routes {
            r.latency_mean_ms.clear();
        }
        rec.components[0].kind = "x".into();
        for i in 0..30 {
            rec.routes.push(route(&format!("r{i}"), 5));
        }
        let e = check_recording(&rec).unwrap_err();
        assert_eq!(e.problems.len(), MAX_PROBLEMS);
        assert!(e.more > 0);
        let text = e.lines("run/recording.json");
        assert_eq!(text.lines().count(), MAX_PROBLEMS + 1);
        assert!(text.lines().all(|l| l.starts_with("run/recording.json: ")));
        assert!(text.ends_with(&format!("… and {} more problem(s)", e.more)));
    }

    #[test]
    fn extras_rows_must_fit_their_columns() {
        use crate::Table;
        let table = |columns: usize, cells: usize| Table {
            title: "Ablation".into(),
            columns: (0..columns).map(|i| format!("c{i}")).collect(),
            rows: vec![
                vec!["x".into(); cells.min(columns)],
                vec!["y".into(); cells],
            ],
            note: None,
        };
        let ok = ReportExtras {
            tables: vec![table(3, 3), table(3, 1)],
            ..ReportExtras::default()
        };
        assert_eq!(check_extras(&ok), Ok(()));
        let bad = ReportExtras {
            tables: vec![table(3, 3), table(2, 4), table(0, 1)],
            ..ReportExtras::default()
        };
        let e = check_extras(&bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tables[1] \"Ablation\": rows[1] has 4 cells, expected at most 2 (one per column)\n\
             tables[2] \"Ablation\": has rows but no columns, expected at least one column"
        );
    }
}

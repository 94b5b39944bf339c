//! Writing a [`Recording`]: `summary.json` (versioned schema) and a tidy
//! `timeseries.csv`, each written to a temporary file and renamed into place
//! so a reader never sees half a file.
//!
//! The schema is documented in `docs/outputs.md`.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use stormbreak_policy::time::to_secs_f64;

use crate::record::{Cause, Recording};

/// Version tag of `summary.json`; bumped on any incompatible change.
pub const SUMMARY_SCHEMA: &str = "stormbreak.summary/1";

/// Headline figures of one route over the whole run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RouteTotals {
    /// Route name.
    pub name: String,
    /// Logical requests started.
    pub first_attempts: u64,
    /// Attempts that entered the route's first hop.
    pub attempts: u64,
    /// Successful attempts.
    pub successes: u64,
    /// Failed attempts (all causes).
    pub failed: u64,
    /// `attempts / first_attempts` (1.0 means no retries).
    pub amplification: f64,
    /// Highest per-interval error rate (failed / answered attempts).
    pub peak_error_rate: f64,
    /// Failures by cause.
    pub errors: std::collections::BTreeMap<&'static str, u64>,
    /// Behind a job queue (`workers`): the longest any job waited for a
    /// worker, seconds. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_job_wait_s: Option<f64>,
}

/// Whole-run totals per route.
pub fn route_totals(rec: &Recording) -> Vec<RouteTotals> {
    rec.routes
        .iter()
        .map(|r| {
            let sum = |v: &[u64]| v.iter().sum::<u64>();
            let first = sum(&r.first_attempts);
            let attempts = sum(&r.attempts);
            let mut errors = std::collections::BTreeMap::new();
            for c in Cause::ALL {
                errors.insert(c.name(), r.errors.iter().map(|e| e[c as usize]).sum());
            }
            let failed = errors.values().sum();
            let peak_error_rate = (0..r.attempts.len())
                .map(|i| {
                    let f = r.failed(i);
                    let answered = f + r.successes[i];
                    if answered == 0 {
                        0.0
                    } else {
                        f as f64 / answered as f64
                    }
                })
                .fold(0.0, f64::max);
            RouteTotals {
                name: r.name.clone(),
                first_attempts: first,
                attempts,
                successes: sum(&r.successes),
                failed,
                amplification: if first == 0 {
                    0.0
                } else {
                    attempts as f64 / first as f64
                },
                peak_error_rate,
                errors,
                longest_job_wait_s: (!r.job_wait_s.is_empty())
                    .then(|| r.job_wait_s.iter().copied().fold(0.0, f64::max)),
            }
        })
        .collect()
}

/// The `summary.json` document.
pub fn summary_json(rec: &Recording, extra: Option<Value>) -> Value {
    let mut doc = json!({
        "schema": SUMMARY_SCHEMA,
        "scenario": rec.scenario,
        "seed": rec.seed,
        "scale": rec.scale,
        "duration_s": to_secs_f64(rec.duration),
        "interval_s": to_secs_f64(rec.interval),
        "routes": route_totals(rec),
        "actions": rec.actions.iter().map(|a| json!({"at_s": to_secs_f64(a.at), "what": a.what})).collect::<Vec<_>>(),
        "engine": {
            "events": rec.events,
            "attempts": rec.attempts,
            "peak_in_flight": rec.peak_in_flight,
        },
    });
    if let Some(extra) = extra {
        doc["replay"] = extra;
    }
    doc
}

/// `timeseries.csv`: one row per interval × entity × metric
/// (`t_s,kind,entity,metric,value`), loadable straight into pandas/polars.
pub fn timeseries_csv(rec: &Recording) -> String {
    let mut out = String::from("t_s,kind,entity,metric,value\n");
    let dt = to_secs_f64(rec.interval);
    for i in 0..rec.intervals() {
        let t = dt * (i + 1) as f64;
        for r in &rec.routes {
            let mut row = |metric: &str, v: f64| {
                let _ = writeln!(out, "{t},route,{},{metric},{v}", csv_field(&r.name));
            };
            row("first_attempts", r.first_attempts[i] as f64);
            row("attempts", r.attempts[i] as f64);
            row("successes", r.successes[i] as f64);
            for c in Cause::ALL {
                row(
                    &format!("errors_{}", c.name()),
                    r.errors[i][c as usize] as f64,
                );
            }
            let [p50, p90, p99, max] = r.latency_ms[i];
            row("latency_p50_ms", p50);
            row("latency_p90_ms", p90);
            row("latency_p99_ms", p99);
            row("latency_max_ms", max);
        }
        for c in &rec.components {
            let mut row = |metric: &str, v: f64| {
                let _ = writeln!(out, "{t},{},{},{metric},{v}", c.kind, csv_field(&c.name));
            };
            row("arrivals", c.arrivals[i] as f64);
            row("rejected", c.rejected[i] as f64);
            row("in_flight", c.in_flight[i]);
            row("limit", c.limit[i]);
            row("queue", c.queue[i]);
            row("replicas", c.replicas[i]);
            row("app_utilisation", c.app_utilisation[i]);
        }
    }
    for a in &rec.actions {
        let _ = writeln!(
            out,
            "{},action,timeline,{},1",
            to_secs_f64(a.at),
            csv_field(&a.what)
        );
    }
    out
}

/// Reads back a `recording.json` written by [`write_outputs`].
pub fn read_recording(path: &Path) -> io::Result<Recording> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a stormbreak recording: {e}", path.display()),
        )
    })
}

/// A CSV field, quoted (RFC 4180) when it holds a comma, quote or newline.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Writes `contents` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    fs::write(&tmp, contents)?;
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// Writes `summary.json`, `timeseries.csv` and `recording.json` (the full
/// recording, which `stormbreak report DIR` re-renders from) into `dir`.
pub fn write_outputs(dir: &Path, rec: &Recording, extra: Option<Value>) -> io::Result<()> {
    let summary = serde_json::to_vec_pretty(&summary_json(rec, extra)).map_err(io::Error::other)?;
    write_atomic(&dir.join("summary.json"), &summary)?;
    let full = serde_json::to_vec(rec).map_err(io::Error::other)?;
    write_atomic(&dir.join("recording.json"), &full)?;
    write_atomic(&dir.join("timeseries.csv"), timeseries_csv(rec).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("web-nva"), "web-nva");
        assert_eq!(
            csv_field("pause 4 node(s), then"),
            "\"pause 4 node(s), then\""
        );
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}

//! `--expect FILE`: predicted against observed recovery, path by path.
//!
//! The prediction is a per-route table (`recovery.json`, written by
//! `simulate` and `lab`) or a replay's per-path table (its `summary.json`,
//! the last run under `replay.runs`): both are computed by
//! `stormbreak_sim::recovery`, the code that reads the probe's own
//! windows, so the two columns are the same figure. A path is matched to
//! the row named by its `predicted_as` (default: its own name).

use std::path::Path;

use serde::Serialize;
use stormbreak_sim::recovery::{PathRecovery, RECOVERY_SCHEMA, RecoveryTable};

use crate::config::ProbeConfig;
use crate::timeline::PathReport;

/// Largest prediction file read.
const MAX_EXPECT_BYTES: u64 = 64 << 20;

/// A prediction, read.
#[derive(Debug, Clone)]
pub struct Expected {
    /// What it is, for the table's heading.
    pub source: String,
    /// Its window, seconds.
    pub window_s: f64,
    /// Its rows.
    pub rows: Vec<PathRecovery>,
}

/// Reads a `recovery.json` or a replay's `summary.json`; the error names
/// the file and what was expected.
pub fn load(path: &Path) -> Result<Expected, String> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("--expect {name}: cannot read: {e}"))?;
    if meta.len() > MAX_EXPECT_BYTES {
        return Err(format!(
            "--expect {name}: larger than {} MiB",
            MAX_EXPECT_BYTES >> 20
        ));
    }
    let text = std::fs::read(path).map_err(|e| format!("--expect {name}: cannot read: {e}"))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("--expect {name}: not JSON: {e}"))?;
    let wrong = || {
        format!(
            "--expect {name}: expected a recovery.json ({RECOVERY_SCHEMA}, from `stormbreak simulate` or `lab`) \
             or a replay's summary.json (with `replay.runs[].paths`)"
        )
    };
    match doc.get("schema").and_then(|s| s.as_str()) {
        Some(RECOVERY_SCHEMA) => {
            let t: RecoveryTable =
                serde_json::from_value(doc).map_err(|e| format!("{}: {e}", wrong()))?;
            Ok(Expected {
                source: format!("{name} (per route, {} s windows)", t.window_s),
                window_s: t.window_s,
                rows: t.routes,
            })
        }
        Some("stormbreak.summary/1") => {
            let run = doc
                .pointer("/replay/runs")
                .and_then(|r| r.as_array())
                .and_then(|r| r.last())
                .ok_or_else(wrong)?;
            let rows: Vec<PathRecovery> = serde_json::from_value(run["paths"].clone())
                .map_err(|e| format!("{}: {e}", wrong()))?;
            let label = run["label"].as_str().unwrap_or("replay");
            Ok(Expected {
                source: format!("{name} (replay {label:?}, per path, 300 s windows)"),
                window_s: stormbreak_sim::replay::HEADLINE_WINDOW.as_secs_f64(),
                rows,
            })
        }
        _ => Err(wrong()),
    }
}

/// One path's prediction beside its observation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Versus {
    /// The probe's path.
    pub path: String,
    /// The prediction's row it was matched to (`None`: no row of that name).
    pub predicted_as: Option<String>,
    /// Predicted degraded at, seconds.
    pub predicted_degraded_at_s: Option<f64>,
    /// Observed degraded at, seconds, shifted by the offset.
    pub observed_degraded_at_s: Option<f64>,
    /// Predicted recovered at.
    pub predicted_recovered_at_s: Option<f64>,
    /// Observed recovered at, shifted by the offset.
    pub observed_recovered_at_s: Option<f64>,
    /// Observed minus predicted recovery, seconds, when both recovered.
    pub recovered_late_by_s: Option<f64>,
}

/// Matches every path of `config` to `expected`; observed times are moved
/// by `offset_s` (the probe's start in the prediction's clock).
pub fn versus(
    config: &ProbeConfig,
    expected: &Expected,
    observed: &[PathReport],
    offset_s: f64,
) -> Vec<Versus> {
    config
        .paths
        .iter()
        .zip(observed)
        .map(|(p, o)| {
            let key = p.predicted_as.as_deref().unwrap_or(&p.name);
            let row = expected.rows.iter().find(|r| r.path == key);
            let shift = |v: Option<f64>| v.map(|s| s + offset_s);
            let (pd, pr) = row.map_or((None, None), |r| (r.degraded_at_s, r.recovered_at_s));
            let (od, or) = (shift(o.degraded_at_s), shift(o.recovered_at_s));
            Versus {
                path: p.name.clone(),
                predicted_as: row.map(|r| r.path.clone()),
                predicted_degraded_at_s: pd,
                observed_degraded_at_s: od,
                predicted_recovered_at_s: pr,
                observed_recovered_at_s: or,
                recovered_late_by_s: pr.zip(or).map(|(p, o)| o - p),
            }
        })
        .collect()
}

/// The table `--expect` prints.
pub fn table(expected: &Expected, rows: &[Versus], probe_window_s: &[f64]) -> String {
    let t = |v: Option<f64>| {
        v.map_or_else(
            || "-".to_owned(),
            |s| format!("{} s", crate::output::seconds(s)),
        )
    };
    let mut out = format!("predicted by {}:\n", expected.source);
    let mut grid = vec![
        [
            "path",
            "predicted as",
            "degraded: predicted",
            "observed",
            "recovered: predicted",
            "observed",
            "late by",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for v in rows {
        grid.push(vec![
            v.path.clone(),
            v.predicted_as
                .clone()
                .unwrap_or_else(|| "(no such row)".to_owned()),
            t(v.predicted_degraded_at_s),
            t(v.observed_degraded_at_s),
            t(v.predicted_recovered_at_s),
            t(v.observed_recovered_at_s),
            v.recovered_late_by_s
                .map_or_else(|| "-".to_owned(), |d| format!("{:+.1} s", d)),
        ]);
    }
    out.push_str(&crate::output::columns(&grid));
    if probe_window_s
        .iter()
        .any(|w| (w - expected.window_s).abs() > 1e-9)
    {
        out.push_str(&format!(
            "note: the prediction's windows are {} s, the probe's are not all that long: \
             the times compare only as far as the windows agree\n",
            crate::output::seconds(expected.window_s)
        ));
    }
    out
}

//! Self-contained HTML reports of stormbreak runs.
//!
//! [`render`] turns one or more [`Recording`]s into a single HTML page that
//! needs nothing but a browser: inline CSS, hand-written SVG charts, a few
//! lines of inline script for legend highlighting, no network access (a
//! Content-Security-Policy forbids it). The page shows the storm over time —
//! offered load against goodput, error rate and amplification per route,
//! latency, saturation per component, replicas — with the timeline's actions
//! as numbered vertical markers, then tables. With several runs (a replay and
//! its fixes, later sim and lab) every chart overlays them on the same axes:
//! colour names the route or component, the line style names the run.
//!
//! ```
//! use stormbreak_report::{ReportExtras, Table, render};
//! # let rec: stormbreak_sim::Recording = serde_json::from_str(r#"{"scenario":"s","seed":1,"scale":1.0,
//! #   "interval":1000000000,"duration":2000000000,"clock_origin_s":0,"routes":[],"components":[],
//! #   "actions":[],"events":0,"attempts":0,"peak_in_flight":0}"#).unwrap();
//! let extras = ReportExtras {
//!     tables: vec![Table {
//!         title: "Assumptions".into(),
//!         columns: vec!["assumption".into(), "value".into()],
//!         rows: vec![vec!["sidecar limit".into(), "1024".into()]],
//!         note: None,
//!     }],
//!     ..ReportExtras::default()
//! };
//! let html = render(&[("as happened", &rec)], &extras);
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! assert!(html.contains("Assumptions"));
//! ```
//!
//! [`render`] trusts its recordings (the engine's own are consistent). A
//! saved run read back for re-rendering goes through [`load_recording`] and
//! [`read_extras`] instead, which refuse inconsistent files with errors
//! naming the file and the field ([`validate`]).
//!
//! The files a run directory holds, and this page, are described in
//! `docs/outputs.md`.

#![warn(missing_docs)]

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stormbreak_sim::Recording;
use stormbreak_sim::output::write_atomic;

mod charts;
mod page;
mod svg;
pub mod validate;

/// File name of the report inside a run directory.
pub const REPORT_FILE: &str = "report.html";

/// File name of the saved [`ReportExtras`] inside a run directory, read back
/// by `stormbreak report DIR` so a re-rendered report keeps its tables.
pub const EXTRAS_FILE: &str = "report-extras.json";

/// A route counts as degraded at the end of a headline window (the trailing
/// 5 minutes) when its error rate over it (failed / answered attempts) is
/// at least this; the headline table's "degraded" and "recovered at"
/// columns and the "Degraded at the end" card use it.
pub const DEGRADED_ERROR_RATE: f64 = 0.05;

/// A table of text cells shown in the report as given (cells are escaped).
///
/// Cells that look like numbers are right-aligned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// Heading above the table.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of cells; a row shorter than `columns` is padded with blanks.
    pub rows: Vec<Vec<String>>,
    /// Optional sentence shown under the table (source, caveat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a report shows besides the recordings' own charts and tables:
/// headline rows, per-path recovery, ablation, the scenario's stated
/// assumptions — any number of generic [`Table`]s, shown in order after the
/// built-in headline table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportExtras {
    /// Page title; defaults to the first run's scenario name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A paragraph under the title (e.g. the scenario's description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Extra tables.
    #[serde(default)]
    pub tables: Vec<Table>,
}

/// Renders the report of `runs` — `(label, recording)` pairs, overlaid on
/// the same axes when there are several — as one self-contained HTML page.
///
/// The time axis is labelled with the first run's clock
/// (`clock_origin_s` + t); other runs are aligned on their start. The
/// output depends only on the inputs (no timestamps), so it can be diffed.
pub fn render(runs: &[(&str, &Recording)], extras: &ReportExtras) -> String {
    page::render(runs, extras)
}

/// Writes `html` to `dir/report.html` atomically (a temporary file in the
/// same directory, then a rename), creating `dir` if needed.
pub fn write_report(dir: &Path, html: &str) -> io::Result<()> {
    write_report_file(&dir.join(REPORT_FILE), html)
}

/// Writes `html` to `path` atomically, creating its directory if needed.
pub fn write_report_file(path: &Path, html: &str) -> io::Result<()> {
    write_atomic(path, html.as_bytes())
}

/// Saves `extras` as `dir/report-extras.json`, so that `stormbreak report
/// DIR` re-renders the same tables later.
pub fn write_extras(dir: &Path, extras: &ReportExtras) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(extras).map_err(io::Error::other)?;
    write_atomic(&dir.join(EXTRAS_FILE), &json)
}

/// Why a saved file cannot be re-rendered; the message names the file.
#[derive(Debug)]
pub enum FileError {
    /// There is no such file.
    Missing(PathBuf),
    /// The file cannot be read, or is not JSON of the expected shape.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What went wrong (for JSON: the line and column).
        reason: String,
    },
    /// The file is well-formed but inconsistent.
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, field by field.
        invalid: validate::Invalid,
    },
}

impl FileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Missing(path)
            | FileError::Unreadable { path, .. }
            | FileError::Invalid { path, .. } => path,
        }
    }

    fn unreadable(path: &Path, e: &io::Error) -> FileError {
        // The simulator's reader already names the file in its message.
        let text = e.to_string();
        let prefix = format!("{}: ", path.display());
        let reason = match text.strip_prefix(&prefix) {
            Some(rest) => rest.to_owned(),
            None if e.kind() == io::ErrorKind::InvalidData => text,
            None => format!("cannot read: {text}"),
        };
        FileError::Unreadable {
            path: path.to_path_buf(),
            reason,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Missing(path) => write!(f, "{}: no such file", path.display()),
            FileError::Unreadable { path, reason } => write!(f, "{}: {reason}", path.display()),
            FileError::Invalid { path, invalid } => {
                f.write_str(&invalid.lines(&path.display().to_string()))
            }
        }
    }
}

impl std::error::Error for FileError {}

/// Reads a saved `recording.json` and checks that it is consistent
/// ([`validate::check_recording`]) before it is rendered: a hand-edited or
/// truncated file gives an error naming the field, never a wrong page.
pub fn load_recording(path: &Path) -> Result<Recording, FileError> {
    let rec = stormbreak_sim::output::read_recording(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => FileError::Missing(path.to_path_buf()),
        _ => FileError::unreadable(path, &e),
    })?;
    validate::check_recording(&rec).map_err(|invalid| FileError::Invalid {
        path: path.to_path_buf(),
        invalid,
    })?;
    Ok(rec)
}

/// Reads `dir/report-extras.json`; `Ok(None)` when the run saved none.
/// Unknown fields are errors (a misspelt `"note"` would otherwise vanish),
/// and so are rows with more cells than columns.
pub fn read_extras(dir: &Path) -> Result<Option<ReportExtras>, FileError> {
    let path = dir.join(EXTRAS_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::unreadable(&path, &e)),
    };
    let extras: ReportExtras =
        serde_json::from_slice(&bytes).map_err(|e| FileError::Unreadable {
            path: path.clone(),
            reason: format!("not a report extras file: {e}"),
        })?;
    validate::check_extras(&extras).map_err(|invalid| FileError::Invalid {
        path: path.clone(),
        invalid,
    })?;
    Ok(Some(extras))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_report_is_atomic_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("stormbreak-report-w-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        write_report(&dir, "<p>one</p>").unwrap();
        write_report(&dir, "<p>two</p>").unwrap();
        assert_eq!(
            fs::read_to_string(dir.join(REPORT_FILE)).unwrap(),
            "<p>two</p>"
        );
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![REPORT_FILE.to_owned()]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn extras_round_trip_and_absent_is_none() {
        let dir = std::env::temp_dir().join(format!("stormbreak-report-x-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_extras(&dir).unwrap(), None);
        let extras = ReportExtras {
            title: Some("t".into()),
            description: None,
            tables: vec![Table {
                title: "Ablation".into(),
                columns: vec!["fix".into(), "peak error".into()],
                rows: vec![vec!["budgets".into(), "3%".into()]],
                note: Some("n".into()),
            }],
        };
        write_extras(&dir, &extras).unwrap();
        assert_eq!(read_extras(&dir).unwrap(), Some(extras));
        fs::write(dir.join(EXTRAS_FILE), "nope").unwrap();
        let err = read_extras(&dir).unwrap_err();
        assert!(matches!(err, FileError::Unreadable { .. }), "{err:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}

//! Writing a [`Recording`]: `summary.json` (versioned schema), a tidy
//! `timeseries.csv` and the full `recording.json`, as one [`OutputSet`]
//! that replaces an output directory whole (see [`OutDir`]).
//!
//! The schema and the way a set is written are documented in
//! `docs/outputs.md`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;
use serde_json::{Value, json};

use crate::engine::Stopped;
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
    summary_json_of(rec, extra, None)
}

/// The `summary.json` document of a run that `stopped` at a limit, or
/// ended (`None`, the same document as [`summary_json`]).
pub fn summary_json_of(rec: &Recording, extra: Option<Value>, stopped: Option<&Stopped>) -> Value {
    let mut doc = json!({
        "schema": SUMMARY_SCHEMA,
        "scenario": rec.scenario,
        "seed": rec.seed,
        "scale": rec.scale,
        "duration_s": rec.duration.as_secs_f64(),
        "interval_s": rec.interval.as_secs_f64(),
        "routes": route_totals(rec),
        "actions": rec.actions.iter().map(|a| json!({"at_s": a.at.as_secs_f64(), "what": a.what})).collect::<Vec<_>>(),
        "engine": {
            "events": rec.events,
            "attempts": rec.attempts,
            "peak_in_flight": rec.peak_in_flight,
            "peak_events_per_s": rec.peak_events_per_s,
            "peak_job_backlog": rec.peak_job_backlog,
            "bounds_hit": rec.bounds_hit.iter().map(|h| json!({
                "bound": h.bound,
                "component": h.component,
                "count": h.count,
                "first_at_s": h.first_at.as_secs_f64(),
            })).collect::<Vec<_>>(),
        },
    });
    if let Some(s) = stopped {
        // Only in a stopped run's summary, so an ended run's is unchanged.
        doc["stopped"] = json!({
            "limit": s.limit,
            "at_s": s.at.as_secs_f64(),
            "message": s.message,
        });
    }
    if let Some(extra) = extra {
        doc["replay"] = extra;
    }
    doc
}

/// `recording.json`: the whole recording, as every command writes it (a
/// sweep's `--keep-series` too, so its files equal `simulate`'s).
pub fn recording_json(rec: &Recording) -> io::Result<Vec<u8>> {
    serde_json::to_vec(rec).map_err(io::Error::other)
}

/// `timeseries.csv`: one row per interval × entity × metric
/// (`t_s,kind,entity,metric,value`), loadable straight into pandas/polars.
pub fn timeseries_csv(rec: &Recording) -> String {
    let mut out = String::from("t_s,kind,entity,metric,value\n");
    let dt = rec.interval.as_secs_f64();
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
            a.at.as_secs_f64(),
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
pub fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Writes `contents` to `path` atomically (a temporary file in the same
/// directory, then a rename); the temporary file is removed on any error.
///
/// For a lone file; a run's outputs go through [`OutDir`] instead, so they
/// are replaced together.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = fs::write(&tmp, contents).and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `summary.json`, `timeseries.csv` and `recording.json` (the full
/// recording, which `stormbreak report DIR` re-renders from) into `dir` as
/// one set, replacing a previous set there whole (see [`OutDir`]).
pub fn write_outputs(dir: &Path, rec: &Recording, extra: Option<Value>) -> io::Result<()> {
    let set = OutputSet::of_recording(rec, extra)?;
    OutDir::prepare(dir)
        .and_then(|out| out.write(&set))
        .map_err(io::Error::from)
}

/// Name of the marker file in every output set. Its first line is a format
/// tag, then the set's file names follow, one a line. A directory without
/// it is never replaced (unless empty), so `--out .` cannot wipe a user's
/// files.
pub const MARKER: &str = ".stormbreak-out";

/// First line of [`MARKER`].
const MARKER_HEADER: &str = "stormbreak output set 1";

/// Tags in the names of the directories made beside an output directory
/// `D`: `.D.stormbreak-new-PID-N` stages a new set, `.D.stormbreak-old-PID-N`
/// holds the previous set during a swap.
const STAGING_TAG: &str = "stormbreak-new";
const ASIDE_TAG: &str = "stormbreak-old";

/// Scenario directory names longer than this are cut, so the staging
/// directory's longer name stays under the usual 255-byte limit.
const MAX_DIR_NAME: usize = 100;

/// The files of one output set, held in memory until [`OutDir::write`]
/// writes them together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputSet {
    files: Vec<(String, Vec<u8>)>,
}

impl OutputSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The files every run writes: `summary.json` (with `extra` under
    /// `replay`), `recording.json` and `timeseries.csv`.
    pub fn of_recording(rec: &Recording, extra: Option<Value>) -> io::Result<Self> {
        Self::of_run(rec, extra, None)
    }

    /// [`OutputSet::of_recording`] of a run that `stopped` at a limit (its
    /// `summary.json` then says so), or ended (`None`).
    pub fn of_run(
        rec: &Recording,
        extra: Option<Value>,
        stopped: Option<&Stopped>,
    ) -> io::Result<Self> {
        let summary = serde_json::to_vec_pretty(&summary_json_of(rec, extra, stopped))
            .map_err(io::Error::other)?;
        let full = recording_json(rec)?;
        let mut set = Self::new();
        set.add("summary.json", summary)
            .add("recording.json", full)
            .add("timeseries.csv", timeseries_csv(rec));
        Ok(set)
    }

    /// Adds the file `name`, replacing one of that name.
    ///
    /// # Panics
    ///
    /// When `name` is not one plain file name (no separator, not `.` or
    /// `..`, no newline) or is [`MARKER`]: names are the program's own
    /// constants, never user input.
    pub fn add(&mut self, name: &str, bytes: impl Into<Vec<u8>>) -> &mut Self {
        assert!(
            is_plain_name(name) && name != MARKER,
            "output file name {name:?} must be one plain path component"
        );
        let bytes = bytes.into();
        match self.files.iter_mut().find(|(n, _)| n == name) {
            Some(file) => file.1 = bytes,
            None => self.files.push((name.to_owned(), bytes)),
        }
        self
    }

    /// File names, in the order they are written.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|(n, _)| n.as_str())
    }

    /// The contents of `name`, when the set has it.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_slice())
    }

    fn marker(&self) -> Vec<u8> {
        let mut m = format!("{MARKER_HEADER}\n");
        for name in self.names() {
            m.push_str(name);
            m.push('\n');
        }
        m.into_bytes()
    }
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0', '\n'])
}

/// The default output directory's name for a scenario called `name`: one
/// path component that cannot climb out of the output root. ASCII letters,
/// digits, `_`, `-` and `.` are kept, anything else becomes `-`; leading
/// `-` and `.` are dropped (no hidden directory, never `.` or `..`), and
/// the result is cut at 100 characters, so `../../x y` becomes `x-y`.
/// `None` when the name has no ASCII letter or digit (`""`, `"."`, `".."`,
/// `"/"`), which would name no directory a person could tell apart.
pub fn scenario_dir_name(name: &str) -> Option<String> {
    if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let mapped: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' => c,
            _ => '-',
        })
        .collect();
    Some(
        mapped
            .trim_start_matches(['-', '.'])
            .chars()
            .take(MAX_DIR_NAME)
            .collect(),
    )
}

/// Why an output set was not written. Every variant names the path; in
/// every case the output directory holds what it held before, unless said
/// otherwise.
#[derive(Debug)]
#[non_exhaustive]
pub enum OutputError {
    /// The path is not one Stormbreak may replace: not a directory, or a
    /// directory with files Stormbreak did not write.
    Refused {
        /// The path given.
        path: PathBuf,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A filesystem operation failed.
    Io {
        /// The file or directory it failed on.
        path: PathBuf,
        /// What was being done, as in "cannot {doing}".
        doing: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// [`abandon_pending`] was called (a termination signal): the new set
    /// was dropped and its temporary directory removed.
    Interrupted {
        /// The output directory.
        path: PathBuf,
    },
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused { path, reason } => write!(f, "{}: {reason}", path.display()),
            Self::Io {
                path,
                doing,
                source,
            } => write!(f, "{}: cannot {doing}: {source}", path.display()),
            Self::Interrupted { path } => write!(
                f,
                "{}: interrupted before the new outputs were in place; it is left as it was",
                path.display()
            ),
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<OutputError> for io::Error {
    fn from(e: OutputError) -> Self {
        let kind = match &e {
            OutputError::Refused { .. } => io::ErrorKind::AlreadyExists,
            OutputError::Io { source, .. } => source.kind(),
            OutputError::Interrupted { .. } => io::ErrorKind::Interrupted,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// How the files of a set reach the disk; [`FsWriter`] in production, a
/// failing one in tests (a full disk after N bytes).
pub trait FileWriter {
    /// Creates the new file `path` holding `bytes`, synced to disk before
    /// returning.
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()>;

    /// Called once the whole set is staged (written and synced) in
    /// `staging`, just before it is swapped into place.
    fn before_swap(&mut self, staging: &Path) {
        let _ = staging;
    }
}

/// Writes files to the filesystem and syncs each one.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsWriter;

impl FileWriter for FsWriter {
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    }
}

/// Temporary directories beside output directories that exist only while
/// this process writes a set, so a signal handler can remove them.
struct Pending {
    dirs: Vec<PathBuf>,
    abandoned: bool,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    dirs: Vec::new(),
    abandoned: false,
});

/// Distinguishes the temporary directories of one process.
static SEQ: AtomicU32 = AtomicU32::new(0);

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    // A panic elsewhere must not stop a signal handler from cleaning up.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary directory this process made for a set not yet
/// in place (or for a previous set being removed), and makes every later
/// write fail with [`OutputError::Interrupted`]. Returns the directories
/// removed.
///
/// Meant for a termination-signal handler that exits afterwards. It waits
/// while a swap's two renames are under way, so the output directory is
/// never left missing.
pub fn abandon_pending() -> Vec<PathBuf> {
    let mut p = pending();
    p.abandoned = true;
    let dirs = std::mem::take(&mut p.dirs);
    for d in &dirs {
        let _ = remove_tree(d);
    }
    dirs
}

/// An output directory, checked before a run so a long simulation does not
/// end in an error it could have had up front.
///
/// [`OutDir::write`] stages the whole set in a fresh directory beside it
/// (`.NAME.stormbreak-new-PID-N`, same parent, so renames stay on one
/// filesystem), syncs it, then swaps it in: the previous set is renamed
/// aside (`.NAME.stormbreak-old-PID-N`), the new one renamed into place,
/// the old one removed. Between the two renames the directory is missing;
/// a run killed there is repaired by the next [`OutDir::prepare`], which
/// renames the previous set back, and which also removes any other
/// leftover it recognises by name and marker.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    parent: PathBuf,
    name: OsString,
    notes: Vec<String>,
}

impl OutDir {
    /// Resolves `path` (symlinks, `.` and `..`), creates its parent,
    /// repairs or removes leftovers of interrupted runs, refuses a path
    /// that is not a directory Stormbreak wrote (an empty directory is
    /// fine), and checks that a directory can be made beside it.
    pub fn prepare(path: &Path) -> Result<Self, OutputError> {
        let (parent, name) = resolve(path)?;
        let full = parent.join(&name);
        let mut out = OutDir {
            path: full,
            parent,
            name,
            notes: Vec::new(),
        };
        out.recover_stale()?;
        check_replaceable(&out.path)?;
        out.probe()?;
        Ok(out)
    }

    /// The resolved output directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What [`OutDir::prepare`] repaired or removed, one sentence each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Replaces the directory's contents with `set`, whole; on any error
    /// it holds the previous set and no temporary directory remains.
    pub fn write(&self, set: &OutputSet) -> Result<(), OutputError> {
        self.write_with(set, &mut FsWriter)
    }

    /// [`OutDir::write`] through `writer`.
    pub fn write_with(
        &self,
        set: &OutputSet,
        writer: &mut dyn FileWriter,
    ) -> Result<(), OutputError> {
        let staging = self.make_temp(STAGING_TAG)?;
        let staged = self.stage(&staging, set, writer).and_then(|()| {
            writer.before_swap(&staging);
            // The run may have taken minutes: someone may have put files
            // there since `prepare`.
            check_replaceable(&self.path)
        });
        match staged.and_then(|()| self.swap(&staging)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.discard(&staging);
                Err(e)
            }
        }
    }

    fn stage(
        &self,
        dir: &Path,
        set: &OutputSet,
        writer: &mut dyn FileWriter,
    ) -> Result<(), OutputError> {
        // The marker goes first, so the leftover of a killed run is
        // recognisable as Stormbreak's at once.
        let marker = set.marker();
        let files = std::iter::once((MARKER, marker.as_slice()))
            .chain(set.files.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
        for (name, bytes) in files {
            if pending().abandoned {
                return Err(self.interrupted());
            }
            writer
                .write_file(&dir.join(name), bytes)
                .map_err(|source| OutputError::Io {
                    path: self.path.join(name),
                    doing: "write it (the previous outputs are left as they were)",
                    source,
                })?;
        }
        sync_dir(dir).map_err(|source| OutputError::Io {
            path: self.path.clone(),
            doing: "sync the new outputs (the previous ones are left as they were)",
            source,
        })
    }

    fn swap(&self, staging: &Path) -> Result<(), OutputError> {
        // Held across both renames so a signal handler waits for them.
        let mut p = pending();
        if p.abandoned {
            return Err(self.interrupted());
        }
        let aside = match fs::symlink_metadata(&self.path) {
            Ok(_) => {
                let aside = self.parent.join(self.temp_name(ASIDE_TAG));
                fs::rename(&self.path, &aside).map_err(|source| OutputError::Io {
                    path: self.path.clone(),
                    doing: "move the previous outputs aside",
                    source,
                })?;
                p.dirs.push(aside.clone());
                Some(aside)
            }
            Err(_) => None,
        };
        if let Err(source) = fs::rename(staging, &self.path) {
            if let Some(a) = &aside
                && fs::rename(a, &self.path).is_ok()
            {
                p.dirs.retain(|d| d != a);
            }
            return Err(OutputError::Io {
                path: self.path.clone(),
                doing: "move the new outputs into place",
                source,
            });
        }
        p.dirs.retain(|d| d != staging);
        drop(p);
        let synced = sync_dir(&self.parent);
        if let Some(a) = aside {
            remove_tree(&a).map_err(|source| OutputError::Io {
                path: a.clone(),
                doing: "remove the previous outputs (the new ones are in place; the next run \
                        removes these)",
                source,
            })?;
            pending().dirs.retain(|d| *d != a);
        }
        synced.map_err(|source| OutputError::Io {
            path: self.parent.clone(),
            doing: "sync the directory after moving the new outputs in",
            source,
        })
    }

    fn interrupted(&self) -> OutputError {
        OutputError::Interrupted {
            path: self.path.clone(),
        }
    }

    fn temp_name(&self, tag: &str) -> String {
        format!(
            ".{}.{tag}-{}-{}",
            self.name.to_string_lossy(),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Makes and registers a temporary directory beside the output one.
    fn make_temp(&self, tag: &str) -> Result<PathBuf, OutputError> {
        let path = self.parent.join(self.temp_name(tag));
        // Made under the lock, so a signal cannot land between making and
        // registering it.
        let mut p = pending();
        if p.abandoned {
            return Err(self.interrupted());
        }
        fs::create_dir(&path).map_err(|source| OutputError::Io {
            path: self.parent.clone(),
            doing: "create a directory in it",
            source,
        })?;
        p.dirs.push(path.clone());
        Ok(path)
    }

    /// Removes a temporary directory, then forgets it (in that order, so a
    /// signal in between still finds it).
    fn discard(&self, dir: &Path) {
        let _ = remove_tree(dir);
        pending().dirs.retain(|d| d != dir);
    }

    /// Makes and removes a staging directory with a file in it: fails now,
    /// before the run, where the real write would fail later.
    fn probe(&self) -> Result<(), OutputError> {
        let dir = self.make_temp(STAGING_TAG)?;
        let written = FsWriter
            .write_file(&dir.join(MARKER), b"probe\n")
            .map_err(|source| OutputError::Io {
                path: self.parent.clone(),
                doing: "write a file in it",
                source,
            });
        self.discard(&dir);
        written
    }

    /// Leftovers of killed runs beside the output directory: a previous
    /// set whose replacement was cut between its two renames is put back;
    /// other leftovers are removed.
    fn recover_stale(&mut self) -> Result<(), OutputError> {
        let entries = fs::read_dir(&self.parent).map_err(|source| OutputError::Io {
            path: self.parent.clone(),
            doing: "list the directory",
            source,
        })?;
        let mut stale: Vec<(bool, PathBuf)> = Vec::new();
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some((is_aside, pid)) = parse_temp_name(&file_name, &self.name) else {
                continue;
            };
            let path = entry.path();
            let own = pid == std::process::id();
            if (own && pending().dirs.contains(&path)) || (!own && pid_alive(pid)) {
                continue;
            }
            if is_ours_temp(&path) {
                stale.push((is_aside, path));
            }
        }
        stale.sort();
        if fs::symlink_metadata(&self.path).is_err()
            && let Some(i) = stale.iter().position(|(aside, _)| *aside)
        {
            let (_, old) = stale.remove(i);
            fs::rename(&old, &self.path).map_err(|source| OutputError::Io {
                path: old.clone(),
                doing: "restore the previous outputs left by an interrupted run",
                source,
            })?;
            self.notes.push(format!(
                "restored {} from {}, left by an interrupted run",
                self.path.display(),
                old.display()
            ));
        }
        for (_, dir) in stale {
            remove_tree(&dir).map_err(|source| OutputError::Io {
                path: dir.clone(),
                doing: "remove this leftover of an interrupted run",
                source,
            })?;
            self.notes.push(format!(
                "removed {}, left by an interrupted run",
                dir.display()
            ));
        }
        Ok(())
    }
}

/// The real parent directory (created if need be) and name of `path`.
fn resolve(path: &Path) -> Result<(PathBuf, OsString), OutputError> {
    let refuse = |reason: &str| OutputError::Refused {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let io_error = |doing, source| OutputError::Io {
        path: path.to_path_buf(),
        doing,
        source,
    };
    if path.as_os_str().is_empty() {
        return Err(refuse("is empty; give a directory"));
    }
    // Judged as the real directory it names: `--out .` is the current
    // directory, and the swap renames the real one, not a link to it.
    let full = match fs::symlink_metadata(path) {
        Ok(_) => fs::canonicalize(path).map_err(|e| io_error("resolve the path", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let abs = std::path::absolute(path).map_err(|e| io_error("resolve the path", e))?;
            let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
                return Err(refuse("names no directory of its own (it ends in `..`)"));
            };
            fs::create_dir_all(parent).map_err(|source| OutputError::Io {
                path: parent.to_path_buf(),
                doing: "create the directory",
                source,
            })?;
            fs::canonicalize(parent)
                .map_err(|e| io_error("resolve the path", e))?
                .join(name)
        }
        Err(e) => return Err(io_error("use it as an output directory", e)),
    };
    match (full.parent(), full.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_owned())),
        _ => Err(refuse(
            "is a filesystem root: a new set needs a directory beside it to be staged in",
        )),
    }
}

/// Whether `dir` may be replaced: absent, empty, or holding Stormbreak's
/// marker and only files its set lists.
fn check_replaceable(dir: &Path) -> Result<(), OutputError> {
    let refuse = |reason: String| OutputError::Refused {
        path: dir.to_path_buf(),
        reason,
    };
    let io_error = |doing, source| OutputError::Io {
        path: dir.to_path_buf(),
        doing,
        source,
    };
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("inspect it", e)),
    };
    if !meta.is_dir() {
        return Err(refuse(
            "exists and is not a directory; Stormbreak writes its outputs only into a new or \
             empty directory, or one it wrote before"
                .into(),
        ));
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_error("list the directory", e))? {
        names.push(
            entry
                .map_err(|e| io_error("list the directory", e))?
                .file_name(),
        );
    }
    if names.is_empty() {
        return Ok(());
    }
    let Some(listed) = read_marker(dir).map_err(|e| io_error("read its marker", e))? else {
        return Err(refuse(format!(
            "is not empty and has no {MARKER} marker, so Stormbreak did not write it and will not \
             replace it; give --out a new or empty directory (an output of a Stormbreak older \
             than the marker must be removed by hand once)"
        )));
    };
    let mut foreign: Vec<String> = names
        .iter()
        .filter(|n| !is_listed(n, listed.as_deref()))
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let shown = foreign.len().min(5);
    let more = if foreign.len() > shown {
        format!(" and {} more", foreign.len() - shown)
    } else {
        String::new()
    };
    let them = if foreign.len() == 1 { "it" } else { "them" };
    Err(refuse(format!(
        "holds {}{more}, which Stormbreak did not write, so it will not replace the directory; \
         move {them} out or give --out another directory",
        foreign[..shown].join(", ")
    )))
}

/// The file names listed in `dir`'s marker: `Ok(None)` without a marker,
/// `Ok(Some(None))` for a marker of a format this build does not know
/// (then any file counts as Stormbreak's).
fn read_marker(dir: &Path) -> io::Result<Option<Option<Vec<String>>>> {
    let path = dir.join(MARKER);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let bytes = fs::read(&path)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if lines.next() != Some(MARKER_HEADER) {
        return Ok(Some(None));
    }
    Ok(Some(Some(
        lines.filter(|l| !l.is_empty()).map(str::to_owned).collect(),
    )))
}

/// Whether the entry `name` of a marked directory is Stormbreak's: the
/// marker, a listed file, or a listed file's leftover temporary copy
/// (`.NAME.PID.tmp`, from the single-file atomic writes that re-render
/// `report.html` in place).
fn is_listed(name: &std::ffi::OsStr, listed: Option<&[String]>) -> bool {
    let Some(listed) = listed else {
        return true;
    };
    let Some(name) = name.to_str() else {
        return false;
    };
    if name == MARKER || listed.iter().any(|l| l == name) {
        return true;
    }
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplit_once('.'))
        .is_some_and(|(file, pid)| {
            !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && listed.iter().any(|l| l == file)
        })
}

/// `(is_aside, pid)` when `file_name` is a temporary directory name made
/// for the output directory `name`.
fn parse_temp_name(file_name: &std::ffi::OsStr, name: &std::ffi::OsStr) -> Option<(bool, u32)> {
    let rest = file_name
        .to_str()?
        .strip_prefix(&format!(".{}.", name.to_string_lossy()))?;
    let (is_aside, rest) = if let Some(r) = rest.strip_prefix(&format!("{ASIDE_TAG}-")) {
        (true, r)
    } else {
        (false, rest.strip_prefix(&format!("{STAGING_TAG}-"))?)
    };
    let (pid, seq) = rest.split_once('-')?;
    seq.parse::<u32>().ok()?;
    Some((is_aside, pid.parse().ok()?))
}

/// A real directory (not a link) holding Stormbreak's marker, or empty (a
/// run killed between making it and writing the marker).
fn is_ours_temp(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && (fs::symlink_metadata(path.join(MARKER)).is_ok_and(|m| m.is_file())
            || fs::read_dir(path).is_ok_and(|mut d| d.next().is_none()))
}

/// Whether a process `pid` runs (Linux); elsewhere every leftover counts
/// as stale, and a concurrent run into the same directory may fail.
fn pid_alive(pid: u32) -> bool {
    cfg!(target_os = "linux") && Path::new("/proc").join(pid.to_string()).exists()
}

/// `remove_dir_all`, retried: a writer racing a signal handler may add a
/// file between its listing and its final `rmdir`.
fn remove_tree(dir: &Path) -> io::Result<()> {
    let mut tries = 0;
    loop {
        match fs::remove_dir_all(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if tries >= 3 => return Err(e),
            Err(_) => tries += 1,
        }
    }
}

/// Makes a directory's entries (created files, renames) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{csv_field, is_listed, parse_temp_name};
    use std::ffi::OsStr;

    #[test]
    fn temporary_directories_are_told_apart_by_name() {
        let parse = |f: &str| parse_temp_name(OsStr::new(f), OsStr::new("out"));
        assert_eq!(parse(".out.stormbreak-new-12-3"), Some((false, 12)));
        assert_eq!(parse(".out.stormbreak-old-12-0"), Some((true, 12)));
        // Another output directory's, or not one of ours at all.
        assert_eq!(parse(".out.b.stormbreak-new-12-3"), None);
        assert_eq!(parse(".out2.stormbreak-new-12-3"), None);
        assert_eq!(parse(".out.stormbreak-new-12"), None);
        assert_eq!(parse(".out.stormbreak-new-x-1"), None);
        assert_eq!(parse("out.stormbreak-new-12-3"), None);
    }

    #[test]
    fn a_listed_file_and_its_atomic_write_leftover_are_ours() {
        let listed = ["summary.json".to_owned(), "report.html".to_owned()];
        let ours = |n: &str| is_listed(OsStr::new(n), Some(&listed));
        assert!(ours("summary.json") && ours(".stormbreak-out"));
        assert!(ours(".report.html.4242.tmp"));
        assert!(!ours("notes.txt"));
        assert!(!ours(".notes.txt.4242.tmp"));
        assert!(!ours(".report.html..tmp"));
        assert!(!ours(".report.html.12a.tmp"));
        assert!(
            is_listed(OsStr::new("anything"), None),
            "unknown marker format"
        );
    }

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

//! Reading the inputs: files, directories (recursive) and stdin, each
//! bounded in size, then split into YAML documents or an HAProxy config.
//!
//! Bounds (all documented in docs/audit-rules.md, "Limits"):
//! - [`DEFAULT_MAX_FILE_BYTES`] per file (raised with `--max-file-size`);
//!   a larger file is reported as a finding after reading one byte past the
//!   cap, never loaded whole;
//! - [`MAX_FILES`] files and [`MAX_DIR_DEPTH`] directory levels; symbolic
//!   links to directories are not followed (no cycles);
//! - per YAML document, serde-saphyr's budgets ([`yaml::options`]).

pub mod haproxy;
pub mod yaml;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::finding::{Finding, Pos, Severity};

/// Default cap on one input file: 16 MiB (a `helm template` of a large
/// umbrella chart is a few MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Most files read from all paths together.
pub const MAX_FILES: usize = 100_000;
/// Deepest directory level walked below a path given on the command line.
pub const MAX_DIR_DEPTH: usize = 32;

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Kubernetes-style YAML or JSON (multi-document, `kind: List`).
    Yaml,
    /// An `haproxy.cfg`.
    Haproxy,
}

/// One input file's text.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name used in findings.
    pub name: Arc<str>,
    /// How to read it.
    pub format: Format,
    /// The bytes read (at most the cap).
    pub bytes: Vec<u8>,
}

/// A path that cannot be read at all (exit code 2).
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable(pub String);

/// Options of the input stage.
#[derive(Debug, Clone)]
pub struct InputOptions {
    /// Cap on one file's size in bytes.
    pub max_file_bytes: u64,
}

impl Default for InputOptions {
    fn default() -> Self {
        InputOptions {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// Everything read: the sources, and findings for files that were found
/// but could not be used (too large, over the file count).
#[derive(Debug, Default)]
pub struct Collected {
    /// Files to parse.
    pub sources: Vec<Source>,
    /// Input-stage findings (rule SB001).
    pub findings: Vec<Finding>,
}

/// Is this file name an HAProxy configuration (`haproxy.cfg`,
/// `haproxy-edge.cfg`, `edge.haproxy.cfg`)?
pub fn is_haproxy_name(name: &str) -> bool {
    name.ends_with(".cfg") && name.contains("haproxy")
}

fn format_of(path: &Path) -> Option<Format> {
    let name = path.file_name()?.to_str()?;
    if is_haproxy_name(name) {
        return Some(Format::Haproxy);
    }
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    matches!(ext.as_str(), "yaml" | "yml" | "json").then_some(Format::Yaml)
}

/// Reads every path: `-` is stdin (YAML), a directory is walked in sorted
/// order for `*.yaml`, `*.yml`, `*.json` and `haproxy*.cfg`; a file named
/// explicitly is read whatever its name (HAProxy if its name says so).
/// `haproxy` lists files to read as HAProxy configs whatever their names.
pub fn collect(
    paths: &[PathBuf],
    haproxy: &[PathBuf],
    opts: &InputOptions,
    stdin: &mut dyn Read,
) -> Result<Collected, Unreadable> {
    let mut out = Collected::default();
    for p in paths {
        if p.as_os_str() == "-" {
            let bytes = read_bounded(&mut *stdin, opts.max_file_bytes)
                .map_err(|e| Unreadable(format!("-: cannot read stdin: {e}")))?;
            push(&mut out, "-".into(), Format::Yaml, bytes, opts);
            continue;
        }
        let meta = fs::metadata(p)
            .map_err(|e| Unreadable(format!("{}: cannot read: {e}", p.display())))?;
        if meta.is_dir() {
            walk(p, 0, &mut out, opts)?;
        } else {
            let format = format_of(p).unwrap_or(Format::Yaml);
            read_file(p, format, &mut out, opts)?;
        }
    }
    for p in haproxy {
        read_file(p, Format::Haproxy, &mut out, opts)?;
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    depth: usize,
    out: &mut Collected,
    opts: &InputOptions,
) -> Result<(), Unreadable> {
    if depth > MAX_DIR_DEPTH {
        out.findings.push(input_finding(
            &dir.display().to_string(),
            format!(
                "directory nested deeper than {MAX_DIR_DEPTH} levels below the path given; not read"
            ),
        ));
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| Unreadable(format!("{}: cannot read directory: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if !hidden {
                walk(&path, depth + 1, out, opts)?;
            }
        } else if let Some(format) = format_of(&path) {
            if meta.file_type().is_symlink()
                && fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(true)
            {
                continue;
            }
            read_file(&path, format, out, opts)?;
        }
    }
    Ok(())
}

fn read_file(
    path: &Path,
    format: Format,
    out: &mut Collected,
    opts: &InputOptions,
) -> Result<(), Unreadable> {
    let name = path.display().to_string();
    let file = fs::File::open(path).map_err(|e| Unreadable(format!("{name}: cannot read: {e}")))?;
    let bytes = read_bounded(file, opts.max_file_bytes)
        .map_err(|e| Unreadable(format!("{name}: cannot read: {e}")))?;
    push(out, name, format, bytes, opts);
    Ok(())
}

fn push(out: &mut Collected, name: String, format: Format, bytes: Vec<u8>, opts: &InputOptions) {
    if out.sources.len() >= MAX_FILES {
        if out.sources.len() == MAX_FILES {
            out.findings.push(input_finding(
                &name,
                format!("more than {MAX_FILES} input files; this one and later ones were not read"),
            ));
        }
        return;
    }
    if bytes.len() as u64 > opts.max_file_bytes {
        out.findings.push(input_finding(
            &name,
            format!(
                "file is larger than the {} byte limit; not read (raise it with --max-file-size)",
                opts.max_file_bytes
            ),
        ));
        return;
    }
    out.sources.push(Source {
        name: name.into(),
        format,
        bytes,
    });
}

/// Reads at most `cap + 1` bytes, so an oversized input (or `/dev/zero`)
/// is recognised without being held whole.
pub fn read_bounded(r: impl Read, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    r.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// An SB001 finding about a whole file.
pub fn input_finding(file: &str, message: String) -> Finding {
    Finding {
        rule: crate::rules::PARSE_ERROR,
        severity: Severity::Error,
        pos: Pos {
            file: file.into(),
            line: 0,
        },
        object: "file".into(),
        message,
    }
}

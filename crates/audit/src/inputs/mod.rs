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

/// The section headers that open an HAProxy configuration (HAProxy 2.6–3.x
/// configuration manual, §3 "Global parameters" and §4 "Proxies").
const HAPROXY_HEADERS: [&str; 5] = ["global", "defaults", "frontend", "backend", "listen"];

/// Does this text read as an HAProxy configuration: is its first line that
/// is not blank, a `#` comment or a `.if`/`.diag`-style directive a
/// `global`, `defaults`, `frontend`, `backend` or `listen` header?
pub fn looks_like_haproxy(bytes: &[u8]) -> bool {
    // The header is near the top; a long comment block is still read.
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('.') {
            continue;
        }
        let word = t.split_whitespace().next().unwrap_or("");
        return HAPROXY_HEADERS.contains(&word);
    }
    false
}

/// How a file found in a directory walk is read: YAML by its extension,
/// a `.cfg` as HAProxy when its name says so or its text does
/// ([`Format::Haproxy`] then decided by [`looks_like_haproxy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walked {
    Read(Format),
    /// A `.cfg` whose first lines decide.
    Sniff,
}

fn walked_format(path: &Path) -> Option<Walked> {
    let name = path.file_name()?.to_str()?;
    if is_haproxy_name(name) {
        return Some(Walked::Read(Format::Haproxy));
    }
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "yaml" | "yml" | "json" => Some(Walked::Read(Format::Yaml)),
        "cfg" => Some(Walked::Sniff),
        _ => None,
    }
}

/// How a file named on the command line is read: a `.cfg` is HAProxy,
/// anything else YAML.
fn named_format(path: &Path) -> Format {
    let cfg = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("cfg"));
    if cfg { Format::Haproxy } else { Format::Yaml }
}

/// The files already read, by their canonical path, so that one file named
/// twice (`./a.yaml` and `a.yaml`, a symbolic link to it, a directory and a
/// file in it) is read once.
type Seen = std::collections::HashSet<PathBuf>;

/// Reads every path: `-` is stdin (YAML), a directory is walked in sorted
/// order for `*.yaml`, `*.yml`, `*.json`, `haproxy*.cfg` and any `.cfg`
/// whose first line is an HAProxy section header; a file named explicitly
/// is read whatever its name (HAProxy if it ends in `.cfg`). `haproxy`
/// lists files to read as HAProxy configs whatever their names. One file
/// reached twice is read once; in a walk, anything but a regular file (a
/// FIFO, socket or device) is skipped with a finding, never opened.
pub fn collect(
    paths: &[PathBuf],
    haproxy: &[PathBuf],
    opts: &InputOptions,
    stdin: &mut dyn Read,
) -> Result<Collected, Unreadable> {
    let mut out = Collected::default();
    let mut seen = Seen::new();
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
            walk(p, 0, &mut out, &mut seen, opts)?;
        } else if first_time(&mut seen, p, &meta) {
            read_file(p, named_format(p), &mut out, opts)?;
        }
    }
    for p in haproxy {
        let meta = fs::metadata(p)
            .map_err(|e| Unreadable(format!("{}: cannot read: {e}", p.display())))?;
        if first_time(&mut seen, p, &meta) {
            read_file(p, Format::Haproxy, &mut out, opts)?;
        }
    }
    Ok(out)
}

/// Records a regular file's canonical path; false when it was read before.
/// Only regular files are recorded: a pipe named twice (`<(cmd)`) is two
/// streams.
fn first_time(seen: &mut Seen, path: &Path, meta: &fs::Metadata) -> bool {
    if !meta.is_file() {
        return true;
    }
    match fs::canonicalize(path) {
        Ok(c) => seen.insert(c),
        Err(_) => true,
    }
}

/// What a directory entry that is not a regular file or a directory is,
/// for the finding that says it was skipped.
fn special_kind(ft: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        "a named pipe (FIFO)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

fn walk(
    dir: &Path,
    depth: usize,
    out: &mut Collected,
    seen: &mut Seen,
    opts: &InputOptions,
) -> Result<(), Unreadable> {
    if depth > MAX_DIR_DEPTH {
        out.findings.push(input_finding(
            &dir.display().to_string(),
            format!(
                "directory nested deeper than {MAX_DIR_DEPTH} levels below the path given; not read (name the deeper directory on the command line to read it)"
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
                walk(&path, depth + 1, out, seen, opts)?;
            }
            continue;
        }
        let Some(how) = walked_format(&path) else {
            continue;
        };
        let name = path.display().to_string();
        // What the entry is, through a symbolic link: links to directories
        // are not followed (no cycles); a dangling link is said.
        let target = if meta.file_type().is_symlink() {
            match fs::metadata(&path) {
                Ok(m) if m.is_dir() => continue,
                Ok(m) => m,
                Err(e) => {
                    let to = fs::read_link(&path)
                        .map(|t| format!(" to {}", t.display()))
                        .unwrap_or_default();
                    out.findings.push(input_warning(
                        &name,
                        format!(
                            "symbolic link{to} leads to nothing readable ({e}); not read (fix or remove the link)"
                        ),
                    ));
                    continue;
                }
            }
        } else {
            meta
        };
        if !target.is_file() {
            // Opening a FIFO blocks until a writer comes, a device may
            // never end: neither is opened.
            out.findings.push(input_warning(
                &name,
                format!(
                    "{} is {}, not a regular file; skipped (name it on the command line to read it as a stream)",
                    path.file_name().and_then(|n| n.to_str()).unwrap_or(""),
                    special_kind(&target.file_type())
                ),
            ));
            continue;
        }
        if !first_time(seen, &path, &target) {
            continue;
        }
        match how {
            Walked::Read(format) => read_file(&path, format, out, opts)?,
            Walked::Sniff => {
                let bytes = read_path(&path, opts)?;
                if looks_like_haproxy(&bytes) {
                    push(out, name, Format::Haproxy, bytes, opts);
                }
            }
        }
    }
    Ok(())
}

fn read_path(path: &Path, opts: &InputOptions) -> Result<Vec<u8>, Unreadable> {
    let name = path.display();
    let file = fs::File::open(path).map_err(|e| Unreadable(format!("{name}: cannot read: {e}")))?;
    read_bounded(file, opts.max_file_bytes)
        .map_err(|e| Unreadable(format!("{name}: cannot read: {e}")))
}

fn read_file(
    path: &Path,
    format: Format,
    out: &mut Collected,
    opts: &InputOptions,
) -> Result<(), Unreadable> {
    let bytes = read_path(path, opts)?;
    push(out, path.display().to_string(), format, bytes, opts);
    Ok(())
}

fn push(out: &mut Collected, name: String, format: Format, bytes: Vec<u8>, opts: &InputOptions) {
    if out.sources.len() >= MAX_FILES {
        if out.sources.len() == MAX_FILES {
            out.findings.push(input_finding(
                &name,
                format!("more than {MAX_FILES} input files; this one and later ones were not read (audit fewer files or directories at once)"),
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

/// An SB001 warning about a whole file that was skipped on purpose.
pub fn input_warning(file: &str, message: String) -> Finding {
    Finding {
        severity: Severity::Warning,
        ..input_finding(file, message)
    }
}

/// Counters of work done, for tests that bound how an audit's cost grows
/// with its inputs by a ratio of counted steps rather than by time. Per
/// thread: an audit's lookups run on the thread that calls
/// [`crate::audit`], and tests running side by side do not mix.
pub mod work {
    use std::cell::Cell;

    thread_local! {
        static LOOKUPS: Cell<u64> = const { Cell::new(0) };
    }

    /// Counts `n` steps of a lookup (a selector matched against a pod's
    /// labels, an entry of a table scanned).
    pub fn lookups(n: u64) {
        LOOKUPS.with(|c| c.set(c.get().saturating_add(n)));
    }

    /// The steps counted on this thread so far, and resets the count.
    pub fn take() -> u64 {
        LOOKUPS.with(|c| c.replace(0))
    }
}

//! Tidy checks on the repository itself, in the manner of rust-analyzer's
//! `tidy` tests: `ARCHITECTURE.md` names every source file under
//! `crates/*/src`, and names no file that does not exist.
//!
//! The rule, as the map's opening states it: a crate's section is headed
//! ``## `crates/NAME` ``; each of its source files is a table row of that
//! section whose first cell is the file's path relative to `src/` in
//! backticks (`| `scenario/validate.rs` | … |`). One file a row; no
//! folder stands for its files.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A source file: the folder of its crate under `crates/` and its path
/// under that crate's `src/`, with `/` between components.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SourceFile {
    krate: String,
    path: String,
}

impl SourceFile {
    fn new(krate: &str, path: &str) -> SourceFile {
        SourceFile {
            krate: krate.to_owned(),
            path: path.to_owned(),
        }
    }

    fn full(&self) -> String {
        format!("crates/{}/src/{}", self.krate, self.path)
    }
}

/// Every `.rs` file under `crates/*/src`, sorted.
fn source_files(crates: &Path) -> Vec<SourceFile> {
    fn walk(dir: &Path, prefix: &str, krate: &str, out: &mut Vec<SourceFile>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            if path.is_dir() {
                walk(&path, &format!("{rel}/"), krate, out);
            } else if name.ends_with(".rs") {
                out.push(SourceFile::new(krate, &rel));
            }
        }
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(crates).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if src.is_dir() {
            let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
            walk(&src, "", &krate, &mut out);
        }
    }
    out.sort();
    out
}

/// The files the map names: in each section headed ``## `crates/NAME` ``,
/// the table rows whose first cell is one backticked path ending in `.rs`.
/// Code blocks are skipped; any other `##` heading ends a crate's section.
fn map_rows(map: &str) -> Vec<SourceFile> {
    let mut rows = Vec::new();
    let mut krate: Option<String> = None;
    let mut in_code = false;
    for line in map.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if let Some(heading) = line.strip_prefix("## ") {
            krate = heading
                .strip_prefix("`crates/")
                .and_then(|rest| rest.split_once('`'))
                .map(|(name, _)| name.to_owned());
            continue;
        }
        let (Some(k), Some(rest)) = (&krate, line.strip_prefix('|')) else {
            continue;
        };
        let cell = rest.split('|').next().unwrap_or("").trim();
        if let Some(path) = cell
            .strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .filter(|p| !p.contains('`') && p.ends_with(".rs"))
        {
            rows.push(SourceFile::new(k, path));
        }
    }
    rows
}

/// What the map gets wrong against `files`: each file it does not name and
/// each row that names no file, one message each (empty when it is right).
fn check(map: &str, files: &[SourceFile]) -> Vec<String> {
    let rows: BTreeSet<SourceFile> = map_rows(map).into_iter().collect();
    let files: BTreeSet<&SourceFile> = files.iter().collect();
    let mut errors = Vec::new();
    for f in &files {
        if !rows.contains(*f) {
            errors.push(format!(
                "{} is not in ARCHITECTURE.md: add the row | `{}` | what it owns | to the table of ## `crates/{}`",
                f.full(),
                f.path,
                f.krate
            ));
        }
    }
    for r in &rows {
        if !files.contains(r) {
            errors.push(format!(
                "ARCHITECTURE.md, ## `crates/{}`: the row `{}` names no file ({} does not exist)",
                r.krate,
                r.path,
                r.full()
            ));
        }
    }
    errors
}

fn architecture() -> String {
    fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn architecture_md_names_every_source_file() {
    let files = source_files(&repo().join("crates"));
    // The walk itself must find the crates, or the check proves nothing.
    assert!(
        files.len() > 100 && files.contains(&SourceFile::new("sim", "scenario/validate.rs")),
        "found only {} source files",
        files.len()
    );
    let errors = check(&architecture(), &files);
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
}

#[test]
fn a_source_file_left_out_of_the_map_is_reported() {
    let mut files = source_files(&repo().join("crates"));
    files.push(SourceFile::new("sim", "engine/not_in_the_map.rs"));
    let errors = check(&architecture(), &files);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("crates/sim/src/engine/not_in_the_map.rs is not in ARCHITECTURE.md"),
        "{}",
        errors[0]
    );
}

#[test]
fn a_row_naming_no_file_is_reported() {
    let map = "## `crates/sim` (stormbreak-sim)\n\n| file | owns |\n|---|---|\n\
               | `lib.rs` | exports |\n| `gone.rs` | nothing any more |\n";
    let errors = check(map, &[SourceFile::new("sim", "lib.rs")]);
    assert_eq!(
        errors,
        [
            "ARCHITECTURE.md, ## `crates/sim`: the row `gone.rs` names no file (crates/sim/src/gone.rs does not exist)"
        ]
    );
}

#[test]
fn a_row_counts_only_in_its_own_crates_section_and_outside_code_blocks() {
    let map = "## `crates/policy` (stormbreak-policy)\n\n| `time.rs` | `Nanos` |\n\n\
               ```\n| `lib.rs` | in a code block |\n```\n\n\
               ## Tests\n\n| `lib.rs` | under another heading |\n\n\
               ## `crates/sim` (stormbreak-sim)\n\n| `lib.rs` | exports |\n";
    let files = [
        SourceFile::new("policy", "time.rs"),
        SourceFile::new("policy", "lib.rs"),
        SourceFile::new("sim", "lib.rs"),
    ];
    let errors = check(map, &files);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("crates/policy/src/lib.rs is not in"));
}

//! Every scenario in the repository, and every complete scenario shown in
//! its docs, parses with the policy crate's config types: moving the retry
//! and budget syntax into `stormbreak-policy` changed no file's meaning.

use std::fs;
use std::path::{Path, PathBuf};

use stormbreak_sim::Scenario;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files under `dir` (skipping build output and git) whose name ends in `ext`.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "node_modules")
                && !name.starts_with("target")
            {
                files(&path, ext, out);
            }
        } else if name.ends_with(ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_scenario_file_parses() {
    let mut found = Vec::new();
    files(&repo(), ".toml", &mut found);
    let scenarios: Vec<_> = found
        .into_iter()
        .filter(|p| fs::read_to_string(p).unwrap().contains("[scenario]"))
        .collect();
    assert!(scenarios.len() >= 5, "found only {scenarios:?}");
    for path in &scenarios {
        let text = fs::read_to_string(path).unwrap();
        if let Err(e) = Scenario::parse(&path.display().to_string(), &text) {
            panic!("{e}");
        }
    }
}

#[test]
fn every_whole_scenario_in_the_docs_parses() {
    let mut docs = Vec::new();
    files(&repo().join("docs"), ".md", &mut docs);
    files(&repo(), "README.md", &mut docs);
    let mut seen = 0;
    for path in docs {
        let text = fs::read_to_string(&path).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```toml\n") {
            let body = &rest[start + 8..];
            let end = body.find("```").expect("closed fence");
            let block = &body[..end];
            rest = &body[end + 3..];
            // Fragments (one table to show a field) are not whole scenarios.
            if block.contains("[scenario]") && block.contains("[[route]]") {
                seen += 1;
                if let Err(e) = Scenario::parse(&path.display().to_string(), block) {
                    panic!("{e}\n{block}");
                }
            }
        }
    }
    assert!(seen >= 1, "no whole scenario found in the docs");
}

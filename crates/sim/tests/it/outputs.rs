//! Outputs are written as one set: after any error the output directory
//! holds the complete previous set or the complete new one, no temporary
//! directory survives, and a directory Stormbreak did not write is never
//! replaced.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use stormbreak_sim::output::{
    FileWriter, MARKER, OutDir, OutputError, OutputSet, scenario_dir_name,
};

/// A fresh, empty parent directory for one test; the output directory is
/// `parent/out`.
fn parent(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("outputs-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every file of `dir` by name (a subdirectory fails the test).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            assert!(
                e.file_type().unwrap().is_file(),
                "{:?} is not a file",
                e.path()
            );
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Names in `parent` other than the output directory `out`.
fn siblings(parent: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "out")
        .collect();
    names.sort();
    names
}

fn set(tag: &str, names: &[&str]) -> OutputSet {
    let mut set = OutputSet::new();
    for name in names {
        set.add(name, format!("{name} of run {tag}\n").repeat(8));
    }
    set
}

fn write(out: &Path, set: &OutputSet) -> Result<(), OutputError> {
    OutDir::prepare(out)?.write(set)
}

/// A disk that fills up after `budget` bytes: writes what fits, then fails
/// as a full disk does.
struct FullDisk {
    budget: usize,
    failed_on: Option<PathBuf>,
}

impl FileWriter for FullDisk {
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let n = bytes.len().min(self.budget);
        fs::write(path, &bytes[..n])?;
        self.budget -= n;
        if n < bytes.len() {
            self.failed_on = Some(path.to_path_buf());
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device (test)",
            ));
        }
        Ok(())
    }
}

#[test]
fn a_new_set_replaces_the_previous_one_whole() {
    let parent = parent("replace");
    let out = parent.join("out");
    write(
        &out,
        &set("a", &["summary.json", "timeseries.csv", "recording.json"]),
    )
    .unwrap();
    let b = set("b", &["summary.json", "report.html"]);
    write(&out, &b).unwrap();
    let files = snapshot(&out);
    assert_eq!(
        files.keys().map(String::as_str).collect::<Vec<_>>(),
        [MARKER, "report.html", "summary.json"],
        "timeseries.csv of the previous set must not survive"
    );
    assert_eq!(files["summary.json"], b.get("summary.json").unwrap());
    let marker = String::from_utf8(files[MARKER].clone()).unwrap();
    assert_eq!(
        marker.lines().skip(1).collect::<Vec<_>>(),
        ["summary.json", "report.html"]
    );
    assert_eq!(siblings(&parent), Vec::<String>::new());
}

#[test]
fn a_full_disk_at_any_byte_keeps_the_previous_set_and_leaves_no_temporary() {
    let parent = parent("full-disk");
    let out = parent.join("out");
    write(&out, &set("a", &["summary.json", "recording.json"])).unwrap();
    let before = snapshot(&out);
    let b = set("b", &["summary.json", "recording.json", "report.html"]);
    let mut failed_files = std::collections::BTreeSet::new();
    let mut budget = 0;
    loop {
        let mut disk = FullDisk {
            budget,
            failed_on: None,
        };
        let result = OutDir::prepare(&out).unwrap().write_with(&b, &mut disk);
        match result {
            Ok(()) => break,
            Err(OutputError::Io { path, source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::StorageFull);
                let file = disk.failed_on.unwrap().file_name().unwrap().to_owned();
                assert_eq!(path, out.join(&file), "the error names the file");
                failed_files.insert(file.into_string().unwrap());
            }
            Err(e) => panic!("budget {budget}: {e}"),
        }
        assert_eq!(
            snapshot(&out),
            before,
            "budget {budget}: previous set changed"
        );
        assert_eq!(siblings(&parent), Vec::<String>::new(), "budget {budget}");
        budget += 7;
        assert!(budget < 100_000, "the write never succeeded");
    }
    // The disk filled up in the marker and in every file of the set.
    assert_eq!(
        failed_files.into_iter().collect::<Vec<_>>(),
        [MARKER, "recording.json", "report.html", "summary.json"]
    );
    assert_eq!(snapshot(&out).len(), 4, "with room, the new set is written");
    assert_eq!(siblings(&parent), Vec::<String>::new());
}

#[test]
fn a_directory_stormbreak_did_not_write_is_refused_and_left_untouched() {
    let parent = parent("foreign");
    let out = parent.join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("notes.txt"), "mine").unwrap();
    let err = write(&out, &set("a", &["summary.json"])).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, OutputError::Refused { .. }), "{msg}");
    assert!(msg.starts_with(&format!("{}:", fs::canonicalize(&out).unwrap().display())));
    assert!(msg.contains(MARKER), "{msg}");
    assert_eq!(snapshot(&out).keys().collect::<Vec<_>>(), ["notes.txt"]);
    assert_eq!(siblings(&parent), Vec::<String>::new());
}

#[test]
fn a_set_with_a_file_added_by_hand_is_refused() {
    let parent = parent("added");
    let out = parent.join("out");
    write(&out, &set("a", &["summary.json", "report.html"])).unwrap();
    fs::write(out.join("analysis.ipynb"), "mine").unwrap();
    // A leftover of the single-file atomic write of a listed file is fine.
    fs::write(out.join(".report.html.4242.tmp"), "half").unwrap();
    let err = write(&out, &set("b", &["summary.json"])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("holds analysis.ipynb,"), "{msg}");
    assert!(!msg.contains(".report.html.4242.tmp"), "{msg}");
    assert!(out.join("analysis.ipynb").is_file());
    fs::remove_file(out.join("analysis.ipynb")).unwrap();
    write(&out, &set("b", &["summary.json"])).unwrap();
    assert_eq!(
        snapshot(&out).keys().collect::<Vec<_>>(),
        [MARKER, "summary.json"]
    );
}

#[test]
fn a_file_or_a_root_is_refused_and_an_empty_directory_is_used() {
    let parent = parent("kinds");
    let file = parent.join("out");
    fs::write(&file, "not a directory").unwrap();
    let err = write(&file, &set("a", &["summary.json"])).unwrap_err();
    assert!(err.to_string().contains("is not a directory"), "{err}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "not a directory");
    fs::remove_file(&file).unwrap();

    let err = write(Path::new("/"), &set("a", &["summary.json"])).unwrap_err();
    assert!(matches!(err, OutputError::Refused { .. }), "{err}");

    fs::create_dir(parent.join("out")).unwrap();
    write(&parent.join("out"), &set("a", &["summary.json"])).unwrap();
    assert_eq!(snapshot(&parent.join("out")).len(), 2);
}

#[test]
fn files_put_there_during_the_run_are_not_replaced() {
    let parent = parent("during");
    let out = parent.join("out");
    let prepared = OutDir::prepare(&out).unwrap();
    fs::create_dir(&out).unwrap();
    fs::write(out.join("notes.txt"), "mine").unwrap();
    let err = prepared.write(&set("a", &["summary.json"])).unwrap_err();
    assert!(matches!(err, OutputError::Refused { .. }), "{err}");
    assert_eq!(snapshot(&out).keys().collect::<Vec<_>>(), ["notes.txt"]);
    assert_eq!(siblings(&parent), Vec::<String>::new());
}

#[test]
fn an_unusable_parent_is_reported_before_the_run() {
    let parent = parent("parent-file");
    fs::write(parent.join("plain"), "x").unwrap();
    let out = parent.join("plain").join("out");
    let err = OutDir::prepare(&out).unwrap_err();
    assert!(matches!(err, OutputError::Io { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&parent.join("plain").display().to_string()),
        "{err}"
    );
}

/// A pid no process can have (Linux caps pids at 2^22).
const DEAD_PID: u32 = 999_999_999;

#[test]
fn leftovers_of_a_killed_run_are_removed_by_the_next_one() {
    let parent = parent("stale");
    let out = parent.join("out");
    write(&out, &set("a", &["summary.json"])).unwrap();
    let before = snapshot(&out);
    let staging = parent.join(format!(".out.stormbreak-new-{DEAD_PID}-0"));
    fs::create_dir(&staging).unwrap();
    fs::write(
        staging.join(MARKER),
        "stormbreak output set 1\nsummary.json\n",
    )
    .unwrap();
    fs::write(staging.join("summary.json"), "hal").unwrap();
    let empty = parent.join(format!(".out.stormbreak-new-{DEAD_PID}-1"));
    fs::create_dir(&empty).unwrap();
    let aside = parent.join(format!(".out.stormbreak-old-{DEAD_PID}-2"));
    fs::create_dir(&aside).unwrap();
    fs::write(aside.join(MARKER), "stormbreak output set 1\n").unwrap();
    // Same pattern, but not Stormbreak's: holds a file and no marker.
    let lookalike = parent.join(format!(".out.stormbreak-new-{DEAD_PID}-3"));
    fs::create_dir(&lookalike).unwrap();
    fs::write(lookalike.join("keep.txt"), "mine").unwrap();

    let prepared = OutDir::prepare(&out).unwrap();
    assert_eq!(prepared.notes().len(), 3, "{:?}", prepared.notes());
    assert!(prepared.notes().iter().all(|n| n.starts_with("removed ")));
    assert_eq!(
        siblings(&parent),
        [format!(".out.stormbreak-new-{DEAD_PID}-3")]
    );
    assert_eq!(snapshot(&out), before);
}

#[test]
fn a_swap_cut_between_its_renames_is_rolled_back() {
    let parent = parent("cut-swap");
    let out = parent.join("out");
    write(&out, &set("a", &["summary.json", "timeseries.csv"])).unwrap();
    let before = snapshot(&out);
    // As a run killed after moving the old set aside, before moving the
    // new one in, leaves it.
    let aside = parent.join(format!(".out.stormbreak-old-{DEAD_PID}-5"));
    fs::rename(&out, &aside).unwrap();
    let staging = parent.join(format!(".out.stormbreak-new-{DEAD_PID}-4"));
    fs::create_dir(&staging).unwrap();
    fs::write(
        staging.join(MARKER),
        "stormbreak output set 1\nsummary.json\n",
    )
    .unwrap();
    fs::write(staging.join("summary.json"), "new").unwrap();

    let prepared = OutDir::prepare(&out).unwrap();
    assert!(
        prepared.notes()[0].starts_with(&format!("restored {}", prepared.path().display())),
        "{:?}",
        prepared.notes()
    );
    assert_eq!(snapshot(&out), before, "the previous set is back");
    assert_eq!(siblings(&parent), Vec::<String>::new());
}

#[cfg(unix)]
#[test]
fn a_symlinked_output_directory_is_replaced_where_it_points() {
    let parent = parent("symlink");
    let real = parent.join("real");
    write(&real, &set("a", &["summary.json"])).unwrap();
    let link = parent.join("out");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let b = set("b", &["summary.json"]);
    write(&link, &b).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        snapshot(&real)["summary.json"],
        b.get("summary.json").unwrap()
    );
    assert_eq!(siblings(&parent), ["real"]);
}

#[test]
fn scenario_names_become_one_path_component() {
    for (name, dir) in [
        ("github-2026-08-17", "github-2026-08-17"),
        ("../../x", "x"),
        ("../../escape me", "escape-me"),
        ("a/b\\c", "a-b-c"),
        ("/etc/passwd", "etc-passwd"),
        (".hidden", "hidden"),
        ("v1.2", "v1.2"),
        ("café", "caf-"),
    ] {
        assert_eq!(scenario_dir_name(name).as_deref(), Some(dir), "{name:?}");
        let path = Path::new("stormbreak-out").join(dir);
        assert_eq!(path.parent(), Some(Path::new("stormbreak-out")), "{name:?}");
        assert_eq!(path.components().count(), 2, "{name:?}");
    }
    for name in ["", ".", "..", "/", "../..", " - "] {
        assert_eq!(scenario_dir_name(name), None, "{name:?}");
    }
    assert_eq!(scenario_dir_name(&"x".repeat(300)).unwrap().len(), 100);
}

//! `stormbreak sweep` as a user meets it: the same files whatever
//! `--jobs`, three `--shard`s merged by `sweep merge` into exactly what one
//! run writes, and a bad axis refused before anything runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn stormbreak() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/capacity-drop.toml")
}

const AXES: [&str; 4] = [
    "--axis",
    "action.cut.factor=2.5,6",
    "--axis",
    "action.cut.for=5s,10s",
];

fn sweep(out: &Path, extra: &[&str]) {
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(AXES)
        .args(["--seeds", "2", "--quiet", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The files of a sweep directory (the marker file aside), by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn one_and_two_jobs_write_the_same_bytes() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "jobs");
    sweep(&dir.join("one"), &["--jobs", "1"]);
    sweep(&dir.join("two"), &["--jobs", "2"]);
    let one = files(&dir.join("one"));
    let names: Vec<&str> = one.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["report.html", "summary.json", "sweep.csv"]);
    assert_eq!(one, files(&dir.join("two")));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("one/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema"], "stormbreak.sweep/2");
    let cell = &summary["cells"][0];
    assert!(
        cell["window_amplification"].as_f64().unwrap() >= 1.0,
        "{cell}"
    );
    assert!(cell.get("max_interval_amplification").is_some(), "{cell}");
    assert!(cell.get("peak_amplification").is_none(), "{cell}");
    assert_eq!(summary["runs"], 8);
    assert!(
        summary["classes"]["metastable"].as_u64().unwrap() > 0,
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without a terminal (here: a pipe) progress is a line on standard error
/// every twentieth of the runs and after the last; `--quiet` hides it.
#[test]
fn without_a_terminal_progress_is_logged_as_lines() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "progress");
    let run = |quiet: bool| {
        let mut c = stormbreak();
        c.arg("sweep")
            .arg(scenario())
            .args([
                "--axis",
                "action.cut.factor=2.5,6",
                "--seeds",
                "2",
                "--jobs",
                "2",
            ])
            .arg("--out")
            .arg(dir.join("out"));
        if quiet {
            c.arg("--quiet");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stderr).unwrap()
    };
    let err = run(false);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("sweeping:")).collect();
    assert_eq!(
        lines,
        [
            "sweeping: 1/4 runs done (25%)",
            "sweeping: 2/4 runs done (50%)",
            "sweeping: 3/4 runs done (75%)",
            "sweeping: 4/4 runs done (100%)",
        ],
        "{err}"
    );
    assert!(!run(true).contains("sweeping"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn three_shards_merge_into_the_single_run() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "shards");
    sweep(&dir.join("whole"), &[]);
    let mut merge = stormbreak();
    merge.args(["sweep", "merge"]);
    for i in 1..=3 {
        let d = dir.join(format!("shard{i}"));
        sweep(&d, &["--shard", &format!("{i}/3")]);
        merge.arg(&d);
    }
    let o = merge.arg("--out").arg(dir.join("merged")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(files(&dir.join("merged")), files(&dir.join("whole")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_axis_is_refused_before_anything_runs() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "bad");
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(["--axis", "client.users.rate=1..2:3", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`client` has no element \"users\""), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.join("out").exists());
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(["--axis", "action.cut.factor=2,3", "--shard", "4/3"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected I/N"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cluster path end to end, without a cluster: `--emit-k8s-job`
/// writes the manifests; each "pod" runs the Job's own command line with
/// the ConfigMap's files and its `JOB_COMPLETION_INDEX`; merging the
/// shards gives what one machine writes.
#[test]
fn the_emitted_job_runs_its_shards_into_the_single_run() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "k8s");
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(AXES)
        .args(["--seeds", "2", "--emit-k8s-job"])
        .arg(dir.join("k8s"))
        .args([
            "--image",
            "registry.example/stormbreak:test",
            "--shards",
            "3",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("k8s").join(f)).unwrap()).unwrap()
    };
    let cm = read("sweep-configmap.json");
    let job = read("sweep-job.json");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 3);
    // The ConfigMap's files, where the pod mounts them.
    let mount = dir.join("sweep");
    std::fs::create_dir_all(&mount).unwrap();
    for key in ["scenario.toml", "sweep.json"] {
        std::fs::write(mount.join(key), cm["data"][key].as_str().unwrap()).unwrap();
    }
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"][0], "stormbreak");
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let mut merge = stormbreak();
    merge.args(["sweep", "merge"]);
    for index in 0..3 {
        // What the kubelet does: expand $(JOB_COMPLETION_INDEX); the
        // mounts are directories here.
        let pod_args: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
                    .replace("/sweep/", &format!("{}/", mount.display()))
                    .replace("/out/", &format!("{}/", dir.display()))
            })
            .collect();
        let o = stormbreak()
            .args(&pod_args)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{pod_args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        merge.arg(dir.join(format!("shard-{index}")));
    }
    let o = merge.arg("--out").arg(dir.join("merged")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    sweep(&dir.join("whole"), &[]);
    let merged = files(&dir.join("merged"));
    let whole = files(&dir.join("whole"));
    // The scenario's path differs (the pods read the ConfigMap's copy):
    // summary.json names it; everything else is the same bytes.
    assert_eq!(merged.len(), whole.len());
    for ((n, a), (m, b)) in merged.iter().zip(&whole) {
        assert_eq!(n, m);
        if n != "summary.json" {
            assert!(a == b, "{n} differs");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chosen seed is the simulator's own: with `--keep-series`, the run of
/// a cell on seed 7 writes the very recording.json `simulate --seed 7`
/// writes for that cell's scenario (here the file's own cut, ×5).
#[test]
fn a_chosen_seed_runs_what_simulate_runs_on_it() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "seeds");
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(["--axis", "action.cut.factor=5.0,6.0", "--seeds", "7,9"])
        .args(["--keep-series", "--quiet", "--out"])
        .arg(dir.join("sweep"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(dir.join("sweep/sweep.csv")).unwrap();
    let seeds: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap())
        .collect();
    assert_eq!(seeds, ["7", "9", "7", "9"], "{csv}");
    let names: Vec<String> = files(&dir.join("sweep"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "cell-0-run-0.recording.json",
            "cell-0-run-1.recording.json",
            "cell-1-run-0.recording.json",
            "cell-1-run-1.recording.json",
            "report.html",
            "summary.json",
            "sweep.csv",
        ]
    );
    let o = stormbreak()
        .arg("simulate")
        .arg(scenario())
        .args(["--seed", "7", "--quiet", "--out"])
        .arg(dir.join("sim"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kept = std::fs::read(dir.join("sweep/cell-0-run-0.recording.json")).unwrap();
    let simulated = std::fs::read(dir.join("sim/recording.json")).unwrap();
    assert!(
        kept == simulated,
        "cell 0's run on seed 7 differs from simulate --seed 7"
    );
    let other = std::fs::read(dir.join("sweep/cell-0-run-1.recording.json")).unwrap();
    assert!(other != simulated, "seed 9 ran as seed 7");
    // A bare number is a count; a range and a one-seed list are chosen seeds.
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(["--axis", "action.cut.factor=5.0", "--seeds", "3..1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a range includes both ends and is written A..=B"),
        "{err}"
    );
    assert!(
        err.contains("one chosen seed: 7..=7, or 7 with a trailing comma: 7,"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cell a limit stops gets the class "stopped" and the sweep goes on,
/// naming the limit and the flag that raises it.
#[test]
fn a_cell_stopped_by_a_limit_is_classed_stopped_and_the_sweep_goes_on() {
    let dir = crate::common::temp_dir("stormbreak-sweep", "stopped");
    let o = stormbreak()
        .arg("sweep")
        .arg(scenario())
        .args(["--axis", "action.cut.factor=1.1,6", "--quiet"])
        .args(["--limit", "attempts_in_flight=300", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("1 runs were stopped by a limit")
            && err.contains("--limit attempts_in_flight=N"),
        "{err}"
    );
    let csv = std::fs::read_to_string(dir.join("out/sweep.csv")).unwrap();
    let classes: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(4).unwrap())
        .collect();
    assert_eq!(classes.len(), 2, "{csv}");
    assert_ne!(classes[0], "stopped", "{csv}");
    assert_eq!(classes[1], "stopped", "{csv}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["classes"]["stopped"], 1);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("1 stopped"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

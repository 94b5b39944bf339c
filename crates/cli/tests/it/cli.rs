//! The binary as a user meets it: errors name file:line:column and exit
//! non-zero without a panic; a run writes every output.

use std::path::PathBuf;
use std::process::Command;

fn stormbreak() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

fn temp_dir(name: &str) -> crate::common::TempDir {
    crate::common::temp_dir("stormbreak-cli", name)
}

use crate::common::SMALL;

#[test]
fn a_broken_scenario_is_reported_with_its_location() {
    let dir = temp_dir("broken");
    let file = dir.join("broken.toml");
    std::fs::write(&file, SMALL.replace("workers = 4", "workers = \"four\"")).unwrap();
    let out = stormbreak().arg("simulate").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.toml:8:19: invalid type"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.join("out").exists());
}

#[test]
fn a_missing_file_is_reported() {
    let out = stormbreak()
        .args(["simulate", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/x.toml: cannot read"), "{err}");
}

#[test]
fn a_bad_scale_is_rejected_by_the_parser() {
    let out = stormbreak()
        .args(["replay", "--scale", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected 0 < F"), "{err}");
    let out = stormbreak()
        .args(["replay", "--fix", "magic"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown fix"));
}

/// Runs `simulate` on `scenario` written to a fresh directory; returns the
/// output directory and the terminal table, failing on a non-zero exit.
/// Runs `simulate` on `scenario` in a fresh directory, which lives as long
/// as the returned guard.
fn simulate(name: &str, scenario: &str) -> (crate::common::TempDir, PathBuf, String) {
    let dir = temp_dir(name);
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, scenario).unwrap();
    let out_dir = dir.join("out");
    let out = stormbreak()
        .arg("simulate")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        dir,
        out_dir,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn simulate_writes_every_output_and_report_rerenders() {
    let (_dir, out_dir, table) = simulate("ok", SMALL);
    assert!(
        table.contains("route") && table.lines().any(|l| l.starts_with("r ")),
        "{table}"
    );
    for f in [
        "summary.json",
        "timeseries.csv",
        "recording.json",
        "recovery.json",
        "report.html",
    ] {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
    // The per-route recovery table, with the default 5-minute windows
    // (the 30 s run fits in one: SMALL's route never fails).
    let recovery: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("recovery.json")).unwrap()).unwrap();
    assert_eq!(recovery["schema"], "stormbreak.recovery/1");
    assert_eq!(recovery["window_s"], 300.0);
    assert_eq!(recovery["routes"][0]["path"], "r");
    assert_eq!(
        recovery["routes"][0]["degraded_at_s"],
        serde_json::Value::Null
    );
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema"], "stormbreak.summary/1");
    std::fs::remove_file(out_dir.join("report.html")).unwrap();
    let again = stormbreak().arg("report").arg(&out_dir).output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(out_dir.join("report.html").is_file());
}

#[test]
fn a_job_queue_shows_its_longest_wait() {
    // One worker, 2 ms jobs at 1 000/s: the queue grows for the whole run.
    let text = SMALL.replace(r#"timeout = "1s""#, "timeout = \"1s\"\nworkers = 1");
    let (_dir, out_dir, table) = simulate("jobs", &text.replace("500/s", "1000/s"));
    assert!(
        table.lines().next().unwrap().ends_with("job wait"),
        "{table}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    let wait = summary["routes"][0]["longest_job_wait_s"].as_f64().unwrap();
    assert!(wait > 5.0, "longest wait {wait} s");
}

#[test]
fn replay_with_a_fix_list_runs_and_writes_its_summary() {
    let dir = temp_dir("replay");
    let out = stormbreak()
        .args([
            "replay",
            "--fix",
            "retries,single-flight",
            "--scale",
            "0.002",
            "--quiet",
            "--json",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["runs"][0]["fixes"],
        serde_json::json!(["retries", "single-flight"])
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary["replay"]["runs"][0]["headline"]["web_api_peak_error_rate"].is_number());
    assert!(dir.join("report.html").is_file());
}

#[test]
fn until_stops_the_run_early_and_refuses_a_time_after_its_end() {
    let dir = temp_dir("until");
    let file = dir.join("until.toml");
    std::fs::write(&file, SMALL).unwrap();
    let run = |until: &str, out: &str| {
        stormbreak()
            .arg("simulate")
            .arg(&file)
            .args(["--until", until, "--quiet", "--out"])
            .arg(dir.join(out))
            .output()
            .unwrap()
    };
    let ok = run("20s", "ok");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("ok/recording.json")).unwrap()).unwrap();
    assert_eq!(rec["duration"], 20_000_000_000u64);
    let first_attempts = rec["routes"][0]["first_attempts"].as_array().unwrap();
    assert_eq!(first_attempts.len(), 2, "two 10 s intervals recorded");

    // After the scenario's 30 s, shorter than its 10 s interval, or
    // between two intervals' ends: an error naming the file, nothing written.
    for (until, what) in [
        (
            "31s",
            "--until 31s is after the end of the run (duration = \"30s\")",
        ),
        (
            "5s",
            "--until 5s is shorter than one recording interval (interval = \"10s\")",
        ),
        (
            "12s",
            "--until 12s is not a whole number of recording intervals (interval = \"10s\"): \
             expected e.g. 10s or 20s",
        ),
    ] {
        let out = run(until, "refused");
        assert_eq!(out.status.code(), Some(1), "--until {until}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("until.toml: {what}")), "{err}");
        assert!(!dir.join("refused").exists());
    }
    for bad in ["0", "soon"] {
        let out = run(bad, "bad");
        assert_eq!(out.status.code(), Some(2), "--until {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--until"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("bad").exists());
    }
}

#[test]
fn every_subcommand_documents_its_flags() {
    for (cmd, flags) in [
        (
            "simulate",
            &["--out", "--seed", "--scale", "--until", "--json", "--quiet"][..],
        ),
        (
            "replay",
            &[
                "--fixed",
                "--fix",
                "--ablation",
                "--compare",
                "--scale",
                "--seed",
                "--out",
                "--json",
            ][..],
        ),
    ] {
        let out = stormbreak().args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        for f in flags {
            assert!(help.contains(f), "{cmd} --help lacks {f}");
        }
    }
}

/// Every subcommand's `--help` points to the one exit-code table, and that
/// table (docs/outputs.md, "Exit codes") has a row for every subcommand
/// `stormbreak --help` lists, so a new subcommand cannot skip either.
#[test]
fn every_subcommand_help_points_to_the_exit_code_table() {
    const POINTER: &str = "docs/outputs.md#exit-codes";
    let top = stormbreak().arg("--help").output().unwrap();
    let top = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(top.contains(POINTER), "stormbreak --help lacks {POINTER}");
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "no subcommands found in:\n{top}");

    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/outputs.md"),
    )
    .unwrap();
    let start = docs
        .find("\n## Exit codes\n")
        .expect("docs/outputs.md has ## Exit codes");
    let table = &docs[start + 1..];
    let table = &table[..table[3..].find("\n## ").map_or(table.len(), |e| e + 3)];

    let mut invocations: Vec<Vec<&str>> = commands.iter().map(|c| vec![*c]).collect();
    invocations.push(vec!["sweep", "merge"]);
    for args in invocations {
        let out = stormbreak().args(&args).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        let name = args.join(" ");
        assert!(out.status.success(), "{name} --help failed");
        assert!(
            help.contains(POINTER),
            "{name} --help lacks {POINTER}:\n{help}"
        );
        assert!(
            table.contains(&format!("| `{name}")),
            "docs/outputs.md, \"Exit codes\", has no row for {name}"
        );
    }
}

/// Runs `cmd` and kills it if it has not finished within `limit`, so a
/// reader that never stops fails the test instead of hanging it.
fn output_within(mut cmd: Command, limit: std::time::Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[cfg(unix)]
#[test]
fn an_endless_file_is_refused_at_once() {
    let mut cmd = stormbreak();
    cmd.args(["simulate", "/dev/zero"]);
    let out = output_within(cmd, std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/zero: scenario file is larger than 4 MiB"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn warnings_are_printed_before_the_run() {
    let dir = temp_dir("warn");
    let file = dir.join("warn.toml");
    let text = SMALL.replace(
        r#"timeout = "1s""#,
        "timeout = \"1s\"\n\n[[client]]\nname = \"idle\"\nroute = \"r\"\nrate = \"0.001/s\"\ntimeout = \"1s\"",
    );
    std::fs::write(&file, text).unwrap();
    let out = stormbreak()
        .arg("simulate")
        .arg(&file)
        .args(["--quiet", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("warn.toml:23:8: client \"idle\": rate 0.001/s"),
        "{err}"
    );
}

/// A run whose virtual time cannot advance stops on the work budget within
/// seconds, names the file and the component, and writes no outputs.
#[test]
fn a_run_over_its_work_budget_stops_naming_the_limit_and_the_flag() {
    let dir = temp_dir("budget");
    let file = dir.join("spin.toml");
    std::fs::write(&file, include_str!("../../../sim/tests/fixtures/spin.toml")).unwrap();
    let out_dir = dir.join("out");
    let out = stormbreak()
        .arg("simulate")
        .arg(&file)
        .arg("--quiet")
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spin.toml: the run stopped at"), "{err}");
    assert!(err.contains("events per simulated second"), "{err}");
    assert!(err.contains("client \"bug\""), "{err}");
    assert!(
        err.contains("the limit events_per_sim_second")
            && err.contains("--limit events_per_sim_second=N"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out_dir.exists());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out-stopped/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stopped"]["limit"], "events_per_sim_second");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--limit` lowers (or raises) a limit; a run it stops writes what it
/// recorded to `<out>-stopped/`, exits 3, and leaves a good earlier
/// `--out` as it was.
#[test]
fn a_stopped_run_writes_beside_a_good_earlier_out_and_exits_3() {
    let dir = temp_dir("stopped");
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/capacity-drop.toml");
    let out_dir = dir.join("out");
    let run = |extra: &[&str]| {
        stormbreak()
            .arg("simulate")
            .arg(&file)
            .args(["--quiet", "--out"])
            .arg(&out_dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let good = run(&[]);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let before = std::fs::read(out_dir.join("summary.json")).unwrap();
    let o = run(&["--limit", "attempts_in_flight=300"]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("more than 300 attempts in flight"), "{err}");
    assert!(err.contains("--limit attempts_in_flight=N"), "{err}");
    assert!(err.contains("out-stopped"), "{err}");
    assert_eq!(std::fs::read(out_dir.join("summary.json")).unwrap(), before);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out-stopped/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stopped"]["limit"], "attempts_in_flight");
    let at = summary["stopped"]["at_s"].as_f64().unwrap();
    // The cut starts at 30 s; the recording ends with its last whole interval.
    assert!((30.0..150.0).contains(&at), "{at}");
    assert!(summary["duration_s"].as_f64().unwrap() <= at, "{summary}");
    for f in ["recording.json", "timeseries.csv", "report.html"] {
        assert!(dir.join("out-stopped").join(f).exists(), "{f}");
    }
    let o = run(&["--limit", "attempts=3"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown limit \"attempts\": expected one of default_app_queue"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file of an output directory, by relative path.
type Tree = std::collections::BTreeMap<String, Vec<u8>>;

fn tree(dir: &std::path::Path) -> Tree {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                files.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    files
}

/// `--ablation` and `--compare` run their simulations on `--jobs` threads;
/// what they write and print is the same whatever the thread count.
#[test]
fn parallel_replays_write_the_same_outputs_whatever_the_thread_count() {
    for mode in ["--ablation", "--compare"] {
        let mut seen: Vec<(Tree, Vec<u8>)> = Vec::new();
        for jobs in ["1", "2"] {
            let dir = temp_dir(&format!("jobs{mode}{jobs}"));
            let out = stormbreak()
                .args([
                    "replay", mode, "--scale", "0.001", "--quiet", "--jobs", jobs, "--out",
                ])
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The printed summary names the output directory; drop that line.
            let stdout: Vec<u8> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("outputs: "))
                .flat_map(|l| format!("{l}\n").into_bytes())
                .collect();
            let files = tree(&dir);
            assert!(
                files.contains_key("summary.json"),
                "{mode}: {:?}",
                files.keys()
            );
            seen.push((files, stdout));
            let _ = std::fs::remove_dir_all(&dir);
        }
        for (i, s) in seen.iter().enumerate().skip(1) {
            assert_eq!(
                s.0.keys().collect::<Vec<_>>(),
                seen[0].0.keys().collect::<Vec<_>>()
            );
            for (k, v) in &s.0 {
                assert!(
                    v == &seen[0].0[k],
                    "{mode}: {k} differs between --jobs 1 and run {i}"
                );
            }
            assert_eq!(s.1, seen[0].1, "{mode}: stdout differs");
        }
    }
}

#[test]
fn jobs_must_be_a_thread_count() {
    let out = stormbreak()
        .args(["replay", "--jobs", "0", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--jobs") && err.contains("from 1 to 256"),
        "{err}"
    );
}

//! `stormbreak report DIR…`: re-renders `report.html` from saved runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use stormbreak_report::{FileError, REPORT_FILE, load_recording, render, write_report_file};

/// Flags of `stormbreak report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run directory holding the recording.json a `simulate` or `replay` run
    /// wrote (or the recording.json itself); give two or more to overlay
    /// them on the same axes.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Write the report here [default: report.html in the first DIR].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Open the report in a browser afterwards (when one can be started).
    #[arg(long)]
    pub open: bool,
    /// Name of each run in legends, in DIR order [default: its scenario
    /// name, or its directory name when scenario names repeat].
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
}

/// Renders the report of `args.dirs` and writes it (atomically).
pub fn run(args: Args) -> Result<(), String> {
    if args.labels.len() > args.dirs.len() {
        return Err(format!(
            "{} --label given for {} run(s)",
            args.labels.len(),
            args.dirs.len()
        ));
    }
    let mut recordings = Vec::with_capacity(args.dirs.len());
    for dir in &args.dirs {
        let path = recording_path(dir);
        // Checked before anything is rendered: an inconsistent file is an
        // error naming its field, not a silently wrong page.
        let rec = load_recording(&path).map_err(|e| match e {
            FileError::Missing(_) => format!(
                "{}: no recording here; `stormbreak simulate FILE --out {}` writes one",
                path.display(),
                dir.display()
            ),
            e => e.to_string(),
        })?;
        recordings.push(rec);
    }
    let names: Vec<&str> = recordings.iter().map(|r| r.scenario.as_str()).collect();
    let labels = run_labels(&args.labels, &names, &args.dirs);

    let first_dir = run_dir(&args.dirs[0]);
    let extras = stormbreak_report::read_extras(&first_dir)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let runs: Vec<(&str, &stormbreak_sim::Recording)> = labels
        .iter()
        .map(String::as_str)
        .zip(recordings.iter())
        .collect();
    let html = render(&runs, &extras);
    let out = args.out.unwrap_or_else(|| first_dir.join(REPORT_FILE));
    write_report_file(&out, &html).map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    println!("report: {}", out.display());
    if args.open
        && let Err(e) = open_in_browser(&out)
    {
        eprintln!("note: not opened ({e}); open {} yourself", out.display());
    }
    Ok(())
}

/// `DIR/recording.json`, or the argument itself when it names a file.
fn recording_path(arg: &Path) -> PathBuf {
    if arg.is_file() {
        arg.to_path_buf()
    } else {
        arg.join("recording.json")
    }
}

/// The run directory of an argument (a file's parent).
fn run_dir(arg: &Path) -> PathBuf {
    if arg.is_file() {
        match arg.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    } else {
        arg.to_path_buf()
    }
}

/// Legend labels: explicit ones first, then scenario names, then directory
/// names where scenario names repeat, then `run N` where those repeat too.
fn run_labels(explicit: &[String], scenarios: &[&str], dirs: &[PathBuf]) -> Vec<String> {
    let mut labels: Vec<String> = scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| explicit.get(i).cloned().unwrap_or_else(|| s.to_string()))
        .collect();
    let repeated = |labels: &[String], l: &String| labels.iter().filter(|x| *x == l).count() > 1;
    let snapshot = labels.clone();
    for (label, dir) in labels.iter_mut().zip(dirs).skip(explicit.len()) {
        if repeated(&snapshot, label)
            && let Some(name) = run_dir(dir).file_name()
        {
            *label = name.to_string_lossy().into_owned();
        }
    }
    let snapshot = labels.clone();
    for (i, label) in labels.iter_mut().enumerate().skip(explicit.len()) {
        if repeated(&snapshot, label) {
            *label = format!("run {}", i + 1);
        }
    }
    labels
}

/// Opens `path` with `$BROWSER`, `open` (macOS), `start` (Windows) or
/// `xdg-open` (elsewhere, when there is a graphical display).
fn open_in_browser(path: &Path) -> Result<(), String> {
    let path = path.canonicalize().map_err(|e| e.to_string())?;
    let browser = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::to_owned))
        .filter(|b| !b.trim().is_empty());
    let (program, args, wait): (String, Vec<OsString>, bool) = if let Some(b) = browser {
        (b, vec![path.into()], false)
    } else if cfg!(target_os = "macos") {
        ("open".into(), vec![path.into()], true)
    } else if cfg!(windows) {
        (
            "cmd".into(),
            vec!["/C".into(), "start".into(), "".into(), path.into()],
            true,
        )
    } else if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none()
    {
        return Err("no graphical display: DISPLAY and WAYLAND_DISPLAY are unset".into());
    } else {
        ("xdg-open".into(), vec![path.into()], true)
    };
    let mut child = Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if wait {
        let status = child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("{program} failed ({status})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn labels_default_to_scenarios_then_directories() {
        assert_eq!(
            run_labels(&[], &["incident", "fixed"], &dirs(&["a", "b"])),
            ["incident", "fixed"]
        );
        assert_eq!(
            run_labels(&[], &["s", "s"], &dirs(&["out/base", "out/budgets"])),
            ["base", "budgets"]
        );
        assert_eq!(
            run_labels(&[], &["s", "s"], &dirs(&["x/out", "y/out"])),
            ["run 1", "run 2"]
        );
        assert_eq!(
            run_labels(&["sim".into()], &["s", "s"], &dirs(&["a", "b"])),
            ["sim", "s"]
        );
    }

    #[test]
    fn a_missing_recording_names_the_file_and_the_fix() {
        let err = run(Args {
            dirs: vec![PathBuf::from("/nonexistent/stormbreak-run")],
            out: None,
            open: false,
            labels: Vec::new(),
        })
        .unwrap_err();
        assert!(
            err.contains("/nonexistent/stormbreak-run/recording.json"),
            "{err}"
        );
        assert!(err.contains("stormbreak simulate"), "{err}");
    }

    #[test]
    fn an_inconsistent_recording_or_extras_file_is_refused_before_rendering() {
        let dir =
            std::env::temp_dir().join(format!("stormbreak-report-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let rec = r#"{"scenario":"s","seed":1,"scale":1.0,"interval":1000000000,
            "duration":2000000000,"clock_origin_s":0,"routes":[{"name":"api",
            "first_attempts":[1,1],"attempts":[1,1],"successes":[1],"errors":[[0,0,0,0,0,0,0,0,0,0],
            [0,0,0,0,0,0,0,0,0,0]],"latency_ms":[[1,1,1,1],[1,1,1,1]],"latency_mean_ms":[1,1]}],
            "components":[],"actions":[],"events":0,"attempts":0,"peak_in_flight":0}"#;
        let path = dir.join("recording.json");
        std::fs::write(&path, rec).unwrap();
        let args = || Args {
            dirs: vec![dir.clone()],
            out: None,
            open: false,
            labels: Vec::new(),
        };
        let err = run(args()).unwrap_err();
        assert_eq!(
            err,
            format!(
                r#"{}: routes[0] "api": series "successes" has 1 values, expected 2 (duration / interval)"#,
                path.display()
            )
        );
        assert!(!dir.join(REPORT_FILE).exists());
        std::fs::write(
            &path,
            rec.replace(r#""successes":[1]"#, r#""successes":[1,1]"#),
        )
        .unwrap();
        std::fs::write(
            dir.join(stormbreak_report::EXTRAS_FILE),
            r#"{"title": "t", "tabels": []}"#,
        )
        .unwrap();
        let err = run(args()).unwrap_err();
        assert!(
            err.contains("report-extras.json: not a report extras file: unknown field `tabels`"),
            "{err}"
        );
        assert!(!dir.join(REPORT_FILE).exists());
        std::fs::remove_file(dir.join(stormbreak_report::EXTRAS_FILE)).unwrap();
        run(args()).unwrap();
        assert!(dir.join(REPORT_FILE).is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn too_many_labels_is_an_error() {
        let err = run(Args {
            dirs: vec![PathBuf::from("a")],
            out: None,
            open: false,
            labels: vec!["x".into(), "y".into()],
        })
        .unwrap_err();
        assert!(err.contains("--label"), "{err}");
    }

    #[test]
    fn re_renders_a_saved_run_next_to_its_outputs() {
        let dir =
            std::env::temp_dir().join(format!("stormbreak-report-cmd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let text = r#"
[scenario]
name = "tiny"
duration = "5s"
interval = "1s"
[[service]]
name = "backend"
replicas = 1
app = { workers = 1, service_time = { dist = "exponential", mean = "1ms" } }
[[route]]
name = "r"
path = ["backend"]
[[client]]
name = "users"
route = "r"
rate = "100/s"
timeout = "1s"
"#;
        let sc = stormbreak_sim::Scenario::parse("tiny.toml", text).unwrap();
        let rec = stormbreak_sim::engine::Engine::new(&sc, Default::default())
            .run()
            .unwrap();
        stormbreak_sim::output::write_outputs(&dir, &rec, None).unwrap();
        run(Args {
            dirs: vec![dir.clone()],
            out: None,
            open: false,
            labels: Vec::new(),
        })
        .unwrap();
        let html = std::fs::read_to_string(dir.join(REPORT_FILE)).unwrap();
        assert!(html.contains("<svg class=\"chart\""));
        // Two runs (the same one twice) into another file.
        let out = dir.join("cmp.html");
        run(Args {
            dirs: vec![dir.clone(), dir.join("recording.json")],
            out: Some(out.clone()),
            open: false,
            labels: vec!["a".into(), "b".into()],
        })
        .unwrap();
        assert!(
            std::fs::read_to_string(&out)
                .unwrap()
                .contains("stroke-dasharray=\"7 4\"")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

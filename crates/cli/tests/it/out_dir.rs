//! The output directory as the real binary treats it: checked before the
//! run, replaced as one set even when a signal lands mid-write, never
//! escaped by a scenario name; numeric flags rejected by name and range.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Only guards against a hang; a passing run takes milliseconds.
const HANG_GUARD: Duration = Duration::from_secs(120);

const PAUSE_ENV: &str = "STORMBREAK_TEST_PAUSE_BEFORE_SWAP_MS";

fn stormbreak() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stormbreak"));
    cmd.env_remove(PAUSE_ENV);
    cmd
}

fn temp_dir(name: &str) -> crate::common::TempDir {
    crate::common::temp_dir("stormbreak-outdir", name)
}

use crate::common::SMALL;

/// Ends the process when dropped, so a failing test leaves none running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// Waits for the exit. `HANG_GUARD` only guards against a hang: past
    /// it the process is killed and the test fails; nothing is timed.
    fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.0.kill();
                panic!("stormbreak hung: killed by the {HANG_GUARD:?} hang guard");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Runs `cmd`, killing it if it hangs.
fn run_guarded(cmd: &mut Command) -> Output {
    let mut child = Running(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Pipes are read on threads so a chatty child cannot block on them.
    let mut out = child.0.stdout.take().unwrap();
    let mut err = child.0.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).unwrap();
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).unwrap();
        v
    });
    let status = child.wait();
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Every file of `dir` by name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Names in `dir` other than `keep`.
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

const SET: [&str; 6] = [
    ".stormbreak-out",
    "recording.json",
    "recovery.json",
    "report.html",
    "summary.json",
    "timeseries.csv",
];

fn seed_of(out: &Path) -> u64 {
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    summary["seed"].as_u64().unwrap()
}

fn simulate_ok(file: &Path, out: &Path, seed: u64) {
    let o = run_guarded(
        stormbreak()
            .arg("simulate")
            .arg(file)
            .arg("--out")
            .arg(out)
            .args(["--quiet", "--seed", &seed.to_string()]),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Starts a run that pauses between staging its set and the swap, and
/// returns once it has reported the pause.
fn start_paused(file: &Path, out: &Path, seed: u64) -> Running {
    let mut child = Running(
        stormbreak()
            .arg("simulate")
            .arg(file)
            .arg("--out")
            .arg(out)
            .args(["--quiet", "--seed", &seed.to_string()])
            .env(PAUSE_ENV, "600000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(HANG_GUARD)
            .expect("the run never reached the write phase");
        if line.starts_with(PAUSE_ENV) && line.contains("pausing") {
            return child;
        }
    }
}

fn signal(child: &Running, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

#[cfg(unix)]
#[test]
fn a_signal_during_the_write_phase_leaves_the_previous_set_and_no_temporary() {
    for sig in ["TERM", "INT"] {
        let dir = temp_dir(&format!("signal-{sig}"));
        let file = dir.join("small.toml");
        fs::write(&file, SMALL).unwrap();
        let out = dir.join("out");
        simulate_ok(&file, &out, 1);
        let before = snapshot(&out);
        assert_eq!(before.keys().map(String::as_str).collect::<Vec<_>>(), SET);

        let mut child = start_paused(&file, &out, 2);
        // The staged set exists beside the output directory right now.
        assert_eq!(others(&dir, &["small.toml", "out"]).len(), 1, "{sig}");
        signal(&child, sig);
        let status = child.wait();
        assert_eq!(status.code(), Some(130), "SIG{sig}: the handler exits 130");
        assert_eq!(snapshot(&out), before, "SIG{sig}: the previous set, whole");
        assert_eq!(seed_of(&out), 1);
        assert_eq!(
            others(&dir, &["small.toml", "out"]),
            Vec::<String>::new(),
            "SIG{sig}: no temporary directory remains"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn a_killed_write_is_cleaned_up_by_the_next_run() {
    let dir = temp_dir("sigkill");
    let file = dir.join("small.toml");
    fs::write(&file, SMALL).unwrap();
    let out = dir.join("out");
    simulate_ok(&file, &out, 1);
    let before = snapshot(&out);

    let mut child = start_paused(&file, &out, 2);
    signal(&child, "KILL");
    let status = child.wait();
    assert_eq!(status.code(), None, "killed by the signal");
    assert_eq!(snapshot(&out), before, "the previous set, whole");
    let left = others(&dir, &["small.toml", "out"]);
    assert_eq!(left.len(), 1, "SIGKILL cannot clean up: {left:?}");
    assert!(left[0].starts_with(".out.stormbreak-new-"), "{left:?}");

    let o = run_guarded(
        stormbreak()
            .arg("simulate")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .args(["--quiet", "--seed", "3"]),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("note: removed {}", dir.join(&left[0]).display())),
        "{err}"
    );
    assert_eq!(others(&dir, &["small.toml", "out"]), Vec::<String>::new());
    assert_eq!(
        snapshot(&out)
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        SET
    );
    assert_eq!(seed_of(&out), 3, "the new set");
    fs::remove_dir_all(&dir).unwrap();
}

/// A scenario whose run would take hours: a check that happened after the
/// simulation would trip the hang guard.
fn endless(dir: &Path) -> PathBuf {
    let file = dir.join("endless.toml");
    fs::write(
        &file,
        SMALL.replace(
            "duration = \"30s\"",
            "duration = \"700h\"\ninterval = \"1h\"",
        ),
    )
    .unwrap();
    file
}

#[test]
fn a_directory_stormbreak_did_not_write_is_refused_before_the_run() {
    let dir = temp_dir("foreign");
    let file = endless(&dir);
    let home = dir.join("home");
    fs::create_dir(&home).unwrap();
    fs::write(home.join("thesis.tex"), "years of work").unwrap();
    for out in [home.clone(), PathBuf::from(".")] {
        let o = run_guarded(
            stormbreak()
                .current_dir(&home)
                .arg("simulate")
                .arg(&file)
                .arg("--out")
                .arg(&out),
        );
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "error: {}: is not empty and has no .stormbreak-out marker",
                home.display()
            )),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            fs::read_to_string(home.join("thesis.tex")).unwrap(),
            "years of work"
        );
        assert_eq!(others(&home, &[]), ["thesis.tex"]);
        assert_eq!(others(&dir, &[]), ["endless.toml", "home"]);
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unwritable_out_is_reported_before_the_run() {
    let dir = temp_dir("unwritable");
    let file = endless(&dir);
    let plain = dir.join("plain");
    fs::write(&plain, "a file, not a directory").unwrap();
    let out = plain.join("out");
    let o = run_guarded(
        stormbreak()
            .arg("simulate")
            .arg(&file)
            .arg("--out")
            .arg(&out),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&plain.display().to_string()), "{err}");
    assert!(err.contains("cannot"), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_scenario_name_cannot_escape_the_output_root() {
    let dir = temp_dir("escape");
    let work = dir.join("a").join("b");
    fs::create_dir_all(&work).unwrap();
    let file = work.join("escape.toml");
    fs::write(
        &file,
        SMALL.replace("name = \"small\"", "name = \"../../x\""),
    )
    .unwrap();
    let o =
        run_guarded(
            stormbreak()
                .current_dir(&work)
                .args(["simulate", "escape.toml", "--quiet"]),
        );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        others(&dir, &[]),
        ["a"],
        "nothing written above the work dir"
    );
    assert_eq!(others(&dir.join("a"), &[]), ["b"]);
    assert_eq!(others(&work, &[]), ["escape.toml", "stormbreak-out"]);
    assert_eq!(others(&work.join("stormbreak-out"), &[]), ["x"]);
    assert_eq!(
        snapshot(&work.join("stormbreak-out/x"))
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        SET
    );

    // A name with nothing to keep is an error naming the file and the fix.
    fs::write(&file, SMALL.replace("name = \"small\"", "name = \"..\"")).unwrap();
    let o =
        run_guarded(
            stormbreak()
                .current_dir(&work)
                .args(["simulate", "escape.toml", "--quiet"]),
        );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("escape.toml: scenario name \"..\" has no letter or digit")
            && err.contains("--out"),
        "{err}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn numeric_flags_reject_bad_values_by_name_and_range() {
    let dir = temp_dir("flags");
    let file = dir.join("small.toml");
    fs::write(&file, SMALL).unwrap();
    let file = file.display().to_string();
    let scale_cases = [
        "-1", "-0.5", "0", "-0", "nan", "NaN", "inf", "-inf", "1001", "x",
    ];
    for cmd in [vec!["simulate", file.as_str()], vec!["replay"]] {
        for value in scale_cases {
            let o = run_guarded(stormbreak().args(&cmd).args(["--scale", value]));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} --scale {value}: {err}");
            assert!(
                err.contains(&format!("invalid value '{value}' for '--scale <SCALE>'"))
                    && err.contains("0 < F ≤ 1000"),
                "{cmd:?} --scale {value}: {err}"
            );
            assert!(
                !err.contains("unexpected argument") && !err.contains("panicked"),
                "{err}"
            );
        }
        for value in ["-1", "1.5", "18446744073709551616"] {
            let o = run_guarded(stormbreak().args(&cmd).args(["--seed", value]));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} --seed {value}: {err}");
            assert!(
                err.contains(&format!("invalid value '{value}' for '--seed <SEED>'"))
                    && err.contains("expected a whole number 0 ≤ N ≤ 18446744073709551615"),
                "{cmd:?} --seed {value}: {err}"
            );
        }
    }
    // A value in range still runs.
    let out = dir.join("out");
    let o = run_guarded(
        stormbreak()
            .args([
                "simulate", &file, "--quiet", "--scale", "0.5", "--seed", "7", "--out",
            ])
            .arg(&out),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(seed_of(&out), 7);
    fs::remove_dir_all(&dir).unwrap();
}

/// A 60 s lab run: two pods, each a backend and a sidecar guard.
const LAB_LONG: &str = r#"
[scenario]
name = "lab-signal"
duration = "60s"
interval = "1s"

[[service]]
name = "api"
replicas = 2
sidecar = { limit = 2, queue = 2, queue_timeout = "100ms" }
app = { workers = 1, queue = 5, service_time = { dist = "constant", value = "20ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "20/s"
timeout = "500ms"
"#;

/// Inodes of the sockets `pid` holds open (`/proc/PID/fd`).
#[cfg(target_os = "linux")]
fn socket_inodes(pid: u32) -> Vec<String> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect()
}

/// IPv4 TCP addresses in LISTEN state (`/proc/net/tcp`, state 0A) whose
/// socket inode is one of `inodes`.
#[cfg(target_os = "linux")]
fn listening_ports(inodes: &[String]) -> Vec<std::net::SocketAddr> {
    let table = fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if *state != "0A" || !inodes.iter().any(|i| i == inode) {
                return None;
            }
            let (ip, port) = local.split_once(':')?;
            // The address is the kernel's u32 in host (little-endian) order.
            let ip = u32::from_str_radix(ip, 16).ok()?.to_le_bytes();
            let port = u16::from_str_radix(port, 16).ok()?;
            Some(std::net::SocketAddr::from((ip, port)))
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn a_signal_stops_a_lab_run_and_leaves_no_listening_port_and_no_output() {
    for sig in ["INT", "TERM"] {
        let dir = temp_dir(&format!("lab-{sig}"));
        let file = dir.join("lab.toml");
        fs::write(&file, LAB_LONG).unwrap();
        let out = dir.join("out");
        let child = Running(
            stormbreak()
                .arg("lab")
                .arg(&file)
                .arg("--out")
                .arg(&out)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        // Two backends and two sidecar guards listen once the run is up;
        // the deadline only guards against a hang.
        let deadline = Instant::now() + HANG_GUARD;
        let ports = loop {
            let ports = listening_ports(&socket_inodes(pid));
            if ports.len() >= 4 {
                break ports;
            }
            assert!(Instant::now() < deadline, "the lab never listened");
            std::thread::sleep(Duration::from_millis(20));
        };
        for a in &ports {
            assert!(
                a.ip().is_loopback(),
                "{a}: the lab listens on loopback only"
            );
            assert!(
                std::net::TcpStream::connect(a).is_ok(),
                "{a} is read as listening but refuses: the check could not fail"
            );
        }
        let mut child = child;
        signal(&child, sig);
        let status = child.wait();
        assert_eq!(status.code(), Some(130), "SIG{sig}: the handler exits 130");
        for a in ports {
            assert!(
                std::net::TcpStream::connect(a).is_err(),
                "SIG{sig}: {a} still accepts after the lab ended"
            );
        }
        assert!(
            !out.exists(),
            "SIG{sig}: a stopped lab run writes no outputs"
        );
        assert_eq!(
            others(&dir, &["lab.toml"]),
            Vec::<String>::new(),
            "SIG{sig}: no temporary directory remains"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// A 3 s lab run with a trigger: a capacity cut from 1 s to 2 s.
const LAB_COMPARE: &str = r#"
[scenario]
name = "lab-compare"
duration = "3s"
interval = "500ms"
seed = 4

[[service]]
name = "api"
replicas = 1
app = { workers = 4, queue = 0, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "40/s"
timeout = "1s"

[[action]]
at = "1s"
for = "1s"
role = "trigger"
do = "slow_service"
service = "api"
factor = 20.0

[[slo]]
route = "r"
error_rate = 0.05
window = "500ms"
"#;

/// Writes [`LAB_COMPARE`] to `file` and runs `stormbreak lab FILE
/// --compare --recover-within 1s --out OUT` with `extra` flags; its
/// stdout. Exit 0 (valid) or 3 (invalid on a loaded machine): both write
/// outputs.
fn lab_compared(file: &Path, out: &Path, extra: &[&str]) -> String {
    fs::write(file, LAB_COMPARE).unwrap();
    let o = stormbreak()
        .arg("lab")
        .arg(file)
        .args(["--compare", "--recover-within", "1s"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

#[test]
fn lab_compare_writes_both_sides_from_one_scenario() {
    let dir = temp_dir("lab-compare");
    let (file, out) = (dir.join("lab.toml"), dir.join("out"));
    let stdout = lab_compared(&file, &out, &[]);
    assert!(
        stdout.contains("compare (simulator / lab, seed 4):"),
        "{stdout}"
    );
    assert!(stdout.contains("class sim / lab"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(doc["seed"], 4);
    // The hop's cost was measured before comparing and is beside it.
    assert!(
        doc["overhead"]["direct_us"].as_f64().unwrap() > 0.0,
        "{doc}"
    );
    assert!(doc["overhead"]["guard_hop_us"].is_number(), "{doc}");
    assert!(stdout.contains("a guard hop adds"), "{stdout}");
    let routes = doc["comparison"]["routes"].as_array().unwrap();
    assert_eq!(routes.len(), 1);
    for side in routes[0].as_array().unwrap() {
        assert_eq!(side["route"], "r");
        // A 20× cut of 40/s on 4 workers × 10 ms (400/s → 20/s) breaches.
        let (slo, five) = (
            side["peak_error_rate"].as_f64().unwrap(),
            side["peak_error_rate_5m"].as_f64().unwrap(),
        );
        assert!(slo > 0.0 && five > 0.0, "{side}");
        // The run is shorter than 5 minutes: the replay's window holds
        // the quiet start too, so it reads lower than the SLO window.
        assert!(five < slo, "{side}");
        assert!(side["class"].is_string(), "{side}");
    }
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("simulator") && html.contains("lab"));
    // A scenario without a trigger is refused before the run.
    let plain = dir.join("plain.toml");
    fs::write(&plain, LAB_COMPARE.replace("role = \"trigger\"\n", "")).unwrap();
    let o = stormbreak()
        .args(["lab", "--compare"])
        .arg(&plain)
        .arg("--out")
        .arg(dir.join("out2"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--compare: no trigger"));
    assert!(!dir.join("out2").exists());
}

#[test]
fn lab_repeat_counts_each_sides_classes_over_seeds() {
    let dir = temp_dir("lab-repeat");
    let (file, out) = (dir.join("lab.toml"), dir.join("out"));
    let stdout = lab_compared(&file, &out, &["--repeat", "2"]);
    assert!(stdout.contains("repeat: 2 runs, seeds 4 to 5:"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("repeat.json")).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["seed"].as_u64(), runs[1]["seed"].as_u64()),
        (Some(4), Some(5))
    );
    let shares = &doc["shares"][0];
    assert_eq!(shares["route"], "r");
    assert_eq!(shares["simulator_runs"], 2);
    let lab = shares["lab_runs"].as_u64().unwrap() + shares["discarded"].as_u64().unwrap();
    assert_eq!(lab, 2, "every lab run counted or discarded: {shares}");
    // --repeat needs --compare.
    let o = stormbreak()
        .arg("lab")
        .arg(&file)
        .args(["--repeat", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "a usage error");
}

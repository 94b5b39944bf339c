//! `stormbreak probe`'s exit codes, each from a real run against a small
//! server on loopback: 0 every SLO met, 99 one breached, 3 one unknown, 2 a
//! config error.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::common::temp_dir;

/// Answers `/ok` with 200 and anything else with 500, one connection at a
/// time; stopped and joined when dropped.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let status = if buf.starts_with(b"GET /ok ") {
                    "200 OK"
                } else {
                    "500 Oops"
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Server {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn config(addr: SocketAddr, path: &str, error_rate: &str) -> String {
    format!(
        "[probe]\nrate = \"50/s\"\nduration = \"1s\"\ninterval = \"100ms\"\n\n\
         [[path]]\nname = \"p\"\nurl = \"http://{addr}/{path}\"\ntimeout = \"500ms\"\n\
         slo = {{ error_rate = {error_rate}, window = \"500ms\" }}\n"
    )
}

fn probe(dir: &std::path::Path, config: &str) -> Output {
    let file = dir.join("probe.toml");
    std::fs::write(&file, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
        .args(["probe", "--seed", "1", "--out"])
        .arg(dir.join("out"))
        .arg("--jsonl")
        .arg(dir.join("probes.jsonl"))
        .arg(&file)
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or_else(|| panic!("killed: {o:?}"))
}

#[test]
fn every_slo_met_exits_0_and_writes_the_outputs() {
    let server = Server::start();
    let dir = temp_dir("probe", "met");
    let o = probe(&dir, &config(server.addr, "ok", "0.1"));
    assert_eq!(code(&o), 0, "{o:?}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out/probe.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "stormbreak.probe/1");
    assert_eq!(doc["run"]["verdict"], "met");
    let sent = doc["run"]["probes_sent"].as_u64().unwrap();
    assert!((25..=80).contains(&sent), "{sent}");
    let lines = std::fs::read_to_string(dir.join("probes.jsonl")).unwrap();
    assert_eq!(lines.lines().count() as u64, sent);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["path"].as_str(), first["status"].as_u64()),
        (Some("p"), Some(200))
    );
    let csv = std::fs::read_to_string(dir.join("out/timeline.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        11,
        "a header and ten 100 ms rows:\n{csv}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("degraded at") && stdout.contains("confirmed (3 windows)"),
        "{stdout}"
    );
}

#[test]
fn a_breached_slo_exits_99() {
    let server = Server::start();
    let dir = temp_dir("probe", "breach");
    let o = probe(&dir, &config(server.addr, "fail", "0.1"));
    assert_eq!(code(&o), 99, "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("BREACHED") && stdout.contains("status "),
        "{stdout}"
    );
}

#[test]
fn a_target_the_samples_cannot_judge_exits_3_and_says_so_first() {
    let server = Server::start();
    let dir = temp_dir("probe", "unknown");
    // 99.9 % needs 1 000 probes a window; 0.5 s at 50/s gives 25.
    let o = probe(&dir, &config(server.addr, "ok", "0.001"));
    assert_eq!(code(&o), 3, "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("warning: path \"p\": about 25 probes per 500ms window"),
        "{stderr}"
    );
}

#[test]
fn a_config_error_exits_2_naming_file_line_and_column() {
    let dir = temp_dir("probe", "config");
    let o = probe(&dir, "[probe]\nrate = \"-1/s\"\nduration = \"1s\"\n");
    assert_eq!(code(&o), 2, "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("probe.toml:2:8:"), "{stderr}");
    assert!(!dir.join("out").exists(), "nothing written");
    let missing = Command::new(env!("CARGO_BIN_EXE_stormbreak"))
        .args(["probe", "/nonexistent/probe.toml"])
        .output()
        .unwrap();
    assert_eq!(code(&missing), 2, "{missing:?}");
}

#[test]
fn sigterm_stops_the_run_and_writes_what_was_seen() {
    let server = Server::start();
    let dir = temp_dir("probe", "sigterm");
    let file = dir.join("probe.toml");
    std::fs::write(
        &file,
        config(server.addr, "ok", "0.1").replace("duration = \"1s\"", "duration = \"60s\""),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stormbreak"))
        .args(["probe", "--out"])
        .arg(dir.join("out"))
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first interval has closed (its state line), stop it.
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("probe: t=") {
        match stderr.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{o:?} {}",
        String::from_utf8_lossy(&seen)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out/probe.json")).unwrap()).unwrap();
    assert_eq!(doc["run"]["stopped_early"], true);
    assert!(
        doc["run"]["ran_s"].as_f64().unwrap() < 30.0,
        "{}",
        doc["run"]
    );
}

//! `stormbreak guard`: `--check` validates with file:line:column errors;
//! `--config` serves on loopback until killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

// Shared helpers; this file needs only `temp_dir` (removed on drop).
#[allow(dead_code)]
mod common;

use common::temp_dir;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

const VALID: &str = r#"[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["ENDPOINT"]

[[route]]
name = "app"
cluster = "app"
retry = { max_attempts = 2 }
"#;

#[test]
fn check_accepts_a_valid_file_and_names_file_line_column_for_a_bad_one() {
    let dir = temp_dir("stormbreak-guard-cli", "check");
    let good = dir.write("good.toml", VALID.replace("ENDPOINT", "127.0.0.1:9"));
    let out = bin()
        .args(["guard", "--check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("ok (1 listener(s), 1 cluster(s), 1 route(s))")
    );

    let bad = dir.write(
        "bad.toml",
        VALID
            .replace("ENDPOINT", "127.0.0.1:9")
            .replace("max_attempts = 2", "max_attempts = 0"),
    );
    let out = bin().args(["guard", "--check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expect = format!(
        "error: {}:12:26: route \"app\": retry: max_attempts must be ≥ 1, got 0",
        bad.display()
    );
    assert!(stderr.contains(&expect), "{stderr}");

    let out = bin()
        .args(["guard", "--check"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn config_serves_until_killed() {
    // A one-shot upstream on a std listener, answering one request.
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = upstream.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = upstream.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")
            .unwrap();
    });
    let dir = temp_dir("stormbreak-guard-cli", "serve");
    // The access log on stdout, after the "listening" line.
    let path = dir.write(
        "serve.toml",
        VALID.replace("ENDPOINT", &endpoint.to_string()) + "\n[access_log]\nto = \"stdout\"\n",
    );
    let mut child = bin()
        .args(["guard", "--config"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Lines arrive through a channel so each wait is bounded (a hang guard).
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default()
    };
    let result = std::panic::catch_unwind(|| {
        let line = next();
        let addr = line
            .trim()
            .strip_prefix("listening edge on ")
            .unwrap_or_else(|| panic!("{line:?}"));
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /x?token=secret HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hi"), "{answer}");
        let log = next();
        let v: serde_json::Value =
            serde_json::from_str(&log).unwrap_or_else(|e| panic!("{e}: {log:?}"));
        assert_eq!(v["path"], "/x", "no query in the log: {log}");
        assert_eq!(v["route"], "app", "{log}");
        assert_eq!(v["upstream"], "app", "{log}");
        assert_eq!(v["status"], 200, "{log}");
        assert_eq!(v["attempts"], 1, "{log}");
        assert_eq!(v["decision"], "proxied", "{log}");
        assert!(!log.contains("secret"), "{log}");
    });
    child.kill().unwrap();
    child.wait().unwrap();
    server.join().unwrap();
    reader.join().unwrap();
    result.unwrap();
}

#[test]
fn a_test_dir_is_removed_when_dropped_also_when_the_test_panics() {
    let dir = temp_dir("stormbreak-guard-cli", "dropped");
    dir.write("a.toml", "x");
    let kept = dir.to_path_buf();
    assert!(kept.join("a.toml").exists());
    drop(dir);
    assert!(!kept.exists(), "{} left behind", kept.display());
    let path = std::panic::catch_unwind(|| {
        let dir = temp_dir("stormbreak-guard-cli", "panicked");
        std::fs::create_dir_all(dir.join("nested")).unwrap();
        let path = dir.to_path_buf();
        panic!("{}", path.display());
    })
    .unwrap_err();
    let path = path.downcast_ref::<String>().unwrap();
    assert!(!std::path::Path::new(path).exists(), "{path} left behind");
}

/// Reads lines from the child's stdout until one starts with `prefix`.
fn line_with(reader: &mut impl BufRead, prefix: &str) -> String {
    for _ in 0..16 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
    panic!("no line starting {prefix:?}");
}

/// One HTTP/1.1 exchange on a fresh connection; the whole answer.
fn exchange(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn admin_listener_serves_metrics_and_logs_each_change_with_who_and_what() {
    let dir = temp_dir("stormbreak-guard-cli", "admin");
    let config = VALID.replace("ENDPOINT", "127.0.0.1:9")
        + "\n[admin]\nbind = \"127.0.0.1:0\"\ntoken_env = \"STORMBREAK_ADMIN_TOKEN\"\n";
    let path = dir.write("admin.toml", &config);
    let mut child = bin()
        .args(["guard", "--config"])
        .arg(&path)
        .env("STORMBREAK_ADMIN_TOKEN", "t0ken")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let admin = line_with(&mut out, "admin on ");
        let metrics = exchange(
            &admin,
            "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        );
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("stormbreak_guard_requests_total{route=\"app\"} 0"));
        let body = r#"{"route":"app","status":429,"retry_after":"5s"}"#;
        let shed = |token: &str| {
            exchange(
                &admin,
                &format!(
                    "POST /shed/add HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer {token}\r\nx-stormbreak-operator: bob\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                ),
            )
        };
        assert!(shed("wrong").starts_with("HTTP/1.1 401"));
        let ok = shed("t0ken");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    }));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    result.unwrap();
    let logged: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("admin change"))
        .collect();
    assert_eq!(logged.len(), 1, "one change, one line: {stderr}");
    assert!(logged[0].contains("who=bob (127.0.0.1:"), "{}", logged[0]);
    assert!(logged[0].contains("what=\"shed.add\""), "{}", logged[0]);
    assert!(logged[0].contains("\"status\":429"), "{}", logged[0]);
}

#[test]
fn audit_finds_no_blind_autoscaler_in_deploy() {
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let out = bin()
        .args(["audit", "--format", "json", "--fail-on", "info", deploy])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // The audit read both autoscalers and the workload they scale...
    assert_eq!(
        json["counts"]["read"]["HorizontalPodAutoscaler"], 1,
        "{json}"
    );
    assert_eq!(json["counts"]["read"]["ScaledObject"], 1, "{json}");
    assert_eq!(json["counts"]["read"]["Deployment"], 1, "{json}");
    // ...and found nothing at all, so no SB101-SB103 (blind autoscaler).
    assert_eq!(json["findings"], serde_json::json!([]), "{json}");
    assert_eq!(out.status.code(), Some(0));
}

/// Sends `signal` (`-HUP`, `-TERM`) to the child with `kill`.
fn signal(child: &std::process::Child, signal: &str) {
    let ok = Command::new("kill")
        .arg(signal)
        .arg(child.id().to_string())
        .status()
        .expect("kill(1) is needed for this test")
        .success();
    assert!(ok, "kill {signal}");
}

#[test]
fn sighup_refuses_an_invalid_file_and_sigterm_drains_and_exits_0() {
    let dir = temp_dir("stormbreak-guard-cli", "signals");
    let text = VALID.replace("ENDPOINT", "127.0.0.1:9");
    let path = dir.write("signals.toml", &text);
    let mut child = bin()
        .args(["guard", "--drain-timeout", "5s", "--config"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let edge = line_with(&mut out, "listening edge on ");
        dir.write(
            "signals.toml",
            text.replace("max_attempts = 2", "max_attempts = 0"),
        );
        signal(&child, "-HUP");
        // Still serving the old config (no upstream: 502 from the guard).
        let answer = exchange(
            &edge,
            "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        );
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        signal(&child, "-TERM");
    }));
    // Bounded wait for the exit (a hang guard only).
    let mut status = None;
    for _ in 0..500 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if status.is_none() {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    result.unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{stderr}");
    assert!(stderr.contains("reload on SIGHUP refused"), "{stderr}");
    assert!(stderr.contains("max_attempts must be ≥ 1"), "{stderr}");
    assert!(stderr.contains("draining"), "{stderr}");
}

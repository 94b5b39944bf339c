//! `stormbreak guard`: `--check` validates with file:line:column errors;
//! `--config` serves on loopback until killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

// The guard's own test config builder (std only, made to be shared).
#[path = "../../../guard/tests/it/common/config.rs"]
mod guard_config;

use crate::common::temp_dir;
use guard_config::Config;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

/// Listener `edge` on a free loopback port, cluster `app` of `endpoint`,
/// route `app` retrying twice.
fn valid(endpoint: &str) -> String {
    Config::edge()
        .cluster("app", &[endpoint], "")
        .route("app", "app", "retry = { max_attempts = 2 }")
        .toml()
}

/// 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {text}"))
        + 1
}

/// A running `stormbreak guard --config <file>`: stdout read line by line
/// on a thread (so every wait for a line is bounded), stderr kept for the
/// end. Killed and waited for when dropped, so a failing test leaves no
/// process behind.
struct GuardProcess {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl GuardProcess {
    /// Starts `stormbreak guard <args> --config <path>` with `env` set.
    fn start(path: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = bin();
        command
            .arg("guard")
            .args(args)
            .arg("--config")
            .arg(path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        GuardProcess {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// The next stdout line (waits at most 10 s: a hang guard).
    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no line from the guard: {e}"))
    }

    /// The rest of the next of (at most 16) stdout lines starting with `prefix`.
    fn line_with(&self, prefix: &str) -> String {
        for _ in 0..16 {
            if let Some(rest) = self.next_line().trim().strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
        panic!("no line starting {prefix:?}");
    }

    /// Sends `signal` (`-HUP`, `-TERM`) with `kill`.
    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status()
            .expect("kill(1) is needed for this test")
            .success();
        assert!(ok, "kill {signal}");
    }

    /// Kills it; what it wrote on stderr.
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        self.stderr()
    }

    /// Waits for it to exit by itself (at most 5 s, a hang guard; then it
    /// is killed); its exit code and what it wrote on stderr.
    fn exit(mut self) -> (Option<i32>, String) {
        let mut code = None;
        for _ in 0..500 {
            if let Some(s) = self.child.try_wait().unwrap() {
                code = s.code();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        (code, self.stderr())
    }

    fn stderr(&mut self) -> String {
        let _ = self.child.wait();
        let mut text = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for GuardProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its stdout is closed now: the reader thread ends.
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

#[test]
fn check_accepts_a_valid_file_and_names_file_line_column_for_a_bad_one() {
    let dir = temp_dir("stormbreak-guard-cli", "check");
    let good = dir.write("good.toml", valid("127.0.0.1:9"));
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

    let text = valid("127.0.0.1:9").replace("max_attempts = 2", "max_attempts = 0");
    let bad = dir.write("bad.toml", &text);
    let out = bin().args(["guard", "--check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expect = format!(
        "error: {}:{}:26: route \"app\": retry: max_attempts must be ≥ 1, got 0",
        bad.display(),
        line_of(&text, "max_attempts = 0")
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
fn check_reads_the_lab_keys_a_dependency_and_a_refusing_listener_with_its_backlog() {
    let dir = temp_dir("stormbreak-guard-cli", "check-lab");
    let text = |dependency_cluster: &str| {
        Config::new()
            .listener(
                "edge",
                "max_connections = 8\nat_connection_cap = \"refuse\"\nbacklog = 16",
            )
            .cluster("app", &["127.0.0.1:9"], "")
            .cluster("auth", &["127.0.0.1:10"], "")
            .route(
                "app",
                "app",
                &format!(
                    "dependency = {{ cluster = \"{dependency_cluster}\", path = \"/check\", timeout = \"250ms\" }}"
                ),
            )
            .toml()
    };
    let good = dir.write("lab.toml", text("auth"));
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
    let bad_text = text("nope");
    let bad = dir.write("lab-bad.toml", &bad_text);
    let out = bin().args(["guard", "--check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expect = format!(
        "error: {}:{}:26: route \"app\": no [[cluster]] named \"nope\"",
        bad.display(),
        line_of(&bad_text, "dependency = ")
    );
    assert!(stderr.contains(&expect), "{stderr}");
}

#[test]
fn check_refuses_a_missing_or_empty_admin_token_source() {
    let dir = temp_dir("stormbreak-guard-cli", "check-token");
    let empty = dir.write("empty.token", "  \n");
    let full = dir.write("full.token", "s3cret\n");
    let with =
        |source: String| valid("127.0.0.1:9") + "\n[admin]\nbind = \"127.0.0.1:0\"\n" + &source;
    let check = |name: &str, text: &str, env: &[(&str, &str)]| {
        let path = dir.write(name, text);
        let mut cmd = bin();
        cmd.args(["guard", "--check"])
            .arg(&path)
            .env_remove("STORMBREAK_CHECK_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            path,
        )
    };
    let file = |p: &std::path::Path| format!("token_file = {:?}\n", p.display().to_string());
    let (code, _, _) = check("ok.toml", &with(file(&full)), &[]);
    assert_eq!(code, Some(0));
    for (name, source, env, says) in [
        (
            "missing.toml",
            file(&dir.join("absent.token")),
            vec![],
            "admin.token_file",
        ),
        ("empty.toml", file(&empty), vec![], "the token is empty"),
        (
            "unset.toml",
            "token_env = \"STORMBREAK_CHECK_TOKEN\"\n".to_owned(),
            vec![],
            "STORMBREAK_CHECK_TOKEN is not set",
        ),
        (
            "blank.toml",
            "token_env = \"STORMBREAK_CHECK_TOKEN\"\n".to_owned(),
            vec![("STORMBREAK_CHECK_TOKEN", " ")],
            "the token is empty",
        ),
    ] {
        let text = with(source);
        let (code, stderr, path) = check(name, &text, &env);
        assert_eq!(code, Some(1), "{name}: {stderr}");
        // Named at the [admin] table.
        let at = format!("{}:{}:1:", path.display(), line_of(&text, "[admin]"));
        assert!(
            stderr.contains(&at) && stderr.contains(says),
            "{name}: {stderr} (want {at})"
        );
    }
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
        valid(&endpoint.to_string()) + "\n[access_log]\nto = \"stdout\"\n",
    );
    let guard = GuardProcess::start(&path, &[], &[]);
    let addr = guard.line_with("listening edge on ");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /x?token=secret HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hi"), "{answer}");
    let log = guard.next_line();
    let v: serde_json::Value =
        serde_json::from_str(&log).unwrap_or_else(|e| panic!("{e}: {log:?}"));
    assert_eq!(v["path"], "/x", "no query in the log: {log}");
    assert_eq!(v["route"], "app", "{log}");
    assert_eq!(v["upstream"], "app", "{log}");
    assert_eq!(v["status"], 200, "{log}");
    assert_eq!(v["attempts"], 1, "{log}");
    assert_eq!(v["decision"], "proxied", "{log}");
    assert!(!log.contains("secret"), "{log}");
    guard.kill();
    // It answered its one request, so its thread has ended.
    server.join().unwrap();
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
    let config = valid("127.0.0.1:9")
        + "\n[admin]\nbind = \"127.0.0.1:0\"\ntoken_env = \"STORMBREAK_ADMIN_TOKEN\"\n";
    let path = dir.write("admin.toml", &config);
    let guard = GuardProcess::start(&path, &[], &[("STORMBREAK_ADMIN_TOKEN", "t0ken")]);
    let admin = guard.line_with("admin on ");
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
    let stderr = guard.kill();
    let logged: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("admin change"))
        .collect();
    assert_eq!(logged.len(), 1, "one change, one line: {stderr}");
    assert!(
        stderr.contains("admin authentication failed"),
        "a refused token is logged: {stderr}"
    );
    assert!(logged[0].contains("who=bob (127.0.0.1:"), "{}", logged[0]);
    assert!(logged[0].contains("what=\"shed.add\""), "{}", logged[0]);
    assert!(logged[0].contains("\"status\":429"), "{}", logged[0]);
}

#[test]
fn audit_finds_no_blind_autoscaler_in_deploy() {
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let audit = |paths: &[String]| {
        let out = bin()
            .args(["audit", "--format", "json", "--fail-on", "info"])
            .args(paths)
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), json)
    };
    let (code, json) = audit(&[deploy.to_string()]);
    // The audit read both autoscalers and the workload they scale...
    assert_eq!(
        json["counts"]["read"]["HorizontalPodAutoscaler"], 1,
        "{json}"
    );
    assert_eq!(json["counts"]["read"]["ScaledObject"], 1, "{json}");
    assert_eq!(json["counts"]["read"]["Deployment"], 1, "{json}");
    // ...and found one thing only: the two are alternatives for one
    // Deployment (SB109, "apply one"), never a blind autoscaler.
    let rules: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["SB109"], "{json}");
    assert_eq!(code, Some(1));
    // Each applied alone: nothing at all.
    for one in ["hpa", "keda"] {
        let (code, json) = audit(&[format!("{deploy}/guard.yaml"), format!("{deploy}/{one}")]);
        assert_eq!(json["findings"], serde_json::json!([]), "{one}: {json}");
        assert_eq!(code, Some(0), "{one}");
    }
}

#[test]
fn sighup_refuses_an_invalid_file_and_sigterm_drains_and_exits_0() {
    let dir = temp_dir("stormbreak-guard-cli", "signals");
    let text = valid("127.0.0.1:9");
    let path = dir.write("signals.toml", &text);
    let guard = GuardProcess::start(&path, &["--drain-timeout", "5s"], &[]);
    let edge = guard.line_with("listening edge on ");
    dir.write(
        "signals.toml",
        text.replace("max_attempts = 2", "max_attempts = 0"),
    );
    guard.signal("-HUP");
    // Still serving the old config (no upstream: 502 from the guard).
    let answer = exchange(
        &edge,
        "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    guard.signal("-TERM");
    let (code, stderr) = guard.exit();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("reload on SIGHUP refused"), "{stderr}");
    assert!(stderr.contains("max_attempts must be ≥ 1"), "{stderr}");
    assert!(stderr.contains("draining"), "{stderr}");
}

/// A loopback HTTP/1.1 upstream on std threads: every request (keep-alive
/// honoured) gets `status` with `name` as its body; ended, with every thread
/// it started, when dropped.
struct Upstream {
    addr: std::net::SocketAddr,
    status: std::sync::Arc<std::sync::atomic::AtomicU16>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// Most connections one upstream serves (the guard pools a few): a bound,
/// not a figure the test depends on.
const UPSTREAM_CONNECTIONS: usize = 256;

impl Upstream {
    fn start(name: &'static str) -> Upstream {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let status = Arc::new(AtomicU16::new(200));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = std::thread::spawn({
            let (status, stop) = (status.clone(), stop.clone());
            move || {
                let mut conns = Vec::new();
                for stream in listener.incoming().take(UPSTREAM_CONNECTIONS) {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut s) = stream else { continue };
                    let (status, stop) = (status.clone(), stop.clone());
                    conns.push(std::thread::spawn(move || {
                        // Short reads so the thread sees `stop` soon.
                        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 4096];
                        while !stop.load(Ordering::SeqCst) {
                            match s.read(&mut chunk) {
                                Ok(0) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) =>
                                {
                                    continue;
                                }
                                Err(_) => return,
                            }
                            // One answer per request head (the guard sends GETs, no bodies).
                            while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                buf.drain(..end + 4);
                                let code = status.load(Ordering::SeqCst);
                                let answer = format!(
                                    "HTTP/1.1 {code} X\r\ncontent-length: {}\r\n\r\n{name}",
                                    name.len()
                                );
                                if s.write_all(answer.as_bytes()).is_err() {
                                    return;
                                }
                            }
                            if buf.len() > 64 * 1024 {
                                return;
                            }
                        }
                    }));
                }
                for c in conns {
                    let _ = c.join();
                }
            }
        });
        Upstream {
            addr,
            status,
            stop,
            accept: Some(accept),
        }
    }

    fn answer(&self, code: u16) {
        self.status.store(code, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Status code and body of one HTTP/1.1 answer.
fn status_and_body(answer: &str) -> (u16, &str) {
    let code = answer
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, body)
}

/// GET `path` from `addr` on a fresh connection.
fn get(addr: &str, path: &str) -> (u16, String) {
    let answer = exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nhost: github.example\r\nconnection: close\r\n\r\n"),
    );
    let (code, body) = status_and_body(&answer);
    (code, body.to_owned())
}

/// An authorised admin POST; the answer's status and JSON body.
fn admin_post(admin: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let answer = exchange(
        admin,
        &format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer edge-t0ken\r\nx-stormbreak-operator: test\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    let (code, body) = status_and_body(&answer);
    (code, serde_json::from_str(body).unwrap_or_default())
}

/// The token route's restore as `/state` shows it: running, and each
/// site's admitted fraction.
fn token_restore(admin: &str) -> (bool, Vec<(String, f64)>) {
    let answer = exchange(
        admin,
        "GET /state HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 200, "{answer}");
    let state: serde_json::Value = serde_json::from_str(body).unwrap();
    let route = state["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "copilot-token")
        .unwrap()
        .clone();
    let restore = &route["restore"];
    let fractions = serde_json::from_value(restore["fractions"].clone()).unwrap();
    (restore["running"].as_bool().unwrap(), fractions)
}

/// How `n` requests to `path` on `addr` were answered, by status.
fn tally(addr: &str, path: &str, n: usize) -> std::collections::BTreeMap<u16, usize> {
    let mut by = std::collections::BTreeMap::new();
    for _ in 0..n {
        *by.entry(get(addr, path).0).or_insert(0) += 1;
    }
    by
}

/// Sends GETs to `path` (at most `tries`, 50 ms apart: a hang guard, not
/// a timing assert) until one answers `code` with `body`; how many it took.
fn until(addr: &str, path: &str, code: u16, body: &str, tries: usize) -> usize {
    for i in 1..=tries {
        let (c, b) = get(addr, path);
        if c == code && b == body {
            return i;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{path} never answered {code} {body:?} in {tries} tries");
}

/// A metric's value in `/metrics`, by its exact name and labels.
fn metric(admin: &str, series: &str) -> Option<f64> {
    let answer = exchange(
        admin,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    answer
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn the_github_edge_example_restores_site_by_site_and_fails_over_and_back() {
    let example = include_str!("../../../../examples/github-edge.toml");
    let (web, cus_a, cus_b, nva, token, codeload) = (
        Upstream::start("web"),
        Upstream::start("cus"),
        Upstream::start("cus"),
        Upstream::start("nva"),
        Upstream::start("token"),
        Upstream::start("codeload"),
    );
    // The example as shipped, on free loopback ports; one timing knob is
    // shortened: api-cus's ejection lasts 5 s instead of 30 s, so the way
    // back takes seconds of the test, not half a minute (5 s is ample for
    // the few exchanges that read the ejected state before it ends).
    let mut text = example
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8081", "127.0.0.1:0")
        .replace("127.0.0.1:9901", "127.0.0.1:0")
        .replace(
            "base_ejection_time = \"30s\", max_ejection_percent = 100",
            "base_ejection_time = \"5s\", max_ejection_percent = 100",
        );
    for (port, up) in [
        ("19001", &web),
        ("19002", &web),
        ("19011", &cus_a),
        ("19012", &cus_b),
        ("19021", &nva),
        ("19031", &token),
        ("19041", &codeload),
    ] {
        let from = format!("127.0.0.1:{port}");
        assert!(text.contains(&from), "the example lost {from}");
        text = text.replace(&from, &up.addr.to_string());
    }
    assert!(text.contains("base_ejection_time = \"5s\""));
    let dir = temp_dir("stormbreak-guard-cli", "example");
    let path = dir.write("github-edge.toml", &text);
    let guard = GuardProcess::start(
        &path,
        &["--log-format", "json"],
        &[("STORMBREAK_ADMIN_TOKEN", "edge-t0ken")],
    );
    {
        let cus = guard.line_with("listening cus on ");
        let nva_site = guard.line_with("listening nva on ");
        let admin = guard.line_with("admin on ");
        let token_path = "/copilot_internal/v2/token";

        // As shipped: the operators' 403 on the token route, at both sites.
        assert_eq!(tally(&cus, token_path, 5), [(403, 5)].into());
        assert_eq!(tally(&nva_site, token_path, 5), [(403, 5)].into());
        let (code, _) = admin_post(&admin, "/shed/remove", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 200);

        // The staged restore, started by hand: Central US at 5 %, Northern
        // Virginia at nothing until Central US is whole.
        let (code, _) = admin_post(&admin, "/restore/start", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 200);
        assert_eq!(
            token_restore(&admin),
            (true, vec![("cus".into(), 0.05), ("nva".into(), 0.0)])
        );
        let at_5 = tally(&cus, token_path, 100);
        // 5 % of 100: never all, never half (binomial tails below 1e-12).
        let admitted = at_5.get(&200).copied().unwrap_or(0);
        assert!(admitted < 50, "{at_5:?}");
        assert!(at_5.get(&503).copied().unwrap_or(0) > 50, "{at_5:?}");
        assert_eq!(
            at_5.keys().copied().collect::<Vec<_>>(),
            if admitted > 0 {
                vec![200, 503]
            } else {
                vec![503]
            },
            "admitted or the [saturation] answer, nothing else: {at_5:?}"
        );
        assert_eq!(tally(&nva_site, token_path, 20), [(503, 20)].into());
        // Three steps: Central US whole, so Northern Virginia starts.
        for want in [0.25, 0.5, 1.0] {
            let (code, _) = admin_post(&admin, "/restore/step", r#"{"route":"copilot-token"}"#);
            assert_eq!(code, 200);
            assert_eq!(token_restore(&admin).1[0], ("cus".into(), want));
        }
        assert_eq!(token_restore(&admin).1[1], ("nva".into(), 0.05));
        assert_eq!(tally(&cus, token_path, 20), [(200, 20)].into());
        for want in [0.25, 0.5, 1.0] {
            let (code, _) = admin_post(&admin, "/restore/step", r#"{"route":"copilot-token"}"#);
            assert_eq!(code, 200);
            assert_eq!(token_restore(&admin).1[1], ("nva".into(), want));
        }
        assert_eq!(tally(&nva_site, token_path, 20), [(200, 20)].into());
        // Whole everywhere: the restore is over by itself, as the
        // simulator retires a completed ramp.
        assert_eq!(
            token_restore(&admin),
            (false, vec![("cus".into(), 1.0), ("nva".into(), 1.0)])
        );
        let (code, _) = admin_post(&admin, "/restore/stop", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 409, "nothing to stop once it completed");
        let (code, _) = admin_post(&admin, "/restore/step", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 409, "nothing to step once it completed");
        // Started again and stopped by hand: every site admits all.
        let (code, _) = admin_post(&admin, "/restore/start", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 200);
        let (code, _) = admin_post(&admin, "/restore/stop", r#"{"route":"copilot-token"}"#);
        assert_eq!(code, 200);
        assert_eq!(
            token_restore(&admin),
            (false, vec![("cus".into(), 1.0), ("nva".into(), 1.0)])
        );

        // Failover: healthy, the API is served by Central US.
        assert_eq!(get(&cus, "/api/repos"), (200, "cus".to_owned()));
        // Central US fails: clients see its 503s (retried within the
        // budget) until both endpoints are ejected, then Northern Virginia.
        cus_a.answer(503);
        cus_b.answer(503);
        let failed = until(&cus, "/api/repos", 200, "nva", 40);
        // Five failures in a row eject an endpoint: ten attempts, at most
        // three per request, so at least three requests failed first.
        assert!(failed >= 4, "{failed}");
        assert_eq!(get(&cus, "/api/repos"), (200, "nva".to_owned()));
        for ep in [cus_a.addr, cus_b.addr] {
            let series = format!(
                "stormbreak_guard_upstream_endpoint_ejected{{cluster=\"api-cus\",endpoint=\"{ep}\"}}"
            );
            assert_eq!(metric(&admin, &series), Some(1.0), "{series}");
        }
        assert_eq!(
            metric(
                &admin,
                "stormbreak_guard_upstream_endpoints_available{cluster=\"api-cus\"}"
            ),
            Some(0.0)
        );
        let spilled = metric(
            &admin,
            "stormbreak_guard_upstream_responses_total{cluster=\"api-nva\",class=\"2xx\"}",
        )
        .unwrap();
        assert!(spilled >= 2.0, "{spilled}");
        // Central US recovers: once its ejections end, traffic moves back.
        cus_a.answer(200);
        cus_b.answer(200);
        until(&cus, "/api/repos", 200, "cus", 200);
        // The second endpoint was ejected a few attempts after the first, so
        // its ejection may end a moment later (polled; a hang guard bounds it).
        let available = || {
            metric(
                &admin,
                "stormbreak_guard_upstream_endpoints_available{cluster=\"api-cus\"}",
            )
        };
        let mut back = false;
        for _ in 0..200 {
            if available() == Some(2.0) {
                back = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(back, "{:?}", available());
        assert_eq!(get(&cus, "/api/repos"), (200, "cus".to_owned()));
        assert!(
            metric(
                &admin,
                "stormbreak_guard_upstream_responses_total{cluster=\"api-cus\",class=\"5xx\"}"
            )
            .unwrap()
                >= 10.0,
            "five failures per endpoint ejected each"
        );
    }
    let stderr = guard.kill();
    drop((web, cus_a, cus_b, nva, token, codeload));
    // --log-format json: every line is one JSON object; the admin changes
    // are there with who and what.
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let changes: Vec<&str> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "admin change")
        .map(|l| l["fields"]["what"].as_str().unwrap())
        .collect();
    assert_eq!(
        changes,
        [
            "shed.remove",
            "restore.start",
            "restore.step",
            "restore.step",
            "restore.step",
            "restore.step",
            "restore.step",
            "restore.step",
            "restore.start",
            "restore.stop"
        ],
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .filter(|l| l["fields"]["message"] == "admin change")
            .all(|l| l["fields"]["who"]
                .as_str()
                .is_some_and(|w| w.starts_with("test (127.0.0.1:"))),
        "{stderr}"
    );
}

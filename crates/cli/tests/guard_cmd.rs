//! `stormbreak guard`: `--check` validates with file:line:column errors;
//! `--config` serves on loopback until killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

fn write_config(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stormbreak-guard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    let dir = tempdir();
    let good = write_config(&dir, "good.toml", &VALID.replace("ENDPOINT", "127.0.0.1:9"));
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

    let bad = write_config(
        &dir,
        "bad.toml",
        &VALID
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
    let dir = tempdir();
    let path = write_config(
        &dir,
        "serve.toml",
        &VALID.replace("ENDPOINT", &endpoint.to_string()),
    );
    let mut child = bin()
        .args(["guard", "--config"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let result = std::panic::catch_unwind(|| {
        let addr = line
            .trim()
            .strip_prefix("listening edge on ")
            .unwrap_or_else(|| panic!("{line:?}"));
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hi"), "{answer}");
    });
    child.kill().unwrap();
    child.wait().unwrap();
    server.join().unwrap();
    result.unwrap();
}

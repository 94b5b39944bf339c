//! The guard under hostile clients, on loopback: a client cannot open the
//! breaker, lock out the admin API, hold slots past their bounds or route
//! around a rule; and the classic attacks (slowloris, header floods,
//! request smuggling, HTTP/2 rapid reset) stay regression tests.
//! docs/guard.md, "Hardening", lists every bound tested here.
//!
//! Every connection a test opens is bounded in count and time, and every
//! wait is guarded by a timeout that only catches a hang.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{Config, backend, guard, status};
use http::Response;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A hang guard for one exchange, never a timing assert.
const HANG: Duration = Duration::from_secs(10);

/// Opens a connection, writes `raw`, and (when `read`) reads until the
/// guard closes the connection or `HANG` passes; `shutdown` closes the
/// sending side after writing.
async fn raw_exchange(addr: SocketAddr, raw: &[u8], shutdown: bool, read: bool) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    if shutdown {
        s.shutdown().await.unwrap();
    }
    if !read {
        return String::new();
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(HANG, s.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The status of the first response in `answer`, 0 for none.
fn status_of(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Sum of `stormbreak_guard_client_errors_total` over every reason, or
/// for `reason`.
fn client_errors(text: &str, reason: Option<&str>) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("stormbreak_guard_client_errors_total"))
        .filter(|l| reason.is_none_or(|r| l.contains(&format!("reason=\"{r}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits (bounded) until the guard has counted `n` client errors.
async fn until_client_errors(g: &stormbreak_guard::Guard, n: u64) {
    let waited = tokio::time::timeout(HANG, async {
        while client_errors(&g.metrics_text(), None) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the guard counted {} client errors, expected {n}\n{}",
        client_errors(&g.metrics_text(), None),
        g.metrics_text()
    );
}

fn ok() -> Response<Full<Bytes>> {
    status(200)
}

// ---- 1. blame: a client's own failure feeds no upstream policy ---------------

#[tokio::test]
async fn a_client_that_breaks_its_own_upload_cannot_eject_endpoints_or_open_the_breaker() {
    let b = backend(|_| ok()).await;
    let toml = Config::new()
        .listener("edge", "max_body_bytes = 4096")
        .cluster(
            "app",
            &[b.addr],
            r#"outlier = { consecutive_failures = 5, base_ejection_time = "30s", max_ejection_percent = 100 }
breaker = { consecutive_failures = 5, sliding_window_size = 0, wait_duration_in_open_state = "30s" }"#,
        )
        .route("app", "app", "")
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    const EACH: u64 = 12; // well past both thresholds of 5
    let head = "POST /upload HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n";
    let kib = "x".repeat(1024);
    let mut counted = 0;
    // An upload abandoned mid-way: one 1 KiB chunk, then the client closes.
    for _ in 0..EACH {
        let raw = format!("{head}400\r\n{kib}\r\n");
        raw_exchange(edge, raw.as_bytes(), true, false).await;
    }
    counted += EACH;
    until_client_errors(&g, counted).await;
    // Content-Length promised 2 KiB, 1 KiB came.
    for _ in 0..EACH {
        let raw = format!(
            "POST /upload HTTP/1.1\r\nHost: a.example\r\nContent-Length: 2048\r\n\r\n{kib}"
        );
        raw_exchange(edge, raw.as_bytes(), true, false).await;
    }
    counted += EACH;
    until_client_errors(&g, counted).await;
    // A bad chunk size line: 400.
    for _ in 0..EACH {
        let raw = format!("{head}400\r\n{kib}\r\nzz\r\n");
        let answer = raw_exchange(edge, raw.as_bytes(), true, true).await;
        assert_eq!(status_of(&answer), 400, "{answer}");
    }
    counted += EACH;
    // A chunked body past `max_body_bytes` (4 KiB): 413, not 502.
    for _ in 0..EACH {
        let raw = format!("{head}{}0\r\n\r\n", format!("400\r\n{kib}\r\n").repeat(6));
        let answer = raw_exchange(edge, raw.as_bytes(), false, true).await;
        assert_eq!(status_of(&answer), 413, "{answer}");
    }
    counted += EACH;
    until_client_errors(&g, counted).await;
    let text = g.metrics_text();
    assert_eq!(client_errors(&text, Some("body_incomplete")), 2 * EACH);
    assert_eq!(client_errors(&text, Some("body_malformed")), EACH);
    assert_eq!(client_errors(&text, Some("body_too_large")), EACH);
    // The cluster is healthy: nothing ejected, the breaker closed, and a
    // plain request is served.
    assert!(
        text.contains("stormbreak_guard_upstream_endpoints_available{cluster=\"app\"} 1"),
        "{text}"
    );
    assert!(
        !text.contains("reason=\"breaker_open\"} 1"),
        "the breaker refused a request"
    );
    let answer = raw_exchange(
        edge,
        b"GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        false,
        true,
    )
    .await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    g.shutdown().await;
}

// ---- 3. rules see one normalised request ------------------------------------

/// A guard with a catch-all route and two guarded by 403 shed rules: the
/// path `/admin` and the host `internal.example`.
async fn guarded(forward_path: &str) -> (stormbreak_guard::Guard, common::Backend) {
    let b = backend(|seen| {
        let mut r = ok();
        let path = seen.head.uri.path_and_query().map_or("", |p| p.as_str());
        r.headers_mut().insert("seen-path", path.parse().unwrap());
        r
    })
    .await;
    let toml = Config::new()
        .listener("edge", &format!("forward_path = {forward_path:?}"))
        .cluster("app", &[b.addr], "")
        .route("app", "app", "")
        .route("admin", "app", r#"match = { path_prefix = "/admin" }"#)
        .route(
            "internal",
            "app",
            r#"match = { host = "internal.example" }"#,
        )
        .tail(
            r#"[[shed]]
route = "admin"
status = 403

[[shed]]
route = "internal"
status = 403"#,
        )
        .toml();
    (guard(&toml).await, b)
}

#[tokio::test]
async fn no_spelling_of_a_guarded_path_or_host_walks_past_its_rule() {
    for mode in ["raw", "normalized"] {
        let (g, b) = guarded(mode).await;
        let edge = g.local_addr("edge").unwrap();
        let get = |target: &str, host: &str| {
            format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        };
        let attempts = [
            get("/admin/x", "a.example"),
            get("/public/../admin/x", "a.example"),
            get("//admin/x", "a.example"),
            get("/%61dmin/x", "a.example"),
            get("/%2e%2e/admin/x", "a.example"),
            get("/./admin/x", "a.example"),
            get("/public/..;/admin/x", "a.example"),
            get("/public%2F..%2Fadmin/x", "a.example"),
            get("/x", "internal.example"),
            get("/x", "internal.example."),
            get("/x", "INTERNAL.Example:8080"),
            get("http://internal.example/x", "internal.example"),
        ];
        for raw in &attempts {
            let answer = raw_exchange(edge, raw.as_bytes(), false, true).await;
            let s = status_of(&answer);
            assert!(
                s == 403 || s == 400,
                "{mode}: {raw:?} answered {s}, expected a refusal\n{answer}"
            );
        }
        assert_eq!(b.hits(), 0, "{mode}: a guarded request reached the backend");
        // The plain public path is served, and in `normalized` mode an
        // equivalent spelling goes upstream normalised.
        let answer =
            raw_exchange(edge, get("/public/x", "a.example").as_bytes(), false, true).await;
        assert_eq!(status_of(&answer), 200, "{answer}");
        let answer = raw_exchange(
            edge,
            get("/public/./y/../%78?q=%2e", "a.example").as_bytes(),
            false,
            true,
        )
        .await;
        assert_eq!(status_of(&answer), 200, "{mode}: {answer}");
        let seen = answer
            .lines()
            .find_map(|l| l.strip_prefix("seen-path: "))
            .unwrap_or_default();
        let want = if mode == "raw" {
            "/public/./y/../%78?q=%2e"
        } else {
            "/public/x?q=%2e"
        };
        assert_eq!(seen, want, "{mode}");
        g.shutdown().await;
    }
}

#[tokio::test]
async fn a_request_without_exactly_one_authority_is_refused() {
    let (g, b) = guarded("raw").await;
    let edge = g.local_addr("edge").unwrap();
    for raw in [
        // No Host in HTTP/1.1.
        "GET /x HTTP/1.1\r\nConnection: close\r\n\r\n",
        // Two Host field lines, even equal ones.
        "GET /x HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a.example\r\nHost: internal.example\r\nConnection: close\r\n\r\n",
        // An absolute-form target naming another host than Host.
        "GET http://internal.example/x HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        "GET http://a.example/x HTTP/1.1\r\nHost: internal.example\r\nConnection: close\r\n\r\n",
        // Userinfo in the authority.
        "GET /x HTTP/1.1\r\nHost: u@a.example\r\nConnection: close\r\n\r\n",
    ] {
        let answer = raw_exchange(edge, raw.as_bytes(), false, true).await;
        assert_eq!(status_of(&answer), 400, "{raw:?}\n{answer}");
    }
    assert_eq!(b.hits(), 0);
    assert_eq!(
        client_errors(&g.metrics_text(), Some("bad_target")),
        6,
        "each refusal is counted as the client's"
    );
    // HTTP/1.0 may name no host.
    let answer = raw_exchange(edge, b"GET /x HTTP/1.0\r\n\r\n", false, true).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    g.shutdown().await;
}

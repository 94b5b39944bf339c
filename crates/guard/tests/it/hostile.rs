//! The guard under hostile clients, on loopback: a client cannot open the
//! breaker, lock out the admin API, hold slots past their bounds or route
//! around a rule; and the classic attacks (slowloris, header floods,
//! request smuggling, HTTP/2 rapid reset) stay regression tests.
//! docs/guard.md, "Hardening", lists every bound tested here.
//!
//! Every connection a test opens is bounded in count and time, and every
//! wait is guarded by a timeout that only catches a hang.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{Config, backend, guard, status};
use bytes::Bytes;
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

/// A plain GET on a new connection is answered 200.
async fn assert_served(edge: SocketAddr) {
    let answer = raw_exchange(
        edge,
        b"GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
        false,
        true,
    )
    .await;
    assert_eq!(status_of(&answer), 200, "{answer}");
}

/// A guard whose listener `edge` has `listener_extra` lines, in front of a
/// backend answering 200.
async fn edge_to_ok(listener_extra: &str) -> (stormbreak_guard::Guard, crate::common::Backend) {
    let b = backend(|_| ok()).await;
    let toml = Config::new()
        .listener("edge", listener_extra)
        .cluster("app", &[b.addr], "")
        .route("app", "app", "")
        .toml();
    (guard(&toml).await, b)
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
    assert_served(edge).await;
    g.shutdown().await;
}

#[tokio::test]
async fn an_http2_client_that_resets_its_stream_is_counted_as_gone_not_as_upstream_trouble() {
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let b = crate::common::backend_async(move |_| {
        let held = held.clone();
        async move {
            // Held until the test ends (bounded by the hang guard).
            let _ = tokio::time::timeout(HANG, held.notified()).await;
            ok()
        }
    })
    .await;
    let toml = Config::edge()
        .cluster(
            "app",
            &[b.addr],
            r#"outlier = { consecutive_failures = 1, base_ejection_time = "30s", max_ejection_percent = 100 }"#,
        )
        .route("app", "app", "")
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = crate::common::h2c_client();
    for _ in 0..3 {
        let before = b.hits();
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.request(crate::common::get(edge, "/slow")).await }
        });
        let reached = tokio::time::timeout(HANG, async {
            while b.hits() == before {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(reached.is_ok(), "the request never reached the backend");
        // Dropping the request resets its HTTP/2 stream.
        pending.abort();
    }
    let waited = tokio::time::timeout(HANG, async {
        while client_errors(&g.metrics_text(), Some("client_closed")) < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{}", g.metrics_text());
    let text = g.metrics_text();
    assert!(
        text.contains("stormbreak_guard_upstream_endpoints_available{cluster=\"app\"} 1"),
        "{text}"
    );
    release.notify_waiters();
    g.shutdown().await;
}

// ---- 3. rules see one normalised request ------------------------------------

/// A guard with a catch-all route and two guarded by 403 shed rules: the
/// path `/admin` and the host `internal.example`.
async fn guarded(forward_path: &str) -> (stormbreak_guard::Guard, crate::common::Backend) {
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
            // Normalised, these read as /admin once more on a backend that
            // strips `;` parameters or decodes `%2F`.
            get("/admin;/.;/..", "a.example"),
            get("/%2Fadmin/%2F../..", "a.example"),
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

// ---- 2. the admin listener cannot be locked out --------------------------------

/// A connection from `source` (a loopback address) to `addr`.
async fn connect_from(source: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// One request on a new connection from `source`; the whole answer, or
/// `None` when no answer came within `within` (a hang guard).
async fn ask_from(source: &str, addr: SocketAddr, raw: &str, within: Duration) -> Option<String> {
    let mut s = connect_from(source, addr).await;
    tokio::time::timeout(within, async {
        s.write_all(raw.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    })
    .await
    .ok()
    .flatten()
}

fn metric(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn silent_connections_cannot_lock_an_operator_out_of_the_admin_api() {
    let b = backend(|_| ok()).await;
    let dir = crate::common::files::TempDir::new("guard-hostile-admin");
    let token = dir.write("admin.token", "s3cret\n");
    let toml = Config::edge()
        .cluster("app", &[b.addr], "")
        .route("app", "app", "")
        .tail(&format!(
            "[admin]\nbind = \"127.0.0.1:0\"\ntoken_file = {:?}",
            token.display().to_string()
        ))
        .toml();
    let g = guard(&toml).await;
    let admin = g.admin_addr().unwrap();
    // 64 silent connections from eight other addresses fill the cap, and
    // 40 more from the operator's own address fill its share.
    let mut silent = Vec::new();
    for i in 0..64 {
        silent.push(connect_from(&format!("127.0.0.{}", 2 + i % 8), admin).await);
    }
    for _ in 0..40 {
        silent.push(connect_from("127.0.0.1", admin).await);
    }
    let scrape = "GET /metrics HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n";
    // The silent ones are held (the admin's header-read timeout is 5 s);
    // the eviction count below proves room was made for the operator.
    let answer = ask_from("127.0.0.1", admin, scrape, HANG)
        .await
        .expect("the operator got no answer while silent connections were held");
    assert_eq!(status_of(&answer), 200, "{answer}");
    let text = g.metrics_text();
    assert!(
        metric(
            &text,
            "stormbreak_guard_connections_closed_total{listener=\"admin\",reason=\"evicted\"}"
        ) >= 1,
        "{text}"
    );
    // A wrong token is refused, counted, and logged (rate-bounded).
    let bad = "POST /drain HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer wrong\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    for _ in 0..3 {
        let answer = ask_from("127.0.0.10", admin, bad, HANG).await.unwrap();
        assert_eq!(status_of(&answer), 401, "{answer}");
    }
    assert_eq!(
        metric(
            &g.metrics_text(),
            "stormbreak_guard_admin_auth_failures_total"
        ),
        3
    );
    drop(silent);
    g.shutdown().await;
}

// ---- 4. slots are held no longer than documented --------------------------------

/// True once the peer closes `s` (EOF or reset) within the hang guard.
async fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(HANG, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn a_connection_without_a_request_head_is_closed_at_the_header_read_timeout() {
    // Far apart, so which bound closed a connection is never in doubt.
    let (g, _backend) =
        edge_to_ok("header_read_timeout = \"200ms\"\nidle_timeout = \"600s\"").await;
    let edge = g.local_addr("edge").unwrap();
    // Silent; half an HTTP/2 preface (the `auto` builder still deciding);
    // an HTTP/2 preface, SETTINGS and PINGs but never a request.
    let mut silent = TcpStream::connect(edge).await.unwrap();
    let mut preface = TcpStream::connect(edge).await.unwrap();
    preface.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut pinging = TcpStream::connect(edge).await.unwrap();
    pinging
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    pinging.write_all(&h2_frame(4, 0, 0, &[])).await.unwrap();
    let pings = async {
        for _ in 0..200 {
            if pinging
                .write_all(&h2_frame(6, 0, 0, &[0; 8]))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (a, b2, ()) = tokio::join!(
        closed_by_peer(&mut silent),
        closed_by_peer(&mut preface),
        pings
    );
    assert!(a, "a silent connection was held");
    assert!(b2, "a connection stuck in the preface was held");
    // The pinging one ended its loop because the guard closed it.
    let mut buf = [0u8; 64];
    let ended = tokio::time::timeout(HANG, async {
        loop {
            match pinging.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "a pinging HTTP/2 connection was held");
    g.shutdown().await;
}

/// An HTTP/2 frame: type, flags, stream, payload (RFC 9113 §4.1).
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn an_http2_connection_kept_alive_by_pings_is_closed_once_idle() {
    let (g, _backend) = edge_to_ok("idle_timeout = \"300ms\"").await;
    let edge = g.local_addr("edge").unwrap();
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(edge).await.unwrap());
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            // PINGs every 50 ms: bytes never stop moving.
            .keep_alive_interval(Duration::from_millis(50))
            .keep_alive_while_idle(true)
            .handshake(io)
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let request = http::Request::get(format!("http://{edge}/"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = tokio::time::timeout(HANG, send.send_request(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.status(), 200);
    drop(answer);
    // The guard sends GOAWAY once no stream has been open for idle_timeout.
    let closed = tokio::time::timeout(HANG, conn).await;
    assert!(
        closed.is_ok(),
        "the pinging connection was held past idle_timeout"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn one_client_address_cannot_take_every_connection_slot() {
    let (g, _backend) = edge_to_ok("max_connections = 200\nmax_connections_per_client = 4\ntrusted_proxies = [\"127.0.0.4\"]\nheader_read_timeout = \"60s\"").await;
    let edge = g.local_addr("edge").unwrap();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from("127.0.0.2", edge).await);
    }
    // Past its cap, a peer's connections are closed at once.
    for _ in 0..6 {
        let mut s = connect_from("127.0.0.2", edge).await;
        assert!(closed_by_peer(&mut s).await);
    }
    let get = "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n";
    // Another client is served; a trusted proxy may hold more than the cap.
    let answer = ask_from("127.0.0.3", edge, get, HANG).await.unwrap();
    assert_eq!(status_of(&answer), 200, "{answer}");
    for _ in 0..8 {
        held.push(connect_from("127.0.0.4", edge).await);
    }
    let answer = ask_from("127.0.0.4", edge, get, HANG).await.unwrap();
    assert_eq!(
        status_of(&answer),
        200,
        "a trusted proxy is exempt: {answer}"
    );
    assert_eq!(
        metric(
            &g.metrics_text(),
            "stormbreak_guard_connections_closed_total{listener=\"edge\",reason=\"per_client\"}"
        ),
        6
    );
    // The capped client's slots come back as its connections close.
    held.drain(..4);
    // The guard notices the closes in its own time: retry, bounded.
    let mut served = false;
    for _ in 0..200 {
        let answer = ask_from("127.0.0.2", edge, get, HANG).await;
        if answer.as_deref().map(status_of) == Some(200) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served, "the capped client never got its slots back");
    drop(held);
    g.shutdown().await;
}

// ---- 6. the smaller ones ------------------------------------------------------

#[tokio::test]
async fn a_half_closed_client_still_gets_its_answer() {
    let b = backend(|_| ok()).await;
    let g = guard(&crate::common::one_route(&b, "", "")).await;
    let edge = g.local_addr("edge").unwrap();
    for raw in [
        "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\nhello",
    ] {
        let answer = raw_exchange(edge, raw.as_bytes(), true, true).await;
        assert_eq!(status_of(&answer), 200, "{raw:?}: {answer}");
    }
    g.shutdown().await;
}

// ---- kept as regression tests: smuggling and rapid reset ------------------------

#[tokio::test]
async fn ambiguous_framing_never_smuggles_a_request_to_the_backend() {
    let b = backend(|_| ok()).await;
    let g = guard(&crate::common::one_route(&b, "", "")).await;
    let edge = g.local_addr("edge").unwrap();
    // Each probe is one request by its framing, with a second hidden in
    // the body under another reading; the backend must see at most one.
    let hidden = "GET /smuggled HTTP/1.1\r\nHost: a.example\r\n\r\n";
    let probes = [
        // CL.TE: Transfer-Encoding wins (RFC 9112 §6.3) or it is refused.
        format!(
            "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n{hidden}"
        ),
        // Two different Content-Length values.
        format!(
            "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{hidden}",
            hidden.len()
        ),
        // An obfuscated Transfer-Encoding.
        format!(
            "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: xchunked\r\nConnection: close\r\n\r\n0\r\n\r\n{hidden}"
        ),
        // Whitespace before the colon (RFC 9112 §5.1: must be rejected).
        format!(
            "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding : chunked\r\nConnection: close\r\n\r\n0\r\n\r\n{hidden}"
        ),
    ];
    for probe in &probes {
        let before = b.hits();
        let answer = raw_exchange(edge, probe.as_bytes(), false, true).await;
        assert!(
            b.hits() - before <= 1,
            "{probe:?} reached the backend as {} requests: {answer}",
            b.hits() - before
        );
        assert_eq!(
            answer.matches("HTTP/1.1 ").count(),
            usize::from(!answer.is_empty()),
            "one answer at most: {answer}"
        );
    }
    g.shutdown().await;
}

#[tokio::test]
async fn an_http2_rapid_reset_flood_is_cut_off_and_others_are_served() {
    let b = backend(|_| ok()).await;
    let g = guard(&crate::common::one_route(&b, "", "")).await;
    let edge = g.local_addr("edge").unwrap();
    let mut s = TcpStream::connect(edge).await.unwrap();
    let mut flood = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    flood.extend(h2_frame(4, 0, 0, &[]));
    // HPACK (RFC 7541 Appendix A): :method GET, :scheme http, :path /,
    // :authority a.example as a literal without indexing.
    let mut headers = vec![0x82, 0x86, 0x84, 0x01, 9];
    headers.extend_from_slice(b"a.example");
    const STREAMS: u32 = 5_000;
    for i in 0..STREAMS {
        let id = 2 * i + 1;
        // HEADERS with END_STREAM | END_HEADERS, then RST_STREAM CANCEL.
        flood.extend(h2_frame(1, 0x5, id, &headers));
        flood.extend(h2_frame(3, 0, id, &8u32.to_be_bytes()));
    }
    // The guard may close the connection mid-flood (GOAWAY): that is the point.
    let _ = tokio::time::timeout(HANG, s.write_all(&flood)).await;
    let _ = closed_by_peer(&mut s).await;
    assert!(
        b.hits() < u64::from(STREAMS) / 10,
        "{} of {STREAMS} reset streams reached the backend",
        b.hits()
    );
    // Everyone else is still served.
    assert_served(edge).await;
    g.shutdown().await;
}

#[tokio::test]
async fn a_kept_alive_http1_connection_waiting_for_its_next_head_is_closed_at_the_header_read_timeout()
 {
    let (g, _backend) =
        edge_to_ok("header_read_timeout = \"200ms\"\nidle_timeout = \"600s\"").await;
    let edge = g.local_addr("edge").unwrap();
    let mut s = TcpStream::connect(edge).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .await
        .unwrap();
    // The answer, then nothing: hyper's header timer runs while the
    // connection waits for the next head (docs/guard.md, "Bounds").
    assert!(
        closed_by_peer(&mut s).await,
        "held past header_read_timeout"
    );
    g.shutdown().await;
}

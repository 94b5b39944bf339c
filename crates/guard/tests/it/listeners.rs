//! Listeners on reload: an added one serves at once; a removed one refuses
//! new connects, finishes its requests in flight and closes the rest at its
//! drain deadline; a changed one keeps its socket (new settings for new
//! connections) or moves to its new address; a listener that cannot bind
//! refuses the whole reload; the connection cap keeps counting across a
//! reload; and a steady loop of requests fails nothing through all of it.
//! A listener at its cap refuses or queues (`at_cap`), with the backlog
//! asked.

mod at_cap;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::*;
use http_body_util::BodyExt;
use stormbreak_guard::{Guard, GuardConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Hang guard for every wait below (never a timing assert).
const HANG: Duration = Duration::from_secs(10);

/// A config of `listeners` (name, `bind`, extra lines), one cluster of `b`
/// and one route `app` (with `route_extra`) taking everything.
fn config(b: &Backend, listeners: &[(&str, &str, &str)], route_extra: &str) -> String {
    listeners
        .iter()
        .fold(Config::new(), |c, (name, bind, extra)| {
            c.listener_at(name, bind, extra)
        })
        .cluster("app", &[b.addr], "")
        .route("app", "app", route_extra)
        .toml()
}

fn parse(text: &str) -> GuardConfig {
    GuardConfig::parse("test.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

const ANY: &str = "127.0.0.1:0";

/// A backend that answers `/held…` only once `gate` gives a permit, and
/// everything else at once.
async fn gated(gate: Arc<tokio::sync::Semaphore>) -> Backend {
    backend_async(move |seen| {
        let gate = gate.clone();
        async move {
            if seen.head.uri.path().starts_with("/held") {
                let _ = gate.acquire().await.map(|p| p.forget());
            }
            status(200)
        }
    })
    .await
}

/// Writes one HTTP/1.1 request with `body` on `s`.
async fn write_request(s: &mut TcpStream, method: &str, path: &str, body: &[u8]) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
}

/// Reads one response (head and `content-length` body) from `s`; its status.
async fn read_response(s: &mut TcpStream) -> u16 {
    tokio::time::timeout(HANG, async {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut byte).await.unwrap(), 1, "closed mid-head");
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        s.read_exact(&mut body).await.unwrap();
        head[9..12].parse().unwrap()
    })
    .await
    .expect("no hang")
}

/// One request on an open connection; its status.
async fn request(s: &mut TcpStream, method: &str, path: &str, body: &[u8]) -> u16 {
    write_request(s, method, path, body).await;
    read_response(s).await
}

/// Reads until the peer closes; what was left to read.
async fn rest(s: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(HANG, s.read_to_end(&mut rest))
        .await
        .expect("no hang")
        .unwrap_or_default();
    rest
}

/// Retries a connect to `addr` until it is refused (the accept loop closes
/// its socket when it next runs); panics if it never is.
async fn until_refused(addr: SocketAddr) {
    for _ in 0..500 {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
            // Connected, or reset as the socket closed under the handshake.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("connect {addr}: {e}"),
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{addr} still accepts after its listener was removed");
}

/// Waits (bounded) until `b` has seen `n` requests.
async fn hits(b: &Backend, n: u64) {
    for _ in 0..500 {
        if b.hits() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("backend saw {} requests, expected {n}", b.hits());
}

/// The value of the metric line starting with `name` (labels included).
fn metric(g: &Guard, name: &str) -> String {
    let text = g.metrics_text();
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .to_owned()
}

/// A loopback port free now (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind(ANY)
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_reload_adds_a_listener_that_serves_at_once() {
    let b = backend(|_| status(200)).await;
    let g = guard(&config(&b, &[("edge", ANY, "")], "")).await;
    let edge = g.local_addr("edge").unwrap();
    assert_eq!(g.local_addr("second"), None);

    let done = g
        .reload(&parse(&config(
            &b,
            &[("edge", ANY, ""), ("second", ANY, "")],
            "",
        )))
        .unwrap();
    assert_eq!(done.listeners.added, ["second"]);
    assert!(done.listeners.removed.is_empty() && done.listeners.updated.is_empty());
    // The route did not change: its state was kept.
    assert_eq!(done.kept, ["app"]);
    let second = g.local_addr("second").unwrap();
    assert_ne!(second, edge);
    let client = http1_client();
    assert_eq!(send(&client, get(second, "/")).await.0.status, 200);
    assert_eq!(send(&client, get(edge, "/")).await.0.status, 200);
    assert_eq!(g.local_addr("edge"), Some(edge), "edge kept its socket");
    assert_eq!(
        metric(&g, "stormbreak_guard_connection_cap{listener=\"second\"}"),
        "10000"
    );
    assert_eq!(b.hits(), 2);
    g.shutdown().await;
}

#[tokio::test]
async fn a_removed_listener_refuses_new_connects_and_finishes_its_request_in_flight() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let b = gated(gate.clone()).await;
    let g = guard(&config(&b, &[("edge", ANY, ""), ("side", ANY, "")], "")).await;
    let (edge, side) = (g.local_addr("edge").unwrap(), g.local_addr("side").unwrap());
    // On side: a keep-alive connection, idle after one answer, and a
    // request the backend holds.
    let mut idle = TcpStream::connect(side).await.unwrap();
    assert_eq!(request(&mut idle, "GET", "/quick", b"").await, 200);
    let mut busy = TcpStream::connect(side).await.unwrap();
    write_request(&mut busy, "GET", "/held", b"").await;
    hits(&b, 2).await;

    let done = g
        .reload(&parse(&config(&b, &[("edge", ANY, "")], "")))
        .unwrap();
    assert_eq!(done.listeners.removed, ["side"]);
    assert_eq!(g.local_addr("side"), None);
    // New connects are refused; the idle connection is closed at once.
    until_refused(side).await;
    assert_eq!(rest(&mut idle).await, b"");
    // The other listener serves on.
    assert_eq!(send(&http1_client(), get(edge, "/")).await.0.status, 200);
    // The request in flight finishes, then its connection closes.
    gate.add_permits(1);
    assert_eq!(read_response(&mut busy).await, 200);
    assert_eq!(rest(&mut busy).await, b"");
    g.shutdown().await;
}

#[tokio::test]
async fn a_removed_listener_closes_what_is_still_open_at_its_drain_deadline() {
    // The backend never answers /held: only the deadline ends the request.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let b = gated(gate.clone()).await;
    let g = guard(&config(
        &b,
        &[("edge", ANY, ""), ("side", ANY, "drain_timeout = \"50ms\"")],
        "",
    ))
    .await;
    let side = g.local_addr("side").unwrap();
    let mut busy = TcpStream::connect(side).await.unwrap();
    write_request(&mut busy, "GET", "/held", b"").await;
    hits(&b, 1).await;
    g.reload(&parse(&config(&b, &[("edge", ANY, "")], "")))
        .unwrap();
    // Closed without an answer (the deadline itself is tested in virtual
    // time in listen_set's unit tests).
    assert_eq!(rest(&mut busy).await, b"");
    g.shutdown().await;
}

#[tokio::test]
async fn a_reload_whose_new_listener_cannot_bind_is_refused_whole() {
    let b = backend(|_| status(200)).await;
    let g = guard(&config(&b, &[("edge", ANY, "")], "")).await;
    let edge = g.local_addr("edge").unwrap();
    let taken = std::net::TcpListener::bind(ANY).unwrap();
    let port = taken.local_addr().unwrap().port();
    let busy = format!("127.0.0.1:{port}");

    // The reload changes edge's cap and the route, adds `third` (bound
    // first) and `second` on a port in use.
    let text = config(
        &b,
        &[
            ("edge", ANY, "max_connections = 5"),
            ("third", ANY, ""),
            ("second", &busy, ""),
        ],
        "criticality = \"sheddable\"",
    );
    let e = g.reload(&parse(&text)).unwrap_err();
    let header = text
        .lines()
        .position(|l| l.contains("name = \"second\""))
        .unwrap();
    let at = format!("test.toml:{header}:1: listener \"second\": cannot bind {busy}: ");
    assert!(e.starts_with(&at), "{e}");
    assert!(e.ends_with("; the old listeners and config stay"), "{e}");
    // Nothing of it is in force: no new listener, edge's old cap, and the
    // old listener serves.
    assert_eq!(g.local_addr("third"), None);
    assert_eq!(g.local_addr("second"), None);
    assert_eq!(g.local_addr("edge"), Some(edge));
    assert_eq!(
        metric(&g, "stormbreak_guard_connection_cap{listener=\"edge\"}"),
        "10000"
    );
    assert_eq!(send(&http1_client(), get(edge, "/")).await.0.status, 200);

    // Once the port is free, the same reload goes through.
    drop(taken);
    let done = g.reload(&parse(&text)).unwrap();
    assert_eq!(done.listeners.added, ["third", "second"]);
    assert_eq!(done.listeners.updated, ["edge"]);
    assert_eq!(done.rebuilt, ["app"]);
    let second = g.local_addr("second").unwrap();
    assert_eq!(second.port(), port);
    assert_eq!(send(&http1_client(), get(second, "/")).await.0.status, 200);
    assert_eq!(
        metric(&g, "stormbreak_guard_connection_cap{listener=\"edge\"}"),
        "5"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn a_changed_listener_keeps_its_socket_or_moves_to_its_new_bind() {
    let b = backend(|_| status(200)).await;
    let g = guard(&config(&b, &[("edge", ANY, "")], "")).await;
    let edge = g.local_addr("edge").unwrap();
    let mut before = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut before, "GET", "/", b"").await, 200);

    // Only a non-socket field changes: same socket, and new connections
    // get the new limit while the open one keeps its own.
    let done = g
        .reload(&parse(&config(
            &b,
            &[("edge", ANY, "max_body_bytes = 10")],
            "",
        )))
        .unwrap();
    assert_eq!(done.listeners.updated, ["edge"]);
    assert!(done.listeners.moved.is_empty());
    assert_eq!(g.local_addr("edge"), Some(edge));
    let mut after = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut after, "POST", "/", &[b'x'; 100]).await, 413);
    assert_eq!(request(&mut before, "POST", "/", &[b'x'; 100]).await, 200);

    // A new bind: the listener moves; the old address refuses, and the
    // old socket's idle connection closes.
    let to = format!("127.0.0.1:{}", free_port());
    let done = g
        .reload(&parse(&config(&b, &[("edge", &to, "")], "")))
        .unwrap();
    assert_eq!(done.listeners.moved, ["edge"]);
    let moved = g.local_addr("edge").unwrap();
    assert_eq!(moved.to_string(), to);
    assert_eq!(send(&http1_client(), get(moved, "/")).await.0.status, 200);
    until_refused(edge).await;
    assert_eq!(rest(&mut before).await, b"");
    g.shutdown().await;
}

#[tokio::test]
async fn the_connection_cap_keeps_counting_open_connections_across_reloads() {
    let b = backend(|_| status(200)).await;
    let cap = |n: u32| config(&b, &[("edge", ANY, &format!("max_connections = {n}"))], "");
    let g = guard(&cap(1)).await;
    let edge = g.local_addr("edge").unwrap();
    let mut a = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut a, "GET", "/", b"").await, 200);
    let open = "stormbreak_guard_connections{listener=\"edge\"}";
    let size = "stormbreak_guard_connection_cap{listener=\"edge\"}";
    assert_eq!(
        (metric(&g, open), metric(&g, size)),
        ("1".into(), "1".into())
    );

    // Raised: the open connection still counts (a fresh cap would read 0
    // and allow one more than asked), and a second one is served.
    g.reload(&parse(&cap(2))).unwrap();
    assert_eq!(
        (metric(&g, open), metric(&g, size)),
        ("1".into(), "2".into())
    );
    let mut c = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut c, "GET", "/", b"").await, 200);
    assert_eq!(metric(&g, open), "2");

    // Lowered below what is open: nothing open is cut.
    g.reload(&parse(&cap(1))).unwrap();
    assert_eq!(metric(&g, size), "1");
    assert_eq!(request(&mut a, "GET", "/", b"").await, 200);
    assert_eq!(request(&mut c, "GET", "/", b"").await, 200);
    // Once both close, the cap of one serves a new connection.
    drop((a, c));
    let mut d = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut d, "GET", "/", b"").await, 200);
    g.shutdown().await;
}

#[tokio::test]
async fn a_steady_loop_on_a_kept_listener_fails_nothing_across_listener_reloads() {
    const REQUESTS: u64 = 200;
    let b = backend(|_| status(200)).await;
    let g = guard(&config(&b, &[("edge", ANY, "")], "")).await;
    let edge = g.local_addr("edge").unwrap();
    let failed = Arc::new(AtomicU64::new(0));
    // Two bounded loops on edge: HTTP/1.1 keep-alive and h2c.
    let loops: Vec<_> = [http1_client(), h2c_client()]
        .into_iter()
        .map(|client| {
            let failed = failed.clone();
            tokio::spawn(async move {
                for i in 0..REQUESTS {
                    let ok = tokio::time::timeout(HANG, async {
                        let r = client.request(get(edge, &format!("/{i}"))).await.ok()?;
                        let status = r.status();
                        r.into_body().collect().await.ok()?;
                        Some(status == 200)
                    })
                    .await;
                    if ok != Ok(Some(true)) {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();

    // Meanwhile: add a listener, change edge's non-socket settings, try a
    // listener that cannot bind, remove the added one; over and over.
    let taken = std::net::TcpListener::bind(ANY).unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let configs = [
        (
            config(&b, &[("edge", ANY, ""), ("side", ANY, "")], ""),
            true,
        ),
        (
            config(
                &b,
                &[("edge", ANY, "max_body_bytes = 1000"), ("side", ANY, "")],
                "",
            ),
            true,
        ),
        (
            config(&b, &[("edge", ANY, ""), ("late", &busy, "")], ""),
            false,
        ),
        (config(&b, &[("edge", ANY, "")], ""), true),
    ];
    let mut reloads = 0;
    for round in 0..400 {
        if loops.iter().all(|l| l.is_finished()) {
            break;
        }
        let (text, ok) = &configs[round % configs.len()];
        assert_eq!(g.reload(&parse(text)).is_ok(), *ok, "round {round}");
        reloads += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for l in loops {
        l.await.unwrap();
    }
    assert!(reloads >= configs.len(), "only {reloads} reloads ran");
    assert_eq!(failed.load(Ordering::SeqCst), 0);
    assert_eq!(b.hits(), 2 * REQUESTS);
    assert_eq!(g.local_addr("edge"), Some(edge));
    drop(taken);
    g.shutdown().await;
}

#[tokio::test]
async fn a_route_restoring_every_listener_takes_an_added_one_as_a_site_for_its_next_restore() {
    let b = backend(|_| status(200)).await;
    let dir = crate::common::files::TempDir::new("guard-listeners-restore");
    let token = dir.write("token", "tok\n");
    let admin = format!(
        "[admin]\nbind = \"127.0.0.1:0\"\ntoken_file = {:?}\n",
        token.display().to_string()
    );
    // No restore_sites: every listener is a site; the restore runs from start.
    let restore = "restore = { ramp = { steps = [0.05, 0.25, 1.0], hold = \"1h\" } }";
    let text =
        |listeners: &[(&str, &str, &str)]| format!("{}\n{admin}", config(&b, listeners, restore));
    let g = guard(&text(&[("a", ANY, "")])).await;
    let admin_addr = g.admin_addr().unwrap();
    let client = http1_client();
    let sites = |state: serde_json::Value| -> Vec<String> {
        state["routes"][0]["restore"]["fractions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[0].as_str().unwrap().to_owned())
            .collect()
    };
    let state = || async {
        let (_, body) = send(&client, get(admin_addr, "/state")).await;
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()
    };
    let post = |path: &str| {
        http::Request::post(format!("http://{admin_addr}{path}"))
            .header("authorization", "Bearer tok")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                br#"{"route":"app"}"#,
            )))
            .unwrap()
    };
    assert_eq!(sites(state().await), ["a"]);

    // Listener b added mid-restore: the route is kept, and so is its
    // running restore with the sites it started with; b is not one of
    // them, so it admits nothing on the route while the restore runs.
    let done = g
        .reload(&parse(&text(&[("a", ANY, ""), ("b", ANY, "")])))
        .unwrap();
    assert_eq!(done.kept, ["app"]);
    assert_eq!(sites(state().await), ["a"]);
    let on_b = g.local_addr("b").unwrap();
    assert_eq!(send(&client, get(on_b, "/")).await.0.status, 503);

    // Stopped and started again: the next restore has both sites.
    assert_eq!(send(&client, post("/restore/stop")).await.0.status, 200);
    assert_eq!(send(&client, get(on_b, "/")).await.0.status, 200);
    assert_eq!(send(&client, post("/restore/start")).await.0.status, 200);
    assert_eq!(sites(state().await), ["a", "b"]);

    // Removed again while no restore runs: the sites follow at once.
    assert_eq!(send(&client, post("/restore/stop")).await.0.status, 200);
    g.reload(&parse(&text(&[("a", ANY, "")]))).unwrap();
    assert_eq!(sites(state().await), ["a"]);
    g.shutdown().await;
}

//! The proxy core over loopback: HTTP/1.1 and h2c in and out, header
//! hygiene, routing, never an open proxy, hardening.

use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A backend that answers with what it saw, in response headers.
async fn echo() -> Backend {
    backend(|seen| {
        let mut r = http::Response::new(Full::new(seen.body.clone()));
        let h = r.headers_mut();
        let copy = |name: &str| {
            seen.head
                .headers
                .get(name)
                .cloned()
                .unwrap_or(http::HeaderValue::from_static("-"))
        };
        h.insert("seen-xff", copy("x-forwarded-for"));
        h.insert("seen-forwarded", copy("forwarded"));
        h.insert("seen-host", copy("host"));
        h.insert("seen-secret", copy("x-secret"));
        h.insert("seen-class", copy("x-stormbreak-criticality"));
        h.insert(
            "seen-path",
            seen.head
                .uri
                .path_and_query()
                .unwrap()
                .as_str()
                .parse()
                .unwrap(),
        );
        h.insert(
            "seen-version",
            format!("{:?}", seen.head.version).parse().unwrap(),
        );
        r
    })
    .await
}

fn config(b: &Backend, cluster_protocol: &str) -> String {
    format!(
        r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["{}"]
protocol = "{cluster_protocol}"

[[route]]
name = "app"
match = {{ host = "app.example" }}
cluster = "app"
"#,
        b.addr
    )
}

#[tokio::test]
async fn http1_and_h2c_in_and_out_with_forwarded_headers_and_no_hop_by_hop() {
    let b = echo().await;
    for upstream in ["http1", "h2c"] {
        // HTTP/2 routes by :authority (RFC 9113 §8.3.1), which a client
        // connecting to the edge address sets to that address: match all.
        let catch_all = config(&b, upstream).replace("match = { host = \"app.example\" }\n", "");
        let g = guard(&catch_all).await;
        let edge = g.local_addr("edge").unwrap();
        for (client, version) in [(http1_client(), "HTTP/1.1"), (h2c_client(), "HTTP/2.0")] {
            let mut req = Request::post(format!("http://{edge}/a/b?q=1"));
            // HTTP/2 carries the host in :authority; a Host naming another
            // host would be malformed (RFC 9113 §8.3.1).
            if version == "HTTP/1.1" {
                req = req.header("host", "app.example");
            }
            let req = req
                .header("connection", "x-secret")
                .header("x-secret", "do not forward")
                .header("x-forwarded-for", "6.6.6.6")
                .header("x-stormbreak-criticality", "critical_plus")
                .body(Full::new(Bytes::from_static(b"hello")))
                .unwrap();
            let (parts, body) = send(&client, req).await;
            let ctx = format!("{version} in, {upstream} out");
            assert_eq!(parts.status, 200, "{ctx}");
            assert_eq!(&body[..], b"hello", "{ctx}");
            let h = &parts.headers;
            assert_eq!(h["seen-path"], "/a/b?q=1", "{ctx}");
            if version == "HTTP/1.1" {
                assert_eq!(h["seen-host"], "app.example", "{ctx}");
            }
            // An untrusted peer's X-Forwarded-For is replaced, not extended.
            assert_eq!(h["seen-xff"], "127.0.0.1", "{ctx}");
            assert_eq!(h["seen-forwarded"], "for=127.0.0.1;proto=http", "{ctx}");
            if version == "HTTP/1.1" {
                assert_eq!(
                    h["seen-secret"], "-",
                    "a header named by Connection is hop-by-hop: {ctx}"
                );
            }
            // An untrusted criticality header is ignored: the route's class is sent on.
            assert_eq!(h["seen-class"], "critical", "{ctx}");
            let expect = if upstream == "h2c" {
                "HTTP/2.0"
            } else {
                "HTTP/1.1"
            };
            assert_eq!(h["seen-version"], expect, "{ctx}");
        }
        assert!(g.stats().requests() >= 2);
    }
}

#[tokio::test]
async fn trusted_proxies_extend_xff_and_set_the_class() {
    let b = echo().await;
    let toml = config(&b, "http1").replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\ntrusted_proxies = [\"127.0.0.0/8\"]",
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let req = Request::get(format!("http://{edge}/"))
        .header("host", "app.example")
        .header("x-forwarded-for", "203.0.113.9")
        .header("x-stormbreak-criticality", "sheddable")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (parts, _) = send(&http1_client(), req).await;
    assert_eq!(parts.headers["seen-xff"], "203.0.113.9, 127.0.0.1");
    assert_eq!(parts.headers["seen-class"], "sheddable");
}

#[tokio::test]
async fn unmatched_hosts_get_404_and_absolute_uris_never_pick_the_upstream() {
    let b = echo().await;
    let other = echo().await;
    let g = guard(&config(&b, "http1")).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let req = Request::get(format!("http://{edge}/"))
        .header("host", "evil.example")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (parts, _) = send(&client, req).await;
    assert_eq!(parts.status, 404);
    assert_eq!(g.stats().no_route(), 1);

    // An absolute-form request whose Host names another server has no
    // single authority: 400 (RFC 9112 §3.2.2), and nobody hears of it.
    let raw = |host: &str| {
        format!("GET http://app.example/x HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    let answer = exchange(edge, &raw(&other.addr.to_string())).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // With one authority, it picks the route (app.example) and the
    // configured endpoint gets the request: `other` never hears of it.
    let answer = exchange(edge, &raw("APP.example.")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(b.hits(), 1);
    assert_eq!(other.hits(), 0);
}

/// Writes `raw` on a new connection and reads until the guard closes it.
async fn exchange(edge: std::net::SocketAddr, raw: &str) -> String {
    let mut s = TcpStream::connect(edge).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    answer
}

#[tokio::test]
async fn connection_refused_is_a_502_and_keep_alive_connections_are_pooled() {
    let b = echo().await;
    let g = guard(&config(&b, "http1")).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..20 {
        let req = Request::get(format!("http://{edge}/"))
            .header("host", "app.example")
            .body(Full::new(Bytes::new()))
            .unwrap();
        assert_eq!(send(&client, req).await.0.status, 200);
    }
    assert_eq!(b.hits(), 20);
    // A port nothing listens on: bind, read the port, close.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let toml = config(&b, "http1").replace(&b.addr.to_string(), &dead.to_string());
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let req = Request::get(format!("http://{edge}/"))
        .header("host", "app.example")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(send(&client, req).await.0.status, 502);
}

#[tokio::test]
async fn malformed_requests_get_400_and_the_guard_keeps_serving() {
    let b = echo().await;
    let g = guard(&config(&b, "http1")).await;
    let edge = g.local_addr("edge").unwrap();
    for garbage in [
        &b"NOT HTTP AT ALL\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: app.example\r\nBad Header\r\n\r\n",
        b"\x00\x01\x02\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(edge).await.unwrap();
        s.write_all(garbage).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    }
    // Too many headers: 431.
    let mut s = TcpStream::connect(edge).await.unwrap();
    let mut raw = String::from("GET / HTTP/1.1\r\nHost: app.example\r\n");
    for i in 0..150 {
        raw.push_str(&format!("x-h{i}: v\r\n"));
    }
    raw.push_str("\r\n");
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let req = Request::get(format!("http://{edge}/"))
        .header("host", "app.example")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(
        send(&http1_client(), req).await.0.status,
        200,
        "still serving"
    );
}

#[tokio::test]
async fn a_declared_body_over_the_limit_gets_413_before_upstream() {
    let b = echo().await;
    let toml = config(&b, "http1").replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\nmax_body_bytes = 10",
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let req = Request::post(format!("http://{edge}/"))
        .header("host", "app.example")
        .body(Full::new(Bytes::from_static(b"more than ten bytes")))
        .unwrap();
    assert_eq!(send(&http1_client(), req).await.0.status, 413);
    assert_eq!(b.hits(), 0);
}

#[tokio::test]
async fn a_slowloris_client_is_cut_off_while_others_are_served() {
    let b = echo().await;
    let toml = config(&b, "http1").replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\nheader_read_timeout = \"300ms\"",
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let mut slow = TcpStream::connect(edge).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: app.example\r\n")
        .await
        .unwrap();
    // Dribble one header byte at a time; the guard must hang up. Bounded
    // at 200 bytes (20 s) so a guard that never cuts off fails, not hangs.
    let dribble = async {
        for _ in 0..200 {
            if slow.write_all(b"x").await.is_err() {
                return true;
            }
            let mut buf = [0u8; 256];
            match tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => return true, // an error response, then close
                Err(_) => {}
            }
        }
        false
    };
    let client = http1_client();
    let served = async {
        for _ in 0..5 {
            let req = Request::get(format!("http://{edge}/"))
                .header("host", "app.example")
                .body(Full::new(Bytes::new()))
                .unwrap();
            assert_eq!(send(&client, req).await.0.status, 200);
        }
    };
    let (cut_off, ()) = tokio::join!(dribble, served);
    assert!(cut_off, "the slow client was never cut off");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let b = echo().await;
    let toml = config(&b, "http1").replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\nidle_timeout = \"200ms\"",
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let mut s = TcpStream::connect(edge).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: app.example\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Then silence: the guard closes the connection (bounded wait: 10 s).
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "idle connection left open");
}

#[tokio::test]
async fn curl_over_http1_and_h2c() {
    let Some(curl) = curl() else { return };
    let b = echo().await;
    let g = guard(&config(&b, "h2c")).await;
    let edge = g.local_addr("edge").unwrap();
    for flag in ["--http1.1", "--http2-prior-knowledge"] {
        let out = tokio::process::Command::new(curl)
            .args([
                "-sS",
                "-i",
                "--max-time",
                "10",
                flag,
                "-H",
                "host: app.example",
                "-d",
                "ping",
            ])
            .arg(format!("http://{edge}/curl"))
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
        assert!(
            out.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status_line = if flag == "--http1.1" {
            "http/1.1 200"
        } else {
            "http/2 200"
        };
        assert!(text.starts_with(status_line), "{flag}: {text}");
        assert!(text.contains("seen-path: /curl"), "{flag}: {text}");
        assert!(text.ends_with("ping"), "{flag}: {text}");
    }
}

#[tokio::test]
async fn over_max_connections_a_connection_waits_until_one_closes() {
    let b = echo().await;
    let toml = config(&b, "http1").replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\nmax_connections = 1",
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let request = b"GET / HTTP/1.1\r\nHost: app.example\r\n\r\n";
    let mut first = TcpStream::connect(edge).await.unwrap();
    first.write_all(request).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), first.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The first connection stays open (keep-alive): the second is not
    // accepted, so its request is not answered while the first lives.
    let mut second = TcpStream::connect(edge).await.unwrap();
    second.write_all(request).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(300), second.read(&mut buf)).await;
    assert!(waited.is_err(), "answered over the connection cap");
    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(10), second.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

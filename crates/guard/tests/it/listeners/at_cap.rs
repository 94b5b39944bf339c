//! A listener at its connection cap: `at_connection_cap = "refuse"`
//! resets the connection beyond it at once and counts it; and the kernel
//! listen queue is the `backlog` asked.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{ANY, HANG, config, metric, request};
use crate::common::*;

/// Waits (bounded) until `name` reads `want`.
async fn until_metric(g: &stormbreak_guard::Guard, name: &str, want: &str) {
    for _ in 0..500 {
        if g.metrics_text()
            .lines()
            .any(|l| l.strip_prefix(name).is_some_and(|v| v.trim() == want))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} never read {want}:\n{}", g.metrics_text());
}

#[tokio::test]
async fn at_its_cap_a_refusing_listener_resets_the_next_connection_and_serves_once_one_closes() {
    let b = backend(|_| status(200)).await;
    let g = guard(&config(
        &b,
        &[(
            "edge",
            ANY,
            "max_connections = 2\nat_connection_cap = \"refuse\"",
        )],
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let mut first = TcpStream::connect(edge).await.unwrap();
    let mut second = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut first, "GET", "/", b"").await, 200);
    assert_eq!(request(&mut second, "GET", "/", b"").await, 200);
    // The third gets through the kernel's handshake, then a reset: not
    // an answer, not a wait in the backlog.
    let mut third = TcpStream::connect(edge).await.unwrap();
    let _ = third
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n")
        .await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(HANG, third.read(&mut buf))
        .await
        .expect("the connection over the cap waited instead of being refused");
    assert_eq!(
        read.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "refused with a reset"
    );
    let closed = "stormbreak_guard_connections_closed_total{listener=\"edge\",reason=\"at_cap\"}";
    assert_eq!(metric(&g, closed), "1");
    assert_eq!(b.hits(), 2, "the refused request reached nobody");
    // One closes; once the guard has seen it go, a new one is served.
    drop(first);
    until_metric(&g, "stormbreak_guard_connections{listener=\"edge\"}", "1").await;
    let mut fourth = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut fourth, "GET", "/", b"").await, 200);
    assert_eq!(metric(&g, closed), "1", "the fourth was not refused");
    assert_eq!(request(&mut second, "GET", "/", b"").await, 200);
}

/// The accept queue length of the listening socket on `port`, from
/// `/proc/net/tcp` (`rx_queue` of a LISTEN socket is its accept queue).
#[cfg(target_os = "linux")]
fn accept_queue(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(f[1].split(':').nth(1)?, 16).ok()?;
            let rx = f[4].split(':').nth(1)?;
            (local_port == port && f[3] == "0A").then(|| u64::from_str_radix(rx, 16).unwrap())
        })
        .unwrap_or_else(|| panic!("no listening socket on port {port} in /proc/net/tcp"))
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_queueing_listener_at_its_cap_leaves_at_most_backlog_plus_one_in_the_kernel_queue() {
    let b = backend(|_| status(200)).await;
    let g = guard(&config(
        &b,
        &[("edge", ANY, "max_connections = 1\nbacklog = 2")],
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let mut held = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut held, "GET", "/", b"").await, 200);
    // Six more: Linux queues backlog + 1 accepted handshakes and drops
    // the others' SYNs (their connects wait; aborted at the end).
    let waiting: Vec<_> = (0..6)
        .map(|_| tokio::spawn(TcpStream::connect(edge)))
        .collect();
    for _ in 0..500 {
        if accept_queue(edge.port()) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let any handshake still under way land (loopback: microseconds);
    // with the old fixed backlog of 1024 all six would be queued.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(accept_queue(edge.port()), 3, "backlog = 2 holds 3");
    for w in waiting {
        w.abort();
    }
}

#[tokio::test]
async fn a_reload_may_switch_to_refusing_but_not_change_a_kept_sockets_backlog() {
    let b = backend(|_| status(200)).await;
    let with = |extra: &str| super::parse(&config(&b, &[("edge", ANY, extra)], ""));
    let g = guard(&config(
        &b,
        &[("edge", ANY, "max_connections = 1\nbacklog = 16")],
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let e = g
        .reload(&with("max_connections = 1\nbacklog = 32"))
        .unwrap_err();
    assert!(
        e.starts_with("test.toml:1:1: listener \"edge\": backlog 32 asked")
            && e.contains("the old listeners and config stay"),
        "{e}"
    );
    // The same backlog, now refusing at the cap: the next connection
    // beyond it is reset.
    g.reload(&with(
        "max_connections = 1\nbacklog = 16\nat_connection_cap = \"refuse\"",
    ))
    .unwrap();
    let mut held = TcpStream::connect(edge).await.unwrap();
    assert_eq!(request(&mut held, "GET", "/", b"").await, 200);
    let mut over = TcpStream::connect(edge).await.unwrap();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(HANG, over.read(&mut buf))
        .await
        .expect("waited instead of being refused");
    assert_eq!(
        read.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset)
    );
}

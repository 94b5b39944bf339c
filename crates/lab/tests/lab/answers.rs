//! The answers of the lab's guards at their caps, read off the wire: a
//! full sidecar and an LB node at its flow cap answer at once, name the
//! limit in `X-Stormbreak-Refused`, and send no `Retry-After` (the
//! simulator's sidecar and LB advertise none).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stormbreak_lab::backend::{self, App};
use stormbreak_lab::plan::LbPlan;
use stormbreak_lab::pool::Pool;
use stormbreak_lab::{lb, sidecar};
use stormbreak_policy::Nanos;
use stormbreak_sim::dist::ServiceTimeSpec;
use stormbreak_sim::scenario::SidecarSpec;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One GET on a fresh connection; the response head, lower-cased.
async fn get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nhost: lab\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_lowercase();
    text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

/// Waits (bounded: a hang guard) until `in_flight` reads 1.
async fn until_one_in_flight(in_flight: impl Fn() -> f64) {
    for _ in 0..2_000 {
        if in_flight() >= 1.0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the first request never reached the guard");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sidecar_and_a_full_lb_node_refuse_at_once_without_retry_after() {
    let spec = ServiceTimeSpec::Constant {
        value: Nanos::from_millis(300),
    };
    let app = App::new(2, 0, &spec, Arc::default(), 1);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let b = backend::start(app, stopped).await.unwrap();
    let side = SidecarSpec {
        limit: 1,
        queue: 0,
        queue_timeout: None,
    };
    let (guard, _, side_addr) = sidecar::start(&side, side.limit, b.addr).await.unwrap();
    let edge = LbPlan {
        name: "edge".into(),
        nodes: 1,
        flows_per_node: 1,
        ramp: None,
    };
    let pool = Pool::start("edge", vec![lb::doc(&edge, &[b.addr])], &[])
        .await
        .unwrap();
    let node = pool.addrs()[0];

    let held = tokio::spawn(get(side_addr));
    until_one_in_flight(|| sidecar::reading(&guard).0).await;
    let head = get(side_addr).await;
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("x-stormbreak-refused: limit"), "{head}");
    assert!(!head.contains("retry-after"), "{head}");
    assert!(held.await.unwrap().starts_with("http/1.1 200"));

    let held = tokio::spawn(get(node));
    until_one_in_flight(|| pool.reading().0).await;
    let head = get(node).await;
    assert!(
        head.starts_with(&format!("http/1.1 {}", lb::REFUSAL_STATUS)),
        "{head}"
    );
    assert!(head.contains("x-stormbreak-refused: limit"), "{head}");
    assert!(!head.contains("retry-after"), "{head}");
    // `set_lb_limit` to 2 with one flow held: changed in place, the held
    // flow still counts, so exactly one more is admitted.
    pool.set_limit(None, 2).unwrap();
    assert_eq!(pool.limits(), [Some(2)]);
    let second = get(node).await;
    assert!(second.starts_with("http/1.1 200"), "{second}");
    assert!(held.await.unwrap().starts_with("http/1.1 200"));

    pool.close().await;
    guard.shutdown().await;
    stop.send_replace(true);
}

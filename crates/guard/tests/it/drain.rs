//! Graceful drain: once asked, the guard stops accepting, finishes the
//! requests in flight, and ends with no connection left.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

#[tokio::test]
async fn a_drain_stops_accepting_and_finishes_the_requests_in_flight() {
    // The backend holds every request until released.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let b = backend_async(move |_| {
        let held = held.clone();
        async move {
            let _ = held.acquire().await.map(|p| p.forget());
            status(200)
        }
    })
    .await;
    let g = guard(&one_route(&b, "", "")).await;
    let edge = g.local_addr("edge").unwrap();
    let in_flight: Vec<_> = (0..3)
        .map(|i| {
            tokio::spawn(async move {
                send(&http1_client(), get(edge, &format!("/{i}")))
                    .await
                    .0
                    .status
            })
        })
        .collect();
    // Bounded wait until all three reached the backend.
    for _ in 0..500 {
        if b.hits() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b.hits(), 3);

    let drain = tokio::spawn(g.drain(Duration::from_secs(10)));
    // New connections are refused once the listener has stopped (bounded).
    let mut refused = false;
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(edge).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the listener still accepts while draining");
    assert!(
        !drain.is_finished(),
        "the drain waits for the requests in flight"
    );
    gate.add_permits(3);
    for t in in_flight {
        assert_eq!(t.await.unwrap(), 200, "an in-flight request finished");
    }
    let left = tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(left, 0, "every connection ended before the deadline");
}

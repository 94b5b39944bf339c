//! The reqwest middleware and the hyper-util example against a loopback
//! server started by each test (127.0.0.1, port 0; stopped when the test
//! drops it). Real sockets, so real time: pauses are 5 ms, and a 10 s
//! timeout only guards against a hang.

// Each example includes `support/loopback.rs` so it runs on its own; this
// test includes both examples, hence the server module twice.
#![allow(clippy::duplicate_mod)]

#[allow(dead_code)]
#[path = "../examples/hyper_client.rs"]
mod hyper_example;

#[allow(dead_code)]
#[path = "../examples/reqwest_client.rs"]
mod reqwest_example;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const HANG: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_reqwest_middleware_retries_503s_through_the_shared_loop() {
    let server = reqwest_example::serve(|n| if n < 2 { 503 } else { 200 })
        .await
        .unwrap();
    let layer = reqwest_example::layer().unwrap();
    let client = reqwest_example::client(layer.clone());
    let response = tokio::time::timeout(HANG, client.get(server.url("/token")).send())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "token-2");
    assert_eq!(server.received(), 3);
    assert_eq!(layer.passed_through(), 0);
}

#[tokio::test]
async fn the_reqwest_middleware_does_not_retry_a_403_and_gives_up_after_max_attempts() {
    let server = reqwest_example::serve(|n| if n == 0 { 403 } else { 503 })
        .await
        .unwrap();
    let client = reqwest_example::client(reqwest_example::layer().unwrap());
    let shed = tokio::time::timeout(HANG, client.get(server.url("/token")).send())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(shed.status(), 403);
    assert_eq!(server.received(), 1);
    let failing =
        tokio::time::timeout(HANG, client.post(server.url("/token")).body("grant").send())
            .await
            .expect("no hang")
            .unwrap();
    // A buffered body is retried: 3 attempts, then the last 503 as it was.
    assert_eq!(failing.status(), 503);
    assert_eq!(server.received(), 4);
}

#[tokio::test]
async fn the_reqwest_middleware_reports_a_refused_connection_after_its_retries() {
    // Bind and drop a listener: its port is then (almost surely) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // A counting middleware behind the retry one sees each attempt.
    let attempts = Arc::new(AtomicU32::new(0));
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(stormbreak_client::RetryMiddleware::new(
            reqwest_example::layer().unwrap(),
        ))
        .with(CountAttempts(attempts.clone()))
        .build();
    let err = tokio::time::timeout(HANG, client.get(format!("http://127.0.0.1:{port}/")).send())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    // A refused connection is retried: the default policy's 3 attempts.
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

/// Counts the attempts that reach it.
struct CountAttempts(Arc<AtomicU32>);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for CountAttempts {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(request, extensions).await
    }
}

#[tokio::test]
async fn the_hyper_stack_coalesces_and_retries_against_a_loopback_server() {
    let server = hyper_example::serve(|n| if n < 2 { 503 } else { 200 })
        .await
        .unwrap();
    let outcomes =
        tokio::time::timeout(HANG, hyper_example::fetch_token(&server.url("/token"), 50))
            .await
            .expect("no hang")
            .unwrap();
    assert_eq!(outcomes.len(), 50);
    for o in &outcomes {
        assert_eq!(o.status, 200);
        assert_eq!(o.body, "token-2");
    }
    // One flight, one retry sequence: 503, 503, 200.
    assert_eq!(server.received(), 3);
}

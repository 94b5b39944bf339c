//! A hyper-util client behind the stack, against a local server that
//! fails twice and then answers:
//! `SingleFlight → Retry → Breaker → hyper_util::client::legacy::Client`.
//!
//! No adaptive throttle here: with no history, one failure sets its
//! reject probability to 1/2 (`(1 − 2·0) / (1 + 1)`), so a cold client's
//! first retry is refused half the time. It belongs on clients with
//! steady traffic (see `token_refresh.rs` and docs/client.md).
//!
//! ```text
//! cargo run -p stormbreak-client --example hyper_client
//! ```
//!
//! `tests/integrations.rs` runs the same code.

#[path = "support/loopback.rs"]
mod loopback;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use stormbreak_client::{BoxError, BreakerLayer, RetryLayer, SingleFlightLayer};
use stormbreak_policy::Nanos;
use stormbreak_policy::breaker::BreakerConfig;
use stormbreak_policy::retry::{BackoffConfig, RetryConfig};
use tower::{ServiceBuilder, ServiceExt};

pub use loopback::serve;

/// What one request through the stack came to.
#[derive(Debug)]
pub struct Outcome {
    /// The final status.
    pub status: u16,
    /// The final body.
    pub body: Bytes,
}

/// Sends `callers` identical GETs at once to `url` through the stack.
pub async fn fetch_token(url: &str, callers: usize) -> Result<Vec<Outcome>, BoxError> {
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let retry = RetryConfig {
        backoff: BackoffConfig {
            base: Nanos::from_millis(5),
            ..BackoffConfig::default()
        },
        ..RetryConfig::default()
    };
    let client = ServiceBuilder::new()
        .layer(SingleFlightLayer::new())
        .layer(RetryLayer::builder(&retry)?.seed(1).build())
        .layer(BreakerLayer::new(&BreakerConfig::envoy_outlier_detection())?)
        .service(hyper);
    let mut calls = Vec::new();
    for _ in 0..callers {
        let request = http::Request::get(url)
            .header("authorization", "Bearer example")
            .body(Full::new(Bytes::new()))?;
        calls.push(tokio::spawn(client.clone().oneshot(request)));
    }
    let mut outcomes = Vec::new();
    for call in calls {
        let response = call.await??;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        outcomes.push(Outcome { status, body });
    }
    Ok(outcomes)
}

/// Used by `main`; the test calls the pieces itself.
#[allow(dead_code)]
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let server = serve(|n| if n < 2 { 503 } else { 200 }).await?;
    let outcomes = tokio::time::timeout(
        Duration::from_secs(10),
        fetch_token(&server.url("/token"), 100),
    )
    .await??;
    println!(
        "100 callers: {} answered {} {:?}; the server received {} requests",
        outcomes.len(),
        outcomes[0].status,
        outcomes[0].body,
        server.received()
    );
    Ok(())
}

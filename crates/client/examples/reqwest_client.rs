//! A reqwest client with the retry middleware, against a local server that
//! fails twice and then answers.
//!
//! ```text
//! cargo run -p stormbreak-client --example reqwest_client
//! ```
//!
//! `tests/integrations.rs` runs the same code.

#[path = "support/loopback.rs"]
mod loopback;

use std::time::Duration;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use stormbreak_client::{BoxError, RetryLayer, RetryMiddleware};
use stormbreak_policy::Nanos;
use stormbreak_policy::retry::{BackoffConfig, RetryConfig};

pub use loopback::serve;

/// A reqwest client whose requests retry through `layer`.
pub fn client(layer: RetryLayer) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(layer))
        .build()
}

/// The retry layer of the example: the defaults, with 5 ms pauses.
pub fn layer() -> Result<RetryLayer, BoxError> {
    let config = RetryConfig {
        backoff: BackoffConfig {
            base: Nanos::from_millis(5),
            ..BackoffConfig::default()
        },
        ..RetryConfig::default()
    };
    Ok(RetryLayer::builder(&config)?.seed(1).build())
}

/// Used by `main`; the test calls the pieces itself.
#[allow(dead_code)]
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let server = serve(|n| if n < 2 { 503 } else { 200 }).await?;
    let client = client(layer()?);
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        client.get(server.url("/token")).send(),
    )
    .await??;
    println!(
        "answered {} {:?} after {} requests",
        response.status(),
        response.text().await?,
        server.received()
    );
    Ok(())
}

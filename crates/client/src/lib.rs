//! Client retries that cannot storm, as a tower layer.
//!
//! On 2026-08-17 an editor client's retry loop multiplied Copilot token
//! traffic ten-fold while demand stayed flat. [`RetryLayer`] is the
//! follow-up "retry limits and backoff in clients" as a library: every
//! decision comes from `stormbreak-policy`'s retry state machine — the same
//! code the simulator runs — and this crate only supplies tokio time and
//! the tower plumbing:
//!
//! * a per-request policy ([`RetryConfig`](stormbreak_policy::retry::RetryConfig)):
//!   attempts, per-try and overall timeouts, which failures are retried,
//!   exponential backoff with jitter;
//! * a retry budget shared by every service of one layer (default: a 20%
//!   ratio budget plus 10 retries/s), so the client as a whole cannot
//!   multiply its load;
//! * `Retry-After` and gRPC pushback honoured; a 403 shed is final.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use stormbreak_client::RetryLayer;
//! use stormbreak_policy::Nanos;
//! use stormbreak_policy::retry::{BackoffConfig, RetryConfig};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let calls = Arc::new(AtomicU32::new(0));
//! let counter = calls.clone();
//! // A backend that fails twice with 503, then answers.
//! let backend = service_fn(move |_req: http::Request<()>| {
//!     let n = counter.fetch_add(1, Ordering::SeqCst);
//!     async move {
//!         let status = if n < 2 { 503 } else { 200 };
//!         Ok::<_, std::convert::Infallible>(
//!             http::Response::builder().status(status).body(()).unwrap(),
//!         )
//!     }
//! });
//! let config = RetryConfig {
//!     backoff: BackoffConfig { base: Nanos::from_millis(1), ..BackoffConfig::default() },
//!     ..RetryConfig::default()
//! };
//! let client = RetryLayer::builder(&config).unwrap().seed(1).build().layer(backend);
//! let response = client.oneshot(http::Request::new(())).await.unwrap();
//! assert_eq!(response.status(), 200);
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! # }
//! ```

#![warn(missing_docs)]

mod body;
mod breaker;
mod classify;
mod clone;
mod overload;
mod reject;
#[cfg(feature = "reqwest")]
mod reqwest_middleware;
mod retry;
mod single_flight;
mod throttle;

pub use body::PrefixedBody;
pub use breaker::{BreakerLayer, CircuitBreaker};
pub use classify::{Classify, HttpClassifier, error_outcome};
pub use clone::{
    BodyTooLarge, BufferedBody, CloneAll, CloneBuffered, CloneRequest, buffer_request,
};
pub use reject::{Rejected, RejectedBy};
#[cfg(feature = "reqwest")]
pub use reqwest_middleware::RetryMiddleware;
pub use retry::{AttemptTimedOut, Retry, RetryLayer, RetryLayerBuilder};
pub use single_flight::{
    DefaultKey, FlightKey, FlightStats, RequestKey, SharedError, SingleFlight, SingleFlightLayer,
};
pub use throttle::{Throttle, ThrottleLayer};

/// The error type of the layer's services, as in tower.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

//! Client calls that cannot storm, as tower layers.
//!
//! On 2026-08-17 an editor client's token refresh multiplied Copilot token
//! traffic ten-fold while demand stayed flat: every caller refreshed on its
//! own, and one failed token operation spawned several more. This crate is
//! the follow-up "fix the client retry behaviour" as a library. Every
//! decision comes from `stormbreak-policy` — the same code the simulator
//! runs — and this crate supplies tokio time and the tower plumbing:
//!
//! | layer | what it does | policy it drives |
//! |---|---|---|
//! | [`SingleFlightLayer`] | concurrent identical requests share one call and its result | — |
//! | [`RetryLayer`] | retries by the policy, under a budget shared by every request | `retry::RetryState`, `budget::*` |
//! | [`ThrottleLayer`] | refuses locally as the backend stops accepting | `shed::AdaptiveThrottle` (SRE, K = 2) |
//! | [`BreakerLayer`] | stops calling a failing backend, probes, resumes | `breaker::Breaker` |
//! | [`BufferBodyLayer`] | reads request bodies into memory up to a cap, so the retry layer behind it can replay streaming ones | — |
//! | [`RetryMiddleware`] | the retry layer's loop for `reqwest-middleware` (feature `reqwest`, on by default) | `retry::RetryState` |
//!
//! # The composition that prevents a storm
//!
//! Outermost first:
//!
//! ```text
//! SingleFlight → Retry (budget) → Throttle → Breaker → transport
//! ```
//!
//! * **Single-flight outside retry**: N callers asking for the same token
//!   become one flight running one retry sequence. Inside, each caller
//!   retries on its own jittered schedule and the retries stop coinciding:
//!   in `tests/order.rs`, 1 000 callers against a failing endpoint cost
//!   777 upstream calls in 30 s that way, 90 the other.
//! * **Throttle and breaker inside retry**: they see, count and refuse
//!   every attempt, not only logical requests, and their refusals
//!   ([`Rejected`]) are final for the retry layer, so no retry spins
//!   against them. With the throttle outside, retries pass behind its back
//!   (42 upstream calls against 14 in the same test).
//! * **Budget on the retry layer**: it bounds retries across all requests
//!   (20 % plus 10 per second by default); a per-request attempt limit
//!   cannot.
//! * **A cap on the throttle's reject probability**
//!   (`ThrottleConfig::max_reject_probability`, 0.9 here): the SRE law
//!   uncapped tends to refuse everything against a backend that accepts
//!   nothing, and keeps refusing after it heals while demand goes on. In
//!   `examples/token_refresh.rs` the uncapped stack had no token 60 s after
//!   the endpoint healed; capped at 0.9 it had one 75 ms after, having sent
//!   0.065 attempts per refresh while the endpoint failed.
//!
//! ```
//! use std::time::Duration;
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use stormbreak_client::{BreakerLayer, RetryLayer, SingleFlightLayer, ThrottleLayer};
//! use stormbreak_policy::breaker::BreakerConfig;
//! use stormbreak_policy::retry::RetryConfig;
//! use stormbreak_policy::shed::ThrottleConfig;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), stormbreak_client::BoxError> {
//! // Any tower HTTP client fits here (hyper-util's, for one).
//! let transport = service_fn(|_req: http::Request<Full<Bytes>>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from("token"))))
//! });
//! let client = ServiceBuilder::new()
//!     .layer(SingleFlightLayer::new().cache_successes_for(Duration::from_secs(300)))
//!     .layer(RetryLayer::new(&RetryConfig::default())?)
//!     .layer(ThrottleLayer::new(&ThrottleConfig {
//!         max_reject_probability: 0.9,
//!         ..ThrottleConfig::default()
//!     })?)
//!     .layer(BreakerLayer::new(&BreakerConfig::default())?)
//!     .service(transport);
//! let request = http::Request::get("http://token.internal/token")
//!     .header("authorization", "Bearer session")
//!     .body(Full::new(Bytes::new()))?;
//! let response = client.oneshot(request).await?;
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! # Retries
//!
//! [`RetryLayer`]: attempts, per-try and overall timeouts, which failures
//! are retried, exponential backoff with jitter
//! ([`RetryConfig`](stormbreak_policy::retry::RetryConfig)); `Retry-After`
//! and gRPC pushback honoured; a 403 shed is final. A request is copied
//! for each retry by a [`CloneRequest`] (tower's `Policy::clone_request`):
//! the default [`CloneBuffered`] copies requests whose body is in memory;
//! one it declines (a streaming body) is sent once, unretried.
//! [`buffer_request`] reads a streaming body into memory up to a cap.
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
//!
//! # Examples
//!
//! `crates/client/examples/`: `token_refresh.rs` (the incident's refresh,
//! buggy and fixed, in virtual time), `hyper_client.rs` and
//! `reqwest_client.rs` (against a loopback server). See also
//! `docs/client.md`.

#![warn(missing_docs)]

mod body;
mod breaker;
mod buffer;
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
pub use buffer::{BufferBody, BufferBodyLayer};
pub use classify::{Classify, HttpClassifier, OwnRefusal, error_outcome};
pub use clone::{
    BodyTooLarge, BufferedBody, CloneAll, CloneBuffered, CloneRequest, buffer_request,
};
pub use reject::{Rejected, RejectedBy};
#[cfg(feature = "reqwest")]
pub use reqwest_middleware::RetryMiddleware;
pub use retry::{
    AttemptDeadline, AttemptTimedOut, Driven, Retry, RetryEvents, RetryFuture, RetryLayer,
    RetryLayerBuilder, TimedBelow, TimedHere, Timing,
};
pub use single_flight::{
    DefaultKey, FlightKey, FlightStats, RequestKey, SharedError, SingleFlight, SingleFlightFuture,
    SingleFlightLayer,
};
pub use throttle::{Throttle, ThrottleFuture, ThrottleLayer};

/// The error type of the layer's services, as in tower.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

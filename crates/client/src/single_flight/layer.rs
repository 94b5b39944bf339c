//! [`SingleFlightLayer`]: its settings (key, table bound, body cap, cache
//! TTL) and the services it builds.
//!
//! Invariant: each `layer` call makes a new key table; the counters are
//! shared by every service of the layer.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tower::Layer;

use super::key::DefaultKey;
use super::service::{FlightConfig, SingleFlight};
use super::stats::{Counters, FlightStats};

/// A tower [`Layer`] that coalesces concurrent identical `http` requests
/// into one upstream call.
///
/// * **Key**: [`DefaultKey`] (method, URI, hashed credentials; bodiless
///   requests only), or any `Fn(&Req) -> Option<K>`.
/// * **Sharing**: the response is buffered (up to
///   [`max_body_bytes`](Self::max_body_bytes), 64 KiB by default) and every
///   waiter gets its own copy, with status, headers, extensions and
///   trailers. An error is shared as an `Arc` inside a [`SharedError`]. A
///   body over the cap is not shared: the first caller gets it, still
///   streaming, and the other waiters each send their own request (all of
///   them, if the first has gone).
/// * **Bound**: at most [`max_keys`](Self::max_keys) keys (1 024 by
///   default) are in flight or cached at once; past that a request goes
///   upstream on its own and [`FlightStats::bypassed_table_full`] counts it.
/// * **Cancellation**: a waiter that is dropped leaves the others waiting
///   (any of them drives the upstream call, so the first caller may go
///   too); the upstream call is dropped (cancelled) only when every waiter
///   has gone.
/// * **Cache**: [`cache_successes_for`](Self::cache_successes_for) keeps
///   a 2xx answer for a while (a token's lifetime, say); errors and other
///   statuses are never cached.
///
/// Clones of a service share its key table; each
/// [`layer`](Layer::layer) call makes a new table (a request never joins a
/// flight to another inner service). The counters are shared by every
/// service of the layer.
///
/// Put it **outside** the retry layer: one flight then runs one retry
/// sequence for all its waiters. Inside it, every waiter would retry on
/// its own (see the crate docs).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use stormbreak_client::SingleFlightLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = calls.clone();
/// let backend = service_fn(move |_req: http::Request<String>| {
///     seen.fetch_add(1, Ordering::SeqCst);
///     async {
///         tokio::task::yield_now().await;
///         Ok::<_, std::convert::Infallible>(http::Response::new("token-1".to_owned()))
///     }
/// });
/// // The token endpoint takes a body, so name the key: one refresh per user.
/// let layer = SingleFlightLayer::with_key(|req: &http::Request<String>| {
///     req.headers().get("x-user").map(|v| v.as_bytes().to_vec())
/// });
/// let client = layer.layer(backend);
/// let refresh = || {
///     let req = http::Request::post("/token")
///         .header("x-user", "ada")
///         .body("grant_type=refresh_token".to_owned())
///         .unwrap();
///     client.clone().oneshot(req)
/// };
/// let (a, b) = tokio::join!(refresh(), refresh());
/// assert!(a.is_ok() && b.is_ok());
/// assert_eq!(calls.load(Ordering::SeqCst), 1);
/// assert_eq!(layer.stats().coalesced, 1);
/// # }
/// ```
///
/// [`SharedError`]: super::SharedError
#[derive(Clone)]
pub struct SingleFlightLayer<K = DefaultKey> {
    key: K,
    max_keys: usize,
    max_body_bytes: usize,
    ttl: Option<Duration>,
    counters: Arc<Counters>,
}

impl Default for SingleFlightLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl SingleFlightLayer {
    /// A layer keyed by [`DefaultKey`].
    pub fn new() -> Self {
        Self::with_key(DefaultKey::default())
    }
}

impl<K> SingleFlightLayer<K> {
    /// Largest number of keys in the table by default.
    pub const DEFAULT_MAX_KEYS: usize = 1024;
    /// Largest response body shared by default.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;

    /// A layer keyed by `key`.
    pub fn with_key(key: K) -> Self {
        SingleFlightLayer {
            key,
            max_keys: Self::DEFAULT_MAX_KEYS,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            ttl: None,
            counters: Arc::default(),
        }
    }

    /// At most `n` keys in flight or cached; 0 turns coalescing off.
    pub fn max_keys(mut self, n: usize) -> Self {
        self.max_keys = n;
        self
    }

    /// Largest response body buffered to be shared.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Keeps a successful (2xx) answer for `ttl` and serves it to later
    /// requests with the same key. Errors are never cached.
    pub fn cache_successes_for(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The counters, shared by every service of this layer.
    pub fn stats(&self) -> FlightStats {
        self.counters.snapshot()
    }
}

impl<K: fmt::Debug> fmt::Debug for SingleFlightLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlightLayer")
            .field("key", &self.key)
            .field("max_keys", &self.max_keys)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl<S, K: Clone> Layer<S> for SingleFlightLayer<K> {
    type Service = SingleFlight<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        SingleFlight {
            inner,
            key: self.key.clone(),
            config: Arc::new(FlightConfig {
                max_keys: self.max_keys,
                max_body_bytes: self.max_body_bytes,
                ttl: self.ttl,
                counters: self.counters.clone(),
                hasher: foldhash::fast::RandomState::default(),
                table: OnceLock::new(),
            }),
        }
    }
}

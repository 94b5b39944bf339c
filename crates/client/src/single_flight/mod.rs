//! Single-flight: concurrent identical requests share one upstream call.
//!
//! The second storm of 2026-08-17 was an editor whose every caller
//! refreshed the same token on its own. Behind [`SingleFlightLayer`] the
//! callers that ask for the same thing while a call is in flight wait for
//! that call and share its result, errors included.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, Method, Uri};
use http_body::Body;
use http_body_util::BodyExt;
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower::util::Oneshot;
use tower::{Layer, Service, ServiceExt};

use crate::{BoxError, PrefixedBody};

/// Which requests are the same: a key, or `None` for a request that must
/// never be coalesced.
///
/// Implemented by [`DefaultKey`] and by any `Fn(&Req) -> Option<K>`.
pub trait FlightKey<Req> {
    /// The key; equal keys share a flight.
    type Key: Hash + Eq + Clone + Send + Sync + 'static;

    /// The key of `request`, or `None` to send it on its own.
    fn key(&self, request: &Req) -> Option<Self::Key>;
}

impl<Req, K, F> FlightKey<Req> for F
where
    F: Fn(&Req) -> Option<K>,
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    type Key = K;

    fn key(&self, request: &Req) -> Option<K> {
        self(request)
    }
}

/// The default key: method, URI and two seeded 64-bit hashes of them and of
/// the credential headers (`Authorization`, `Proxy-Authorization` and `Cookie` unless
/// [`with_credential_headers`](Self::with_credential_headers) says
/// otherwise), so two users never share a response.
///
/// Only requests whose body is known to be empty are keyed: the body is not
/// part of the key, so two `POST`s with different bodies must not be
/// merged. A token refresh that sends a body names its own key with a
/// closure (see [`SingleFlightLayer`]).
///
/// The credential never leaves the hash: the key's `Debug` prints
/// `<redacted>`, and the hash is keyed per layer, so it means nothing
/// outside the process.
///
/// Two credentials are told apart by a keyed SipHash-1-3 of the
/// credentials alone (std's `DefaultHasher`, a pseudo-random function of
/// a per-layer secret key: a collision cannot be crafted without it) and
/// by a seeded foldhash of everything the key covers, which is also the
/// key table's hash. foldhash is not cryptographic and is much cheaper
/// than a second SipHash pass; the table it indexes holds at most
/// `max_keys` entries, so even crafted collisions in it cost a bounded
/// scan.
#[derive(Clone)]
pub struct DefaultKey {
    headers: Arc<[HeaderName]>,
    hashers: (foldhash::fast::RandomState, RandomState),
}

impl Default for DefaultKey {
    fn default() -> Self {
        Self::with_credential_headers([
            http::header::AUTHORIZATION,
            http::header::PROXY_AUTHORIZATION,
            http::header::COOKIE,
        ])
    }
}

impl DefaultKey {
    /// Keys on method, URI and the values of `headers` (hashed).
    pub fn with_credential_headers(headers: impl IntoIterator<Item = HeaderName>) -> Self {
        DefaultKey {
            headers: headers.into_iter().collect(),
            hashers: (foldhash::fast::RandomState::default(), RandomState::new()),
        }
    }
}

impl fmt::Debug for DefaultKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultKey")
            .field("credential_headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// A [`DefaultKey`]: method, URI, credential hash.
///
/// URIs compare byte for byte (`http`'s own `Uri` equality ignores the
/// host's case, and hashes it a byte at a time): two spellings of one host
/// only miss a chance to share.
#[derive(Clone)]
pub struct RequestKey {
    method: Method,
    uri: Uri,
    /// Two seeded hashes: a foldhash of the method, the URI and the
    /// credentials, and a keyed SipHash of the credentials. The credentials
    /// are compared only through them, and the first is the key's `Hash`,
    /// so the table never rehashes the URI.
    hash: (u64, u64),
}

impl RequestKey {
    fn parts(&self) -> (&str, Option<&str>, Option<&str>, Option<&str>) {
        (
            self.method.as_str(),
            self.uri.scheme_str(),
            self.uri.authority().map(|a| a.as_str()),
            self.uri.path_and_query().map(|p| p.as_str()),
        )
    }
}

impl PartialEq for RequestKey {
    fn eq(&self, other: &Self) -> bool {
        // A key found again in the table is usually a clone of the same
        // request's, whose parts share their bytes: equal without a compare.
        fn same(a: Option<&str>, b: Option<&str>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
                (a, b) => a == b,
            }
        }
        let (a, b) = (self.parts(), other.parts());
        self.hash == other.hash
            && self.method == other.method
            && same(a.1, b.1)
            && same(a.2, b.2)
            && same(a.3, b.3)
    }
}

impl Eq for RequestKey {}

impl Hash for RequestKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Equal keys have equal `hash`es; its first half is already a
        // keyed hash of everything the key compares.
        state.write_u64(self.hash.0);
    }
}

impl fmt::Debug for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URI is not secret; the credential hash is left out so that a
        // logged key cannot be used to confirm a guessed token.
        f.debug_struct("RequestKey")
            .field("method", &self.method)
            .field("uri", &self.uri)
            .field("credential", &"<redacted>")
            .finish()
    }
}

impl<B: Body> FlightKey<http::Request<B>> for DefaultKey {
    type Key = RequestKey;

    fn key(&self, request: &http::Request<B>) -> Option<RequestKey> {
        if request.body().size_hint().exact() != Some(0) {
            return None;
        }
        use std::hash::Hasher;
        let method = request.method();
        let uri = request.uri();
        // The first half of the hash covers the method, the URI and the
        // credentials; the second only the credentials (the key compares
        // the method and URI byte for byte, and the credentials only
        // through the two halves). Each URI part is its bytes and a byte
        // UTF-8 never holds (0xff), or 0xfe if absent; a credential value,
        // which may hold any byte, is tagged with its header's position in
        // the list and prefixed by its length: no two keys feed the same
        // bytes.
        let mut h = Tee::new(&self.hashers);
        h.first_only(true);
        for part in [
            Some(method.as_str()),
            uri.scheme_str(),
            uri.authority().map(|a| a.as_str()),
            uri.path_and_query().map(|p| p.as_str()),
        ] {
            match part {
                Some(part) => {
                    h.write(part.as_bytes());
                    h.write_u8(0xff);
                }
                None => h.write_u8(0xfe),
            }
        }
        h.first_only(false);
        let mut credential = |i: usize, value: &http::HeaderValue| {
            let value = value.as_bytes();
            h.write_u32(i as u32);
            h.write_u64(value.len() as u64);
            h.write(value);
        };
        let headers = request.headers();
        // A few headers are cheaper to walk than to look up one name at a
        // time; both visit a name's values in the same order.
        if headers.len() <= 8 {
            for (i, name) in self.headers.iter().enumerate() {
                for (n, value) in headers {
                    if n == name {
                        credential(i, value);
                    }
                }
            }
        } else {
            for (i, name) in self.headers.iter().enumerate() {
                for value in headers.get_all(name) {
                    credential(i, value);
                }
            }
        }
        Some(RequestKey {
            method: method.clone(),
            uri: uri.clone(),
            hash: h.finish_both(),
        })
    }
}

/// Feeds the same bytes to a foldhasher and a SipHasher through a small
/// buffer, so a key's many short strings and integers reach each hasher as
/// a few long writes. SipHash hashes the concatenation of its writes, so
/// its hash is that of writing to it directly; foldhash's depends on where
/// the writes split, which the buffer makes a function of the bytes alone
/// (it flushes when full and at each [`first_only`](Self::first_only)),
/// so equal keys still hash alike.
struct Tee {
    hashers: (
        foldhash::fast::FoldHasher<'static>,
        std::hash::DefaultHasher,
    ),
    buf: [u8; 128],
    len: usize,
    /// Writes go to the first hasher only.
    first_only: bool,
}

impl Tee {
    fn new(states: &(foldhash::fast::RandomState, RandomState)) -> Self {
        Tee {
            hashers: (states.0.build_hasher(), states.1.build_hasher()),
            buf: [0; 128],
            len: 0,
            first_only: false,
        }
    }

    /// From now on, writes go to the first hasher only, or to both again.
    fn first_only(&mut self, on: bool) {
        self.flush();
        self.first_only = on;
    }

    fn flush(&mut self) {
        use std::hash::Hasher;
        let pending = &self.buf[..self.len];
        self.hashers.0.write(pending);
        if !self.first_only {
            self.hashers.1.write(pending);
        }
        self.len = 0;
    }

    fn finish_both(mut self) -> (u64, u64) {
        use std::hash::Hasher;
        self.flush();
        (self.hashers.0.finish(), self.hashers.1.finish())
    }
}

impl std::hash::Hasher for Tee {
    fn write(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.buf.len() {
            self.flush();
            if bytes.len() > self.buf.len() {
                self.hashers.0.write(bytes);
                if !self.first_only {
                    self.hashers.1.write(bytes);
                }
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Only [`Tee::finish_both`] is used; this is the first hash.
    fn finish(&self) -> u64 {
        let mut h = self.hashers.0.clone();
        h.write(&self.buf[..self.len]);
        h.finish()
    }
}

/// Counters since the layer was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlightStats {
    /// Upstream calls started for a key (one per flight).
    pub flights: u64,
    /// Requests that joined a flight already in the air.
    pub coalesced: u64,
    /// Requests answered from the success cache.
    pub cache_hits: u64,
    /// Requests sent on their own because the key table was full.
    pub bypassed_table_full: u64,
    /// Requests sent on their own because they had no key.
    pub unkeyed: u64,
    /// Flights whose response body was over the cap: the waiters other
    /// than the first each sent their own request.
    pub too_large: u64,
}

#[derive(Default)]
struct Counters {
    flights: AtomicU64,
    coalesced: AtomicU64,
    cache_hits: AtomicU64,
    bypassed_table_full: AtomicU64,
    unkeyed: AtomicU64,
    too_large: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> FlightStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FlightStats {
            flights: get(&self.flights),
            coalesced: get(&self.coalesced),
            cache_hits: get(&self.cache_hits),
            bypassed_table_full: get(&self.bypassed_table_full),
            unkeyed: get(&self.unkeyed),
            too_large: get(&self.too_large),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

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

/// The service [`SingleFlightLayer`] builds.
///
/// It is always ready: readiness of the inner service is awaited inside
/// each upstream call, so a waiter that joins a flight never reserves
/// capacity it will not use.
pub struct SingleFlight<S, K = DefaultKey> {
    inner: S,
    key: K,
    config: Arc<FlightConfig>,
}

impl<S: Clone, K: Clone> Clone for SingleFlight<S, K> {
    fn clone(&self) -> Self {
        SingleFlight {
            inner: self.inner.clone(),
            key: self.key.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug> fmt::Debug for SingleFlight<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlight")
            .field("inner", &self.inner)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

struct FlightConfig {
    max_keys: usize,
    max_body_bytes: usize,
    ttl: Option<Duration>,
    counters: Arc<Counters>,
    /// Hashes each request's key once, on arrival (seeded foldhash: the
    /// table is bounded by `max_keys`, so a crafted collision costs a
    /// bounded scan, and equality decides).
    hasher: foldhash::fast::RandomState,
    /// The key table, typed by the first call (the layer does not know the
    /// key and body types); `Box<dyn Any>` keeps `FlightConfig` untyped.
    table: OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

/// An error shared by every waiter of a flight: the upstream error behind
/// an `Arc`. [`source`](std::error::Error::source) is the upstream error,
/// so classifiers that walk the chain see through it.
#[derive(Clone)]
pub struct SharedError(Arc<BoxError>);

impl SharedError {
    /// The upstream error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref().as_ref()
    }
}

impl fmt::Debug for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref().as_ref())
    }
}

/// A response read into memory, copied out to each waiter.
struct Buffered {
    /// As it came: the caller with the only copy gets it back whole.
    head: http::response::Parts,
    body: Bytes,
    trailers: Option<Box<HeaderMap>>,
}

impl Buffered {
    fn into_response<B>(self) -> http::Response<PrefixedBody<B>> {
        let body = PrefixedBody::full_boxed(self.body, self.trailers);
        http::Response::from_parts(self.head, body)
    }

    fn response<B>(&self) -> http::Response<PrefixedBody<B>> {
        let body = PrefixedBody::full_boxed(self.body.clone(), self.trailers.clone());
        let mut r = http::Response::new(body);
        *r.status_mut() = self.head.status;
        *r.version_mut() = self.head.version;
        *r.headers_mut() = self.head.headers.clone();
        *r.extensions_mut() = self.head.extensions.clone();
        r
    }
}

/// What a flight's upstream call produced.
enum Landed<B> {
    /// Read into memory.
    Buffered(Buffered),
    /// Over the cap: the streaming response, for the caller that started
    /// the flight; the callers that joined send their own requests. Boxed:
    /// it is rare, and the usual answer is moved a few times.
    TooLarge(Box<http::Response<PrefixedBody<B>>>),
}

type FlightOutput<B> = Result<Landed<B>, SharedError>;

/// The upstream call of one flight, boxed inside the flight so that any of
/// its callers can poll it.
type Call<B> = Pin<Box<dyn Future<Output = FlightOutput<B>> + Send>>;

/// One upstream call and the callers sharing it: the caller that started
/// it and those that joined. Any of them polls the call (as with
/// `futures_util`'s `Shared`), so the flight goes on while any caller is
/// left, whichever it is, and lands as soon as any caller is polled after
/// the answer came in.
///
/// While the caller that started the flight is alone, the call is polled
/// with that caller's own waker and the flight holds no waker list; once
/// someone has joined, the call is polled with the flight itself as the
/// waker, which wakes every caller.
struct Flight<Key, B> {
    config: Arc<FlightConfig>,
    /// The flight's key, to find its slot when it lands or is cancelled.
    key: Prehashed<Key>,
    state: Mutex<FlightState<B>>,
}

struct FlightState<B> {
    /// The call; `None` while a caller is polling it, and once it has
    /// landed or been cancelled.
    call: Option<Call<B>>,
    answer: Option<Answer<B>>,
    /// The waker of the caller that started the flight (seat 0), once it
    /// has had to wait.
    lead: Option<Waker>,
    /// Seats 1 and up: one per caller that joined, in joining order. It
    /// grows by one waker per caller that joins and goes with the flight
    /// (a caller's own future holds everything else).
    seats: Vec<Seat>,
    /// Callers that have not had their answer and have not been dropped.
    members: usize,
}

/// What a landed flight left for its other callers.
enum Answer<B> {
    Buffered(Arc<Buffered>),
    Failed(SharedError),
    /// Too large to share: the streaming response waits here for the
    /// caller that started the flight (if it is still there).
    TooLarge(Option<Box<http::Response<PrefixedBody<B>>>>),
}

enum Seat {
    Waiting(Option<Waker>),
    Left,
}

impl<B> FlightState<B> {
    fn leave(&mut self, seat: usize) {
        self.members -= 1;
        match seat.checked_sub(1) {
            None => self.lead = None,
            Some(i) => self.seats[i] = Seat::Left,
        }
    }

    /// Keeps `seat`'s waker one that wakes `cx`'s task.
    fn register(&mut self, seat: usize, cx: &Context<'_>) {
        let waker = match seat.checked_sub(1) {
            None => &mut self.lead,
            Some(i) => match &mut self.seats[i] {
                Seat::Waiting(waker) => waker,
                Seat::Left => return,
            },
        };
        if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *waker = Some(cx.waker().clone());
        }
    }

    fn wake_all(&mut self) {
        if let Some(waker) = self.lead.take() {
            waker.wake();
        }
        for seat in &mut self.seats {
            if let Seat::Waiting(waker) = seat
                && let Some(waker) = waker.take()
            {
                waker.wake();
            }
        }
    }
}

impl<Key: Send + Sync + 'static, B: Send + 'static> std::task::Wake for Flight<Key, B> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.state).wake_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

enum Slot<Key, B> {
    /// A flight in the air: some caller of it is alive; the last to go
    /// (or the one that lands it) removes the slot.
    InFlight(Arc<Flight<Key, B>>),
    /// Only ever a 2xx answer.
    Cached {
        until: Instant,
        response: Arc<Buffered>,
    },
}

impl<Key, B> Slot<Key, B> {
    fn is_live(&self, now: Instant) -> bool {
        match self {
            Slot::InFlight(_) => true,
            Slot::Cached { until, .. } => now < *until,
        }
    }

    fn is_flight(&self, flight: &Arc<Flight<Key, B>>) -> bool {
        matches!(self, Slot::InFlight(f) if Arc::ptr_eq(f, flight))
    }
}

struct Table<Key, B> {
    slots: HashMap<Prehashed<Key>, Slot<Key, B>, BuildPrehashed>,
}

/// A key with its hash, computed once per request: the table's hasher only
/// passes it through, so lookups, landing and removal never rehash it.
#[derive(Clone)]
struct Prehashed<K> {
    hash: u64,
    key: K,
}

impl<K: PartialEq> PartialEq for Prehashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Prehashed<K> {}

impl<K> Hash for Prehashed<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

#[derive(Clone, Copy, Default)]
struct BuildPrehashed;

impl BuildHasher for BuildPrehashed {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// Passes a [`Prehashed`] key's hash through.
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in, FNV-style.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The typed table behind [`FlightConfig::table`].
type TableOf<Key, B> = Mutex<Table<Key, B>>;

/// The table for this key and body type, made on first use. `None` only
/// if one service is used with two request or response types (a service
/// whose inner service is generic over them): such requests are sent alone.
fn table_of<Key, B>(config: &FlightConfig) -> Option<&TableOf<Key, B>>
where
    Key: Send + Sync + 'static,
    B: Send + 'static,
{
    config
        .table
        .get_or_init(|| {
            Box::new(Mutex::new(Table::<Key, B> {
                slots: HashMap::with_hasher(BuildPrehashed),
            }))
        })
        .downcast_ref::<TableOf<Key, B>>()
}

/// The table's hash of a key. A [`RequestKey`] carries one already (a
/// seeded hash of everything it compares), so only other keys are hashed.
fn table_hash<Key: Hash + 'static>(hasher: &foldhash::fast::RandomState, key: &Key) -> u64 {
    match (key as &dyn std::any::Any).downcast_ref::<RequestKey>() {
        Some(key) => key.hash.0,
        None => hasher.hash_one(key),
    }
}

impl<S, K, ReqB, B> Service<http::Request<ReqB>> for SingleFlight<S, K>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    K: FlightKey<http::Request<ReqB>>,
    ReqB: Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<PrefixedBody<B>>;
    type Error = BoxError;
    type Future = SingleFlightFuture<S, ReqB, B, K::Key>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<ReqB>) -> Self::Future {
        let config = &self.config;
        let counters = &config.counters;
        let key = if config.max_keys == 0 {
            None
        } else {
            self.key.key(&request)
        };
        let table = key.as_ref().and_then(|_| table_of::<K::Key, B>(config));
        let (Some(key), Some(table)) = (key, table) else {
            bump(&counters.unkeyed);
            return SingleFlightFuture::alone(self.inner.clone(), request);
        };
        // Hashed once here; every later look-up of this key reuses it.
        let key = Prehashed {
            hash: table_hash(&config.hasher, &key),
            key,
        };
        let mut t = lock(table);
        if let Some(slot) = t.slots.get(&key) {
            match slot {
                Slot::Cached { until, response } if Instant::now() < *until => {
                    bump(&counters.cache_hits);
                    return SingleFlightFuture::cached(response.clone());
                }
                Slot::InFlight(flight) => {
                    bump(&counters.coalesced);
                    let flight = flight.clone();
                    let seat = {
                        let mut f = lock(&flight.state);
                        f.seats.push(Seat::Waiting(None));
                        f.members += 1;
                        f.seats.len()
                    };
                    drop(t);
                    let own = Box::new((self.inner.clone(), request));
                    return SingleFlightFuture::member(Member::new(flight, seat), Some(own));
                }
                // Expired: a new flight takes the slot.
                Slot::Cached { .. } => {}
            }
        } else if t.slots.len() >= config.max_keys {
            // Full: drop what has expired before refusing.
            let now = Instant::now();
            t.slots.retain(|_, slot| slot.is_live(now));
            if t.slots.len() >= config.max_keys {
                bump(&counters.bypassed_table_full);
                drop(t);
                return SingleFlightFuture::alone(self.inner.clone(), request);
            }
        }
        bump(&counters.flights);
        let call: Call<B> = Box::pin(fly(self.inner.clone(), request, config.max_body_bytes));
        let flight = Arc::new(Flight {
            config: config.clone(),
            key: key.clone(),
            state: Mutex::new(FlightState {
                call: Some(call),
                answer: None,
                lead: None,
                seats: Vec::new(),
                members: 1,
            }),
        });
        t.slots.insert(key, Slot::InFlight(flight.clone()));
        drop(t);
        SingleFlightFuture::member(Member::new(flight, 0), None)
    }
}

/// The upstream call of one flight, body read up to `cap`.
async fn fly<S, ReqB, B>(service: S, request: http::Request<ReqB>, cap: usize) -> FlightOutput<B>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let shared = |e: BoxError| SharedError(Arc::new(e));
    let response = service
        .oneshot(request)
        .await
        .map_err(|e| shared(e.into()))?;
    let (parts, mut body) = response.into_parts();
    if body.size_hint().lower() > cap as u64 {
        let streaming = PrefixedBody::streaming(body);
        return Ok(Landed::TooLarge(Box::new(http::Response::from_parts(
            parts, streaming,
        ))));
    }
    let mut buf = Collect::default();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| shared(e.into()))?;
        match frame.into_data() {
            Ok(data) => {
                let over = buf.len() + data.remaining() > cap;
                buf.push(data);
                if over {
                    let rest = PrefixedBody::new(buf.finish(), body);
                    let response = http::Response::from_parts(parts, rest);
                    return Ok(Landed::TooLarge(Box::new(response)));
                }
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(Box::new(t));
                }
            }
        }
    }
    Ok(Landed::Buffered(Buffered {
        head: parts,
        body: buf.finish(),
        trailers,
    }))
}

/// A body's data frames in memory. The usual single frame (`Full`, a
/// small hyper body) is kept as it came, without a copy.
#[derive(Default)]
struct Collect {
    first: Option<Bytes>,
    more: Option<BytesMut>,
}

impl Collect {
    fn len(&self) -> usize {
        self.more
            .as_ref()
            .map_or_else(|| self.first.as_ref().map_or(0, Bytes::len), BytesMut::len)
    }

    fn push(&mut self, mut data: impl Buf) {
        if let Some(more) = &mut self.more {
            while data.has_remaining() {
                let n = data.chunk().len();
                more.extend_from_slice(data.chunk());
                data.advance(n);
            }
            return;
        }
        let bytes = data.copy_to_bytes(data.remaining());
        match self.first.take() {
            None => self.first = Some(bytes),
            Some(first) => {
                let mut more = BytesMut::with_capacity(first.len() + bytes.len());
                more.extend_from_slice(&first);
                more.extend_from_slice(&bytes);
                self.more = Some(more);
            }
        }
    }

    fn finish(self) -> Bytes {
        match self.more {
            Some(more) => more.freeze(),
            None => self.first.unwrap_or_default(),
        }
    }
}

/// One caller's share of a flight. Dropped before its answer, it leaves
/// the others waiting; the last caller to go drops (cancels) the
/// upstream call and frees the key.
struct Member<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> {
    flight: Arc<Flight<Key, B>>,
    /// 0 for the caller that started the flight.
    seat: usize,
    /// The caller has its answer: nothing is left to do on drop.
    answered: bool,
    /// The flight as a waker, made the first time this caller polls the
    /// call with others waiting.
    notifier: Option<Waker>,
}

/// Set while a caller polls the flight's call, which it has taken out of
/// the flight: if the poll panics, the flight ends with an error, so the
/// other callers do not wait for a call that is gone.
struct Unwinding<'a, Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static>(
    Option<&'a Flight<Key, B>>,
);

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Drop for Unwinding<'_, Key, B> {
    fn drop(&mut self) {
        let Some(flight) = self.0 else {
            return;
        };
        let table = table_of::<Key, B>(&flight.config).expect("typed when the flight began");
        let mut t = lock(table);
        if t.slots
            .get(&flight.key)
            .is_some_and(|s| matches!(s, Slot::InFlight(f) if std::ptr::eq(&**f, flight)))
        {
            t.slots.remove(&flight.key);
        }
        let mut f = lock(&flight.state);
        let error: BoxError = "single-flight: the upstream call panicked".into();
        f.answer = Some(Answer::Failed(SharedError(Arc::new(error))));
        f.wake_all();
    }
}

/// What a caller got from its flight.
enum Turn<B> {
    Answer(Result<http::Response<PrefixedBody<B>>, BoxError>),
    /// The answer was too large to share: send one's own request.
    SendOwn,
}

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Member<Key, B> {
    fn new(flight: Arc<Flight<Key, B>>, seat: usize) -> Self {
        Member {
            flight,
            seat,
            answered: false,
            notifier: None,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Turn<B>> {
        loop {
            let mut f = lock(&self.flight.state);
            if f.answer.is_some() {
                self.answered = true;
                return Poll::Ready(Self::take_answer(self.seat, &mut f));
            }
            let Some(mut call) = f.call.take() else {
                // Another caller is polling the call, on another thread:
                // the flight's waker reaches this one when it has to.
                f.register(self.seat, cx);
                return Poll::Pending;
            };
            let shared = f.members > 1;
            if shared {
                f.register(self.seat, cx);
            }
            drop(f);
            let mut guard = Unwinding(Some(&self.flight));
            let polled = if shared {
                let flight = &self.flight;
                let waker = self
                    .notifier
                    .get_or_insert_with(|| Waker::from(flight.clone()));
                call.as_mut().poll(&mut Context::from_waker(waker))
            } else {
                call.as_mut().poll(cx)
            };
            guard.0 = None;
            drop(guard);
            match polled {
                Poll::Ready(output) => {
                    drop(call);
                    return Poll::Ready(self.land(output));
                }
                Poll::Pending => {
                    let mut f = lock(&self.flight.state);
                    f.call = Some(call);
                    if shared {
                        return Poll::Pending;
                    }
                    if f.members == 1 {
                        // For a caller that joins later: the flight's
                        // waker wakes this one too once the call is
                        // polled with it.
                        f.register(self.seat, cx);
                        return Poll::Pending;
                    }
                    // Someone joined while the call was polled with this
                    // caller's waker alone: poll it again with the
                    // flight's, which wakes them too.
                }
            }
        }
    }

    /// Takes the flight out of the table (or turns it into a cache entry)
    /// and leaves the answer for the other callers.
    fn land(&mut self, output: FlightOutput<B>) -> Turn<B> {
        self.answered = true;
        let Flight { config, key, .. } = &*self.flight;
        let cache_until = match (&output, config.ttl) {
            (Ok(Landed::Buffered(b)), Some(ttl)) if b.head.status.is_success() => {
                Some(Instant::now() + ttl)
            }
            _ => None,
        };
        let table = table_of::<Key, B>(config).expect("the table was typed when the flight began");
        let mut t = lock(table);
        // One look-up on the usual path: this flight's slot, taken out.
        let ours = match t.slots.remove_entry(key) {
            Some((key, slot)) if slot.is_flight(&self.flight) => Some(key),
            Some((key, other)) => {
                t.slots.insert(key, other);
                None
            }
            None => None,
        };
        if let Ok(Landed::TooLarge(_)) = &output {
            bump(&config.counters.too_large);
        }
        let mut f = lock(&self.flight.state);
        if f.members == 1 && cache_until.is_none() {
            // No one else waits and nothing is cached: the answer is this
            // caller's alone and moves out without a copy.
            f.leave(self.seat);
            drop(f);
            drop(t);
            return Turn::Answer(match output {
                Ok(Landed::Buffered(b)) => Ok(b.into_response()),
                Ok(Landed::TooLarge(response)) => Ok(*response),
                Err(e) => Err(Box::new(e)),
            });
        }
        let answer = match output {
            Ok(Landed::Buffered(b)) => {
                let b = Arc::new(b);
                if let (Some(key), Some(until)) = (ours, cache_until) {
                    let response = b.clone();
                    t.slots.insert(key, Slot::Cached { until, response });
                }
                Answer::Buffered(b)
            }
            Ok(Landed::TooLarge(response)) => Answer::TooLarge(Some(response)),
            Err(e) => Answer::Failed(e),
        };
        drop(t);
        f.answer = Some(answer);
        f.wake_all();
        Self::take_answer(self.seat, &mut f)
    }

    /// The copy of the flight's answer for the caller in `seat`.
    fn take_answer(seat: usize, f: &mut FlightState<B>) -> Turn<B> {
        let last = f.members == 1;
        f.leave(seat);
        // The last caller moves a buffered answer out, unless the cache
        // keeps it too.
        if last
            && matches!(f.answer, Some(Answer::Buffered(_)))
            && let Some(Answer::Buffered(b)) = f.answer.take()
        {
            return Turn::Answer(Ok(match Arc::try_unwrap(b) {
                Ok(b) => b.into_response(),
                Err(b) => b.response(),
            }));
        }
        match f.answer.as_mut().expect("the flight has landed") {
            Answer::Failed(e) => Turn::Answer(Err(Box::new(e.clone()))),
            Answer::TooLarge(stream) if seat == 0 => Turn::Answer(
                stream
                    .take()
                    .map(|r| *r)
                    .ok_or_else(|| "single-flight: the streaming response was taken twice".into()),
            ),
            Answer::TooLarge(_) => Turn::SendOwn,
            Answer::Buffered(b) => Turn::Answer(Ok(b.response())),
        }
    }
}

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Drop for Member<Key, B> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        {
            let mut f = lock(&self.flight.state);
            if f.members > 1 {
                // Others still wait, and go on polling the call.
                f.leave(self.seat);
                return;
            }
        }
        // Perhaps the last caller: recheck under the table's lock, which a
        // caller joining holds.
        let Flight { config, key, .. } = &*self.flight;
        let table = table_of::<Key, B>(config).expect("the table was typed when the flight began");
        let mut t = lock(table);
        let mut f = lock(&self.flight.state);
        f.leave(self.seat);
        let last = f.members == 0 && f.answer.is_none();
        let call = if last { f.call.take() } else { None };
        drop(f);
        if last && t.slots.get(key).is_some_and(|s| s.is_flight(&self.flight)) {
            t.slots.remove(key);
        }
        drop(t);
        // The upstream call, if this was its last caller, is dropped
        // (cancelled) here, outside the locks.
        drop(call);
    }
}

pin_project! {
    /// The future [`SingleFlight`] answers with: the caller's share of a
    /// flight, a cached answer, or a request sent alone.
    ///
    /// A named type rather than a boxed one: a request that starts a
    /// flight costs two allocations (the flight and its upstream call),
    /// and one that joins a flight none.
    pub struct SingleFlightFuture<S, ReqB, B, Key>
    where
        S: Service<http::Request<ReqB>, Response = http::Response<B>>,
        Key: Hash,
        Key: Eq,
        Key: Send,
        Key: Sync,
        Key: 'static,
        B: Send,
        B: 'static,
    {
        #[pin]
        state: State<S, ReqB, B, Key>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqB, B, Key>
    where
        S: Service<http::Request<ReqB>, Response = http::Response<B>>,
        Key: Hash,
        Key: Eq,
        Key: Send,
        Key: Sync,
        Key: 'static,
        B: Send,
        B: 'static,
    {
        // A cache hit, copied out when polled.
        Cached { response: Arc<Buffered> },
        // Boxed, as `own` is: rare paths, which would otherwise make every
        // caller's future as large as a whole request and its call.
        Alone { call: Pin<Box<Oneshot<S, http::Request<ReqB>>>> },
        // `own`, for a caller that joined, is its own service and request,
        // sent alone if the shared answer is too large.
        Member { member: Member<Key, B>, own: Option<Box<(S, http::Request<ReqB>)>> },
        Done,
    }
}

impl<S, ReqB, B, Key> SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    fn cached(response: Arc<Buffered>) -> Self {
        SingleFlightFuture {
            state: State::Cached { response },
        }
    }

    fn alone(service: S, request: http::Request<ReqB>) -> Self {
        SingleFlightFuture {
            state: State::Alone {
                call: Box::pin(Oneshot::new(service, request)),
            },
        }
    }

    fn member(member: Member<Key, B>, own: Option<Box<(S, http::Request<ReqB>)>>) -> Self {
        SingleFlightFuture {
            state: State::Member { member, own },
        }
    }
}

impl<S, ReqB, B, Key> fmt::Debug for SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlightFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, B, Key> Future for SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    type Output = Result<http::Response<PrefixedBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let output = match state.as_mut().project() {
                StateProj::Cached { response } => Ok(response.response()),
                StateProj::Alone { call } => std::task::ready!(call.as_mut().poll(cx))
                    .map(|r| r.map(PrefixedBody::streaming))
                    .map_err(Into::into),
                StateProj::Member { member, own } => match std::task::ready!(member.poll(cx)) {
                    Turn::Answer(output) => output,
                    Turn::SendOwn => match own.take() {
                        Some(own) => {
                            let (service, request) = *own;
                            state.set(State::Alone {
                                call: Box::pin(Oneshot::new(service, request)),
                            });
                            continue;
                        }
                        None => Err("single-flight: no request of its own to send".into()),
                    },
                },
                StateProj::Done => panic!("single-flight future polled after it completed"),
            };
            state.set(State::Done);
            return Poll::Ready(output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    /// The buffer must not change the credential hash: it is what writing
    /// the same pieces to a SipHasher directly gives, for short pieces, a
    /// piece that crosses the buffer's end and one longer than the buffer.
    /// The first hash depends only on the bytes written, and on every one.
    #[test]
    fn the_tee_hashes_as_writing_to_each_hasher_directly() {
        let states = (foldhash::fast::RandomState::default(), RandomState::new());
        let long = vec![0xa5u8; 300];
        let pieces: [&[u8]; 6] = [b"GET", &[0xff], &[7; 100], &[1; 60], &long, b"tail"];
        let feed = |pieces: &[&[u8]]| {
            let mut tee = Tee::new(&states);
            for piece in pieces {
                tee.write(piece);
                tee.write_usize(piece.len());
            }
            tee
        };
        let mut b = states.1.build_hasher();
        for piece in pieces {
            b.write(piece);
            b.write_usize(piece.len());
        }
        let (first, second) = feed(&pieces).finish_both();
        assert_eq!(second, b.finish());
        assert_eq!(feed(&pieces).finish(), first);
        assert_eq!(feed(&pieces).finish_both(), (first, second));
        // One byte changed, early or late: both hashes move.
        let (mut early, mut late) = (long.clone(), long.clone());
        early[0] ^= 1;
        late[299] ^= 1;
        for changed in [&early, &late] {
            let other: [&[u8]; 6] = [b"GET", &[0xff], &[7; 100], &[1; 60], changed, b"tail"];
            let (f, s) = feed(&other).finish_both();
            assert!(f != first && s != second);
        }
    }

    #[test]
    fn keys_differ_by_credential_and_match_without_one() {
        let key = DefaultKey::default();
        let req = |auth: Option<&str>| {
            let mut r = http::Request::get("http://token.internal/token");
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r.body(http_body_util::Empty::<Bytes>::new()).unwrap()
        };
        let ada = key.key(&req(Some("Bearer ada"))).unwrap();
        let bob = key.key(&req(Some("Bearer bob"))).unwrap();
        let none = key.key(&req(None)).unwrap();
        assert!(ada != bob && ada != none);
        assert!(ada == key.key(&req(Some("Bearer ada"))).unwrap());
        assert!(none == key.key(&req(None)).unwrap());
        // The table's hash agrees with equality.
        let h = RandomState::new();
        assert_eq!(
            h.hash_one(&ada),
            h.hash_one(key.key(&req(Some("Bearer ada"))).unwrap())
        );
    }
}

//! The editor's token refresh of 2026-08-17, buggy and fixed, against a
//! token endpoint that fails every request and then heals, in virtual time.
//!
//! 1 000 callers inside one editor process each refresh the shared token
//! every `T` (phases spread evenly over `T`). For the first 60 s the
//! endpoint answers 503 to everything after 20 ms; then it heals and
//! answers 200 with a token for 60 s more.
//!
//! * **buggy**: every caller refreshes on its own; a failed refresh spawns
//!   three more at once, each of which does the same, two levels deep (the
//!   incident's "one failed token operation could spawn several requests
//!   and loop", bounded here so the run ends).
//! * **fixed**: one `tower` stack shared by all callers,
//!   `SingleFlight → Retry (20 % budget) → Throttle (SRE K = 2, reject
//!   probability capped at 0.9)`; a failed refresh waits for the caller's
//!   next turn, and a token, once had, is kept for its lifetime (the
//!   single-flight success cache).
//! * Three variants show which layer does what. **The throttle uncapped**,
//!   as in the SRE book, sends almost nothing while the endpoint fails, and
//!   almost nothing after it heals either: no refresh gets a token in the
//!   60 s after the heal. **Without the throttle**, single-flight and the
//!   budget alone keep the failing phase under 1.1 attempts per refresh.
//!   **Retry with its budget alone** cannot: every caller still sends its
//!   own refresh, plus the budget's 20 %.
//!
//! ```text
//! cargo run -p stormbreak-client --example token_refresh
//! ```
//!
//! The test `tests/token_refresh.rs` runs the same code and checks each of
//! these claims.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use stormbreak_client::{BoxError, RetryLayer, SingleFlightLayer, ThrottleLayer};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::ThrottleConfig;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// The scenario's knobs.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Callers in the editor process.
    pub callers: u64,
    /// Each caller refreshes every `period`.
    pub period: Duration,
    /// For this long the endpoint fails every request.
    pub horizon: Duration,
    /// Then it answers every request with a token for this long.
    pub recovery: Duration,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            callers: 1_000,
            period: Duration::from_secs(5),
            horizon: Duration::from_secs(60),
            recovery: Duration::from_secs(60),
        }
    }
}

impl Scenario {
    /// Refreshes the callers ask for while the endpoint fails: what a
    /// correct client turns into at most one attempt each.
    pub fn logical_refreshes(&self) -> u64 {
        self.callers * self.rounds_in(self.horizon)
    }

    fn rounds_in(&self, span: Duration) -> u64 {
        (span.as_nanos() / self.period.as_nanos()) as u64
    }

    fn rounds(&self) -> u64 {
        self.rounds_in(self.horizon + self.recovery)
    }

    /// When `caller` makes its `round`-th refresh: phases spread over the
    /// period, so refreshes do not all line up.
    fn at(&self, caller: u64, round: u64) -> Duration {
        self.period * round as u32 + self.period.mul_f64(caller as f64 / self.callers as f64)
    }
}

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Full<Bytes>>;

/// Requests the token endpoint received, by phase.
#[derive(Debug, Default)]
pub struct Received {
    /// While it failed every request.
    pub failing: AtomicU64,
    /// After it healed.
    pub healed: AtomicU64,
}

/// The token endpoint: after 20 ms, 503 to every request received before
/// `heals_at`, a token to every later one; counts requests by phase.
pub fn token_endpoint(
    heals_at: Instant,
) -> (
    impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static,
    Arc<Received>,
) {
    let received = Arc::new(Received::default());
    let r = received.clone();
    let svc = service_fn(move |_req: Req| {
        let healed = Instant::now() >= heals_at;
        let counter = if healed { &r.healed } else { &r.failing };
        counter.fetch_add(1, Ordering::Relaxed);
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let (status, body) = if healed {
                (200, Bytes::from_static(b"{\"token\":\"t\"}"))
            } else {
                (503, Bytes::new())
            };
            Ok(http::Response::builder()
                .status(status)
                .body(Full::new(body))
                .unwrap())
        }
    });
    (svc, received)
}

fn refresh_request() -> Req {
    http::Request::get("http://token.internal/copilot_internal/v2/token")
        .header("authorization", "token editor-session")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// The buggy client: the attempts the endpoint received while it failed
/// (the run stops when the endpoint heals).
pub async fn run_buggy(scenario: Scenario) -> u64 {
    let start = Instant::now();
    // Fan-outs started just before the horizon land after it: the endpoint
    // keeps failing for them, so every refresh costs its full 13 attempts.
    let (endpoint, received) =
        token_endpoint(start + 2 * scenario.horizon + Duration::from_secs(60));
    let mut callers = Vec::new();
    for caller in 0..scenario.callers {
        let endpoint = endpoint.clone();
        callers.push(tokio::spawn(async move {
            for round in 0..scenario.rounds_in(scenario.horizon) {
                tokio::time::sleep_until(start + scenario.at(caller, round)).await;
                buggy_refresh(endpoint.clone(), 0).await;
            }
        }));
    }
    for c in callers {
        c.await.expect("caller task");
    }
    received.failing.load(Ordering::Relaxed)
}

/// One failed token operation spawns three more, which do the same.
fn buggy_refresh<S>(endpoint: S, depth: u32) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
where
    S: Service<Req, Response = Resp, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
{
    Box::pin(async move {
        let ok = matches!(
            endpoint.clone().oneshot(refresh_request()).await,
            Ok(r) if r.status().is_success()
        );
        if !ok && depth < 2 {
            let spawned: Vec<_> = (0..3)
                .map(|_| tokio::spawn(buggy_refresh(endpoint.clone(), depth + 1)))
                .collect();
            for s in spawned {
                s.await.expect("spawned refresh");
            }
        }
    })
}

/// Which layers a client stack has; every stack retries, under a 20 %
/// budget shared by its callers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layers {
    /// Single-flight in front, with a success cache of the token's life.
    pub single_flight: bool,
    /// The adaptive throttle behind the retries, with this cap on its
    /// reject probability (1: the SRE book's law uncapped).
    pub throttle_cap: Option<f64>,
}

impl Layers {
    /// `SingleFlight → Retry → Throttle (capped at 0.9)`: the fix.
    pub const FIXED: Layers = Layers {
        single_flight: true,
        throttle_cap: Some(FIXED_THROTTLE_CAP),
    };
    /// The same with the throttle uncapped, as in the SRE book.
    pub const BOOK_THROTTLE: Layers = Layers {
        single_flight: true,
        throttle_cap: Some(1.0),
    };
    /// `SingleFlight → Retry`.
    pub const NO_THROTTLE: Layers = Layers {
        single_flight: true,
        throttle_cap: None,
    };
    /// `Retry` alone, with its budget.
    pub const RETRY_ONLY: Layers = Layers {
        single_flight: false,
        throttle_cap: None,
    };
}

/// What a client stack did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackRun {
    /// Attempts the endpoint received while it failed.
    pub attempts: u64,
    /// Attempts it received after it healed.
    pub attempts_healed: u64,
    /// Upstream calls started by single-flight (each runs one retry
    /// sequence), over the whole run.
    pub flights: u64,
    /// Refreshes that joined a flight already in the air.
    pub coalesced: u64,
    /// Refreshes answered from the success cache.
    pub cache_hits: u64,
    /// Attempts the throttle refused locally.
    pub throttled: u64,
    /// From the endpoint healing to the first refresh that got a token.
    pub first_token_after_heal: Option<Duration>,
    /// Refreshes that got a token.
    pub successes: u64,
}

/// The fixed client's cap on its throttle's reject probability. Uncapped,
/// the SRE law's `p` (K = 2, 2-minute window) tends to 1 against an
/// endpoint that accepts nothing, and after it heals the first refresh to
/// get through waits minutes (the policy crate's `AdaptiveThrottle` docs);
/// at 0.9 a tenth of the flights still go out as probes, and the first one
/// after the heal gets the token.
pub const FIXED_THROTTLE_CAP: f64 = 0.9;

/// A client stack with the given layers: one for every caller.
pub async fn run_stack(scenario: Scenario, layers: Layers) -> StackRun {
    let start = Instant::now();
    let heals_at = start + scenario.horizon;
    let (endpoint, received) = token_endpoint(heals_at);
    let single_flight = SingleFlightLayer::new().cache_successes_for(Duration::from_secs(25 * 60));
    let retry = RetryLayer::builder(&RetryConfig::default())
        .expect("default retry config")
        .seed(1)
        .build();
    let throttle = ThrottleLayer::new(&ThrottleConfig {
        max_reject_probability: layers.throttle_cap.unwrap_or(1.0),
        ..ThrottleConfig::default()
    })
    .expect("a valid throttle config")
    .seed(2);
    let (first_token, successes) = match (layers.single_flight, layers.throttle_cap.is_some()) {
        (true, true) => {
            let client = ServiceBuilder::new()
                .layer(single_flight.clone())
                .layer(retry)
                .layer(throttle.clone())
                .service(endpoint);
            drive(scenario, start, client).await
        }
        (true, false) => {
            let client = ServiceBuilder::new()
                .layer(single_flight.clone())
                .layer(retry)
                .service(endpoint);
            drive(scenario, start, client).await
        }
        (false, true) => {
            let client = ServiceBuilder::new()
                .layer(retry)
                .layer(throttle.clone())
                .service(endpoint);
            drive(scenario, start, client).await
        }
        (false, false) => {
            let client = ServiceBuilder::new().layer(retry).service(endpoint);
            drive(scenario, start, client).await
        }
    };
    let stats = single_flight.stats();
    StackRun {
        attempts: received.failing.load(Ordering::Relaxed),
        attempts_healed: received.healed.load(Ordering::Relaxed),
        flights: stats.flights,
        coalesced: stats.coalesced,
        cache_hits: stats.cache_hits,
        throttled: throttle.rejected(),
        first_token_after_heal: first_token.map(|t| t.saturating_duration_since(heals_at)),
        successes,
    }
}

/// Every caller refreshes through `client` on its turns; returns when the
/// first refresh got a token, and how many did.
async fn drive<S, B>(scenario: Scenario, start: Instant, client: S) -> (Option<Instant>, u64)
where
    S: Service<Req, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
{
    let first_token = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let successes = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for caller in 0..scenario.callers {
        let client = client.clone();
        let (first_token, successes) = (first_token.clone(), successes.clone());
        callers.push(tokio::spawn(async move {
            for round in 0..scenario.rounds() {
                tokio::time::sleep_until(start + scenario.at(caller, round)).await;
                // A failed refresh waits for this caller's next turn.
                if let Ok(r) = client.clone().oneshot(refresh_request()).await
                    && r.status().is_success()
                {
                    successes.fetch_add(1, Ordering::Relaxed);
                    let mut first = first_token.lock().expect("not poisoned");
                    first.get_or_insert_with(Instant::now);
                }
            }
        }));
    }
    for c in callers {
        c.await.expect("caller task");
    }
    let first = *first_token.lock().expect("not poisoned");
    (first, successes.load(Ordering::Relaxed))
}

/// Used by `main`; the test calls the runs itself.
#[allow(dead_code)]
fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    let (buggy, stacks) = runtime.block_on(async {
        let buggy = run_buggy(scenario).await;
        let mut stacks = Vec::new();
        for (name, layers) in [
            ("fixed (single-flight, retry, throttle)", Layers::FIXED),
            (
                "the same, throttle uncapped (SRE book)",
                Layers::BOOK_THROTTLE,
            ),
            ("single-flight + retry, no throttle", Layers::NO_THROTTLE),
            ("retry with its budget alone", Layers::RETRY_ONLY),
        ] {
            stacks.push((name, run_stack(scenario, layers).await));
        }
        (buggy, stacks)
    });
    println!(
        "{} callers refreshing every {:?}: {:?} against an endpoint failing 100%, then {:?} healed",
        scenario.callers, scenario.period, scenario.horizon, scenario.recovery
    );
    println!("logical refreshes while failing: {logical}");
    println!(
        "{:<40} {:>9} attempts ({:.3}x)",
        "buggy fan-out client",
        buggy,
        buggy as f64 / logical as f64
    );
    for (name, f) in stacks {
        println!(
            "{name:<40} {:>9} attempts ({:.3}x); healed: first token after {}, {} attempts",
            f.attempts,
            f.attempts as f64 / logical as f64,
            f.first_token_after_heal
                .map_or_else(|| "never".to_owned(), |d| format!("{d:?}")),
            f.attempts_healed
        );
        println!(
            "{:<40} {} flights, {} coalesced, {} from the cache, {} throttled",
            "", f.flights, f.coalesced, f.cache_hits, f.throttled
        );
    }
}

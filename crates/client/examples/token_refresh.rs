//! The editor's token refresh of 2026-08-17, buggy and fixed, against a
//! token endpoint that fails every request, in virtual time.
//!
//! 1 000 callers inside one editor process each refresh the shared token
//! every `T` (phases spread evenly over `T`) for 60 s. The endpoint
//! answers 503 to everything after 20 ms.
//!
//! * **buggy**: every caller refreshes on its own; a failed refresh spawns
//!   three more at once, each of which does the same, two levels deep (the
//!   incident's "one failed token operation could spawn several requests
//!   and loop", bounded here so the run ends).
//! * **fixed**: one `tower` stack shared by all callers,
//!   `SingleFlight → Retry (20 % budget) → Throttle (SRE K = 2)`; a failed
//!   refresh waits for the caller's next turn.
//!
//! ```text
//! cargo run -p stormbreak-client --example token_refresh
//! ```
//!
//! The test `tests/token_refresh.rs` runs the same code and checks the
//! fixed client stays within 1.1 attempts per logical refresh.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use stormbreak_client::{BoxError, RetryLayer, SingleFlightLayer, ThrottleLayer};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::ThrottleConfig;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// The scenario's knobs.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Callers in the editor process.
    pub callers: u64,
    /// Each caller refreshes every `period`.
    pub period: Duration,
    /// For this long.
    pub horizon: Duration,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            callers: 1_000,
            period: Duration::from_secs(5),
            horizon: Duration::from_secs(60),
        }
    }
}

impl Scenario {
    /// Refreshes the callers ask for: what a correct client turns into at
    /// most one attempt each.
    pub fn logical_refreshes(&self) -> u64 {
        self.callers * self.rounds()
    }

    fn rounds(&self) -> u64 {
        (self.horizon.as_nanos() / self.period.as_nanos()) as u64
    }

    /// When `caller` makes its `round`-th refresh: phases spread over the
    /// period, so refreshes do not all line up.
    fn at(&self, caller: u64, round: u64) -> Duration {
        self.period * round as u32 + self.period.mul_f64(caller as f64 / self.callers as f64)
    }
}

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Full<Bytes>>;

/// The token endpoint: 503 to every request after 20 ms; counts requests.
pub fn token_endpoint() -> (
    impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static,
    Arc<AtomicU64>,
) {
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let svc = service_fn(move |_req: Req| {
        r.fetch_add(1, Ordering::Relaxed);
        async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(http::Response::builder()
                .status(503)
                .body(Full::new(Bytes::new()))
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

/// The buggy client: the attempts the endpoint received.
pub async fn run_buggy(scenario: Scenario) -> u64 {
    let (endpoint, received) = token_endpoint();
    let start = tokio::time::Instant::now();
    let mut callers = Vec::new();
    for caller in 0..scenario.callers {
        let endpoint = endpoint.clone();
        callers.push(tokio::spawn(async move {
            for round in 0..scenario.rounds() {
                tokio::time::sleep_until(start + scenario.at(caller, round)).await;
                buggy_refresh(endpoint.clone(), 0).await;
            }
        }));
    }
    for c in callers {
        c.await.expect("caller task");
    }
    received.load(Ordering::Relaxed)
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

/// What the fixed client did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed {
    /// Attempts the endpoint received.
    pub attempts: u64,
    /// Upstream calls started by single-flight (each runs one retry sequence).
    pub flights: u64,
    /// Refreshes that joined a flight already in the air.
    pub coalesced: u64,
    /// Attempts the throttle refused locally.
    pub throttled: u64,
}

/// The fixed client: one stack for every caller.
pub async fn run_fixed(scenario: Scenario) -> Fixed {
    let (endpoint, received) = token_endpoint();
    let single_flight = SingleFlightLayer::new().cache_successes_for(Duration::from_secs(25 * 60));
    let retry = RetryLayer::builder(&RetryConfig::default())
        .expect("default retry config")
        .seed(1)
        .build();
    let throttle = ThrottleLayer::new(&ThrottleConfig::default())
        .expect("default throttle config")
        .seed(2);
    let client = ServiceBuilder::new()
        .layer(single_flight.clone())
        .layer(retry)
        .layer(throttle.clone())
        .service(endpoint);
    let start = tokio::time::Instant::now();
    let mut callers = Vec::new();
    for caller in 0..scenario.callers {
        let client = client.clone();
        callers.push(tokio::spawn(async move {
            for round in 0..scenario.rounds() {
                tokio::time::sleep_until(start + scenario.at(caller, round)).await;
                // A failed refresh waits for this caller's next turn.
                let _ = client.clone().oneshot(refresh_request()).await;
            }
        }));
    }
    for c in callers {
        c.await.expect("caller task");
    }
    let stats = single_flight.stats();
    Fixed {
        attempts: received.load(Ordering::Relaxed),
        flights: stats.flights,
        coalesced: stats.coalesced,
        throttled: throttle.rejected(),
    }
}

/// Used by `main`; the test calls the two runs itself.
#[allow(dead_code)]
fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    let (buggy, fixed) = runtime.block_on(async {
        let buggy = run_buggy(scenario).await;
        let fixed = run_fixed(scenario).await;
        (buggy, fixed)
    });
    println!(
        "{} callers refreshing every {:?} for {:?} against an endpoint failing 100%",
        scenario.callers, scenario.period, scenario.horizon
    );
    println!("logical refreshes:        {logical}");
    println!(
        "buggy fan-out client:     {buggy} attempts ({:.2}x)",
        buggy as f64 / logical as f64
    );
    println!(
        "fixed client:             {} attempts ({:.3}x); {} flights, {} coalesced, {} throttled",
        fixed.attempts,
        fixed.attempts as f64 / logical as f64,
        fixed.flights,
        fixed.coalesced,
        fixed.throttled
    );
}

//! Which order of the layers storms and which does not, against a backend
//! that fails every request, on tokio's paused clock.
//!
//! The safe order, outermost first:
//! `SingleFlight → Retry → Throttle → Breaker → backend`.
//! Single-flight outside retry turns N identical callers into one retry
//! sequence; throttle and breaker inside retry see (and refuse) every
//! attempt, and their refusals are final for the retry layer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use stormbreak_client::{BoxError, RetryLayer, SingleFlightLayer, ThrottleLayer};
use stormbreak_policy::budget::Unlimited;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::ThrottleConfig;
use tower::{Layer, Service, ServiceExt, service_fn};

type Req = http::Request<Full<Bytes>>;

const CALLERS: u64 = 1000;
const ROUNDS: u64 = 30;

/// Answers 503 after `latency`, and counts what it received.
fn failing_backend(
    latency: Duration,
) -> (
    impl Service<Req, Response = http::Response<Full<Bytes>>, Error = BoxError, Future: Send>
    + Clone
    + Send
    + 'static,
    Arc<AtomicU64>,
) {
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let svc = service_fn(move |_req: Req| {
        r.fetch_add(1, Ordering::Relaxed);
        async move {
            tokio::time::sleep(latency).await;
            Ok(http::Response::builder()
                .status(503)
                .body(Full::new(Bytes::new()))
                .unwrap())
        }
    });
    (svc, received)
}

fn token_request(caller: u64, shared_token: bool) -> Req {
    let user = if shared_token { 0 } else { caller };
    http::Request::get("http://token.internal/token")
        .header("authorization", format!("Bearer editor-{user}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Every caller asks once a second for `ROUNDS` seconds.
async fn run<S, R>(client: S, shared_token: bool)
where
    S: Service<Req, Response = http::Response<R>, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
    R: Send + 'static,
{
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let client = client.clone();
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    tokio::time::sleep_until(start + Duration::from_secs(round)).await;
                    let _ = client
                        .clone()
                        .oneshot(token_request(caller, shared_token))
                        .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn retry_inside_single_flight_storms_and_outside_does_not() {
    let config = RetryConfig::default();
    // A load balancer shedding at once: the answer is back before the
    // other callers' jittered retries, so those find no flight to join.
    let latency = Duration::from_millis(1);

    // Safe: one flight per round runs one retry sequence (3 attempts).
    let (backend, safe_count) = failing_backend(latency);
    let retry = RetryLayer::builder(&config).unwrap().seed(1).build();
    let safe = SingleFlightLayer::new().layer(retry.layer(backend));
    run(safe, true).await;
    let safe_count = safe_count.load(Ordering::Relaxed);

    // Storm: first attempts coalesce, but every caller retries on its own
    // jittered schedule, so retries do not; only the budget limits them.
    let (backend, storm_count) = failing_backend(latency);
    let retry = RetryLayer::builder(&config).unwrap().seed(1).build();
    let storm = retry.layer(SingleFlightLayer::new().layer(backend));
    run(storm, true).await;
    let storm_count = storm_count.load(Ordering::Relaxed);

    eprintln!("single-flight outside retry: {safe_count}; inside: {storm_count}");
    assert!(safe_count <= 3 * ROUNDS, "safe order: {safe_count}");
    assert!(
        storm_count >= 5 * safe_count,
        "storm order {storm_count} vs safe order {safe_count}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttle_outside_retry_lets_the_retries_through() {
    // No retry budget, as in the editor client of the incident: the
    // throttle is the only bound, so where it sits decides the load.
    let config = RetryConfig::default();

    let (backend, inside) = failing_backend(Duration::from_millis(50));
    let throttle = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(3);
    let retry = RetryLayer::builder(&config)
        .unwrap()
        .budget(Unlimited)
        .seed(1)
        .build();
    let safe = retry.layer(throttle.layer(backend));
    run(safe, false).await;
    let inside = inside.load(Ordering::Relaxed);

    let (backend, outside) = failing_backend(Duration::from_millis(50));
    let throttle = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(3);
    let retry = RetryLayer::builder(&config)
        .unwrap()
        .budget(Unlimited)
        .seed(1)
        .build();
    let storm = throttle.layer(retry.layer(backend));
    run(storm, false).await;
    let outside = outside.load(Ordering::Relaxed);

    let logical = CALLERS * ROUNDS;
    eprintln!("throttle inside retry: {inside}; outside: {outside}; logical {logical}");
    assert!(inside < outside, "inside {inside} vs outside {outside}");
    assert!(inside * 2 < outside, "inside {inside} vs outside {outside}");
}

#[tokio::test(start_paused = true)]
async fn a_breaker_inside_retry_trips_on_attempts_and_its_refusals_are_not_retried() {
    use stormbreak_client::{BreakerLayer, Rejected};
    use stormbreak_policy::breaker::{BreakerConfig, BreakerState};
    let (backend, received) = failing_backend(Duration::from_millis(1));
    let breaker = BreakerLayer::new(&BreakerConfig::envoy_outlier_detection()).unwrap();
    let retry = RetryLayer::builder(&RetryConfig::default())
        .unwrap()
        .budget(Unlimited)
        .seed(1)
        .build();
    let client = retry.layer(breaker.layer(backend));
    // 3 attempts of the first request and 2 of the second trip the
    // breaker (5 in a row); the second request's third attempt is refused,
    // and that refusal is what it returns.
    let r = client.clone().oneshot(token_request(0, true)).await;
    assert_eq!(r.unwrap().status(), 503);
    let r = client.clone().oneshot(token_request(0, true)).await;
    assert!(r.unwrap_err().is::<Rejected>());
    assert_eq!(breaker.state(), BreakerState::Open);
    let r = client.clone().oneshot(token_request(0, true)).await;
    let rejected = r.unwrap_err();
    let rejected = rejected
        .downcast_ref::<Rejected>()
        .expect("refused locally");
    assert!(
        rejected
            .retry_after
            .is_some_and(|d| d > Duration::ZERO && d <= Duration::from_secs(30)),
        "{rejected:?}"
    );
    // The refusal was final: no retry spun against the open breaker.
    assert_eq!(received.load(Ordering::Relaxed), 5);
    assert_eq!(breaker.stats().rejected, 2);
}

#[tokio::test(start_paused = true)]
async fn with_slow_answers_retries_inside_single_flight_join_the_flight_in_the_air() {
    // 50 ms answers: a caller's jittered retry usually lands while another
    // caller's flight is still in the air and joins it, so the order that
    // storms against a fast-failing endpoint does not storm here. The
    // danger is the fast failure (a shedding load balancer), not the order
    // alone.
    let config = RetryConfig::default();
    let latency = Duration::from_millis(50);
    let (backend, safe) = failing_backend(latency);
    let retry = RetryLayer::builder(&config).unwrap().seed(1).build();
    run(SingleFlightLayer::new().layer(retry.layer(backend)), true).await;
    let (backend, inside) = failing_backend(latency);
    let retry = RetryLayer::builder(&config).unwrap().seed(1).build();
    run(retry.layer(SingleFlightLayer::new().layer(backend)), true).await;
    let (safe, inside) = (safe.load(Ordering::Relaxed), inside.load(Ordering::Relaxed));
    eprintln!("50 ms answers: single-flight outside retry {safe}; inside {inside}");
    assert!(safe <= 3 * ROUNDS, "safe order: {safe}");
    assert!(inside <= safe, "inside {inside} vs outside {safe}");
}

#[tokio::test(start_paused = true)]
async fn a_breaker_outside_retry_trips_only_after_three_times_the_attempts() {
    use stormbreak_client::BreakerLayer;
    use stormbreak_policy::breaker::{BreakerConfig, BreakerState};
    // Ten requests in turn against a backend that fails everything, with a
    // breaker that opens on 5 failures in a row (Envoy's outlier detection).
    async fn ten<S, R>(client: S)
    where
        S: Service<Req, Response = http::Response<R>, Error = BoxError> + Clone,
    {
        for _ in 0..10 {
            let _ = client.clone().oneshot(token_request(0, true)).await;
        }
    }
    let config = BreakerConfig::envoy_outlier_detection();
    let retry = || {
        RetryLayer::builder(&RetryConfig::default())
            .unwrap()
            .budget(Unlimited)
            .seed(1)
            .build()
    };

    // Inside retry: the breaker counts each attempt and opens after 5.
    let (backend, inside) = failing_backend(Duration::from_millis(1));
    let breaker = BreakerLayer::new(&config).unwrap();
    ten(retry().layer(breaker.layer(backend))).await;
    assert_eq!(breaker.state(), BreakerState::Open);

    // Outside retry: it sees one failure per logical request, after that
    // request's 3 attempts, so the backend takes 15 before it opens.
    let (backend, outside) = failing_backend(Duration::from_millis(1));
    let breaker = BreakerLayer::new(&config).unwrap();
    ten(breaker.layer(retry().layer(backend))).await;
    assert_eq!(breaker.state(), BreakerState::Open);

    let (inside, outside) = (
        inside.load(Ordering::Relaxed),
        outside.load(Ordering::Relaxed),
    );
    eprintln!("breaker inside retry: {inside} attempts; outside: {outside}");
    assert_eq!((inside, outside), (5, 15));
}

//! The retry layer against scripted backends, on tokio's paused clock: the
//! pauses are virtual, so the tests assert exact timings without sleeping.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stormbreak_client::{AttemptTimedOut, BoxError, CloneRequest, RetryLayer};
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{
    AwsRetryQuota, AwsRetryQuotaConfig, RatioBudget, RatioBudgetConfig, TokenBucket,
    TokenBucketConfig, Unlimited,
};
use stormbreak_policy::retry::{BackoffConfig, BackoffKind, GiveUpReason, Jitter, RetryConfig};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};

type Req = http::Request<()>;
type Resp = http::Response<()>;

/// What the backend does on its n-th call (0-based).
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    StatusRetryAfter(u16, &'static str),
    StatusPushback(u16, &'static str),
    Hang,
    Refused,
}

/// A backend that follows `script` (the last entry repeats) and records
/// when each call arrived.
fn backend(
    script: Vec<Answer>,
) -> (
    impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static,
    Arc<Mutex<Vec<Instant>>>,
) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let svc = service_fn(move |_req: Req| {
        let n = {
            let mut c = seen.lock().unwrap();
            c.push(Instant::now());
            c.len() - 1
        };
        let answer = script[n.min(script.len() - 1)];
        async move {
            match answer {
                Answer::Status(s) => Ok(http::Response::builder().status(s).body(()).unwrap()),
                Answer::StatusRetryAfter(s, after) => Ok(http::Response::builder()
                    .status(s)
                    .header("retry-after", after)
                    .body(())
                    .unwrap()),
                Answer::StatusPushback(s, ms) => Ok(http::Response::builder()
                    .status(s)
                    .header("grpc-retry-pushback-ms", ms)
                    .body(())
                    .unwrap()),
                Answer::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(http::Response::new(()))
                }
                Answer::Refused => {
                    Err(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)) as BoxError)
                }
            }
        }
    });
    (svc, calls)
}

/// Three attempts, constant 100 ms pauses without jitter: easy to time.
fn config() -> RetryConfig {
    RetryConfig {
        max_attempts: 3,
        overall_timeout: Some(Nanos::from_secs(30)),
        backoff: BackoffConfig {
            kind: BackoffKind::Constant,
            base: Nanos::from_millis(100),
            jitter: Jitter::None,
            ..BackoffConfig::default()
        },
        ..RetryConfig::default()
    }
}

fn gaps(calls: &[Instant]) -> Vec<Duration> {
    calls.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn a_503_is_retried_after_the_backoff_until_it_succeeds() {
    let (svc, calls) = backend(vec![
        Answer::Status(503),
        Answer::Status(503),
        Answer::Status(200),
    ]);
    let client = RetryLayer::builder(&config())
        .unwrap()
        .seed(1)
        .build()
        .layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(gaps(&calls), vec![Duration::from_millis(100); 2]);
}

#[tokio::test(start_paused = true)]
async fn a_403_shed_is_final() {
    let (svc, calls) = backend(vec![Answer::Status(403), Answer::Status(200)]);
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(calls.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn after_the_last_attempt_the_last_response_is_returned() {
    let (svc, calls) = backend(vec![Answer::Status(503)]);
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.lock().unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_after_holds_the_next_attempt_back() {
    let (svc, calls) = backend(vec![
        Answer::StatusRetryAfter(429, "2"),
        Answer::Status(200),
    ]);
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(gaps(&calls.lock().unwrap()), vec![Duration::from_secs(2)]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_retried() {
    let (svc, calls) = backend(vec![Answer::Refused, Answer::Status(200)]);
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(calls.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_is_abandoned_at_the_per_try_timeout() {
    let (svc, calls) = backend(vec![Answer::Hang, Answer::Status(200)]);
    let cfg = RetryConfig {
        per_try_timeout: Some(Nanos::from_millis(500)),
        ..config()
    };
    let client = RetryLayer::new(&cfg).unwrap().layer(svc);
    let start = Instant::now();
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        gaps(&calls.lock().unwrap()),
        vec![Duration::from_millis(600)]
    );
    assert_eq!(start.elapsed(), Duration::from_millis(600));
}

#[tokio::test(start_paused = true)]
async fn the_overall_deadline_ends_a_hung_request_with_a_timeout_error() {
    let (svc, calls) = backend(vec![Answer::Hang]);
    let cfg = RetryConfig {
        per_try_timeout: None,
        overall_timeout: Some(Nanos::from_secs(2)),
        ..config()
    };
    let client = RetryLayer::new(&cfg).unwrap().layer(svc);
    let start = Instant::now();
    let error = client.oneshot(http::Request::new(())).await.unwrap_err();
    let timed_out = error.downcast_ref::<AttemptTimedOut>().expect("a timeout");
    assert_eq!(timed_out.reason, GiveUpReason::Deadline);
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(calls.lock().unwrap().len(), 1);
}

/// Sends `n` requests, one every `every`, to a backend that always fails,
/// and returns the calls it received.
async fn total_failure(layer: RetryLayer, n: u32, every: Duration) -> usize {
    let (svc, calls) = backend(vec![Answer::Status(503)]);
    let client = layer.layer(svc);
    let mut tasks = Vec::new();
    for _ in 0..n {
        tasks.push(tokio::spawn(client.clone().oneshot(http::Request::new(()))));
        tokio::time::sleep(every).await;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().status(), 503);
    }
    calls.lock().unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn under_total_failure_the_budget_bounds_amplification_and_no_budget_does_not() {
    // 1 000 requests over 100 s, 5 attempts each allowed.
    let cfg = RetryConfig {
        max_attempts: 5,
        ..config()
    };
    let (n, every) = (1_000u32, Duration::from_millis(100));
    let unlimited = RetryLayer::builder(&cfg).unwrap().budget(Unlimited).build();
    assert_eq!(total_failure(unlimited, n, every).await, 5 * n as usize);

    // Finagle's law: retries ≤ ratio × requests + min_retries_per_sec × (duration + ttl).
    let budget = RatioBudgetConfig {
        retry_ratio: 0.1,
        min_retries_per_sec: 1.0,
        ttl: Nanos::from_secs(10),
        buckets: 10,
    };
    let budgeted = RetryLayer::builder(&cfg)
        .unwrap()
        .budget(RatioBudget::new(&budget).unwrap())
        .build();
    let calls = total_failure(budgeted, n, every).await;
    eprintln!("budgeted: {calls} calls for {n} requests");
    let bound = n as f64 * (1.0 + 0.1) + 1.0 * (100.0 + 10.0);
    assert!(
        calls as f64 <= bound,
        "{calls} calls for {n} requests, bound {bound}"
    );
    assert!(calls > n as usize, "the budget still allows some retries");
}

#[tokio::test(start_paused = true)]
async fn under_total_failure_a_token_bucket_allows_only_its_capacity() {
    // Brooker's bucket: no success refills it, so 1 000 failing requests
    // cost 1 000 first attempts plus the 10 starting tokens' retries.
    let cfg = RetryConfig {
        max_attempts: 5,
        ..config()
    };
    let layer = RetryLayer::builder(&cfg)
        .unwrap()
        .budget(TokenBucket::new(&TokenBucketConfig::default()).unwrap())
        .build();
    let calls = total_failure(layer, 1_000, Duration::from_millis(100)).await;
    assert_eq!(calls, 1_000 + 10);
}

#[tokio::test(start_paused = true)]
async fn services_of_one_layer_share_its_budget() {
    // An AWS-style quota with tokens for exactly one retry: the first
    // service spends it, the second finds none left. (With a budget each,
    // both would retry.)
    let cfg = RetryConfig {
        max_attempts: 5,
        ..config()
    };
    let one_retry = AwsRetryQuotaConfig {
        initial_tokens: 5,
        ..AwsRetryQuotaConfig::default()
    };
    let layer = RetryLayer::builder(&cfg)
        .unwrap()
        .budget(AwsRetryQuota::new(&one_retry).unwrap())
        .build();
    let (a, calls_a) = backend(vec![Answer::Status(503)]);
    let (b, calls_b) = backend(vec![Answer::Status(503)]);
    let (a, b) = (layer.layer(a), layer.layer(b));
    assert_eq!(
        a.oneshot(http::Request::new(())).await.unwrap().status(),
        503
    );
    assert_eq!(
        b.oneshot(http::Request::new(())).await.unwrap().status(),
        503
    );
    assert_eq!(calls_a.lock().unwrap().len(), 2);
    assert_eq!(calls_b.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn grpc_pushback_stops_retries() {
    let (svc, calls) = backend(vec![Answer::StatusPushback(503, "-1"), Answer::Status(200)]);
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(calls.lock().unwrap().len(), 1);
}

/// A service that is never ready, like an exhausted connection pool.
#[derive(Clone)]
struct NeverReady;

impl Service<Req> for NeverReady {
    type Response = Resp;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Resp, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Pending
    }

    fn call(&mut self, _: Req) -> Self::Future {
        unreachable!("never ready")
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_holds_while_the_inner_service_is_not_ready() {
    let cfg = RetryConfig {
        overall_timeout: Some(Nanos::from_secs(2)),
        ..config()
    };
    let mut client = RetryLayer::new(&cfg).unwrap().layer(NeverReady);
    let start = Instant::now();
    // The layer's own readiness is the inner one's; a caller that does not
    // wait for it (or a pool that became exhausted after) still hits the
    // deadline inside the call.
    let error = client.call(http::Request::new(())).await.unwrap_err();
    let timed_out = error.downcast_ref::<AttemptTimedOut>().expect("a timeout");
    assert_eq!(timed_out.reason, GiveUpReason::Deadline);
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

/// A response body that notes when it was dropped.
struct Probe(Arc<Mutex<Vec<Instant>>>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(Instant::now());
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_answer_is_released_before_the_pause() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let n = Arc::new(Mutex::new(0));
    let (d, count) = (dropped.clone(), n.clone());
    let svc = service_fn(move |_req: Req| {
        let mut c = count.lock().unwrap();
        *c += 1;
        let status = if *c == 1 { 503 } else { 200 };
        let body = Probe(d.clone());
        async move { Ok::<_, BoxError>(http::Response::builder().status(status).body(body).unwrap()) }
    });
    let client = RetryLayer::new(&config()).unwrap().layer(svc);
    let start = Instant::now();
    let response = client.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 200);
    // The 503's body went at once, not after the 100 ms pause.
    assert_eq!(dropped.lock().unwrap().clone(), vec![start]);
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_gives_the_same_jittered_pauses() {
    let cfg = RetryConfig {
        max_attempts: 5,
        backoff: BackoffConfig {
            kind: BackoffKind::Exponential,
            base: Nanos::from_millis(100),
            jitter: Jitter::Full,
            ..BackoffConfig::default()
        },
        ..config()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (svc, calls) = backend(vec![Answer::Status(503)]);
        let layer = RetryLayer::builder(&cfg)
            .unwrap()
            .budget(Unlimited)
            .seed(9)
            .build();
        layer
            .layer(svc)
            .oneshot(http::Request::new(()))
            .await
            .unwrap();
        let gaps = gaps(&calls.lock().unwrap());
        // Full jitter: each pause is within [0, base × 2^n].
        for (n, g) in gaps.iter().enumerate() {
            assert!(*g <= Duration::from_millis(100 << n), "pause {n}: {g:?}");
        }
        runs.push(gaps);
    }
    assert_eq!(runs[0], runs[1]);
}

/// A request body that cannot be replayed, like hyper's `Incoming`.
struct Streaming;

#[tokio::test(start_paused = true)]
async fn a_request_the_cloner_declines_is_sent_once_and_not_retried() {
    let calls = Arc::new(Mutex::new(0u32));
    let seen = calls.clone();
    let svc = service_fn(move |_req: http::Request<Streaming>| {
        *seen.lock().unwrap() += 1;
        async { Ok::<_, BoxError>(http::Response::builder().status(503).body(()).unwrap()) }
    });
    let layer = RetryLayer::builder(&config())
        .unwrap()
        .clone_with(|_: &http::Request<Streaming>| None)
        .build();
    let client = layer.clone().layer(svc);
    let response = client.oneshot(http::Request::new(Streaming)).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(layer.passed_through(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_buffered_body_is_retried_with_the_same_bytes() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    let svc = service_fn(move |req: http::Request<Full<Bytes>>| {
        let seen = seen.clone();
        async move {
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut b = seen.lock().unwrap();
            b.push(body);
            let status = if b.len() < 3 { 503 } else { 200 };
            Ok::<_, BoxError>(http::Response::builder().status(status).body(()).unwrap())
        }
    });
    let layer = RetryLayer::builder(&config()).unwrap().seed(1).build();
    let client = layer.clone().layer(svc);
    let req = http::Request::post("/token")
        .body(Full::new(Bytes::from_static(b"grant_type=refresh_token")))
        .unwrap();
    let response = client.oneshot(req).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        *bodies.lock().unwrap(),
        vec![Bytes::from_static(b"grant_type=refresh_token"); 3]
    );
    assert_eq!(layer.passed_through(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_body_buffered_under_the_cap_becomes_retryable() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody};
    use stormbreak_client::buffer_request;
    let frames = futures_util::stream::iter(vec![
        Ok::<_, io::Error>(http_body::Frame::data(Bytes::from_static(b"grant_type="))),
        Ok(http_body::Frame::data(Bytes::from_static(b"refresh_token"))),
    ]);
    let req = http::Request::new(StreamBody::new(frames));
    let buffered = buffer_request(req, 1024).await.unwrap().unwrap();
    let copy = stormbreak_client::CloneBuffered
        .clone_request(&buffered)
        .expect("a Full body is copyable");
    assert_eq!(
        copy.into_body().collect().await.unwrap().to_bytes(),
        "grant_type=refresh_token"
    );
    // Over the cap: handed back whole, to send once.
    let frames = futures_util::stream::iter(vec![
        Ok::<_, io::Error>(http_body::Frame::data(Bytes::from_static(b"0123456789"))),
        Ok(http_body::Frame::data(Bytes::from_static(b"abcdef"))),
    ]);
    let too_large = buffer_request(http::Request::new(StreamBody::new(frames)), 12)
        .await
        .unwrap()
        .unwrap_err();
    let body = too_large
        .request
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body, "0123456789abcdef");
}

/// A streaming request body of the given frames, with no `BufferedBody`
/// impl.
type Frames = futures_util::stream::Iter<
    std::vec::IntoIter<Result<http_body::Frame<bytes::Bytes>, io::Error>>,
>;

fn stream_body(frames: &[&'static [u8]]) -> http_body_util::StreamBody<Frames> {
    let frames: Vec<_> = frames
        .iter()
        .map(|f| Ok(http_body::Frame::data(bytes::Bytes::from_static(f))))
        .collect();
    http_body_util::StreamBody::new(futures_util::stream::iter(frames))
}

#[tokio::test(start_paused = true)]
async fn buffer_body_layer_retries_a_streaming_body_under_its_cap_and_sends_a_larger_one_once() {
    use http_body_util::BodyExt;
    use stormbreak_client::{BufferBodyLayer, PrefixedBody};
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    // Fails every request: what is retried is retried to the policy's limit.
    let svc = service_fn(move |req: http::Request<PrefixedBody<_>>| {
        let seen = seen.clone();
        async move {
            let body = req.into_body().collect().await?.to_bytes();
            seen.lock().unwrap().push(body);
            Ok::<_, BoxError>(http::Response::builder().status(503).body(()).unwrap())
        }
    });
    let buffer = BufferBodyLayer::new(16);
    let retry = RetryLayer::builder(&config()).unwrap().seed(1).build();
    let client = tower::ServiceBuilder::new()
        .layer(buffer.clone())
        .layer(retry.clone())
        .service(svc);

    // 13 bytes, under the cap of 16: buffered, so retried (3 attempts).
    let small = http::Request::post("/token").body(stream_body(&[b"grant_type=", b"rt"]));
    let response = client.clone().oneshot(small.unwrap()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        *bodies.lock().unwrap(),
        vec![bytes::Bytes::from_static(b"grant_type=rt"); 3]
    );
    assert_eq!((retry.passed_through(), buffer.too_large()), (0, 0));

    // 20 bytes, over the cap: sent once, whole (what was read, then the rest).
    bodies.lock().unwrap().clear();
    let large = http::Request::post("/upload").body(stream_body(&[b"0123456789", b"abcdefghij"]));
    let response = client.oneshot(large.unwrap()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        *bodies.lock().unwrap(),
        vec![bytes::Bytes::from_static(b"0123456789abcdefghij")]
    );
    assert_eq!((retry.passed_through(), buffer.too_large()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn buffer_body_layer_fails_a_request_whose_body_fails_to_read() {
    use stormbreak_client::{BufferBodyLayer, PrefixedBody};
    let calls = Arc::new(Mutex::new(0u32));
    let seen = calls.clone();
    let svc = service_fn(move |_req: http::Request<PrefixedBody<_>>| {
        *seen.lock().unwrap() += 1;
        async { Ok::<_, BoxError>(http::Response::builder().status(200).body(()).unwrap()) }
    });
    let client = tower::ServiceBuilder::new()
        .layer(BufferBodyLayer::new(1024))
        .service(svc);
    let frames: Vec<Result<http_body::Frame<bytes::Bytes>, io::Error>> = vec![
        Ok(http_body::Frame::data(bytes::Bytes::from_static(b"part"))),
        Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "client went away",
        )),
    ];
    let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
    let err = client.oneshot(http::Request::new(body)).await.unwrap_err();
    assert!(err.to_string().contains("client went away"), "{err}");
    assert_eq!(*calls.lock().unwrap(), 0, "nothing sent upstream");
}

//! The throttle and breaker layers alone, on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stormbreak_client::{BoxError, BreakerLayer, Rejected, RejectedBy, ThrottleLayer};
use stormbreak_policy::breaker::{BreakerConfig, BreakerState};
use stormbreak_policy::shed::ThrottleConfig;
use tower::{Layer, Service, ServiceExt, service_fn};

type Req = http::Request<()>;
type Resp = http::Response<()>;

/// Answers `status()` (read at call time) after 10 ms; counts calls.
fn backend(
    status: Arc<AtomicU32>,
) -> (
    impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let svc = service_fn(move |_req: Req| {
        c.fetch_add(1, Ordering::SeqCst);
        let s = status.load(Ordering::SeqCst) as u16;
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(http::Response::builder().status(s).body(()).unwrap())
        }
    });
    (svc, calls)
}

#[tokio::test(start_paused = true)]
async fn the_throttle_never_refuses_while_the_backend_accepts() {
    let (svc, calls) = backend(Arc::new(AtomicU32::new(200)));
    let layer = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(1);
    let client = layer.layer(svc);
    for _ in 0..1000 {
        assert!(client.clone().oneshot(http::Request::new(())).await.is_ok());
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1000);
    assert_eq!(layer.rejected(), 0);
    assert_eq!(layer.reject_probability(), 0.0);
    // A 404 is the backend's work, not a refusal: still accepted.
    let (svc, _) = backend(Arc::new(AtomicU32::new(404)));
    let layer = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(1);
    let client = layer.layer(svc);
    for _ in 0..100 {
        let _ = client.clone().oneshot(http::Request::new(())).await;
    }
    assert_eq!(layer.rejected(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_sends_about_k_times_what_the_backend_accepts() {
    // A backend that accepts 10 requests a second and answers 503 to the
    // rest; demand is 100 a second. The SRE law sends about K = 2 times
    // what is accepted: about 20 a second once the window has filled.
    let accepted = Arc::new(std::sync::Mutex::new((0u64, 0u32)));
    let received = Arc::new(AtomicU32::new(0));
    let (a, r) = (accepted.clone(), received.clone());
    let start = tokio::time::Instant::now();
    let svc = service_fn(move |_req: Req| {
        r.fetch_add(1, Ordering::SeqCst);
        let second = (tokio::time::Instant::now() - start).as_secs();
        let mut a = a.lock().unwrap();
        if a.0 != second {
            *a = (second, 0);
        }
        let status = if a.1 < 10 {
            a.1 += 1;
            200
        } else {
            503
        };
        async move { Ok::<_, BoxError>(http::Response::builder().status(status).body(()).unwrap()) }
    });
    let layer = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(1);
    let client = layer.layer(svc);
    let mut sent_before = 0;
    for i in 0..30_000u32 {
        tokio::time::sleep_until(start + Duration::from_millis(10) * i).await;
        if i == 24_000 {
            sent_before = received.load(Ordering::SeqCst);
        }
        let _ = client.clone().oneshot(http::Request::new(())).await;
    }
    // The last 60 s (6 000 requests asked for), after 4 minutes of history.
    let sent = received.load(Ordering::SeqCst) - sent_before;
    eprintln!("sent {sent} in the last 60 s; refused {}", layer.rejected());
    assert!((900..1_500).contains(&sent), "sent {sent} in the last 60 s");
    assert_eq!(
        u64::from(received.load(Ordering::SeqCst)) + layer.rejected(),
        30_000
    );
}

#[tokio::test(start_paused = true)]
async fn the_breaker_probes_after_the_wait_and_closes_when_the_probe_succeeds() {
    let status = Arc::new(AtomicU32::new(503));
    let (svc, calls) = backend(status.clone());
    let layer = BreakerLayer::new(&BreakerConfig::envoy_outlier_detection()).unwrap();
    let client = layer.layer(svc);
    for _ in 0..5 {
        let _ = client.clone().oneshot(http::Request::new(())).await;
    }
    assert_eq!(layer.state(), BreakerState::Open);
    let refused = client
        .clone()
        .oneshot(http::Request::new(()))
        .await
        .unwrap_err();
    let refused = refused.downcast_ref::<Rejected>().unwrap();
    assert_eq!(refused.by, RejectedBy::Breaker);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    // After Envoy's 30 s ejection the next request is the probe.
    tokio::time::sleep(Duration::from_secs(30)).await;
    status.store(200, Ordering::SeqCst);
    let probe = client
        .clone()
        .oneshot(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);
    assert_eq!(layer.state(), BreakerState::Closed);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_hands_its_ticket_back() {
    let status = Arc::new(AtomicU32::new(503));
    let (svc, calls) = backend(status.clone());
    let layer = BreakerLayer::new(&BreakerConfig::envoy_outlier_detection()).unwrap();
    let client = layer.layer(svc);
    for _ in 0..5 {
        let _ = client.clone().oneshot(http::Request::new(())).await;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    // The one permitted probe is abandoned before it answers...
    let probe = client.clone().oneshot(http::Request::new(()));
    assert!(
        tokio::time::timeout(Duration::from_millis(1), probe)
            .await
            .is_err()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    // ...so the breaker still has a probe to give: the next call is sent.
    status.store(200, Ordering::SeqCst);
    let r = client
        .clone()
        .oneshot(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 7);
    assert_eq!(layer.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_takes_a_service_whose_future_is_not_send() {
    // A single-threaded client (an `Rc` held across the await): the
    // throttle's future is a named type, so it asks nothing of the inner
    // future but what the caller's runtime does.
    let local = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let seen = local.clone();
    let svc = service_fn(move |_req: http::Request<()>| {
        let seen = seen.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            seen.set(seen.get() + 1);
            Ok::<_, BoxError>(http::Response::new(()))
        }
    });
    let mut client = ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(1)
        .layer(svc);
    for _ in 0..3 {
        let r = client
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await;
        assert_eq!(r.unwrap().status(), 200);
    }
    assert_eq!(local.get(), 3);
}

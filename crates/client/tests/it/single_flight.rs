//! The single-flight layer on tokio's paused clock: callers that overlap
//! share one upstream call; cancelling one caller leaves the others; the
//! call is dropped only when every caller has gone.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use http_body_util::{BodyExt, Full};
use stormbreak_client::{BoxError, SharedError, SingleFlightLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Full<Bytes>>;

/// Counts calls that started and calls that were dropped before they
/// finished; each call takes `delay` and answers with `answer(n)`.
#[derive(Clone, Default)]
struct Counts {
    started: Arc<AtomicU32>,
    cancelled: Arc<AtomicU32>,
    finished: Arc<AtomicU32>,
}

struct OnDrop(Counts, bool);
impl Drop for OnDrop {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn backend(
    delay: Duration,
    answer: impl Fn(u32) -> Result<Resp, BoxError> + Clone + Send + Sync + 'static,
) -> (
    impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static,
    Counts,
) {
    let counts = Counts::default();
    let c = counts.clone();
    let svc = service_fn(move |_req: Req| {
        let n = c.started.fetch_add(1, Ordering::SeqCst);
        let c = c.clone();
        let answer = answer.clone();
        async move {
            let mut guard = OnDrop(c.clone(), false);
            tokio::time::sleep(delay).await;
            guard.1 = true;
            c.finished.fetch_add(1, Ordering::SeqCst);
            answer(n)
        }
    });
    (svc, counts)
}

fn ok(body: &'static str) -> Result<Resp, BoxError> {
    Ok(http::Response::builder()
        .header("x-token", "t")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap())
}

fn get(user: &str) -> Req {
    http::Request::get("http://token.internal/token")
        .header("authorization", format!("Bearer {user}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

async fn body_of(r: http::Response<stormbreak_client::PrefixedBody<Full<Bytes>>>) -> Bytes {
    r.into_body().collect().await.unwrap().to_bytes()
}

#[tokio::test(start_paused = true)]
async fn many_concurrent_callers_make_one_upstream_call_and_all_get_the_answer() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token-1"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move { c.oneshot(get("ada")).await }));
    }
    for t in tasks {
        let r = t.await.unwrap().unwrap();
        assert_eq!(r.headers()["x-token"], "t");
        assert_eq!(body_of(r).await, "token-1");
    }
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    let stats = layer.stats();
    assert_eq!((stats.flights, stats.coalesced), (1, 99));
}

#[tokio::test(start_paused = true)]
async fn different_credentials_do_not_share_a_flight() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("x"));
    let client = SingleFlightLayer::new().layer(svc);
    let (a, b, c) = tokio::join!(
        client.clone().oneshot(get("ada")),
        client.clone().oneshot(get("bob")),
        client.clone().oneshot(get("ada")),
    );
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_shared_by_every_waiter_and_keeps_its_cause() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| {
        Err(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)) as BoxError)
    });
    let client = SingleFlightLayer::new().layer(svc);
    let results = join_all((0..10).map(|_| client.clone().oneshot(get("ada")))).await;
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    for r in results {
        let e = r.unwrap_err();
        let shared = e.downcast_ref::<SharedError>().expect("a shared error");
        let io = shared.inner().downcast_ref::<io::Error>().unwrap();
        assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);
        // The retry classifier sees the refused connection through the Arc.
        assert_eq!(
            stormbreak_client::error_outcome(e.as_ref()),
            stormbreak_policy::retry::AttemptOutcome::ConnectFailed
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_after_the_flight_landed_goes_upstream_again() {
    let (svc, counts) = backend(Duration::from_millis(100), |n| {
        if n == 0 { ok("first") } else { ok("second") }
    });
    let client = SingleFlightLayer::new().layer(svc);
    let first = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(first).await, "first");
    let second = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(second).await, "second");
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn one_waiter_cancelling_leaves_the_others_and_the_call() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let client = SingleFlightLayer::new().layer(svc);
    let leader = tokio::spawn(client.clone().oneshot(get("ada")));
    let follower = tokio::spawn(client.clone().oneshot(get("ada")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    // The caller that started the flight goes away.
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    let r = follower.await.unwrap().unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 0);
    assert_eq!(counts.finished.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn the_upstream_call_is_cancelled_when_every_waiter_has_gone() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let waiters: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("ada"))))
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    for w in &waiters {
        w.abort();
    }
    for w in waiters {
        assert!(w.await.unwrap_err().is_cancelled());
    }
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(counts.finished.load(Ordering::SeqCst), 0);
    // The key is free again: the next caller starts a new flight.
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
    assert_eq!(layer.stats().flights, 2);
}

#[tokio::test(start_paused = true)]
async fn a_full_table_sends_new_keys_alone_and_counts_them() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("x"));
    let layer = SingleFlightLayer::new().max_keys(2);
    let client = layer.layer(svc);
    let results = join_all(
        ["a", "b", "c", "c", "a"]
            .into_iter()
            .map(|u| client.clone().oneshot(get(u))),
    )
    .await;
    assert!(results.iter().all(Result::is_ok));
    // a and b fly; both c go alone; the second a joins a's flight.
    assert_eq!(counts.started.load(Ordering::SeqCst), 4);
    let stats = layer.stats();
    assert_eq!(stats.bypassed_table_full, 2);
    assert_eq!(stats.coalesced, 1);
    // Once they landed the table has room again.
    let results = join_all(
        ["c", "c"]
            .into_iter()
            .map(|u| client.clone().oneshot(get(u))),
    )
    .await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(counts.started.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_cap_is_not_shared() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("0123456789"));
    let layer = SingleFlightLayer::new().max_body_bytes(4);
    let client = layer.layer(svc);
    let results = join_all((0..3).map(|_| client.clone().oneshot(get("ada")))).await;
    for r in results {
        assert_eq!(body_of(r.unwrap()).await, "0123456789");
    }
    // The first caller got the flight's own streaming body; the two that
    // joined sent their own requests.
    assert_eq!(counts.started.load(Ordering::SeqCst), 3);
    assert_eq!(layer.stats().too_large, 1);
}

#[tokio::test(start_paused = true)]
async fn successes_are_cached_for_the_ttl_and_errors_never() {
    let (svc, counts) = backend(Duration::from_millis(100), |n| {
        if n == 0 {
            Ok(http::Response::builder()
                .status(503)
                .body(Full::new(Bytes::new()))
                .unwrap())
        } else {
            ok("token")
        }
    });
    let layer = SingleFlightLayer::new().cache_successes_for(Duration::from_secs(60));
    let client = layer.layer(svc);
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(r.status(), 503);
    // The 503 was not cached.
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_secs(59)).await;
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
    assert_eq!(layer.stats().cache_hits, 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(counts.started.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn requests_with_a_body_are_not_coalesced_by_default() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("x"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let post = || {
        http::Request::post("http://orders.internal/")
            .body(Full::new(Bytes::from_static(b"{\"item\":1}")))
            .unwrap()
    };
    let (a, b) = tokio::join!(
        client.clone().oneshot(post()),
        client.clone().oneshot(post())
    );
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
    assert_eq!(layer.stats().unkeyed, 2);
}

#[tokio::test(start_paused = true)]
async fn an_infallible_service_works_too() {
    let svc = service_fn(|_req: Req| async {
        Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"hi"))))
    });
    let client = SingleFlightLayer::new().layer(svc);
    let r = client.oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "hi");
}

#[tokio::test(start_paused = true)]
async fn the_caller_that_started_a_flight_can_go_and_the_others_still_share_its_one_call() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let leader = tokio::spawn(client.clone().oneshot(get("ada")));
    let joiners: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("ada"))))
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    // The caller that started the flight and one that joined go away.
    leader.abort();
    joiners[0].abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    let mut joiners = joiners.into_iter();
    assert!(joiners.next().unwrap().await.unwrap_err().is_cancelled());
    for j in joiners {
        let r = j.await.unwrap().unwrap();
        assert_eq!(body_of(r).await, "token");
    }
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 0);
    assert_eq!(counts.finished.load(Ordering::SeqCst), 1);
    let stats = layer.stats();
    assert_eq!((stats.flights, stats.coalesced), (1, 3));
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_joins_after_the_starter_has_gone_shares_the_same_call() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let leader = tokio::spawn(client.clone().oneshot(get("ada")));
    let early = tokio::spawn(client.clone().oneshot(get("ada")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_millis(10)).await;
    let late = tokio::spawn(client.clone().oneshot(get("ada")));
    for t in [early, late] {
        assert_eq!(body_of(t.await.unwrap().unwrap()).await, "token");
    }
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 0);
    let stats = layer.stats();
    assert_eq!((stats.flights, stats.coalesced), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn the_call_is_cancelled_when_the_last_caller_goes_even_if_it_only_joined() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let client = SingleFlightLayer::new().layer(svc);
    let leader = tokio::spawn(client.clone().oneshot(get("ada")));
    let joiner = tokio::spawn(client.clone().oneshot(get("ada")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    // The call goes on for the one that joined...
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 0);
    // ...until it goes too.
    joiner.abort();
    assert!(joiner.await.unwrap_err().is_cancelled());
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(counts.finished.load(Ordering::SeqCst), 0);
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_before_it_was_polled_sends_nothing_and_frees_the_key() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let layer = SingleFlightLayer::new();
    let mut client = layer.layer(svc);
    // The layer is always ready; `call` starts the flight without sending.
    drop(client.call(get("ada")));
    assert_eq!(counts.started.load(Ordering::SeqCst), 0);
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    assert_eq!(layer.stats().flights, 2);
}

#[tokio::test(start_paused = true)]
async fn any_caller_drives_the_call_while_the_one_that_started_it_is_not_polled() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("token"));
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let mut leader = std::pin::pin!(client.clone().oneshot(get("ada")));
    // Polled once: the flight starts, then its starter is left alone.
    let once = std::future::poll_fn(|cx| std::task::Poll::Ready(leader.as_mut().poll(cx)));
    assert!(once.await.is_pending());
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    // The starter's answer was waiting for it.
    assert_eq!(body_of(leader.await.unwrap()).await, "token");
    assert_eq!(counts.started.load(Ordering::SeqCst), 1);
    let stats = layer.stats();
    assert_eq!((stats.flights, stats.coalesced), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_cap_without_its_starter_is_sent_by_each_caller_that_joined() {
    let (svc, counts) = backend(Duration::from_millis(100), |_| ok("0123456789"));
    let layer = SingleFlightLayer::new().max_body_bytes(4);
    let client = layer.layer(svc);
    let leader = tokio::spawn(client.clone().oneshot(get("ada")));
    let joiners: Vec<_> = (0..2)
        .map(|_| tokio::spawn(client.clone().oneshot(get("ada"))))
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    for j in joiners {
        assert_eq!(body_of(j.await.unwrap().unwrap()).await, "0123456789");
    }
    // The shared call, then one of its own for each caller that joined.
    assert_eq!(counts.started.load(Ordering::SeqCst), 3);
    assert_eq!(layer.stats().too_large, 1);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_call_that_panics_fails_the_other_callers_instead_of_hanging_them() {
    let started = Arc::new(AtomicU32::new(0));
    let s = started.clone();
    let svc = service_fn(move |_req: Req| {
        let n = s.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if n == 0 {
                panic!("the upstream call panicked (on purpose, in a test)");
            }
            ok("token")
        }
    });
    let client = SingleFlightLayer::new().layer(svc);
    let callers: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("ada"))))
        .collect();
    let mut panicked = 0;
    for c in callers {
        // Virtual time: with every task stuck, the clock jumps to the
        // timeout at once.
        let joined = tokio::time::timeout(Duration::from_secs(60), c).await;
        match joined.expect("a caller waits for a call that is gone") {
            Err(e) => {
                assert!(e.is_panic());
                panicked += 1;
            }
            Ok(r) => {
                let e = r.unwrap_err();
                assert!(e.to_string().contains("panicked"), "{e}");
            }
        }
    }
    // The caller whose poll ran the call panicked with it; the others failed.
    assert_eq!(panicked, 1);
    // The key is free again.
    let r = client.clone().oneshot(get("ada")).await.unwrap();
    assert_eq!(body_of(r).await, "token");
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

/// Not timing: callers on two worker threads join one flight held open by
/// a gate, then all get its answer. The timeout only stops a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_on_several_threads_share_one_call() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    let (g, s) = (gate.clone(), started.clone());
    let svc = service_fn(move |_req: Req| {
        s.fetch_add(1, Ordering::SeqCst);
        let g = g.clone();
        async move {
            let _permit = g.acquire().await.unwrap();
            ok("token")
        }
    });
    let layer = SingleFlightLayer::new();
    let client = layer.layer(svc);
    let run = async {
        let callers: Vec<_> = (0..32)
            .map(|_| tokio::spawn(client.clone().oneshot(get("ada"))))
            .collect();
        while layer.stats().coalesced < 31 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(1);
        for c in callers {
            assert_eq!(body_of(c.await.unwrap().unwrap()).await, "token");
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("no hang");
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(layer.stats().flights, 1);
}

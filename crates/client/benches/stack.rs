//! The full stack (single-flight + retry with its budget + adaptive
//! throttle) against tower's own `Retry` driven by the same retry policy,
//! on the success path and on the 100 %-failure path, with one thread and
//! with two threads contending for the same stack.
//!
//! cargo bench -p stormbreak-client --bench stack
//!
//! The backend answers at once (no I/O), so the figures are the layers'
//! own cost. On the failure path tower's `Retry` makes 3 attempts per
//! request (the budget is set generous so it keeps retrying, as the
//! stack's does); the stack's throttle refuses most requests locally
//! once it has seen the failures, which is the point of it. The
//! two-thread figure is the time per request of one thread while another
//! thread sends through the same stack.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group};
use http_body_util::Full;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_client::{PrefixedBody, RetryLayer, SingleFlightLayer, ThrottleLayer};
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{RatioBudget, RatioBudgetConfig, RetryBudget};
use stormbreak_policy::retry::{
    AttemptOutcome, BackoffConfig, BackoffKind, Jitter, RetryConfig, RetryDecision, RetryPolicy,
    RetryState,
};
use stormbreak_policy::shed::ThrottleConfig;
use tower::retry::Policy;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Full<Bytes>>;

fn backend(
    status: u16,
) -> impl Service<Req, Response = Resp, Error = Infallible, Future = Ready<Result<Resp, Infallible>>>
+ Clone
+ Send
+ Sync
+ 'static {
    service_fn(move |_req: Req| {
        ready(Ok(http::Response::builder()
            .status(status)
            .body(Full::new(Bytes::from_static(b"token")))
            .unwrap()))
    })
}

fn request() -> Req {
    http::Request::get("http://token.internal/token")
        .header("authorization", "Bearer bench")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Zero pauses, no jitter: the loop's cost without the timer's.
fn config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            kind: BackoffKind::Constant,
            base: Nanos::ZERO,
            jitter: Jitter::None,
            ..BackoffConfig::default()
        },
        ..RetryConfig::default()
    }
}

/// Generous, so the failure path keeps retrying for the whole run.
fn budget() -> RatioBudget {
    RatioBudget::new(&RatioBudgetConfig {
        retry_ratio: 1.0,
        min_retries_per_sec: 1e6,
        ..RatioBudgetConfig::default()
    })
    .unwrap()
}

/// The same policy crate state machine and budget as a `tower::retry::Policy`.
#[derive(Clone)]
struct SamePolicy {
    policy: Arc<RetryPolicy>,
    shared: Arc<Mutex<(RatioBudget, Pcg64Mcg)>>,
    origin: Instant,
    state: Option<RetryState>,
}

impl SamePolicy {
    fn new() -> Self {
        SamePolicy {
            policy: Arc::new(RetryPolicy::new(&config()).unwrap()),
            shared: Arc::new(Mutex::new((budget(), Pcg64Mcg::seed_from_u64(1)))),
            origin: Instant::now(),
            state: None,
        }
    }
}

impl Policy<Req, Resp, Infallible> for SamePolicy {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _req: &mut Req,
        result: &mut Result<Resp, Infallible>,
    ) -> Option<Ready<()>> {
        let now = Nanos::from(self.origin.elapsed());
        let mut shared = self.shared.lock().unwrap();
        let (budget, rng) = &mut *shared;
        let state = self.state.get_or_insert_with(|| {
            RetryState::begin(&self.policy, now, budget as &mut dyn RetryBudget)
        });
        let outcome = match result {
            Ok(response) => AttemptOutcome::status(response.status().as_u16()),
            Err(never) => match *never {},
        };
        match state.on_outcome_budgeted(&self.policy, now, outcome, budget, rng) {
            // Pauses are zero in this config.
            RetryDecision::RetryAt(_) => Some(ready(())),
            _ => None,
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        let mut copy = http::Request::new(req.body().clone());
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.headers_mut() = req.headers().clone();
        Some(copy)
    }
}

/// Runs `per_thread` requests on each of `threads` threads at once, each
/// thread on its own current-thread runtime, and returns the slowest
/// thread's time.
fn contend<S>(svc: &S, threads: usize, per_thread: u64) -> Duration
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
{
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let svc = svc.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                barrier.wait();
                let start = Instant::now();
                for _ in 0..per_thread {
                    let _ = rt.block_on(svc.clone().oneshot(request()));
                }
                start.elapsed()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap()
}

fn bench(c: &mut Criterion) {
    // The layers read tokio's clock when built: build them in a runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    for (path, status) in [("success", 200), ("100%-failure", 503)] {
        for threads in [1, 2] {
            let mut g = c.benchmark_group(format!("stack/{path}/{threads}-thread"));
            let tower_retry =
                tower::retry::RetryLayer::new(SamePolicy::new()).layer(backend(status));
            g.bench_function("tower Retry (same policy + budget)", |b| {
                b.iter_custom(|iters| contend(&tower_retry, threads, iters))
            });
            let stack = full_stack(status);
            g.bench_function(
                "stormbreak stack (single-flight + retry + budget + throttle)",
                |b| b.iter_custom(|iters| contend(&stack, threads, iters)),
            );
            // Like for like with tower's `Retry` on the failure path: no
            // throttle refusing locally, so every request makes its 3
            // attempts here too.
            let no_throttle = stack_without_throttle(status);
            g.bench_function(
                "stormbreak stack without throttle (single-flight + retry + budget)",
                |b| b.iter_custom(|iters| contend(&no_throttle, threads, iters)),
            );
            g.finish();
        }
    }
}

/// The retry layer every configuration uses: the bench's policy and budget.
fn retry_layer() -> RetryLayer {
    RetryLayer::builder(&config())
        .unwrap()
        .budget(budget())
        .seed(1)
        .build()
}

/// The throttle every configuration uses: the SRE defaults.
fn throttle_layer() -> ThrottleLayer {
    ThrottleLayer::new(&ThrottleConfig::default())
        .unwrap()
        .seed(2)
}

/// `SingleFlight → Retry (budget) → Throttle` over the backend.
fn full_stack(
    status: u16,
) -> impl Service<Req, Response = http::Response<PrefixedBody<Full<Bytes>>>, Future: Send>
+ Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .layer(SingleFlightLayer::new())
        .layer(retry_layer())
        .layer(throttle_layer())
        .service(backend(status))
}

/// `SingleFlight → Retry (budget)` over the backend.
fn stack_without_throttle(
    status: u16,
) -> impl Service<Req, Response = http::Response<PrefixedBody<Full<Bytes>>>, Future: Send>
+ Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .layer(SingleFlightLayer::new())
        .layer(retry_layer())
        .service(backend(status))
}

/// Each layer alone on the success path, one thread: where the stack's
/// cost goes.
fn parts(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let mut g = c.benchmark_group("stack/success/1-thread/parts");
    let bare = backend(200);
    g.bench_function("bare backend", |b| {
        b.iter_custom(|iters| contend(&bare, 1, iters))
    });
    let sf = SingleFlightLayer::new().layer(backend(200));
    g.bench_function("single-flight alone", |b| {
        b.iter_custom(|iters| contend(&sf, 1, iters))
    });
    let retry = retry_layer().layer(backend(200));
    g.bench_function("retry + budget alone", |b| {
        b.iter_custom(|iters| contend(&retry, 1, iters))
    });
    let throttle = throttle_layer().layer(backend(200));
    g.bench_function("throttle alone", |b| {
        b.iter_custom(|iters| contend(&throttle, 1, iters))
    });
    g.finish();
}

criterion_group!(benches, bench, parts);

/// `STACK_ICOUNT=<which> [STACK_ICOUNT_N=<n>]` runs `n` requests (100 000
/// by default) through one configuration on one thread and exits, for
/// `valgrind --tool=callgrind` to count instructions per request; the
/// machine's load does not change the count. `which` is one of `bare`,
/// `single-flight`, `retry`, `throttle`, `stack`, `stack-nothrottle`,
/// `tower-retry`, each
/// optionally suffixed `-fail` for the 100 %-failure backend.
fn icount(which: &str) {
    let n: u64 = std::env::var("STACK_ICOUNT_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let (which, status) = match which.strip_suffix("-fail") {
        Some(w) => (w, 503),
        None => (which, 200),
    };
    let run = |d: Duration| println!("{which} ({status}): {n} requests in {d:?}");
    match which {
        "bare" => run(contend(&backend(status), 1, n)),
        "single-flight" => run(contend(
            &SingleFlightLayer::new().layer(backend(status)),
            1,
            n,
        )),
        "retry" => run(contend(&retry_layer().layer(backend(status)), 1, n)),
        "throttle" => run(contend(&throttle_layer().layer(backend(status)), 1, n)),
        "stack" => run(contend(&full_stack(status), 1, n)),
        "stack-nothrottle" => run(contend(&stack_without_throttle(status), 1, n)),
        "tower-retry" => {
            let tower_retry =
                tower::retry::RetryLayer::new(SamePolicy::new()).layer(backend(status));
            run(contend(&tower_retry, 1, n))
        }
        other => panic!("STACK_ICOUNT: unknown configuration {other:?}"),
    }
}

fn main() {
    if let Ok(which) = std::env::var("STACK_ICOUNT") {
        return icount(&which);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

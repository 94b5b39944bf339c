//! What the retry layer costs per request, next to tower's own `Retry`
//! with an attempt-count policy, in the same run: a backend that answers at
//! once, on a current-thread runtime. `ok` measures the success path (one
//! attempt: the budget deposit, the classification, one boxed future);
//! `503-then-ok` one retry with a zero pause.
//!
//! cargo bench -p stormbreak-client --bench layer

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};
use stormbreak_policy::Nanos;

use criterion::{Criterion, criterion_group, criterion_main};
use stormbreak_client::RetryLayer;
use stormbreak_policy::budget::{RatioBudget, RatioBudgetConfig};
use stormbreak_policy::retry::{BackoffConfig, BackoffKind, Jitter, RetryConfig};
use tower::retry::Policy;
use tower::{Layer, Service, ServiceExt, service_fn};

type Req = http::Request<()>;
type Resp = http::Response<()>;

/// Answers 503 to every `fail_every`-th call (0: never), else 200.
fn backend(
    fail_every: u64,
) -> impl Service<Req, Response = Resp, Error = Infallible, Future = Ready<Result<Resp, Infallible>>>
+ Clone
+ Send
+ 'static {
    let n = Arc::new(AtomicU64::new(0));
    service_fn(move |_req: Req| {
        let i = n.fetch_add(1, Ordering::Relaxed);
        let status = if fail_every > 0 && i.is_multiple_of(fail_every) {
            503
        } else {
            200
        };
        ready(Ok(http::Response::builder()
            .status(status)
            .body(())
            .unwrap()))
    })
}

/// tower's `Retry` with the usual hand-written policy: retry 5xx up to 3
/// attempts, no pause, no budget.
#[derive(Clone)]
struct Attempts(u32);

impl Policy<Req, Resp, Infallible> for Attempts {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _req: &mut Req,
        result: &mut Result<Resp, Infallible>,
    ) -> Option<Ready<()>> {
        match result {
            Ok(r) if r.status().is_server_error() && self.0 > 1 => {
                self.0 -= 1;
                Some(ready(()))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

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

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    for (name, fail_every) in [("ok", 0), ("503-then-ok", 2)] {
        let mut g = c.benchmark_group(format!("client/{name}"));
        let bare = backend(fail_every);
        g.bench_function("bare service", |b| {
            b.iter(|| rt.block_on(bare.clone().oneshot(http::Request::new(()))))
        });
        let tower_retry = tower::retry::RetryLayer::new(Attempts(3)).layer(backend(fail_every));
        g.bench_function("tower Retry (attempt count)", |b| {
            b.iter(|| rt.block_on(tower_retry.clone().oneshot(http::Request::new(()))))
        });
        // A generous budget so the retry case keeps retrying for the whole run.
        let budget = RatioBudgetConfig {
            retry_ratio: 1.0,
            min_retries_per_sec: 1e6,
            ..RatioBudgetConfig::default()
        };
        let ours = RetryLayer::builder(&config())
            .unwrap()
            .budget(RatioBudget::new(&budget).unwrap())
            .seed(1)
            .build()
            .layer(backend(fail_every));
        g.bench_function("stormbreak RetryLayer (policy + budget)", |b| {
            b.iter(|| rt.block_on(ours.clone().oneshot(http::Request::new(()))))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! How a population's request reaches a pod: a logical request goes
//! through the `stormbreak-client` retry layer (the scenario's `retry` and
//! `budget`, the policy crate's state machine; no layer without `retry`),
//! and each attempt through [`AttemptService`]: least-request of two over
//! the service's pods (the policy crate's `LeastRequest`, Envoy's default
//! and the simulator's pick), a pooled HTTP/1.1 connection to the pod's
//! sidecar or app, and the attempt's outcome recorded by cause.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_client::{BoxError, HttpClassifier, RetryLayer};
use stormbreak_policy::Nanos;
use stormbreak_policy::balance::{BalanceConfig, LeastRequest};
use stormbreak_policy::budget::Unlimited;
use stormbreak_sim::record::Cause;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::backend::REFUSED_HEADER;
use crate::plan::ClientPlan;
use crate::record::Recorder;

/// The request every attempt sends (a GET with no body: the scenario has
/// no payloads).
pub type LabRequest = http::Request<Empty<Bytes>>;

/// The pods of one service as a client sees them: their addresses and
/// the attempts it has on each (least-request's load).
pub struct Pods {
    addrs: Vec<SocketAddr>,
    load: Vec<AtomicU32>,
    pick: LeastRequest,
    rng: Mutex<Pcg64Mcg>,
}

impl Pods {
    /// Pods at `addrs`, picked with a seeded RNG.
    pub fn new(addrs: Vec<SocketAddr>, seed: u64) -> Self {
        Pods {
            load: addrs.iter().map(|_| AtomicU32::new(0)).collect(),
            addrs,
            pick: LeastRequest::new(&BalanceConfig::default()).expect("default"),
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(seed)),
        }
    }

    fn choose(&self) -> usize {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.pick
            .choose(
                self.addrs.len(),
                |i| Some(self.load[i].load(Ordering::Relaxed)),
                &mut *rng,
            )
            .expect("a service has at least one pod")
    }
}

/// One attempt at a time to a service, recorded.
#[derive(Clone)]
pub struct AttemptService {
    http: Client<HttpConnector, Empty<Bytes>>,
    pods: Arc<Pods>,
    rec: Arc<Recorder>,
    route: usize,
    service: usize,
}

/// Records a timeout for an attempt whose future is dropped before it
/// ended: the caller's per-try timeout abandoned it (or the run ended).
struct Pending {
    rec: Arc<Recorder>,
    pods: Arc<Pods>,
    pod: usize,
    route: usize,
    service: usize,
    done: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.pods.load[self.pod].fetch_sub(1, Ordering::Relaxed);
        if !self.done {
            self.rec
                .failure(self.route, self.service, Cause::Timeout, false, false);
        }
    }
}

/// The recording's cause of an answer that is not a success, whether the
/// service itself refused it, and whether the lab had no cause for it.
/// `guard` is the sidecar guard's own refusal, named in its
/// `X-Stormbreak-Refused` header (docs/guard.md).
fn cause_of(status: u16, app_refused: bool, guard: Option<&str>) -> (Cause, bool, bool) {
    match (status, guard) {
        (503, _) if app_refused => (Cause::LimitRejected, true, false),
        // The sidecar's limit: full, or a wait in its queue timed out.
        (_, Some("limit")) => (Cause::LimitRejected, true, false),
        (_, Some("queue_timeout")) => (Cause::QueueTimeout, true, false),
        // A shed by the sidecar (saturation, an operator rule, a restore,
        // its rate limit): recorded by status, as the simulator does.
        (_, Some(_)) => (Cause::shed(status), true, false),
        // The sidecar could not reach its app.
        (502, None) => (Cause::Unavailable, true, false),
        (503, None) => (Cause::LimitRejected, true, false),
        (504, None) => (Cause::Timeout, false, false),
        (429, None) => (Cause::Shed429, true, false),
        (403, None) => (Cause::Shed403, true, false),
        _ => (Cause::Unavailable, false, true),
    }
}

impl AttemptService {
    /// Attempts of route `route` to service `service`'s `pods`.
    pub fn new(pods: Arc<Pods>, rec: Arc<Recorder>, route: usize, service: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(4096)
            .build(connector);
        AttemptService {
            http,
            pods,
            rec,
            route,
            service,
        }
    }
}

impl Service<LabRequest> for AttemptService {
    type Response = http::Response<()>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: LabRequest) -> Self::Future {
        let pod = self.pods.choose();
        self.pods.load[pod].fetch_add(1, Ordering::Relaxed);
        self.rec.attempt(self.route, self.service);
        let mut pending = Pending {
            rec: self.rec.clone(),
            pods: self.pods.clone(),
            pod,
            route: self.route,
            service: self.service,
            done: false,
        };
        let addr = self.pods.addrs[pod];
        let http = self.http.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            parts.uri = format!("http://{addr}/")
                .parse()
                .expect("an address is a URI");
            let sent = Instant::now();
            let result = http.request(http::Request::from_parts(parts, body)).await;
            let rec = pending.rec.clone();
            let (route, service) = (pending.route, pending.service);
            let answer = match result {
                Ok(resp) => {
                    let (parts, body) = resp.into_parts();
                    // Read to the end, so the connection goes back to the pool.
                    let read = body.collect().await;
                    let latency = Nanos::from(sent.elapsed());
                    pending.done = true;
                    let status = parts.status.as_u16();
                    if read.is_err() {
                        rec.failure(route, service, Cause::Reset, false, false);
                    } else if parts.status.is_success() {
                        rec.success(route, latency);
                    } else {
                        let (cause, refused, unclassified) = cause_of(
                            status,
                            parts.headers.contains_key(REFUSED_HEADER),
                            parts
                                .headers
                                .get(stormbreak_guard::REFUSED_HEADER)
                                .and_then(|v| v.to_str().ok()),
                        );
                        rec.failure(route, service, cause, refused, unclassified);
                    }
                    Ok(http::Response::from_parts(parts, ()))
                }
                Err(e) => {
                    pending.done = true;
                    let cause = if e.is_connect() {
                        Cause::Unavailable
                    } else {
                        Cause::Reset
                    };
                    rec.failure(route, service, cause, false, false);
                    Err(Box::new(e) as BoxError)
                }
            };
            drop(pending);
            answer
        })
    }
}

/// A population's way of making one logical request: through the retry
/// layer when the scenario gives `retry`, else one attempt under the
/// client's `timeout`. Resolves to whether it ended in success.
#[derive(Clone)]
pub enum Caller {
    /// `retry` given: the client crate's layer, per-try timeout = `timeout`.
    Retrying(stormbreak_client::Retry<AttemptService>),
    /// No retries: one attempt, abandoned at `timeout`.
    Once(AttemptService, Nanos),
}

impl Caller {
    /// The caller of population `plan`, its jitter RNG seeded with `seed`.
    /// Call inside the runtime (the retry layer's clock starts now).
    pub fn new(plan: &ClientPlan, attempts: AttemptService, seed: u64) -> Result<Self, String> {
        let Some(retry) = &plan.retry else {
            return Ok(Caller::Once(attempts, plan.timeout));
        };
        let name = &plan.name;
        let builder = RetryLayer::builder(retry)
            .map_err(|e| format!("client {name:?}: retry: {e}"))?
            .seed(seed);
        // Without a budget the simulator's caller is unbudgeted
        // (`AnyBudget::default()`); the layer's own default would be a
        // ratio budget, so say so explicitly.
        let builder = match &plan.budget {
            Some(b) => builder
                .budget_config(b)
                .map_err(|e| format!("client {name:?}: budget: {e}"))?,
            None => builder.budget(Unlimited),
        };
        let layer = if plan.honour_retry_after {
            builder.build()
        } else {
            // Same type either way: the classifier is a value.
            builder
                .classifier(HttpClassifier::ignoring_retry_after())
                .build()
        };
        Ok(Caller::Retrying(layer.layer(attempts)))
    }

    /// One logical request; true when it ended in success.
    pub async fn call(self) -> bool {
        let req = || http::Request::new(Empty::<Bytes>::new());
        match self {
            Caller::Retrying(svc) => match svc.oneshot(req()).await {
                Ok(r) => r.status().is_success(),
                Err(_) => false,
            },
            Caller::Once(svc, timeout) => {
                match tokio::time::timeout(timeout.into(), svc.oneshot(req())).await {
                    Ok(Ok(r)) => r.status().is_success(),
                    _ => false,
                }
            }
        }
    }
}

//! How a population's request reaches a pod: a logical request goes
//! through the `stormbreak-client` retry layer (the scenario's `retry` and
//! `budget`, the policy crate's state machine; no layer without `retry`),
//! replaced for new requests by `set_retry` over one budget per population
//! ([`Population`]), and each attempt through [`AttemptService`] to the
//! route's first hop: for a service, its stalls (the lab's fault hook) and
//! least-request of two over its ready pods (the policy crate's
//! `LeastRequest`, Envoy's default and the simulator's pick); for an LB
//! pool or a gateway, its running guards in turn. A pooled HTTP/1.1
//! connection carries it, and its outcome is recorded by cause.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
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
use stormbreak_policy::budget::{AnyBudget, BudgetConfig, RetryBudget, RetryCause};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_sim::record::Cause;
use stormbreak_sim::scenario::StallMode;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::backend::REFUSED_HEADER;
use crate::fleet::{Fleet, Pod};
use crate::plan::ClientPlan;
use crate::pool::Pool;
use crate::record::Recorder;

/// The request every attempt sends (a GET with no body: the scenario has
/// no payloads).
pub type LabRequest = http::Request<Empty<Bytes>>;

/// A population's view of one service's pods: least-request of two over
/// the ready ones (the policy crate's `LeastRequest`), on this
/// population's attempts in flight on each.
pub struct Pods {
    fleet: Arc<Fleet>,
    pop: usize,
    pick: LeastRequest,
    rng: Mutex<Pcg64Mcg>,
}

impl Pods {
    /// Population `pop`'s view of `fleet`, picked with a seeded RNG.
    pub fn new(fleet: Arc<Fleet>, pop: usize, seed: u64) -> Self {
        Pods {
            fleet,
            pop,
            pick: LeastRequest::new(&BalanceConfig::default()).expect("default"),
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(seed)),
        }
    }

    /// A ready pod, or `None` when none is (all starting, draining or
    /// killed): the simulator answers that `unavailable`.
    fn choose(&self) -> Option<Arc<Pod>> {
        let pods = self.fleet.pods();
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        let i = self.pick.choose(
            pods.len(),
            |i| {
                let p = &pods[i];
                p.is_ready()
                    .then(|| p.load(self.pop).load(Ordering::Relaxed))
            },
            &mut *rng,
        )?;
        Some(pods[i].clone())
    }
}

/// Where a population's attempts go: a service's pods (picked here), or
/// an LB pool's nodes (in turn; the node's guard picks the next hop).
#[derive(Clone)]
pub enum Target {
    /// The route's first hop is a service.
    Pods(Arc<Pods>),
    /// The route's first hop is an LB pool.
    Lb(Arc<Pool>),
    /// The route's first hop is a gateway (its instances in turn, as the
    /// simulator's gateway admits them).
    Gateway(Arc<Pool>),
}

/// One attempt at a time to a route's first hop, recorded.
#[derive(Clone)]
pub struct AttemptService {
    http: Client<HttpConnector, Empty<Bytes>>,
    target: Target,
    rec: Arc<Recorder>,
    route: usize,
    comp: usize,
    /// The population's site label (which LB listener it sends to).
    site: Option<String>,
}

/// The cause a failed answer was recorded under, in its extensions: the
/// fan-out loop (`fanout.rs`) judges it as the simulator's caller judges
/// a [`Cause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded(pub Cause);

/// An attempt that ended without an answer, with the cause it was
/// recorded under. Its `source` is the error itself, so the client
/// crate's classifier (which walks the chain) reads it as before.
#[derive(Debug)]
pub struct AttemptError {
    /// The recording's cause.
    pub cause: Cause,
    source: BoxError,
}

impl AttemptError {
    fn boxed(cause: Cause, source: impl Into<BoxError>) -> BoxError {
        Box::new(AttemptError {
            cause,
            source: source.into(),
        })
    }
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.cause, self.source)
    }
}

impl std::error::Error for AttemptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Records a timeout for an attempt whose future is dropped before it
/// ended: the caller's per-try timeout abandoned it (or the run ended).
struct Pending {
    rec: Arc<Recorder>,
    pod: Option<(Arc<Pod>, usize)>,
    route: usize,
    comp: usize,
    done: bool,
}

impl Pending {
    fn fail(&mut self, cause: Cause, refused: bool) {
        self.done = true;
        self.rec
            .failure(self.route, self.comp, cause, refused, false);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((pod, pop)) = &self.pod {
            pod.load(*pop).fetch_sub(1, Ordering::Relaxed);
        }
        if !self.done {
            self.rec
                .failure(self.route, self.comp, Cause::Timeout, false, false);
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
        // A guard's limit (a sidecar's, a gateway's): full, or a wait in
        // its queue timed out. At another status than 503 a full limit is
        // a shed, as the simulator's gateway records it.
        (503, Some("limit")) => (Cause::LimitRejected, true, false),
        (_, Some("limit")) => (Cause::shed(status), true, false),
        (_, Some("queue_timeout")) => (Cause::QueueTimeout, true, false),
        // A shed by the sidecar (saturation, an operator rule, a restore,
        // its rate limit): recorded by status, as the simulator does.
        (_, Some(_)) => (Cause::shed(status), true, false),
        // The sidecar could not reach its app (it closed the connection:
        // `fail_pods`): the simulator's failing pod answers `reset`.
        (502, None) => (Cause::Reset, true, false),
        (503, None) => (Cause::LimitRejected, true, false),
        (504, None) => (Cause::Timeout, false, false),
        (429, None) => (Cause::Shed429, true, false),
        (403, None) => (Cause::Shed403, true, false),
        _ => (Cause::Unavailable, false, true),
    }
}

/// Whether an LB node's answer is its own refusal at its flow cap
/// (`lb.rs`), rather than a next hop's answer it passed on.
fn flows_exhausted(status: u16, guard: Option<&str>) -> bool {
    status == crate::lb::REFUSAL_STATUS && guard == Some("limit")
}

impl AttemptService {
    /// Attempts of route `route` to `target`, recorded at component
    /// `comp` (the recording's index of the route's first hop).
    ///
    /// `site` is the population's site label: at an LB with site
    /// listeners (a `ramp`) its attempts go to that site's listener.
    pub fn new(
        target: Target,
        rec: Arc<Recorder>,
        route: usize,
        comp: usize,
        site: Option<String>,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(4096)
            .build(connector);
        AttemptService {
            http,
            target,
            rec,
            route,
            comp,
            site,
        }
    }

    /// Where this attempt goes, or its answer when it goes nowhere: the
    /// first hop's stalls (the lab's fault hook), no ready pod, no running
    /// node (`unavailable`, refused by the first hop, as the simulator's).
    fn destination(&self, pending: &mut Pending) -> Result<std::net::SocketAddr, Stalled> {
        match &self.target {
            Target::Pods(pods) => {
                let mut stalls = pods.fleet.stalls();
                let stall = stalls.borrow_and_update().last().map(|s| s.1);
                match stall {
                    // Refused at once, as a connection refused.
                    Some(StallMode::Fail) => {
                        pending.fail(Cause::Unavailable, false);
                        return Err(Stalled::Fail);
                    }
                    Some(StallMode::Hang) => return Err(Stalled::Hang(stalls)),
                    None => {}
                }
                let Some(pod) = pods.choose() else {
                    pending.fail(Cause::Unavailable, false);
                    return Err(Stalled::Fail);
                };
                pod.load(pods.pop).fetch_add(1, Ordering::Relaxed);
                let addr = pod.target;
                pending.pod = Some((pod, pods.pop));
                Ok(addr)
            }
            Target::Lb(pool) | Target::Gateway(pool) => {
                pool.pick(self.site.as_deref()).ok_or_else(|| {
                    pending.fail(Cause::Unavailable, true);
                    Stalled::Fail
                })
            }
        }
    }
}

/// Why an attempt is not sent.
enum Stalled {
    /// Answered already (recorded).
    Fail,
    /// Held until the caller's timeout or the end of the stalls.
    Hang(tokio::sync::watch::Receiver<Vec<(usize, StallMode)>>),
}

impl Service<LabRequest> for AttemptService {
    type Response = http::Response<()>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: LabRequest) -> Self::Future {
        // A gateway's arrivals and refusals are counted at its guards
        // (its retries and dependency calls are not the client's).
        let at_gateway = matches!(self.target, Target::Gateway(_));
        self.rec
            .attempt(self.route, (!at_gateway).then_some(self.comp));
        let mut pending = Pending {
            rec: self.rec.clone(),
            pod: None,
            route: self.route,
            comp: self.comp,
            done: false,
        };
        let addr = match self.destination(&mut pending) {
            Ok(addr) => addr,
            Err(Stalled::Fail) => {
                return Box::pin(async {
                    Err(AttemptError::boxed(Cause::Unavailable, "unavailable"))
                });
            }
            // No answer: the caller's timeout ends the attempt (recorded by
            // `Pending`), or the stall's end resets it.
            Err(Stalled::Hang(mut stalls)) => {
                return Box::pin(async move {
                    let _ = stalls.wait_for(|s| s.is_empty()).await;
                    pending.fail(Cause::Reset, false);
                    Err(AttemptError::boxed(Cause::Reset, "stall ended: reset"))
                });
            }
        };
        let at_lb = matches!(self.target, Target::Lb(_));
        // Only a pod's refusal is its first hop's own for sure: a guard
        // pool passes on the refusals of the hops behind it.
        let first_hop_refuses = matches!(self.target, Target::Pods(_));
        let http = self.http.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            parts.uri = format!("http://{addr}/")
                .parse()
                .expect("an address is a URI");
            let sent = Instant::now();
            let result = http.request(http::Request::from_parts(parts, body)).await;
            let rec = pending.rec.clone();
            let (route, comp) = (pending.route, pending.comp);
            let answer = match result {
                Ok(resp) => {
                    let (mut parts, body) = resp.into_parts();
                    // Read to the end, so the connection goes back to the pool.
                    let read = body.collect().await;
                    let latency = Nanos::from(sent.elapsed());
                    pending.done = true;
                    let status = parts.status.as_u16();
                    let guard = parts
                        .headers
                        .get(stormbreak_guard::REFUSED_HEADER)
                        .and_then(|v| v.to_str().ok());
                    let body = match read {
                        Ok(b) => b.to_bytes(),
                        Err(_) => {
                            rec.failure(route, comp, Cause::Reset, false, false);
                            drop(pending);
                            parts.extensions.insert(Recorded(Cause::Reset));
                            return Ok(http::Response::from_parts(parts, ()));
                        }
                    };
                    if parts.status.is_success() {
                        rec.success(route, latency);
                    } else if at_lb && flows_exhausted(status, guard) {
                        // The simulator's callers see a refused connection.
                        rec.failure(route, comp, Cause::FlowsExhausted, true, false);
                        drop(pending);
                        return Err(AttemptError::boxed(
                            Cause::FlowsExhausted,
                            std::io::Error::new(
                                std::io::ErrorKind::ConnectionRefused,
                                "flows_exhausted: the LB node holds its maximum of flows",
                            ),
                        ));
                    } else if status == 502 && body == crate::gateway::DEPENDENCY_FAILED_BODY {
                        // A gateway's dependency check failed for good.
                        rec.failure(route, comp, Cause::DependencyFailed, false, false);
                        parts.extensions.insert(Recorded(Cause::DependencyFailed));
                    } else {
                        let (cause, refused, unclassified) =
                            cause_of(status, parts.headers.contains_key(REFUSED_HEADER), guard);
                        // An LB node's own shed rule or staged restore is
                        // the LB's refusal.
                        let own = first_hop_refuses
                            || (at_lb && matches!(guard, Some("rule" | "restore")));
                        rec.failure(route, comp, cause, refused && own, unclassified);
                        parts.extensions.insert(Recorded(cause));
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
                    rec.failure(route, comp, cause, false, false);
                    Err(AttemptError::boxed(cause, e))
                }
            };
            drop(pending);
            answer
        })
    }
}

/// A population's retry budget, one for the whole run: kept across
/// `set_retry`, as the simulator's caller keeps it, and told of every
/// request, retried or not, as the simulator's is. `None` in the scenario
/// is unbudgeted (`AnyBudget::default()`, the simulator's caller default).
#[derive(Clone)]
pub struct SharedBudget {
    inner: Arc<Mutex<AnyBudget>>,
    origin: Instant,
}

impl SharedBudget {
    /// The budget `config` names, its clock starting at `origin`.
    pub fn new(config: Option<&BudgetConfig>, origin: Instant) -> Result<Self, String> {
        let budget = match config {
            Some(c) => c.build().map_err(|e| e.to_string())?,
            None => AnyBudget::default(),
        };
        Ok(SharedBudget {
            inner: Arc::new(Mutex::new(budget)),
            origin,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AnyBudget> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    /// The budget as a retry layer built now sees it: the layer's clock
    /// starts at its build, so its times are shifted onto the budget's.
    fn for_layer_built_now(&self) -> LayerBudget {
        LayerBudget {
            shared: self.clone(),
            offset: self.now(),
        }
    }
}

/// [`SharedBudget`] under one retry layer's clock.
struct LayerBudget {
    shared: SharedBudget,
    offset: Nanos,
}

impl RetryBudget for LayerBudget {
    fn on_request(&mut self, now: Nanos) {
        self.shared.lock().on_request(now + self.offset);
    }
    fn try_withdraw(&mut self, now: Nanos, cause: RetryCause) -> bool {
        self.shared.lock().try_withdraw(now + self.offset, cause)
    }
    fn on_success(&mut self, now: Nanos, paid_retry: Option<RetryCause>) {
        self.shared.lock().on_success(now + self.offset, paid_retry);
    }
    fn on_failure(&mut self, now: Nanos) {
        self.shared.lock().on_failure(now + self.offset);
    }
    fn on_timeout(&mut self, now: Nanos) {
        self.shared.lock().on_timeout(now + self.offset);
    }
}

/// A population's way of making one logical request: through the retry
/// layer when the scenario gives `retry`, else one attempt under the
/// client's `timeout`. Resolves to whether it ended in success.
#[derive(Clone)]
pub enum Caller {
    /// `retry` given: the client crate's layer, per-try timeout = `timeout`.
    Retrying(stormbreak_client::Retry<AttemptService>),
    /// No retries: one attempt, abandoned at `timeout`; the budget still
    /// hears of it.
    Once(AttemptService, Nanos, SharedBudget),
}

impl Caller {
    /// One logical request; true when it ended in success.
    pub async fn call(self) -> bool {
        let req = || http::Request::new(Empty::<Bytes>::new());
        match self {
            Caller::Retrying(svc) => match svc.oneshot(req()).await {
                Ok(r) => r.status().is_success(),
                Err(_) => false,
            },
            Caller::Once(svc, timeout, budget) => {
                budget.lock().on_request(budget.now());
                let answer = tokio::time::timeout(timeout.into(), svc.oneshot(req())).await;
                let now = budget.now();
                let mut b = budget.lock();
                match answer {
                    Ok(Ok(r)) if r.status().is_success() => {
                        b.on_success(now, None);
                        true
                    }
                    Err(_) => {
                        b.on_timeout(now);
                        false
                    }
                    _ => {
                        b.on_failure(now);
                        false
                    }
                }
            }
        }
    }
}

/// A client population's callers: the one in force, replaced by
/// `set_retry` from that instant. Requests already under way keep the
/// policy they started with (the simulator judges them by the new one
/// from their next outcome on: a gap, docs/lab.md); the budget is one for
/// the run.
pub struct Population {
    name: String,
    attempts: AttemptService,
    timeout: Nanos,
    honour_retry_after: bool,
    budget: SharedBudget,
    seeds: Mutex<crate::fleet::Seeds>,
    current: RwLock<Caller>,
    /// The fan-out bug, which makes its requests instead of the callers.
    fanout: Option<Arc<crate::fanout::Fanout>>,
}

impl Population {
    /// Population `plan`'s callers, jitter RNGs seeded from `seed`, the
    /// budget's clock starting at `origin`. Call inside the runtime (a
    /// retry layer's clock starts at its build).
    pub fn new(
        plan: &ClientPlan,
        attempts: AttemptService,
        seed: u64,
        origin: Instant,
    ) -> Result<Self, String> {
        let name = &plan.name;
        let budget = SharedBudget::new(plan.budget.as_ref(), origin)
            .map_err(|e| format!("client {name:?}: budget: {e}"))?;
        let fanout = match plan.fanout {
            Some(spec) => Some(Arc::new(
                crate::fanout::Fanout::new(
                    spec,
                    attempts.clone(),
                    plan.timeout,
                    plan.retry.as_ref(),
                    origin,
                )
                .map_err(|e| format!("client {name:?}: retry: {e}"))?,
            )),
            None => None,
        };
        let p = Population {
            name: name.clone(),
            timeout: plan.timeout,
            honour_retry_after: plan.honour_retry_after,
            current: RwLock::new(Caller::Once(attempts.clone(), plan.timeout, budget.clone())),
            attempts,
            budget,
            seeds: Mutex::new(crate::fleet::Seeds(seed)),
            fanout,
        };
        p.set_retry(plan.retry.as_ref())?;
        Ok(p)
    }

    /// The caller for a request starting now.
    pub fn caller(&self) -> Caller {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One logical request starting now: the fan-out loop's operation for
    /// a fan-out population, else the caller in force's request. Resolves
    /// to whether it (any of its attempts, with fan-out) succeeded.
    pub fn request(&self) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        match &self.fanout {
            Some(f) => {
                let f = f.clone();
                Box::pin(async move { f.operation().await })
            }
            None => Box::pin(self.caller().call()),
        }
    }

    /// Requests starting from now on follow `retry` (`None`: no retries).
    /// A fan-out population's operations do not change: the simulator's
    /// fan-out keeps its first classifier and asks nothing else of it.
    pub fn set_retry(&self, retry: Option<&RetryConfig>) -> Result<(), String> {
        let caller = self.build(retry)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = caller;
        Ok(())
    }

    fn build(&self, retry: Option<&RetryConfig>) -> Result<Caller, String> {
        let Some(retry) = retry else {
            return Ok(Caller::Once(
                self.attempts.clone(),
                self.timeout,
                self.budget.clone(),
            ));
        };
        let name = &self.name;
        let seed = self
            .seeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next();
        let builder = RetryLayer::builder(retry)
            .map_err(|e| format!("client {name:?}: retry: {e}"))?
            .seed(seed)
            .budget(self.budget.for_layer_built_now());
        let layer = if self.honour_retry_after {
            builder.build()
        } else {
            // Same type either way: the classifier is a value.
            builder
                .classifier(HttpClassifier::ignoring_retry_after())
                .build()
        };
        Ok(Caller::Retrying(layer.layer(self.attempts.clone())))
    }
}

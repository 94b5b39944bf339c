//! The retry layer: tokio time and a tower service around the policy
//! crate's [`RetryState`], which makes every decision.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::budget::{BudgetConfig, RatioBudget, RatioBudgetConfig, RetryBudget};
use stormbreak_policy::retry::{
    AttemptOutcome, GiveUpReason, RetryConfig, RetryDecision, RetryPolicy, RetryState,
};
use stormbreak_policy::{FieldError, Nanos};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::deadline::deadline;
use crate::{BoxError, Classify, CloneBuffered, CloneRequest, HttpClassifier};

/// A tower [`Layer`] whose services retry by a [`RetryPolicy`] under a
/// retry budget shared by every service built from the same layer.
///
/// The budget is what keeps retries from storming: a per-request attempt
/// limit still lets every request multiply by `max_attempts` when
/// everything fails, while the default [`RatioBudget`] (Finagle's law:
/// retries ≤ 20% of requests over 10 s, plus 10 retries/s) bounds the whole
/// client's amplification under total failure at 1.2× plus 10 retries/s —
/// about 1.2× for a client sending hundreds of requests a second, up to
/// `max_attempts` for one sending a handful.
///
/// ```
/// use stormbreak_client::RetryLayer;
/// use stormbreak_policy::retry::RetryConfig;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = RetryLayer::new(&RetryConfig::default()).unwrap();
/// let svc = layer.layer(service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new("hello"))
/// }));
/// let response = svc.oneshot(http::Request::new(())).await.unwrap();
/// assert_eq!(*response.body(), "hello");
/// # }
/// ```
#[derive(Clone)]
pub struct RetryLayer<C = HttpClassifier, R = CloneBuffered> {
    shared: Arc<Shared>,
    classifier: C,
    cloner: R,
}

/// What every service of one layer shares: the policy, the clock's origin
/// and, under one lock, the budget and the jitter RNG.
pub(crate) struct Shared {
    policy: RetryPolicy,
    origin: Instant,
    decide: Mutex<Decide>,
    passed_through: AtomicU64,
}

struct Decide {
    budget: Box<dyn RetryBudget + Send>,
    rng: Pcg64Mcg,
}

impl Shared {
    fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    fn instant(&self, at: Nanos) -> Instant {
        self.origin + std::time::Duration::from(at)
    }

    fn begin(&self) -> RetryState {
        let now = self.now();
        let mut d = self.decide.lock().unwrap_or_else(PoisonError::into_inner);
        RetryState::begin(&self.policy, now, d.budget.as_mut())
    }

    fn decide(&self, state: &mut RetryState, outcome: AttemptOutcome) -> RetryDecision {
        let now = self.now();
        let mut d = self.decide.lock().unwrap_or_else(PoisonError::into_inner);
        let Decide { budget, rng } = &mut *d;
        state.on_outcome_budgeted(&self.policy, now, outcome, budget.as_mut(), rng)
    }
}

impl RetryLayer {
    /// A layer with `config`'s policy, the default ratio budget, HTTP
    /// classification and an RNG seeded from the OS.
    pub fn new(config: &RetryConfig) -> Result<Self, FieldError> {
        Ok(Self::builder(config)?.build())
    }

    /// A builder, to choose the budget, the RNG seed or the classifier.
    ///
    /// ```
    /// use stormbreak_client::RetryLayer;
    /// use stormbreak_policy::budget::{GrpcThrottle, GrpcThrottleConfig};
    /// use stormbreak_policy::retry::RetryConfig;
    ///
    /// let layer = RetryLayer::builder(&RetryConfig::default())
    ///     .unwrap()
    ///     .budget(GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap())
    ///     .seed(42)
    ///     .build();
    /// assert_eq!(layer.policy().max_attempts(), 3);
    /// ```
    pub fn builder(config: &RetryConfig) -> Result<RetryLayerBuilder, FieldError> {
        Ok(RetryLayerBuilder {
            policy: RetryPolicy::new(config)?,
            budget: Box::new(RatioBudget::new(&RatioBudgetConfig::default()).expect("default")),
            seed: None,
            classifier: HttpClassifier::default(),
            cloner: CloneBuffered,
        })
    }
}

/// Chooses a [`RetryLayer`]'s budget, RNG seed and classifier.
pub struct RetryLayerBuilder<C = HttpClassifier, R = CloneBuffered> {
    policy: RetryPolicy,
    budget: Box<dyn RetryBudget + Send>,
    seed: Option<u64>,
    classifier: C,
    cloner: R,
}

impl<C, R> RetryLayerBuilder<C, R> {
    /// The retry budget: any of the policy crate's laws, or
    /// [`Unlimited`](stormbreak_policy::budget::Unlimited) to go without
    /// (and storm).
    pub fn budget(mut self, budget: impl RetryBudget + Send + 'static) -> Self {
        self.budget = Box::new(budget);
        self
    }

    /// The retry budget a config file names, in the same table syntax as a
    /// scenario's `budget = { kind = "bucket", reward = 0.1 }`.
    ///
    /// ```
    /// use stormbreak_client::RetryLayer;
    /// use stormbreak_policy::budget::BudgetConfig;
    /// use stormbreak_policy::retry::RetryConfig;
    /// let budget: BudgetConfig = toml::from_str(r#"kind = "bucket""#).unwrap();
    /// let layer = RetryLayer::builder(&RetryConfig::default())
    ///     .unwrap()
    ///     .budget_config(&budget)
    ///     .unwrap()
    ///     .build();
    /// # let _ = layer;
    /// ```
    pub fn budget_config(self, config: &BudgetConfig) -> Result<Self, FieldError> {
        Ok(self.budget(config.build()?))
    }

    /// Seeds the jitter RNG, for reproducible pauses.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The classifier, e.g. for a non-HTTP service.
    pub fn classifier<D>(self, classifier: D) -> RetryLayerBuilder<D, R> {
        RetryLayerBuilder {
            policy: self.policy,
            budget: self.budget,
            seed: self.seed,
            classifier,
            cloner: self.cloner,
        }
    }

    /// How a request is copied for a retry (tower's
    /// `Policy::clone_request`): a request the cloner declines is sent once,
    /// unretried. The default, [`CloneBuffered`], copies `http::Request`s
    /// whose body is already in memory; [`CloneAll`](crate::CloneAll) any
    /// `Clone` request; a closure `Fn(&Req) -> Option<Req>` anything else.
    ///
    /// ```
    /// use stormbreak_client::RetryLayer;
    /// use stormbreak_policy::retry::RetryConfig;
    ///
    /// // Retry only requests that carry an idempotency key.
    /// let layer = RetryLayer::builder(&RetryConfig::default())
    ///     .unwrap()
    ///     .clone_with(|req: &http::Request<String>| {
    ///         req.headers().get("idempotency-key")?;
    ///         let mut copy = http::Request::new(req.body().clone());
    ///         *copy.method_mut() = req.method().clone();
    ///         *copy.uri_mut() = req.uri().clone();
    ///         *copy.headers_mut() = req.headers().clone();
    ///         Some(copy)
    ///     })
    ///     .build();
    /// # let _ = layer;
    /// ```
    pub fn clone_with<Q>(self, cloner: Q) -> RetryLayerBuilder<C, Q> {
        RetryLayerBuilder {
            policy: self.policy,
            budget: self.budget,
            seed: self.seed,
            classifier: self.classifier,
            cloner,
        }
    }

    /// The layer. Its clock starts now: call inside the runtime that will
    /// drive its services.
    pub fn build(self) -> RetryLayer<C, R> {
        let rng = match self.seed {
            Some(seed) => Pcg64Mcg::seed_from_u64(seed),
            None => Pcg64Mcg::from_os_rng(),
        };
        RetryLayer {
            shared: Arc::new(Shared {
                policy: self.policy,
                origin: Instant::now(),
                decide: Mutex::new(Decide {
                    budget: self.budget,
                    rng,
                }),
                passed_through: AtomicU64::new(0),
            }),
            classifier: self.classifier,
            cloner: self.cloner,
        }
    }
}

impl<C, R> RetryLayer<C, R> {
    /// The policy the layer's services follow.
    pub fn policy(&self) -> &RetryPolicy {
        &self.shared.policy
    }

    /// Requests sent once, unretried, because the cloner declined to copy
    /// them (a streaming body, say), since the layer was built.
    pub fn passed_through(&self) -> u64 {
        self.shared.passed_through.load(Ordering::Relaxed)
    }

    /// The classifier.
    #[cfg_attr(not(feature = "reqwest"), allow(dead_code))]
    pub(crate) fn classifier(&self) -> &C {
        &self.classifier
    }

    /// The state every service of this layer shares.
    #[cfg_attr(not(feature = "reqwest"), allow(dead_code))]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl<C: fmt::Debug, R> fmt::Debug for RetryLayer<C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("policy", &self.shared.policy)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone, R: Clone> Layer<S> for RetryLayer<C, R> {
    type Service = Retry<S, C, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
            cloner: self.cloner.clone(),
        }
    }
}

/// The service [`RetryLayer`] builds: sends a request, and clones of it as
/// retries, until the policy says success or give up.
///
/// On give-up the last attempt's result is returned as it was (a 503
/// response stays a response); an attempt abandoned by the layer's own
/// timeout becomes an [`AttemptTimedOut`] error. Waiting for the inner
/// service's readiness counts as part of an attempt: it is bounded by the
/// attempt's timeout, and a readiness error is classified like a call error.
///
/// Without an `overall_timeout` nothing bounds a request: a server's
/// `Retry-After` is honoured however long it is.
#[derive(Clone)]
pub struct Retry<S, C = HttpClassifier, R = CloneBuffered> {
    inner: S,
    shared: Arc<Shared>,
    classifier: C,
    cloner: R,
}

impl<S: fmt::Debug, C: fmt::Debug, R> fmt::Debug for Retry<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

/// The last attempt was abandoned by the layer's per-try timeout or overall
/// deadline and the policy gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimedOut {
    /// Why no further attempt was made.
    pub reason: GiveUpReason,
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request timed out; not retried: {:?}", self.reason)
    }
}

impl std::error::Error for AttemptTimedOut {}

impl<S, C, R, Req> Service<Req> for Retry<S, C, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    Req: Send + 'static,
    C: Classify<S::Response> + Clone + Send + Sync + 'static,
    R: CloneRequest<Req> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The readied service sends the first attempt; a fresh clone is
        // left behind for the next caller (tower's convention).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let cloner = self.cloner.clone();
        // `drive` owns what it uses: a wrapping `async move` block would
        // hold a second copy of the request and of the service in the
        // boxed future, which is copied whole into its box.
        Box::pin(drive(
            self.shared.clone(),
            self.classifier.clone(),
            request,
            move |r: &Req| cloner.clone_request(r),
            inner,
        ))
    }
}

/// The one retry loop: every integration (the tower service, the
/// reqwest middleware) runs its attempts through it, so they all follow the
/// policy crate's state machine the same way.
///
/// `clone` copies the request for each attempt but the last; a request it
/// declines is sent once, bounded by the policy's timeouts: it counts as a
/// request for the budget and is never retried.
pub(crate) async fn drive<Req, Res, C>(
    shared: impl std::ops::Deref<Target = Shared>,
    classifier: C,
    request: Req,
    clone: impl Fn(&Req) -> Option<Req>,
    mut send: impl Attempt<Req, Response = Res>,
) -> Result<Res, BoxError>
where
    C: Classify<Res>,
{
    let mut state = shared.begin();
    let mut copy = clone(&request);
    if copy.is_none() {
        shared.passed_through.fetch_add(1, Ordering::Relaxed);
        let attempt = send.send(request);
        return match state.attempt_deadline(&shared.policy) {
            Some(at) => match deadline(shared.instant(at), attempt).await {
                Some(result) => result,
                None => Err(Box::new(AttemptTimedOut {
                    reason: GiveUpReason::Deadline,
                })),
            },
            None => attempt.await,
        };
    }
    let mut request = Some(request);
    loop {
        // The original goes out last, so a request with `max_attempts`
        // attempts is copied `max_attempts - 1` times at most; until then
        // each attempt sends a copy and keeps the original for the next.
        let this_try = match copy.take() {
            Some(c) => c,
            None => request.take().expect("the original is sent once, last"),
        };
        let attempt = send.send(this_try);
        let result: Option<Result<Res, BoxError>> = match state.attempt_deadline(&shared.policy) {
            // No timer is made for an attempt answered on its first poll.
            Some(at) => deadline(shared.instant(at), attempt).await,
            None => Some(attempt.await),
        };
        let outcome = match &result {
            None => AttemptOutcome::Timeout,
            Some(Ok(response)) => classifier.response(response),
            Some(Err(error)) => classifier.error(error),
        };
        match shared.decide(&mut state, outcome) {
            RetryDecision::Success => {
                return result.expect("only an answered attempt succeeds");
            }
            RetryDecision::RetryAt(at) => {
                // Let go of the failed answer now: an unread body
                // would hold its connection through the pause.
                drop(result);
                if request.is_none() {
                    // Unreachable with a policy that counts attempts, kept
                    // so a miscount gives up instead of panicking.
                    return Err(Box::new(AttemptTimedOut {
                        reason: GiveUpReason::AttemptsExhausted,
                    }));
                }
                // tokio's timer ticks in milliseconds: a zero pause
                // through it would still cost up to a millisecond.
                if at > shared.now() {
                    tokio::time::sleep_until(shared.instant(at)).await;
                }
                // `attempts` now counts the attempt about to go out: copy
                // unless it is the last the policy allows.
                if state.attempts() < shared.policy.max_attempts() {
                    copy = request.as_ref().and_then(&clone);
                }
            }
            RetryDecision::GiveUp(reason) => {
                return result.unwrap_or_else(|| Err(Box::new(AttemptTimedOut { reason })));
            }
        }
    }
}

/// Sends one attempt: what [`drive`] needs from a client.
pub(crate) trait Attempt<Req> {
    /// What an attempt answers.
    type Response;

    /// Sends `request` as one attempt.
    fn send(
        &mut self,
        request: Req,
    ) -> impl Future<Output = Result<Self::Response, BoxError>> + Send + '_;
}

impl<S, Req> Attempt<Req> for S
where
    S: Service<Req> + Send,
    S::Future: Send,
    S::Error: Into<BoxError>,
    Req: Send + 'static,
{
    type Response = S::Response;

    async fn send(&mut self, request: Req) -> Result<S::Response, BoxError> {
        // Waiting for the inner service to be ready is part of the
        // attempt: a pool that stays exhausted cannot outlast the
        // deadline, and its error is judged like any other.
        let service = self.ready().await.map_err(Into::into)?;
        service.call(request).await.map_err(Into::into)
    }
}

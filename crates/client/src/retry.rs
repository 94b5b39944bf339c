//! The retry layer: tokio time and a tower service around the policy
//! crate's [`RetryState`], which makes every decision.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::budget::{BudgetConfig, RatioBudget, RatioBudgetConfig, RetryBudget};
use stormbreak_policy::retry::{
    AttemptOutcome, GiveUpReason, RetryConfig, RetryDecision, RetryPolicy, RetryState,
};
use stormbreak_policy::{FieldError, Nanos};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

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

/// What every service of one layer shares: the clock's origin and, under
/// one lock, the policy, the budget and the jitter RNG.
pub(crate) struct Shared {
    origin: Instant,
    decide: Mutex<Decide>,
    passed_through: AtomicU64,
}

struct Decide {
    /// Replaced by [`RetryLayer::set_policy`]: requests in flight keep
    /// their attempt count and are judged by the new policy from their
    /// next outcome on, as in the simulator's `set_retry`.
    policy: RetryPolicy,
    config: RetryConfig,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Decide> {
        self.decide.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin(&self) -> RetryState {
        let now = self.now();
        let mut d = self.lock();
        let Decide { policy, budget, .. } = &mut *d;
        RetryState::begin(policy, now, budget.as_mut())
    }

    fn decide(&self, state: &mut RetryState, now: Nanos, outcome: AttemptOutcome) -> RetryDecision {
        let mut d = self.lock();
        let Decide {
            policy,
            budget,
            rng,
            ..
        } = &mut *d;
        state.on_outcome_budgeted(policy, now, outcome, budget.as_mut(), rng)
    }

    /// The deadlines of the attempt `state` is on, as instants.
    fn attempt_deadline(&self, state: &RetryState) -> AttemptDeadline {
        let d = self.lock();
        AttemptDeadline {
            at: state.attempt_deadline(&d.policy).map(|at| self.instant(at)),
            per_try: d.policy.per_try_timeout().map(std::time::Duration::from),
            overall: state.deadline().map(|at| self.instant(at)),
        }
    }

    fn max_attempts(&self) -> u32 {
        self.lock().policy.max_attempts()
    }
}

/// An attempt's deadlines, as the retry layer hands them down to a layer
/// below that applies them ([`TimedBelow`]): in the request itself, or in
/// an `http::Request`'s extensions.
///
/// A layer below that makes a further call within the same attempt (a
/// gateway forwarding after a dependency check) gives it a fresh per-try
/// timeout with [`AttemptDeadline::rearmed`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttemptDeadline {
    /// When the attempt is abandoned: its per-try timeout from its start,
    /// never past the overall deadline. `None`: unbounded.
    pub at: Option<Instant>,
    /// The policy's per-try timeout.
    pub per_try: Option<std::time::Duration>,
    /// The request's overall deadline.
    pub overall: Option<Instant>,
}

impl AttemptDeadline {
    /// The deadline of a call starting at `now` within this attempt: the
    /// per-try timeout from `now`, never past the overall deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stormbreak_client::AttemptDeadline;
    /// use tokio::time::Instant;
    ///
    /// let now = Instant::now();
    /// let d = AttemptDeadline {
    ///     at: Some(now + Duration::from_millis(500)),
    ///     per_try: Some(Duration::from_millis(500)),
    ///     overall: Some(now + Duration::from_millis(600)),
    /// };
    /// let later = now + Duration::from_millis(300);
    /// assert_eq!(d.rearmed(later), Some(now + Duration::from_millis(600)));
    /// ```
    pub fn rearmed(&self, now: Instant) -> Option<Instant> {
        match (self.per_try.map(|t| now + t), self.overall) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Who applies an attempt's deadline: the retry layer itself
/// ([`TimedHere`], what [`RetryLayer`]'s services do), or a layer below it
/// ([`TimedBelow`]), which then sees the timeout as the attempt's failure:
/// a circuit breaker or outlier detector below the retry layer counts it,
/// as linkerd places its per-try timeout below them.
pub trait Timing<Req> {
    /// Hands `deadline` down in `request` and returns `true`, or returns
    /// `false` for the retry layer to apply it itself.
    fn hand_down(&self, request: &mut Req, deadline: &AttemptDeadline) -> bool;
}

/// The retry layer abandons an attempt at its deadline itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimedHere;

impl<Req> Timing<Req> for TimedHere {
    fn hand_down(&self, _: &mut Req, _: &AttemptDeadline) -> bool {
        false
    }
}

/// A layer below applies each attempt's deadline: the retry layer writes
/// it into the request (an [`AttemptDeadline`] request, or an
/// `http::Request`'s extensions) and sets no timer for the attempt.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimedBelow;

impl Timing<AttemptDeadline> for TimedBelow {
    fn hand_down(&self, request: &mut AttemptDeadline, deadline: &AttemptDeadline) -> bool {
        *request = *deadline;
        true
    }
}

impl<B> Timing<http::Request<B>> for TimedBelow {
    fn hand_down(&self, request: &mut http::Request<B>, deadline: &AttemptDeadline) -> bool {
        request.extensions_mut().insert(*deadline);
        true
    }
}

/// What a retry loop tells its owner as it runs, for metrics or an access
/// log: each retry decided (before its pause), and a give-up with its
/// reason. Both default to nothing; `()` listens to nothing.
pub trait RetryEvents {
    /// A retry was decided; it goes out after its pause.
    fn retrying(&self) {}
    /// The loop gave up (the last attempt's result is returned).
    fn gave_up(&self, reason: GiveUpReason) {
        let _ = reason;
    }
}

impl RetryEvents for () {}

impl<E: RetryEvents + ?Sized> RetryEvents for &E {
    fn retrying(&self) {
        (**self).retrying();
    }
    fn gave_up(&self, reason: GiveUpReason) {
        (**self).gave_up(reason);
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
            config: config.clone(),
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
    config: RetryConfig,
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
            config: self.config,
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
            config: self.config,
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
                origin: Instant::now(),
                decide: Mutex::new(Decide {
                    policy: self.policy,
                    config: self.config,
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
    /// The policy the layer's services follow now.
    pub fn policy(&self) -> RetryPolicy {
        self.shared.lock().policy.clone()
    }

    /// The configuration of the policy in force.
    pub fn config(&self) -> RetryConfig {
        self.shared.lock().config.clone()
    }

    /// Replaces the policy of every service of this layer; the budget and
    /// its state are kept. Requests in flight keep their attempt count
    /// and are judged by the new policy from their next outcome on, as the
    /// simulator's `set_retry` action does.
    ///
    /// ```
    /// use stormbreak_client::RetryLayer;
    /// use stormbreak_policy::retry::RetryConfig;
    ///
    /// let layer = RetryLayer::new(&RetryConfig::default()).unwrap();
    /// let one: RetryConfig = toml::from_str("max_attempts = 1").unwrap();
    /// layer.set_policy(&one).unwrap();
    /// assert_eq!(layer.policy().max_attempts(), 1);
    /// ```
    pub fn set_policy(&self, config: &RetryConfig) -> Result<(), FieldError> {
        let policy = RetryPolicy::new(config)?;
        let mut d = self.shared.lock();
        d.policy = policy;
        d.config = config.clone();
        Ok(())
    }

    /// One request's retry loop over `service`, which the caller owns
    /// for this request alone: the loop [`Retry`] runs, with the layer's
    /// policy, budget, jitter and classifier, the deadline applied as
    /// `timing` says, and its retries and give-up told to `events`.
    ///
    /// For a caller that is not a tower stack (a gateway's request path
    /// making its own attempts, say): `service` may borrow from the
    /// caller, as `tower::service_fn` over a closure does, and need not be
    /// `Clone`.
    pub fn drive<S, Req, T, E>(
        &self,
        service: S,
        request: Req,
        timing: T,
        events: E,
    ) -> Driven<'_, S, Req, C, R, T, E>
    where
        S: Service<Req>,
        R: Clone,
    {
        Driven {
            drive: Drive::new(
                &*self.shared,
                ByRef(&self.classifier),
                self.cloner.clone(),
                service,
                request,
            )
            .with(timing, events),
        }
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
            .field("policy", &self.shared.lock().policy)
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
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<S::Response> + Clone,
    R: CloneRequest<Req> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RetryFuture<S, Req, C, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The readied service sends the first attempt; a fresh clone is
        // left behind for the next caller (tower's convention).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        RetryFuture {
            drive: Drive::new(
                self.shared.clone(),
                self.classifier.clone(),
                self.cloner.clone(),
                inner,
                request,
            ),
        }
    }
}

pin_project! {
    /// The future [`Retry`] answers with: the retry loop for one request.
    ///
    /// A named state machine rather than a boxed `async` block, so a
    /// request through the layer costs no allocation of its own and the
    /// loop's state is not copied into a box.
    pub struct RetryFuture<S, Req, C, R>
    where
        S: Service<Req>,
    {
        #[pin]
        drive: Drive<S, Req, C, R, Arc<Shared>, TimedHere, ()>,
    }
}

pin_project! {
    /// One request's retry loop over a service its caller owns
    /// ([`RetryLayer::drive`]); it answers as [`Retry`] does.
    pub struct Driven<'a, S, Req, C, R, T, E>
    where
        S: Service<Req>,
    {
        #[pin]
        drive: Drive<S, Req, ByRef<'a, C>, R, &'a Shared, T, E>,
    }
}

impl<S: Service<Req>, Req, C, R, T, E> fmt::Debug for Driven<'_, S, Req, C, R, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driven")
            .field("attempts", &self.drive.retry.attempts())
            .finish_non_exhaustive()
    }
}

impl<S, Req, C, R, T, E> Future for Driven<'_, S, Req, C, R, T, E>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response>,
    R: CloneRequest<Req>,
    T: Timing<Req>,
    E: RetryEvents,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().drive.poll(cx)
    }
}

/// A classifier lent to [`Drive`] (which owns its classifier).
pub(crate) struct ByRef<'a, C>(pub(crate) &'a C);

impl<Res, C: Classify<Res>> Classify<Res> for ByRef<'_, C> {
    fn response(&self, response: &Res) -> AttemptOutcome {
        self.0.response(response)
    }

    fn error(&self, error: &BoxError) -> AttemptOutcome {
        self.0.error(error)
    }
}

impl<S: Service<Req>, Req, C, R> fmt::Debug for RetryFuture<S, Req, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryFuture")
            .field("attempts", &self.drive.retry.attempts())
            .finish_non_exhaustive()
    }
}

impl<S, Req, C, R> Future for RetryFuture<S, Req, C, R>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response>,
    R: CloneRequest<Req>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().drive.poll(cx)
    }
}

pin_project! {
    /// The one retry loop: every integration (the tower service, the
    /// reqwest middleware) runs its attempts through it, so they all follow
    /// the policy crate's state machine the same way.
    ///
    /// Each attempt waits for `service` to be ready and calls it, bounded
    /// by the attempt's deadline. `cloner` copies the request for each
    /// attempt but the last; a request it declines is sent once, bounded by
    /// the policy's timeouts: it counts as a request for the budget and is
    /// never retried.
    #[project = DriveProj]
    pub(crate) struct Drive<S, Req, C, R, D, T, E>
    where
        S: Service<Req>,
    {
        shared: D,
        classifier: C,
        cloner: R,
        // Who applies each attempt's deadline.
        timing: T,
        // Told of retries and the give-up.
        events: E,
        service: S,
        retry: RetryState,
        // The request as the caller gave it, until the attempt that sends
        // it: the original goes out last, so a request with `max_attempts`
        // attempts is copied `max_attempts - 1` times at most.
        request: Option<Req>,
        // The cloner declined: one attempt, no policy decision.
        alone: bool,
        // The current attempt's deadline, from the policy.
        deadline: Option<Instant>,
        // The attempt's deadline timer, made only once the attempt has had
        // to wait (tokio's `Timeout` registers its timer then too), or the
        // pause before the next attempt. Boxed: it is rare, and the loop's
        // state stays small to move.
        timer: Option<Pin<Box<Sleep>>>,
        #[pin]
        step: Step<S::Future, Req>,
    }
}

pin_project! {
    #[project = StepProj]
    enum Step<F, Req> {
        // Not yet polled: the request begins at the first poll.
        Start,
        // Waiting for the service to be ready for this attempt's request.
        Ready { request: Option<Req> },
        Calling { #[pin] call: F },
        // Pausing before the next attempt (the timer is set).
        Paused,
        Done,
    }
}

/// The policy a loop's state is made with before its request begins
/// (and takes the layer's policy): any policy would do, and this one costs
/// no lock.
static PLACEHOLDER: std::sync::LazyLock<RetryPolicy> =
    std::sync::LazyLock::new(|| RetryPolicy::new(&RetryConfig::default()).expect("the default"));

impl<S, Req, C, R, D> Drive<S, Req, C, R, D, TimedHere, ()>
where
    S: Service<Req>,
    D: std::ops::Deref<Target = Shared>,
{
    pub(crate) fn new(shared: D, classifier: C, cloner: R, service: S, request: Req) -> Self {
        Drive {
            // Replaced at the first poll, when the request begins.
            retry: RetryState::new(&PLACEHOLDER, Nanos::ZERO),
            shared,
            classifier,
            cloner,
            timing: TimedHere,
            events: (),
            service,
            request: Some(request),
            alone: false,
            deadline: None,
            timer: None,
            step: Step::Start,
        }
    }
}

impl<S: Service<Req>, Req, C, R, D> Drive<S, Req, C, R, D, TimedHere, ()> {
    /// The same loop with its deadlines applied as `timing` says, telling
    /// `events` of its retries and give-up.
    pub(crate) fn with<T, E>(self, timing: T, events: E) -> Drive<S, Req, C, R, D, T, E> {
        Drive {
            shared: self.shared,
            classifier: self.classifier,
            cloner: self.cloner,
            timing,
            events,
            service: self.service,
            retry: self.retry,
            request: self.request,
            alone: self.alone,
            deadline: self.deadline,
            timer: self.timer,
            step: self.step,
        }
    }
}

/// What one attempt came to: `None` if it was abandoned at its deadline.
type Answer<T> = Option<Result<T, BoxError>>;

impl<S, Req, C, R, D, T, E> Future for Drive<S, Req, C, R, D, T, E>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response>,
    R: CloneRequest<Req>,
    D: std::ops::Deref<Target = Shared>,
    T: Timing<Req>,
    E: RetryEvents,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let answer: Answer<S::Response> = match this.step.as_mut().project() {
                StepProj::Start => {
                    *this.retry = this.shared.begin();
                    let request = this.request.as_ref().expect("the request until it is sent");
                    let mut first = match this.cloner.clone_request(request) {
                        Some(copy) => copy,
                        None => {
                            this.shared.passed_through.fetch_add(1, Ordering::Relaxed);
                            *this.alone = true;
                            this.request.take().expect("the request until it is sent")
                        }
                    };
                    *this.deadline = this.next_deadline(Some(&mut first));
                    this.step.set(Step::Ready {
                        request: Some(first),
                    });
                    continue;
                }
                StepProj::Ready { request } => match this.service.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        let request = request.take().expect("sent once");
                        let call = this.service.call(request);
                        this.step.set(Step::Calling { call });
                        continue;
                    }
                    // Waiting for the inner service to be ready is part of
                    // the attempt: a pool that stays exhausted cannot
                    // outlast the deadline, and its error is judged like
                    // any other.
                    Poll::Ready(Err(e)) => Some(Err(e.into())),
                    Poll::Pending => match this.attempt_timer(cx) {
                        Poll::Ready(()) => None,
                        Poll::Pending => return Poll::Pending,
                    },
                },
                StepProj::Calling { call } => match call.poll(cx) {
                    Poll::Ready(result) => Some(result.map_err(Into::into)),
                    Poll::Pending => match this.attempt_timer(cx) {
                        Poll::Ready(()) => None,
                        Poll::Pending => return Poll::Pending,
                    },
                },
                StepProj::Paused => {
                    let timer = this.timer.as_mut().expect("a pause has its timer");
                    std::task::ready!(timer.as_mut().poll(cx));
                    *this.timer = None;
                    this.next_attempt();
                    continue;
                }
                StepProj::Done => panic!("retry future polled after it completed"),
            };
            // The attempt is over: its timer (if any) goes with it, and
            // with `Done` the attempt's future is dropped before the pause.
            *this.timer = None;
            this.step.set(Step::Done);
            if *this.alone {
                return Poll::Ready(answer.unwrap_or_else(|| {
                    Err(Box::new(AttemptTimedOut {
                        reason: GiveUpReason::Deadline,
                    }))
                }));
            }
            let outcome = match &answer {
                None => AttemptOutcome::Timeout,
                Some(Ok(response)) => this.classifier.response(response),
                Some(Err(error)) => this.classifier.error(error),
            };
            let now = this.shared.now();
            match this.shared.decide(this.retry, now, outcome) {
                RetryDecision::Success => {
                    return Poll::Ready(answer.expect("only an answered attempt succeeds"));
                }
                RetryDecision::RetryAt(at) => {
                    // Let go of the failed answer now: an unread body
                    // would hold its connection through the pause.
                    drop(answer);
                    this.events.retrying();
                    if this.request.is_none() {
                        // Unreachable with a policy that counts attempts,
                        // kept so a miscount gives up instead of panicking.
                        return Poll::Ready(Err(Box::new(AttemptTimedOut {
                            reason: GiveUpReason::AttemptsExhausted,
                        })));
                    }
                    // tokio's timer ticks in milliseconds: a zero pause
                    // through it would still cost up to a millisecond.
                    if at > now && at > this.shared.now() {
                        *this.timer =
                            Some(Box::pin(tokio::time::sleep_until(this.shared.instant(at))));
                        this.step.set(Step::Paused);
                    } else {
                        this.next_attempt();
                    }
                }
                RetryDecision::GiveUp(reason) => {
                    this.events.gave_up(reason);
                    return Poll::Ready(
                        answer.unwrap_or_else(|| Err(Box::new(AttemptTimedOut { reason }))),
                    );
                }
            }
        }
    }
}

impl<S, Req, C, R, D, T, E> DriveProj<'_, S, Req, C, R, D, T, E>
where
    S: Service<Req>,
    R: CloneRequest<Req>,
    D: std::ops::Deref<Target = Shared>,
    T: Timing<Req>,
{
    /// The deadline the layer applies to the attempt about to go out with
    /// `request`: none when `timing` hands it down in the request.
    fn next_deadline(&self, request: Option<&mut Req>) -> Option<Instant> {
        let deadline = self.shared.attempt_deadline(self.retry);
        match request {
            Some(r) => {
                if self.timing.hand_down(r, &deadline) {
                    None
                } else {
                    deadline.at
                }
            }
            None => deadline.at,
        }
    }

    /// After a retry decision and its pause: the next attempt's request
    /// and deadline.
    fn next_attempt(&mut self) {
        // `attempts` now counts the attempt about to go out: copy unless
        // it is the last the policy allows.
        let copy = if self.retry.attempts() < self.shared.max_attempts() {
            self.request
                .as_ref()
                .and_then(|r| self.cloner.clone_request(r))
        } else {
            None
        };
        let mut request = copy.or_else(|| self.request.take());
        *self.deadline = self.next_deadline(request.as_mut());
        self.step.as_mut().set(Step::Ready { request });
    }

    /// Polls the current attempt's deadline, making its timer on the first
    /// poll that finds the attempt waiting. `Pending` without a deadline.
    fn attempt_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(at) = *self.deadline else {
            return Poll::Pending;
        };
        self.timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)))
            .as_mut()
            .poll(cx)
    }
}

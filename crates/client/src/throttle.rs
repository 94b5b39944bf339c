//! Google SRE client-side adaptive throttling as a tower layer, driving
//! the policy crate's [`AdaptiveThrottle`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::shed::{AdaptiveThrottle, ThrottleConfig};
use stormbreak_policy::{FieldError, Nanos};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::overload::{Verdict, verdict};
use crate::{BoxError, Classify, HttpClassifier, Rejected, RejectedBy};

/// A tower [`Layer`] that refuses requests locally with the probability
/// `max(0, (requests − K·accepts) / (requests + 1))` of the SRE book's
/// client-side throttling (the policy crate's [`AdaptiveThrottle`]).
///
/// A refused request fails at once with [`Rejected`] and never reaches the
/// backend. An answer counts as accepted unless it is a 5xx or 429, a
/// timeout, a reset or a refused connection; a refusal by an inner
/// [`BreakerLayer`](crate::BreakerLayer) is not counted as an answer.
/// Every service of one layer shares one throttle.
///
/// Put it **inside** the retry layer, so that every attempt is counted and
/// throttled: outside, it sees only logical requests and the retries
/// behind it go unthrottled.
///
/// ```
/// use stormbreak_client::ThrottleLayer;
/// use stormbreak_policy::shed::ThrottleConfig;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = ThrottleLayer::new(&ThrottleConfig::default()).unwrap().seed(7);
/// let down = layer.layer(service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(
///         http::Response::builder().status(503).body(()).unwrap(),
///     )
/// }));
/// let mut refused = 0;
/// for _ in 0..100 {
///     if down.clone().oneshot(http::Request::new(())).await.is_err() {
///         refused += 1;
///     }
/// }
/// // Against a backend that accepts nothing, most requests stay local.
/// assert!(refused > 50, "{refused}");
/// assert_eq!(layer.rejected(), refused);
/// # }
/// ```
#[derive(Clone)]
pub struct ThrottleLayer<C = HttpClassifier> {
    shared: Arc<ThrottleShared>,
    classifier: C,
}

struct ThrottleShared {
    origin: Instant,
    state: Mutex<(AdaptiveThrottle, Pcg64Mcg)>,
    rejected: AtomicU64,
}

impl ThrottleShared {
    fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    fn should_send(&self) -> bool {
        let now = self.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (throttle, rng) = &mut *s;
        throttle.should_send(now, rng)
    }

    fn on_response(&self, accepted: bool) {
        let now = self.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0.on_response(now, accepted);
    }
}

impl ThrottleLayer {
    /// A throttle with `config` (the book's `K = 2` over 2 minutes by
    /// default), HTTP classification and an RNG seeded from the OS. Its
    /// clock starts now.
    pub fn new(config: &ThrottleConfig) -> Result<Self, FieldError> {
        Ok(ThrottleLayer {
            shared: Arc::new(ThrottleShared {
                origin: Instant::now(),
                state: Mutex::new((AdaptiveThrottle::new(config)?, Pcg64Mcg::from_os_rng())),
                rejected: AtomicU64::new(0),
            }),
            classifier: HttpClassifier::default(),
        })
    }
}

impl<C> ThrottleLayer<C> {
    /// Seeds the RNG that draws local rejections, for reproducible runs.
    /// Call before building services.
    pub fn seed(self, seed: u64) -> Self {
        {
            let mut s = self
                .shared
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            s.1 = Pcg64Mcg::seed_from_u64(seed);
        }
        self
    }

    /// The classifier that reads answers, e.g. for a non-HTTP service.
    pub fn classifier<D>(self, classifier: D) -> ThrottleLayer<D> {
        ThrottleLayer {
            shared: self.shared,
            classifier,
        }
    }

    /// Requests refused locally since the layer was built.
    pub fn rejected(&self) -> u64 {
        self.shared.rejected.load(Ordering::Relaxed)
    }

    /// The current local reject probability.
    pub fn reject_probability(&self) -> f64 {
        let now = self.shared.now();
        let mut s = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        s.0.reject_probability(now)
    }
}

impl<C: fmt::Debug> fmt::Debug for ThrottleLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleLayer")
            .field("classifier", &self.classifier)
            .field("rejected", &self.rejected())
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone> Layer<S> for ThrottleLayer<C> {
    type Service = Throttle<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Throttle {
            inner,
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
        }
    }
}

/// The service [`ThrottleLayer`] builds.
#[derive(Clone)]
pub struct Throttle<S, C = HttpClassifier> {
    inner: S,
    shared: Arc<ThrottleShared>,
    classifier: C,
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for Throttle<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttle")
            .field("inner", &self.inner)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

// No `Send` or `'static` bounds: the future is a named type, never boxed,
// so it is `Send` exactly when the inner call is.
impl<S, C, Req> Service<Req> for Throttle<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ThrottleFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        if !self.shared.should_send() {
            self.shared.rejected.fetch_add(1, Ordering::Relaxed);
            // The readied inner service is left unused, as tower allows.
            return ThrottleFuture {
                state: State::Refused,
            };
        }
        ThrottleFuture {
            state: State::Sent {
                call: self.inner.call(request),
                shared: self.shared.clone(),
                classifier: self.classifier.clone(),
            },
        }
    }
}

pin_project! {
    /// The future [`Throttle`] answers with: the inner call, whose answer
    /// the throttle counts, or a local refusal ([`Rejected`]).
    ///
    /// A named type rather than a boxed one, so a request through the
    /// throttle costs no allocation of its own.
    pub struct ThrottleFuture<F, C> {
        #[pin]
        state: State<F, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C> {
        Sent {
            #[pin]
            call: F,
            shared: Arc<ThrottleShared>,
            classifier: C,
        },
        Refused,
        Done,
    }
}

impl<F, C> fmt::Debug for ThrottleFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleFuture").finish_non_exhaustive()
    }
}

impl<F, C, T, E> Future for ThrottleFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classify<T>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let result = match state.as_mut().project() {
            StateProj::Sent {
                call,
                shared,
                classifier,
            } => {
                let result = std::task::ready!(call.poll(cx)).map_err(Into::into);
                match verdict(&*classifier, &result) {
                    Verdict::Accepted => shared.on_response(true),
                    Verdict::Failed => shared.on_response(false),
                    // Counted as a request (the book counts local rejects
                    // too), never as an accept.
                    Verdict::NotSent => {}
                }
                result
            }
            StateProj::Refused => Err(Box::new(Rejected {
                by: RejectedBy::Throttle,
                retry_after: None,
            }) as BoxError),
            StateProj::Done => panic!("ThrottleFuture polled after it completed"),
        };
        state.set(State::Done);
        Poll::Ready(result)
    }
}

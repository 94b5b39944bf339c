//! A circuit breaker as a tower layer, driving the policy crate's
//! [`Breaker`] (resilience4j's state machine with Envoy's
//! consecutive-failure trip).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use stormbreak_policy::breaker::{
    Admission, Breaker, BreakerConfig, BreakerState, BreakerStats, Ticket,
};
use stormbreak_policy::{FieldError, Nanos};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::overload::{Verdict, verdict};
use crate::{BoxError, Classify, HttpClassifier, Rejected, RejectedBy};

/// A tower [`Layer`] that stops calling a failing backend: while the
/// breaker is open every request fails at once with [`Rejected`]
/// (carrying when the next probe is due); after the open wait a bounded
/// number of probes decide whether to close.
///
/// A failure is a 5xx or 429, a timeout, a reset or a refused connection;
/// a request whose future is dropped before it answers hands its ticket
/// back unjudged, and so does one refused by an inner
/// [`ThrottleLayer`](crate::ThrottleLayer). Every service of one layer
/// shares one breaker.
///
/// Put it **inside** the retry layer: each attempt then counts towards
/// the trip, and once open the retry layer does not retry its refusals.
///
/// ```
/// use stormbreak_client::BreakerLayer;
/// use stormbreak_policy::breaker::{BreakerConfig, BreakerState};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = BreakerLayer::new(&BreakerConfig::envoy_outlier_detection()).unwrap();
/// let down = layer.layer(service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(
///         http::Response::builder().status(503).body(()).unwrap(),
///     )
/// }));
/// for _ in 0..5 {
///     let r = down.clone().oneshot(http::Request::new(())).await.unwrap();
///     assert_eq!(r.status(), 503);
/// }
/// assert_eq!(layer.state(), BreakerState::Open);
/// let refused = down.clone().oneshot(http::Request::new(())).await.unwrap_err();
/// assert!(refused.is::<stormbreak_client::Rejected>());
/// # }
/// ```
#[derive(Clone)]
pub struct BreakerLayer<C = HttpClassifier> {
    shared: Arc<BreakerShared>,
    classifier: C,
}

struct BreakerShared {
    origin: Instant,
    breaker: Mutex<Breaker>,
}

impl BreakerShared {
    fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Breaker, Nanos) -> T) -> T {
        let now = self.now();
        let mut b = self.breaker.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut b, now)
    }
}

impl BreakerLayer {
    /// A closed breaker with `config` and HTTP classification. Its clock
    /// starts now.
    pub fn new(config: &BreakerConfig) -> Result<Self, FieldError> {
        Ok(BreakerLayer {
            shared: Arc::new(BreakerShared {
                origin: Instant::now(),
                breaker: Mutex::new(Breaker::new(config)?),
            }),
            classifier: HttpClassifier::default(),
        })
    }
}

impl<C> BreakerLayer<C> {
    /// The classifier that reads answers, e.g. for a non-HTTP service.
    pub fn classifier<D>(self, classifier: D) -> BreakerLayer<D> {
        BreakerLayer {
            shared: self.shared,
            classifier,
        }
    }

    /// The breaker's state now (an open breaker whose wait has passed still
    /// reads open until the next request turns it half-open).
    pub fn state(&self) -> BreakerState {
        self.shared.with(|b, _| b.state())
    }

    /// The breaker's counters.
    pub fn stats(&self) -> BreakerStats {
        self.shared.with(|b, _| b.stats())
    }
}

impl<C: fmt::Debug> fmt::Debug for BreakerLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("classifier", &self.classifier)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = CircuitBreaker<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreaker {
            inner,
            shared: self.shared.clone(),
            classifier: self.classifier.clone(),
        }
    }
}

/// The service [`BreakerLayer`] builds.
#[derive(Clone)]
pub struct CircuitBreaker<S, C = HttpClassifier> {
    inner: S,
    shared: Arc<BreakerShared>,
    classifier: C,
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for CircuitBreaker<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("inner", &self.inner)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

/// An admitted call's ticket; handed back unjudged if the call is dropped.
struct Admitted {
    shared: Arc<BreakerShared>,
    ticket: Option<Ticket>,
}

impl Admitted {
    fn judge(mut self, verdict: Verdict) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        self.shared.with(|b, now| match verdict {
            // Transitions are visible through `state()` and `stats()`.
            Verdict::Accepted => {
                let _ = b.on_success(now, ticket);
            }
            Verdict::Failed => {
                let _ = b.on_failure(now, ticket);
            }
            Verdict::NotSent => b.on_cancel(ticket),
        });
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.shared.with(|b, _| b.on_cancel(ticket));
        }
    }
}

impl<S, C, Req> Service<Req> for CircuitBreaker<S, C>
where
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    C: Classify<S::Response> + Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let admission = self.shared.with(|b, now| match b.allow(now) {
            Admission::Allowed(ticket) => Ok(ticket),
            Admission::Rejected => Err(b.retry_after(now)),
        });
        let ticket = match admission {
            Ok(ticket) => ticket,
            Err(retry_after) => {
                return Box::pin(std::future::ready(Err(Box::new(Rejected {
                    by: RejectedBy::Breaker,
                    retry_after: retry_after.map(Into::into),
                }) as BoxError)));
            }
        };
        let admitted = Admitted {
            shared: self.shared.clone(),
            ticket: Some(ticket),
        };
        let call = self.inner.call(request);
        let classifier = self.classifier.clone();
        Box::pin(async move {
            let result = call.await.map_err(Into::into);
            admitted.judge(verdict(&classifier, &result));
            result
        })
    }
}

//! The cluster's circuit breaker (`breaker` on a `[[cluster]]`, the
//! policy crate's): while open a call is refused at once, with when probes
//! resume; otherwise the call holds a ticket, finished by a judged answer
//! and handed back unjudged (dropped) by any other.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::{Call, Verdict};
use crate::balance::{BreakerCall, Cluster};
use crate::endpoint::AttemptError;
use crate::metrics::UpstreamRejected;

/// Builds [`Breaker`] for one cluster.
#[derive(Clone, Copy)]
pub(crate) struct BreakerLayer<'a>(pub(crate) &'a Cluster);

impl<'a, S> Layer<S> for BreakerLayer<'a> {
    type Service = Breaker<'a, S>;

    fn layer(&self, inner: S) -> Breaker<'a, S> {
        Breaker {
            cluster: self.0,
            inner,
        }
    }
}

/// Passes a call the breaker admits.
#[derive(Clone)]
pub(crate) struct Breaker<'a, S> {
    cluster: &'a Cluster,
    inner: S,
}

impl<'a, 'b, S: Service<Call<'b>, Response = Verdict, Error = Infallible>> Service<Call<'b>>
    for Breaker<'a, S>
{
    type Response = Verdict;
    type Error = Infallible;
    type Future = Guarded<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call<'b>) -> Self::Future {
        match self.cluster.admit() {
            Ok(ticket) => Guarded::Calling {
                call: self.inner.call(call),
                ticket,
            },
            Err(after) => {
                self.cluster.m.rejected(UpstreamRejected::BreakerOpen);
                Guarded::Open { after: Some(after) }
            }
        }
    }
}

pin_project! {
    /// A call under the breaker.
    #[project = GuardedProj]
    pub(crate) enum Guarded<'a, F> {
        Calling { #[pin] call: F, ticket: Option<BreakerCall<'a>> },
        Open { after: Option<Option<stormbreak_policy::Nanos>> },
    }
}

impl<F: Future<Output = Result<Verdict, Infallible>>> Future for Guarded<'_, F> {
    type Output = Result<Verdict, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            GuardedProj::Open { after } => Poll::Ready(Ok(Verdict::unjudged(Err(
                AttemptError::CircuitOpen(after.take().flatten()),
            )))),
            GuardedProj::Calling { call, ticket } => {
                let verdict = match std::task::ready!(call.poll(cx)) {
                    Ok(v) => v,
                    Err(never) => match never {},
                };
                if let Some(t) = ticket.take()
                    && verdict.judged
                {
                    t.finish(verdict.failed());
                }
                Poll::Ready(Ok(verdict))
            }
        }
    }
}

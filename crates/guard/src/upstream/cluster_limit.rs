//! The cluster's concurrency limit (`limit` on a `[[cluster]]`): a permit
//! for each call, waiting in its queue when it has one; refused → no
//! endpoint (503). A judged answer is the limiter's sample; an unjudged
//! one frees the permit without a sample.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use stormbreak_policy::limit::Outcome;
use tower::{Layer, Service};

use super::{Call, Verdict};
use crate::balance::Cluster;
use crate::endpoint::AttemptError;
use crate::limit::{LimitPermit, Refusal};
use crate::metrics::UpstreamRejected;

/// Builds [`ClusterLimit`] for one cluster.
#[derive(Clone, Copy)]
pub(crate) struct ClusterLimitLayer<'a>(pub(crate) &'a Cluster);

impl<'a, S> Layer<S> for ClusterLimitLayer<'a> {
    type Service = ClusterLimit<'a, S>;

    fn layer(&self, inner: S) -> ClusterLimit<'a, S> {
        ClusterLimit {
            cluster: self.0,
            inner,
        }
    }
}

/// Holds a permit of the cluster's limit for the call.
#[derive(Clone)]
pub(crate) struct ClusterLimit<'a, S> {
    cluster: &'a Cluster,
    inner: S,
}

/// A permit being waited for (the limiter's own future, boxed: with the
/// call it holds, the stack's only allocations, made only when the limit
/// is full).
type Acquire<'a> = Pin<Box<dyn Future<Output = Result<LimitPermit, Refusal>> + Send + 'a>>;

impl<'a, 'b, S> Service<Call<'b>> for ClusterLimit<'a, S>
where
    S: Service<Call<'b>, Response = Verdict, Error = Infallible> + Clone,
{
    type Response = Verdict;
    type Error = Infallible;
    type Future = Limited<'a, 'b, S, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call<'b>) -> Self::Future {
        match &self.cluster.limit {
            None => Limited::Calling {
                call: self.inner.call(call),
                permit: None,
            },
            Some(limit) => match limit.try_permit() {
                Some(permit) => Limited::Calling {
                    call: self.inner.call(call),
                    permit: Some(permit),
                },
                None => {
                    let limit: &'a Arc<_> = limit;
                    Limited::Waiting {
                        acquire: Box::pin(limit.acquire()),
                        // Boxed with the wait, so the common case's future
                        // does not carry a request's worth of room.
                        next: Box::new(Some((self.inner.clone(), call))),
                        cluster: self.cluster,
                    }
                }
            },
        }
    }
}

pin_project! {
    /// A call under the cluster's limit.
    #[project = LimitedProj]
    pub(crate) enum Limited<'a, 'b, S, F> {
        Waiting { acquire: Acquire<'a>, next: Box<Option<(S, Call<'b>)>>, cluster: &'a Cluster },
        Calling { #[pin] call: F, permit: Option<LimitPermit> },
    }
}

impl<'b, S> Future for Limited<'_, 'b, S, S::Future>
where
    S: Service<Call<'b>, Response = Verdict, Error = Infallible>,
{
    type Output = Result<Verdict, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                LimitedProj::Waiting {
                    acquire,
                    next,
                    cluster,
                } => {
                    let permit = match std::task::ready!(acquire.as_mut().poll(cx)) {
                        Ok(p) => p,
                        Err(_) => {
                            cluster.m.rejected(UpstreamRejected::Limit);
                            return Poll::Ready(Ok(Verdict::unjudged(Err(
                                AttemptError::NoEndpoint,
                            ))));
                        }
                    };
                    let (mut inner, call) = next.take().expect("waits once");
                    let call = inner.call(call);
                    self.set(Limited::Calling {
                        call,
                        permit: Some(permit),
                    });
                }
                LimitedProj::Calling { call, permit } => {
                    let verdict = match std::task::ready!(call.poll(cx)) {
                        Ok(v) => v,
                        Err(never) => match never {},
                    };
                    if let Some(p) = permit.take()
                        && verdict.judged
                    {
                        p.finish(if verdict.failed() {
                            Outcome::Dropped
                        } else {
                            Outcome::Success
                        });
                    }
                    return Poll::Ready(Ok(verdict));
                }
            }
        }
    }
}

//! The endpoint for a call: P2C least-request over the cluster's
//! endpoints that are neither ejected nor failing health checks
//! (`Cluster::pick`, the policy crate's choice); each judged answer goes to
//! outlier ejection and the cluster's answer metrics. The picked
//! endpoint's in-flight count drops when the call ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::{Call, Verdict};
use crate::balance::{Cluster, Picked};
use crate::endpoint::AttemptError;
use crate::metrics::{UpstreamError, UpstreamRejected};

/// Builds [`Balance`] for one cluster.
#[derive(Clone, Copy)]
pub(crate) struct BalanceLayer<'a>(pub(crate) &'a Cluster);

impl<'a, S> Layer<S> for BalanceLayer<'a> {
    type Service = Balance<'a, S>;

    fn layer(&self, inner: S) -> Balance<'a, S> {
        Balance {
            cluster: self.0,
            inner,
        }
    }
}

/// Picks an endpoint and learns from its answer.
#[derive(Clone)]
pub(crate) struct Balance<'a, S> {
    cluster: &'a Cluster,
    inner: S,
}

impl<'a, 'b, S: Service<Call<'b>, Response = Verdict, Error = Infallible>> Service<Call<'b>>
    for Balance<'a, S>
{
    type Response = Verdict;
    type Error = Infallible;
    type Future = Balanced<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: Call<'b>) -> Self::Future {
        let Some(picked) = self.cluster.pick() else {
            self.cluster.m.rejected(UpstreamRejected::NoEndpoint);
            return Balanced::Refused {
                refused: Some(AttemptError::NoEndpoint),
            };
        };
        self.cluster.m.requests.inc();
        call.endpoint = Some(picked.authority());
        Balanced::Calling {
            call: self.inner.call(call),
            picked: Some(picked),
            sent: tokio::time::Instant::now(),
        }
    }
}

pin_project! {
    /// A call to the endpoint picked for it.
    #[project = BalancedProj]
    pub(crate) enum Balanced<'a, F> {
        Calling { #[pin] call: F, picked: Option<Picked<'a>>, sent: tokio::time::Instant },
        Refused { refused: Option<AttemptError> },
    }
}

impl<F: Future<Output = Result<Verdict, Infallible>>> Future for Balanced<'_, F> {
    type Output = Result<Verdict, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            BalancedProj::Refused { refused } => Poll::Ready(Ok(Verdict::unjudged(Err(refused
                .take()
                .unwrap_or(AttemptError::NoEndpoint))))),
            BalancedProj::Calling { call, picked, sent } => {
                let verdict = match std::task::ready!(call.poll(cx)) {
                    Ok(v) => v,
                    Err(never) => match never {},
                };
                // Taken (and its in-flight count dropped) once, here.
                let picked = picked.take().expect("polled once after completion");
                if verdict.judged {
                    let cluster = picked.cluster();
                    let seen = match &verdict.result {
                        Ok(r) => Ok(r.status().as_u16()),
                        Err(AttemptError::Timeout) => Err(UpstreamError::Timeout),
                        Err(AttemptError::Reset) => Err(UpstreamError::Reset),
                        Err(_) => Err(UpstreamError::Connect),
                    };
                    cluster.m.answered(seen, sent.elapsed());
                    cluster.report(picked.index, verdict.failed());
                }
                Poll::Ready(Ok(verdict))
            }
        }
    }
}

//! The attempt's deadline (per-try timeout, never past the overall
//! deadline), applied to the call below; and, when a streamed body was on
//! its way, whose failure a failed call was (`crate::blame`): the client's
//! or nobody's for sure is answered unjudged, so no policy above learns it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Timeout;
use tower::{Layer, Service};

use super::{Call, Verdict};
use crate::blame::{Blame, Progress};
use crate::endpoint::AttemptError;

/// Builds [`PerTryTimeout`].
#[derive(Clone, Copy)]
pub(crate) struct PerTryTimeoutLayer;

impl<S> Layer<S> for PerTryTimeoutLayer {
    type Service = PerTryTimeout<S>;

    fn layer(&self, inner: S) -> PerTryTimeout<S> {
        PerTryTimeout(inner)
    }
}

/// Abandons a call at its deadline with [`AttemptError::Timeout`].
#[derive(Clone)]
pub(crate) struct PerTryTimeout<S>(S);

impl<'b, S: Service<Call<'b>, Response = Verdict, Error = Infallible>> Service<Call<'b>>
    for PerTryTimeout<S>
{
    type Response = Verdict;
    type Error = Infallible;
    type Future = Timed<'b, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, call: Call<'b>) -> Self::Future {
        let (deadline, streamed) = (call.deadline, call.streamed);
        let inner = self.0.call(call);
        match deadline {
            Some(at) => Timed::Bounded {
                call: tokio::time::timeout_at(at, inner),
                streamed,
            },
            None => Timed::Unbounded {
                call: inner,
                streamed,
            },
        }
    }
}

pin_project! {
    /// A call under its deadline.
    #[project = TimedProj]
    pub(crate) enum Timed<'b, F> {
        Bounded { #[pin] call: Timeout<F>, streamed: Option<&'b Progress> },
        Unbounded { #[pin] call: F, streamed: Option<&'b Progress> },
    }
}

impl<F: Future<Output = Result<Verdict, Infallible>>> Future for Timed<'_, F> {
    type Output = Result<Verdict, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (verdict, streamed) = match self.project() {
            TimedProj::Bounded { call, streamed } => match std::task::ready!(call.poll(cx)) {
                Ok(Ok(v)) => (v, *streamed),
                Ok(Err(never)) => match never {},
                Err(_elapsed) => (Verdict::judged(Err(AttemptError::Timeout)), *streamed),
            },
            TimedProj::Unbounded { call, streamed } => match std::task::ready!(call.poll(cx)) {
                Ok(v) => (v, *streamed),
                Err(never) => match never {},
            },
        };
        Poll::Ready(Ok(blamed(verdict, streamed)))
    }
}

/// A failed call while a streamed body was on its way: the client's
/// failure (it broke the body, or had not finished it when the time ran
/// out) is answered as the client's and judged by nobody; cut while the
/// body was still arriving, it proves nothing about either side (an
/// upstream may well hang up on a slow upload) and is judged by nobody
/// either.
fn blamed(verdict: Verdict, streamed: Option<&Progress>) -> Verdict {
    let (Err(e), Some(progress)) = (&verdict.result, streamed) else {
        return verdict;
    };
    if !verdict.judged {
        return verdict;
    }
    match progress.blame(*e == AttemptError::Timeout) {
        Blame::Client(fault) => Verdict::unjudged(Err(AttemptError::Client(fault))),
        Blame::Nobody => Verdict::unjudged(verdict.result),
        Blame::Upstream => verdict,
    }
}

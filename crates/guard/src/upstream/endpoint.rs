//! The bottom of the stack: the call itself, to the endpoint the balancer
//! picked, over the cluster's pooled keep-alive connections
//! (`crate::endpoint::Upstream`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::ResponseFuture;
use pin_project_lite::pin_project;
use tower::Service;

use super::{Call, Verdict};
use crate::endpoint::{AttemptError, Upstream};

/// Sends a call to its endpoint.
#[derive(Clone, Copy)]
pub(crate) struct Endpoint<'a>(pub(crate) &'a Upstream);

impl<'b> Service<Call<'b>> for Endpoint<'_> {
    type Response = Verdict;
    type Error = Infallible;
    type Future = Sending;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call<'b>) -> Sending {
        // The balancer always picks before calling down.
        let Some(authority) = call.endpoint else {
            return Sending::Failed {
                error: Some(AttemptError::NoEndpoint),
            };
        };
        match self.0.send_to(authority, call.request) {
            Ok(response) => Sending::Sent { response },
            Err(e) => Sending::Failed { error: Some(e) },
        }
    }
}

pin_project! {
    /// A call on the wire.
    #[project = SendingProj]
    pub(crate) enum Sending {
        Sent { #[pin] response: ResponseFuture },
        Failed { error: Option<AttemptError> },
    }
}

impl Future for Sending {
    type Output = Result<Verdict, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = match self.project() {
            SendingProj::Sent { response } => std::task::ready!(response.poll(cx)).map_err(|e| {
                if e.is_connect() {
                    AttemptError::Connect
                } else {
                    AttemptError::Reset
                }
            }),
            SendingProj::Failed { error } => Err(error.take().unwrap_or(AttemptError::Connect)),
        };
        Poll::Ready(Ok(Verdict::judged(result)))
    }
}

//! [`SingleFlightFuture`], what a caller awaits: a cached answer copied
//! out, a request sent alone, or its share of a flight (and, if that
//! answer is too large to share, its own request sent alone).

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower::Service;
use tower::util::Oneshot;

use super::flight::Buffered;
use super::member::{Member, Turn};
use crate::{BoxError, PrefixedBody};

pin_project! {
    /// The future [`SingleFlight`] answers with: the caller's share of a
    /// flight, a cached answer, or a request sent alone.
    ///
    /// A named type rather than a boxed one: a request that starts a
    /// flight costs two allocations (the flight and its upstream call),
    /// and one that joins a flight none.
    ///
    /// [`SingleFlight`]: super::SingleFlight
    pub struct SingleFlightFuture<S, ReqB, B, Key>
    where
        S: Service<http::Request<ReqB>, Response = http::Response<B>>,
        Key: Hash,
        Key: Eq,
        Key: Send,
        Key: Sync,
        Key: 'static,
        B: Send,
        B: 'static,
    {
        #[pin]
        state: State<S, ReqB, B, Key>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqB, B, Key>
    where
        S: Service<http::Request<ReqB>, Response = http::Response<B>>,
        Key: Hash,
        Key: Eq,
        Key: Send,
        Key: Sync,
        Key: 'static,
        B: Send,
        B: 'static,
    {
        // A cache hit, copied out when polled.
        Cached { response: Arc<Buffered> },
        // Boxed, as `own` is: rare paths, which would otherwise make every
        // caller's future as large as a whole request and its call.
        Alone { call: Pin<Box<Oneshot<S, http::Request<ReqB>>>> },
        // `own`, for a caller that joined, is its own service and request,
        // sent alone if the shared answer is too large.
        Member { member: Member<Key, B>, own: Option<Box<(S, http::Request<ReqB>)>> },
        Done,
    }
}

impl<S, ReqB, B, Key> SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    pub(super) fn cached(response: Arc<Buffered>) -> Self {
        SingleFlightFuture {
            state: State::Cached { response },
        }
    }

    pub(super) fn alone(service: S, request: http::Request<ReqB>) -> Self {
        SingleFlightFuture {
            state: State::Alone {
                call: Box::pin(Oneshot::new(service, request)),
            },
        }
    }

    pub(super) fn member(
        member: Member<Key, B>,
        own: Option<Box<(S, http::Request<ReqB>)>>,
    ) -> Self {
        SingleFlightFuture {
            state: State::Member { member, own },
        }
    }
}

impl<S, ReqB, B, Key> fmt::Debug for SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlightFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, B, Key> Future for SingleFlightFuture<S, ReqB, B, Key>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    Key: Hash + Eq + Send + Sync + 'static,
    B: Send + 'static,
{
    type Output = Result<http::Response<PrefixedBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let output = match state.as_mut().project() {
                StateProj::Cached { response } => Ok(response.response()),
                StateProj::Alone { call } => std::task::ready!(call.as_mut().poll(cx))
                    .map(|r| r.map(PrefixedBody::streaming))
                    .map_err(Into::into),
                StateProj::Member { member, own } => match std::task::ready!(member.poll(cx)) {
                    Turn::Answer(output) => output,
                    Turn::SendOwn => match own.take() {
                        Some(own) => {
                            let (service, request) = *own;
                            state.set(State::Alone {
                                call: Box::pin(Oneshot::new(service, request)),
                            });
                            continue;
                        }
                        None => Err("single-flight: no request of its own to send".into()),
                    },
                },
                StateProj::Done => panic!("single-flight future polled after it completed"),
            };
            state.set(State::Done);
            return Poll::Ready(output);
        }
    }
}

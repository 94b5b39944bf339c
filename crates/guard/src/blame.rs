//! Blame: whether a request failed because of its client or its upstream.
//!
//! Only upstream failures may feed outlier ejection, the breaker, the
//! retry budget and the limiters: if a client's own broken upload counted,
//! five clients hanging up mid-body would eject every endpoint and open the
//! breaker for everyone. So the request body the guard streams upstream is
//! wrapped in a [`ClientBody`], which records in a shared [`Progress`] how
//! the client's side ended and whether the guard is waiting on the client
//! for more; [`Progress::blame`] reads it when an attempt fails.
//!
//! A timeout is the client's only while the guard waits on the client for
//! body (Envoy's route timeout likewise "spans between the point at which
//! the entire downstream request has been processed" and the response:
//! `config.route.v3.RouteAction.timeout`, Envoy v1.31,
//! <https://www.envoyproxy.io/docs/envoy/v1.31.0/api-v3/config/route/v3/route_components.proto>).

use std::error::Error;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::LengthLimitError;

use crate::body::BoxError;

/// How a client failed its own request. Each has its own status and
/// metric reason; none feeds an upstream's health or a policy's signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientFault {
    /// The body ended before its declared end: the client closed or reset
    /// the connection or stream mid-upload (nginx's 499, "client closed
    /// request", in the access log).
    Incomplete,
    /// The body's framing was invalid (a bad chunk size line, say): 400.
    Malformed,
    /// The body grew past the listener's `max_body_bytes`: 413.
    TooLarge,
    /// The body was not received within the request's time: 408.
    Slow,
    /// The request target is malformed or has no single reading
    /// ([`crate::target::Refused`]): 400.
    BadTarget,
    /// The client went away before its answer (an HTTP/2 stream reset, a
    /// connection closed under the request): logged 499, nothing sent.
    Gone,
}

impl ClientFault {
    /// Every fault, in metric order.
    pub(crate) const ALL: [ClientFault; 6] = [
        ClientFault::Incomplete,
        ClientFault::Malformed,
        ClientFault::TooLarge,
        ClientFault::Slow,
        ClientFault::BadTarget,
        ClientFault::Gone,
    ];

    /// The status logged and counted. 499 is not sent as such (see
    /// [`ClientFault::wire_status`]).
    pub(crate) fn status(self) -> u16 {
        match self {
            ClientFault::Incomplete | ClientFault::Gone => 499,
            ClientFault::Malformed | ClientFault::BadTarget => 400,
            ClientFault::TooLarge => 413,
            ClientFault::Slow => 408,
        }
    }

    /// The status put on the wire: a client that went away reads nothing,
    /// and one that only half-closed gets a standard 400.
    pub(crate) fn wire_status(self) -> u16 {
        match self {
            ClientFault::Incomplete | ClientFault::Gone => 400,
            other => other.status(),
        }
    }

    /// The `reason` label of `stormbreak_guard_client_errors_total`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ClientFault::Incomplete => "body_incomplete",
            ClientFault::Malformed => "body_malformed",
            ClientFault::TooLarge => "body_too_large",
            ClientFault::Slow => "body_timeout",
            ClientFault::BadTarget => "bad_target",
            ClientFault::Gone => "client_closed",
        }
    }

    /// The one-line answer.
    pub(crate) fn message(self) -> &'static str {
        match self {
            ClientFault::Incomplete => "request body ended early",
            ClientFault::Malformed => "request body is malformed",
            ClientFault::TooLarge => "request body too large",
            ClientFault::Slow => "request body not received in time",
            ClientFault::BadTarget => "bad request target",
            ClientFault::Gone => "client closed request",
        }
    }

    /// What a request body's error says about its client: past the size
    /// limit, malformed framing (hyper's `InvalidData`/`InvalidInput`),
    /// or else the client went away (EOF, reset, a cancelled h2 stream).
    pub(crate) fn of(error: &(dyn Error + 'static)) -> ClientFault {
        let mut cause: Option<&(dyn Error + 'static)> = Some(error);
        while let Some(e) = cause {
            if e.is::<LengthLimitError>() {
                return ClientFault::TooLarge;
            }
            if let Some(io) = e.downcast_ref::<io::Error>() {
                match io.kind() {
                    io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput => {
                        return ClientFault::Malformed;
                    }
                    io::ErrorKind::TimedOut => return ClientFault::Slow,
                    _ => {}
                }
                // An `io::Error`'s `source()` skips the error it wraps.
                if let Some(inner) = io.get_ref() {
                    cause = Some(inner);
                    continue;
                }
            }
            cause = e.source();
        }
        ClientFault::Incomplete
    }

    fn code(self) -> u8 {
        self as u8 + FAULT_BASE
    }
}

/// `Progress::state`: being read (also the default).
const READING: u8 = 0;
const COMPLETE: u8 = 1;
const FAULT_BASE: u8 = 2;

/// How far a streamed request body got: still being read, read whole, or
/// failed by the client. Shared between the body upstream and the request
/// path, which reads it once an attempt has ended.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    state: AtomicU8,
    /// The body was last asked for more and the client had none yet: the
    /// guard is waiting on the client.
    starved: AtomicBool,
}

impl Progress {
    /// A body not yet read whole.
    pub(crate) fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    fn set(&self, state: u8) {
        // The first end wins: a fault after completion cannot happen, and
        // completion after a fault must not hide it.
        let _ = self
            .state
            .compare_exchange(READING, state, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The client's fault, if its body failed.
    pub(crate) fn fault(&self) -> Option<ClientFault> {
        ClientFault::ALL
            .into_iter()
            .find(|f| f.code() == self.state.load(Ordering::Acquire))
    }

    /// The body has been read to its end.
    pub(crate) fn complete(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMPLETE
    }

    /// Whom an attempt that ended in a transport error or a timeout
    /// blames: the client when its body failed, or when the time ran out
    /// while the guard was waiting on the client for more body (the
    /// upstream could not have answered sooner); nobody when the
    /// connection broke while the body was still arriving (an upstream
    /// may hang up on a slow upload, or answer early and close); else the
    /// upstream, which had the whole body or was not reading it.
    pub(crate) fn blame(&self, timed_out: bool) -> Blame {
        if let Some(f) = self.fault() {
            return Blame::Client(f);
        }
        if self.complete() {
            return Blame::Upstream;
        }
        match (timed_out, self.starved.load(Ordering::Acquire)) {
            (true, true) => Blame::Client(ClientFault::Slow),
            (true, false) => Blame::Upstream,
            (false, _) => Blame::Nobody,
        }
    }
}

/// Whose failure an attempt's error was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blame {
    /// The client's: answered with its own status, fed to no policy.
    Client(ClientFault),
    /// Neither side's for sure: answered 502, fed to no policy.
    Nobody,
    /// The upstream's: fed to ejection, the breaker and the limiters.
    Upstream,
}

/// A client's request body on its way upstream, recording its end in a
/// [`Progress`].
pub(crate) struct ClientBody<B> {
    inner: B,
    progress: Arc<Progress>,
}

impl<B> ClientBody<B> {
    /// Wraps `inner`, recording into `progress`.
    pub(crate) fn new(inner: B, progress: Arc<Progress>) -> Self {
        ClientBody { inner, progress }
    }
}

impl<B> http_body::Body for ClientBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        self.progress
            .starved
            .store(polled.is_pending(), Ordering::Release);
        match polled {
            Poll::Ready(None) => {
                self.progress.set(COMPLETE);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                let e: BoxError = e.into();
                self.progress.set(ClientFault::of(&*e).code());
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if self.inner.is_end_stream() {
                    self.progress.set(COMPLETE);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Limited};

    fn io_error(kind: io::ErrorKind) -> BoxError {
        Box::new(io::Error::new(kind, "x"))
    }

    #[test]
    fn errors_are_classified_by_what_the_client_did() {
        assert_eq!(
            ClientFault::of(&*io_error(io::ErrorKind::InvalidData)),
            ClientFault::Malformed
        );
        assert_eq!(
            ClientFault::of(&*io_error(io::ErrorKind::InvalidInput)),
            ClientFault::Malformed
        );
        assert_eq!(
            ClientFault::of(&*io_error(io::ErrorKind::UnexpectedEof)),
            ClientFault::Incomplete
        );
        assert_eq!(
            ClientFault::of(&*io_error(io::ErrorKind::ConnectionReset)),
            ClientFault::Incomplete
        );
        assert_eq!(
            ClientFault::of(&*io_error(io::ErrorKind::TimedOut)),
            ClientFault::Slow
        );
        // Wrapped: the cause chain is walked.
        let wrapped: BoxError = Box::new(io::Error::other(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad chunk",
        )));
        assert_eq!(ClientFault::of(&*wrapped), ClientFault::Malformed);
    }

    /// A body yielding `items` in turn, as a client's upload would.
    struct Chunks(std::collections::VecDeque<Result<&'static [u8], io::ErrorKind>>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.0.pop_front().map(|r| {
                r.map(|b| Frame::data(Bytes::from_static(b)))
                    .map_err(io_error)
            }))
        }
    }

    fn chunks(items: Vec<Result<&'static [u8], io::ErrorKind>>) -> Chunks {
        Chunks(items.into())
    }

    #[tokio::test]
    async fn a_body_read_whole_is_complete_and_blames_nobody() {
        let p = Progress::new();
        let body = ClientBody::new(chunks(vec![Ok(b"ab"), Ok(b"cd")]), p.clone());
        assert!(!p.complete());
        // Never asked for yet: a timeout is the upstream's (or the queue's),
        // a broken connection nobody's.
        assert_eq!(p.blame(true), Blame::Upstream);
        assert_eq!(p.blame(false), Blame::Nobody);
        // Asked for, and the client has nothing: a timeout is the client's.
        p.starved.store(true, Ordering::Release);
        assert_eq!(p.blame(true), Blame::Client(ClientFault::Slow));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"abcd");
        assert!(p.complete());
        assert_eq!(p.blame(false), Blame::Upstream);
        assert_eq!(p.blame(true), Blame::Upstream);
    }

    #[tokio::test]
    async fn a_body_the_client_broke_keeps_its_fault() {
        let p = Progress::new();
        let body = ClientBody::new(
            chunks(vec![Ok(b"ab"), Err(io::ErrorKind::InvalidData)]),
            p.clone(),
        );
        assert!(body.collect().await.is_err());
        assert_eq!(p.fault(), Some(ClientFault::Malformed));
        assert_eq!(p.blame(true), Blame::Client(ClientFault::Malformed));
        assert_eq!(p.blame(false), Blame::Client(ClientFault::Malformed));
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_too_large() {
        let p = Progress::new();
        let limited = Limited::new(chunks(vec![Ok(b"abcdef"), Ok(b"gh")]), 4);
        let body = ClientBody::new(limited, p.clone());
        assert!(body.collect().await.is_err());
        assert_eq!(p.fault(), Some(ClientFault::TooLarge));
    }
}

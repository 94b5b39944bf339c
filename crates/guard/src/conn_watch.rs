//! What a connection is doing, and when that ends it: a connection that
//! has not completed a request head within the header-read timeout, or
//! that has had nothing in flight for the idle timeout, is closed —
//! whatever bytes (HTTP/2 PINGs, SETTINGS, a preface read byte by byte)
//! it keeps sending.
//!
//! hyper's own header-read timer does not cover the first case: with
//! hyper-util's `auto` builder it does not run while the builder is still
//! reading the protocol preface, and HTTP/2 has none. Byte-level idleness
//! (`listener::IdleIo`) does not cover the second: an HTTP/2 client kept a
//! connection forever by pinging it. One timer per connection covers both.
//!
//! A request is in flight from its head until its response body has been
//! sent (or dropped): a long download or an event stream keeps its
//! connection, for as long as its body moves. A response body that
//! nobody reads for the idle timeout (an HTTP/2 client that never opens
//! its flow-control window, say) no longer counts.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::body::{Body, BoxError};

/// Requests in flight on one connection, and when the last one moved.
#[derive(Debug)]
pub(crate) struct Activity {
    /// When the connection was accepted.
    opened: Instant,
    /// Requests whose head has arrived and whose answer is not yet made.
    pending: AtomicUsize,
    /// Those, and answers whose body is still being sent.
    open: AtomicUsize,
    /// A request head has arrived.
    served: AtomicBool,
    /// Nanoseconds after `opened` at which something last moved: a
    /// request began or ended, or a response body gave a frame.
    moved: AtomicU64,
    /// Told once, when the first request head arrives: the watch moves
    /// from the header-read deadline to the idle one.
    first_request: Notify,
}

/// Why a connection's watch ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// No request head within the header-read timeout: close at once,
    /// nothing is in flight.
    NoRequest,
    /// Nothing in flight, or nothing moving, for the idle timeout: shut
    /// down gracefully (and close for good after the request timeout).
    Idle,
}

impl Activity {
    /// A connection accepted now.
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            pending: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            moved: AtomicU64::new(0),
            first_request: Notify::new(),
        })
    }

    /// A request head arrived; the request counts until the returned guard
    /// (or the response body it becomes, [`InFlight::answered`]) drops.
    #[must_use = "the request is in flight while the guard lives"]
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.open.fetch_add(1, Ordering::AcqRel);
        self.touch();
        if !self.served.swap(true, Ordering::AcqRel) {
            self.first_request.notify_one();
        }
        InFlight {
            activity: self.clone(),
            pending: true,
        }
    }

    /// Requests whose answer is not made yet: the byte-level idle timer
    /// leaves a connection with one alone (the request timeout bounds it).
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Something moved now.
    fn touch(&self) {
        let since = Instant::now().saturating_duration_since(self.opened);
        self.moved.store(
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Release,
        );
    }

    /// When the watch should look again, or why the connection ends now.
    fn check(&self, now: Instant, first: Duration, idle: Duration) -> Result<Instant, Ended> {
        if !self.served.load(Ordering::Acquire) {
            let due = self.opened + first;
            return if now >= due {
                Err(Ended::NoRequest)
            } else {
                Ok(due)
            };
        }
        if self.pending() > 0 {
            // A request waiting for its answer is bounded by the request
            // timeout; look again an idle period later.
            return Ok(now + idle);
        }
        // Nothing in flight, or only answers whose bodies have not moved.
        let moved = self.opened + Duration::from_nanos(self.moved.load(Ordering::Acquire));
        let due = moved + idle;
        if now >= due {
            Err(Ended::Idle)
        } else {
            Ok(due)
        }
    }

    /// Resolves when the connection should end: no request head within
    /// `first` of opening, or nothing in flight (or moving) for `idle`.
    /// One timer, re-armed only when it fires early.
    pub(crate) async fn watch(&self, first: Duration, idle: Duration) -> Ended {
        let mut at = self.opened + first;
        loop {
            if self.served.load(Ordering::Acquire) {
                tokio::time::sleep_until(at).await;
            } else {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = self.first_request.notified() => {}
                }
            }
            match self.check(Instant::now(), first, idle) {
                Ok(next) => at = next,
                Err(ended) => return ended,
            }
        }
    }
}

/// One request in flight on its connection, until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    activity: Arc<Activity>,
    /// Its answer is not made yet.
    pending: bool,
}

impl InFlight {
    /// The answer is made: the request stays in flight while `body` is
    /// being sent, and until it is dropped.
    pub(crate) fn answered(mut self, body: Body) -> Answer {
        self.pending = false;
        self.activity.pending.fetch_sub(1, Ordering::AcqRel);
        self.activity.touch();
        Answer {
            body,
            _inflight: self,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.activity;
        // The time is written before the counts fall, so a watch that sees
        // nothing in flight also sees when the last request ended.
        a.touch();
        if self.pending {
            a.pending.fetch_sub(1, Ordering::AcqRel);
        }
        a.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in flight until it is sent or
/// dropped, and marks its connection as moving with every frame.
pub(crate) struct Answer {
    body: Body,
    _inflight: InFlight,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            self._inflight.activity.touch();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);

    /// Runs the watch to its end; when (virtual time) and why.
    async fn ends(a: &Activity) -> (Duration, Ended) {
        let start = Instant::now();
        let why = a.watch(FIRST, IDLE).await;
        (start.elapsed(), why)
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_request_ends_at_the_header_read_timeout() {
        let a = Activity::new();
        assert_eq!(ends(&a).await, (FIRST, Ended::NoRequest));
    }

    #[tokio::test(start_paused = true)]
    async fn after_its_last_request_a_connection_ends_one_idle_period_later() {
        let a = Activity::new();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { ends(&a).await })
        };
        // A request from 1 s to 5 s; a second from 30 s to 31 s.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let r = a.begin();
        tokio::time::sleep(Duration::from_secs(4)).await;
        drop(r);
        tokio::time::sleep(Duration::from_secs(25)).await;
        let r = a.begin();
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(r);
        let (at, why) = watch.await.unwrap();
        assert_eq!(why, Ended::Idle);
        assert_eq!(at, Duration::from_secs(31) + IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_timeout_shorter_than_the_header_read_timeout_counts_from_the_request() {
        let a = Activity::new();
        let short = Duration::from_secs(1);
        let watch = {
            let a = a.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                (a.watch(FIRST, short).await, start.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(a.begin());
        assert_eq!(
            watch.await.unwrap(),
            (Ended::Idle, Duration::from_secs(3)),
            "1 s after the request, not at the 10 s header-read deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_its_answer_holds_the_connection_whatever_the_idle_timeout() {
        let a = Activity::new();
        let r = a.begin();
        let held = tokio::time::timeout(5 * IDLE, a.watch(FIRST, IDLE)).await;
        assert!(held.is_err(), "ended with a request in flight");
        drop(r);
        let start = Instant::now();
        assert_eq!(a.watch(FIRST, IDLE).await, Ended::Idle);
        assert_eq!(start.elapsed(), IDLE);
    }

    /// A body that gives one frame each time it is asked.
    struct Endless;

    impl http_body::Body for Endless {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_holds_its_connection_while_its_body_moves_and_no_longer() {
        use http_body_util::BodyExt;
        let a = Activity::new();
        let mut answer = a.begin().answered(crate::body::Body::boxed(Endless));
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { ends(&a).await })
        };
        // A frame every 30 s for 5 minutes: still in flight.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(30)).await;
            assert!(answer.frame().await.is_some());
        }
        assert!(!watch.is_finished(), "ended while the body moved");
        // Then nobody reads it: idle one period after its last frame.
        let (at, why) = watch.await.unwrap();
        assert_eq!(why, Ended::Idle);
        assert_eq!(at, Duration::from_secs(300) + IDLE);
        drop(answer);
    }
}

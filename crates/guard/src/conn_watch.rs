//! What a connection is doing, and when that ends it: a connection that
//! has not completed a request head within the header-read timeout, or
//! that has had no request in flight for the idle timeout, is closed —
//! whatever bytes (HTTP/2 PINGs, SETTINGS, a preface read byte by byte)
//! it keeps sending.
//!
//! hyper's own header-read timer does not cover the first case: with
//! hyper-util's `auto` builder it does not run while the builder is still
//! reading the protocol preface, and HTTP/2 has none. Byte-level idleness
//! (`listener::IdleIo`) does not cover the second: an HTTP/2 client kept a
//! connection forever by pinging it. One timer per connection covers both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Requests in flight on one connection, and when the last one ended.
#[derive(Debug)]
pub(crate) struct Activity {
    /// When the connection was accepted.
    opened: Instant,
    /// Requests whose head has arrived and whose answer is not yet made.
    inflight: AtomicUsize,
    /// A request head has arrived.
    served: AtomicBool,
    /// Nanoseconds after `opened` at which `inflight` last fell to 0.
    idle_since: AtomicU64,
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
    /// No request in flight for the idle timeout: shut down gracefully.
    Idle,
}

impl Activity {
    /// A connection accepted now.
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            inflight: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            first_request: Notify::new(),
        })
    }

    /// A request head arrived; the request counts until the guard drops.
    #[must_use = "the request is in flight while the guard lives"]
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.inflight.fetch_add(1, Ordering::AcqRel);
        if !self.served.swap(true, Ordering::AcqRel) {
            self.first_request.notify_one();
        }
        InFlight(self.clone())
    }

    /// Requests in flight now.
    pub(crate) fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Acquire)
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
        if self.inflight() > 0 {
            // A request in flight is bounded by the request timeout; look
            // again an idle period later.
            return Ok(now + idle);
        }
        let since = self.opened + Duration::from_nanos(self.idle_since.load(Ordering::Acquire));
        let due = since + idle;
        if now >= due {
            Err(Ended::Idle)
        } else {
            Ok(due)
        }
    }

    /// Resolves when the connection should end: no request head within
    /// `first` of opening, or no request in flight for `idle`. One timer,
    /// re-armed only when it fires early.
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
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        // The time is written before the count falls, so a watch that sees
        // no request in flight also sees when the last one ended.
        let since = Instant::now().saturating_duration_since(a.opened);
        a.idle_since.store(
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Release,
        );
        a.inflight.fetch_sub(1, Ordering::AcqRel);
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
    async fn a_long_request_holds_the_connection_whatever_the_idle_timeout() {
        let a = Activity::new();
        let r = a.begin();
        let held = tokio::time::timeout(5 * IDLE, a.watch(FIRST, IDLE)).await;
        assert!(held.is_err(), "ended with a request in flight");
        drop(r);
        let start = Instant::now();
        assert_eq!(a.watch(FIRST, IDLE).await, Ended::Idle);
        assert_eq!(start.elapsed(), IDLE);
    }
}

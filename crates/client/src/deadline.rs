//! A deadline on a future whose timer is only made if the future has to
//! wait: the usual answer is already there on the first poll, and then
//! no timer entry is built, registered or cancelled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

pin_project! {
    /// `future`, or `None` once `deadline` has passed without an answer.
    ///
    /// It behaves as `tokio::time::timeout_at`: the future is polled
    /// first, so an answer ready at the deadline still wins, and the timer
    /// is the same absolute `deadline` (made at the first poll that finds
    /// the future pending, which is when tokio's own `Timeout` registers
    /// its timer), so the paused clock of tests advances to it the same
    /// way.
    pub(crate) struct Deadline<F> {
        #[pin]
        future: F,
        deadline: Instant,
        #[pin]
        timer: Option<Sleep>,
    }
}

/// `future` bounded by `deadline`.
pub(crate) fn deadline<F: Future>(deadline: Instant, future: F) -> Deadline<F> {
    Deadline {
        future,
        deadline,
        timer: None,
    }
}

impl<F: Future> Future for Deadline<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Some(output));
        }
        if this.timer.is_none() {
            this.timer
                .set(Some(tokio::time::sleep_until(*this.deadline)));
        }
        match this.timer.as_pin_mut().map(|t| t.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

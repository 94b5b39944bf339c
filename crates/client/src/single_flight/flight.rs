//! One flight: its upstream call, boxed so that any of its callers can
//! poll it, their wakers, and what it leaves them when it lands (a
//! `Buffered` response, a [`SharedError`], or a body too large to share).
//!
//! Invariant (kept by `member.rs`): one caller at a time polls the call,
//! having taken it out of the state under the lock; once anyone has
//! joined, the call is polled with the flight as its waker, which wakes
//! every seat.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

use bytes::Bytes;
use http::HeaderMap;

use super::lock;
use super::service::FlightConfig;
use super::table::Prehashed;
use crate::{BoxError, PrefixedBody};

/// An error shared by every waiter of a flight: the upstream error behind
/// an `Arc`. [`source`](std::error::Error::source) is the upstream error,
/// so classifiers that walk the chain see through it.
#[derive(Clone)]
pub struct SharedError(pub(super) Arc<BoxError>);

impl SharedError {
    /// The upstream error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref().as_ref()
    }
}

impl fmt::Debug for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref().as_ref())
    }
}

/// A response read into memory, copied out to each waiter.
pub(super) struct Buffered {
    /// As it came: the caller with the only copy gets it back whole.
    pub(super) head: http::response::Parts,
    pub(super) body: Bytes,
    pub(super) trailers: Option<Box<HeaderMap>>,
}

impl Buffered {
    pub(super) fn into_response<B>(self) -> http::Response<PrefixedBody<B>> {
        let body = PrefixedBody::full_boxed(self.body, self.trailers);
        http::Response::from_parts(self.head, body)
    }

    pub(super) fn response<B>(&self) -> http::Response<PrefixedBody<B>> {
        let body = PrefixedBody::full_boxed(self.body.clone(), self.trailers.clone());
        let mut r = http::Response::new(body);
        *r.status_mut() = self.head.status;
        *r.version_mut() = self.head.version;
        *r.headers_mut() = self.head.headers.clone();
        *r.extensions_mut() = self.head.extensions.clone();
        r
    }
}

/// What a flight's upstream call produced.
pub(super) enum Landed<B> {
    /// Read into memory.
    Buffered(Buffered),
    /// Over the cap: the streaming response, for the caller that started
    /// the flight; the callers that joined send their own requests. Boxed:
    /// it is rare, and the usual answer is moved a few times.
    TooLarge(Box<http::Response<PrefixedBody<B>>>),
}

pub(super) type FlightOutput<B> = Result<Landed<B>, SharedError>;

/// The upstream call of one flight, boxed inside the flight so that any of
/// its callers can poll it.
pub(super) type Call<B> = Pin<Box<dyn Future<Output = FlightOutput<B>> + Send>>;

/// One upstream call and the callers sharing it: the caller that started
/// it and those that joined. Any of them polls the call (as with
/// `futures_util`'s `Shared`), so the flight goes on while any caller is
/// left, whichever it is, and lands as soon as any caller is polled after
/// the answer came in.
///
/// While the caller that started the flight is alone, the call is polled
/// with that caller's own waker and the flight holds no waker list; once
/// someone has joined, the call is polled with the flight itself as the
/// waker, which wakes every caller.
pub(super) struct Flight<Key, B> {
    pub(super) config: Arc<FlightConfig>,
    /// The flight's key, to find its slot when it lands or is cancelled.
    pub(super) key: Prehashed<Key>,
    pub(super) state: Mutex<FlightState<B>>,
}

pub(super) struct FlightState<B> {
    /// The call; `None` while a caller is polling it, and once it has
    /// landed or been cancelled.
    pub(super) call: Option<Call<B>>,
    pub(super) answer: Option<Answer<B>>,
    /// The waker of the caller that started the flight (seat 0), once it
    /// has had to wait.
    pub(super) lead: Option<Waker>,
    /// Seats 1 and up: one per caller that joined, in joining order. It
    /// grows by one waker per caller that joins and goes with the flight
    /// (a caller's own future holds everything else).
    pub(super) seats: Vec<Seat>,
    /// Callers that have not had their answer and have not been dropped.
    pub(super) members: usize,
}

/// What a landed flight left for its other callers.
pub(super) enum Answer<B> {
    Buffered(Arc<Buffered>),
    Failed(SharedError),
    /// Too large to share: the streaming response waits here for the
    /// caller that started the flight (if it is still there).
    TooLarge(Option<Box<http::Response<PrefixedBody<B>>>>),
}

pub(super) enum Seat {
    Waiting(Option<Waker>),
    Left,
}

impl<B> FlightState<B> {
    pub(super) fn leave(&mut self, seat: usize) {
        self.members -= 1;
        match seat.checked_sub(1) {
            None => self.lead = None,
            Some(i) => self.seats[i] = Seat::Left,
        }
    }

    /// Keeps `seat`'s waker one that wakes `cx`'s task.
    pub(super) fn register(&mut self, seat: usize, cx: &Context<'_>) {
        let waker = match seat.checked_sub(1) {
            None => &mut self.lead,
            Some(i) => match &mut self.seats[i] {
                Seat::Waiting(waker) => waker,
                Seat::Left => return,
            },
        };
        if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *waker = Some(cx.waker().clone());
        }
    }

    pub(super) fn wake_all(&mut self) {
        if let Some(waker) = self.lead.take() {
            waker.wake();
        }
        for seat in &mut self.seats {
            if let Seat::Waiting(waker) = seat
                && let Some(waker) = waker.take()
            {
                waker.wake();
            }
        }
    }
}

impl<Key: Send + Sync + 'static, B: Send + 'static> std::task::Wake for Flight<Key, B> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.state).wake_all();
    }
}

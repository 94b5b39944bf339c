//! One caller's share of a flight (`Member`): polling the shared call,
//! landing it (its slot taken out of the table or turned into a cache
//! entry, the answer left for the others), taking its copy of the answer,
//! leaving.
//!
//! Invariant: every member leaves its flight once, on taking its answer or
//! when dropped; the last to leave a flight that has not landed removes its
//! slot and drops (cancels) the call.
//! Invariant: a call that panics while polled fails the flight for the
//! other callers (`Unwinding`) rather than leaving them waiting.

use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use super::flight::{Answer, Flight, FlightOutput, FlightState, Landed, SharedError};
use super::lock;
use super::stats::bump;
use super::table::{Slot, table_of};
use crate::{BoxError, PrefixedBody};

/// One caller's share of a flight. Dropped before its answer, it leaves
/// the others waiting; the last caller to go drops (cancels) the
/// upstream call and frees the key.
pub(super) struct Member<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> {
    flight: Arc<Flight<Key, B>>,
    /// 0 for the caller that started the flight.
    seat: usize,
    /// The caller has its answer: nothing is left to do on drop.
    answered: bool,
    /// The flight as a waker, made the first time this caller polls the
    /// call with others waiting.
    notifier: Option<Waker>,
}

/// Set while a caller polls the flight's call, which it has taken out of
/// the flight: if the poll panics, the flight ends with an error, so the
/// other callers do not wait for a call that is gone.
struct Unwinding<'a, Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static>(
    Option<&'a Flight<Key, B>>,
);

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Drop for Unwinding<'_, Key, B> {
    fn drop(&mut self) {
        let Some(flight) = self.0 else {
            return;
        };
        let table = table_of::<Key, B>(&flight.config).expect("typed when the flight began");
        let mut t = lock(table);
        if t.slots
            .get(&flight.key)
            .is_some_and(|s| matches!(s, Slot::InFlight(f) if std::ptr::eq(&**f, flight)))
        {
            t.slots.remove(&flight.key);
        }
        let mut f = lock(&flight.state);
        let error: BoxError = "single-flight: the upstream call panicked".into();
        f.answer = Some(Answer::Failed(SharedError(Arc::new(error))));
        f.wake_all();
    }
}

/// What a caller got from its flight.
pub(super) enum Turn<B> {
    Answer(Result<http::Response<PrefixedBody<B>>, BoxError>),
    /// The answer was too large to share: send one's own request.
    SendOwn,
}

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Member<Key, B> {
    pub(super) fn new(flight: Arc<Flight<Key, B>>, seat: usize) -> Self {
        Member {
            flight,
            seat,
            answered: false,
            notifier: None,
        }
    }

    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Turn<B>> {
        loop {
            let mut f = lock(&self.flight.state);
            if f.answer.is_some() {
                self.answered = true;
                return Poll::Ready(Self::take_answer(self.seat, &mut f));
            }
            let Some(mut call) = f.call.take() else {
                // Another caller is polling the call, on another thread:
                // the flight's waker reaches this one when it has to.
                f.register(self.seat, cx);
                return Poll::Pending;
            };
            let shared = f.members > 1;
            if shared {
                f.register(self.seat, cx);
            }
            drop(f);
            let mut guard = Unwinding(Some(&self.flight));
            let polled = if shared {
                let flight = &self.flight;
                let waker = self
                    .notifier
                    .get_or_insert_with(|| Waker::from(flight.clone()));
                call.as_mut().poll(&mut Context::from_waker(waker))
            } else {
                call.as_mut().poll(cx)
            };
            guard.0 = None;
            drop(guard);
            match polled {
                Poll::Ready(output) => {
                    drop(call);
                    return Poll::Ready(self.land(output));
                }
                Poll::Pending => {
                    let mut f = lock(&self.flight.state);
                    f.call = Some(call);
                    if shared {
                        return Poll::Pending;
                    }
                    if f.members == 1 {
                        // For a caller that joins later: the flight's
                        // waker wakes this one too once the call is
                        // polled with it.
                        f.register(self.seat, cx);
                        return Poll::Pending;
                    }
                    // Someone joined while the call was polled with this
                    // caller's waker alone: poll it again with the
                    // flight's, which wakes them too.
                }
            }
        }
    }

    /// Takes the flight out of the table (or turns it into a cache entry)
    /// and leaves the answer for the other callers.
    fn land(&mut self, output: FlightOutput<B>) -> Turn<B> {
        self.answered = true;
        let Flight { config, key, .. } = &*self.flight;
        let cache_until = match (&output, config.ttl) {
            (Ok(Landed::Buffered(b)), Some(ttl)) if b.head.status.is_success() => {
                Some(Instant::now() + ttl)
            }
            _ => None,
        };
        let table = table_of::<Key, B>(config).expect("the table was typed when the flight began");
        let mut t = lock(table);
        // One look-up on the usual path: this flight's slot, taken out.
        let ours = match t.slots.remove_entry(key) {
            Some((key, slot)) if slot.is_flight(&self.flight) => Some(key),
            Some((key, other)) => {
                t.slots.insert(key, other);
                None
            }
            None => None,
        };
        if let Ok(Landed::TooLarge(_)) = &output {
            bump(&config.counters.too_large);
        }
        let mut f = lock(&self.flight.state);
        if f.members == 1 && cache_until.is_none() {
            // No one else waits and nothing is cached: the answer is this
            // caller's alone and moves out without a copy.
            f.leave(self.seat);
            drop(f);
            drop(t);
            return Turn::Answer(match output {
                Ok(Landed::Buffered(b)) => Ok(b.into_response()),
                Ok(Landed::TooLarge(response)) => Ok(*response),
                Err(e) => Err(Box::new(e)),
            });
        }
        let answer = match output {
            Ok(Landed::Buffered(b)) => {
                let b = Arc::new(b);
                if let (Some(key), Some(until)) = (ours, cache_until) {
                    let response = b.clone();
                    t.slots.insert(key, Slot::Cached { until, response });
                }
                Answer::Buffered(b)
            }
            Ok(Landed::TooLarge(response)) => Answer::TooLarge(Some(response)),
            Err(e) => Answer::Failed(e),
        };
        drop(t);
        f.answer = Some(answer);
        f.wake_all();
        Self::take_answer(self.seat, &mut f)
    }

    /// The copy of the flight's answer for the caller in `seat`.
    fn take_answer(seat: usize, f: &mut FlightState<B>) -> Turn<B> {
        let last = f.members == 1;
        f.leave(seat);
        // The last caller moves a buffered answer out, unless the cache
        // keeps it too.
        if last
            && matches!(f.answer, Some(Answer::Buffered(_)))
            && let Some(Answer::Buffered(b)) = f.answer.take()
        {
            return Turn::Answer(Ok(match Arc::try_unwrap(b) {
                Ok(b) => b.into_response(),
                Err(b) => b.response(),
            }));
        }
        match f.answer.as_mut().expect("the flight has landed") {
            Answer::Failed(e) => Turn::Answer(Err(Box::new(e.clone()))),
            Answer::TooLarge(stream) if seat == 0 => Turn::Answer(
                stream
                    .take()
                    .map(|r| *r)
                    .ok_or_else(|| "single-flight: the streaming response was taken twice".into()),
            ),
            Answer::TooLarge(_) => Turn::SendOwn,
            Answer::Buffered(b) => Turn::Answer(Ok(b.response())),
        }
    }
}

impl<Key: Hash + Eq + Send + Sync + 'static, B: Send + 'static> Drop for Member<Key, B> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        {
            let mut f = lock(&self.flight.state);
            if f.members > 1 {
                // Others still wait, and go on polling the call.
                f.leave(self.seat);
                return;
            }
        }
        // Perhaps the last caller: recheck under the table's lock, which a
        // caller joining holds.
        let Flight { config, key, .. } = &*self.flight;
        let table = table_of::<Key, B>(config).expect("the table was typed when the flight began");
        let mut t = lock(table);
        let mut f = lock(&self.flight.state);
        f.leave(self.seat);
        let last = f.members == 0 && f.answer.is_none();
        let call = if last { f.call.take() } else { None };
        drop(f);
        if last && t.slots.get(key).is_some_and(|s| s.is_flight(&self.flight)) {
            t.slots.remove(key);
        }
        drop(t);
        // The upstream call, if this was its last caller, is dropped
        // (cancelled) here, outside the locks.
        drop(call);
    }
}

//! The one timer of a first-in, first-out waiting line whose deadlines
//! never decrease along it: a caller's per-try timeout list (`deadline`)
//! and a pod's sidecar queue (`service`).
//!
//! Such a line needs one event, at its front's deadline, not one per
//! waiter: the event times out the fronts that are due and is set again for
//! the first that stays. Waiters that leave early cost nothing, so the
//! event can end up earlier than the front's deadline (harmless: it finds
//! nothing due and is set again) but never later. When it is set again
//! earlier than a scheduled one, the scheduled one becomes stale; the timer
//! remembers the time of the live event, and a stale one, firing at another
//! time, is ignored.
//!
//! Invariant: while [`LineTimer::due`] is `Some(t)`, the line's event is
//! scheduled at `t`, and `t` is no later than the deadline of the line's
//! first live waiter (checked by the audit for both lines).

use stormbreak_policy::Nanos;

/// The time of a line's live event, if one is scheduled. Each method that
/// returns a time asks its caller to schedule the line's event then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LineTimer(Option<Nanos>);

impl LineTimer {
    /// When the live event is due, if one is scheduled.
    #[inline]
    pub(crate) fn due(self) -> Option<Nanos> {
        self.0
    }

    /// A waiter due at `deadline` joined the back of the line: an event is
    /// needed only if none is scheduled, since one already set is due no
    /// later than this waiter.
    #[must_use = "schedule the line's event at the time returned"]
    #[inline]
    pub(crate) fn on_join(&mut self, deadline: Nanos) -> Option<Nanos> {
        if self.0.is_some() {
            return None;
        }
        self.0 = Some(deadline);
        self.0
    }

    /// The line's event fired at `now`: `true` if it is the live one, which
    /// is then spent; `false` for a stale one, to be ignored.
    #[must_use = "a stale event must be ignored"]
    #[inline]
    pub(crate) fn fire(&mut self, now: Nanos) -> bool {
        if self.0 != Some(now) {
            return false;
        }
        self.0 = None;
        true
    }

    /// After the due fronts left, the front that stays is due at
    /// `deadline`: an event is needed unless one no later is scheduled (a
    /// waiter that joined while the due ones left may have set one).
    #[must_use = "schedule the line's event at the time returned"]
    #[inline]
    pub(crate) fn rearm(&mut self, deadline: Nanos) -> Option<Nanos> {
        if self.0.is_some_and(|t| t <= deadline) {
            return None;
        }
        self.0 = Some(deadline);
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn at(n: u64) -> Nanos {
        Nanos::from_nanos(n)
    }

    #[test]
    fn the_first_waiter_sets_the_event_and_later_ones_do_not() {
        let mut t = LineTimer::default();
        assert_eq!(t.on_join(at(10)), Some(at(10)));
        assert_eq!(t.on_join(at(12)), None);
        assert_eq!(t.due(), Some(at(10)));
    }

    #[test]
    fn only_the_live_event_fires() {
        let mut t = LineTimer::default();
        assert!(!t.fire(at(5)), "no event is scheduled");
        assert_eq!(t.on_join(at(20)), Some(at(20)));
        // Set again earlier: the event at 20 becomes stale.
        assert_eq!(t.rearm(at(15)), Some(at(15)));
        assert!(t.fire(at(15)));
        assert!(!t.fire(at(20)), "the event at 20 was replaced");
        assert_eq!(t.due(), None);
    }

    #[test]
    fn rearming_keeps_an_event_that_is_no_later() {
        let mut t = LineTimer::default();
        assert_eq!(t.on_join(at(10)), Some(at(10)));
        assert_eq!(t.rearm(at(10)), None);
        assert_eq!(t.rearm(at(30)), None);
        assert_eq!(t.due(), Some(at(10)));
        assert!(t.fire(at(10)));
        assert_eq!(t.rearm(at(30)), Some(at(30)));
    }
}

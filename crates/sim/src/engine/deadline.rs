//! Per-try timeouts: the attempts callers wait for with a timeout of one
//! duration, oldest first, as a list threaded through the attempts.
//!
//! Every attempt on a list was given the same timeout when it was created,
//! at a clock that never goes back, so the list's front always has the
//! earliest deadline, and the list keeps one [`Ev::Timeout`](super::Ev)
//! event, a [`LineTimer`]. An attempt answered in time
//! unlinks itself in O(1) and costs no event, and a list's memory is the
//! two links in each attempt on it: no queue entry is kept for the whole
//! timeout after the attempt has gone (the 30 s lane of the incident held
//! a quarter of a million of those, nearly all cancelled, at its peak).
//! A list holds live attempts only, so the lists together are bounded by
//! `Limits::attempts_in_flight`, and one event's loop by its list's length.
//!
//! Invariants: an attempt is on list `l` exactly while `link.list == l`;
//! the list's order is its attempts' creation order, so their deadlines
//! (`started + duration`) never decrease along it; its `timer` keeps the
//! invariant of [`LineTimer`].

use stormbreak_policy::Nanos;

use super::Engine;
use super::attempt::Attempt;
use super::line_timer::LineTimer;
use crate::slab::Slab;

/// No attempt: the end of a list.
const NIL: u32 = u32::MAX;

/// One list of per-try timeouts (one per distinct timeout duration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeoutList(u16);

impl TimeoutList {
    /// For the event-log digest.
    pub(crate) fn index(self) -> u16 {
        self.0
    }
}

/// An attempt's place on a timeout list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    /// `u16::MAX` when the attempt is on no list.
    list: u16,
    /// Slab indices of its neighbours: live attempts on the same list.
    prev: u32,
    next: u32,
}

impl Link {
    /// On no list: no timeout armed, or it has fired.
    pub(crate) const NONE: Link = Link {
        list: u16::MAX,
        prev: NIL,
        next: NIL,
    };

    pub(crate) fn is_linked(self) -> bool {
        self.list != u16::MAX
    }

    /// The list it is on, if any.
    pub(crate) fn list(self) -> Option<usize> {
        self.is_linked().then_some(usize::from(self.list))
    }
}

#[derive(Debug)]
struct List {
    duration: Nanos,
    head: u32,
    tail: u32,
    /// The list's one `Timeout` event.
    timer: LineTimer,
}

/// Every timeout list of a run; they are made when the model is built.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    lists: Vec<List>,
}

impl Deadlines {
    /// The list for timeouts of `duration` (made on first use).
    pub(crate) fn list(&mut self, duration: Nanos) -> TimeoutList {
        let i = match self.lists.iter().position(|l| l.duration == duration) {
            Some(i) => i,
            None => {
                self.lists.push(List {
                    duration,
                    head: NIL,
                    tail: NIL,
                    timer: LineTimer::default(),
                });
                self.lists.len() - 1
            }
        };
        // A scenario has a handful of distinct timeouts; its validation
        // bounds the callers far below this.
        TimeoutList(u16::try_from(i).expect("fewer than 65 535 timeout durations"))
    }

    /// Appends live attempt `index` to list `l`. Returns the time a new
    /// `Timeout` event must be scheduled at, if the list had none.
    #[must_use]
    fn push(&mut self, attempts: &mut Slab<Attempt>, l: TimeoutList, index: u32) -> Option<Nanos> {
        let list = &mut self.lists[usize::from(l.0)];
        let a = attempts.at_mut(index).expect("a live attempt");
        debug_assert!(!a.link.is_linked(), "an attempt armed twice");
        a.link = Link {
            list: l.0,
            prev: list.tail,
            next: NIL,
        };
        let deadline = a.started().saturating_add(list.duration);
        match list.tail {
            NIL => list.head = index,
            t => {
                attempts
                    .at_mut(t)
                    .expect("a linked attempt is live")
                    .link
                    .next = index
            }
        }
        list.tail = index;
        list.timer.on_join(deadline)
    }

    /// Takes attempt `index`, on the list its `link` names, off it.
    fn unlink(&mut self, attempts: &mut Slab<Attempt>, index: u32, link: Link) {
        let list = &mut self.lists[usize::from(link.list)];
        match link.prev {
            NIL => list.head = link.next,
            p => {
                attempts
                    .at_mut(p)
                    .expect("a linked attempt is live")
                    .link
                    .next = link.next
            }
        }
        match link.next {
            NIL => list.tail = link.prev,
            n => {
                attempts
                    .at_mut(n)
                    .expect("a linked attempt is live")
                    .link
                    .prev = link.prev
            }
        }
        if let Some(a) = attempts.at_mut(index) {
            a.link = Link::NONE;
        }
    }

    /// Attempts on list `l`, front first (for the audit). Stops at a
    /// link to a slot with no live attempt, and after as many steps as
    /// there are attempts, so a broken list cannot loop.
    pub(crate) fn walk<'a>(
        &'a self,
        attempts: &'a Slab<Attempt>,
        l: usize,
    ) -> impl Iterator<Item = (u32, &'a Attempt)> + 'a {
        let mut at = self.lists[l].head;
        std::iter::from_fn(move || {
            let i = at;
            let a = attempts.key_at(i).and_then(|k| attempts.get(k))?;
            at = a.link.next;
            Some((i, a))
        })
        .take(attempts.len())
    }

    /// The duration of list `l`'s timeouts.
    pub(crate) fn duration(&self, l: TimeoutList) -> Nanos {
        self.lists[usize::from(l.0)].duration
    }

    /// Lists, for the audit: (duration, scheduled expiry).
    pub(crate) fn lists(&self) -> impl Iterator<Item = (Nanos, Option<Nanos>)> + '_ {
        self.lists.iter().map(|l| (l.duration, l.timer.due()))
    }
}

impl Engine {
    /// Arms the caller's per-try timeout for live attempt `att`, created
    /// at this instant.
    #[inline]
    pub(crate) fn arm_timeout(&mut self, l: TimeoutList, att: crate::slab::Key) {
        debug_assert_eq!(self.flight.get(att).started(), self.now);
        if let Some(at) = self.deadlines.push(self.flight.slab_mut(), l, att.index) {
            self.queue.schedule(at, super::Ev::Timeout { list: l });
        }
    }

    /// Disarms the per-try timeout of the attempt in slot `index` (its
    /// caller heard from it, or it timed out).
    #[inline]
    pub(crate) fn disarm_timeout(&mut self, index: u32, link: Link) {
        if link.is_linked() {
            self.deadlines.unlink(self.flight.slab_mut(), index, link);
        }
    }

    /// List `l`'s event: the attempts at its front whose deadline has come
    /// time out, and the event is set again for the first that stays.
    pub(crate) fn on_timeouts(&mut self, l: TimeoutList) {
        let now = self.now;
        let li = usize::from(l.0);
        if !self.deadlines.lists[li].timer.fire(now) {
            return; // replaced by an earlier one
        }
        loop {
            let list = &self.deadlines.lists[li];
            let (head, duration) = (list.head, list.duration);
            if head == NIL {
                return;
            }
            let key = self
                .flight
                .slab()
                .key_at(head)
                .expect("a linked attempt is live");
            let a = self.flight.get(key);
            let deadline = a.started().saturating_add(duration);
            if deadline > now {
                if let Some(at) = self.deadlines.lists[li].timer.rearm(deadline) {
                    self.queue.schedule(at, super::Ev::Timeout { list: l });
                }
                return;
            }
            let link = a.link;
            self.deadlines.unlink(self.flight.slab_mut(), head, link);
            self.on_timeout(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::attempt::Phase;
    use crate::slab::Key;

    fn attempt(started: Nanos) -> Attempt {
        Attempt::for_test(Phase::New, started)
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// The clock moves on, then a new attempt is armed on a list.
        Arm { after: u64, list: bool },
        /// The `n`-th live attempt (mod their count) leaves: it is removed
        /// from the slab, then unlinked, as `Engine::remove_attempt` does.
        Leave(usize),
        /// The front of a list fires (unlinked, then kept alive detached,
        /// as `on_timeouts` does).
        Fire { list: bool },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..5, any::<bool>()).prop_map(|(after, list)| Op::Arm { after, list }),
            2 => any::<usize>().prop_map(Op::Leave),
            1 => any::<bool>().prop_map(|list| Op::Fire { list }),
        ]
    }

    proptest! {
        /// Two lists against two plain queues: order, links and the one
        /// event each list asks for.
        #[test]
        fn lists_match_a_reference(ops in proptest::collection::vec(op(), 1..300)) {
            let mut attempts = Slab::new();
            let mut d = Deadlines::default();
            let lists = [d.list(Nanos::from_millis(30)), d.list(Nanos::from_millis(10))];
            prop_assert_eq!(d.list(Nanos::from_millis(30)), lists[0], "one list a duration");
            let mut reference: [Vec<Key>; 2] = [Vec::new(), Vec::new()];
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Arm { after, list } => {
                        now += after;
                        let l = usize::from(list);
                        let k = attempts.insert(attempt(Nanos::from_nanos(now)));
                        let before = d.lists[l].timer.due();
                        let event = d.push(&mut attempts, lists[l], k.index);
                        // An event only when the list had none, at this
                        // attempt's deadline.
                        let due = Nanos::from_nanos(now) + d.duration(lists[l]);
                        prop_assert_eq!(event, before.is_none().then_some(due));
                        prop_assert_eq!(d.lists[l].timer.due(), before.or(Some(due)));
                        reference[l].push(k);
                    }
                    Op::Leave(n) => {
                        let live: Vec<(usize, usize)> = (0..2)
                            .flat_map(|l| (0..reference[l].len()).map(move |i| (l, i)))
                            .collect();
                        if live.is_empty() {
                            continue;
                        }
                        let (l, i) = live[n % live.len()];
                        let k = reference[l].remove(i);
                        let a = attempts.remove(k).unwrap();
                        d.unlink(&mut attempts, k.index, a.link);
                    }
                    Op::Fire { list } => {
                        let l = usize::from(list);
                        if reference[l].is_empty() {
                            continue;
                        }
                        let k = reference[l].remove(0);
                        let link = attempts.get(k).unwrap().link;
                        prop_assert_eq!(link.list(), Some(l));
                        d.unlink(&mut attempts, k.index, link);
                        prop_assert!(!attempts.get(k).unwrap().link.is_linked());
                    }
                }
                for (l, keys) in reference.iter().enumerate() {
                    let walked: Vec<u32> = d.walk(&attempts, l).map(|(i, _)| i).collect();
                    let want: Vec<u32> = keys.iter().map(|k| k.index).collect();
                    prop_assert_eq!(walked, want);
                    let tail = keys.last().map_or(NIL, |k| k.index);
                    prop_assert_eq!(d.lists[l].tail, tail);
                }
            }
        }
    }
}

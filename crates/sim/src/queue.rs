//! The event queue: a binary heap for arbitrary times plus FIFO lanes for
//! fixed-duration timers.
//!
//! Most pending events in a storm are timeouts, and a timeout of fixed
//! duration `d` armed at `now` fires at `now + d`: armed in time order, it
//! also fires in time order. Such timers go to a FIFO lane per duration, where
//! push and pop are O(1), instead of a heap where a million pending timers cost
//! ~20 comparisons each. Cancellation is lazy: the event carries a generation
//! and the handler ignores stale ones, so nothing is ever removed from the
//! middle of a lane.
//!
//! Ties are broken by insertion sequence, so the order of events at equal
//! times is the order they were scheduled: deterministic on any machine.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use stormbreak_policy::Nanos;

/// One scheduled event: a time, a tie-breaking sequence number and a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

/// Heap entries order by `(at, seq)` only; the payload needs no `Ord`.
#[derive(Debug, Clone, Copy)]
struct HeapEntry<E>(Entry<E>);

impl<E> PartialEq for HeapEntry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.0.at, self.0.seq) == (o.0.at, o.0.seq)
    }
}
impl<E> Eq for HeapEntry<E> {}
impl<E> PartialOrd for HeapEntry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for HeapEntry<E> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0.at, self.0.seq).cmp(&(o.0.at, o.0.seq))
    }
}

/// Identifies a FIFO lane made by [`EventQueue::lane`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane(usize);

/// A deterministic future-event list.
///
/// ```
/// use stormbreak_policy::Nanos;
/// use stormbreak_sim::queue::EventQueue;
/// let ms = Nanos::from_millis;
/// let mut q = EventQueue::new();
/// let timeouts = q.lane(ms(200));
/// q.schedule(ms(50), "service done");
/// q.schedule_in_lane(timeouts, Nanos::ZERO, "timeout"); // fires at 200 ms
/// assert_eq!(q.pop(), Some((ms(50), "service done")));
/// assert_eq!(q.pop(), Some((ms(200), "timeout")));
/// assert_eq!(q.pop(), None);
/// ```
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<HeapEntry<E>>>,
    lanes: Vec<(Nanos, VecDeque<Entry<E>>)>,
    seq: u64,
    len: usize,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            lanes: Vec::new(),
            seq: 0,
            len: 0,
        }
    }

    /// The lane for timers of exactly `duration`; the same lane is returned
    /// for the same duration.
    pub fn lane(&mut self, duration: Nanos) -> Lane {
        if let Some(i) = self.lanes.iter().position(|(d, _)| *d == duration) {
            return Lane(i);
        }
        self.lanes.push((duration, VecDeque::new()));
        Lane(self.lanes.len() - 1)
    }

    /// Schedules `event` at absolute time `at`.
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let seq = self.next_seq();
        self.heap.push(Reverse(HeapEntry(Entry { at, seq, event })));
    }

    /// Schedules `event` at `now + lane duration`. Callers must arm a lane
    /// with non-decreasing `now` (the simulation clock never goes back), which
    /// keeps each lane sorted.
    pub fn schedule_in_lane(&mut self, lane: Lane, now: Nanos, event: E) {
        let seq = self.next_seq();
        let (d, fifo) = &mut self.lanes[lane.0];
        let at = now.saturating_add(*d);
        debug_assert!(
            fifo.back().is_none_or(|b| b.at <= at),
            "lane armed out of order"
        );
        fifo.push_back(Entry { at, seq, event });
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.len += 1;
        self.seq
    }

    /// Number of pending events (stale ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.earliest().map(|(at, _, _)| at)
    }

    /// (time, seq, source) of the earliest event; source `None` is the heap.
    fn earliest(&self) -> Option<(Nanos, u64, Option<usize>)> {
        let mut best = self.heap.peek().map(|Reverse(h)| (h.0.at, h.0.seq, None));
        for (i, (_, fifo)) in self.lanes.iter().enumerate() {
            if let Some(f) = fifo.front()
                && best.is_none_or(|(at, seq, _)| (f.at, f.seq) < (at, seq))
            {
                best = Some((f.at, f.seq, Some(i)));
            }
        }
        best
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.pop_until(Nanos::MAX)
    }

    /// Removes and returns the earliest event if it is due at or before
    /// `until` (one scan of the lanes, where peek-then-pop would take two).
    #[inline]
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        let (at, _, source) = self.earliest()?;
        if at > until {
            return None;
        }
        self.len -= 1;
        let entry = match source {
            None => self.heap.pop().map(|Reverse(h)| h.0),
            Some(i) => self.lanes[i].1.pop_front(),
        }?;
        Some((entry.at, entry.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_times_pop_in_scheduling_order_across_heap_and_lanes() {
        let mut q = EventQueue::new();
        let l = q.lane(Nanos::from_nanos(10));
        q.schedule(Nanos::from_nanos(10), 1);
        q.schedule_in_lane(l, Nanos::ZERO, 2);
        q.schedule(Nanos::from_nanos(10), 3);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        let ten = Nanos::from_nanos(10);
        assert_eq!(order, vec![(ten, 1), (ten, 2), (ten, 3)]);
    }

    proptest! {
        /// Whatever mix of heap and lane events, pops come out sorted by
        /// (time, scheduling order) — the same order a single sorted list gives.
        #[test]
        fn pops_in_time_then_sequence_order(
            ops in prop::collection::vec((0u64..1000, prop::option::of(0usize..3)), 1..300)
        ) {
            let mut q = EventQueue::new();
            let lanes = [q.lane(Nanos::from_nanos(5)), q.lane(Nanos::from_nanos(50)), q.lane(Nanos::from_nanos(500))];
            let durations = [5u64, 50, 500].map(Nanos::from_nanos);
            let mut now = Nanos::ZERO;
            let mut expected = Vec::new();
            for (i, (dt, lane)) in ops.iter().enumerate() {
                now += Nanos::from_nanos(dt % 7); // lanes are armed with a non-decreasing clock
                match lane {
                    Some(l) => {
                        q.schedule_in_lane(lanes[*l], now, i);
                        expected.push((now + durations[*l], i));
                    }
                    None => {
                        q.schedule(now + Nanos::from_nanos(*dt), i);
                        expected.push((now + Nanos::from_nanos(*dt), i));
                    }
                }
            }
            expected.sort();
            let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            prop_assert_eq!(got, expected);
        }
    }
}

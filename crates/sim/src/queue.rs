//! The event queue: a radix heap for arbitrary times plus FIFO lanes for
//! fixed-duration timers.
//!
//! Most pending events in a storm are timeouts, and a timeout of fixed
//! duration `d` armed at `now` fires at `now + d`: armed in time order, it
//! also fires in time order. Such timers go to a FIFO lane per duration, where
//! push and pop are O(1), instead of a heap where a million pending timers cost
//! ~20 comparisons each. A lane entry is never withdrawn: a timer whose
//! work is usually done first belongs elsewhere (the engine keeps one timer
//! a waiting line, `engine/deadline.rs`), and events that may find their
//! work gone carry a generation that their handlers check.
//!
//! Ties are broken by insertion sequence, so the order of events at equal
//! times is the order they were scheduled: deterministic on any machine.

use std::collections::VecDeque;

use stormbreak_policy::Nanos;

/// The total order of events: time in the high 64 bits, the scheduling
/// sequence number in the low 64. One `u128` comparison orders by
/// `(time, sequence)`, and no two events share a key.
type OrderKey = u128;

/// No event: greater than every real key (a real sequence number never
/// reaches `u64::MAX`).
const NO_KEY: OrderKey = OrderKey::MAX;

#[inline]
fn order_key(at: Nanos, seq: u64) -> OrderKey {
    (OrderKey::from(at.as_nanos()) << 64) | OrderKey::from(seq)
}

#[inline]
fn time_of(key: OrderKey) -> Nanos {
    Nanos::from_nanos((key >> 64) as u64)
}

/// One scheduled event: its order key and its payload.
#[derive(Debug, Clone, Copy)]
struct Entry<E> {
    key: OrderKey,
    event: E,
}

/// Buckets of a [`RadixHeap`] beside its `due` list: bucket `b` ≥ 1 holds
/// entries whose time's highest bit differing from the last time popped is
/// bit `b - 1`.
const BUCKETS: usize = 65;

/// A monotone radix heap on event times (Ahuja, Mehlhorn, Orlin and
/// Tarjan, "Faster algorithms for the shortest path problem", J. ACM 37(2),
/// 1990): a push is one `leading_zeros`, and a pop empties the lowest
/// occupied bucket into lower ones, so an entry moves at most once per bit
/// of its distance from the clock instead of being compared at every level
/// of a tree. It needs every time pushed to be at or after the last time
/// popped, which the simulation clock guarantees.
///
/// Buckets are keyed on the time alone, not on the whole (time, sequence)
/// key: entries due at the same instant then share the `due` list, in
/// scheduling order, and pop from its front without being redistributed
/// bit by bit of their sequence numbers.
///
/// Invariant: every entry of `buckets[b]` has `bucket(time, last) == b`,
/// and every entry of `due` has time `last`; `mins[b]` is the smallest key
/// in `buckets[b]` ([`NO_KEY`] when empty); bit `b - 1` of `occupied` is
/// set exactly when `buckets[b]` is not empty. Every bucket and `due` hold
/// their entries in scheduling order: a push appends the largest sequence
/// number yet, and a bucket is only ever emptied into lower buckets (and
/// `due`) that are all empty, keeping its order. So `due`'s front is its
/// smallest key.
#[derive(Debug)]
struct RadixHeap<E> {
    due: VecDeque<Entry<E>>,
    buckets: Vec<Vec<Entry<E>>>,
    mins: [OrderKey; BUCKETS],
    occupied: u64,
    /// The time of the last entry popped, in nanoseconds.
    last: u64,
}

/// The bucket of an entry at `time` relative to the last time popped
/// (0: due now).
#[inline]
fn bucket(time: u64, last: u64) -> usize {
    (u64::BITS - (time ^ last).leading_zeros()) as usize
}

impl<E: Copy> RadixHeap<E> {
    fn new() -> Self {
        RadixHeap {
            due: VecDeque::new(),
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            mins: [NO_KEY; BUCKETS],
            occupied: 0,
            last: 0,
        }
    }

    /// The lowest occupied bucket above `due`.
    #[inline]
    fn lowest(&self) -> Option<usize> {
        (self.occupied != 0).then(|| self.occupied.trailing_zeros() as usize + 1)
    }

    #[inline]
    fn min_key(&self) -> OrderKey {
        match self.due.front() {
            Some(e) => e.key,
            None => self.lowest().map_or(NO_KEY, |b| self.mins[b]),
        }
    }

    #[inline]
    fn push(&mut self, entry: Entry<E>) {
        let time = time_of(entry.key).as_nanos();
        debug_assert!(time >= self.last, "a time before the last popped");
        let b = bucket(time, self.last);
        if b == 0 {
            self.due.push_back(entry);
            return;
        }
        self.occupied |= 1 << (b - 1);
        self.mins[b] = self.mins[b].min(entry.key);
        self.buckets[b].push(entry);
    }

    fn pop(&mut self) -> Option<Entry<E>> {
        if let Some(e) = self.due.pop_front() {
            return Some(e);
        }
        let b = self.lowest()?;
        self.last = time_of(self.mins[b]).as_nanos();
        self.occupied &= !(1 << (b - 1));
        self.mins[b] = NO_KEY;
        // A bucket of one (common when few events are pending) holds the
        // smallest entry of all: it is popped without a pass through `due`.
        if self.buckets[b].len() == 1 {
            return self.buckets[b].pop();
        }
        let mut moving = std::mem::take(&mut self.buckets[b]);
        // Relative to the new `last`, every entry of bucket `b` falls into a
        // lower bucket or `due`; the buckets above `b` keep their entries.
        for e in moving.drain(..) {
            self.push(e);
        }
        // The emptied bucket keeps its allocation for its next fill.
        self.buckets[b] = moving;
        self.due.pop_front()
    }
}

/// A FIFO lane of timers of one duration.
#[derive(Debug)]
struct FifoLane<E> {
    duration: Nanos,
    fifo: VecDeque<Entry<E>>,
}

impl<E> FifoLane<E> {
    /// The front's key ([`NO_KEY`] when the lane is empty).
    #[inline]
    fn front_key(&self) -> OrderKey {
        self.fifo.front().map_or(NO_KEY, |f| f.key)
    }
}

/// Identifies a FIFO lane made by [`EventQueue::lane`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane(usize);

/// Most lanes one queue can have: a scenario's timeouts are validated to
/// far fewer distinct durations.
pub const MAX_LANES: usize = u16::MAX as usize;

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
/// q.schedule_in_lane(timeouts, ms(10), "later timeout"); // at 210 ms
/// assert_eq!(q.pop(), Some((ms(50), "service done")));
/// assert_eq!(q.pop(), Some((ms(200), "timeout")));
/// assert_eq!(q.pop(), Some((ms(210), "later timeout")));
/// assert_eq!(q.pop(), None);
/// ```
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: RadixHeap<E>,
    lanes: Vec<FifoLane<E>>,
    /// Each lane's front key ([`NO_KEY`] when the lane is empty), side by
    /// side, so finding the next front after a lane pop scans one small
    /// array instead of every lane's deque.
    ///
    /// Invariant: `fronts[i]` is the key of `lanes[i]`'s front, or
    /// [`NO_KEY`] when that lane is empty.
    fronts: Vec<OrderKey>,
    /// The smallest key among the lanes' fronts ([`NO_KEY`] when every lane
    /// is empty) and its lane. A lane's front changes only when the lane is
    /// popped or pushed while empty, so this is kept up to date there and a
    /// pop from the heap never scans the lanes.
    lane_min: OrderKey,
    lane_min_at: usize,
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
            heap: RadixHeap::new(),
            lanes: Vec::new(),
            fronts: Vec::new(),
            lane_min: NO_KEY,
            lane_min_at: 0,
            seq: 0,
            len: 0,
        }
    }

    /// The lane for timers of exactly `duration`; the same lane is returned
    /// for the same duration.
    ///
    /// # Panics
    /// When asked for more than [`MAX_LANES`] distinct durations (a
    /// scenario's timeouts are validated to far fewer).
    pub fn lane(&mut self, duration: Nanos) -> Lane {
        if let Some(i) = self.lanes.iter().position(|l| l.duration == duration) {
            return Lane(i);
        }
        assert!(
            self.lanes.len() < MAX_LANES,
            "more than {MAX_LANES} timer lanes"
        );
        self.lanes.push(FifoLane {
            duration,
            fifo: VecDeque::new(),
        });
        self.fronts.push(NO_KEY);
        Lane(self.lanes.len() - 1)
    }

    /// Schedules `event` at absolute time `at`. A time before the last
    /// event popped from the heap is taken as that time: the clock never
    /// goes back, so such an event is simply due now (the engine never asks
    /// for one; the radix heap could not order it).
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let seq = self.next_seq();
        let at = at.max(Nanos::from_nanos(self.heap.last));
        self.heap.push(Entry {
            key: order_key(at, seq),
            event,
        });
    }

    /// Schedules `event` at `now + lane duration`. Callers must arm a lane
    /// with non-decreasing `now` (the simulation clock never goes back), which
    /// keeps each lane sorted.
    pub fn schedule_in_lane(&mut self, lane: Lane, now: Nanos, event: E) {
        let seq = self.next_seq();
        let l = &mut self.lanes[lane.0];
        let key = order_key(now.saturating_add(l.duration), seq);
        debug_assert!(
            l.fifo.back().is_none_or(|b| b.key <= key),
            "lane armed out of order"
        );
        if l.fifo.is_empty() {
            self.fronts[lane.0] = key;
            if key < self.lane_min {
                self.lane_min = key;
                self.lane_min_at = lane.0;
            }
        }
        l.fifo.push_back(Entry { key, event });
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.len += 1;
        self.seq
    }

    /// Number of pending events, those whose handler will find them stale
    /// included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Nanos> {
        let key = self.heap.min_key().min(self.lane_min);
        (key != NO_KEY).then(|| time_of(key))
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.pop_until(Nanos::MAX)
    }

    /// Removes and returns the earliest event if it is due at or before
    /// `until`.
    #[inline]
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, E)> {
        let heap_min = self.heap.min_key();
        let key = heap_min.min(self.lane_min);
        if key == NO_KEY || time_of(key) > until {
            return None;
        }
        self.len -= 1;
        let entry = if heap_min < self.lane_min {
            self.heap.pop()
        } else {
            self.pop_lane()
        }?;
        Some((time_of(entry.key), entry.event))
    }

    /// Pops the front of the lane holding the smallest front, and finds the
    /// new smallest front.
    fn pop_lane(&mut self) -> Option<Entry<E>> {
        let l = &mut self.lanes[self.lane_min_at];
        let entry = l.fifo.pop_front();
        self.fronts[self.lane_min_at] = l.front_key();
        self.rescan_lane_min();
        entry
    }

    fn rescan_lane_min(&mut self) {
        self.lane_min = NO_KEY;
        for (i, &f) in self.fronts.iter().enumerate() {
            if f < self.lane_min {
                self.lane_min = f;
                self.lane_min_at = i;
            }
        }
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

    #[test]
    fn an_event_scheduled_in_the_past_is_due_at_once() {
        let mut q = EventQueue::new();
        q.schedule(Nanos::from_nanos(100), "first");
        assert_eq!(q.pop(), Some((Nanos::from_nanos(100), "first")));
        q.schedule(Nanos::from_nanos(200), "later");
        q.schedule(Nanos::from_nanos(50), "late");
        assert_eq!(q.pop(), Some((Nanos::from_nanos(100), "late")));
        assert_eq!(q.pop(), Some((Nanos::from_nanos(200), "later")));
    }

    proptest! {
        /// Pops between pushes, the clock following them: every pop, the
        /// count and the next time agree with a sorted reference.
        #[test]
        fn interleaved_pushes_and_pops_follow_the_reference(
            ops in prop::collection::vec((0u64..500, 0usize..4, any::<bool>()), 1..500)
        ) {
            use std::collections::BTreeMap;
            let mut q = EventQueue::new();
            let durations = [3u64, 40, 400].map(Nanos::from_nanos);
            let lanes = durations.map(|d| q.lane(d));
            // (time, scheduling order) -> id, for what is still pending
            let mut reference: BTreeMap<(Nanos, usize), usize> = BTreeMap::new();
            let mut now = Nanos::ZERO;
            for (i, &(dt, kind, pop)) in ops.iter().enumerate() {
                if kind < 3 {
                    q.schedule_in_lane(lanes[kind], now, i);
                    reference.insert((now + durations[kind], i), i);
                } else {
                    let at = now + Nanos::from_nanos(dt);
                    q.schedule(at, i);
                    reference.insert((at, i), i);
                }
                if pop {
                    let want = reference.pop_first().map(|((at, _), id)| (at, id));
                    prop_assert_eq!(q.pop(), want);
                    if let Some((at, _)) = want {
                        now = at;
                    }
                }
                prop_assert_eq!(q.len(), reference.len());
                prop_assert_eq!(q.peek_time(), reference.keys().next().map(|k| k.0));
            }
            let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            let want: Vec<_> = reference.into_iter().map(|((at, _), id)| (at, id)).collect();
            prop_assert_eq!(rest, want);
        }

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

        /// Pops interleaved with pushes, as in a run (every push at or after
        /// the last pop's time): the same sequence as a reference
        /// `BinaryHeap` ordered by (time, scheduling order), `pop_until`
        /// included.
        #[test]
        fn interleaved_pops_match_a_reference_heap(
            ops in prop::collection::vec((0u64..2000, 0usize..5, 0u8..3), 1..600)
        ) {
            use std::cmp::Reverse;
            use std::collections::BinaryHeap;
            let mut q = EventQueue::new();
            let durations = [0u64, 7, 300].map(Nanos::from_nanos);
            let lanes = durations.map(|d| q.lane(d));
            let mut reference = BinaryHeap::new();
            let (mut now, mut seq) = (Nanos::ZERO, 0u64);
            for (i, &(dt, kind, pops)) in ops.iter().enumerate() {
                seq += 1;
                let at = match kind {
                    0..=2 => {
                        q.schedule_in_lane(lanes[kind], now, i);
                        now + durations[kind]
                    }
                    _ => {
                        let at = now + Nanos::from_nanos(dt);
                        q.schedule(at, i);
                        at
                    }
                };
                reference.push(Reverse((at, seq, i)));
                for _ in 0..pops {
                    let until = now + Nanos::from_nanos(dt / 4);
                    let want = match reference.peek() {
                        Some(Reverse((at, _, _))) if *at <= until => {
                            reference.pop().map(|Reverse((at, _, i))| (at, i))
                        }
                        _ => None,
                    };
                    let got = q.pop_until(until);
                    prop_assert_eq!(got, want);
                    if let Some((at, _)) = got {
                        now = at;
                    }
                    prop_assert_eq!(q.len(), reference.len());
                    prop_assert_eq!(
                        q.peek_time(),
                        reference.peek().map(|Reverse((at, _, _))| *at)
                    );
                }
            }
            let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            let want: Vec<_> = std::iter::from_fn(|| reference.pop())
                .map(|Reverse((at, _, i))| (at, i))
                .collect();
            prop_assert_eq!(rest, want);
        }
    }
}

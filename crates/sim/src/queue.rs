//! The event queue: a 4-ary heap for arbitrary times plus FIFO lanes for
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

/// Children per heap node. Four halves the depth of a binary heap, and the
/// four children's keys sit next to each other in memory (64 bytes), so a
/// level of a pop compares within one or two cache lines.
const ARITY: usize = 4;

/// A 4-ary min-heap on [`OrderKey`], keys and payloads in two parallel
/// arrays so that the walk down a pop reads keys only. Keys are unique, so
/// the pop order is fully determined by the keys: the same as any other
/// correct priority queue's, `std::collections::BinaryHeap` included.
///
/// Invariant: `keys.len() == events.len()`, and `keys[i] >= keys[(i - 1) / ARITY]`.
#[derive(Debug)]
struct Heap<E> {
    keys: Vec<OrderKey>,
    events: Vec<E>,
}

/// The index of the smallest of the four keys `k[0..4]`, chosen without
/// data-dependent branches (the keys of a pop's walk are random, so a
/// branch on them is mispredicted half the time).
#[inline(always)]
fn min_of_four(k: &[OrderKey; ARITY]) -> usize {
    let a = usize::from(k[1] < k[0]);
    let b = 2 + usize::from(k[3] < k[2]);
    if k[b] < k[a] { b } else { a }
}

impl<E: Copy> Heap<E> {
    fn new() -> Self {
        Heap {
            keys: Vec::new(),
            events: Vec::new(),
        }
    }

    #[inline]
    fn min_key(&self) -> OrderKey {
        self.keys.first().copied().unwrap_or(NO_KEY)
    }

    fn push(&mut self, entry: Entry<E>) {
        let mut i = self.keys.len();
        self.keys.push(entry.key);
        self.events.push(entry.event);
        let (keys, events) = (&mut self.keys[..], &mut self.events[..]);
        // Sift up with a hole: move parents down, write the entry once.
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if keys[parent] <= entry.key {
                break;
            }
            keys[i] = keys[parent];
            events[i] = events[parent];
            i = parent;
        }
        keys[i] = entry.key;
        events[i] = entry.event;
    }

    fn pop(&mut self) -> Option<Entry<E>> {
        let last_key = self.keys.pop()?;
        let last_event = self.events.pop()?;
        let (keys, events) = (&mut self.keys[..], &mut self.events[..]);
        let (Some(&top_key), Some(&top_event)) = (keys.first(), events.first()) else {
            return Some(Entry {
                key: last_key,
                event: last_event,
            });
        };
        // Floyd's bottom-up deletion: walk the hole at the root down to a
        // leaf along the smallest children, then sift the former last entry
        // up from there. The last entry is usually among the largest, so the
        // climb back is short, and the walk down needs no comparison with it.
        let n = keys.len();
        let mut hole = 0;
        loop {
            let first = ARITY * hole + 1;
            let best = if let Some(four) = keys.get(first..first + ARITY) {
                first + min_of_four(four.try_into().expect("four keys"))
            } else if first < n {
                let mut best = first;
                for c in first + 1..n {
                    if keys[c] < keys[best] {
                        best = c;
                    }
                }
                best
            } else {
                break;
            };
            keys[hole] = keys[best];
            events[hole] = events[best];
            hole = best;
        }
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            if keys[parent] <= last_key {
                break;
            }
            keys[hole] = keys[parent];
            events[hole] = events[parent];
            hole = parent;
        }
        keys[hole] = last_key;
        events[hole] = last_event;
        Some(Entry {
            key: top_key,
            event: top_event,
        })
    }
}

/// A FIFO lane of timers of one duration.
#[derive(Debug)]
struct FifoLane<E> {
    duration: Nanos,
    fifo: VecDeque<Entry<E>>,
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
    heap: Heap<E>,
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
            heap: Heap::new(),
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
    pub fn lane(&mut self, duration: Nanos) -> Lane {
        if let Some(i) = self.lanes.iter().position(|l| l.duration == duration) {
            return Lane(i);
        }
        self.lanes.push(FifoLane {
            duration,
            fifo: VecDeque::new(),
        });
        self.fronts.push(NO_KEY);
        Lane(self.lanes.len() - 1)
    }

    /// Schedules `event` at absolute time `at`.
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let seq = self.next_seq();
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
        let fifo = &mut self.lanes[self.lane_min_at].fifo;
        let entry = fifo.pop_front();
        self.fronts[self.lane_min_at] = fifo.front().map_or(NO_KEY, |f| f.key);
        self.lane_min = NO_KEY;
        for (i, &f) in self.fronts.iter().enumerate() {
            if f < self.lane_min {
                self.lane_min = f;
                self.lane_min_at = i;
            }
        }
        entry
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

//! A job queue's waiting jobs, held as arrival-time gaps.
//!
//! A job backlog only ever needs its jobs' arrival times, oldest first, and
//! jobs join it at the simulation clock, which never goes back. So the
//! oldest job's time is kept whole and every later job as the gap from the
//! job before it: 4 bytes a job instead of 8, exactly (a gap of 2³² − 1 ns,
//! about 4.3 s, or more is kept whole aside, behind a marker). At
//! `--scale 1` the Actions backlog of `scenarios/github-2026-08-17.toml`
//! holds millions of jobs, so this halves the run's largest table.

use std::collections::VecDeque;

use stormbreak_policy::Nanos;

/// Marks a gap too long for a `u32`; the gap itself is in `long`.
const LONG: u32 = u32::MAX;

/// Arrival times of waiting jobs, oldest first (FIFO).
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    /// The gap from each job to the one before it, for every job but the
    /// oldest.
    gaps: VecDeque<u32>,
    /// Gaps of [`LONG`] or more, in order.
    long: VecDeque<u64>,
    oldest: Nanos,
    newest: Nanos,
    len: usize,
}

impl Backlog {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest job's arrival time.
    pub(crate) fn front(&self) -> Option<Nanos> {
        (self.len > 0).then_some(self.oldest)
    }

    /// A job arrives at `at`, no earlier than the newest one.
    pub(crate) fn push_back(&mut self, at: Nanos) {
        if self.len == 0 {
            self.oldest = at;
        } else {
            debug_assert!(at >= self.newest, "jobs join in time order");
            let gap = (at - self.newest).as_nanos();
            match u32::try_from(gap) {
                Ok(g) if g != LONG => self.gaps.push_back(g),
                _ => {
                    self.gaps.push_back(LONG);
                    self.long.push_back(gap);
                }
            }
        }
        self.newest = at;
        self.len += 1;
    }

    /// Takes the oldest job: its arrival time.
    pub(crate) fn pop_front(&mut self) -> Option<Nanos> {
        let oldest = self.front()?;
        self.len -= 1;
        if let Some(g) = self.gaps.pop_front() {
            let gap = match g {
                LONG => self.long.pop_front().expect("a long gap behind its marker"),
                g => u64::from(g),
            };
            self.oldest = oldest + Nanos::from_nanos(gap);
        }
        Some(oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same arrival times come out as a `VecDeque<Nanos>` gives,
        /// gaps of any size and pushes interleaved with pops included.
        #[test]
        fn same_times_as_a_plain_fifo(
            ops in prop::collection::vec((prop_oneof![0u64..1000, Just(u64::from(u32::MAX)), Just(1u64 << 40)], any::<bool>()), 1..400)
        ) {
            let (mut b, mut plain) = (Backlog::default(), VecDeque::new());
            let mut now = Nanos::ZERO;
            for (gap, pop) in ops {
                if pop {
                    prop_assert_eq!(b.pop_front(), plain.pop_front());
                } else {
                    now += Nanos::from_nanos(gap);
                    b.push_back(now);
                    plain.push_back(now);
                }
                prop_assert_eq!(b.len(), plain.len());
                prop_assert_eq!(b.front(), plain.front().copied());
            }
            while let Some(t) = plain.pop_front() {
                prop_assert_eq!(b.pop_front(), Some(t));
            }
            prop_assert!(b.is_empty());
            prop_assert_eq!(b.pop_front(), None);
        }
    }
}

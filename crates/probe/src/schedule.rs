//! When the next probe goes out, and to which path: one fixed total rate
//! for the whole run, whatever the answers.
//!
//! Sans-IO, as the policy crate: the driver asks [`Schedule::poll_timeout`]
//! when to wake and hands the time to [`Schedule::handle_timeout`], which
//! says what that slot is for. Probe times form one process at the total
//! rate (Poisson or full-jitter gaps, from a seeded generator); slots go
//! to the paths in turn, so every path gets the same share and no path's
//! answers can change another's. A paused path (`Retry-After`, 429, 503)
//! loses its slots for the pause: they are counted, never handed to
//! another path and never made up later.
//!
//! Invariant: the slot times depend only on the seed and the rate, never
//! on an outcome, so the probe rate stays flat while the target fails.
//!
//! ```
//! use stormbreak_policy::Nanos;
//! use stormbreak_probe::config::Spacing;
//! use stormbreak_probe::schedule::{Schedule, Slot};
//! let mut s = Schedule::new(100.0, Spacing::Poisson, 2, 7);
//! s.pause(1, Nanos::from_secs(60));
//! let mut sent = [0, 0];
//! let mut paused = 0;
//! while s.poll_timeout() < Nanos::from_secs(10) {
//!     match s.handle_timeout(s.poll_timeout()) {
//!         Some(Slot::Send { path, .. }) => sent[path] += 1,
//!         Some(Slot::Paused { .. }) => paused += 1,
//!         None => unreachable!(),
//!     }
//! }
//! // About 500 each; path 1's slots were paused, not given to path 0.
//! assert!((400..600).contains(&sent[0]) && sent[1] == 0 && (400..600).contains(&paused));
//! ```

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;

use crate::config::Spacing;

/// What one slot is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a slot is either sent or counted as paused"]
pub enum Slot {
    /// Probe `path` now; `at` is the slot's intended time.
    Send {
        /// Index of the path.
        path: usize,
        /// When the probe was due.
        at: Nanos,
    },
    /// `path`'s slot fell in a pause the target asked for.
    Paused {
        /// Index of the path.
        path: usize,
        /// When the probe was due.
        at: Nanos,
    },
}

/// The run's probe times and their paths.
#[derive(Debug)]
pub struct Schedule {
    rng: Pcg64Mcg,
    mean_gap_s: f64,
    spacing: Spacing,
    next_at: Nanos,
    next_path: usize,
    paused_until: Vec<Nanos>,
}

impl Schedule {
    /// Slots at `rate` per second in total over `paths` paths, the first
    /// one gap after time zero.
    ///
    /// # Panics
    ///
    /// When `rate` is not positive and finite or `paths` is 0 (the config
    /// check rejects both).
    pub fn new(rate: f64, spacing: Spacing, paths: usize, seed: u64) -> Schedule {
        assert!(rate.is_finite() && rate > 0.0 && paths > 0);
        let mut s = Schedule {
            rng: Pcg64Mcg::seed_from_u64(seed),
            mean_gap_s: 1.0 / rate,
            spacing,
            next_at: Nanos::ZERO,
            next_path: 0,
            paused_until: vec![Nanos::ZERO; paths],
        };
        s.next_at = s.gap();
        s
    }

    fn gap(&mut self) -> Nanos {
        let draw: f64 = match self.spacing {
            Spacing::Poisson => Exp1.sample(&mut self.rng),
            Spacing::Jitter => self.rng.random_range(0.0..2.0),
        };
        // At least a nanosecond, so time always moves on.
        Nanos::from_secs_f64(draw * self.mean_gap_s).max(Nanos::NANOSECOND)
    }

    /// When the next slot is due.
    pub fn poll_timeout(&self) -> Nanos {
        self.next_at
    }

    /// The slot due at or before `now` (one per call; `None` if none is
    /// due yet). A driver woken late calls again until it gets `None`:
    /// late slots are still handed out, with their intended time.
    pub fn handle_timeout(&mut self, now: Nanos) -> Option<Slot> {
        if now < self.next_at {
            return None;
        }
        let at = self.next_at;
        let path = self.next_path;
        self.next_path = (path + 1) % self.paused_until.len();
        self.next_at = at + self.gap();
        Some(if at < self.paused_until[path] {
            Slot::Paused { path, at }
        } else {
            Slot::Send { path, at }
        })
    }

    /// Pauses `path` until `until` (a later pause already in force stays).
    pub fn pause(&mut self, path: usize, until: Nanos) {
        let p = &mut self.paused_until[path];
        *p = (*p).max(until);
    }

    /// Until when `path` is paused (at or before now: not paused).
    pub fn paused_until(&self, path: usize) -> Nanos {
        self.paused_until[path]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(s: &mut Schedule, horizon: Nanos) -> (Vec<u64>, u64) {
        let mut sent = vec![0; s.paused_until.len()];
        let mut paused = 0;
        while s.poll_timeout() < horizon {
            match s.handle_timeout(s.poll_timeout()).unwrap() {
                Slot::Send { path, .. } => sent[path] += 1,
                Slot::Paused { .. } => paused += 1,
            }
        }
        (sent, paused)
    }

    #[test]
    fn the_total_rate_is_the_configured_one_for_both_spacings() {
        for spacing in [Spacing::Poisson, Spacing::Jitter] {
            let mut s = Schedule::new(50.0, spacing, 3, 1);
            let (sent, paused) = count(&mut s, Nanos::from_secs(200));
            let total: u64 = sent.iter().sum::<u64>() + paused;
            // 10 000 expected; Poisson's sd is 100.
            assert!((9_600..=10_400).contains(&total), "{spacing:?}: {total}");
            let (lo, hi) = (sent.iter().min().unwrap(), sent.iter().max().unwrap());
            assert!(hi - lo <= 1, "turns are even: {sent:?}");
        }
    }

    #[test]
    fn a_pause_takes_slots_from_its_path_and_gives_none_to_the_others() {
        let mut a = Schedule::new(20.0, Spacing::Poisson, 2, 9);
        let mut b = Schedule::new(20.0, Spacing::Poisson, 2, 9);
        b.pause(0, Nanos::from_secs(30));
        let (sa, pa) = count(&mut a, Nanos::from_secs(60));
        let (sb, pb) = count(&mut b, Nanos::from_secs(60));
        assert_eq!(pa, 0);
        assert_eq!(
            sa[1], sb[1],
            "path 1's slots are the same with or without path 0's pause"
        );
        assert_eq!(
            sa[0],
            sb[0] + pb,
            "path 0's paused slots are lost, not moved"
        );
        assert!(pb > 200, "{pb}");
    }

    #[test]
    fn a_shorter_pause_does_not_cut_a_longer_one() {
        let mut s = Schedule::new(1.0, Spacing::Jitter, 1, 0);
        s.pause(0, Nanos::from_secs(10));
        s.pause(0, Nanos::from_secs(5));
        assert_eq!(s.paused_until(0), Nanos::from_secs(10));
    }

    #[test]
    fn a_late_driver_gets_every_slot_with_its_intended_time() {
        let mut s = Schedule::new(100.0, Spacing::Poisson, 1, 3);
        let mut last = Nanos::ZERO;
        let mut n = 0;
        while let Some(slot) = s.handle_timeout(Nanos::from_secs(1)) {
            let Slot::Send { at, .. } = slot else {
                panic!()
            };
            assert!(at > last && at <= Nanos::from_secs(1));
            last = at;
            n += 1;
        }
        assert!((70..=130).contains(&n), "{n}");
    }
}

//! Intended send times: the simulator's arrival law (a piecewise-linear
//! rate, sampled as a non-homogeneous Poisson process by thinning), drawn
//! from a seeded RNG so a run's intended schedule is reproducible.
//!
//! The simulator's own `engine::rate::RateSchedule` is crate-private; this
//! is the same law without its daily cycle (refused by the lab) and its
//! piece hint (a lab run draws a few thousand times a second). When the
//! simulator exports its schedule, this module is replaced by it.

use rand::Rng;
use rand_distr::{Distribution, Exp1};
use stormbreak_policy::Nanos;

#[derive(Debug, Clone, Copy)]
struct Piece {
    start: Nanos,
    /// `Nanos::MAX` for the last, open-ended piece.
    end: Nanos,
    from: f64,
    to: f64,
}

/// A population's rate over time, per second.
#[derive(Debug, Clone)]
pub struct ArrivalSchedule {
    pieces: Vec<Piece>,
}

impl ArrivalSchedule {
    /// `initial` from time 0, then each step `(at, rate, ramp)`: a linear
    /// ramp over `ramp` to `rate`, starting at `at`.
    pub fn new(initial: f64, steps: &[(Nanos, f64, Nanos)]) -> Self {
        let mut pieces = Vec::with_capacity(steps.len() * 2 + 1);
        let (mut t, mut r) = (Nanos::ZERO, initial);
        for &(at, rate, ramp) in steps {
            if at > t {
                pieces.push(Piece {
                    start: t,
                    end: at,
                    from: r,
                    to: r,
                });
            }
            if ramp > Nanos::ZERO {
                pieces.push(Piece {
                    start: at,
                    end: at + ramp,
                    from: r,
                    to: rate,
                });
            }
            t = at + ramp;
            r = rate;
        }
        pieces.push(Piece {
            start: t,
            end: Nanos::MAX,
            from: r,
            to: r,
        });
        ArrivalSchedule { pieces }
    }

    /// A constant `rate` from `now` on (a `set_rate` action).
    pub fn constant_from(now: Nanos, rate: f64) -> Self {
        ArrivalSchedule::new(0.0, &[(now, rate, Nanos::ZERO)])
    }

    /// The rate at `t`, per second.
    pub fn rate_at(&self, t: Nanos) -> f64 {
        let p = self
            .pieces
            .iter()
            .find(|p| t < p.end)
            .expect("the last piece is open-ended");
        if p.from == p.to {
            return p.from;
        }
        let frac = (t - p.start).as_nanos() as f64 / (p.end - p.start).as_nanos() as f64;
        p.from + (p.to - p.from) * frac
    }

    /// The next arrival strictly after `now`, or `None` if the rate stays 0.
    pub fn next_after<R: Rng + ?Sized>(&self, mut now: Nanos, rng: &mut R) -> Option<Nanos> {
        let mut i = self.pieces.iter().position(|p| now < p.end)?;
        loop {
            let p = self.pieces[i];
            let max = p.from.max(p.to);
            if max <= 0.0 {
                if p.end == Nanos::MAX {
                    return None;
                }
                (now, i) = (p.end, i + 1);
                continue;
            }
            let gap: f64 = Exp1.sample(rng);
            let cand =
                now.saturating_add(Nanos::from_nanos(((gap / max) * 1e9).ceil().max(1.0) as u64));
            if cand >= p.end {
                if p.end == Nanos::MAX {
                    return None;
                }
                // Memoryless: restart the draw at the next piece.
                (now, i) = (p.end, i + 1);
                continue;
            }
            if p.from == p.to || rng.random::<f64>() * max < self.rate_at(cand) {
                return Some(cand);
            }
            now = cand;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn count(s: &ArrivalSchedule, from: Nanos, to: Nanos, seed: u64) -> usize {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let (mut t, mut n) = (from, 0);
        while let Some(next) = s.next_after(t, &mut rng) {
            if next >= to {
                break;
            }
            (t, n) = (next, n + 1);
        }
        n
    }

    #[test]
    fn a_constant_rate_sends_about_rate_times_duration() {
        let s = ArrivalSchedule::new(1000.0, &[]);
        let n = count(&s, Nanos::ZERO, Nanos::from_secs(20), 7);
        // Poisson, mean 20 000, sd 141: 5 sd either side.
        assert!((19_300..=20_700).contains(&n), "{n}");
    }

    #[test]
    fn steps_and_ramps_change_the_rate_where_the_scenario_says() {
        let s = ArrivalSchedule::new(
            100.0,
            &[
                (Nanos::from_secs(10), 1000.0, Nanos::ZERO),
                (Nanos::from_secs(20), 0.0, Nanos::from_secs(10)),
            ],
        );
        assert_eq!(s.rate_at(Nanos::from_secs(5)), 100.0);
        assert_eq!(s.rate_at(Nanos::from_secs(15)), 1000.0);
        assert_eq!(s.rate_at(Nanos::from_secs(25)), 500.0);
        let ramp = count(&s, Nanos::from_secs(20), Nanos::from_secs(30), 3);
        assert!((4_700..=5_300).contains(&ramp), "{ramp}");
        assert_eq!(count(&s, Nanos::from_secs(30), Nanos::from_secs(60), 3), 0);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(s.next_after(Nanos::from_secs(30), &mut rng), None);
    }

    #[test]
    fn the_same_seed_draws_the_same_times() {
        let s = ArrivalSchedule::new(300.0, &[]);
        let draw = |seed| {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let mut t = Nanos::ZERO;
            (0..50)
                .map(|_| {
                    t = s.next_after(t, &mut rng).unwrap();
                    t
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(9), draw(9));
        assert_ne!(draw(9), draw(10));
    }
}

//! Open-loop arrivals: a piecewise-linear rate, optionally times a daily
//! cycle, sampled as a non-homogeneous Poisson process by thinning.
//!
//! Public because the arrival law is one: `stormbreak lab` draws its
//! intended send times from this same schedule, so a lab run and a
//! simulation of one scenario and seed ask for the same arrivals.

use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;
use rand_distr::{Distribution, Exp1};
use stormbreak_policy::Nanos;

use crate::scenario::DiurnalSpec;

/// One linear piece of the rate function, per second.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: Nanos,
    /// `Nanos::MAX` for the last, open-ended piece.
    end: Nanos,
    rate_at_start: f64,
    rate_at_end: f64,
}

/// `1 + amplitude · cos(2π (t − peak) / period)`.
#[derive(Debug, Clone, Copy)]
struct Diurnal {
    amplitude: f64,
    period: Nanos,
    peak: Nanos,
}

/// A population's rate over time, per second.
///
/// # Example
///
/// ```
/// use rand::SeedableRng;
/// use stormbreak_policy::Nanos;
/// use stormbreak_sim::engine::rate::RateSchedule;
///
/// // 100/s, then 1000/s from 10 s on.
/// let s = RateSchedule::new(100.0, &[(Nanos::from_secs(10), 1000.0, Nanos::ZERO)]);
/// assert_eq!(s.rate_at(Nanos::from_secs(12)), 1000.0);
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// let first = s.next_after(Nanos::ZERO, &mut rng).unwrap();
/// assert!(first > Nanos::ZERO);
/// ```
#[derive(Debug)]
pub struct RateSchedule {
    pieces: Vec<Piece>,
    diurnal: Option<Diurnal>,
    /// The piece the last draw ended in. Arrivals are drawn at a clock that
    /// never goes back, so the next draw almost always starts there.
    /// Relaxed: a stale hint is only checked and then rescanned, so any
    /// value a thread sees is safe (the lab shares a schedule between
    /// tasks; the simulator has one thread).
    hint: AtomicUsize,
    /// Piece ends never decrease (steps in time order, none inside another's
    /// ramp): only then does a piece that holds `now` equal the first piece
    /// ending after `now`, which is what the hint stands for.
    ends_sorted: bool,
}

/// `ceil(v).max(1.0) as u64` for `v ≥ 0` (or `+∞`), without the libm call
/// the baseline x86-64 target makes for `f64::ceil`. Exact: below 2⁵² the
/// truncation is one more than the ceiling's floor unless `v` is whole;
/// from 2⁵² on every `f64` is whole; the cast saturates as before.
#[inline]
fn ceil_ns(v: f64) -> u64 {
    debug_assert!(v >= 0.0, "a gap is never negative: {v}");
    const WHOLE: f64 = 4_503_599_627_370_496.0; // 2⁵²
    if v < WHOLE {
        let t = v as u64;
        let c = if (t as f64) < v { t + 1 } else { t };
        c.max(1)
    } else {
        v as u64
    }
}

impl Clone for RateSchedule {
    fn clone(&self) -> Self {
        RateSchedule {
            pieces: self.pieces.clone(),
            diurnal: self.diurnal,
            hint: AtomicUsize::new(self.hint.load(Ordering::Relaxed)),
            ends_sorted: self.ends_sorted,
        }
    }
}

impl RateSchedule {
    /// `initial` from time 0, then each step `(at, rate, ramp)`: a linear
    /// ramp over `ramp` to `rate`, starting at `at`.
    pub fn new(initial: f64, steps: &[(Nanos, f64, Nanos)]) -> Self {
        let mut pieces = Vec::with_capacity(steps.len() * 2 + 1);
        let (mut t, mut r) = (Nanos::ZERO, initial);
        let mut push = |start, end, a, b| {
            pieces.push(Piece {
                start,
                end,
                rate_at_start: a,
                rate_at_end: b,
            })
        };
        for &(at, rate, ramp) in steps {
            if at > t {
                push(t, at, r, r);
            }
            if ramp > Nanos::ZERO {
                push(at, at + ramp, r, rate);
            }
            t = at + ramp;
            r = rate;
        }
        push(t, Nanos::MAX, r, r);
        let ends_sorted = pieces.windows(2).all(|w| w[0].end <= w[1].end);
        RateSchedule {
            pieces,
            diurnal: None,
            hint: AtomicUsize::new(0),
            ends_sorted,
        }
    }

    /// Adds (or keeps none of) a daily cycle.
    pub fn with_diurnal(mut self, d: Option<&DiurnalSpec>) -> Self {
        self.diurnal = d.map(|d| Diurnal {
            amplitude: d.amplitude,
            period: d.period,
            peak: d.peak_at,
        });
        self
    }

    /// A constant `rate` from `now` on, keeping this schedule's daily cycle.
    pub fn constant_from(&self, now: Nanos, rate: f64) -> Self {
        RateSchedule {
            diurnal: self.diurnal,
            ..RateSchedule::new(0.0, &[(now, rate, Nanos::ZERO)])
        }
    }

    fn cycle(&self, t: Nanos) -> f64 {
        match self.diurnal {
            None => 1.0,
            Some(d) => {
                let phase =
                    (t.as_nanos() as f64 - d.peak.as_nanos() as f64) / d.period.as_nanos() as f64;
                1.0 + d.amplitude * (std::f64::consts::TAU * phase).cos()
            }
        }
    }

    /// The rate at `t`, per second (the daily cycle included).
    pub fn rate_at(&self, t: Nanos) -> f64 {
        let Some(p) = self.pieces.iter().find(|p| t < p.end) else {
            return 0.0;
        };
        let base = if p.rate_at_start == p.rate_at_end {
            p.rate_at_start
        } else {
            let frac = (t - p.start).as_nanos() as f64 / (p.end - p.start).as_nanos() as f64;
            p.rate_at_start + (p.rate_at_end - p.rate_at_start) * frac
        };
        base * self.cycle(t)
    }

    /// The first piece ending after `now`: the hinted one when it is, else
    /// a scan.
    #[inline]
    fn first_piece_after(&self, now: Nanos) -> Option<usize> {
        let h = self.hint.load(Ordering::Relaxed);
        if self.ends_sorted && self.pieces[h].end > now && (h == 0 || self.pieces[h - 1].end <= now)
        {
            return Some(h);
        }
        self.pieces.iter().position(|p| now < p.end)
    }

    /// The next arrival strictly after `now`, or `None` if the rate stays 0.
    pub fn next_after<R: Rng + ?Sized>(&self, mut now: Nanos, rng: &mut R) -> Option<Nanos> {
        let mut i = self.first_piece_after(now)?;
        let amp = self.diurnal.map_or(0.0, |d| d.amplitude);
        loop {
            let p = self.pieces[i];
            let max = p.rate_at_start.max(p.rate_at_end) * (1.0 + amp);
            if max <= 0.0 {
                if p.end == Nanos::MAX {
                    return None;
                }
                now = p.end;
                i += 1;
                continue;
            }
            let gap: f64 = Exp1.sample(rng);
            // The float→int cast saturates: a gap beyond the representable
            // horizon lands at `Nanos::MAX`, after any run's end.
            let cand = now.saturating_add(Nanos::from_nanos(ceil_ns((gap / max) * 1e9)));
            if cand >= p.end {
                if p.end == Nanos::MAX {
                    return None;
                }
                // Memoryless: restart the draw at the next piece.
                now = p.end;
                i += 1;
                continue;
            }
            self.hint.store(i, Ordering::Relaxed);
            if p.rate_at_start == p.rate_at_end && self.diurnal.is_none() {
                return Some(cand);
            }
            let frac = (cand - p.start).as_nanos() as f64 / (p.end - p.start).as_nanos() as f64;
            let rate =
                (p.rate_at_start + (p.rate_at_end - p.rate_at_start) * frac) * self.cycle(cand);
            if rng.random::<f64>() * max < rate {
                return Some(cand);
            }
            now = cand;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn libm_ceil(v: f64) -> u64 {
        v.ceil().max(1.0) as u64
    }

    #[test]
    fn ceil_ns_matches_f64_ceil_at_the_edges() {
        let whole = 4_503_599_627_370_496.0_f64;
        for v in [
            0.0,
            1e-300,
            0.5,
            1.0,
            1.000_000_1,
            2.0,
            123_456.789,
            whole - 0.5,
            whole - 1.0,
            whole,
            whole + 2.0,
            whole * 2.0 + 4.0,
            1e19,
            1.9e19,
            f64::MAX,
            f64::INFINITY,
        ] {
            assert_eq!(ceil_ns(v), libm_ceil(v), "v = {v:e}");
        }
    }

    proptest! {
        #[test]
        fn ceil_ns_matches_f64_ceil(bits in 0u64..0x7FF0_0000_0000_0000) {
            let v = f64::from_bits(bits); // every finite non-negative f64
            prop_assert_eq!(ceil_ns(v), libm_ceil(v));
        }

        /// Draws through the piece hint equal draws that scan from the first
        /// piece every time (a fresh schedule per draw), with the same RNG.
        #[test]
        fn hinted_draws_equal_scanned_draws(
            seed in any::<u64>(),
            steps in prop::collection::vec((1u64..400, 0.0f64..50.0, 0u64..300), 0..6),
        ) {
            let ms = Nanos::from_millis;
            let mut at = 0;
            let steps: Vec<_> = steps
                .into_iter()
                .map(|(gap, rate, ramp)| {
                    at += gap;
                    (ms(at), rate, ms(ramp))
                })
                .collect();
            let hinted = RateSchedule::new(20.0, &steps);
            let (mut a, mut b) = (Pcg64Mcg::seed_from_u64(seed), Pcg64Mcg::seed_from_u64(seed));
            let mut now = Nanos::ZERO;
            for _ in 0..200 {
                let got = hinted.next_after(now, &mut a);
                let want = RateSchedule::new(20.0, &steps).next_after(now, &mut b);
                prop_assert_eq!(got, want);
                match got {
                    Some(t) => now = t,
                    None => break,
                }
            }
        }
    }
}

//! Open-loop arrivals: a piecewise-linear rate, optionally times a daily
//! cycle, sampled as a non-homogeneous Poisson process by thinning.

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
pub(crate) struct Diurnal {
    amplitude: f64,
    period: Nanos,
    peak: Nanos,
}

/// A population's rate over time.
#[derive(Debug, Clone)]
pub(crate) struct RateSchedule {
    pieces: Vec<Piece>,
    diurnal: Option<Diurnal>,
}

impl RateSchedule {
    /// `initial` from time 0, then each step `(at, rate, ramp)`: a linear
    /// ramp over `ramp` to `rate`, starting at `at`.
    pub(crate) fn new(initial: f64, steps: &[(Nanos, f64, Nanos)]) -> Self {
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
        RateSchedule {
            pieces,
            diurnal: None,
        }
    }

    /// Adds (or keeps none of) a daily cycle.
    pub(crate) fn with_diurnal(mut self, d: Option<&DiurnalSpec>) -> Self {
        self.diurnal = d.map(|d| Diurnal {
            amplitude: d.amplitude,
            period: d.period,
            peak: d.peak_at,
        });
        self
    }

    /// A constant `rate` from `now` on, keeping this schedule's daily cycle.
    pub(crate) fn constant_from(&self, now: Nanos, rate: f64) -> Self {
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

    /// The next arrival strictly after `now`, or `None` if the rate stays 0.
    pub(crate) fn next_after<R: Rng + ?Sized>(&self, mut now: Nanos, rng: &mut R) -> Option<Nanos> {
        let mut i = self.pieces.iter().position(|p| now < p.end)?;
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
            let cand =
                now.saturating_add(Nanos::from_nanos(((gap / max) * 1e9).ceil().max(1.0) as u64));
            if cand >= p.end {
                if p.end == Nanos::MAX {
                    return None;
                }
                // Memoryless: restart the draw at the next piece.
                now = p.end;
                i += 1;
                continue;
            }
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

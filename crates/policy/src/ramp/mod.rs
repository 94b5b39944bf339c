//! Staged restore: admit a rising fraction of traffic, step by step, and stop
//! rising while errors are high.
//!
//! GitHub's operators ended the 2026-08-17 incident by "restoring traffic
//! gradually, site by site". A [`Ramp`] is one site's restore; a
//! [`StagedRestore`] restores several sites one after another.
//!
//! # Source law
//!
//! * The step list and minimum hold per step are **Argo Rollouts' canary
//!   steps** (`setWeight: N` followed by `pause: {duration: …}`), applied to the
//!   admitted fraction instead of a canary's traffic weight.
//! * The guard is **Flagger's canary analysis**: advancement happens only while
//!   the metric check passes (Flagger: request success rate over a 1 m
//!   `interval`); a failing check halts advancement, and `threshold` failed checks
//!   in a row (5 × 1 m in Flagger's examples) trigger a rollback. Here the
//!   rollback is **one step back**, not back to zero: during a restore the
//!   traffic that is not admitted is being shed, and dropping a site from 50%
//!   to 0% because its error rate rose turns a partial outage back into a full one.
//! * The error rate is measured over a **Hystrix-style rolling window** of time
//!   buckets with a minimum request volume (see [`ErrorGuardConfig`]).
//!
//! # The rules, precisely
//!
//! * [`Ramp::start`] at `t0` enters step 0. While the guard is clear, step `k`
//!   is entered at `t0 + k·hold` (on a healthy run the schedule is exact, however
//!   sparsely the ramp is called).
//! * Whenever the ramp is called and the guard is breached, the ramp **holds**:
//!   no step is entered. When the guard is next seen clear, the hold restarts:
//!   the next step comes a full `hold` after the clear, because the time spent
//!   in breach showed the step was *not* healthy and says nothing in its favour.
//! * If a breach lasts `step_back_after` (when non-zero), the ramp steps back one
//!   step (never below step 0) and the breach clock restarts, so a persistent
//!   breach walks the ramp down one step per `step_back_after`.
//! * The guard keeps working after the last step (1.0) is reached, so a site
//!   that degrades again can still step back.
//! * With no traffic in the window the guard is clear: a ramp that waited for
//!   evidence would never restore a quiet site.
//!
//! # Defaults
//!
//! `steps` [0.05, 0.1, 0.25, 0.5, 1.0], `hold` 5 min, `step_back_after` 5 min
//! (Flagger's 5 failed checks at 1 m), guard as in [`ErrorGuardConfig`]
//! (60 s in 6 buckets, > 5% errors over ≥ 20 requests).
//!
//! ```
//! use stormbreak_policy::ramp::{Ramp, RampConfig};
//! use stormbreak_policy::Nanos;
//!
//! let mut ramp = Ramp::new(&RampConfig::default()).unwrap();
//! ramp.start(Nanos::ZERO);
//! assert_eq!(ramp.fraction(Nanos::ZERO), 0.05);
//! assert_eq!(ramp.fraction(5 * Nanos::MINUTE), 0.1);
//! assert_eq!(ramp.fraction(20 * Nanos::MINUTE), 1.0);
//! ```

mod guard;
mod staged;

pub use guard::{ErrorGuardConfig, MAX_BUCKETS};
pub use staged::{MAX_SITES, StagedRestore, StagedRestoreConfig};

use crate::FieldError;
use crate::Nanos;
use guard::ErrorGuard;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "ramp";

/// Largest accepted number of steps.
pub const MAX_STEPS: usize = 1000;

/// Most due instants [`Ramp::advance`] takes one by one in one call: more
/// than a window's slides plus every step and step back that can fall due
/// between two calls.
pub(crate) const MAX_CATCH_UP: usize = 1 << 20;

/// One site's ramp parameters.
///
/// Missing fields in a config file take the [`Default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RampConfig {
    /// Admitted fractions, strictly increasing, each in (0, 1], ending at 1.0.
    /// Default [0.05, 0.1, 0.25, 0.5, 1.0].
    pub steps: Vec<f64>,
    /// Minimum time at a step, with the guard clear, before the next. Default 5 min.
    pub hold: Nanos,
    /// Breach duration after which the ramp steps back one step; 0 never steps
    /// back (hold only). Must be at least the guard window, so the decision
    /// rests on outcomes observed at the current step. Default 5 min.
    pub step_back_after: Nanos,
    /// The error-rate guard.
    pub guard: ErrorGuardConfig,
}

impl Default for RampConfig {
    fn default() -> Self {
        RampConfig {
            steps: vec![0.05, 0.1, 0.25, 0.5, 1.0],
            hold: 5 * Nanos::MINUTE,
            step_back_after: 5 * Nanos::MINUTE,
            guard: ErrorGuardConfig::default(),
        }
    }
}

impl RampConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.steps.is_empty() || self.steps.len() > MAX_STEPS {
            return Err(FieldError::new(
                FAMILY,
                "steps",
                "a list of 1 to 1000 fractions",
                format!("{} entries", self.steps.len()),
            ));
        }
        for (i, &f) in self.steps.iter().enumerate() {
            if !(f > 0.0 && f <= 1.0) {
                return Err(FieldError::new(
                    FAMILY,
                    "steps",
                    "fractions in (0, 1]",
                    format!("steps[{i}] = {f}"),
                ));
            }
            if i > 0 && f <= self.steps[i - 1] {
                return Err(FieldError::new(
                    FAMILY,
                    "steps",
                    "strictly increasing",
                    format!("steps[{i}] = {f} after {}", self.steps[i - 1]),
                ));
            }
        }
        if self.steps.last() != Some(&1.0) {
            return Err(FieldError::new(
                FAMILY,
                "steps",
                "to end at 1.0 (a restore ends with all traffic admitted)",
                format!("{:?}", self.steps.last()),
            ));
        }
        if self.hold == Nanos::ZERO {
            return Err(FieldError::new(FAMILY, "hold", "> 0", "0".to_owned()));
        }
        let g = &self.guard;
        if !(1..=MAX_BUCKETS).contains(&g.buckets) {
            return Err(FieldError::new(
                FAMILY,
                "guard.buckets",
                "between 1 and 3600",
                g.buckets.to_string(),
            ));
        }
        if g.window < Nanos::from_nanos(u64::from(g.buckets)) {
            return Err(FieldError::new(
                FAMILY,
                "guard.window",
                "at least 1 ns per bucket",
                crate::units::format_duration(g.window),
            ));
        }
        if !(g.error_rate_threshold >= 0.0 && g.error_rate_threshold < 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "guard.error_rate_threshold",
                "in [0, 1)",
                g.error_rate_threshold.to_string(),
            ));
        }
        if g.min_requests == 0 {
            return Err(FieldError::new(
                FAMILY,
                "guard.min_requests",
                "≥ 1",
                "0".to_owned(),
            ));
        }
        if self.step_back_after != Nanos::ZERO && self.step_back_after < g.window {
            return Err(FieldError::new(
                FAMILY,
                "step_back_after",
                "0 (never) or at least guard.window",
                crate::units::format_duration(self.step_back_after),
            ));
        }
        Ok(())
    }
}

/// Where a ramp is, for metrics and operator dashboards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RampPhase {
    /// Not started: admits nothing.
    Idle,
    /// Climbing: the guard is clear and the last step is still ahead.
    Ramping,
    /// The guard is breached: not climbing, maybe stepping back.
    Holding,
    /// At the last step (1.0) with the guard clear.
    Complete,
}

/// One site's staged restore; see the [module docs](self) for the law and defaults.
#[derive(Clone, Debug)]
pub struct Ramp {
    steps: Box<[f64]>,
    hold: Nanos,
    step_back_after: Nanos,
    guard: ErrorGuard,
    started: bool,
    step: usize,
    /// Start of the current clear stretch at this step; the next step is due at `+ hold`.
    hold_since: Nanos,
    breach_since: Option<Nanos>,
    /// First time each step was entered, for the coordinator and for reports.
    entered_at: Box<[Option<Nanos>]>,
    last_now: Nanos,
    steps_back: u64,
}

impl Ramp {
    /// An idle ramp (admits nothing until [`start`](Self::start)); allocates here only.
    pub fn new(config: &RampConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Ramp {
            steps: config.steps.clone().into_boxed_slice(),
            hold: config.hold,
            step_back_after: config.step_back_after,
            guard: ErrorGuard::new(&config.guard),
            started: false,
            step: 0,
            hold_since: Nanos::ZERO,
            breach_since: None,
            entered_at: vec![None; config.steps.len()].into_boxed_slice(),
            last_now: Nanos::ZERO,
            steps_back: 0,
        })
    }

    /// Starts (or restarts) the ramp at step 0, forgetting earlier outcomes.
    pub fn start(&mut self, now: Nanos) {
        self.started = true;
        self.step = 0;
        self.hold_since = now;
        self.breach_since = None;
        self.entered_at.fill(None);
        self.entered_at[0] = Some(now);
        self.last_now = now;
        self.guard.clear();
    }

    /// An operator's manual step: brought up to `now`, the ramp moves to
    /// its next step at once, as if the hold had passed, and that step's
    /// hold starts now. Nothing happens before [`start`](Self::start) or at
    /// the last step.
    pub fn step_up(&mut self, now: Nanos) {
        if !self.started {
            return;
        }
        self.advance(now);
        let now = now.max(self.last_now);
        if self.step + 1 < self.steps.len() {
            self.step += 1;
            self.hold_since = now;
            self.breach_since = None;
            self.entered_at[self.step].get_or_insert(now);
        }
    }

    /// The admitted fraction now (0 before [`start`](Self::start)).
    pub fn fraction(&mut self, now: Nanos) -> f64 {
        self.advance(now);
        self.current_fraction()
    }

    /// Admits one request with probability [`fraction`](Self::fraction). Draws
    /// from `rng` only when the fraction is strictly between 0 and 1.
    pub fn admit<R: Rng + ?Sized>(&mut self, now: Nanos, rng: &mut R) -> bool {
        let f = self.fraction(now);
        admit_with(f, rng)
    }

    /// Reports one admitted request's outcome to the guard.
    pub fn observe(&mut self, now: Nanos, ok: bool) {
        self.observe_counts(now, u64::from(ok), u64::from(!ok));
    }

    /// Reports a batch of outcomes (e.g. one metrics scrape) to the guard.
    pub fn observe_counts(&mut self, now: Nanos, ok: u64, errors: u64) {
        if !self.started {
            return;
        }
        // Steps already due are taken on the guard as it stood before these
        // outcomes, so a sparse caller gets the same schedule as a busy one.
        self.advance(now);
        let now = now.max(self.last_now);
        self.guard.record(now, ok, errors);
        self.advance(now);
    }

    /// Brings the ramp up to `now`: applies the hold, step-back and advance
    /// rules. Every change due before `now` (each instant
    /// [`poll_timeout`](Self::poll_timeout) names) is taken at its own
    /// instant first, so a caller that only brings the ramp up to date when
    /// a request comes (`stormbreak guard`) gets the same schedule as one
    /// woken at every `poll_timeout` (the simulator): a breach that clears
    /// or a step back that falls due between two requests starts the next
    /// hold when it happened, not at the next request.
    pub fn advance(&mut self, now: Nanos) {
        if !self.started {
            return;
        }
        // Each due instant is strictly later than the last (a slide is past
        // the current slice, a hold or step back starts a new one), so this
        // ends; the bound only guards against a broken invariant.
        for _ in 0..MAX_CATCH_UP {
            match self.poll_timeout() {
                Some(due) if due < now => self.advance_once(due),
                _ => break,
            }
        }
        self.advance_once(now);
    }

    fn advance_once(&mut self, now: Nanos) {
        let now = now.max(self.last_now);
        self.last_now = now;
        if self.guard.breached(now) {
            let since = *self.breach_since.get_or_insert(now);
            if self.step_back_after > Nanos::ZERO
                && now - since >= self.step_back_after
                && self.step > 0
            {
                self.step -= 1;
                self.steps_back += 1;
                self.hold_since = now;
                self.breach_since = Some(now);
            }
            return;
        }
        if self.breach_since.take().is_some() {
            self.hold_since = now;
        }
        while self.step + 1 < self.steps.len() && now - self.hold_since >= self.hold {
            self.hold_since += self.hold;
            self.step += 1;
            self.entered_at[self.step].get_or_insert(self.hold_since);
        }
    }

    /// The fraction as of the last call, without advancing.
    pub fn current_fraction(&self) -> f64 {
        if self.started {
            self.steps[self.step]
        } else {
            0.0
        }
    }

    /// Index of the current step (0 when idle).
    pub fn step_index(&self) -> usize {
        self.step
    }

    /// Number of configured steps.
    pub fn step_count(&self) -> usize {
        self.steps.len()
    }

    /// When step `index` was first entered, if it has been.
    pub fn entered_step_at(&self, index: usize) -> Option<Nanos> {
        self.entered_at.get(index).copied().flatten()
    }

    /// When the current breach began, if the guard was breached at the last call.
    pub fn breach_since(&self) -> Option<Nanos> {
        self.breach_since
    }

    /// Times the ramp stepped back since it was started.
    pub fn steps_back(&self) -> u64 {
        self.steps_back
    }

    /// The guard's error rate at `now`, once it has enough requests.
    pub fn error_rate(&self, now: Nanos) -> Option<f64> {
        self.guard.error_rate(now)
    }

    /// The earliest instant at which [`advance`](Self::advance) could change
    /// this ramp without new outcomes, or `None` if it cannot (idle, or
    /// complete with a clear guard): the next step when its hold ends, the
    /// next slide of the guard's window while it holds outcomes (a breach
    /// can begin or clear as old slices leave), and a step back when a
    /// breach has lasted `step_back_after`. A driver that calls `advance`
    /// at this instant sees every change on time, whatever else wakes it.
    ///
    /// ```
    /// use stormbreak_policy::ramp::{Ramp, RampConfig};
    /// use stormbreak_policy::Nanos;
    /// let mut ramp = Ramp::new(&RampConfig::default()).unwrap();
    /// assert_eq!(ramp.poll_timeout(), None); // idle
    /// ramp.start(Nanos::ZERO);
    /// assert_eq!(ramp.poll_timeout(), Some(5 * Nanos::MINUTE)); // the first hold ends
    /// ```
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if !self.started {
            return None;
        }
        let mut next: Option<Nanos> = None;
        let mut earliest = |t: Nanos| next = Some(next.map_or(t, |n| n.min(t)));
        if self.breach_since.is_none() && self.step + 1 < self.steps.len() {
            earliest(self.hold_since.saturating_add(self.hold));
        }
        if let Some(since) = self.breach_since
            && self.step_back_after > Nanos::ZERO
            && self.step > 0
        {
            earliest(since.saturating_add(self.step_back_after));
        }
        if let Some(slide) = self.guard.next_slide(self.last_now) {
            earliest(slide);
        }
        next
    }

    /// Phase as of the last call.
    pub fn phase(&self) -> RampPhase {
        if !self.started {
            RampPhase::Idle
        } else if self.breach_since.is_some() {
            RampPhase::Holding
        } else if self.step + 1 == self.steps.len() {
            RampPhase::Complete
        } else {
            RampPhase::Ramping
        }
    }

    fn is_started(&self) -> bool {
        self.started
    }

    /// Back to idle, keeping the allocations.
    fn stop(&mut self) {
        self.started = false;
        self.step = 0;
        self.breach_since = None;
    }
}

/// Admits one request with probability `fraction`.
///
/// `fraction` ≥ 1 and ≤ 0 are decided without a draw, so a finished ramp costs
/// no randomness and a sim's RNG stream is not perturbed by it. Any gate that
/// admits a share (a ramp step, an operator's manual admission gate) calls
/// this one function.
///
/// ```
/// use stormbreak_policy::ramp::admit_with;
/// let mut rng = rand_pcg::Pcg64Mcg::new(1);
/// assert!(admit_with(1.0, &mut rng));
/// assert!(!admit_with(0.0, &mut rng));
/// ```
pub fn admit_with<R: Rng + ?Sized>(fraction: f64, rng: &mut R) -> bool {
    if fraction >= 1.0 {
        true
    } else if fraction <= 0.0 {
        false
    } else {
        rng.random::<f64>() < fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    const M: Nanos = Nanos::MINUTE;

    fn started(config: &RampConfig, at: Nanos) -> Ramp {
        let mut r = Ramp::new(config).unwrap();
        r.start(at);
        r
    }

    /// 100 outcomes with `errors` failures, at `now`.
    fn batch(r: &mut Ramp, now: Nanos, errors: u64) {
        r.observe_counts(now, 100 - errors, errors);
    }

    #[test]
    fn healthy_run_follows_the_hand_computed_schedule() {
        // Start at 2 min; hold 5 min: 0.05 @2, 0.1 @7, 0.25 @12, 0.5 @17, 1.0 @22.
        let mut r = started(&RampConfig::default(), 2 * M);
        assert_eq!(r.fraction(2 * M), 0.05);
        assert_eq!(r.fraction(7 * M - Nanos::NANOSECOND), 0.05);
        assert_eq!(r.fraction(7 * M), 0.1);
        assert_eq!(r.phase(), RampPhase::Ramping);
        // Called rarely: a single call at 30 min catches up on the exact times.
        assert_eq!(r.fraction(30 * M), 1.0);
        let entered: Vec<_> = (0..5).map(|i| r.entered_step_at(i)).collect();
        assert_eq!(
            entered,
            [2 * M, 7 * M, 12 * M, 17 * M, 22 * M].map(Some).to_vec()
        );
        assert_eq!(r.phase(), RampPhase::Complete);
    }

    #[test]
    fn healthy_traffic_does_not_slow_the_schedule() {
        // 2% errors (below 5%) every 10 s never breach.
        let mut r = started(&RampConfig::default(), Nanos::ZERO);
        let mut t = Nanos::ZERO;
        while t <= 20 * M {
            batch(&mut r, t, 2);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.entered_step_at(4), Some(20 * M));
    }

    #[test]
    fn breach_holds_the_step_and_resuming_restarts_the_hold() {
        let config = RampConfig {
            step_back_after: Nanos::ZERO,
            ..RampConfig::default()
        };
        let mut r = started(&config, Nanos::ZERO);
        // Step 1 (0.1) from 5 min. From 6:00 to 9:50, 10% errors every 10 s.
        let mut t = 6 * M;
        while t < 10 * M {
            batch(&mut r, t, 10);
            assert_eq!(r.phase(), RampPhase::Holding);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.breach_since(), Some(6 * M));
        // At 10 min step 2 would be due; the guard still sees the 9:50 bucket.
        assert_eq!(r.fraction(10 * M), 0.1);
        assert_eq!(r.fraction(650 * Nanos::SECOND - Nanos::NANOSECOND), 0.1);
        // Last bad bucket is slot 59 (590 s); it leaves the 6-slot window at slot 65 = 650 s.
        // The guard clears at 650 s: the hold restarts, next step at 650 + 300 = 950 s.
        assert_eq!(r.fraction(650 * Nanos::SECOND), 0.1);
        assert_eq!(r.phase(), RampPhase::Ramping);
        assert_eq!(r.fraction(950 * Nanos::SECOND - Nanos::NANOSECOND), 0.1);
        assert_eq!(r.fraction(950 * Nanos::SECOND), 0.25);
        assert_eq!(r.entered_step_at(2), Some(950 * Nanos::SECOND));
        assert_eq!(r.steps_back(), 0);
    }

    #[test]
    fn long_breach_steps_back_one_step_per_step_back_after() {
        let mut r = started(&RampConfig::default(), Nanos::ZERO);
        // Healthy until 16 min: at step 3 (0.5) since 15 min.
        assert_eq!(r.fraction(16 * M), 0.5);
        // 30% errors every 10 s from 16 min on.
        let mut t = 16 * M;
        while t < 21 * M {
            batch(&mut r, t, 30);
            assert_eq!(r.current_fraction(), 0.5, "holds at 20 min, no advance");
            t += 10 * Nanos::SECOND;
        }
        // Breach since 16 min; step_back_after 5 min → back to 0.25 at 21 min.
        batch(&mut r, 21 * M, 30);
        assert_eq!(r.current_fraction(), 0.25);
        assert_eq!(r.steps_back(), 1);
        // Breach clock restarted at 21 min → 0.1 at 26 min.
        let mut t = 21 * M + 10 * Nanos::SECOND;
        while t <= 26 * M {
            batch(&mut r, t, 30);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.current_fraction(), 0.1);
        assert_eq!(r.steps_back(), 2);
    }

    #[test]
    fn step_back_stops_at_the_first_step() {
        let mut r = started(&RampConfig::default(), Nanos::ZERO);
        let mut t = Nanos::ZERO;
        while t <= 30 * M {
            batch(&mut r, t, 50);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.step_index(), 0);
        assert_eq!(r.current_fraction(), 0.05);
        assert_eq!(r.steps_back(), 0);
    }

    #[test]
    fn idle_ramp_admits_nothing_and_ignores_outcomes() {
        let mut r = Ramp::new(&RampConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        r.observe_counts(Nanos::ZERO, 0, 1000);
        assert!(!r.admit(Nanos::from_secs(1), &mut rng));
        assert_eq!(r.phase(), RampPhase::Idle);
        r.start(Nanos::from_secs(2));
        assert_eq!(r.error_rate(Nanos::from_secs(2)), None);
    }

    #[test]
    fn admit_matches_the_fraction_statistically() {
        // fraction 0.25 (step 2 at 10 min). 40 000 draws: σ = √(n p (1−p)) ≈ 86.6;
        // accept 10 000 ± 5σ ≈ ± 433.
        let mut r = started(&RampConfig::default(), Nanos::ZERO);
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let admitted = (0..40_000).filter(|_| r.admit(10 * M, &mut rng)).count();
        assert!((9_567..=10_433).contains(&admitted), "admitted {admitted}");
    }

    #[test]
    fn validation_names_the_field() {
        let bad = |f: fn(&mut RampConfig)| {
            let mut c = RampConfig::default();
            f(&mut c);
            Ramp::new(&c).unwrap_err()
        };
        assert_eq!(bad(|c| c.steps.clear()).field(), "steps");
        assert_eq!(bad(|c| c.steps = vec![0.5, 0.2, 1.0]).field(), "steps");
        assert_eq!(bad(|c| c.steps = vec![0.0, 1.0]).field(), "steps");
        assert_eq!(bad(|c| c.steps = vec![0.5, 0.9]).field(), "steps");
        assert_eq!(bad(|c| c.hold = Nanos::ZERO).field(), "hold");
        assert_eq!(bad(|c| c.guard.buckets = 0).field(), "guard.buckets");
        assert_eq!(
            bad(|c| c.guard.window = Nanos::from_nanos(3)).field(),
            "guard.window"
        );
        assert_eq!(
            bad(|c| c.guard.error_rate_threshold = f64::NAN).field(),
            "guard.error_rate_threshold"
        );
        assert_eq!(
            bad(|c| c.guard.min_requests = 0).field(),
            "guard.min_requests"
        );
        let e = bad(|c| c.step_back_after = Nanos::from_secs(30));
        assert_eq!(
            e.to_string(),
            "ramp: step_back_after must be 0 (never) or at least guard.window, got 30s"
        );
    }

    #[test]
    fn config_reads_human_durations_and_rejects_unknown_fields() {
        let c: RampConfig = serde_json::from_str(
            r#"{"steps": [0.5, 1.0], "hold": "2m", "guard": {"window": "30s"}}"#,
        )
        .unwrap();
        assert_eq!(c.hold, 2 * M);
        assert_eq!(c.guard.window, Nanos::from_secs(30));
        assert_eq!(c.guard.buckets, 6);
        assert!(serde_json::from_str::<RampConfig>(r#"{"holds": "2m"}"#).is_err());
        assert!(serde_json::from_str::<RampConfig>(r#"{"guard": {"size": 1}}"#).is_err());
    }

    proptest! {
        /// Whatever the outcomes: the fraction is always one of the steps, moves
        /// at most one step down per call, never climbs while the guard is
        /// breached, and never climbs sooner than `hold` after the last step change.
        #[test]
        fn ramp_invariants(events in proptest::collection::vec((0u64..120, 0u64..40, 0u64..40), 1..300)) {
            let config = RampConfig::default();
            let mut r = started(&config, Nanos::ZERO);
            let mut now = Nanos::ZERO;
            let mut last_change = Nanos::ZERO;
            let mut last_step = 0;
            for (dt_s, ok, err) in events {
                now += dt_s * Nanos::SECOND;
                r.observe_counts(now, ok, err);
                let step = r.step_index();
                prop_assert!(config.steps.contains(&r.current_fraction()));
                prop_assert!(step + 1 >= last_step, "at most one step back per call");
                if step > last_step {
                    // Climbing k steps needs k full holds since the last change,
                    // and no step is entered after a breach began.
                    prop_assert!(r.breach_since().is_none_or(|b| r.hold_since <= b));
                    prop_assert!(r.hold_since >= last_change + config.hold * (step - last_step) as u64);
                }
                if step != last_step {
                    last_change = r.hold_since;
                    last_step = step;
                }
            }
        }
    }
}

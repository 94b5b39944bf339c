//! Circuit breaker: stop calling a dependency that is failing, probe it, resume.
//!
//! # Source law
//!
//! The closed / open / half-open state machine of **resilience4j's
//! `CircuitBreaker`** (count-based sliding window), with the **Envoy outlier
//! detection** `consecutive_5xx` trip added as a second, optional trigger:
//!
//! * **Closed**: every call is allowed; its outcome goes into a ring of the last
//!   `sliding_window_size` outcomes. Once at least `minimum_number_of_calls` are
//!   recorded, a failure rate `failures / recorded` **equal to or above**
//!   `failure_rate_threshold` trips the breaker (resilience4j's rule, checked
//!   after every recorded call, success or failure). Independently,
//!   `consecutive_failures` failures in a row trip it (Envoy's rule).
//! * **Open**: every call is rejected until `opened_at + wait_duration_in_open_state`.
//!   The first call at or after that instant moves the breaker to half-open
//!   (resilience4j with `automaticTransitionFromOpenToHalfOpenEnabled = false`:
//!   the transition happens on the next call, no timer is needed).
//! * **Half-open**: at most `permitted_number_of_calls_in_half_open_state` probes are
//!   admitted; further calls are rejected. When that many probes have succeeded
//!   the breaker closes with an empty window; the first probe failure re-opens it
//!   and stamps a new `opened_at`.
//!
//! Half-open is deliberately stricter than resilience4j, which closes if the
//! failure rate *of the probes* is below the threshold: with the default 50%, a
//! dependency that still fails 4 calls in 10 would be declared healthy and the
//! full load returned to it, which is how a recovering service is knocked over
//! again (the "second storm" of the 2026-08-17 incident).
//!
//! # Late outcomes
//!
//! Every admitted call carries a [`Ticket`] stamped with the breaker's *epoch*,
//! which advances at each transition. An outcome whose ticket belongs to an
//! earlier epoch describes the dependency as it was before the last transition
//! and is ignored (counted in [`BreakerStats::stale_outcomes`]). In particular a
//! failure reported while open — a slow response to a call admitted before the
//! trip — never re-stamps `opened_at`: otherwise a dependency with long timeouts
//! would keep extending its own outage with its own late answers.
//!
//! # Defaults
//!
//! resilience4j's published defaults: `failure_rate_threshold` 0.5 (50%),
//! `sliding_window_size` 100, `minimum_number_of_calls` 100,
//! `wait_duration_in_open_state` 60 s, `permitted_number_of_calls_in_half_open_state` 10;
//! `consecutive_failures` 0 (off, as in resilience4j). [`BreakerConfig::envoy_outlier_detection`]
//! gives Envoy's: `consecutive_5xx` 5, `base_ejection_time` 30 s.
//!
//! ```
//! use stormbreak_policy::breaker::{Breaker, BreakerConfig, BreakerState};
//! use stormbreak_policy::Nanos;
//!
//! let config = BreakerConfig { consecutive_failures: 3, ..BreakerConfig::default() };
//! let mut breaker = Breaker::new(&config).unwrap();
//! for _ in 0..3 {
//!     let ticket = breaker.allow(Nanos::ZERO).ticket().unwrap();
//!     breaker.on_failure(Nanos::ZERO, ticket);
//! }
//! assert_eq!(breaker.state(), BreakerState::Open);
//! assert!(!breaker.allow(Nanos::from_secs(59)).is_allowed());
//! // 60 s after the trip the next call is a half-open probe.
//! assert!(breaker.allow(Nanos::from_secs(60)).ticket().unwrap().is_probe());
//! ```

use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "breaker";

/// Largest accepted `sliding_window_size`; the ring is allocated up front, so
/// a typo such as `1e9` must not turn into a gigabyte.
pub const MAX_WINDOW: u32 = 1 << 20;

/// Breaker parameters; field names follow resilience4j's `CircuitBreakerConfig`.
///
/// Missing fields in a config file take the [`Default`] (resilience4j's defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Failure rate (0, 1] at or above which the closed breaker trips. Default 0.5.
    pub failure_rate_threshold: f64,
    /// Number of most recent outcomes the failure rate is computed over; 0 turns
    /// the failure-rate trip off. Default 100.
    pub sliding_window_size: u32,
    /// Outcomes that must be recorded before the failure rate is trusted, so the
    /// first unlucky call after a restart cannot trip it. Default 100.
    pub minimum_number_of_calls: u32,
    /// Failures in a row that trip the breaker regardless of the rate (Envoy
    /// `consecutive_5xx`); 0 turns this trip off. Default 0.
    pub consecutive_failures: u32,
    /// How long the breaker stays open before admitting probes. Default 60 s.
    pub wait_duration_in_open_state: Nanos,
    /// Probes admitted while half-open; all must succeed to close. Default 10.
    pub permitted_number_of_calls_in_half_open_state: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_rate_threshold: 0.5,
            sliding_window_size: 100,
            minimum_number_of_calls: 100,
            consecutive_failures: 0,
            wait_duration_in_open_state: 60 * Nanos::SECOND,
            permitted_number_of_calls_in_half_open_state: 10,
        }
    }
}

impl BreakerConfig {
    /// Envoy outlier detection's consecutive-5xx ejection: trip after 5
    /// failures in a row, stay out for `base_ejection_time` = 30 s, failure-rate
    /// trip off. Envoy returns an ejected host to full service without probing;
    /// one half-open probe is the closest breaker equivalent.
    pub fn envoy_outlier_detection() -> Self {
        BreakerConfig {
            sliding_window_size: 0,
            consecutive_failures: 5,
            wait_duration_in_open_state: 30 * Nanos::SECOND,
            permitted_number_of_calls_in_half_open_state: 1,
            ..BreakerConfig::default()
        }
    }

    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        let t = self.failure_rate_threshold;
        if !(t > 0.0 && t <= 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "failure_rate_threshold",
                "in (0, 1]",
                t.to_string(),
            ));
        }
        if self.sliding_window_size > MAX_WINDOW {
            return Err(FieldError::new(
                FAMILY,
                "sliding_window_size",
                "at most 1048576",
                self.sliding_window_size.to_string(),
            ));
        }
        if self.sliding_window_size > 0
            && !(1..=self.sliding_window_size).contains(&self.minimum_number_of_calls)
        {
            return Err(FieldError::new(
                FAMILY,
                "minimum_number_of_calls",
                "between 1 and sliding_window_size",
                self.minimum_number_of_calls.to_string(),
            ));
        }
        if self.sliding_window_size == 0 && self.consecutive_failures == 0 {
            return Err(FieldError::new(
                FAMILY,
                "sliding_window_size",
                "≥ 1 when consecutive_failures is 0 (otherwise nothing can trip the breaker)",
                "0".to_owned(),
            ));
        }
        if self.wait_duration_in_open_state == Nanos::ZERO {
            return Err(FieldError::new(
                FAMILY,
                "wait_duration_in_open_state",
                "> 0",
                "0".to_owned(),
            ));
        }
        if self.permitted_number_of_calls_in_half_open_state == 0 {
            return Err(FieldError::new(
                FAMILY,
                "permitted_number_of_calls_in_half_open_state",
                "≥ 1",
                "0".to_owned(),
            ));
        }
        Ok(())
    }
}

/// The breaker's state, as exported to metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls flow; outcomes are recorded.
    Closed,
    /// Calls are rejected until the wait has passed.
    Open,
    /// A bounded number of probes decide whether to close or re-open.
    HalfOpen,
}

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionCause {
    /// Closed → open: the window's failure rate reached the threshold.
    FailureRate,
    /// Closed → open: `consecutive_failures` failures in a row.
    ConsecutiveFailures,
    /// Open → half-open: the open wait elapsed.
    WaitElapsed,
    /// Half-open → open: a probe failed.
    ProbeFailed,
    /// Half-open → closed: every permitted probe succeeded.
    ProbesSucceeded,
}

/// One state change, for metrics and event logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a policy decision must be acted on"]
pub struct Transition {
    /// State before.
    pub from: BreakerState,
    /// State after.
    pub to: BreakerState,
    /// When it happened.
    pub at: Nanos,
    /// Why.
    pub cause: TransitionCause,
}

/// Counters since construction, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BreakerStats {
    /// Calls admitted (probes included).
    pub allowed: u64,
    /// Calls rejected while open or with the half-open probes used up.
    pub rejected: u64,
    /// Half-open probes admitted.
    pub probes: u64,
    /// Outcomes ignored because their ticket predates the last transition.
    pub stale_outcomes: u64,
    /// Transitions into open (trips and re-opens).
    pub opened: u64,
    /// Transitions into half-open.
    pub half_opened: u64,
    /// Transitions into closed.
    pub closed: u64,
}

/// Proof that a call was admitted; hand it back with the call's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    epoch: u64,
    probe: bool,
}

impl Ticket {
    /// Whether this call is a half-open probe (its outcome decides close or re-open).
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

/// The answer to [`Breaker::allow`].
#[must_use = "an admitted call must report its outcome with its ticket"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Make the call, then report its outcome with this ticket.
    Allowed(Ticket),
    /// Do not call; fail fast (the caller may use [`Breaker::retry_after`]).
    Rejected,
}

impl Admission {
    /// Whether the call may proceed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Admission::Allowed(_))
    }

    /// The ticket of an admitted call.
    pub fn ticket(self) -> Option<Ticket> {
        match self {
            Admission::Allowed(t) => Some(t),
            Admission::Rejected => None,
        }
    }
}

/// Ring of the last `capacity` outcomes with a running failure count, so the
/// failure rate is O(1) per call and the ring is never reallocated.
#[derive(Clone, Debug)]
struct OutcomeWindow {
    failed: Box<[bool]>,
    next: usize,
    recorded: u32,
    failures: u32,
}

impl OutcomeWindow {
    fn new(capacity: u32) -> Self {
        OutcomeWindow {
            failed: vec![false; capacity as usize].into_boxed_slice(),
            next: 0,
            recorded: 0,
            failures: 0,
        }
    }

    fn record(&mut self, failed: bool) {
        if self.failed.is_empty() {
            return;
        }
        if self.recorded as usize == self.failed.len() {
            self.failures -= u32::from(self.failed[self.next]);
        } else {
            self.recorded += 1;
        }
        self.failed[self.next] = failed;
        self.failures += u32::from(failed);
        self.next = (self.next + 1) % self.failed.len();
    }

    fn clear(&mut self) {
        self.next = 0;
        self.recorded = 0;
        self.failures = 0;
    }

    fn failure_rate(&self) -> f64 {
        if self.recorded == 0 {
            0.0
        } else {
            f64::from(self.failures) / f64::from(self.recorded)
        }
    }
}

/// A circuit breaker (resilience4j state machine, optional Envoy
/// consecutive-failure trip); see the [module docs](self) for the law and defaults.
#[derive(Clone, Debug)]
pub struct Breaker {
    config: BreakerConfig,
    window: OutcomeWindow,
    consecutive_failures: u32,
    state: BreakerState,
    epoch: u64,
    opened_at: Nanos,
    probes_admitted: u32,
    probes_succeeded: u32,
    last_transition: Option<Transition>,
    stats: BreakerStats,
}

impl Breaker {
    /// A closed breaker; allocates its outcome ring once, here.
    pub fn new(config: &BreakerConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Breaker {
            config: config.clone(),
            window: OutcomeWindow::new(config.sliding_window_size),
            consecutive_failures: 0,
            state: BreakerState::Closed,
            epoch: 0,
            opened_at: Nanos::ZERO,
            probes_admitted: 0,
            probes_succeeded: 0,
            last_transition: None,
            stats: BreakerStats::default(),
        })
    }

    /// The configuration this breaker was built from.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// Whether a call may be made now. An open breaker whose wait has elapsed
    /// turns half-open here and admits the first probe.
    pub fn allow(&mut self, now: Nanos) -> Admission {
        if self.state == BreakerState::Open
            && now
                >= self
                    .opened_at
                    .saturating_add(self.config.wait_duration_in_open_state)
        {
            // Recorded as `last_transition`; `allow` reports admission only.
            let _ = self.transition(now, BreakerState::HalfOpen, TransitionCause::WaitElapsed);
        }
        match self.state {
            BreakerState::Closed => self.admit(false),
            BreakerState::Open => self.reject(),
            BreakerState::HalfOpen => {
                if self.probes_admitted < self.config.permitted_number_of_calls_in_half_open_state {
                    self.probes_admitted += 1;
                    self.stats.probes += 1;
                    self.admit(true)
                } else {
                    self.reject()
                }
            }
        }
    }

    /// Reports a successful call. Returns the transition it caused, if any.
    #[must_use = "a state change should be logged or exported"]
    pub fn on_success(&mut self, now: Nanos, ticket: Ticket) -> Option<Transition> {
        if !self.is_current(ticket) {
            return None;
        }
        match self.state {
            BreakerState::Closed => {
                self.consecutive_failures = 0;
                self.window.record(false);
                // resilience4j checks the rate after every recorded call: the
                // call that completes `minimum_number_of_calls` may be a success.
                let cause = self.trip_cause()?;
                Some(self.transition(now, BreakerState::Open, cause))
            }
            BreakerState::HalfOpen => {
                self.probes_succeeded += 1;
                if self.probes_succeeded >= self.config.permitted_number_of_calls_in_half_open_state
                {
                    Some(self.transition(
                        now,
                        BreakerState::Closed,
                        TransitionCause::ProbesSucceeded,
                    ))
                } else {
                    None
                }
            }
            // Unreachable in practice: entering open advances the epoch, so no
            // current ticket exists while open.
            BreakerState::Open => None,
        }
    }

    /// Reports a failed call (error, timeout, or anything the caller classifies
    /// as a dependency failure). Returns the transition it caused, if any.
    #[must_use = "a state change should be logged or exported"]
    pub fn on_failure(&mut self, now: Nanos, ticket: Ticket) -> Option<Transition> {
        if !self.is_current(ticket) {
            return None;
        }
        match self.state {
            BreakerState::Closed => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.window.record(true);
                let cause = self.trip_cause()?;
                Some(self.transition(now, BreakerState::Open, cause))
            }
            BreakerState::HalfOpen => {
                Some(self.transition(now, BreakerState::Open, TransitionCause::ProbeFailed))
            }
            BreakerState::Open => None,
        }
    }

    /// Reports that an admitted call was abandoned before it reached the
    /// dependency (cancelled by the caller, dropped by a local limit). A
    /// half-open probe permit is returned so the half-open state cannot wait
    /// forever for a probe that was never sent.
    pub fn on_cancel(&mut self, ticket: Ticket) {
        if self.is_current(ticket) && ticket.probe && self.state == BreakerState::HalfOpen {
            self.probes_admitted = self.probes_admitted.saturating_sub(1);
        }
    }

    /// Current state (an elapsed open wait is only noticed by the next [`allow`](Self::allow)).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// When the breaker last opened, if it is open or half-open.
    pub fn opened_at(&self) -> Option<Nanos> {
        match self.state {
            BreakerState::Closed => None,
            _ => Some(self.opened_at),
        }
    }

    /// While open, how long until probes are admitted: a natural `Retry-After`.
    pub fn retry_after(&self, now: Nanos) -> Option<Nanos> {
        match self.state {
            BreakerState::Open => Some(
                self.opened_at
                    .saturating_add(self.config.wait_duration_in_open_state)
                    .saturating_sub(now),
            ),
            _ => None,
        }
    }

    /// Failure rate over the sliding window, once `minimum_number_of_calls`
    /// outcomes are recorded (and the failure-rate trip is on).
    pub fn failure_rate(&self) -> Option<f64> {
        (self.config.sliding_window_size > 0
            && self.window.recorded >= self.config.minimum_number_of_calls)
            .then(|| self.window.failure_rate())
    }

    /// Failures in a row observed while closed.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The most recent transition.
    pub fn last_transition(&self) -> Option<Transition> {
        self.last_transition
    }

    /// Counters since construction.
    pub fn stats(&self) -> BreakerStats {
        self.stats
    }

    fn is_current(&mut self, ticket: Ticket) -> bool {
        let current = ticket.epoch == self.epoch;
        if !current {
            self.stats.stale_outcomes += 1;
        }
        current
    }

    fn trip_cause(&self) -> Option<TransitionCause> {
        let c = self.config.consecutive_failures;
        if c > 0 && self.consecutive_failures >= c {
            return Some(TransitionCause::ConsecutiveFailures);
        }
        match self.failure_rate() {
            Some(rate) if rate >= self.config.failure_rate_threshold => {
                Some(TransitionCause::FailureRate)
            }
            _ => None,
        }
    }

    fn admit(&mut self, probe: bool) -> Admission {
        self.stats.allowed += 1;
        Admission::Allowed(Ticket {
            epoch: self.epoch,
            probe,
        })
    }

    fn reject(&mut self) -> Admission {
        self.stats.rejected += 1;
        Admission::Rejected
    }

    fn transition(&mut self, now: Nanos, to: BreakerState, cause: TransitionCause) -> Transition {
        let t = Transition {
            from: self.state,
            to,
            at: now,
            cause,
        };
        self.state = to;
        self.epoch += 1;
        self.probes_admitted = 0;
        self.probes_succeeded = 0;
        match to {
            BreakerState::Open => {
                self.opened_at = now;
                self.stats.opened += 1;
            }
            BreakerState::HalfOpen => self.stats.half_opened += 1,
            BreakerState::Closed => {
                // A fresh start: failures from before the trip must not count
                // against the dependency that just proved itself healthy.
                self.window.clear();
                self.consecutive_failures = 0;
                self.stats.closed += 1;
            }
        }
        self.last_transition = Some(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;

    fn small(window: u32, minimum: u32) -> BreakerConfig {
        BreakerConfig {
            sliding_window_size: window,
            minimum_number_of_calls: minimum,
            ..BreakerConfig::default()
        }
    }

    fn call(b: &mut Breaker, now: Nanos, ok: bool) -> Option<Transition> {
        let t = b.allow(now).ticket().expect("call admitted");
        if ok {
            b.on_success(now, t)
        } else {
            b.on_failure(now, t)
        }
    }

    /// Trips a default-shaped breaker at `now` with consecutive failures.
    fn tripped(config: BreakerConfig, now: Nanos) -> Breaker {
        let config = BreakerConfig {
            consecutive_failures: 1,
            ..config
        };
        let mut b = Breaker::new(&config).unwrap();
        call(&mut b, now, false);
        assert_eq!(b.state(), BreakerState::Open);
        b
    }

    #[test]
    fn defaults_are_resilience4j_and_envoy_published_values() {
        let d = BreakerConfig::default();
        assert_eq!(d.failure_rate_threshold, 0.5);
        assert_eq!(d.sliding_window_size, 100);
        assert_eq!(d.minimum_number_of_calls, 100);
        assert_eq!(d.wait_duration_in_open_state, Nanos::from_secs(60));
        assert_eq!(d.permitted_number_of_calls_in_half_open_state, 10);
        assert_eq!(d.consecutive_failures, 0);
        let e = BreakerConfig::envoy_outlier_detection();
        assert_eq!(e.consecutive_failures, 5);
        assert_eq!(e.wait_duration_in_open_state, Nanos::from_secs(30));
        assert!(d.validate().is_ok() && e.validate().is_ok());
    }

    #[test]
    fn trips_when_failure_rate_reaches_threshold_exactly() {
        // Default window 100, minimum 100, threshold 50%.
        // 50 successes then 49 failures: 99 recorded < minimum 100, no rate yet.
        let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
        for _ in 0..50 {
            assert_eq!(call(&mut b, Nanos::ZERO, true), None);
        }
        for _ in 0..49 {
            assert_eq!(call(&mut b, Nanos::ZERO, false), None);
        }
        assert_eq!(b.failure_rate(), None);
        // 100th call fails: 50 / 100 = 0.5 ≥ 0.5 → open ("equal or greater").
        let t = call(&mut b, Nanos::from_secs(3), false).unwrap();
        assert_eq!(t.to, BreakerState::Open);
        assert_eq!(t.cause, TransitionCause::FailureRate);
        assert_eq!(b.opened_at(), Some(Nanos::from_secs(3)));
    }

    #[test]
    fn the_call_completing_the_minimum_can_be_a_success_and_still_trip() {
        // 60 failures, then successes: at 99 calls no rate yet; the 100th call
        // (a success) completes the minimum with 60 / 100 = 0.6 ≥ 0.5 → open.
        let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
        for i in 0..99 {
            assert_eq!(call(&mut b, Nanos::ZERO, i >= 60), None);
        }
        let t = call(&mut b, Nanos::ZERO, true).unwrap();
        assert_eq!(t.cause, TransitionCause::FailureRate);
    }

    #[test]
    fn does_not_trip_just_below_threshold() {
        // 51 successes, 49 failures: 49 / 100 = 0.49 < 0.5.
        let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
        for i in 0..100 {
            call(&mut b, Nanos::ZERO, i < 51);
        }
        assert_eq!(b.failure_rate(), Some(0.49));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn never_trips_below_minimum_number_of_calls() {
        // 99 failures in a row with minimum 100 and no consecutive trip.
        let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
        for _ in 0..99 {
            call(&mut b, Nanos::ZERO, false);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.consecutive_failures(), 99);
    }

    #[test]
    fn window_slides_oldest_outcome_out() {
        // Window 4, minimum 4. Outcomes F S S S → 1/4 = 0.25.
        let mut b = Breaker::new(&small(4, 4)).unwrap();
        for ok in [false, true, true, true] {
            call(&mut b, Nanos::ZERO, ok);
        }
        assert_eq!(b.failure_rate(), Some(0.25));
        // Next S evicts the F: S S S S → 0.
        call(&mut b, Nanos::ZERO, true);
        assert_eq!(b.failure_rate(), Some(0.0));
        // F evicts an S: S S S F → 0.25, still below 0.5.
        call(&mut b, Nanos::ZERO, false);
        assert_eq!(b.failure_rate(), Some(0.25));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn window_at_threshold_trips_on_the_call_that_reaches_it() {
        // Window 4, minimum 4, threshold 0.5: S S S F (0.25) then F → S S F F = 0.5 → open.
        let mut b = Breaker::new(&small(4, 4)).unwrap();
        for ok in [true, true, true, false] {
            call(&mut b, Nanos::ZERO, ok);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        let t = call(&mut b, Nanos::ZERO, false).unwrap();
        assert_eq!(t.cause, TransitionCause::FailureRate);
    }

    #[test]
    fn consecutive_failures_trip_and_a_success_resets_the_run() {
        let mut b = Breaker::new(&BreakerConfig::envoy_outlier_detection()).unwrap();
        for _ in 0..4 {
            call(&mut b, Nanos::ZERO, false);
        }
        call(&mut b, Nanos::ZERO, true);
        for _ in 0..4 {
            assert_eq!(call(&mut b, Nanos::ZERO, false), None);
        }
        // 5th in a row: Envoy consecutive_5xx = 5.
        let t = call(&mut b, Nanos::from_secs(1), false).unwrap();
        assert_eq!(t.cause, TransitionCause::ConsecutiveFailures);
        // Ejected for base_ejection_time = 30 s.
        assert!(
            !b.allow(Nanos::from_secs(30) + Nanos::from_secs(1) - Nanos::NANOSECOND)
                .is_allowed()
        );
        assert!(b.allow(Nanos::from_secs(31)).is_allowed());
    }

    #[test]
    fn open_rejects_until_wait_elapsed_then_admits_a_probe() {
        let mut b = tripped(BreakerConfig::default(), Nanos::from_secs(10));
        assert_eq!(
            b.retry_after(Nanos::from_secs(40)),
            Some(Nanos::from_secs(30))
        );
        // Open at 10 s, wait 60 s → probes from 70 s on.
        assert_eq!(
            b.allow(Nanos::from_secs(70) - Nanos::NANOSECOND),
            Admission::Rejected
        );
        let a = b.allow(Nanos::from_secs(70));
        assert!(a.ticket().unwrap().is_probe());
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(
            b.last_transition().unwrap().cause,
            TransitionCause::WaitElapsed
        );
    }

    #[test]
    fn late_failures_while_open_do_not_extend_the_outage() {
        let config = BreakerConfig {
            consecutive_failures: 3,
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(&config).unwrap();
        // Ten calls go out at t = 0; three fail fast at t = 10 s and trip it.
        let tickets: Vec<Ticket> = (0..10)
            .map(|_| b.allow(Nanos::ZERO).ticket().unwrap())
            .collect();
        for t in &tickets[..3] {
            let _ = b.on_failure(Nanos::from_secs(10), *t);
        }
        assert_eq!(b.opened_at(), Some(Nanos::from_secs(10)));
        // The other seven time out later, while open (t = 20 … 50 s).
        for (i, t) in tickets[3..].iter().enumerate() {
            assert_eq!(b.on_failure(Nanos::from_secs(20 + 5 * i as u64), *t), None);
        }
        assert_eq!(
            b.opened_at(),
            Some(Nanos::from_secs(10)),
            "late failures must not re-stamp"
        );
        assert_eq!(b.stats().stale_outcomes, 7);
        assert_eq!(b.stats().opened, 1);
        // Probes still start at 10 s + 60 s = 70 s.
        assert!(b.allow(Nanos::from_secs(70)).ticket().unwrap().is_probe());
    }

    #[test]
    fn late_pre_trip_failure_during_half_open_does_not_reopen() {
        let config = BreakerConfig {
            consecutive_failures: 1,
            permitted_number_of_calls_in_half_open_state: 2,
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(&config).unwrap();
        let slow = b.allow(Nanos::ZERO).ticket().unwrap();
        call(&mut b, Nanos::from_secs(1), false);
        let probe = b.allow(Nanos::from_secs(61)).ticket().unwrap();
        assert_eq!(b.on_failure(Nanos::from_secs(62), slow), None);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.on_success(Nanos::from_secs(62), probe), None);
    }

    #[test]
    fn half_open_admits_only_the_permitted_probes() {
        let mut b = tripped(BreakerConfig::default(), Nanos::ZERO);
        let probes: Vec<Ticket> = (0..10)
            .map(|_| b.allow(Nanos::from_secs(60)).ticket().unwrap())
            .collect();
        assert!(probes.iter().all(Ticket::is_probe));
        assert_eq!(b.allow(Nanos::from_secs(60)), Admission::Rejected);
        assert_eq!(b.stats().probes, 10);
    }

    #[test]
    fn enough_probe_successes_close_with_an_empty_window() {
        let mut b = tripped(BreakerConfig::default(), Nanos::ZERO);
        let probes: Vec<Ticket> = (0..10)
            .map(|_| b.allow(Nanos::from_secs(60)).ticket().unwrap())
            .collect();
        for p in &probes[..9] {
            assert_eq!(b.on_success(Nanos::from_secs(61), *p), None);
        }
        let t = b.on_success(Nanos::from_secs(61), probes[9]).unwrap();
        assert_eq!(
            (t.from, t.to),
            (BreakerState::HalfOpen, BreakerState::Closed)
        );
        assert_eq!(t.cause, TransitionCause::ProbesSucceeded);
        assert_eq!(b.failure_rate(), None);
        assert_eq!(b.consecutive_failures(), 0);
        let n = b.allow(Nanos::from_secs(62)).ticket().unwrap();
        assert!(!n.is_probe());
    }

    #[test]
    fn a_probe_failure_reopens_and_stamps_a_new_open_time() {
        let mut b = tripped(BreakerConfig::default(), Nanos::from_secs(5));
        let p1 = b.allow(Nanos::from_secs(65)).ticket().unwrap();
        let p2 = b.allow(Nanos::from_secs(65)).ticket().unwrap();
        let _ = b.on_success(Nanos::from_secs(66), p1);
        let t = b.on_failure(Nanos::from_secs(67), p2).unwrap();
        assert_eq!(t.cause, TransitionCause::ProbeFailed);
        assert_eq!(b.opened_at(), Some(Nanos::from_secs(67)));
        // New wait: 67 s + 60 s = 127 s.
        assert!(!b.allow(Nanos::from_secs(126)).is_allowed());
        assert!(b.allow(Nanos::from_secs(127)).is_allowed());
        assert_eq!(b.stats().opened, 2);
    }

    #[test]
    fn cancelled_probe_returns_its_permit() {
        let config = BreakerConfig {
            permitted_number_of_calls_in_half_open_state: 1,
            ..BreakerConfig::default()
        };
        let mut b = tripped(config, Nanos::ZERO);
        let p = b.allow(Nanos::from_secs(60)).ticket().unwrap();
        assert_eq!(b.allow(Nanos::from_secs(60)), Admission::Rejected);
        b.on_cancel(p);
        assert!(b.allow(Nanos::from_secs(60)).is_allowed());
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                BreakerConfig {
                    failure_rate_threshold: 0.0,
                    ..BreakerConfig::default()
                },
                "failure_rate_threshold",
            ),
            (small(10, 11), "minimum_number_of_calls"),
            (small(10, 0), "minimum_number_of_calls"),
            (small(0, 0), "sliding_window_size"),
            (small(MAX_WINDOW + 1, 1), "sliding_window_size"),
            (
                BreakerConfig {
                    wait_duration_in_open_state: Nanos::ZERO,
                    ..BreakerConfig::default()
                },
                "wait_duration_in_open_state",
            ),
            (
                BreakerConfig {
                    permitted_number_of_calls_in_half_open_state: 0,
                    ..BreakerConfig::default()
                },
                "permitted_number_of_calls_in_half_open_state",
            ),
        ];
        for (config, field) in cases {
            let err = Breaker::new(&config).unwrap_err();
            assert_eq!(err.field(), field);
            assert!(err.to_string().contains(field));
        }
        assert_eq!(
            small(10, 11).validate().unwrap_err().to_string(),
            "breaker: minimum_number_of_calls must be between 1 and sliding_window_size, got 11"
        );
    }

    #[test]
    fn config_reads_human_durations_and_rejects_unknown_fields() {
        let c: BreakerConfig = serde_json::from_str(
            r#"{"wait_duration_in_open_state": "30s", "consecutive_failures": 5}"#,
        )
        .unwrap();
        assert_eq!(c.wait_duration_in_open_state, Nanos::from_secs(30));
        assert_eq!(c.consecutive_failures, 5);
        assert_eq!(c.sliding_window_size, 100);
        assert!(serde_json::from_str::<BreakerConfig>(r#"{"wait": "30s"}"#).is_err());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Allow,
        Succeed(usize),
        Fail(usize),
        Cancel(usize),
    }

    fn op() -> impl Strategy<Value = (u64, Op)> {
        (
            0u64..20_000,
            prop_oneof![
                3 => Just(Op::Allow),
                2 => any::<usize>().prop_map(Op::Succeed),
                2 => any::<usize>().prop_map(Op::Fail),
                1 => any::<usize>().prop_map(Op::Cancel),
            ],
        )
    }

    proptest! {
        /// Whatever the interleaving: open rejects strictly before opened_at + wait;
        /// opened_at changes only on a transition into open; a half-open episode
        /// never has more than the permitted probes outstanding.
        #[test]
        fn state_machine_invariants(ops in proptest::collection::vec(op(), 1..400)) {
            let config = BreakerConfig {
                sliding_window_size: 8,
                minimum_number_of_calls: 4,
                consecutive_failures: 3,
                wait_duration_in_open_state: Nanos::from_millis(1),
                permitted_number_of_calls_in_half_open_state: 3,
                ..BreakerConfig::default()
            };
            let wait = config.wait_duration_in_open_state;
            let mut b = Breaker::new(&config).unwrap();
            let mut now: Nanos = Nanos::ZERO;
            let mut outstanding: Vec<Ticket> = Vec::new();
            for (dt, op) in ops {
                now += Nanos::from_nanos(dt * 100);
                let opened_before = (b.state(), b.opened_at());
                let opens_before = b.stats().opened;
                match op {
                    Op::Allow => {
                        let was_open = b.state() == BreakerState::Open;
                        let a = b.allow(now);
                        if was_open {
                            let ready = now >= opened_before.1.unwrap() + wait;
                            prop_assert_eq!(a.is_allowed(), ready);
                        }
                        if let Admission::Allowed(t) = a {
                            prop_assert_eq!(t.is_probe(), b.state() == BreakerState::HalfOpen);
                            outstanding.push(t);
                        }
                    }
                    Op::Succeed(i) | Op::Fail(i) | Op::Cancel(i) if !outstanding.is_empty() => {
                        let t = outstanding.swap_remove(i % outstanding.len());
                        match op {
                            Op::Succeed(_) => { let _ = b.on_success(now, t); }
                            Op::Fail(_) => { let _ = b.on_failure(now, t); }
                            _ => b.on_cancel(t),
                        }
                    }
                    _ => {}
                }
                if b.stats().opened == opens_before && opened_before.0 != BreakerState::Closed
                    && b.state() != BreakerState::Closed
                {
                    prop_assert_eq!(b.opened_at(), opened_before.1);
                }
                if b.state() == BreakerState::HalfOpen {
                    prop_assert!(b.probes_admitted <= 3);
                }
                if b.state() == BreakerState::Open {
                    prop_assert_eq!(b.last_transition().unwrap().to, BreakerState::Open);
                    prop_assert_eq!(b.opened_at(), Some(b.last_transition().unwrap().at));
                }
            }
        }
    }
}

//! The per-request retry state machine.

use super::{AttemptOutcome, OutcomeClass, Pushback, RetryPolicy};
use crate::Nanos;
use crate::budget::{RetryBudget, RetryCause, Unlimited};
use rand::Rng;

/// Why a logical request stopped without success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// The outcome is not one the policy retries (most 4xx, 501, …).
    NonRetryable,
    /// `max_attempts` attempts have been made.
    AttemptsExhausted,
    /// The overall deadline has passed, or the next attempt could not start before it.
    Deadline,
    /// The server said not to retry (gRPC pushback).
    Pushback,
    /// The retry budget refused the retry.
    BudgetExhausted,
}

/// What to do after an attempt's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a policy decision must be acted on"]
pub enum RetryDecision {
    /// The request succeeded; done.
    Success,
    /// Send the next attempt at this instant (already counted as started then).
    RetryAt(Nanos),
    /// Stop and report the failure.
    GiveUp(GiveUpReason),
}

impl RetryDecision {
    /// The retry instant, if this is a retry.
    pub fn retry_at(self) -> Option<Nanos> {
        match self {
            RetryDecision::RetryAt(at) => Some(at),
            _ => None,
        }
    }
}

const NO_DEADLINE: Nanos = Nanos::MAX;

/// A final decision without the payload-carrying variant, so the state stays small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finished {
    Success,
    GaveUp(GiveUpReason),
}

impl Finished {
    fn decision(self) -> RetryDecision {
        match self {
            Finished::Success => RetryDecision::Success,
            Finished::GaveUp(reason) => RetryDecision::GiveUp(reason),
        }
    }
}

/// The retry state of one logical request.
///
/// Source laws: attempts counted as in gRPC (`maxAttempts` includes the
/// original, gRFC A6); the overall deadline spans all attempts (A6) and the
/// per-try timeout is Envoy's `per_try_timeout`; backoff and jitter per
/// [`Backoff`](super::Backoff); `Retry-After` / rate-limit reset honoured as
/// RFC 9110 §10.2.3 and the 2026-08-17 post-mortem require: the pause is
/// `max(backoff, retry_after)`, and if that would pass the deadline the
/// request gives up instead. A gRPC pushback of *n* ms retries after exactly
/// *n* ms and resets the backoff to its initial value; a "do not retry"
/// pushback ends the request. Defaults are [`RetryConfig`](super::RetryConfig)'s.
///
/// The state is `Copy` and 40 bytes, so a simulator can keep one per
/// in-flight request in a slab; the [`RetryPolicy`] is passed to every call
/// and must be the one the state was created with.
///
/// The decision order for a failed attempt is: pushback "stop", class not
/// retried, attempts exhausted, deadline passed, pause would cross the
/// deadline, budget refused. The budget is asked last so it is only charged
/// for retries that would really be sent.
///
/// ```
/// use stormbreak_policy::retry::*;
/// use stormbreak_policy::Nanos;
/// use rand::SeedableRng;
///
/// let cfg = RetryConfig {
///     per_try_timeout: Some(Nanos::from_millis(200)),
///     overall_timeout: Some(Nanos::from_secs(1)),
///     backoff: BackoffConfig { jitter: Jitter::None, ..Default::default() },
///     ..Default::default()
/// };
/// let policy = RetryPolicy::new(&cfg).unwrap();
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// let mut req = RetryState::new(&policy, Nanos::ZERO);
/// assert_eq!(req.attempt_deadline(&policy), Some(Nanos::from_millis(200)));
///
/// // Timed out at 200 ms: retry after 25 ms, with a fresh 200 ms.
/// assert_eq!(req.on_outcome(&policy, Nanos::from_millis(200), AttemptOutcome::Timeout, &mut rng),
///            RetryDecision::RetryAt(Nanos::from_millis(225)));
/// assert_eq!(req.attempt_deadline(&policy), Some(Nanos::from_millis(425)));
/// // A 403 shed is final.
/// assert_eq!(req.on_outcome(&policy, Nanos::from_millis(300), AttemptOutcome::status(403), &mut rng),
///            RetryDecision::GiveUp(GiveUpReason::NonRetryable));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryState {
    deadline: Nanos,
    attempt_started: Nanos,
    previous_pause: Nanos,
    attempts: u32,
    backoff_step: u32,
    paid_retry: Option<RetryCause>,
    finished: Option<Finished>,
}

impl RetryState {
    /// A logical request whose first attempt is sent at `now`.
    pub fn new(policy: &RetryPolicy, now: Nanos) -> Self {
        RetryState {
            deadline: policy
                .overall_timeout()
                .map_or(NO_DEADLINE, |t| now.saturating_add(t)),
            attempt_started: now,
            previous_pause: policy.backoff().base(),
            attempts: 1,
            backoff_step: 0,
            paid_retry: None,
            finished: None,
        }
    }

    /// Like [`new`](Self::new), and tells `budget` a first attempt was sent
    /// (the ratio budget's deposit).
    pub fn begin<B: RetryBudget + ?Sized>(
        policy: &RetryPolicy,
        now: Nanos,
        budget: &mut B,
    ) -> Self {
        budget.on_request(now);
        Self::new(policy, now)
    }

    /// Attempts sent or scheduled so far, including the first.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The overall deadline, if the policy has one.
    pub fn deadline(&self) -> Option<Nanos> {
        (self.deadline != NO_DEADLINE).then_some(self.deadline)
    }

    /// When the current attempt must be abandoned as a timeout:
    /// `min(attempt start + per-try timeout, overall deadline)`; `None` if neither is set.
    pub fn attempt_deadline(&self, policy: &RetryPolicy) -> Option<Nanos> {
        let per_try = policy
            .per_try_timeout()
            .map_or(NO_DEADLINE, |t| self.attempt_started.saturating_add(t));
        let at = per_try.min(self.deadline);
        (at != NO_DEADLINE).then_some(at)
    }

    /// The final decision, once the request has succeeded or given up.
    pub fn finished(&self) -> Option<RetryDecision> {
        self.finished.map(Finished::decision)
    }

    /// Decides what follows `outcome`, with no retry budget.
    #[inline]
    pub fn on_outcome<R: Rng + ?Sized>(
        &mut self,
        policy: &RetryPolicy,
        now: Nanos,
        outcome: AttemptOutcome,
        rng: &mut R,
    ) -> RetryDecision {
        self.on_outcome_budgeted(policy, now, outcome, &mut Unlimited, rng)
    }

    /// Decides what follows `outcome`, reporting it to `budget` and asking the
    /// budget before any retry; a refusal is [`GiveUpReason::BudgetExhausted`].
    ///
    /// Once the request has finished, later outcomes change nothing and get
    /// the same final decision back.
    pub fn on_outcome_budgeted<B: RetryBudget + ?Sized, R: Rng + ?Sized>(
        &mut self,
        policy: &RetryPolicy,
        now: Nanos,
        outcome: AttemptOutcome,
        budget: &mut B,
        rng: &mut R,
    ) -> RetryDecision {
        if let Some(done) = self.finished {
            return done.decision();
        }
        let classifier = policy.classifier();
        let class = classifier.classify(&outcome);
        if class == OutcomeClass::Success {
            budget.on_success(now, self.paid_retry);
            self.finished = Some(Finished::Success);
            return RetryDecision::Success;
        }
        let retried = classifier.is_retried(class);
        let pushback = outcome.pushback();
        // gRPC counts only failures that qualify for a retry, or a "stop" pushback.
        if retried || pushback == Pushback::DoNotRetry {
            if class == OutcomeClass::Timeout {
                budget.on_timeout(now);
            } else {
                budget.on_failure(now);
            }
        }
        if pushback == Pushback::DoNotRetry {
            return self.give_up(GiveUpReason::Pushback);
        }
        if !retried {
            return self.give_up(GiveUpReason::NonRetryable);
        }
        if self.attempts >= policy.max_attempts() {
            return self.give_up(GiveUpReason::AttemptsExhausted);
        }
        if now >= self.deadline {
            return self.give_up(GiveUpReason::Deadline);
        }
        let (pause, backoff_step, previous_pause) = match pushback {
            Pushback::RetryAfter(exact) => (exact, 0, policy.backoff().base()),
            _ => {
                let pause = policy
                    .backoff()
                    .pause(self.backoff_step, self.previous_pause, rng);
                (pause, self.backoff_step.saturating_add(1), pause)
            }
        };
        let pause = pause.max(outcome.retry_after().unwrap_or(Nanos::ZERO));
        let at = now.saturating_add(pause);
        if self.deadline != NO_DEADLINE && at >= self.deadline {
            return self.give_up(GiveUpReason::Deadline);
        }
        let cause = if class == OutcomeClass::Timeout {
            RetryCause::Timeout
        } else {
            RetryCause::Error
        };
        if !budget.try_withdraw(now, cause) {
            return self.give_up(GiveUpReason::BudgetExhausted);
        }
        self.attempts += 1;
        self.attempt_started = at;
        self.backoff_step = backoff_step;
        self.previous_pause = previous_pause;
        self.paid_retry = Some(cause);
        RetryDecision::RetryAt(at)
    }

    #[inline]
    fn give_up(&mut self, reason: GiveUpReason) -> RetryDecision {
        self.finished = Some(Finished::GaveUp(reason));
        RetryDecision::GiveUp(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use crate::budget::{AwsRetryQuota, AwsRetryQuotaConfig, GrpcThrottle, GrpcThrottleConfig};
    use crate::retry::{BackoffConfig, BackoffKind, Jitter, RetryConfig, RetryOn};
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn rng() -> Pcg64Mcg {
        Pcg64Mcg::seed_from_u64(2026)
    }

    /// Default policy with deterministic (un-jittered) Envoy backoff:
    /// pauses 25, 50, 100, 200, 250 ms.
    fn plain(max_attempts: u32) -> RetryPolicy {
        RetryPolicy::new(&RetryConfig {
            max_attempts,
            max_attempts_cap: max_attempts.max(5),
            backoff: BackoffConfig {
                jitter: Jitter::None,
                ..BackoffConfig::default()
            },
            ..RetryConfig::default()
        })
        .unwrap()
    }

    fn response(status: u16, retry_after: Option<Nanos>, pushback: Pushback) -> AttemptOutcome {
        AttemptOutcome::Response {
            status,
            retry_after,
            pushback,
        }
    }

    #[test]
    fn state_is_small_and_copy() {
        fn is_copy<T: Copy>() {}
        is_copy::<RetryState>();
        assert_eq!(std::mem::size_of::<RetryState>(), 40);
    }

    #[test]
    fn success_ends_the_request() {
        let p = plain(3);
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(5),
                AttemptOutcome::status(200),
                &mut rng()
            ),
            RetryDecision::Success
        );
        assert_eq!(s.finished(), Some(RetryDecision::Success));
        // Later outcomes cannot reopen it.
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(6),
                AttemptOutcome::status(503),
                &mut rng()
            ),
            RetryDecision::Success
        );
        assert_eq!(s.attempts(), 1);
    }

    #[test]
    fn retries_follow_the_backoff_until_attempts_run_out() {
        // 5 attempts; failures at t = 10 ms after each start.
        // Retry k waits 25·2^k ms: 25, 50, 100, 200.
        let p = plain(5);
        let mut r = rng();
        let mut s = RetryState::new(&p, Nanos::ZERO);
        let mut now = Nanos::from_millis(10);
        for expected_pause in [25, 50, 100, 200] {
            let at = s
                .on_outcome(&p, now, AttemptOutcome::status(502), &mut r)
                .retry_at()
                .unwrap();
            assert_eq!(at, now + Nanos::from_millis(expected_pause));
            now = at + Nanos::from_millis(10);
        }
        assert_eq!(s.attempts(), 5);
        assert_eq!(
            s.on_outcome(&p, now, AttemptOutcome::status(502), &mut r),
            RetryDecision::GiveUp(GiveUpReason::AttemptsExhausted)
        );
    }

    #[test]
    fn non_retryable_statuses_give_up_at_once() {
        let p = plain(5);
        for status in [400, 403, 404, 501] {
            let mut s = RetryState::new(&p, Nanos::ZERO);
            assert_eq!(
                s.on_outcome(
                    &p,
                    Nanos::from_millis(1),
                    AttemptOutcome::status(status),
                    &mut rng()
                ),
                RetryDecision::GiveUp(GiveUpReason::NonRetryable),
                "{status}"
            );
        }
    }

    #[test]
    fn retry_after_is_never_undercut() {
        // Backoff would say 25 ms; the server said 3 s.
        let p = plain(3);
        let mut s = RetryState::new(&p, Nanos::ZERO);
        let d = s.on_outcome(
            &p,
            Nanos::from_millis(100),
            response(429, Some(Nanos::from_secs(3)), Pushback::None),
            &mut rng(),
        );
        assert_eq!(
            d,
            RetryDecision::RetryAt(Nanos::from_millis(100) + Nanos::from_secs(3))
        );
        // A Retry-After shorter than the backoff does not shorten it: the second
        // pause is 50 ms, the server asks for 10 ms.
        let now = Nanos::from_millis(100) + Nanos::from_secs(3) + Nanos::from_millis(5);
        let d = s.on_outcome(
            &p,
            now,
            response(503, Some(Nanos::from_millis(10)), Pushback::None),
            &mut rng(),
        );
        assert_eq!(d, RetryDecision::RetryAt(now + Nanos::from_millis(50)));
    }

    #[test]
    fn retry_after_beyond_the_deadline_gives_up() {
        // Overall timeout 15 s from t = 0; a 429 at 1 s asking for 20 s.
        let p = plain(3);
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_secs(1),
                response(429, Some(Nanos::from_secs(20)), Pushback::None),
                &mut rng()
            ),
            RetryDecision::GiveUp(GiveUpReason::Deadline)
        );
        // Exactly landing on the deadline leaves no time for the attempt either.
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_secs(1),
                response(429, Some(Nanos::from_secs(14)), Pushback::None),
                &mut rng()
            ),
            RetryDecision::GiveUp(GiveUpReason::Deadline)
        );
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_secs(1),
                response(429, Some(Nanos::from_secs(13)), Pushback::None),
                &mut rng()
            ),
            RetryDecision::RetryAt(Nanos::from_secs(14))
        );
    }

    #[test]
    fn a_timeout_at_the_deadline_gives_up() {
        let p = plain(3);
        let mut s = RetryState::new(&p, Nanos::from_secs(100));
        assert_eq!(s.attempt_deadline(&p), Some(Nanos::from_secs(115)));
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_secs(115),
                AttemptOutcome::Timeout,
                &mut rng()
            ),
            RetryDecision::GiveUp(GiveUpReason::Deadline)
        );
    }

    #[test]
    fn attempt_deadline_is_the_earlier_of_per_try_and_overall() {
        let p = RetryPolicy::new(&RetryConfig {
            per_try_timeout: Some(Nanos::from_millis(400)),
            overall_timeout: Some(Nanos::from_secs(1)),
            backoff: BackoffConfig {
                jitter: Jitter::None,
                ..BackoffConfig::default()
            },
            ..RetryConfig::default()
        })
        .unwrap();
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(s.attempt_deadline(&p), Some(Nanos::from_millis(400)));
        // Second attempt starts at 425 ms: min(825, 1000).
        let _ = s.on_outcome(
            &p,
            Nanos::from_millis(400),
            AttemptOutcome::Timeout,
            &mut rng(),
        );
        assert_eq!(s.attempt_deadline(&p), Some(Nanos::from_millis(825)));
        // Third starts at 875 ms: min(1275, 1000) = the overall deadline.
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(825),
                AttemptOutcome::Timeout,
                &mut rng()
            ),
            RetryDecision::RetryAt(Nanos::from_millis(875))
        );
        assert_eq!(s.attempt_deadline(&p), Some(Nanos::from_secs(1)));

        let unlimited = RetryPolicy::new(&RetryConfig {
            overall_timeout: None,
            ..RetryConfig::default()
        })
        .unwrap();
        let s = RetryState::new(&unlimited, Nanos::ZERO);
        assert_eq!(s.attempt_deadline(&unlimited), None);
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn pushback_stop_gives_up_even_for_retryable_statuses() {
        let p = plain(5);
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(1),
                response(503, None, Pushback::DoNotRetry),
                &mut rng()
            ),
            RetryDecision::GiveUp(GiveUpReason::Pushback)
        );
    }

    #[test]
    fn pushback_delay_is_exact_and_resets_the_backoff() {
        // Pauses would be 25, 50, 100 …; pushback of 700 ms replaces the
        // second pause exactly, and the third pause starts again from 25 ms.
        let p = plain(5);
        let mut r = rng();
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(10),
                AttemptOutcome::status(503),
                &mut r
            ),
            RetryDecision::RetryAt(Nanos::from_millis(35))
        );
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(40),
                response(503, None, Pushback::RetryAfter(Nanos::from_millis(700))),
                &mut r
            ),
            RetryDecision::RetryAt(Nanos::from_millis(740))
        );
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(750),
                AttemptOutcome::status(503),
                &mut r
            ),
            RetryDecision::RetryAt(Nanos::from_millis(775))
        );
        // A pushback delay is still floored by Retry-After.
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(780),
                response(
                    503,
                    Some(Nanos::from_secs(2)),
                    Pushback::RetryAfter(Nanos::from_millis(10))
                ),
                &mut r
            ),
            RetryDecision::RetryAt(Nanos::from_millis(2_780))
        );
    }

    #[test]
    fn pushback_delay_does_not_make_a_fatal_status_retryable() {
        let p = plain(5);
        let mut s = RetryState::new(&p, Nanos::ZERO);
        assert_eq!(
            s.on_outcome(
                &p,
                Nanos::from_millis(1),
                response(400, None, Pushback::RetryAfter(Nanos::from_millis(5))),
                &mut rng()
            ),
            RetryDecision::GiveUp(GiveUpReason::NonRetryable)
        );
    }

    #[test]
    fn disabled_conditions_are_not_retried() {
        let p = RetryPolicy::new(&RetryConfig {
            retry_on: vec![RetryOn::GatewayError],
            ..RetryConfig::default()
        })
        .unwrap();
        for outcome in [
            AttemptOutcome::Timeout,
            AttemptOutcome::Reset,
            AttemptOutcome::ConnectFailed,
            AttemptOutcome::status(429),
            AttemptOutcome::status(500),
        ] {
            let mut s = RetryState::new(&p, Nanos::ZERO);
            assert_eq!(
                s.on_outcome(&p, Nanos::from_millis(1), outcome, &mut rng()),
                RetryDecision::GiveUp(GiveUpReason::NonRetryable),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn a_refusing_budget_turns_the_retry_into_budget_exhausted() {
        let p = plain(5);
        let mut quota = AwsRetryQuota::new(&AwsRetryQuotaConfig {
            initial_tokens: 12,
            ..AwsRetryQuotaConfig::default()
        })
        .unwrap();
        let mut r = rng();
        let mut s = RetryState::begin(&p, Nanos::ZERO, &mut quota);
        // 12 → a timeout retry costs 10 → 2 left; an error retry (5) is refused.
        assert!(
            s.on_outcome_budgeted(
                &p,
                Nanos::from_millis(1),
                AttemptOutcome::Timeout,
                &mut quota,
                &mut r
            )
            .retry_at()
            .is_some()
        );
        assert_eq!(quota.available(), 2);
        assert_eq!(
            s.on_outcome_budgeted(
                &p,
                Nanos::from_millis(50),
                AttemptOutcome::status(503),
                &mut quota,
                &mut r
            ),
            RetryDecision::GiveUp(GiveUpReason::BudgetExhausted)
        );
        assert_eq!(s.attempts(), 2, "a refused retry is not counted");
    }

    #[test]
    fn the_budget_hears_successes_with_the_cause_that_paid_for_them() {
        let p = plain(5);
        let mut quota = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
        let mut r = rng();
        let mut s = RetryState::begin(&p, Nanos::ZERO, &mut quota);
        let _ = s.on_outcome_budgeted(
            &p,
            Nanos::from_millis(1),
            AttemptOutcome::Timeout,
            &mut quota,
            &mut r,
        );
        assert_eq!(quota.available(), 490);
        let _ = s.on_outcome_budgeted(
            &p,
            Nanos::from_millis(100),
            AttemptOutcome::status(200),
            &mut quota,
            &mut r,
        );
        assert_eq!(quota.available(), 500, "the timeout retry's 10 came back");

        let mut first_try = RetryState::begin(&p, Nanos::ZERO, &mut quota);
        assert!(quota.try_withdraw(Nanos::ZERO, RetryCause::Error)); // someone else spends 5 → 495
        let _ = first_try.on_outcome_budgeted(
            &p,
            Nanos::from_millis(1),
            AttemptOutcome::status(200),
            &mut quota,
            &mut r,
        );
        assert_eq!(quota.available(), 496, "a first-attempt success adds 1");
    }

    #[test]
    fn the_budget_hears_only_failures_that_would_be_retried() {
        // gRPC counts retryable failures and "stop" pushbacks, not malformed requests.
        let p = plain(5);
        let mut t = GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap();
        let mut r = rng();
        let _ = RetryState::new(&p, Nanos::ZERO).on_outcome_budgeted(
            &p,
            Nanos::ZERO,
            AttemptOutcome::status(400),
            &mut t,
            &mut r,
        );
        assert_eq!(t.tokens(), 10.0);
        let _ = RetryState::new(&p, Nanos::ZERO).on_outcome_budgeted(
            &p,
            Nanos::ZERO,
            response(400, None, Pushback::DoNotRetry),
            &mut t,
            &mut r,
        );
        assert_eq!(t.tokens(), 9.0);
        let _ = RetryState::new(&p, Nanos::ZERO).on_outcome_budgeted(
            &p,
            Nanos::ZERO,
            AttemptOutcome::Timeout,
            &mut t,
            &mut r,
        );
        assert_eq!(t.tokens(), 8.0);
        let _ = RetryState::new(&p, Nanos::ZERO).on_outcome_budgeted(
            &p,
            Nanos::ZERO,
            AttemptOutcome::status(200),
            &mut t,
            &mut r,
        );
        assert!((t.tokens() - 8.1).abs() < 1e-9);
    }

    #[test]
    fn throttling_budget_stops_a_retry_storm() {
        // 1000 requests against a dead server, 3 attempts each, gRPC throttle
        // 10/0.1. Failures 1, 2 (tokens 9, 8) are retried; failure 3 (7) ends
        // the first request at max_attempts; failure 4 (6) is retried; failure
        // 5 leaves 5 tokens, not above 10/2, and nothing is retried after it.
        let p = plain(3);
        let mut t = GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap();
        let mut r = rng();
        let mut attempts = 0;
        for i in 0..1000u64 {
            let mut s = RetryState::begin(&p, Nanos::from_secs(i), &mut t);
            let mut now = Nanos::from_secs(i);
            loop {
                attempts += 1;
                match s.on_outcome_budgeted(
                    &p,
                    now + Nanos::from_millis(1),
                    AttemptOutcome::status(503),
                    &mut t,
                    &mut r,
                ) {
                    RetryDecision::RetryAt(at) => now = at,
                    _ => break,
                }
            }
        }
        assert_eq!(attempts, 1000 + 3, "amplification 1.003 instead of 3");
    }

    #[test]
    fn decorrelated_pause_memory_is_per_request() {
        let p = RetryPolicy::new(&RetryConfig {
            max_attempts: 5,
            backoff: BackoffConfig {
                jitter: Jitter::Decorrelated,
                kind: BackoffKind::Exponential,
                ..BackoffConfig::default()
            },
            ..RetryConfig::default()
        })
        .unwrap();
        let mut r = rng();
        let mut s = RetryState::new(&p, Nanos::ZERO);
        let mut now = Nanos::ZERO;
        let mut previous = Nanos::from_millis(25);
        for _ in 0..4 {
            let at = s
                .on_outcome(&p, now, AttemptOutcome::Reset, &mut r)
                .retry_at()
                .unwrap();
            let pause = at - now;
            assert!(
                pause >= Nanos::from_millis(25)
                    && pause <= (3 * previous).min(Nanos::from_millis(250)),
                "{pause}"
            );
            previous = pause;
            now = at;
        }
    }

    proptest! {
        /// Whatever the outcomes, a request never exceeds max_attempts, never
        /// schedules an attempt at or after its deadline, and never retries
        /// sooner than the server asked.
        #[test]
        fn invariants_hold_for_any_outcome_sequence(
            seed in any::<u64>(),
            max_attempts in 1u32..=5,
            overall_ms in prop::option::of(1u64..60_000),
            steps in prop::collection::vec((0u64..5_000, 0u8..8, prop::option::of(0u64..10_000)), 1..12),
        ) {
            let p = RetryPolicy::new(&RetryConfig {
                max_attempts,
                overall_timeout: overall_ms.map(Nanos::from_millis),
                ..RetryConfig::default()
            }).unwrap();
            let mut r = Pcg64Mcg::seed_from_u64(seed);
            let start = Nanos::from_secs(1);
            let mut s = RetryState::new(&p, start);
            let mut now = start;
            for (elapsed_ms, kind, retry_after_ms) in steps {
                now += Nanos::from_millis(elapsed_ms);
                let outcome = match kind {
                    0 => AttemptOutcome::Timeout,
                    1 => AttemptOutcome::Reset,
                    2 => AttemptOutcome::ConnectFailed,
                    3 => AttemptOutcome::status(200),
                    4 => AttemptOutcome::status(403),
                    5 => response(429, retry_after_ms.map(Nanos::from_millis), Pushback::None),
                    6 => response(503, retry_after_ms.map(Nanos::from_millis), Pushback::None),
                    _ => response(502, retry_after_ms.map(Nanos::from_millis), Pushback::RetryAfter(Nanos::from_millis(retry_after_ms.unwrap_or(0)))),
                };
                let before = s.attempts();
                match s.on_outcome(&p, now, outcome, &mut r) {
                    RetryDecision::RetryAt(at) => {
                        prop_assert!(s.attempts() == before + 1 && s.attempts() <= max_attempts);
                        if let Some(o) = overall_ms { prop_assert!(at < start + Nanos::from_millis(o)); }
                        prop_assert!(at >= now + outcome.retry_after().unwrap_or(Nanos::ZERO));
                        now = at;
                    }
                    RetryDecision::Success => { prop_assert_eq!(kind, 3); break; }
                    RetryDecision::GiveUp(_) => { prop_assert!(s.finished().is_some()); break; }
                }
            }
        }
    }
}

//! A caller's retries: the policy crate's retry state machine and retry
//! budget, fed virtual time and a per-entity RNG. Nothing here decides
//! anything itself; a simulated [`Cause`] reaches the policy
//! crate's classifier as [`Cause::outcome`] reads it.

use rand::Rng;
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{AnyBudget, BudgetConfig, RetryBudget};
use stormbreak_policy::retry::{
    AttemptOutcome, RetryConfig, RetryDecision, RetryPolicy, RetryState,
};

use crate::record::Cause;

/// The retry state of one logical call; `None` when the caller never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallState(Option<RetryState>);

/// What a caller does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send another attempt at this time.
    RetryAt(Nanos),
    /// Report the failure.
    GiveUp,
}

/// A caller's retry policy and its shared budget: one per client population
/// or gateway.
#[derive(Debug)]
pub struct Caller {
    policy: Option<RetryPolicy>,
    /// Classifies outcomes for callers that act on failures outside a retry
    /// policy (the fan-out bug): the configured policy's, else the default.
    classify: RetryPolicy,
    budget: AnyBudget,
}

impl Caller {
    /// Builds the caller; the specs were validated with the scenario.
    pub fn new(retry: Option<&RetryConfig>, budget: Option<&BudgetConfig>) -> Self {
        let budget = budget.map_or_else(AnyBudget::default, |b| b.build().expect("validated"));
        let policy = retry.map(|r| RetryPolicy::new(r).expect("validated"));
        let classify = policy
            .clone()
            .unwrap_or_else(|| RetryPolicy::new(&RetryConfig::default()).expect("defaults"));
        Caller {
            policy,
            classify,
            budget,
        }
    }

    /// Replaces the retry policy (a timeline action); the budget is kept.
    /// Calls already under way keep their attempt count and deadline and
    /// are judged by the new policy from their next outcome on; a call that
    /// started without a policy stays without retries.
    pub fn set_retry(&mut self, retry: Option<&RetryConfig>) {
        self.policy = retry.map(|r| RetryPolicy::new(r).expect("validated"));
    }

    /// A new logical call starts now (the budget earns its deposit).
    pub fn start(&mut self, now: Nanos) -> CallState {
        let budget = &mut self.budget;
        match &self.policy {
            Some(p) => CallState(Some(RetryState::begin(p, now, budget))),
            None => {
                budget.on_request(now);
                CallState(None)
            }
        }
    }

    /// The call's latest attempt succeeded.
    pub fn on_success<R: Rng + ?Sized>(&mut self, st: &mut CallState, now: Nanos, rng: &mut R) {
        match (&self.policy, &mut st.0) {
            (Some(p), Some(s)) => {
                // A success ends the call: the decision is always `Success`.
                let _ = s.on_outcome_budgeted(
                    p,
                    now,
                    AttemptOutcome::status(200),
                    &mut self.budget,
                    rng,
                );
            }
            _ => self.budget.on_success(now, None),
        }
    }

    /// Whether this failure is one the caller's classifier retries (a 403
    /// is not: a shed with 403 stops even the fan-out bug).
    pub fn is_retryable(&self, cause: Cause, retry_after: Option<Nanos>) -> bool {
        let c = self.classify.classifier();
        c.is_retried(c.classify(&cause.outcome(retry_after)))
    }

    /// A failure that the caller does not route through its retry policy
    /// (the fan-out bug): the budget still hears of it.
    pub fn on_failure(&mut self, now: Nanos, cause: Cause) {
        match cause {
            Cause::Timeout => self.budget.on_timeout(now),
            _ => self.budget.on_failure(now),
        }
    }

    /// The call's latest attempt failed: retry when, or give up.
    pub fn after_failure<R: Rng + ?Sized>(
        &mut self,
        st: &mut CallState,
        now: Nanos,
        cause: Cause,
        retry_after: Option<Nanos>,
        rng: &mut R,
    ) -> Next {
        let (Some(p), Some(s)) = (&self.policy, &mut st.0) else {
            self.on_failure(now, cause);
            return Next::GiveUp;
        };
        let outcome = cause.outcome(retry_after);
        match s.on_outcome_budgeted(p, now, outcome, &mut self.budget, rng) {
            RetryDecision::RetryAt(t) => Next::RetryAt(t.max(now)),
            RetryDecision::GiveUp(_) | RetryDecision::Success => Next::GiveUp,
        }
    }
}

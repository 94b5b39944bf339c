//! Retries: the policy crate's [`RetryState`] decides, tokio's clock waits.
//!
//! The same approach as `stormbreak-client`'s retry layer: one
//! [`RetryPolicy`] per route, one retry budget per route shared by all its
//! requests under a lock together with the jitter RNG, and per request a
//! 40-byte `RetryState` that says when (or whether) to send the next attempt.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use http::Response;
use hyper::body::Incoming;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::budget::{AnyBudget, BudgetConfig, RatioBudgetConfig, RetryBudget};
use stormbreak_policy::retry::{
    AttemptOutcome, GiveUpReason, Pushback, RetryConfig, RetryDecision, RetryPolicy, RetryState,
    retry_after_from_header,
};
use stormbreak_policy::{FieldError, Nanos};

use crate::clock::Clock;
use crate::endpoint::AttemptError;
use crate::metrics::RouteMetrics;
use crate::stats::{Stats, bump};
use prometheus_client::metrics::counter::Counter;

/// One attempt's result as the request path sees it.
pub(crate) type Attempt = Result<Response<Incoming>, AttemptError>;

/// An attempt's result with any response body: the proxy's is
/// [`Incoming`]; the trace-equivalence seam ([`crate::trace`]) uses `()`.
pub(crate) type AttemptOf<B> = Result<Response<B>, AttemptError>;

/// A route's retry policy and its shared budget.
pub(crate) struct RouteRetry {
    decide: Mutex<Decide>,
}

struct Decide {
    /// Replaced by the admin API ([`RouteRetry::set_policy`]); requests in
    /// flight keep their attempt count and are judged by the new policy
    /// from their next outcome on, as in the simulator's `set_retry`.
    policy: RetryPolicy,
    config: RetryConfig,
    budget: AnyBudget,
    rng: Pcg64Mcg,
}

impl RouteRetry {
    /// `budget` absent means the ratio budget's defaults (Finagle's 20 % +
    /// 10/s): a retry policy never runs without a budget by accident.
    pub(crate) fn new(
        config: &RetryConfig,
        budget: Option<&BudgetConfig>,
    ) -> Result<Self, FieldError> {
        Self::with_rng(config, budget, Pcg64Mcg::from_os_rng())
    }

    /// As [`RouteRetry::new`], with the jitter RNG given (seeded, for a
    /// trace that must be replayed identically).
    pub(crate) fn with_rng(
        config: &RetryConfig,
        budget: Option<&BudgetConfig>,
        rng: Pcg64Mcg,
    ) -> Result<Self, FieldError> {
        let budget = match budget {
            Some(b) => b.build()?,
            None => BudgetConfig::Ratio(RatioBudgetConfig::default()).build()?,
        };
        Ok(RouteRetry {
            decide: Mutex::new(Decide {
                policy: RetryPolicy::new(config)?,
                config: config.clone(),
                budget,
                rng,
            }),
        })
    }

    /// Replaces the retry policy; the budget and its state are kept.
    pub(crate) fn set_policy(&self, config: &RetryConfig) -> Result<(), FieldError> {
        let policy = RetryPolicy::new(config)?;
        let mut d = self.lock();
        d.policy = policy;
        d.config = config.clone();
        Ok(())
    }

    /// The retry policy in force.
    pub(crate) fn config(&self) -> RetryConfig {
        self.lock().config.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Decide> {
        self.decide.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin(&self, now: Nanos) -> RetryState {
        let mut d = self.lock();
        let Decide { policy, budget, .. } = &mut *d;
        RetryState::begin(policy, now, budget)
    }

    fn attempt_deadline(&self, state: &RetryState) -> Option<Nanos> {
        state.attempt_deadline(&self.lock().policy)
    }

    fn decide(&self, state: &mut RetryState, now: Nanos, outcome: AttemptOutcome) -> RetryDecision {
        let mut d = self.lock();
        let Decide {
            policy,
            budget,
            rng,
            ..
        } = &mut *d;
        state.on_outcome_budgeted(policy, now, outcome, budget as &mut dyn RetryBudget, rng)
    }
}

/// What an attempt's result tells the retry policy: status, `Retry-After`
/// (delta-seconds or HTTP-date) and gRPC pushback from the response head.
pub(crate) fn outcome<B>(attempt: &AttemptOf<B>) -> AttemptOutcome {
    match attempt {
        Ok(response) => {
            let headers = response.headers();
            let now_unix = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let retry_after = headers
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after_from_header(v, now_unix));
            let pushback = headers
                .get("grpc-retry-pushback-ms")
                .and_then(|v| v.to_str().ok())
                .map_or(Pushback::None, Pushback::from_grpc_header);
            AttemptOutcome::Response {
                status: response.status().as_u16(),
                retry_after,
                pushback,
            }
        }
        Err(AttemptError::Timeout) => AttemptOutcome::Timeout,
        Err(AttemptError::Connect | AttemptError::NoEndpoint) => AttemptOutcome::ConnectFailed,
        Err(AttemptError::Reset) => AttemptOutcome::Reset,
        // The guard's own breaker answers as a 503 with its Retry-After, so
        // a retry (if any) waits at least until probes resume.
        Err(AttemptError::CircuitOpen(retry_after)) => AttemptOutcome::Response {
            status: 503,
            retry_after: *retry_after,
            pushback: Pushback::None,
        },
        // Only a streamed body can fail mid-attempt, and a streamed body is
        // never retried; answered as the 4xx the client gets, which no
        // retry condition names.
        Err(AttemptError::Client(fault)) => AttemptOutcome::Response {
            status: fault.wire_status(),
            retry_after: None,
            pushback: Pushback::None,
        },
    }
}

/// What one request's retry loop did, for the access log.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    /// Attempts sent (first try included).
    pub(crate) attempts: u32,
    /// The loop ended because the retry budget refused a retry.
    pub(crate) budget_denied: bool,
}

/// Sends attempts made by `attempt` until the policy says success or give
/// up; returns the last attempt's result and what the loop did. Without a
/// policy, one attempt.
///
/// Each attempt is given the policy's attempt deadline (per-try timeout,
/// overall deadline) and must answer [`AttemptError::Timeout`] when it
/// passes: the attempt applies it itself, so the layers below it (breaker,
/// outlier ejection, cluster limit) see the timeout as a failure.
pub(crate) async fn run<B, F, Fut>(
    retry: Option<&RouteRetry>,
    clock: &Clock,
    stats: &Stats,
    metrics: Option<&RouteMetrics>,
    mut attempt: F,
) -> (AttemptOf<B>, Tally)
where
    F: FnMut(Option<tokio::time::Instant>) -> Fut,
    Fut: Future<Output = AttemptOf<B>>,
{
    let counted = |c: fn(&RouteMetrics) -> &Counter| {
        if let Some(m) = metrics {
            c(m).inc();
        }
    };
    let Some(retry) = retry else {
        bump(&stats.attempts);
        counted(|m| &m.attempts);
        let tally = Tally {
            attempts: 1,
            budget_denied: false,
        };
        return (attempt(None).await, tally);
    };
    let mut state = retry.begin(clock.now());
    let mut tally = Tally::default();
    loop {
        tally.attempts = tally.attempts.saturating_add(1);
        bump(&stats.attempts);
        counted(|m| &m.attempts);
        let deadline = retry.attempt_deadline(&state).map(|at| clock.instant(at));
        let result = attempt(deadline).await;
        let outcome = outcome(&result);
        match retry.decide(&mut state, clock.now(), outcome) {
            RetryDecision::RetryAt(at) => {
                // Let go of the failed answer first: its unread body holds a connection.
                drop(result);
                bump(&stats.retries);
                counted(|m| &m.retries);
                if at > clock.now() {
                    tokio::time::sleep_until(clock.instant(at)).await;
                }
            }
            RetryDecision::GiveUp(GiveUpReason::BudgetExhausted) => {
                counted(|m| &m.budget_denied);
                tally.budget_denied = true;
                return (result, tally);
            }
            RetryDecision::Success | RetryDecision::GiveUp(_) => return (result, tally),
        }
    }
}

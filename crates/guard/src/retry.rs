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

    /// The deadline of a call starting `now` within the attempt `state`
    /// is on: its own per-try timeout from now, never past the overall
    /// deadline. The forwarded call after a passed check gets it, as a
    /// simulated gateway arms its timeout afresh for the forwarded call.
    fn call_deadline(&self, state: &RetryState, now: Nanos) -> Option<Nanos> {
        let per_try = self
            .lock()
            .policy
            .per_try_timeout()
            .map(|t| now.saturating_add(t));
        match (per_try, state.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
    /// The check ([`run_checked`]) never passed: the result is its last
    /// failure, and nothing was forwarded.
    pub(crate) check_failed: bool,
}

/// What a check before forwarding ([`run_checked`]) found: passed, or the
/// failed call's result, which the retry policy judges as an attempt's.
pub(crate) type CheckOf<B> = Result<(), AttemptOf<B>>;

#[cfg(feature = "testing")] // only `trace` uses it
/// A check that is never made, for [`run`].
type NoCheck<B> = fn(Option<tokio::time::Instant>) -> std::future::Ready<CheckOf<B>>;

#[cfg(feature = "testing")] // only `trace` uses it
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
    attempt: F,
) -> (AttemptOf<B>, Tally)
where
    F: FnMut(Option<tokio::time::Instant>) -> Fut,
    Fut: Future<Output = AttemptOf<B>>,
{
    run_checked(retry, clock, stats, metrics, None::<NoCheck<B>>, attempt).await
}

/// As [`run`], with `check` (a route's dependency call) made before the
/// first forwarded attempt, as a simulated gateway calls its dependency
/// before forwarding: one retry state covers both, so
///
/// * a failed check is an attempt's outcome to the policy (classified,
///   budgeted, backed off) and is retried as a whole check; giving up on
///   it ends the request with `check_failed` and nothing forwarded;
/// * a passed check is no outcome: the forwarded call follows at once with
///   a deadline of its own (per-try timeout from then), and retries of the
///   forwarded call do not check again.
///
/// The check gets the attempt's deadline and applies any shorter one of
/// its own. Only forwarded attempts count in `attempts` (stats, metrics,
/// tally); retries of either call count in `retries`.
pub(crate) async fn run_checked<B, C, CFut, F, Fut>(
    retry: Option<&RouteRetry>,
    clock: &Clock,
    stats: &Stats,
    metrics: Option<&RouteMetrics>,
    mut check: Option<C>,
    mut attempt: F,
) -> (AttemptOf<B>, Tally)
where
    C: FnMut(Option<tokio::time::Instant>) -> CFut,
    CFut: Future<Output = CheckOf<B>>,
    F: FnMut(Option<tokio::time::Instant>) -> Fut,
    Fut: Future<Output = AttemptOf<B>>,
{
    let counted = |c: fn(&RouteMetrics) -> &Counter| {
        if let Some(m) = metrics {
            c(m).inc();
        }
    };
    let mut tally = Tally::default();
    let Some(retry) = retry else {
        if let Some(check) = check.as_mut()
            && let Err(failed) = check(None).await
        {
            tally.check_failed = true;
            return (failed, tally);
        }
        bump(&stats.attempts);
        counted(|m| &m.attempts);
        tally.attempts = 1;
        return (attempt(None).await, tally);
    };
    let mut state = retry.begin(clock.now());
    loop {
        let mut deadline = retry.attempt_deadline(&state);
        let result = match check.as_mut() {
            Some(c) => match c(deadline.map(|at| clock.instant(at))).await {
                Ok(()) => {
                    check = None;
                    deadline = retry.call_deadline(&state, clock.now());
                    None
                }
                Err(failed) => Some(failed),
            },
            None => None,
        };
        let checking = result.is_some();
        let result = match result {
            Some(failed) => failed,
            None => {
                tally.attempts = tally.attempts.saturating_add(1);
                bump(&stats.attempts);
                counted(|m| &m.attempts);
                attempt(deadline.map(|at| clock.instant(at))).await
            }
        };
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
                tally.check_failed = checking;
                return (result, tally);
            }
            RetryDecision::Success | RetryDecision::GiveUp(_) => {
                tally.check_failed = checking;
                return (result, tally);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::time::Duration;

    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;
    use tokio::time::Instant;

    use super::*;

    fn retry(extra: &str) -> RouteRetry {
        let config: RetryConfig = toml::from_str(&format!(
            "backoff = {{ kind = \"constant\", base = \"10ms\", jitter = \"none\" }}\n{extra}"
        ))
        .unwrap();
        RouteRetry::with_rng(&config, None, Pcg64Mcg::seed_from_u64(1)).unwrap()
    }

    fn answer(status: u16) -> AttemptOf<()> {
        let mut r = Response::new(());
        *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
        Ok(r)
    }

    /// Runs one request whose check answers `checks` in turn (200 passes)
    /// and whose forwarded attempts answer `forwards` in turn; returns
    /// (last status, tally, checks made, attempts made).
    async fn request(
        retry: Option<&RouteRetry>,
        checks: &[u16],
        forwards: &[u16],
    ) -> (u16, Tally, usize, usize) {
        let (clock, stats) = (Clock::new(), Stats::default());
        let (c, f) = (Cell::new(0), Cell::new(0));
        let check = |_deadline| {
            let status = checks[c.get()];
            c.set(c.get() + 1);
            async move {
                match status {
                    200 => Ok(()),
                    s => Err(answer(s)),
                }
            }
        };
        let attempt = |_deadline| {
            let status = forwards[f.get()];
            f.set(f.get() + 1);
            async move { answer(status) }
        };
        let (result, tally) = run_checked(retry, &clock, &stats, None, Some(check), attempt).await;
        let status = result.map(|r| r.status().as_u16()).unwrap_or(0);
        (status, tally, c.get(), f.get())
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_check_is_retried_as_a_whole_check_then_forwarded_once() {
        let r = retry("max_attempts = 3");
        let (status, tally, checks, forwards) = request(Some(&r), &[503, 503, 200], &[200]).await;
        assert_eq!((status, checks, forwards), (200, 3, 1));
        assert!(!tally.check_failed);
        assert_eq!(
            tally.attempts, 1,
            "only forwarded attempts count as attempts"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_never_passes_forwards_nothing() {
        let r = retry("max_attempts = 3");
        let (status, tally, checks, forwards) = request(Some(&r), &[503, 503, 503], &[]).await;
        assert_eq!((status, checks, forwards), (503, 3, 0));
        assert!(tally.check_failed);
        // Not retried (403 is no retry condition): one check, given up.
        let (_, tally, checks, _) = request(Some(&r), &[403], &[]).await;
        assert_eq!(checks, 1);
        assert!(tally.check_failed);
        // Without a retry policy: one check.
        let (_, tally, checks, forwards) = request(None, &[503], &[]).await;
        assert_eq!((checks, forwards), (1, 0));
        assert!(tally.check_failed);
        let (status, tally, _, forwards) = request(None, &[200], &[204]).await;
        assert_eq!((status, forwards), (204, 1));
        assert!(!tally.check_failed);
    }

    #[tokio::test(start_paused = true)]
    async fn checks_and_forwards_share_one_attempt_count_and_a_passed_check_is_not_made_again() {
        let r = retry("max_attempts = 3");
        // One failed check, then two failed forwards: three outcomes, done.
        let (status, tally, checks, forwards) =
            request(Some(&r), &[503, 200], &[503, 503, 200]).await;
        assert_eq!((status, checks, forwards), (503, 2, 2));
        assert!(!tally.check_failed, "the check passed; the forward failed");
        // A passed check, then forwards retried without checking again.
        let r = retry("max_attempts = 4");
        let (status, _, checks, forwards) = request(Some(&r), &[200], &[503, 503, 200]).await;
        assert_eq!((status, checks, forwards), (200, 1, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn the_forwarded_call_after_a_slow_check_gets_its_own_per_try_timeout() {
        let r = retry("max_attempts = 2\nper_try_timeout = \"500ms\"\noverall_timeout = \"10s\"");
        let (clock, stats) = (Clock::new(), Stats::default());
        let seen: RefCell<Vec<Duration>> = RefCell::new(Vec::new());
        let check = |deadline: Option<Instant>| {
            let left = deadline.unwrap() - Instant::now();
            seen.borrow_mut().push(left);
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(())
            }
        };
        let attempt = |deadline: Option<Instant>| {
            seen.borrow_mut().push(deadline.unwrap() - Instant::now());
            async { answer(200) }
        };
        let (result, _) = run_checked(Some(&r), &clock, &stats, None, Some(check), attempt).await;
        assert_eq!(result.unwrap().status(), 200);
        // The check had the attempt's 500 ms; the forward, 300 ms later, a
        // fresh 500 ms (the simulated gateway re-arms its timeout).
        assert_eq!(
            *seen.borrow(),
            [Duration::from_millis(500), Duration::from_millis(500)]
        );
        // The overall deadline still bounds it.
        let r = retry("max_attempts = 2\nper_try_timeout = \"500ms\"\noverall_timeout = \"600ms\"");
        seen.borrow_mut().clear();
        let (result, _) = run_checked(Some(&r), &clock, &stats, None, Some(check), attempt).await;
        assert_eq!(result.unwrap().status(), 200);
        assert_eq!(
            *seen.borrow(),
            [Duration::from_millis(500), Duration::from_millis(300)]
        );
    }
}

//! One request's attempts upstream, driven by `stormbreak-client`'s retry
//! loop ([`RetryLayer::drive`]): the guard decides nothing about retries
//! itself and drives no `RetryState`.
//!
//! What is the guard's own here is what it hands that loop: the attempts
//! (a route's dependency check, then the forwarded call), the reading of
//! its own transport errors ([`AttemptClassifier`]), and the counting of
//! what the loop did ([`Tally`], `Stats`, the route's metrics). A gateway
//! differs from a client in one documented parameter of the shared
//! classification: its own open breaker's refusal is a retryable 503 with
//! `Retry-After` ([`OwnRefusal::RetryAfter`]), as it answers its
//! downstream.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use http::Response;
use hyper::body::Incoming;
use prometheus_client::metrics::counter::Counter;
use stormbreak_client::{
    AttemptDeadline, Classify, CloneAll, HttpClassifier, OwnRefusal, RetryEvents, RetryLayer,
    TimedBelow,
};
use stormbreak_policy::FieldError;
use stormbreak_policy::budget::{BudgetConfig, RatioBudgetConfig};
use stormbreak_policy::retry::{AttemptOutcome, GiveUpReason, RetryConfig};

use crate::endpoint::AttemptError;
use crate::metrics::RouteMetrics;
use crate::stats::{Stats, bump};

/// One attempt's result as the request path sees it.
pub(crate) type Attempt = Result<Response<Incoming>, AttemptError>;

/// An attempt's result with any response body: the proxy's is
/// [`Incoming`]; the trace-equivalence seam ([`crate::trace`]) uses `()`.
pub(crate) type AttemptOf<B> = Result<Response<B>, AttemptError>;

/// What a check before forwarding ([`run_checked`]) found: passed, or the
/// failed call's result, which the retry policy judges as an attempt's.
pub(crate) type CheckOf<B> = Result<(), AttemptOf<B>>;

/// A route's retry policy, budget and jitter: the client's layer, whose
/// attempts are [`AttemptDeadline`]s the guard's attempts apply below the
/// breaker and outlier detection ([`TimedBelow`]).
pub(crate) type RouteRetry = RetryLayer<AttemptClassifier, CloneAll>;

/// A route's retry layer. `budget` absent means the ratio budget's
/// defaults (Finagle's 20 % + 10/s): a retry policy never runs without a
/// budget by accident. `seed` seeds the jitter RNG (`Pcg64Mcg::
/// seed_from_u64`), for a trace that must replay identically; else it is
/// seeded from the OS.
pub(crate) fn route_retry(
    config: &RetryConfig,
    budget: Option<&BudgetConfig>,
    seed: Option<u64>,
) -> Result<RouteRetry, FieldError> {
    let budget = match budget {
        Some(b) => b.clone(),
        None => BudgetConfig::Ratio(RatioBudgetConfig::default()),
    };
    let mut builder = RetryLayer::builder(config)?
        .budget_config(&budget)?
        .classifier(AttemptClassifier::default())
        .clone_with(CloneAll);
    if let Some(seed) = seed {
        builder = builder.seed(seed);
    }
    Ok(builder.build())
}

/// What an attempt's result tells the retry policy: a response by the
/// client's [`HttpClassifier`] (status, `Retry-After`, gRPC pushback), the
/// guard's own open breaker as a gateway's refusal, its transport errors
/// by kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttemptClassifier(HttpClassifier);

impl Default for AttemptClassifier {
    fn default() -> Self {
        AttemptClassifier(HttpClassifier::default().own_refusal(OwnRefusal::RetryAfter))
    }
}

impl<B> Classify<AttemptOf<B>> for AttemptClassifier {
    fn response(&self, attempt: &AttemptOf<B>) -> AttemptOutcome {
        match attempt {
            Ok(response) => self.0.response(response),
            Err(AttemptError::Timeout) => AttemptOutcome::Timeout,
            Err(AttemptError::Connect | AttemptError::NoEndpoint) => AttemptOutcome::ConnectFailed,
            Err(AttemptError::Reset) => AttemptOutcome::Reset,
            // The guard's own breaker answers downstream as a 503 with its
            // Retry-After, so a retry (if any) waits at least until probes
            // resume.
            Err(AttemptError::CircuitOpen(retry_after)) => self.0.refusal(*retry_after),
            // Only a streamed body can fail mid-attempt, and a streamed
            // body is never retried; answered as the 4xx the client gets,
            // which no retry condition names.
            Err(AttemptError::Client(fault)) => self.0.status(fault.wire_status()),
        }
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

/// The loop's count as it runs, shared by the attempts and the events (a
/// request's future must stay `Send`, so no `Cell`).
#[derive(Default)]
struct Counting {
    attempts: AtomicU32,
    budget_denied: AtomicBool,
    /// The latest answer came from the check.
    from_check: AtomicBool,
    /// The check passed: later attempts forward at once.
    checked: AtomicBool,
}

/// The loop's retries and give-up, counted where the proxy counts them.
struct Told<'a> {
    stats: &'a Stats,
    metrics: Option<&'a RouteMetrics>,
    count: &'a Counting,
}

impl Told<'_> {
    fn counted(&self, c: fn(&RouteMetrics) -> &Counter) {
        if let Some(m) = self.metrics {
            c(m).inc();
        }
    }
}

impl RetryEvents for Told<'_> {
    fn retrying(&self) {
        bump(&self.stats.retries);
        self.counted(|m| &m.retries);
    }

    fn gave_up(&self, reason: GiveUpReason) {
        if reason == GiveUpReason::BudgetExhausted {
            self.counted(|m| &m.budget_denied);
            self.count.budget_denied.store(true, Ordering::Relaxed);
        }
    }
}

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
    stats: &Stats,
    metrics: Option<&RouteMetrics>,
    attempt: F,
) -> (AttemptOf<B>, Tally)
where
    F: Fn(Option<tokio::time::Instant>) -> Fut,
    Fut: Future<Output = AttemptOf<B>>,
{
    run_checked(retry, stats, metrics, None::<NoCheck<B>>, attempt).await
}

/// As [`run`], with `check` (a route's dependency call) made before the
/// first forwarded attempt, as a simulated gateway calls its dependency
/// before forwarding: one retry state covers both, so
///
/// * a failed check is an attempt's outcome to the policy (classified,
///   budgeted, backed off) and is retried as a whole check; giving up on
///   it ends the request with `check_failed` and nothing forwarded;
/// * a passed check is no outcome: the forwarded call follows at once with
///   a deadline of its own (per-try timeout from then,
///   [`AttemptDeadline::rearmed`]), and retries of the forwarded call do
///   not check again.
///
/// The check gets the attempt's deadline and applies any shorter one of
/// its own. Only forwarded attempts count in `attempts` (stats, metrics,
/// tally); retries of either call count in `retries`.
pub(crate) async fn run_checked<B, C, CFut, F, Fut>(
    retry: Option<&RouteRetry>,
    stats: &Stats,
    metrics: Option<&RouteMetrics>,
    check: Option<C>,
    attempt: F,
) -> (AttemptOf<B>, Tally)
where
    C: Fn(Option<tokio::time::Instant>) -> CFut,
    CFut: Future<Output = CheckOf<B>>,
    F: Fn(Option<tokio::time::Instant>) -> Fut,
    Fut: Future<Output = AttemptOf<B>>,
{
    let count = Counting::default();
    let told = Told {
        stats,
        metrics,
        count: &count,
    };
    let (check, attempt, count_ref, told_ref) = (check.as_ref(), &attempt, &count, &told);
    let forward = move |deadline| {
        count_ref.attempts.fetch_add(1, Ordering::Relaxed);
        bump(&stats.attempts);
        told_ref.counted(|m| &m.attempts);
        attempt(deadline)
    };
    let tally = |count: &Counting| Tally {
        attempts: count.attempts.load(Ordering::Relaxed),
        budget_denied: count.budget_denied.load(Ordering::Relaxed),
        check_failed: count.from_check.load(Ordering::Relaxed),
    };
    let Some(retry) = retry else {
        if let Some(check) = check
            && let Err(failed) = check(None).await
        {
            count.from_check.store(true, Ordering::Relaxed);
            return (failed, tally(&count));
        }
        let result = forward(None).await;
        return (result, tally(&count));
    };
    let attempts = tower::service_fn(move |deadline: AttemptDeadline| async move {
        count_ref.from_check.store(false, Ordering::Relaxed);
        let mut at = deadline.at;
        if let Some(check) = check
            && !count_ref.checked.load(Ordering::Relaxed)
        {
            match check(at).await {
                Ok(()) => {
                    count_ref.checked.store(true, Ordering::Relaxed);
                    at = deadline.rearmed(tokio::time::Instant::now());
                }
                Err(failed) => {
                    count_ref.from_check.store(true, Ordering::Relaxed);
                    return Ok::<_, Infallible>(failed);
                }
            }
        }
        Ok(forward(at).await)
    });
    let result = retry
        .drive(attempts, AttemptDeadline::default(), TimedBelow, told_ref)
        .await
        // The loop answers without an attempt's result only when its own
        // timer abandons an attempt, and here the attempts apply their
        // deadlines themselves; a timeout is what it would mean.
        .unwrap_or(Err(AttemptError::Timeout));
    (result, tally(&count))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    fn retry(extra: &str) -> RouteRetry {
        let config: RetryConfig = toml::from_str(&format!(
            "backoff = {{ kind = \"constant\", base = \"10ms\", jitter = \"none\" }}\n{extra}"
        ))
        .unwrap();
        route_retry(&config, None, Some(1)).unwrap()
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
        let stats = Stats::default();
        let (c, f) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let check = |_deadline| {
            let status = checks[c.fetch_add(1, Ordering::Relaxed)];
            async move {
                match status {
                    200 => Ok(()),
                    s => Err(answer(s)),
                }
            }
        };
        let attempt = |_deadline| {
            let status = forwards[f.fetch_add(1, Ordering::Relaxed)];
            async move { answer(status) }
        };
        let (result, tally) = run_checked(retry, &stats, None, Some(check), attempt).await;
        let status = result.map(|r| r.status().as_u16()).unwrap_or(0);
        (status, tally, c.into_inner(), f.into_inner())
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
        let stats = Stats::default();
        let seen: Mutex<Vec<Duration>> = Mutex::new(Vec::new());
        let check = |deadline: Option<Instant>| {
            let left = deadline.unwrap() - Instant::now();
            seen.lock().unwrap().push(left);
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(())
            }
        };
        let attempt = |deadline: Option<Instant>| {
            seen.lock()
                .unwrap()
                .push(deadline.unwrap() - Instant::now());
            async { answer(200) }
        };
        let (result, _) = run_checked(Some(&r), &stats, None, Some(check), attempt).await;
        assert_eq!(result.unwrap().status(), 200);
        // The check had the attempt's 500 ms; the forward, 300 ms later, a
        // fresh 500 ms (the simulated gateway re-arms its timeout).
        assert_eq!(
            *seen.lock().unwrap(),
            [Duration::from_millis(500), Duration::from_millis(500)]
        );
        // The overall deadline still bounds it.
        let r = retry("max_attempts = 2\nper_try_timeout = \"500ms\"\noverall_timeout = \"600ms\"");
        seen.lock().unwrap().clear();
        let (result, _) = run_checked(Some(&r), &stats, None, Some(check), attempt).await;
        assert_eq!(result.unwrap().status(), 200);
        assert_eq!(
            *seen.lock().unwrap(),
            [Duration::from_millis(500), Duration::from_millis(300)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_guards_open_breaker_is_retried_after_its_retry_after() {
        let r = retry("max_attempts = 2");
        let stats = Stats::default();
        let n = AtomicUsize::new(0);
        let started = Instant::now();
        let attempt = |_| {
            let first = n.fetch_add(1, Ordering::Relaxed) == 0;
            async move {
                if first {
                    Err(AttemptError::CircuitOpen(Some(
                        stormbreak_policy::Nanos::SECOND,
                    )))
                } else {
                    answer(200)
                }
            }
        };
        let no_check = None::<fn(Option<Instant>) -> std::future::Ready<CheckOf<()>>>;
        let (result, tally) = run_checked(Some(&r), &stats, None, no_check, attempt).await;
        assert_eq!(result.unwrap().status(), 200);
        assert_eq!(tally.attempts, 2);
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "the retry waited for the breaker's Retry-After"
        );
    }
}

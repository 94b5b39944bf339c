//! The fan-out refresh loop: a client bug the scenario names (`fanout`),
//! modelled as the simulator's `engine/population.rs` runs it, not a
//! policy. Each failed attempt of an operation that the caller's
//! classifier would retry spawns `fanout` new attempts, sent together
//! after `fanout_delay`, while fewer than `fanout_max_in_flight` of the
//! operation's attempts are in flight (spawned ones waiting their delay
//! included) and until `give_up_after` from the operation's start; each
//! spawned attempt fails and spawns again the same way. A success ends
//! its own branch only: siblings in flight or waiting are not cancelled,
//! and the operation ends when its last attempt does.
//!
//! Whether a failure spawns is the simulator's caller's test
//! (`engine/caller.rs`, `is_retryable`): the policy crate's classifier of
//! the scenario's `retry` (its `retry_on`; the default without one), on
//! the cause the attempt was recorded under, seen as the simulator's
//! `Cause::outcome` sees it, with the answer's `Retry-After` (read whatever
//! `honour_retry_after` says, as the simulator's fan-out branch does).
//! Nothing else of the retry policy or the budget acts on a fan-out
//! population in the simulator (its budget is told of attempts but never
//! asked), so neither is built here; `set_retry` changes nothing, as the
//! simulator's caller keeps its first classifier. Attempts go through the
//! population's [`AttemptService`] (pick, stall hook, pooled connection,
//! recording) under the client's `timeout`, as `client.rs` sends them.
//!
//! Bounds: at most `fanout_max_in_flight` attempts of an operation at
//! once; every spawned attempt holds one of those places from its spawn
//! for at least `fanout_delay`, and spawns stop at `give_up_after`, so an
//! operation sends at most 1 + `fanout_max_in_flight` × (1 +
//! `give_up_after` / `fanout_delay`) attempts.

use bytes::Bytes;
use http_body_util::Empty;
use stormbreak_client::{BoxError, Classify, HttpClassifier};
use stormbreak_policy::Nanos;
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
use stormbreak_sim::record::Cause;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::client::{AttemptError, AttemptService, Recorded};
use crate::plan::FanoutPlan;

/// A fan-out population's way of making one operation.
pub struct Fanout {
    attempts: AttemptService,
    timeout: Nanos,
    spec: FanoutPlan,
    /// Its classifier tells the failures that spawn.
    classify: RetryPolicy,
    origin: Instant,
}

/// What an operation's task reports.
enum Event {
    /// An attempt ended: `None` a success, else its cause and the
    /// `Retry-After` its answer advertised.
    Ended(Option<(Cause, Option<Nanos>)>),
    /// `n` spawned attempts are due.
    Due(u32),
}

impl Fanout {
    /// The loop of `spec`, its attempts through `attempts` timed out at
    /// `timeout`, failures classified by `retry`'s `retry_on` (the
    /// default without one), its clock starting at `origin`.
    pub fn new(
        spec: FanoutPlan,
        attempts: AttemptService,
        timeout: Nanos,
        retry: Option<&RetryConfig>,
        origin: Instant,
    ) -> Result<Self, String> {
        let classify = RetryPolicy::new(retry.unwrap_or(&RetryConfig::default()))
            .map_err(|e| e.to_string())?;
        Ok(Fanout {
            attempts,
            timeout,
            spec,
            classify,
            origin,
        })
    }

    /// Whether this failure spawns: the simulator's `is_retryable`.
    fn spawns(&self, cause: Cause, retry_after: Option<Nanos>) -> bool {
        let c = self.classify.classifier();
        c.is_retried(c.classify(&cause.outcome(retry_after)))
    }

    fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    /// One operation, to its last attempt; true when any attempt
    /// succeeded. Dropping it (the run's end) aborts its attempts.
    pub async fn operation(&self) -> bool {
        let start = self.now();
        let deadline = start.saturating_add(self.spec.give_up_after);
        let mut set = JoinSet::new();
        // Attempts attached or waiting their delay, as the simulator's `live`.
        let mut live: u32 = 1;
        let mut ok = false;
        self.send(&mut set);
        while let Some(joined) = set.join_next().await {
            let event = match joined {
                Ok(e) => e,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: only the runtime's shutdown at the run's end
                // does that, and nothing is recorded after it.
                Err(_) => return ok,
            };
            match event {
                Event::Due(n) => (0..n).for_each(|_| self.send(&mut set)),
                Event::Ended(None) => {
                    live -= 1;
                    ok = true;
                }
                Event::Ended(Some((cause, retry_after))) => {
                    live -= 1;
                    if self.now() < deadline && self.spawns(cause, retry_after) {
                        let n = self
                            .spec
                            .fanout
                            .min(self.spec.max_in_flight.saturating_sub(live));
                        if n > 0 {
                            live += n;
                            let delay = std::time::Duration::from(self.spec.delay);
                            set.spawn(async move {
                                tokio::time::sleep(delay).await;
                                Event::Due(n)
                            });
                        }
                    }
                }
            }
            if live == 0 {
                break;
            }
        }
        ok
    }

    /// Sends one attempt of the operation as a task of `set`.
    fn send(&self, set: &mut JoinSet<Event>) {
        let svc = self.attempts.clone();
        let timeout = std::time::Duration::from(self.timeout);
        set.spawn(async move {
            let req = http::Request::new(Empty::<Bytes>::new());
            let ended = match tokio::time::timeout(timeout, svc.oneshot(req)).await {
                // Abandoned at the client's timeout: recorded `timeout` as
                // its future dropped.
                Err(_) => Some((Cause::Timeout, None)),
                Ok(Ok(resp)) => resp.extensions().get::<Recorded>().map(|r| {
                    let retry_after = HttpClassifier::default().response(&resp).retry_after();
                    (r.0, retry_after)
                }),
                Ok(Err(e)) => Some((cause_of_error(&e), None)),
            };
            Event::Ended(ended)
        });
    }
}

/// The cause an attempt's error was recorded under.
fn cause_of_error(e: &BoxError) -> Cause {
    e.downcast_ref::<AttemptError>()
        .map_or(Cause::Reset, |a| a.cause)
}

//! Retries, when the config asks for them: `stormbreak-client`'s retry
//! layer (the one async driver of the policy crate's `RetryState`), one
//! layer and one budget for the whole run.
//!
//! Off by default, as blackbox_exporter's maintainers argue: a retry hides
//! a failure a user may have seen. When on, a success after a retry is its
//! own state (`ok_after_retry`), never a plain success, and every retry
//! spends from one budget over all paths (by default 10 % of first
//! attempts, no floor), so attempts stay within 1.1 × the probe rate
//! however the target fails.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use stormbreak_client::{CloneAll, HttpClassifier, RetryEvents, RetryLayer, TimedHere};
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::retry::{GiveUpReason, RetryConfig, RetryOn};
use tokio::time::Instant;

use crate::outcome::Reason;
use crate::send::{Answer, Sender};

/// A failed attempt, as the retry classification reads it: a refused
/// connection and a timeout keep their `io::ErrorKind` underneath, so the
/// client's `error_outcome` sorts them as it sorts any client's.
#[derive(Debug)]
struct AttemptFailed {
    reason: Reason,
    io: std::io::Error,
}

impl AttemptFailed {
    fn new(reason: Reason) -> AttemptFailed {
        let kind = match reason {
            Reason::ConnectRefused => std::io::ErrorKind::ConnectionRefused,
            Reason::ConnectTimeout | Reason::Timeout => std::io::ErrorKind::TimedOut,
            _ => std::io::ErrorKind::ConnectionReset,
        };
        AttemptFailed {
            reason,
            io: std::io::Error::new(kind, reason.label()),
        }
    }
}

impl std::fmt::Display for AttemptFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason.label())
    }
}

impl std::error::Error for AttemptFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.io)
    }
}

#[derive(Default)]
struct Counted {
    retries: AtomicU64,
    budget_denied: AtomicU64,
}

impl RetryEvents for Counted {
    fn retrying(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    fn gave_up(&self, reason: GiveUpReason) {
        if reason == GiveUpReason::BudgetExhausted {
            self.budget_denied.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The run's retry layer and what it did.
pub struct Retries {
    layer: RetryLayer<HttpClassifier, CloneAll>,
    counted: Counted,
}

impl Retries {
    /// The layer for `config` under `budget`, its jitter seeded by `seed`.
    pub fn new(config: &RetryConfig, budget: &BudgetConfig, seed: u64) -> Result<Retries, String> {
        let mut config = config.clone();
        // Each probe's deadline is its path's timeout, enforced around the loop.
        config.overall_timeout = None;
        // A 429 or 503 asks the prober to back off: it pauses the path
        // (`Retry-After`, or `overload_pause`) and is never retried.
        config.retry_on.retain(|r| *r != RetryOn::Throttled);
        for s in [429, 503] {
            if !config.non_retriable_status_codes.contains(&s) {
                config.non_retriable_status_codes.push(s);
            }
        }
        config
            .retriable_status_codes
            .retain(|s| !matches!(s, 429 | 503));
        let layer = RetryLayer::builder(&config)
            .and_then(|b| b.budget_config(budget))
            .map_err(|e| e.to_string())?
            .seed(seed)
            .clone_with(CloneAll)
            .build();
        Ok(Retries {
            layer,
            counted: Counted::default(),
        })
    }

    /// One probe through the retry loop: the last attempt's answer and
    /// the number of attempts.
    pub async fn probe(&self, sender: &Sender, deadline: Instant) -> (Answer, u32) {
        let last: Arc<Mutex<Option<Answer>>> = Arc::new(Mutex::new(None));
        let attempts = AtomicU64::new(0);
        let service = tower::service_fn(|()| {
            let last = Arc::clone(&last);
            attempts.fetch_add(1, Ordering::Relaxed);
            async move {
                *last.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let answer = sender.send(deadline).await;
                let result = match (answer.failure, answer.status) {
                    (Some(r), _) => Err(AttemptFailed::new(r)),
                    (None, None) => Err(AttemptFailed::new(Reason::Reset)),
                    (None, Some(status)) => {
                        let mut r = http::Response::new(());
                        *r.status_mut() =
                            http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
                        if let Some(after) = answer.retry_after {
                            let secs = after.as_nanos().div_ceil(1_000_000_000);
                            r.headers_mut()
                                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
                        }
                        Ok(r)
                    }
                };
                *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
                result
            }
        });
        let driven = self.layer.drive(service, (), TimedHere, &self.counted);
        // The outcome is read from `last`: the loop's own result (an
        // answer or its error) says nothing more.
        let _ = tokio::time::timeout_at(deadline, driven).await;
        let n = attempts.load(Ordering::Relaxed).max(1) as u32;
        let answer = last.lock().unwrap_or_else(|e| e.into_inner()).take();
        match answer {
            // The last attempt answered: a success, the answer the loop
            // gave up on, or a failure whose retry the deadline cut off
            // while it waited for its backoff.
            Some(a) => (a, n),
            // The loop's per-try timer or the probe's deadline cut the
            // last attempt short.
            None => (
                Answer {
                    status: None,
                    failure: Some(Reason::Timeout),
                    retry_after: None,
                },
                n,
            ),
        }
    }

    /// Retries sent so far.
    pub fn retries(&self) -> u64 {
        self.counted.retries.load(Ordering::Relaxed)
    }

    /// Retries the budget refused so far.
    pub fn budget_denied(&self) -> u64 {
        self.counted.budget_denied.load(Ordering::Relaxed)
    }
}

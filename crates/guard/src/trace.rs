//! The guard's retry path without sockets: the same retry loop the proxy
//! runs for every request (module `attempts`, over `stormbreak-client`'s
//! `RetryLayer::drive`: budget, backoff with seeded jitter, per-try and
//! overall deadlines, waiting on tokio's clock), with the attempt supplied
//! by the caller.
//!
//! It exists so a test can feed the guard and the simulator the same
//! synthetic trace of attempt outcomes and compare their decisions
//! (`crates/equivalence/tests/it/trace.rs`); nothing in the proxy goes
//! through it. Time is tokio's clock, so under
//! `#[tokio::test(start_paused = true)]` it is virtual.
//!
//! ```
//! use stormbreak_guard::trace::{Answer, RetryPath};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let retry = toml::from_str(r#"max_attempts = 3
//! backoff = { kind = "constant", base = "10ms", jitter = "none" }"#).unwrap();
//! let path = RetryPath::new(&retry, None, 7).unwrap();
//! let mut tries = 0;
//! let answer = path
//!     .call(|_deadline| {
//!         tries += 1;
//!         let status = if tries < 3 { 503 } else { 200 };
//!         async move { Answer::Status { status, retry_after_secs: None } }
//!     })
//!     .await;
//! assert_eq!(answer, Answer::Status { status: 200, retry_after_secs: None });
//! assert_eq!((path.attempts(), path.now()), (3, stormbreak_policy::Nanos::from_millis(20)));
//! # }
//! ```

use std::future::Future;

use http::{HeaderValue, Response, StatusCode, header};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::{FieldError, Nanos};

use crate::attempts::{self, AttemptOf, RouteRetry};
use crate::clock::Clock;
use crate::endpoint::AttemptError;
use crate::stats::Stats;

/// What one attempt produced, as the retry policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// A response head with this status and, when set, `Retry-After` in
    /// delta-seconds.
    Status {
        /// HTTP status code.
        status: u16,
        /// `Retry-After` delta-seconds.
        retry_after_secs: Option<u64>,
    },
    /// The attempt's deadline passed first.
    Timeout,
    /// No connection could be opened.
    ConnectFailed,
    /// The connection failed before a response head arrived.
    Reset,
}

/// A route's retry policy and budget, driven as the proxy drives them.
pub struct RetryPath {
    retry: RouteRetry,
    clock: Clock,
    stats: Stats,
}

impl RetryPath {
    /// A route with this `retry` and `budget` (absent: the guard's default,
    /// the ratio budget's defaults), its jitter RNG seeded with `seed`
    /// (`Pcg64Mcg::seed_from_u64`). Its clock starts now.
    pub fn new(
        retry: &RetryConfig,
        budget: Option<&BudgetConfig>,
        seed: u64,
    ) -> Result<Self, FieldError> {
        Ok(RetryPath {
            retry: attempts::route_retry(retry, budget, Some(seed))?,
            clock: Clock::new(),
            stats: Stats::default(),
        })
    }

    /// Time since [`RetryPath::new`], on tokio's clock.
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// Attempts sent so far, by every call.
    pub fn attempts(&self) -> u64 {
        self.stats.attempts()
    }

    /// Retries sent so far, by every call.
    pub fn retries(&self) -> u64 {
        self.stats.retries()
    }

    /// One request: calls `attempt` with the attempt's deadline (time on
    /// this path's clock; `None` without one) until the policy says success
    /// or give up, waiting out each backoff on tokio's clock; returns the
    /// last answer. `attempt` must answer [`Answer::Timeout`] once its
    /// deadline has passed, as the proxy's attempts do.
    pub async fn call<F, Fut>(&self, attempt: F) -> Answer
    where
        F: FnMut(Option<Nanos>) -> Fut,
        Fut: Future<Output = Answer>,
    {
        let clock = self.clock;
        // The proxy's attempts are `Fn`; the caller's is lent out one
        // attempt at a time.
        let attempt = std::sync::Mutex::new(attempt);
        let result = attempts::run(Some(&self.retry), &self.stats, None, |deadline| {
            let answer = (attempt
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner))(
                deadline.map(|at| clock.since(at)),
            );
            async move { to_attempt(answer.await) }
        })
        .await
        .0;
        from_attempt(&result)
    }
}

/// A route's admission (`limit` and its optional `queue`), driven as the
/// proxy drives it: the shedder's step first (saturation by class; the
/// `shed` module's `decide`, the proxy's own), then the limit, waiting in
/// the queue when there is one; admitted requests hold a slot until they
/// are answered, and the answer's status decides the sample (the `limit`
/// module's rule, the proxy's own). Its clock is tokio's, started by
/// [`LimitPath::new`].
///
/// ```
/// use stormbreak_guard::trace::{LimitPath, Refused};
/// use stormbreak_policy::shed::Criticality;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let limit = toml::from_str(r#"kind = "fixed"
/// limit = 1"#).unwrap();
/// let path = LimitPath::new(&limit, None, None, 7).unwrap();
/// let first = path.admit(Criticality::Critical).await.expect("one slot");
/// let refused = Refused { status: 503, retry_after: Some(stormbreak_policy::Nanos::SECOND) };
/// assert_eq!(path.admit(Criticality::Critical).await.err(), Some(refused), "the slot is taken");
/// first.finish(200);
/// assert_eq!((path.inflight(), path.limit()), (0, 1));
/// # }
/// ```
pub struct LimitPath {
    limit: std::sync::Arc<crate::limit::ConcurrencyLimit>,
    shedder: std::sync::Mutex<stormbreak_policy::shed::Shedder>,
}

/// A request [`LimitPath::admit`] let through; [`Admitted::finish`] it
/// with its answer's status. Dropped unfinished, it frees its slot without
/// a sample, as when a client goes away.
pub struct Admitted(crate::limit::LimitPermit);

/// The answer the guard gives a request it turned away at admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// HTTP status.
    pub status: u16,
    /// `Retry-After`, when sent.
    pub retry_after: Option<Nanos>,
}

impl LimitPath {
    /// A limit built from `limit`, with an admission queue when `queue` is
    /// given, shedding by class with `saturation` (the guard's
    /// `[saturation]`; its defaults when `None`), its algorithm's random
    /// draws from `Pcg64Mcg::seed_from_u64(seed)`.
    pub fn new(
        limit: &stormbreak_policy::limit::LimitConfig,
        saturation: Option<&stormbreak_policy::shed::SaturationConfig>,
        queue: Option<&stormbreak_policy::limit::QueueConfig>,
        seed: u64,
    ) -> Result<Self, FieldError> {
        let clock = Clock::new();
        let shed = stormbreak_policy::shed::ShedConfig {
            saturation: saturation.cloned().unwrap_or_default(),
            ..Default::default()
        };
        Ok(LimitPath {
            limit: crate::limit::ConcurrencyLimit::with_rng(
                limit,
                queue.cloned(),
                clock,
                Pcg64Mcg::seed_from_u64(seed),
            )?,
            shedder: std::sync::Mutex::new(stormbreak_policy::shed::Shedder::new(&shed)?),
        })
    }

    /// Admits a request of `class`, after waiting in the queue if there is
    /// one and the limit is reached, or refuses it with the answer the
    /// proxy would give (at once, or when its wait times out). Without a
    /// queue it never waits.
    pub async fn admit(
        &self,
        class: stormbreak_policy::shed::Criticality,
    ) -> Result<Admitted, Refused> {
        if let Some(shed) = crate::shed::decide(&self.shedder, 0, class, Some(&self.limit)) {
            let stormbreak_policy::shed::Decision::Reject {
                status,
                retry_after,
            } = shed.decision
            else {
                unreachable!("a shed is a rejection")
            };
            return Err(Refused {
                status,
                retry_after,
            });
        }
        match self.limit.acquire().await {
            Ok(permit) => Ok(Admitted(permit)),
            Err(_) => {
                let (status, retry_after) = crate::shed::full_answer(&self.shedder);
                Err(Refused {
                    status,
                    retry_after,
                })
            }
        }
    }

    /// Requests waiting in the queue now.
    pub fn waiting(&self) -> u64 {
        self.limit.gauge().queued
    }

    /// The algorithm's current limit.
    pub fn limit(&self) -> u32 {
        self.limit.limit()
    }

    /// Requests holding a slot now.
    pub fn inflight(&self) -> u64 {
        self.limit.gauge().inflight
    }
}

impl Admitted {
    /// The request was answered with `status` now.
    pub fn finish(self, status: u16) {
        self.0.finish(crate::limit::outcome_of(status));
    }
}

fn to_attempt(answer: Answer) -> AttemptOf<()> {
    match answer {
        Answer::Status {
            status,
            retry_after_secs,
        } => {
            let mut response = Response::new(());
            *response.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if let Some(secs) = retry_after_secs {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            Ok(response)
        }
        Answer::Timeout => Err(AttemptError::Timeout),
        Answer::ConnectFailed => Err(AttemptError::Connect),
        Answer::Reset => Err(AttemptError::Reset),
    }
}

fn from_attempt(result: &AttemptOf<()>) -> Answer {
    match result {
        Ok(r) => Answer::Status {
            status: r.status().as_u16(),
            retry_after_secs: r
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
        },
        Err(AttemptError::Timeout) => Answer::Timeout,
        Err(AttemptError::Reset) => Answer::Reset,
        Err(_) => Answer::ConnectFailed,
    }
}

/// A route's staged restore, driven as the proxy drives it: each request
/// arriving on a site (a listener name) is admitted or not by the running
/// restore, and an admitted request's answer feeds that site's error guard
/// (anything but a server error is a success, the proxy's rule). The
/// restore starts at [`RestorePath::new`], on tokio's clock.
///
/// ```
/// use stormbreak_guard::trace::RestorePath;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let restore = toml::from_str(r#"ramp = { steps = [0.5, 1.0], hold = "1s", step_back_after = "0s" }"#).unwrap();
/// let path = RestorePath::new(&restore, &["a", "b"], 7).unwrap();
/// assert!(!path.admit("b"), "site b waits for site a");
/// assert!(!path.admit("elsewhere"), "a listener outside the restore admits nothing");
/// # }
/// ```
pub struct RestorePath {
    restore: crate::restore::Restore,
    clock: Clock,
}

impl RestorePath {
    /// A restore with `config` over `sites` (in restore order), started
    /// now; its admission draws from `Pcg64Mcg::seed_from_u64(seed)`.
    pub fn new(
        config: &stormbreak_policy::ramp::StagedRestoreConfig,
        sites: &[&str],
        seed: u64,
    ) -> Result<Self, FieldError> {
        let clock = Clock::new();
        let restore = crate::restore::Restore::new(
            Some(config),
            sites.iter().map(|s| (*s).to_owned()).collect(),
            false,
            clock.now(),
            Pcg64Mcg::seed_from_u64(seed),
        )?;
        Ok(RestorePath { restore, clock })
    }

    /// Is a request arriving now on `site` admitted?
    pub fn admit(&self, site: &str) -> bool {
        self.restore.admit(self.clock.now(), site)
    }

    /// A request admitted on `site` was answered `status` now.
    pub fn finish(&self, site: &str, status: u16) {
        self.restore
            .observe(self.clock.now(), site, crate::restore::restore_ok(status));
    }

    /// Time since [`RestorePath::new`], on tokio's clock.
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// Each site's admitted fraction now, in restore order (1.0 each once
    /// no restore runs).
    pub fn fractions(&self) -> Vec<f64> {
        self.restore
            .view(self.clock.now())
            .fractions
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }
}

//! Concurrency limiting: the policy crate's [`Limiter`] behind a lock, with
//! an optional bounded admission queue in front of it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::FieldError;
use stormbreak_policy::limit::{AnyLimit, LimitConfig, Limiter, Outcome, Permit};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::config::QueueConfig;

/// A concurrency limit shared by every request of a route or cluster.
///
/// Admission is `Limiter::try_acquire`; a request that finds the limit
/// reached waits in the queue (at most `queue.size` wait, each at most
/// `queue.timeout`), woken in arrival order as permits come back. Without a
/// queue it is refused at once.
pub(crate) struct ConcurrencyLimit {
    state: Mutex<(Limiter<AnyLimit>, Pcg64Mcg)>,
    queue: Option<QueueConfig>,
    waiting: AtomicU32,
    released: Notify,
    clock: Clock,
}

/// An admitted request; hand it back with [`LimitPermit::finish`]. Dropped
/// unfinished (the client went away), it frees its slot without a sample.
pub(crate) struct LimitPermit {
    limit: Arc<ConcurrencyLimit>,
    permit: Option<Permit>,
}

impl ConcurrencyLimit {
    pub(crate) fn new(
        config: &LimitConfig,
        queue: Option<QueueConfig>,
        clock: Clock,
    ) -> Result<Arc<Self>, FieldError> {
        Self::with_rng(config, queue, clock, Pcg64Mcg::from_os_rng())
    }

    /// As [`ConcurrencyLimit::new`], the algorithm's draws from `rng` (a
    /// seeded one makes a run repeatable, for the equivalence test).
    pub(crate) fn with_rng(
        config: &LimitConfig,
        queue: Option<QueueConfig>,
        clock: Clock,
        rng: Pcg64Mcg,
    ) -> Result<Arc<Self>, FieldError> {
        Ok(Arc::new(ConcurrencyLimit {
            state: Mutex::new((Limiter::new(config.build()?), rng)),
            queue,
            waiting: AtomicU32::new(0),
            released: Notify::new(),
            clock,
        }))
    }

    fn try_acquire(&self) -> Option<Permit> {
        let now = self.clock.now();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0.try_acquire(now)
    }

    /// A permit now, if the limit has room: what [`Self::acquire`] tries
    /// first, for a caller that would rather not make its future when it
    /// need not wait.
    pub(crate) fn try_permit(self: &Arc<Self>) -> Option<LimitPermit> {
        self.try_acquire().map(|p| self.permit(p))
    }

    /// Admits now, or after waiting in the queue; else why not.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Result<LimitPermit, Refusal> {
        if let Some(permit) = self.try_acquire() {
            return Ok(self.permit(permit));
        }
        let Some(queue) = self.queue.as_ref() else {
            return Err(Refusal::Full);
        };
        // Claim a queue slot, or be refused: the queue never grows past its size.
        if self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < queue.size).then_some(w + 1)
            })
            .is_err()
        {
            return Err(Refusal::Full);
        }
        let _slot = WaitSlot(&self.waiting);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from(queue.timeout);
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            // Registered before the retry, so a release in between is not missed.
            notified.as_mut().enable();
            if let Some(permit) = self.try_acquire() {
                return Ok(self.permit(permit));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(Refusal::QueueTimeout);
            }
        }
    }

    fn permit(self: &Arc<Self>, permit: Permit) -> LimitPermit {
        LimitPermit {
            limit: self.clone(),
            permit: Some(permit),
        }
    }

    fn release(&self, permit: Permit, outcome: Outcome) {
        let now = self.clock.now();
        {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let (limiter, rng) = &mut *s;
            limiter.release(now, permit, outcome, rng);
        }
        self.released.notify_one();
    }

    /// `(in flight + waiting) / (limit + queue size)`: the share of all
    /// admission room in use, 1.0 when both the limit and the queue are
    /// full. This is the saturation that sheds by class, so with the
    /// default thresholds sheddable work goes at 80 % while critical work
    /// still queues. The limit is the one as of now (the algorithm's
    /// time-driven changes applied, as admission applies them), so a
    /// request is shed by the limit it would meet.
    pub(crate) fn saturation(&self) -> f64 {
        let now = self.clock.now();
        let (inflight, limit) = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.0.advance(now);
            (s.0.inflight(), s.0.limit())
        };
        let waiting = self.waiting.load(Ordering::Acquire);
        let queue = self.queue.as_ref().map_or(0, |q| q.size);
        stormbreak_policy::shed::saturation_of(inflight, waiting, limit, queue)
    }

    /// In flight, limit and queued now, for metrics.
    pub(crate) fn gauge(&self) -> crate::metrics::LimitGauge {
        let (inflight, limit) = {
            let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (s.0.inflight(), s.0.limit())
        };
        crate::metrics::LimitGauge {
            inflight: u64::from(inflight),
            limit: Some(u64::from(limit)),
            queued: u64::from(self.waiting.load(Ordering::Acquire)),
        }
    }

    /// Replaces the limit's algorithm in place (a reload that changed only
    /// the `limit` table): requests in flight keep their permits and count
    /// against the new limit, waiters stay queued, and a raised limit
    /// admits waiters at once rather than at the next release.
    pub(crate) fn set_algorithm(&self, algorithm: AnyLimit) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .set_algorithm(algorithm);
        // Each woken waiter takes a permit or waits again: waking all is
        // safe, and the queue is bounded.
        self.released.notify_waiters();
    }

    /// The algorithm's current limit.
    pub(crate) fn limit(&self) -> u32 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .limit()
    }
}

/// Why the limit refused a request: the guard answers both alike, with
/// the saturation table's status, and says which in
/// [`REFUSED_HEADER`] (the simulator records them as `limit_rejected`
/// and `queue_timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The limit was reached and the queue (if any) was full.
    Full,
    /// The request waited its queue's `timeout` without a slot.
    QueueTimeout,
}

impl Refusal {
    /// The value of [`REFUSED_HEADER`].
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Full => "limit",
            Refusal::QueueTimeout => "queue_timeout",
        }
    }
}

/// The response header that names a limit refusal's cause.
pub const REFUSED_HEADER: &str = "x-stormbreak-refused";

/// How a route's limiter counts an answer with `status`: a server error is
/// a drop (the upstream is overloaded or failing), anything else a sample
/// of its round-trip time. The simulator counts alike
/// (`stormbreak_sim::engine::admission`).
pub(crate) fn outcome_of(status: u16) -> Outcome {
    if (500..=599).contains(&status) {
        Outcome::Dropped
    } else {
        Outcome::Success
    }
}

struct WaitSlot<'a>(&'a AtomicU32);

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LimitPermit {
    /// Ends the request: `Success` feeds its latency, `Dropped` a loss.
    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(p) = self.permit.take() {
            self.limit.release(p, outcome);
        }
    }
}

impl Drop for LimitPermit {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.limit.release(p, Outcome::Ignore);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::limit::FixedConfig;

    fn fixed(limit: u32, queue: Option<QueueConfig>) -> Arc<ConcurrencyLimit> {
        ConcurrencyLimit::new(
            &LimitConfig::Fixed(FixedConfig { limit }),
            queue,
            Clock::new(),
        )
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_queue_the_limit_refuses_at_once() {
        let l = fixed(2, None);
        let a = l.acquire().await.unwrap();
        let _b = l.acquire().await.unwrap();
        assert_eq!(l.acquire().await.err(), Some(Refusal::Full));
        assert_eq!(l.saturation(), 1.0);
        a.finish(Outcome::Success);
        assert!(l.acquire().await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded_and_times_out_and_a_release_admits_a_waiter() {
        let queue = QueueConfig {
            size: 1,
            timeout: Nanos::from_millis(100),
        };
        let l = fixed(1, Some(queue));
        let held = l.acquire().await.unwrap();
        let waiter = tokio::spawn({
            let l = l.clone();
            async move {
                l.acquire()
                    .await
                    .map(|p| p.finish(Outcome::Success))
                    .is_ok()
            }
        });
        tokio::task::yield_now().await;
        assert_eq!(
            l.saturation(),
            1.0,
            "one in flight, one waiting: all room used"
        );
        assert_eq!(
            l.acquire().await.err(),
            Some(Refusal::Full),
            "the one-slot queue is full"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        held.finish(Outcome::Success);
        assert!(waiter.await.unwrap(), "admitted when the slot came back");
        // Now a waiter that nobody releases for: refused at its timeout.
        let _held = l.acquire().await.unwrap();
        let start = tokio::time::Instant::now();
        assert_eq!(l.acquire().await.err(), Some(Refusal::QueueTimeout));
        assert_eq!(start.elapsed(), std::time::Duration::from_millis(100));
    }
}

#[cfg(test)]
mod knee {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    /// A simulated backend with `KNEE` workers and 10 ms of work per request:
    /// up to the knee a request takes 10 ms, beyond it they share the workers
    /// and each takes 10 ms × in flight / `KNEE`. 200 closed-loop clients
    /// push through the guard's limiter for 60 virtual seconds; the
    /// adaptive limit must end near the knee rather than at the 200 the
    /// clients could drive, or at its floor. Gradient2 settles where the
    /// short-term latency is about its 1.5 tolerance over the long-term one,
    /// so "near" is within a factor of two.
    const KNEE: u32 = 20;

    async fn settle(config: &str) -> (u32, u64) {
        let config: LimitConfig = toml::from_str(config).unwrap();
        let limit = ConcurrencyLimit::new(&config, None, Clock::new()).unwrap();
        let inflight = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let end = tokio::time::Instant::now() + Duration::from_secs(60);
        let clients: Vec<_> = (0..200)
            .map(|_| {
                let (limit, inflight, done) = (limit.clone(), inflight.clone(), done.clone());
                tokio::spawn(async move {
                    while tokio::time::Instant::now() < end {
                        let Ok(permit) = limit.acquire().await else {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            continue;
                        };
                        let n = inflight.fetch_add(1, Ordering::SeqCst) + 1;
                        let work = Duration::from_micros(
                            10_000 * u64::from(n.max(KNEE)) / u64::from(KNEE),
                        );
                        tokio::time::sleep(work).await;
                        inflight.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::Relaxed);
                        permit.finish(Outcome::Success);
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        (limit.limit(), done.load(Ordering::Relaxed))
    }

    #[tokio::test(start_paused = true)]
    async fn gradient2_settles_near_the_backends_knee() {
        let (limit, done) = settle(r#"kind = "gradient2""#).await;
        eprintln!("gradient2: limit {limit}, {done} requests");
        assert!(
            (KNEE / 2..=2 * KNEE).contains(&limit),
            "limit {limit}, knee {KNEE}"
        );
        // Throughput near the backend's capacity (20 workers × 100/s × 60 s).
        assert!(done > 90_000, "{done}");
    }
}

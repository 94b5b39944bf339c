use super::{LimitAlgorithm, Sample};
use crate::Nanos;
use rand::Rng;

/// Proof of admission, returned by [`Limiter::try_acquire`] and handed back
/// to [`Limiter::release`].
///
/// A small `Copy` token rather than an RAII guard: the simulator keeps
/// thousands of them in its in-flight arena and a gateway carries one per
/// request. Release each permit exactly once; a double release would
/// under-count in-flight requests (the count saturates at zero, it does not wrap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permit {
    /// When the request was admitted.
    pub start: Nanos,
    /// In-flight count at admission, this request included.
    pub inflight: u32,
}

/// How an admitted request ended, following Netflix's limiter listener
/// (`onSuccess` / `onDropped` / `onIgnore`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Completed normally: its rtt is a sample.
    Success,
    /// Rejected downstream or timed out: a sample with `dropped = true`,
    /// which loss-based algorithms back off on.
    Dropped,
    /// Says nothing about downstream capacity (cancelled by the caller,
    /// failed validation locally): frees the slot and feeds no sample, like
    /// Envoy's `cancelLatencySample`.
    Ignore,
}

/// Admission control around one [`LimitAlgorithm`]: counts in-flight
/// requests, admits while `inflight < limit`, feeds each release back.
///
/// This is Netflix's `SimpleLimiter` and Envoy's `forwardingDecision` /
/// `recordLatencySample` pair, single-threaded and clock-free.
///
/// ```
/// use stormbreak_policy::limit::{Fixed, FixedConfig, Limiter, Outcome};
/// use stormbreak_policy::Nanos;
/// use rand::SeedableRng;
///
/// let mut limiter = Limiter::new(Fixed::new(&FixedConfig { limit: 1 }).unwrap());
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// let permit = limiter.try_acquire(Nanos::ZERO).unwrap();
/// assert!(limiter.try_acquire(Nanos::ZERO).is_none(), "the single slot is taken");
/// limiter.release(Nanos::from_nanos(10), permit, Outcome::Success, &mut rng);
/// assert!(limiter.try_acquire(Nanos::from_nanos(10)).is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Limiter<A> {
    algorithm: A,
    inflight: u32,
}

impl<A: LimitAlgorithm> Limiter<A> {
    /// Wraps `algorithm` with nothing in flight.
    pub fn new(algorithm: A) -> Self {
        Limiter {
            algorithm,
            inflight: 0,
        }
    }

    /// Admits one request at `now` if in-flight is below the limit.
    pub fn try_acquire(&mut self, now: Nanos) -> Option<Permit> {
        self.algorithm.advance(now);
        if self.inflight < self.algorithm.limit() {
            self.inflight += 1;
            Some(Permit {
                start: now,
                inflight: self.inflight,
            })
        } else {
            None
        }
    }

    /// Ends an admitted request at `now` and, unless ignored, feeds its sample.
    pub fn release<R: Rng + ?Sized>(
        &mut self,
        now: Nanos,
        permit: Permit,
        outcome: Outcome,
        rng: &mut R,
    ) {
        self.inflight = self.inflight.saturating_sub(1);
        let dropped = match outcome {
            Outcome::Success => false,
            Outcome::Dropped => true,
            Outcome::Ignore => {
                self.algorithm.advance(now);
                return;
            }
        };
        let sample = Sample {
            rtt: now.saturating_sub(permit.start),
            inflight: permit.inflight,
            dropped,
        };
        self.algorithm.on_sample(now, sample, rng);
    }

    /// Brings the algorithm's time-driven changes (a probe, a periodic
    /// recalculation) up to `now`, as [`Limiter::try_acquire`] does first,
    /// so a signal read before admission — the saturation a shedder reads —
    /// sees the limit that admission will use. Calling it again at the same
    /// `now` changes nothing.
    pub fn advance(&mut self, now: Nanos) {
        self.algorithm.advance(now);
    }

    /// Replaces the algorithm, keeping the requests in flight: an
    /// operator's new limit takes effect for the next admission, and a
    /// limit cut below what is in flight admits nothing until enough of
    /// those finish (they are never cut off). Permits handed out before
    /// stay valid; their samples go to the new algorithm.
    ///
    /// ```
    /// use stormbreak_policy::limit::{Fixed, FixedConfig, Limiter};
    /// use stormbreak_policy::Nanos;
    /// let fixed = |limit| Fixed::new(&FixedConfig { limit }).unwrap();
    /// let mut limiter = Limiter::new(fixed(2));
    /// let t = Nanos::ZERO;
    /// let _a = limiter.try_acquire(t).unwrap();
    /// let _b = limiter.try_acquire(t).unwrap();
    /// limiter.set_algorithm(fixed(1));
    /// assert_eq!(limiter.inflight(), 2, "kept");
    /// assert!(limiter.try_acquire(t).is_none());
    /// ```
    pub fn set_algorithm(&mut self, algorithm: A) {
        self.algorithm = algorithm;
    }

    /// The algorithm's current limit.
    pub fn limit(&self) -> u32 {
        self.algorithm.limit()
    }

    /// Requests admitted and not yet released.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// The wrapped algorithm, for inspection.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Aimd, AimdConfig, Fixed, FixedConfig};
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn admits_up_to_the_limit_then_rejects() {
        let mut limiter = Limiter::new(Fixed::new(&FixedConfig { limit: 3 }).unwrap());
        let permits: Vec<_> = (0..3)
            .map(|t| limiter.try_acquire(Nanos::from_nanos(t)).unwrap())
            .collect();
        assert_eq!(permits[2].inflight, 3);
        assert_eq!(permits[1].start, Nanos::NANOSECOND);
        assert!(limiter.try_acquire(Nanos::from_nanos(4)).is_none());
        assert_eq!(limiter.inflight(), 3);
    }

    #[test]
    fn dropped_release_feeds_a_drop_and_ignore_feeds_nothing() {
        let config = AimdConfig {
            min_limit: 1,
            ..AimdConfig::default()
        };
        let mut limiter = Limiter::new(Aimd::new(&config).unwrap());
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let a = limiter.try_acquire(Nanos::ZERO).unwrap();
        let b = limiter.try_acquire(Nanos::ZERO).unwrap();
        limiter.release(Nanos::from_micros(1), a, Outcome::Ignore, &mut rng);
        assert_eq!(
            limiter.limit(),
            20,
            "ignored outcomes leave the limit alone"
        );
        limiter.release(Nanos::from_micros(1), b, Outcome::Dropped, &mut rng);
        // AIMD: 20 * 0.9 = 18.
        assert_eq!(limiter.limit(), 18);
        assert_eq!(limiter.inflight(), 0);
    }

    #[test]
    fn double_release_saturates_instead_of_wrapping() {
        let mut limiter = Limiter::new(Fixed::new(&FixedConfig { limit: 2 }).unwrap());
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let p = limiter.try_acquire(Nanos::ZERO).unwrap();
        limiter.release(Nanos::NANOSECOND, p, Outcome::Success, &mut rng);
        limiter.release(Nanos::NANOSECOND, p, Outcome::Success, &mut rng);
        assert_eq!(limiter.inflight(), 0);
    }

    #[test]
    fn sample_rtt_is_release_minus_start() {
        #[derive(Default)]
        struct Spy(Option<Sample>);
        impl LimitAlgorithm for Spy {
            fn limit(&self) -> u32 {
                10
            }
            fn min_limit(&self) -> u32 {
                10
            }
            fn max_limit(&self) -> u32 {
                10
            }
            fn on_sample<R: Rng + ?Sized>(&mut self, _: Nanos, sample: Sample, _: &mut R) {
                self.0 = Some(sample);
            }
        }
        let mut limiter = Limiter::new(Spy::default());
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let _first = limiter.try_acquire(Nanos::from_nanos(100)).unwrap();
        let second = limiter.try_acquire(Nanos::from_nanos(250)).unwrap();
        limiter.release(Nanos::from_nanos(900), second, Outcome::Success, &mut rng);
        assert_eq!(
            limiter.algorithm().0,
            Some(Sample {
                rtt: Nanos::from_nanos(650),
                inflight: 2,
                dropped: false
            })
        );
    }
}

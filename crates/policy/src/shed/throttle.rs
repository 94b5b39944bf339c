//! Google SRE client-side adaptive throttling.

use super::FAMILY;
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config of an [`AdaptiveThrottle`].
///
/// Defaults: `k = 2`, a 2-minute window (both from the SRE book) kept as 120
/// buckets of 1 s, so old history leaves the window one second at a time,
/// and no cap on the reject probability (the book's law as it is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThrottleConfig {
    /// Multiplier `K`: the backend may receive up to `K` times what it accepts.
    /// Lower is more aggressive; must be ≥ 1, since below 1 the client would
    /// throttle itself against a healthy backend.
    pub k: f64,
    /// How much history counts.
    pub window: Nanos,
    /// Number of ring buckets the window is split into; the effective window is
    /// `buckets × (window / buckets)` (integer division).
    pub buckets: u32,
    /// The most the reject probability may reach, in (0, 1]; 1 (the default)
    /// is no cap. Against a backend that accepts nothing the law's `p`
    /// tends to 1 and stays there while demand goes on, so the first probe
    /// after the backend heals can take minutes (see [`AdaptiveThrottle`]);
    /// a cap `c` keeps `1 − c` of the demand flowing as probes, so recovery
    /// is seen within a few requests. Envoy's admission control filter
    /// caps its rejection probability the same way.
    pub max_reject_probability: f64,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            k: 2.0,
            window: 2 * Nanos::MINUTE,
            buckets: 120,
            max_reject_probability: 1.0,
        }
    }
}

impl ThrottleConfig {
    /// Largest accepted bucket count; a ring this size is 1 MiB.
    pub const MAX_BUCKETS: u32 = 65_536;

    /// `k` finite and ≥ 1; `buckets` in 1..=65536; each bucket at least 1 ns
    /// wide; `max_reject_probability` in (0, 1].
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.k.is_finite() && self.k >= 1.0) {
            return Err(FieldError::new(FAMILY, "k", "a finite number ≥ 1", self.k));
        }
        if !(self.max_reject_probability > 0.0 && self.max_reject_probability <= 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "max_reject_probability",
                "a number above 0 and at most 1",
                self.max_reject_probability,
            ));
        }
        if self.buckets == 0 || self.buckets > Self::MAX_BUCKETS {
            return Err(FieldError::new(
                FAMILY,
                "buckets",
                format!("between 1 and {}", Self::MAX_BUCKETS),
                self.buckets,
            ));
        }
        if self.window < Nanos::from_nanos(u64::from(self.buckets)) {
            return Err(FieldError::new(
                FAMILY,
                "window",
                format!(
                    "at least one nanosecond per bucket ({} buckets)",
                    self.buckets
                ),
                self.window,
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    requests: u64,
    accepts: u64,
}

/// Client-side adaptive throttling: reject locally with probability
/// `p = min(cap, max(0, (requests − K·accepts) / (requests + 1)))`, where
/// `cap` is [`ThrottleConfig::max_reject_probability`] (1 by default: the
/// book's law uncapped).
///
/// Source law: Google SRE book, ch. 21 "Handling Overload", section
/// *Client-side throttling*. Defaults: `K = 2`, window 2 minutes (120 × 1 s
/// buckets), as in the book.
///
/// * `requests` counts every request the application asked to send in the
///   window, **including those this throttle rejected locally** (as the book
///   says): otherwise a throttled client would stop counting its own demand
///   and the probability would fall back while the backend is still down.
///   [`AdaptiveThrottle::should_send`] counts it.
/// * `accepts` counts requests the backend accepted, reported through
///   [`AdaptiveThrottle::on_response`]. "Accepted" means the backend did not
///   reject it for overload (a 429/503 shed, `RESOURCE_EXHAUSTED`); an
///   application-level error the backend had to work for is still an accept.
///
/// With a healthy backend `requests ≈ accepts`, so `p = 0` and everything is
/// sent. Against a backend that can accept `C` requests per second, the client
/// converges to sending about `K·C`: the extra `(K−1)·C` are the probes that
/// notice when the backend recovers.
///
/// Recovery is not instant, which a simulation of the incident must show: a
/// client that goes quiet for a full window forgets everything and starts at
/// `p = 0`, but a client whose demand `R` continues keeps `R·W` requests in
/// the window and its accepts grow only exponentially, `K·A + 1 ∝ e^(λt)` with
/// `λ = (K/W)·(1 − e^(−λW))` (≈ 1/75 s for the defaults), so `p` reaches 0
/// after about `ln(R·W)/λ`: some 13 minutes at 200 req/s, more when the
/// first few probes are unlucky. A cap below 1 shortens the first probe's
/// wait to about `1 / ((1 − cap)·R)`; until then the backend still receives
/// `(1 − cap)·R` while it fails.
///
/// The history is a ring of fixed buckets allocated at construction; both
/// calls are O(1) amortized and never allocate. Time must not go backwards;
/// an earlier `now` is treated as the latest time seen.
///
/// ```
/// use rand::SeedableRng;
/// use stormbreak_policy::Nanos;
/// use stormbreak_policy::shed::{AdaptiveThrottle, ThrottleConfig};
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// let mut throttle = AdaptiveThrottle::new(&ThrottleConfig::default()).unwrap();
/// // The backend has rejected 100 requests in a row:
/// for i in (0..100).map(Nanos::from_nanos) {
///     if throttle.should_send(i, &mut rng) {
///         throttle.on_response(i, false);
///     }
/// }
/// // p = (100 − 2·0) / (100 + 1) ≈ 0.99
/// assert!((throttle.reject_probability(Nanos::from_nanos(100)) - 100.0 / 101.0).abs() < 1e-12);
/// ```
#[derive(Clone, Debug)]
pub struct AdaptiveThrottle {
    k: f64,
    cap: f64,
    bucket_width: Nanos,
    ring: Box<[Bucket]>,
    /// Absolute index (`now / bucket_width`) of the newest bucket.
    current: u64,
    requests: u64,
    accepts: u64,
}

impl AdaptiveThrottle {
    /// Builds a throttle with an empty history, after [`ThrottleConfig::validate`].
    pub fn new(config: &ThrottleConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(AdaptiveThrottle {
            k: config.k,
            cap: config.max_reject_probability,
            bucket_width: config.window / u64::from(config.buckets),
            ring: vec![Bucket::default(); config.buckets as usize].into_boxed_slice(),
            current: 0,
            requests: 0,
            accepts: 0,
        })
    }

    /// Whether to send a request now; counts it in `requests` either way.
    ///
    /// Draws one `f64` from `rng` only when the reject probability is above 0.
    #[inline]
    pub fn should_send<R: Rng + ?Sized>(&mut self, now: Nanos, rng: &mut R) -> bool {
        let p = self.reject_probability(now);
        let send = p <= 0.0 || rng.random::<f64>() >= p;
        self.ring[self.slot()].requests += 1;
        self.requests += 1;
        send
    }

    /// Records the backend's answer to a request that was sent.
    #[inline]
    pub fn on_response(&mut self, now: Nanos, accepted: bool) {
        if accepted {
            self.advance(now);
            self.ring[self.slot()].accepts += 1;
            self.accepts += 1;
        }
    }

    /// The current local reject probability, in [0, min(1, cap)).
    #[inline]
    pub fn reject_probability(&mut self, now: Nanos) -> f64 {
        self.advance(now);
        let requests = self.requests as f64;
        ((requests - self.k * self.accepts as f64) / (requests + 1.0))
            .max(0.0)
            .min(self.cap)
    }

    /// `(requests, accepts)` in the window ending at `now`.
    pub fn window_counts(&mut self, now: Nanos) -> (u64, u64) {
        self.advance(now);
        (self.requests, self.accepts)
    }

    fn slot(&self) -> usize {
        (self.current % self.ring.len() as u64) as usize
    }

    /// Moves the ring forward to `now`, dropping buckets that left the window.
    fn advance(&mut self, now: Nanos) {
        let index = now / self.bucket_width;
        if index <= self.current {
            return;
        }
        let len = self.ring.len() as u64;
        if index - self.current >= len {
            self.ring.fill(Bucket::default());
            self.requests = 0;
            self.accepts = 0;
        } else {
            for i in self.current + 1..=index {
                let bucket = std::mem::take(&mut self.ring[(i % len) as usize]);
                self.requests -= bucket.requests;
                self.accepts -= bucket.accepts;
            }
        }
        self.current = index;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn throttle(k: f64) -> AdaptiveThrottle {
        AdaptiveThrottle::new(&ThrottleConfig {
            k,
            ..ThrottleConfig::default()
        })
        .unwrap()
    }

    /// Puts `requests` requests and `accepts` accepts into the window at `t`.
    fn load(t: &mut AdaptiveThrottle, now: Nanos, requests: u64, accepts: u64) {
        t.advance(now);
        let slot = t.slot();
        t.ring[slot].requests += requests;
        t.ring[slot].accepts += accepts;
        t.requests += requests;
        t.accepts += accepts;
    }

    #[test]
    fn probability_follows_the_book_formula() {
        let mut t = throttle(2.0);
        // Empty window: p = max(0, (0 − 0) / 1) = 0.
        assert_eq!(t.reject_probability(Nanos::ZERO), 0.0);
        // requests 10, accepts 3: p = (10 − 2·3) / 11 = 4/11 ≈ 0.3636.
        load(&mut t, Nanos::ZERO, 10, 3);
        assert_eq!(t.reject_probability(Nanos::ZERO), 4.0 / 11.0);
        // requests 10, accepts 5: 10 − 2·5 = 0, so p = 0.
        load(&mut t, Nanos::ZERO, 0, 2);
        assert_eq!(t.reject_probability(Nanos::ZERO), 0.0);

        // K = 1.5, requests 100, accepts 20: p = (100 − 30) / 101 = 70/101 ≈ 0.693.
        let mut t = throttle(1.5);
        load(&mut t, Nanos::SECOND, 100, 20);
        assert_eq!(t.reject_probability(Nanos::SECOND), 70.0 / 101.0);
    }

    #[test]
    fn locally_rejected_requests_count_in_requests() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut t = throttle(2.0);
        load(&mut t, Nanos::ZERO, 1000, 0); // p = 1000/1001: nearly everything is rejected locally
        let mut sent = 0;
        for _ in 0..100 {
            sent += u64::from(t.should_send(Nanos::ZERO, &mut rng));
        }
        assert!(sent < 5, "sent {sent}");
        assert_eq!(t.window_counts(Nanos::ZERO), (1100, 0));
    }

    #[test]
    fn rng_is_not_touched_while_probability_is_zero() {
        let mut t = throttle(2.0);
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let before = rng.clone();
        for i in (0..100).map(Nanos::from_nanos) {
            assert!(t.should_send(i, &mut rng));
            t.on_response(i, true);
        }
        assert_eq!(rng, before);
    }

    /// Drives one client at `rate_per_s` for `duration` against a backend that
    /// accepts up to `capacity_per_s` per wall second (0 = rejects all, `None` =
    /// unlimited). Returns (requests, sent) over the last `tail`.
    fn drive(
        t: &mut AdaptiveThrottle,
        rng: &mut Pcg64Mcg,
        from: Nanos,
        duration: Nanos,
        rate_per_s: u64,
        capacity_per_s: Option<u64>,
        tail: Nanos,
    ) -> (u64, u64) {
        let gap = Nanos::SECOND / rate_per_s;
        let (mut requests, mut sent) = (0, 0);
        let mut accepted_this_second = (u64::MAX, 0);
        let mut now = from;
        while now < from + duration {
            let in_tail = now >= from + duration - tail;
            let go = t.should_send(now, rng);
            if in_tail {
                requests += 1;
                sent += u64::from(go);
            }
            if go {
                let second = now / Nanos::SECOND;
                if accepted_this_second.0 != second {
                    accepted_this_second = (second, 0);
                }
                let accept = capacity_per_s.is_none_or(|c| accepted_this_second.1 < c);
                if accept {
                    accepted_this_second.1 += 1;
                }
                t.on_response(now, accept);
            }
            now += gap;
        }
        (requests, sent)
    }

    #[test]
    fn healthy_backend_sees_every_request() {
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let mut t = throttle(2.0);
        let (requests, sent) = drive(
            &mut t,
            &mut rng,
            Nanos::ZERO,
            5 * Nanos::MINUTE,
            200,
            None,
            5 * Nanos::MINUTE,
        );
        assert_eq!(requests, 60_000);
        assert_eq!(sent, requests);
    }

    /// 200 requests a second for 4 minutes against a backend that accepts
    /// nothing: (requests, sent) over the last 2 minutes.
    fn against_a_dead_backend(t: &mut AdaptiveThrottle) -> (u64, u64) {
        let mut rng = Pcg64Mcg::seed_from_u64(12);
        drive(
            t,
            &mut rng,
            Nanos::ZERO,
            4 * Nanos::MINUTE,
            200,
            Some(0),
            2 * Nanos::MINUTE,
        )
    }

    #[test]
    fn dead_backend_sees_almost_nothing() {
        // At 200/s the 2-minute window holds 24 000 requests and 0 accepts, so
        // p = 24000/24001 and the sent fraction tends to 1/24001 ≈ 4e-5.
        let (requests, sent) = against_a_dead_backend(&mut throttle(2.0));
        assert_eq!(requests, 24_000);
        assert!(sent < 24, "sent {sent} of {requests}"); // < 0.1%
    }

    #[test]
    fn a_capped_throttle_keeps_probing_a_dead_backend() {
        // The same dead backend as above with the cap at 0.9: p is the law's
        // until the law passes 0.9 (requests 10, accepts 0: 10/11 ≈ 0.909),
        // then stays at 0.9, so a tenth of the demand goes on as probes.
        let cfg = ThrottleConfig {
            max_reject_probability: 0.9,
            ..ThrottleConfig::default()
        };
        let mut t = AdaptiveThrottle::new(&cfg).unwrap();
        load(&mut t, Nanos::ZERO, 5, 0);
        assert_eq!(t.reject_probability(Nanos::ZERO), 5.0 / 6.0);
        load(&mut t, Nanos::ZERO, 5, 0);
        assert_eq!(t.reject_probability(Nanos::ZERO), 0.9);
        let (requests, sent) = against_a_dead_backend(&mut AdaptiveThrottle::new(&cfg).unwrap());
        assert_eq!(requests, 24_000);
        // Binomial(24 000, 0.1): mean 2 400, σ ≈ 46.
        assert!((2_200..=2_600).contains(&sent), "sent {sent} of {requests}");
    }

    #[test]
    fn overloaded_backend_receives_about_k_times_what_it_accepts() {
        for k in [1.5, 2.0, 3.0] {
            let mut rng = Pcg64Mcg::seed_from_u64(13);
            let mut t = throttle(k);
            // Demand 1000/s, capacity 100/s. In steady state requests R = 1000·W and
            // accepts A = 100·W over the window W, so p ≈ 1 − K·A/R = 1 − K/10 and the
            // backend receives (1 − p)·1000 = K·100 per second.
            let (requests, sent) = drive(
                &mut t,
                &mut rng,
                Nanos::ZERO,
                6 * Nanos::MINUTE,
                1000,
                Some(100),
                2 * Nanos::MINUTE,
            );
            let sent_per_s = sent as f64 / 120.0;
            let want = k * 100.0;
            assert_eq!(requests, 120_000);
            assert!(
                (sent_per_s - want).abs() < 0.1 * want,
                "K={k}: sent {sent_per_s}/s, want ≈ {want}/s"
            );
        }
    }

    #[test]
    fn quiet_client_recovers_once_the_window_has_passed() {
        let mut rng = Pcg64Mcg::seed_from_u64(14);
        let mut t = throttle(2.0);
        drive(
            &mut t,
            &mut rng,
            Nanos::ZERO,
            Nanos::MINUTE,
            200,
            Some(0),
            Nanos::ZERO,
        );
        assert!(t.reject_probability(Nanos::MINUTE) > 0.99);
        // Bucket 59 holds the last rejection; it leaves when bucket 59 + 120 opens.
        assert!(t.window_counts(179 * Nanos::SECOND - Nanos::NANOSECOND).0 > 0);
        assert_eq!(t.window_counts(179 * Nanos::SECOND), (0, 0));
        assert_eq!(t.reject_probability(179 * Nanos::SECOND), 0.0);
    }

    /// Seconds from the moment the window holds 120 accepts until p = 0, for
    /// one seeded run of a busy client after a dead-backend phase.
    fn recovery_time(seed: u64) -> f64 {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut t = throttle(2.0);
        drive(
            &mut t,
            &mut rng,
            Nanos::ZERO,
            2 * Nanos::MINUTE,
            200,
            Some(0),
            Nanos::ZERO,
        );
        let mut now = 2 * Nanos::MINUTE;
        // The first few accepts arrive by chance (s ≈ 1/120 per second at first);
        // start the clock once the growth is past that noise.
        while t.window_counts(now).1 < 120 {
            drive(&mut t, &mut rng, now, Nanos::SECOND, 200, None, Nanos::ZERO);
            now += Nanos::SECOND;
        }
        let start = now;
        while t.reject_probability(now) > 0.0 {
            assert!(now < 60 * Nanos::MINUTE, "never recovered");
            drive(&mut t, &mut rng, now, Nanos::SECOND, 200, None, Nanos::ZERO);
            now += Nanos::SECOND;
        }
        let (requests, sent) = drive(
            &mut t,
            &mut rng,
            now,
            10 * Nanos::SECOND,
            200,
            None,
            10 * Nanos::SECOND,
        );
        assert_eq!(sent, requests);
        (now - start).as_secs_f64()
    }

    #[test]
    fn busy_client_recovers_at_the_exponential_rate_of_the_law() {
        // The backend is healthy again but demand stays at R = 200/s, so the
        // window always holds R·W = 24 000 requests. The client sends
        // s = R·(K·A + 1)/(R·W + 1) ≈ (K·A + 1)/W per second and all of it is
        // accepted, while accepts older than W leave: dA/dt = s(t) − s(t − W).
        // So K·A + 1 grows as e^(λt) with λ = (K/W)·(1 − e^(−λW)); for K = 2,
        // W = 120 s: λW ≈ 1.594, λ ≈ 0.01328/s (time constant ≈ 75 s).
        // p reaches 0 when K·A = R·W. From A = 120 (K·A + 1 = 241) to
        // K·A + 1 = 24 001: t ≈ ln(24 001/241)/λ = 4.601/0.01328 ≈ 346 s.
        for seed in 0..8 {
            let took = recovery_time(seed);
            assert!(
                (0.9 * 346.0..1.1 * 346.0).contains(&took),
                "seed {seed}: {took} s"
            );
        }
    }

    #[test]
    fn window_slides_one_bucket_at_a_time() {
        let mut t = throttle(2.0);
        load(&mut t, Nanos::ZERO, 5, 1); // bucket 0
        load(&mut t, Nanos::from_millis(1500), 7, 2); // bucket 1
        assert_eq!(
            t.window_counts(119 * Nanos::SECOND + Nanos::from_millis(999)),
            (12, 3)
        );
        // Bucket 0 leaves the window when bucket 120 opens.
        assert_eq!(t.window_counts(120 * Nanos::SECOND), (7, 2));
        assert_eq!(t.window_counts(121 * Nanos::SECOND), (0, 0));
        // Time going backwards does not resurrect or corrupt anything.
        assert_eq!(t.window_counts(Nanos::ZERO), (0, 0));
    }

    #[test]
    fn config_validation_names_the_field() {
        let bad = |cfg: ThrottleConfig| cfg.validate().unwrap_err().to_string();
        let d = ThrottleConfig::default();
        assert_eq!(
            bad(ThrottleConfig {
                k: 0.5,
                ..d.clone()
            }),
            "shed: k must be a finite number ≥ 1, got 0.5"
        );
        assert!(
            bad(ThrottleConfig {
                k: f64::NAN,
                ..d.clone()
            })
            .starts_with("shed: k must")
        );
        assert_eq!(
            bad(ThrottleConfig {
                buckets: 0,
                ..d.clone()
            }),
            "shed: buckets must be between 1 and 65536, got 0"
        );
        assert!(
            bad(ThrottleConfig {
                window: Nanos::from_nanos(10),
                buckets: 20,
                ..d
            })
            .starts_with("shed: window must")
        );
        let cfg: ThrottleConfig = serde_json::from_str(r#"{"k": 1.5, "window": "1m"}"#).unwrap();
        assert_eq!(cfg.window, Nanos::MINUTE);
        assert_eq!(cfg.buckets, 120);
        assert_eq!(cfg.max_reject_probability, 1.0, "uncapped unless asked");
        for cap in [0.0, -0.1, 1.01, f64::NAN] {
            let cfg = ThrottleConfig {
                max_reject_probability: cap,
                ..ThrottleConfig::default()
            };
            assert!(
                bad(cfg).starts_with(
                    "shed: max_reject_probability must be a number above 0 and at most 1"
                ),
                "{cap}"
            );
        }
        assert!(serde_json::from_str::<ThrottleConfig>(r#"{"K": 2}"#).is_err());
    }

    proptest! {
        /// The running totals equal a recount of every event still in the window,
        /// and p stays in [0, 1).
        #[test]
        fn totals_match_a_recount(
            events in proptest::collection::vec((0u64..5_000, any::<bool>(), any::<bool>()), 1..300),
            buckets in 1u32..12,
        ) {
            let width = Nanos::from_millis(100);
            let cfg = ThrottleConfig { k: 2.0, window: width * u64::from(buckets), buckets, ..ThrottleConfig::default() };
            let mut t = AdaptiveThrottle::new(&cfg).unwrap();
            let mut rng = Pcg64Mcg::seed_from_u64(0);
            let mut now = Nanos::ZERO;
            let mut log: Vec<(Nanos, bool)> = Vec::new(); // (time, is_accept)
            for (dt_ms, is_request, accepted) in events {
                now += Nanos::from_millis(dt_ms) / 10;
                if is_request {
                    t.should_send(now, &mut rng);
                    log.push((now, false));
                } else {
                    t.on_response(now, accepted);
                    if accepted {
                        log.push((now, true));
                    }
                }
                let newest = now / width;
                let in_window = |at: Nanos| at / width + u64::from(buckets) > newest;
                let requests = log.iter().filter(|(at, a)| !a && in_window(*at)).count() as u64;
                let accepts = log.iter().filter(|(at, a)| *a && in_window(*at)).count() as u64;
                prop_assert_eq!(t.window_counts(now), (requests, accepts));
                let p = t.reject_probability(now);
                prop_assert!((0.0..1.0).contains(&p));
            }
        }
    }
}

use super::FAMILY;
use super::{LimitAlgorithm, Sample};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config for [`Windowed`]; defaults are `WindowedLimit.Builder`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WindowedConfig {
    /// Shortest window, `≥ 100ms`. Default 1 s.
    pub min_window: Nanos,
    /// Longest window, `≥ 100ms` and `≥ min_window`. Default 1 s.
    pub max_window: Nanos,
    /// Samples a window needs before it is passed on, `≥ 10`. Default 10.
    pub window_size: u32,
    /// Samples faster than this are discarded (too fast to be real work,
    /// e.g. a local rejection). Default 100 µs.
    pub min_rtt_threshold: Nanos,
}

impl Default for WindowedConfig {
    fn default() -> Self {
        WindowedConfig {
            min_window: Nanos::from_secs(1),
            max_window: Nanos::from_secs(1),
            window_size: 10,
            min_rtt_threshold: 100 * Nanos::MICROSECOND,
        }
    }
}

impl WindowedConfig {
    /// Checks the bounds `WindowedLimit.Builder` enforces.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.min_window < Nanos::from_millis(100) {
            return Err(FieldError::new(
                FAMILY,
                "windowed.min_window",
                "≥ 100ms",
                crate::units::format_duration(self.min_window),
            ));
        }
        if self.max_window < Nanos::from_millis(100) || self.max_window < self.min_window {
            return Err(FieldError::new(
                FAMILY,
                "windowed.max_window",
                "≥ 100ms and ≥ min_window",
                crate::units::format_duration(self.max_window),
            ));
        }
        if self.window_size < 10 {
            return Err(FieldError::new(
                FAMILY,
                "windowed.window_size",
                "≥ 10",
                self.window_size,
            ));
        }
        Ok(())
    }
}

/// Running aggregate of one window (Netflix's `ImmutableAverageSampleWindow`).
#[derive(Clone, Copy, Debug)]
struct AverageWindow {
    min_rtt: Nanos,
    rtt_sum: u128,
    max_inflight: u32,
    count: u32,
    dropped: bool,
}

impl AverageWindow {
    const EMPTY: AverageWindow = AverageWindow {
        min_rtt: Nanos::MAX,
        rtt_sum: 0,
        max_inflight: 0,
        count: 0,
        dropped: false,
    };

    fn add(&mut self, sample: Sample) {
        self.min_rtt = self.min_rtt.min(sample.rtt);
        self.rtt_sum += u128::from(sample.rtt.as_nanos());
        self.max_inflight = self.max_inflight.max(sample.inflight);
        self.count = self.count.saturating_add(1);
        self.dropped |= sample.dropped;
    }

    fn mean_rtt(&self) -> Nanos {
        if self.count == 0 {
            Nanos::ZERO
        } else {
            Nanos::from_nanos((self.rtt_sum / u128::from(self.count)) as u64)
        }
    }
}

/// Feeds another algorithm one aggregated sample per time window instead of
/// one per request.
///
/// Source: Netflix concurrency-limits `WindowedLimit` with its default
/// `AverageSampleWindow`. Samples with `rtt < min_rtt_threshold` are
/// discarded. A window closes at the first sample completing after its end;
/// if it holds at least `window_size` samples, the inner algorithm receives
/// `Sample { rtt: mean rtt, inflight: max in-flight, dropped: any dropped }`.
/// The next window lasts `clamp(2 × window min rtt, min_window, max_window)`.
///
/// Defaults: windows of 1 s (min and max), window size 10, min rtt threshold
/// 100 µs. Netflix's README wraps `Gradient2Limit` this way for servers; it
/// turns per-request jitter into one decision per second.
///
/// ```
/// use stormbreak_policy::limit::{Gradient2, Gradient2Config, LimitAlgorithm, Windowed, WindowedConfig};
/// let inner = Gradient2::new(&Gradient2Config::default()).unwrap();
/// let windowed = Windowed::new(&WindowedConfig::default(), inner).unwrap();
/// assert_eq!(windowed.limit(), 20);
/// ```
#[derive(Clone, Debug)]
pub struct Windowed<A> {
    inner: A,
    window: AverageWindow,
    next_update: Nanos,
    min_window: Nanos,
    max_window: Nanos,
    window_size: u32,
    min_rtt_threshold: Nanos,
}

impl<A: LimitAlgorithm> Windowed<A> {
    /// Wraps `inner` after validating `config`.
    pub fn new(config: &WindowedConfig, inner: A) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Windowed {
            inner,
            window: AverageWindow::EMPTY,
            next_update: Nanos::ZERO,
            min_window: config.min_window,
            max_window: config.max_window,
            window_size: config.window_size,
            min_rtt_threshold: config.min_rtt_threshold,
        })
    }

    /// The wrapped algorithm.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: LimitAlgorithm> LimitAlgorithm for Windowed<A> {
    fn limit(&self) -> u32 {
        self.inner.limit()
    }

    fn min_limit(&self) -> u32 {
        self.inner.min_limit()
    }

    fn max_limit(&self) -> u32 {
        self.inner.max_limit()
    }

    fn advance(&mut self, now: Nanos) {
        self.inner.advance(now);
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, rng: &mut R) {
        if sample.rtt < self.min_rtt_threshold {
            return;
        }
        self.window.add(sample);
        if now <= self.next_update {
            return;
        }
        let closed = std::mem::replace(&mut self.window, AverageWindow::EMPTY);
        let length = closed
            .min_rtt
            .saturating_mul(2)
            .clamp(self.min_window, self.max_window);
        self.next_update = now.saturating_add(length);
        if closed.count >= self.window_size {
            let aggregate = Sample {
                rtt: closed.mean_rtt(),
                inflight: closed.max_inflight,
                dropped: closed.dropped,
            };
            self.inner.on_sample(now, aggregate, rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    /// Records what the inner algorithm receives.
    #[derive(Default)]
    struct Spy(Vec<(Nanos, Sample)>);

    impl LimitAlgorithm for Spy {
        fn limit(&self) -> u32 {
            1
        }
        fn min_limit(&self) -> u32 {
            1
        }
        fn max_limit(&self) -> u32 {
            1
        }
        fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, _: &mut R) {
            self.0.push((now, sample));
        }
    }

    fn s(rtt: Nanos, inflight: u32, dropped: bool) -> Sample {
        Sample {
            rtt,
            inflight,
            dropped,
        }
    }

    #[test]
    fn aggregates_mean_rtt_max_inflight_any_drop() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut w = Windowed::new(&WindowedConfig::default(), Spy::default()).unwrap();
        // First sample closes the (empty-start) window at next_update = 0: one
        // sample < window_size, so it is dropped; the next window ends at 1 s + 1 s.
        w.on_sample(
            Nanos::from_secs(1),
            s(Nanos::from_millis(10), 1, false),
            &mut rng,
        );
        assert!(w.inner().0.is_empty());
        for i in 0..10u32 {
            let dropped = i == 3;
            w.on_sample(
                Nanos::from_secs(1) + Nanos::from_nanos(u64::from(i)),
                s(Nanos::from_millis(10 + u64::from(i)), i, dropped),
                &mut rng,
            );
        }
        assert!(w.inner().0.is_empty(), "window still open until 2 s");
        w.on_sample(
            Nanos::from_secs(2) + Nanos::NANOSECOND,
            s(Nanos::from_millis(30), 2, false),
            &mut rng,
        );
        // 11 samples: 10..=19 ms and 30 ms ⇒ mean (145 + 30) / 11 = 15.909 ms
        let (at, agg) = w.inner().0[0];
        assert_eq!(at, Nanos::from_secs(2) + Nanos::NANOSECOND);
        assert_eq!(agg.rtt, Nanos::from_nanos(175_000_000 / 11));
        assert_eq!(agg.inflight, 9);
        assert!(agg.dropped);
    }

    #[test]
    fn short_windows_and_fast_samples_are_discarded() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut w = Windowed::new(&WindowedConfig::default(), Spy::default()).unwrap();
        w.on_sample(
            Nanos::NANOSECOND,
            s(Nanos::from_millis(10), 1, false),
            &mut rng,
        );
        for i in 0..8 {
            w.on_sample(
                Nanos::from_nanos(2 + i),
                s(Nanos::from_millis(10), 1, false),
                &mut rng,
            );
        }
        for i in 0..50 {
            w.on_sample(
                Nanos::from_nanos(20 + i),
                s(99 * Nanos::MICROSECOND, 1, false),
                &mut rng,
            );
        }
        w.on_sample(
            Nanos::from_secs(2),
            s(Nanos::from_millis(10), 1, false),
            &mut rng,
        );
        assert!(
            w.inner().0.is_empty(),
            "9 samples incl. the closing one; the fast ones do not count"
        );
        assert_eq!(w.next_update, Nanos::from_secs(3));
    }

    #[test]
    fn window_length_tracks_twice_min_rtt_within_bounds() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let config = WindowedConfig {
            min_window: Nanos::from_millis(100),
            max_window: Nanos::from_secs(2),
            ..WindowedConfig::default()
        };
        let mut w = Windowed::new(&config, Spy::default()).unwrap();
        w.on_sample(
            Nanos::NANOSECOND,
            s(Nanos::from_millis(300), 1, false),
            &mut rng,
        );
        assert_eq!(w.next_update, Nanos::NANOSECOND + Nanos::from_millis(600));
        w.on_sample(
            Nanos::from_millis(700),
            s(Nanos::from_millis(10), 1, false),
            &mut rng,
        );
        assert_eq!(
            w.next_update,
            Nanos::from_millis(700) + Nanos::from_millis(100),
            "20 ms clamped up to 100 ms"
        );
    }

    #[test]
    fn validation_names_fields() {
        let bad = WindowedConfig {
            window_size: 5,
            ..WindowedConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: windowed.window_size must be ≥ 10, got 5"
        );
        let bad = WindowedConfig {
            min_window: Nanos::from_millis(50),
            ..WindowedConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: windowed.min_window must be ≥ 100ms, got 50ms"
        );
    }
}

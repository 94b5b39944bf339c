use super::FAMILY;
use super::error::check_closed;
use super::sample_buffer::SampleBuffer;
use super::{LimitAlgorithm, Sample, truncate_to_limit};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Largest sample buffer a config may ask for (8 MiB of `u64`): a guard
/// against a typo allocating gigabytes, far above any 100 ms window's need.
const MAX_SAMPLE_CAPACITY: u32 = 1 << 20;

/// Config for [`EnvoyGradient`], Envoy's `GradientControllerConfig`
/// flattened. Percentages are 0–100 like Envoy's `type.v3.Percent`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvoyGradientConfig {
    /// Percentile of a window's latencies taken as its rtt. Default 50.
    pub sample_aggregate_percentile: f64,
    /// Length of a sample window; the limit is recomputed at each end.
    /// Envoy requires it; default 100 ms, the value in Envoy's docs example.
    pub concurrency_update_interval: Nanos,
    /// Ceiling on the limit. Default 1000.
    pub max_concurrency_limit: u32,
    /// Time between minRTT measurements. Envoy requires it; default 60 s,
    /// the value in Envoy's docs example.
    pub min_rtt_interval: Nanos,
    /// A fixed minRTT instead of measuring it (Envoy's `fixed_value`); no
    /// probe windows then. Default unset.
    pub min_rtt_fixed_value: Option<Nanos>,
    /// Samples a minRTT measurement aggregates. Default 50.
    pub min_rtt_request_count: u32,
    /// Random delay added to `min_rtt_interval`, as a percentage of it.
    /// Default 15 (Envoy's proto and code; some docs pages say 10).
    pub min_rtt_jitter: f64,
    /// The limit pinned during a minRTT measurement, and the floor. Default 3.
    pub min_concurrency: u32,
    /// Tolerance added to minRTT, as a percentage of it. Default 25.
    pub min_rtt_buffer: f64,
    /// Latency slots preallocated per window (not an Envoy setting: Envoy's
    /// histogram grows). Beyond it a uniform reservoir is kept. Default 1024.
    pub sample_capacity: u32,
}

impl Default for EnvoyGradientConfig {
    fn default() -> Self {
        EnvoyGradientConfig {
            sample_aggregate_percentile: 50.0,
            concurrency_update_interval: Nanos::from_millis(100),
            max_concurrency_limit: 1000,
            min_rtt_interval: Nanos::from_secs(60),
            min_rtt_fixed_value: None,
            min_rtt_request_count: 50,
            min_rtt_jitter: 15.0,
            min_concurrency: 3,
            min_rtt_buffer: 25.0,
            sample_capacity: 1024,
        }
    }
}

impl EnvoyGradientConfig {
    /// Checks the ranges Envoy's proto validation enforces, plus the buffer size.
    pub fn validate(&self) -> Result<(), FieldError> {
        let percent = "a percentage in [0, 100]";
        check_closed(
            "envoy_gradient.sample_aggregate_percentile",
            percent,
            self.sample_aggregate_percentile,
            0.0,
            100.0,
        )?;
        check_closed(
            "envoy_gradient.min_rtt_jitter",
            percent,
            self.min_rtt_jitter,
            0.0,
            100.0,
        )?;
        check_closed(
            "envoy_gradient.min_rtt_buffer",
            percent,
            self.min_rtt_buffer,
            0.0,
            100.0,
        )?;
        if self.concurrency_update_interval == Nanos::ZERO {
            return Err(FieldError::new(
                FAMILY,
                "envoy_gradient.concurrency_update_interval",
                "> 0",
                "0",
            ));
        }
        if self.min_concurrency < 1 {
            return Err(FieldError::new(
                FAMILY,
                "envoy_gradient.min_concurrency",
                "≥ 1",
                self.min_concurrency,
            ));
        }
        if self.max_concurrency_limit < self.min_concurrency {
            return Err(FieldError::new(
                FAMILY,
                "envoy_gradient.max_concurrency_limit",
                "≥ min_concurrency",
                self.max_concurrency_limit,
            ));
        }
        if self.min_rtt_request_count < 1 {
            return Err(FieldError::new(
                FAMILY,
                "envoy_gradient.min_rtt_request_count",
                "≥ 1",
                self.min_rtt_request_count,
            ));
        }
        match self.min_rtt_fixed_value {
            Some(Nanos::ZERO) => {
                return Err(FieldError::new(
                    FAMILY,
                    "envoy_gradient.min_rtt_fixed_value",
                    "> 0 when set",
                    "0",
                ));
            }
            Some(_) => {}
            None if self.min_rtt_interval < Nanos::MILLISECOND => {
                return Err(FieldError::new(
                    FAMILY,
                    "envoy_gradient.min_rtt_interval",
                    "≥ 1ms when min_rtt_fixed_value is unset",
                    crate::units::format_duration(self.min_rtt_interval),
                ));
            }
            None => {}
        }
        if !(1..=MAX_SAMPLE_CAPACITY).contains(&self.sample_capacity) {
            return Err(FieldError::new(
                FAMILY,
                "envoy_gradient.sample_capacity",
                "in [1, 1048576]",
                self.sample_capacity,
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Limit pinned to `min_concurrency` until `min_rtt_request_count`
    /// samples have arrived; then the limit returns to `deferred_limit`.
    Probing { deferred_limit: u32 },
    /// Windows end every update interval. `next_tick` is unset until the
    /// first call anchors it (the constructor has no clock); `next_probe` is
    /// unset when minRTT is fixed.
    Sampling {
        next_tick: Option<Nanos>,
        next_probe: Option<Nanos>,
    },
}

/// Envoy's adaptive concurrency gradient controller.
///
/// Source: Envoy HTTP filter "Adaptive Concurrency", gradient controller
/// (`gradient_controller.cc`). The controller alternates two windows:
///
/// * **minRTT probe**: the limit is pinned to `min_concurrency`; once
///   `min_rtt_request_count` samples arrive, minRTT = their percentile and the
///   previous limit is restored. The next probe starts
///   `min_rtt_interval + U[0, jitter × interval)` later. Samples from
///   requests admitted before the probe began are discarded. If five
///   consecutive windows set the limit to `min_concurrency`, a probe starts
///   at once (minRTT is probably stale).
/// * **sample window** (every `concurrency_update_interval`): sampleRTT = the
///   window's `sample_aggregate_percentile`, then
///   `gradient = clamp((minRTT + buffer·minRTT) / sampleRTT, 0.5, 2.0)`,
///   `limit' = L·gradient`, `new = floor(limit' + √limit')`, clamped to
///   `[min_concurrency, max_concurrency_limit]`.
///
/// Defaults: percentile 50, update interval 100 ms, max 1000, minRTT
/// interval 60 s, request count 50, jitter 15 %, min concurrency 3, buffer
/// 25 %. The limit starts at `min_concurrency`, inside a probe.
///
/// Timers are lazy: [`LimitAlgorithm::advance`] (called by the
/// [`Limiter`](crate::limit::Limiter) on every acquire and release) runs
/// every window end and probe start that fell due, at its scheduled time.
/// Every completed request is a sample; `dropped` is ignored, as in Envoy.
/// The window percentile is exact nearest-rank over a preallocated buffer
/// (Envoy's is a histogram approximation).
///
/// ```
/// use stormbreak_policy::limit::{EnvoyGradient, EnvoyGradientConfig, LimitAlgorithm, Sample};
/// use stormbreak_policy::Nanos;
/// use rand::SeedableRng;
/// let config = EnvoyGradientConfig { min_rtt_fixed_value: Some(Nanos::from_millis(10)), ..Default::default() };
/// let mut envoy = EnvoyGradient::new(&config).unwrap();
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
/// envoy.advance(Nanos::ZERO); // the first window ends at 100 ms
/// let fast = Sample { rtt: Nanos::from_millis(5), inflight: 3, dropped: false };
/// envoy.on_sample(Nanos::from_millis(50), fast, &mut rng);
/// envoy.advance(Nanos::from_millis(100));
/// // gradient = clamp(12.5 / 5, 0.5, 2) = 2; 3 × 2 = 6; floor(6 + √6) = 8
/// assert_eq!(envoy.limit(), 8);
/// ```
#[derive(Clone, Debug)]
pub struct EnvoyGradient {
    limit: u32,
    phase: Phase,
    min_rtt: Nanos,
    sample_rtt: Nanos,
    /// Samples from requests admitted before this instant are discarded.
    epoch: Nanos,
    consecutive_min: u32,
    samples: SampleBuffer,
    percentile: f64,
    buffer: f64,
    jitter: f64,
    update_interval: Nanos,
    min_rtt_interval: Nanos,
    request_count: u64,
    min_concurrency: u32,
    max_concurrency: u32,
    probing_enabled: bool,
}

impl EnvoyGradient {
    /// Builds the controller after validating `config`; allocates the sample buffer.
    pub fn new(config: &EnvoyGradientConfig) -> Result<Self, FieldError> {
        config.validate()?;
        let (phase, min_rtt) = match config.min_rtt_fixed_value {
            Some(fixed) => (
                Phase::Sampling {
                    next_tick: None,
                    next_probe: None,
                },
                fixed,
            ),
            None => (
                Phase::Probing {
                    deferred_limit: config.min_concurrency,
                },
                Nanos::ZERO,
            ),
        };
        Ok(EnvoyGradient {
            limit: config.min_concurrency,
            phase,
            min_rtt,
            sample_rtt: Nanos::ZERO,
            epoch: Nanos::ZERO,
            consecutive_min: 0,
            samples: SampleBuffer::with_capacity(config.sample_capacity as usize),
            percentile: config.sample_aggregate_percentile / 100.0,
            buffer: config.min_rtt_buffer / 100.0,
            jitter: config.min_rtt_jitter / 100.0,
            update_interval: config.concurrency_update_interval,
            min_rtt_interval: config.min_rtt_interval,
            request_count: u64::from(config.min_rtt_request_count),
            min_concurrency: config.min_concurrency,
            max_concurrency: config.max_concurrency_limit,
            probing_enabled: config.min_rtt_fixed_value.is_none(),
        })
    }

    /// The ideal rtt the gradient compares against (0 before the first probe ends).
    pub fn min_rtt(&self) -> Nanos {
        self.min_rtt
    }

    /// The last window's aggregated rtt (0 before the first window ends).
    pub fn sample_rtt(&self) -> Nanos {
        self.sample_rtt
    }

    /// True while a minRTT probe pins the limit to `min_concurrency`.
    pub fn in_probe(&self) -> bool {
        matches!(self.phase, Phase::Probing { .. })
    }

    fn enter_probe(&mut self, at: Nanos) {
        let deferred_limit = self.limit;
        self.set_limit(self.min_concurrency, at, true);
        self.samples.clear();
        self.epoch = at;
        self.phase = Phase::Probing { deferred_limit };
    }

    fn finish_probe<R: Rng + ?Sized>(&mut self, now: Nanos, deferred_limit: u32, rng: &mut R) {
        if let Some(rtt) = self.samples.percentile(self.percentile) {
            self.min_rtt = rtt;
        }
        self.samples.clear();
        self.set_limit(deferred_limit, now, true);
        let range = Nanos::from_nanos(
            (self.min_rtt_interval.as_nanos() as f64 * self.jitter).ceil() as u64,
        );
        let delay = if range == Nanos::ZERO {
            Nanos::ZERO
        } else {
            Nanos::from_nanos(rng.random_range(0..range.as_nanos()))
        };
        self.phase = Phase::Sampling {
            next_tick: Some(now.saturating_add(self.update_interval)),
            next_probe: Some(
                now.saturating_add(self.min_rtt_interval)
                    .saturating_add(delay),
            ),
        };
    }

    /// One window end: aggregate, recompute, count minimum hits.
    fn end_window(&mut self, at: Nanos) {
        let Some(sample_rtt) = self.samples.percentile(self.percentile) else {
            return;
        };
        self.samples.clear();
        self.sample_rtt = sample_rtt;
        let next = gradient_limit(
            self.limit,
            self.min_rtt,
            sample_rtt,
            self.buffer,
            self.min_concurrency,
            self.max_concurrency,
        );
        self.set_limit(next, at, false);
    }

    fn set_limit(&mut self, next: u32, at: Nanos, in_probe: bool) {
        let floor = self.min_concurrency;
        if !in_probe && self.limit == floor && next == floor {
            self.consecutive_min += 1;
        } else {
            self.consecutive_min = 0;
        }
        self.limit = next;
        if self.consecutive_min >= 5
            && self.probing_enabled
            && let Phase::Sampling { next_probe, .. } = &mut self.phase
        {
            *next_probe = Some(at);
        }
    }
}

/// The gradient update on plain numbers (see [`EnvoyGradient`]).
fn gradient_limit(
    limit: u32,
    min_rtt: Nanos,
    sample_rtt: Nanos,
    buffer: f64,
    min: u32,
    max: u32,
) -> u32 {
    let buffered_min_rtt = min_rtt.as_nanos() as f64 + min_rtt.as_nanos() as f64 * buffer;
    let gradient =
        (buffered_min_rtt / (sample_rtt.max(Nanos::NANOSECOND)).as_nanos() as f64).clamp(0.5, 2.0);
    let scaled = f64::from(limit) * gradient;
    truncate_to_limit(scaled + scaled.sqrt()).clamp(min, max)
}

impl LimitAlgorithm for EnvoyGradient {
    fn limit(&self) -> u32 {
        self.limit
    }

    fn min_limit(&self) -> u32 {
        self.min_concurrency
    }

    fn max_limit(&self) -> u32 {
        self.max_concurrency
    }

    fn advance(&mut self, now: Nanos) {
        loop {
            let Phase::Sampling {
                next_tick,
                next_probe,
            } = self.phase
            else {
                return;
            };
            let Some(tick) = next_tick else {
                self.phase = Phase::Sampling {
                    next_tick: Some(now.saturating_add(self.update_interval)),
                    next_probe,
                };
                return;
            };
            if let Some(probe) = next_probe {
                // A probe due no later than the window end wins: Envoy's
                // window timer gives up once a probe has begun.
                if probe <= now && probe <= tick {
                    self.enter_probe(probe);
                    return;
                }
            }
            if tick > now {
                return;
            }
            self.end_window(tick);
            // Windows between here and `now` are empty (samples are added
            // only after `advance`), and Envoy skips empty windows without
            // touching the limit, so jump straight past `now`.
            let skipped = (now - tick) / self.update_interval + 1;
            let next = tick.saturating_add(self.update_interval.saturating_mul(skipped));
            if let Phase::Sampling { next_tick, .. } = &mut self.phase {
                *next_tick = Some(next);
            }
        }
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, rng: &mut R) {
        self.advance(now);
        if now.saturating_sub(sample.rtt) < self.epoch {
            return;
        }
        self.samples.push(sample.rtt, rng);
        if let Phase::Probing { deferred_limit } = self.phase
            && self.samples.seen() >= self.request_count
        {
            self.finish_probe(now, deferred_limit, rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn sample(rtt: Nanos) -> Sample {
        Sample {
            rtt,
            inflight: 1,
            dropped: false,
        }
    }

    fn fixed(min_rtt: Nanos) -> EnvoyGradient {
        EnvoyGradient::new(&EnvoyGradientConfig {
            min_rtt_fixed_value: Some(min_rtt),
            ..EnvoyGradientConfig::default()
        })
        .unwrap()
    }

    /// Feeds `rtts` into the window ending at `end`, then closes it.
    fn window(e: &mut EnvoyGradient, rng: &mut Pcg64Mcg, end: Nanos, rtts: &[Nanos]) {
        for (i, &rtt) in rtts.iter().enumerate() {
            e.on_sample(
                end - Nanos::from_millis(50) + Nanos::from_nanos(i as u64),
                sample(rtt),
                rng,
            );
        }
        e.advance(end);
    }

    #[test]
    fn published_example_gradient_one() {
        // minRTT 10 ms, buffer 25 % ⇒ 12.5 ms; sampleRTT 12.5 ms ⇒ g = 1.0;
        // L = 100 ⇒ 100 + √100 = 110.
        assert_eq!(
            gradient_limit(
                100,
                Nanos::from_millis(10),
                Nanos::from_micros(12500),
                0.25,
                3,
                1000
            ),
            110
        );
    }

    #[test]
    fn gradient_is_clamped_to_half_and_double() {
        // (limit, sample rtt ms, min rtt ms) with buffer 0.25, bounds [3, 1000]
        let g = |limit, sample_ms, min_ms| {
            let ms = Nanos::from_millis;
            gradient_limit(limit, ms(sample_ms), ms(min_ms), 0.25, 3, 1000)
        };
        // g = 12.5 / 100 = 0.125 → 0.5: 100 × 0.5 = 50; floor(50 + 7.07) = 57
        assert_eq!(g(100, 10, 100), 57);
        // g = 12.5 / 1 → 2.0: 200 + √200 = 214.14 → 214
        assert_eq!(g(100, 10, 1), 214);
        // g = 12.5 / 25 = 0.5 exactly: same as the clamp
        assert_eq!(g(100, 10, 25), 57);
        // clamps to [min, max]
        assert_eq!(g(900, 10, 1), 1000);
        assert_eq!(g(1, 10, 100), 3);
    }

    #[test]
    fn fixed_min_rtt_grows_by_doubling_plus_headroom() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let mut e = fixed(Nanos::from_millis(10));
        assert!(!e.in_probe());
        e.advance(Nanos::ZERO);
        // fast windows: g = clamp(12.5 / 5) = 2
        window(
            &mut e,
            &mut rng,
            Nanos::from_millis(100),
            &[Nanos::from_millis(5); 10],
        );
        assert_eq!(e.limit(), 8); // 3·2 = 6, floor(6 + 2.449) = 8
        window(
            &mut e,
            &mut rng,
            Nanos::from_millis(200),
            &[Nanos::from_millis(5); 10],
        );
        assert_eq!(e.limit(), 20); // 16 + 4 = 20
        window(
            &mut e,
            &mut rng,
            Nanos::from_millis(300),
            &[Nanos::from_millis(5); 10],
        );
        assert_eq!(e.limit(), 46); // 40 + 6.32 = 46.32
        // a 12.5 ms window: g = 1, 46 + 6.78 = 52.78
        window(
            &mut e,
            &mut rng,
            Nanos::from_millis(400),
            &[Nanos::from_micros(12_500); 10],
        );
        assert_eq!(e.limit(), 52);
        assert_eq!(e.sample_rtt(), Nanos::from_micros(12500));
    }

    #[test]
    fn window_uses_the_configured_percentile() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let mut e = EnvoyGradient::new(&EnvoyGradientConfig {
            min_rtt_fixed_value: Some(Nanos::from_millis(10)),
            sample_aggregate_percentile: 90.0,
            ..EnvoyGradientConfig::default()
        })
        .unwrap();
        e.advance(Nanos::ZERO);
        let rtts: Vec<Nanos> = (1..=10).map(Nanos::from_millis).collect();
        window(&mut e, &mut rng, Nanos::from_millis(100), &rtts);
        // p90 of 1..=10 ms: rank ceil(9.0) = 9 ⇒ 9 ms
        assert_eq!(e.sample_rtt(), Nanos::from_millis(9));
    }

    #[test]
    fn empty_windows_leave_the_limit_alone() {
        let mut e = fixed(Nanos::from_millis(10));
        e.advance(Nanos::ZERO);
        e.advance(Nanos::from_secs(10));
        assert_eq!(e.limit(), 3);
        assert_eq!(e.sample_rtt(), Nanos::ZERO);
    }

    #[test]
    fn starts_in_probe_pinned_and_restores_after_request_count() {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut e = EnvoyGradient::new(&EnvoyGradientConfig::default()).unwrap();
        assert!(e.in_probe());
        assert_eq!(e.limit(), 3);
        for i in (0..49).map(Nanos::from_nanos) {
            e.on_sample(
                Nanos::from_millis(10) + i,
                sample(Nanos::from_millis(10) + i),
                &mut rng,
            );
        }
        assert!(e.in_probe(), "49 < 50 samples");
        e.on_sample(
            Nanos::from_millis(20),
            sample(Nanos::from_millis(10) + Nanos::from_nanos(49)),
            &mut rng,
        );
        assert!(!e.in_probe());
        // p50 of 10 ms + 0..=49 ns: rank 25 ⇒ 10 ms + 24 ns
        assert_eq!(e.min_rtt(), Nanos::from_millis(10) + Nanos::from_nanos(24));
        assert_eq!(e.limit(), 3, "restores the limit held before the probe");
    }

    #[test]
    fn next_probe_after_interval_plus_jitter_pins_limit() {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut e = EnvoyGradient::new(&EnvoyGradientConfig::default()).unwrap();
        let probe_end = Nanos::from_millis(20);
        for _ in 0..50 {
            e.on_sample(probe_end, sample(Nanos::from_millis(10)), &mut rng);
        }
        assert!(!e.in_probe());
        // Grow with fast windows until the next probe is near.
        let mut t = probe_end;
        while t < probe_end + Nanos::from_secs(60) - Nanos::from_millis(100) {
            t += Nanos::from_millis(100);
            e.on_sample(
                t - Nanos::NANOSECOND,
                sample(Nanos::from_millis(5)),
                &mut rng,
            );
            e.advance(t);
        }
        assert!(!e.in_probe(), "no probe before 60 s");
        assert_eq!(e.limit(), 1000, "fast windows drive the limit to max");
        // Jitter is 15 % of 60 s: the probe starts within [60 s, 69 s).
        e.advance(probe_end + Nanos::from_secs(69));
        assert!(e.in_probe(), "probe must start by 69 s");
        assert_eq!(e.limit(), 3);
        // 50 samples later the old limit comes back.
        let t = probe_end + Nanos::from_secs(70);
        for _ in 0..50 {
            e.on_sample(t, sample(Nanos::from_millis(11)), &mut rng);
        }
        assert!(!e.in_probe());
        assert_eq!(e.limit(), 1000);
        assert_eq!(e.min_rtt(), Nanos::from_millis(11));
    }

    #[test]
    fn samples_admitted_before_probe_start_are_discarded() {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut e = EnvoyGradient::new(&EnvoyGradientConfig {
            min_rtt_jitter: 0.0,
            ..EnvoyGradientConfig::default()
        })
        .unwrap();
        for _ in 0..50 {
            e.on_sample(
                Nanos::from_millis(20),
                sample(Nanos::from_millis(10)),
                &mut rng,
            );
        }
        let probe_at = Nanos::from_millis(20) + Nanos::from_secs(60);
        e.advance(probe_at);
        assert!(e.in_probe());
        // Admitted 1 ns before the probe began: ignored, however many.
        for _ in 0..100 {
            e.on_sample(
                probe_at + Nanos::from_millis(30),
                sample(Nanos::from_millis(30) + Nanos::NANOSECOND),
                &mut rng,
            );
        }
        assert!(e.in_probe());
        for _ in 0..50 {
            e.on_sample(
                probe_at + Nanos::from_millis(30),
                sample(Nanos::from_millis(30)),
                &mut rng,
            );
        }
        assert!(!e.in_probe());
        assert_eq!(e.min_rtt(), Nanos::from_millis(30));
    }

    #[test]
    fn five_windows_at_minimum_trigger_a_probe() {
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut e = EnvoyGradient::new(&EnvoyGradientConfig::default()).unwrap();
        for _ in 0..50 {
            e.on_sample(
                Nanos::from_millis(20),
                sample(Nanos::from_millis(10)),
                &mut rng,
            );
        }
        // Slow windows: g = 0.5, 3 × 0.5 = 1.5, floor(1.5 + 1.22) = 2 → clamped 3.
        // Window 1 sets 3 from 3: count 1 ... window 5: count 5 ⇒ probe now.
        let mut t = Nanos::from_millis(20);
        for n in 1..=5 {
            t += Nanos::from_millis(100);
            e.on_sample(
                t - Nanos::NANOSECOND,
                sample(Nanos::from_millis(200)),
                &mut rng,
            );
            e.advance(t);
            assert_eq!(e.in_probe(), n == 5, "window {n}");
        }
    }

    #[test]
    fn validation_names_fields() {
        let bad = EnvoyGradientConfig {
            min_rtt_buffer: 150.0,
            ..EnvoyGradientConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: envoy_gradient.min_rtt_buffer must be a percentage in [0, 100], got 150"
        );
        let bad = EnvoyGradientConfig {
            max_concurrency_limit: 2,
            ..EnvoyGradientConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().field(),
            "envoy_gradient.max_concurrency_limit"
        );
        let bad = EnvoyGradientConfig {
            min_rtt_interval: Nanos::ZERO,
            ..EnvoyGradientConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: envoy_gradient.min_rtt_interval must be ≥ 1ms when min_rtt_fixed_value is unset, got 0"
        );
        let bad = EnvoyGradientConfig {
            sample_capacity: 0,
            ..EnvoyGradientConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().field(),
            "envoy_gradient.sample_capacity"
        );
    }
}

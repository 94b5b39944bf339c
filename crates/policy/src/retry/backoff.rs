//! The pause before a retry.
//!
//! Laws, with `n` the retry index (0 for the first retry), `base` the initial
//! backoff, `cap` the maximum and `temp = min(cap, base · multiplier^n)`:
//!
//! | jitter | pause | source |
//! |---|---|---|
//! | none | `temp` | — |
//! | full | `random_between(0, temp)` | AWS Architecture Blog, "Exponential Backoff And Jitter" (2015); gRFC A6 retry backoff |
//! | equal | `temp/2 + random_between(0, temp/2)` | same blog |
//! | decorrelated | `min(cap, random_between(base, previous · 3))`, previous starting at `base` | same blog |
//! | proportional | `temp · (1 + spread · U(-1, 1))`, spread 0.2 | gRPC connection backoff (`doc/connection-backoff.md`) |
//!
//! With a constant backoff `temp = base` for every `n`.
//!
//! Published parameter sets:
//! * Envoy `retry_back_off`: base 25 ms, max 10 × base, fully jittered
//!   exponential — the [`Default`] here.
//! * gRPC connection backoff: initial 1 s, multiplier 1.6, max 120 s,
//!   jitter ±0.2 — [`BackoffConfig::grpc_connection`].
//! * gRPC retry policy (gRFC A6): `random(0, min(initialBackoff ·
//!   backoffMultiplier^(n-1), maxBackoff))` for the n-th retry (n from 1) —
//!   full jitter; its three parameters are required, its example is
//!   0.1 s, × 2, 1 s — [`BackoffConfig::grpc_retry_example`].

use super::FAMILY;
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How the un-jittered pause grows with the retry index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BackoffKind {
    /// Always `base`.
    Constant,
    /// `min(max, base · multiplier^n)`.
    #[default]
    Exponential,
}

/// How the pause is randomised so that clients failing together do not retry together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Jitter {
    /// The pause is exactly `temp`; synchronised clients stay synchronised.
    None,
    /// Uniform in `[0, temp]` (AWS "Full Jitter", gRPC retries, Envoy).
    #[default]
    Full,
    /// Uniform in `[temp/2, temp]` (AWS "Equal Jitter").
    Equal,
    /// Uniform in `[base, 3 · previous]`, capped (AWS "Decorrelated Jitter").
    Decorrelated,
    /// `temp` spread by ±`jitter_spread` (gRPC connection backoff, ±20 %).
    Proportional,
}

/// Backoff parameters as written in config files.
///
/// Defaults: Envoy's `retry_back_off` — exponential, base 25 ms, multiplier 2,
/// `max` unset (meaning 10 × base = 250 ms), full jitter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackoffConfig {
    /// Constant or exponential growth.
    pub kind: BackoffKind,
    /// Initial pause. Zero means "retry immediately", which is how naive
    /// clients behave and why it is allowed.
    pub base: Nanos,
    /// Largest un-jittered pause; unset means 10 × `base` (Envoy's rule).
    pub max: Option<Nanos>,
    /// Growth factor per retry for [`BackoffKind::Exponential`]; at least 1.
    pub multiplier: f64,
    /// Randomisation law.
    pub jitter: Jitter,
    /// Relative spread for [`Jitter::Proportional`], in `[0, 1]`; gRPC uses 0.2.
    pub jitter_spread: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            kind: BackoffKind::Exponential,
            base: 25 * Nanos::MILLISECOND,
            max: None,
            multiplier: 2.0,
            jitter: Jitter::Full,
            jitter_spread: 0.2,
        }
    }
}

impl BackoffConfig {
    /// gRPC connection backoff: initial 1 s, × 1.6, max 120 s, jitter ±20 %.
    pub fn grpc_connection() -> Self {
        BackoffConfig {
            kind: BackoffKind::Exponential,
            base: 1_000 * Nanos::MILLISECOND,
            max: Some(120_000 * Nanos::MILLISECOND),
            multiplier: 1.6,
            jitter: Jitter::Proportional,
            jitter_spread: 0.2,
        }
    }

    /// The retry policy example of gRFC A6: 0.1 s, × 2, max 1 s, full jitter.
    pub fn grpc_retry_example() -> Self {
        BackoffConfig {
            kind: BackoffKind::Exponential,
            base: 100 * Nanos::MILLISECOND,
            max: Some(1_000 * Nanos::MILLISECOND),
            multiplier: 2.0,
            jitter: Jitter::Full,
            jitter_spread: 0.2,
        }
    }

    /// `max`, or Envoy's default of 10 × `base` when unset.
    pub fn effective_max(&self) -> Nanos {
        self.max.unwrap_or(self.base.saturating_mul(10))
    }

    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if let Some(max) = self.max
            && max < self.base
        {
            return Err(FieldError::new(
                FAMILY,
                "backoff.max",
                format!("≥ backoff.base ({})", self.base),
                max,
            ));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "backoff.multiplier",
                "a finite number ≥ 1",
                self.multiplier,
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter_spread) {
            return Err(FieldError::new(
                FAMILY,
                "backoff.jitter_spread",
                "between 0 and 1",
                self.jitter_spread,
            ));
        }
        Ok(())
    }
}

/// A validated backoff law; [`Backoff::pause`] draws one pause.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    kind: BackoffKind,
    jitter: Jitter,
    base: Nanos,
    max: Nanos,
    multiplier: f64,
    spread: f64,
}

impl Backoff {
    /// Validates and compiles `config`.
    pub fn new(config: &BackoffConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Backoff {
            kind: config.kind,
            jitter: config.jitter,
            base: config.base,
            max: config.effective_max(),
            multiplier: config.multiplier,
            spread: config.jitter_spread,
        })
    }

    /// The initial pause; also the starting "previous" for decorrelated jitter.
    pub fn base(&self) -> Nanos {
        self.base
    }

    /// The cap on the un-jittered pause.
    pub fn max(&self) -> Nanos {
        self.max
    }

    /// The un-jittered pause before retry `n` (0-based): `min(max, base · multiplier^n)`.
    ///
    /// ```
    /// use stormbreak_policy::retry::{Backoff, BackoffConfig};
    /// use stormbreak_policy::Nanos;
    /// let b = Backoff::new(&BackoffConfig::default()).unwrap(); // Envoy: 25 ms × 2, cap 250 ms
    /// let steps: Vec<_> = (0..6).map(|n| b.ceiling(n)).collect();
    /// assert_eq!(steps, [Nanos::from_millis(25), Nanos::from_millis(50), Nanos::from_millis(100), Nanos::from_millis(200), Nanos::from_millis(250), Nanos::from_millis(250)]);
    /// ```
    #[inline]
    pub fn ceiling(&self, n: u32) -> Nanos {
        match self.kind {
            BackoffKind::Constant => self.base,
            BackoffKind::Exponential => {
                let grown = self.base.as_nanos() as f64
                    * self.multiplier.powi(n.min(i32::MAX as u32) as i32);
                if grown >= self.max.as_nanos() as f64 {
                    self.max
                } else {
                    Nanos::from_nanos(grown.round() as u64)
                }
            }
        }
    }

    /// Draws the pause before retry `n` (0-based). `previous` is the pause this
    /// law returned last time for the same request (use [`Backoff::base`] before
    /// the first retry); only decorrelated jitter reads it.
    #[inline]
    pub fn pause<R: Rng + ?Sized>(&self, n: u32, previous: Nanos, rng: &mut R) -> Nanos {
        match self.jitter {
            Jitter::None => self.ceiling(n),
            Jitter::Full => Nanos::from_nanos(rng.random_range(0..=self.ceiling(n).as_nanos())),
            Jitter::Equal => {
                let half = self.ceiling(n) / 2;
                half + Nanos::from_nanos(rng.random_range(0..=half.as_nanos()))
            }
            Jitter::Decorrelated => {
                let hi = previous.max(self.base).saturating_mul(3);
                Nanos::from_nanos(rng.random_range(self.base.as_nanos()..=hi.as_nanos()))
                    .min(self.max)
            }
            Jitter::Proportional => {
                let temp = self.ceiling(n).as_nanos() as f64;
                let u = rng.random::<f64>() * 2.0 - 1.0;
                Nanos::from_nanos((temp * (1.0 + self.spread * u)).round() as u64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn backoff(jitter: Jitter) -> Backoff {
        Backoff::new(&BackoffConfig {
            jitter,
            ..BackoffConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn envoy_default_max_is_ten_times_base() {
        let cfg = BackoffConfig {
            base: Nanos::from_millis(100),
            max: None,
            ..BackoffConfig::default()
        };
        assert_eq!(cfg.effective_max(), Nanos::from_millis(1000));
        assert_eq!(
            BackoffConfig::default().effective_max(),
            Nanos::from_millis(250)
        );
    }

    #[test]
    fn no_jitter_sequence_doubles_to_the_cap() {
        // 25, 50, 100, 200, then 400 > 250 is capped.
        let b = backoff(Jitter::None);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let seq: Vec<Nanos> = (0..6).map(|n| b.pause(n, Nanos::ZERO, &mut rng)).collect();
        assert_eq!(
            seq,
            [
                Nanos::from_millis(25),
                Nanos::from_millis(50),
                Nanos::from_millis(100),
                Nanos::from_millis(200),
                Nanos::from_millis(250),
                Nanos::from_millis(250)
            ]
        );
    }

    #[test]
    fn grpc_connection_backoff_grows_by_1_6_to_120s() {
        // 1 s · 1.6^n: 1, 1.6, 2.56, 4.096, 6.5536 s; 1.6^10 = 109.95 s; 1.6^11 = 175.9 s > 120 s.
        let b = Backoff::new(&BackoffConfig::grpc_connection()).unwrap();
        assert_eq!(b.ceiling(0), Nanos::SECOND);
        assert_eq!(b.ceiling(1), Nanos::from_millis(1600));
        assert_eq!(b.ceiling(2), Nanos::from_millis(2560));
        assert_eq!(b.ceiling(4), Nanos::from_micros(6553600));
        assert_eq!(b.ceiling(10), Nanos::from_nanos(109951162778)); // 109.9511627776 s, rounded
        assert_eq!(b.ceiling(11), 120 * Nanos::SECOND);
    }

    #[test]
    fn constant_backoff_never_grows() {
        let b = Backoff::new(&BackoffConfig {
            kind: BackoffKind::Constant,
            base: Nanos::from_millis(40),
            jitter: Jitter::None,
            ..BackoffConfig::default()
        })
        .unwrap();
        assert!((0..20).all(|n| b.ceiling(n) == Nanos::from_millis(40)));
    }

    #[test]
    fn full_jitter_draws_lie_in_zero_to_ceiling_and_average_half() {
        let b = backoff(Jitter::Full);
        let mut rng = Pcg64Mcg::seed_from_u64(42);
        for n in 0..8 {
            let cap = b.ceiling(n);
            let draws: Vec<Nanos> = (0..2000)
                .map(|_| b.pause(n, Nanos::ZERO, &mut rng))
                .collect();
            assert!(draws.iter().all(|&d| d <= cap), "n={n}");
            // Uniform on [0, cap] has mean cap/2; 2000 draws put the sample mean
            // within ±4 % of cap (σ = cap/√12/√2000 ≈ 0.0065 cap, so 6σ).
            let mean = draws.iter().map(|&d| d.as_nanos() as f64).sum::<f64>() / 2000.0;
            assert!(
                (mean / cap.as_nanos() as f64 - 0.5).abs() < 0.04,
                "n={n} mean={mean}"
            );
        }
    }

    #[test]
    fn equal_jitter_keeps_at_least_half() {
        let b = backoff(Jitter::Equal);
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        for n in 0..8 {
            let temp = b.ceiling(n);
            for _ in 0..500 {
                let d = b.pause(n, Nanos::ZERO, &mut rng);
                assert!(d >= temp / 2 && d <= temp, "n={n} d={d} temp={temp}");
            }
        }
    }

    #[test]
    fn decorrelated_jitter_stays_between_base_and_three_times_previous() {
        let b = backoff(Jitter::Decorrelated);
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let mut previous = b.base();
        let mut reached_cap = false;
        for n in 0..200 {
            let d = b.pause(n, previous, &mut rng);
            assert!(d >= Nanos::from_millis(25), "{d}");
            assert!(
                d <= (3 * previous).min(Nanos::from_millis(250)),
                "{d} vs 3·{previous}"
            );
            reached_cap |= d == Nanos::from_millis(250);
            previous = d;
        }
        assert!(
            reached_cap,
            "200 draws of a walk that can triple should hit the cap"
        );
    }

    #[test]
    fn proportional_jitter_is_within_twenty_percent() {
        let b = Backoff::new(&BackoffConfig::grpc_connection()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let (mut below, mut above) = (false, false);
        for _ in 0..1000 {
            let d = b.pause(1, Nanos::ZERO, &mut rng);
            // 1.6 s ± 20 % = [1.28 s, 1.92 s].
            assert!(
                (Nanos::from_millis(1280)..=Nanos::from_millis(1920)).contains(&d),
                "{d}"
            );
            below |= d < Nanos::from_millis(1600);
            above |= d > Nanos::from_millis(1600);
        }
        assert!(below && above, "the spread goes both ways");
    }

    #[test]
    fn seeded_draws_are_reproducible() {
        let b = backoff(Jitter::Full);
        let draw = |seed| {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            (0..5)
                .map(|n| b.pause(n, Nanos::ZERO, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(11), draw(11));
        assert_ne!(draw(11), draw(12));
    }

    #[test]
    fn invalid_backoff_is_rejected_by_name() {
        let bad = BackoffConfig {
            base: Nanos::from_millis(100),
            max: Some(Nanos::from_millis(10)),
            ..BackoffConfig::default()
        };
        let e = bad.validate().unwrap_err();
        assert_eq!(e.field(), "backoff.max");
        assert_eq!(
            e.to_string(),
            "retry: backoff.max must be ≥ backoff.base (100ms), got 10ms"
        );
        let bad = BackoffConfig {
            multiplier: 0.5,
            ..BackoffConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "retry: backoff.multiplier must be a finite number ≥ 1, got 0.5"
        );
        let bad = BackoffConfig {
            multiplier: f64::NAN,
            ..BackoffConfig::default()
        };
        assert!(bad.validate().is_err());
        let bad = BackoffConfig {
            jitter_spread: 1.5,
            ..BackoffConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "backoff.jitter_spread");
    }

    #[test]
    fn zero_base_means_immediate_retries() {
        let b = Backoff::new(&BackoffConfig {
            base: Nanos::ZERO,
            ..BackoffConfig::default()
        })
        .unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        assert!((0..10).all(|n| b.pause(n, Nanos::ZERO, &mut rng) == Nanos::ZERO));
    }

    #[test]
    fn config_parses_from_json() {
        let cfg: BackoffConfig = serde_json::from_str(
            r#"{"kind": "constant", "base": "1s", "jitter": "proportional", "jitter_spread": 0.1}"#,
        )
        .unwrap();
        assert_eq!(cfg.kind, BackoffKind::Constant);
        assert_eq!(cfg.base, Nanos::SECOND);
        assert_eq!(cfg.effective_max(), 10 * Nanos::SECOND);
        assert_eq!(cfg.jitter, Jitter::Proportional);
    }

    proptest! {
        #[test]
        fn every_jittered_draw_respects_its_law(
            seed in any::<u64>(),
            base_ms in 0u64..2_000,
            max_factor in 1u64..50,
            multiplier in 1.0f64..4.0,
            n in 0u32..64,
            previous_ms in 0u64..100_000,
        ) {
            let cfg = BackoffConfig {
                base: Nanos::from_millis(base_ms),
                max: Some(Nanos::from_millis(base_ms * max_factor)),
                multiplier,
                ..BackoffConfig::default()
            };
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let temp_of = || {
                // min(cap, base · multiplier^n), computed independently.
                let t = Nanos::from_millis(base_ms).as_nanos() as f64 * multiplier.powi(n as i32);
                t.min(Nanos::from_millis(base_ms * max_factor).as_nanos() as f64)
            };
            for jitter in [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated, Jitter::Proportional] {
                let b = Backoff::new(&BackoffConfig { jitter, ..cfg.clone() }).unwrap();
                let temp = temp_of();
                let d = (b.pause(n, Nanos::from_millis(previous_ms), &mut rng)).as_nanos() as f64;
                match jitter {
                    Jitter::None => prop_assert!((d - temp).abs() <= 1.0),
                    Jitter::Full => prop_assert!(d <= temp + 1.0),
                    Jitter::Equal => prop_assert!(d >= (temp / 2.0).floor() - 1.0 && d <= temp + 1.0),
                    Jitter::Decorrelated => {
                        let hi = (3 * Nanos::from_millis(previous_ms).max(Nanos::from_millis(base_ms))).as_nanos() as f64;
                        prop_assert!(d >= (Nanos::from_millis(base_ms).min(b.max())).as_nanos() as f64);
                        prop_assert!(d <= hi.min(b.max().as_nanos() as f64));
                    }
                    Jitter::Proportional => prop_assert!(d >= temp * 0.8 - 1.0 && d <= temp * 1.2 + 1.0),
                }
            }
        }
    }
}

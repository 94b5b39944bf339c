use super::FAMILY;
use super::{
    Aimd, AimdConfig, EnvoyGradient, EnvoyGradientConfig, Fixed, FixedConfig, Gradient2,
    Gradient2Config, LimitAlgorithm, Sample, Vegas, VegasConfig, Windowed, WindowedConfig,
};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Any limit algorithm, chosen by a `kind` tag in a config file.
///
/// ```
/// use stormbreak_policy::limit::{LimitAlgorithm, LimitConfig};
/// let json = r#"{"kind": "windowed", "window": {"min_window": "500ms"},
///                "inner": {"kind": "gradient2", "max_concurrency": 400}}"#;
/// let config: LimitConfig = serde_json::from_str(json).unwrap();
/// let limit = config.build().unwrap();
/// assert_eq!((limit.limit(), limit.max_limit()), (20, 400));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitConfig {
    /// [`Fixed`].
    Fixed(FixedConfig),
    /// [`Aimd`].
    Aimd(AimdConfig),
    /// [`Vegas`].
    Vegas(VegasConfig),
    /// [`Gradient2`].
    Gradient2(Gradient2Config),
    /// [`EnvoyGradient`].
    EnvoyGradient(EnvoyGradientConfig),
    /// [`Windowed`] around another per-sample algorithm.
    Windowed(WindowedLimitConfig),
}

/// Config for a [`Windowed`] wrapper: the window and the algorithm it feeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowedLimitConfig {
    /// Window parameters; Netflix's defaults when omitted.
    #[serde(default)]
    pub window: WindowedConfig,
    /// The algorithm fed one sample per window: `fixed`, `aimd`, `vegas` or
    /// `gradient2`. Envoy's controller has its own windows and counts
    /// individual requests during a probe, so it cannot be wrapped.
    pub inner: Box<LimitConfig>,
}

impl LimitConfig {
    /// The `kind` tag this config was (or would be) written with.
    pub fn kind(&self) -> &'static str {
        match self {
            LimitConfig::Fixed(_) => "fixed",
            LimitConfig::Aimd(_) => "aimd",
            LimitConfig::Vegas(_) => "vegas",
            LimitConfig::Gradient2(_) => "gradient2",
            LimitConfig::EnvoyGradient(_) => "envoy_gradient",
            LimitConfig::Windowed(_) => "windowed",
        }
    }

    /// Validates the selected algorithm's config (and a wrapped one's).
    pub fn validate(&self) -> Result<(), FieldError> {
        match self {
            LimitConfig::Fixed(c) => c.validate(),
            LimitConfig::Aimd(c) => c.validate(),
            LimitConfig::Vegas(c) => c.validate(),
            LimitConfig::Gradient2(c) => c.validate(),
            LimitConfig::EnvoyGradient(c) => c.validate(),
            LimitConfig::Windowed(c) => {
                c.window.validate()?;
                match *c.inner {
                    LimitConfig::EnvoyGradient(_) | LimitConfig::Windowed(_) => {
                        Err(FieldError::new(
                            FAMILY,
                            "windowed.inner",
                            "one of fixed, aimd, vegas, gradient2",
                            c.inner.kind(),
                        ))
                    }
                    ref inner => inner.validate(),
                }
            }
        }
    }

    /// Validates and builds the algorithm (allocation happens here, once).
    pub fn build(&self) -> Result<AnyLimit, FieldError> {
        self.validate()?;
        Ok(match self {
            LimitConfig::Fixed(c) => AnyLimit::Fixed(Fixed::new(c)?),
            LimitConfig::Aimd(c) => AnyLimit::Aimd(Aimd::new(c)?),
            LimitConfig::Vegas(c) => AnyLimit::Vegas(Vegas::new(c)?),
            LimitConfig::Gradient2(c) => AnyLimit::Gradient2(Gradient2::new(c)?),
            LimitConfig::EnvoyGradient(c) => AnyLimit::EnvoyGradient(EnvoyGradient::new(c)?),
            LimitConfig::Windowed(c) => {
                let inner = c.inner.build()?;
                AnyLimit::Windowed(Box::new(Windowed::new(&c.window, inner)?))
            }
        })
    }
}

/// A built limit algorithm of any kind, dispatched without generics so a
/// simulator or gateway can hold one per component from config.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyLimit {
    /// [`Fixed`].
    Fixed(Fixed),
    /// [`Aimd`].
    Aimd(Aimd),
    /// [`Vegas`].
    Vegas(Vegas),
    /// [`Gradient2`].
    Gradient2(Gradient2),
    /// [`EnvoyGradient`].
    EnvoyGradient(EnvoyGradient),
    /// [`Windowed`] around another algorithm (boxed: the type is recursive).
    Windowed(Box<Windowed<AnyLimit>>),
}

macro_rules! dispatch {
    ($self:expr, $inner:ident => $call:expr) => {
        match $self {
            AnyLimit::Fixed($inner) => $call,
            AnyLimit::Aimd($inner) => $call,
            AnyLimit::Vegas($inner) => $call,
            AnyLimit::Gradient2($inner) => $call,
            AnyLimit::EnvoyGradient($inner) => $call,
            AnyLimit::Windowed($inner) => $call,
        }
    };
}

impl LimitAlgorithm for AnyLimit {
    fn limit(&self) -> u32 {
        dispatch!(self, a => a.limit())
    }

    fn min_limit(&self) -> u32 {
        dispatch!(self, a => a.min_limit())
    }

    fn max_limit(&self) -> u32 {
        dispatch!(self, a => a.max_limit())
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, rng: &mut R) {
        dispatch!(self, a => a.on_sample(now, sample, rng))
    }

    fn advance(&mut self, now: Nanos) {
        dispatch!(self, a => a.advance(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<LimitConfig, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn every_kind_parses_with_defaults() {
        for (kind, min, max) in [
            ("fixed", 1024, 1024),
            ("aimd", 20, 200),
            ("vegas", 1, 1000),
            ("gradient2", 20, 200),
            ("envoy_gradient", 3, 1000),
        ] {
            let config = parse(&format!(r#"{{"kind": "{kind}"}}"#)).unwrap();
            assert_eq!(config.kind(), kind);
            let limit = config.build().unwrap();
            assert_eq!((limit.min_limit(), limit.max_limit()), (min, max), "{kind}");
        }
    }

    #[test]
    fn fields_use_human_units() {
        let config = parse(
            r#"{"kind": "envoy_gradient", "concurrency_update_interval": "250ms",
                "min_rtt_fixed_value": "12ms", "min_rtt_jitter": 10}"#,
        )
        .unwrap();
        let LimitConfig::EnvoyGradient(c) = config else {
            panic!("wrong kind")
        };
        assert_eq!(c.concurrency_update_interval, Nanos::from_millis(250));
        assert_eq!(c.min_rtt_fixed_value, Some(Nanos::from_millis(12)));
        assert_eq!(c.min_rtt_jitter, 10.0);
        assert_eq!(c.min_concurrency, 3);
    }

    #[test]
    fn unknown_fields_and_kinds_are_rejected() {
        let err = parse(r#"{"kind": "aimd", "backoff": 0.5}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `backoff`"), "{err}");
        assert!(parse(r#"{"kind": "bbr"}"#).is_err());
        assert!(parse(r#"{"kind": "windowed", "inner": {"kind": "vegas"}, "x": 1}"#).is_err());
    }

    #[test]
    fn invalid_values_surface_through_build() {
        let config = parse(r#"{"kind": "vegas", "smoothing": 2.0}"#).unwrap();
        assert_eq!(
            config.build().unwrap_err().to_string(),
            "limit: vegas.smoothing must be in (0, 1], got 2"
        );
    }

    #[test]
    fn windowed_rejects_self_windowing_inners() {
        let config = parse(r#"{"kind": "windowed", "inner": {"kind": "envoy_gradient"}}"#).unwrap();
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "limit: windowed.inner must be one of fixed, aimd, vegas, gradient2, got envoy_gradient"
        );
        let config = parse(
            r#"{"kind": "windowed", "window": {"window_size": 3}, "inner": {"kind": "aimd"}}"#,
        )
        .unwrap();
        assert_eq!(
            config.validate().unwrap_err().field(),
            "windowed.window_size"
        );
    }
}

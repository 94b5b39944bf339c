//! Overload policies as pure, sans-IO state machines.
//!
//! Every policy in this crate is driven from outside: the caller passes the
//! current time as [`Nanos`] (nanoseconds since an arbitrary origin) and, where
//! a decision is random, a `&mut impl rand::Rng`. Nothing here reads a clock,
//! spawns a task, touches a socket or reaches for a global RNG, so the same
//! code runs in three places unchanged:
//!
//! * the discrete-event simulator (`stormbreak-sim`), in virtual time;
//! * the loopback lab, in real time;
//! * the production gateway (`stormbreak-guard`) and client layer.
//!
//! Same inputs, same decisions. Per-request decisions do not allocate.
//!
//! # Families
//!
//! | module | what it decides | source law |
//! |---|---|---|
//! | [`retry`] | classify an outcome, whether and when to retry | gRPC retry, AWS jitter formulas, RFC 9110 `Retry-After` |
//! | [`budget`] | whether a retry may be spent | Finagle/Linkerd ratio budget, gRPC throttling, AWS retry quota |
//! | [`limit`] | how many requests may be in flight | Netflix concurrency-limits, Envoy adaptive concurrency |
//! | [`shed`] | which requests to reject under saturation, with what status | Google SRE criticality, client-side adaptive throttling |
//! | [`ratelimit`] | per-key request rate | GCRA |
//! | [`breaker`] | stop calling a failing dependency | closed / open / half-open breaker |
//! | [`autoscale`] | desired replicas | Kubernetes HPA v2 |
//! | [`ramp`] | fraction of traffic admitted during a staged restore | staged restore with an error guard |
//! | [`failover`] | how much traffic to spill to another region | capacity-aware spill |
//!
//! [`units`] parses the human units (`"250ms"`, `"9k/s"`) used in config files.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod units;

mod field_error;
pub use field_error::FieldError;

pub mod autoscale;
pub mod breaker;
pub mod budget;
pub mod failover;
pub mod limit;
pub mod ramp;
pub mod ratelimit;
pub mod retry;
pub mod shed;

/// Nanoseconds since an arbitrary, caller-chosen origin.
///
/// Virtual time in the simulator, a monotonic clock's reading in the guard.
/// `u64` nanoseconds cover 584 years, so no policy needs to handle wrap-around.
pub type Nanos = u64;

/// Conversions between [`Nanos`] and human-scale durations.
pub mod time {
    use super::Nanos;

    /// One microsecond.
    pub const MICROSECOND: Nanos = 1_000;
    /// One millisecond.
    pub const MILLISECOND: Nanos = 1_000_000;
    /// One second.
    pub const SECOND: Nanos = 1_000_000_000;
    /// One minute.
    pub const MINUTE: Nanos = 60 * SECOND;

    /// `n` milliseconds.
    pub const fn ms(n: u64) -> Nanos {
        n * MILLISECOND
    }

    /// `n` seconds.
    pub const fn secs(n: u64) -> Nanos {
        n * SECOND
    }

    /// Fractional seconds, rounded to the nearest nanosecond; negative or NaN is 0.
    ///
    /// ```
    /// use stormbreak_policy::time::{from_secs_f64, ms};
    /// assert_eq!(from_secs_f64(0.25), ms(250));
    /// assert_eq!(from_secs_f64(-1.0), 0);
    /// ```
    pub fn from_secs_f64(s: f64) -> Nanos {
        if s.is_nan() || s <= 0.0 {
            0
        } else {
            (s * SECOND as f64).round().min(u64::MAX as f64) as Nanos
        }
    }

    /// Nanoseconds as fractional seconds.
    pub fn to_secs_f64(n: Nanos) -> f64 {
        n as f64 / SECOND as f64
    }
}

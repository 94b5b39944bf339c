//! Which endpoint of a cluster gets the next request, and which endpoints
//! are left out for misbehaving.
//!
//! | type | what it decides | source law |
//! |---|---|---|
//! | [`LeastRequest`] | pick an endpoint: the least loaded of `choice_count` drawn at random | Envoy `LEAST_REQUEST` (power of two choices, Mitzenmacher 2001) |
//! | [`OutlierDetector`] | eject an endpoint after consecutive failures, for a growing time | Envoy outlier detection, `consecutive_5xx` |
//! | [`HealthTable`] | healthy or not, from active probes with thresholds | Envoy / Kubernetes health-check thresholds |
//!
//! Both are sans-IO: the caller says how loaded each endpoint is and when
//! each attempt ended; randomness is passed in.
//!
//! ```
//! use stormbreak_policy::balance::{BalanceConfig, LeastRequest};
//! use rand::SeedableRng;
//!
//! let p2c = LeastRequest::new(&BalanceConfig::default()).unwrap();
//! let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
//! let inflight = [9, 0, 9];
//! // Endpoint 1 wins every draw it is part of; with two of three drawn it
//! // is in two draws of three.
//! let picks = (0..300).filter(|_| p2c.choose(3, |i| Some(inflight[i]), &mut rng) == Some(1)).count();
//! assert!(picks > 150, "{picks}");
//! ```

mod health;
mod outlier;
mod p2c;

pub use health::{HealthCheckConfig, HealthTable};
pub use outlier::{OutlierConfig, OutlierDetector};
pub use p2c::{BalanceConfig, LeastRequest};

/// The family named in this module's [`FieldError`](crate::FieldError)s.
const FAMILY: &str = "balance";

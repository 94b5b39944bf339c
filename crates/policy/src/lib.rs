//! Overload policies as pure, sans-IO state machines.
//!
//! Every policy in this crate is driven from outside: the caller passes the
//! current time as [`Nanos`] (nanoseconds since an arbitrary origin) and, where
//! a decision is random, a `&mut impl rand::Rng`. Nothing here reads a clock,
//! spawns a task, touches a socket or reaches for a global RNG, so the same
//! code runs in three places unchanged:
//!
//! * the discrete-event simulator (`stormbreak-sim`), in virtual time;
//! * the production gateway (`stormbreak-guard`) and the client layers
//!   (`stormbreak-client`), in real time;
//! * the loopback lab (`stormbreak-lab`), in real time, through the guard
//!   and the client layers.
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
//! | [`balance`] | which endpoint gets a request; which endpoints are ejected | Envoy least-request (power of two choices), Envoy outlier detection |
//!
//! [`units`] parses the human units (`"250ms"`, `"9k/s"`) used in config files.
//!
//! # API conventions
//!
//! Every family follows the same rules, so the simulator, the client layer
//! and the gateway call all of them the same way:
//!
//! * **Time** is [`Nanos`], a newtype over `u64` nanoseconds that converts
//!   from and into [`std::time::Duration`], saturates instead of wrapping,
//!   prints as `250ms` and is written in configs as a unit string. No public
//!   config field is a bare integer of time.
//! * **Configs** are plain structs with public fields and a `Default` that
//!   holds the published defaults, so `Config { field, ..Default::default() }`
//!   works; each derives `Serialize` and `Deserialize` (round-tripping through
//!   TOML unchanged) and refuses unknown keys.
//! * **Construction** is `Policy::new(&Config) -> Result<Policy, FieldError>`:
//!   it validates, allocates whatever the policy will ever need, and borrows
//!   the config (the few with extra inputs take them after it, such as
//!   `StagedRestore::new(&config, sites)`). Composite configs build with
//!   `config.build()`. `Config::validate()` runs the same checks alone.
//! * **Errors** from every family are one [`FieldError`]: family, field path
//!   as spelled in config files, what was expected, what was given.
//! * **Decisions** the caller must act on (`RetryDecision`, `shed::Decision`,
//!   breaker transitions, scale decisions, `poll_timeout` readings) are
//!   `#[must_use]`.
//! * **Enums that will grow** are `#[non_exhaustive]`: match them with a
//!   wildcard arm. They are `retry::{AttemptOutcome, BackoffKind, GiveUpReason,
//!   Jitter, RetryOn}`, `limit::{AnyLimit, LimitConfig}`,
//!   `autoscale::{MetricError, MetricSpec, MetricTarget, ResourceName,
//!   ScaleLimit, ScaleReason}`, `breaker::TransitionCause`,
//!   `failover::SpillLaw` and `shed::AddRuleError`. Closed sets (a
//!   decision's outcomes, a breaker's three states, the four criticality
//!   classes) stay exhaustive so a caller's `match` proves it handles each.
//! * **Module files**: a module with children is `name/mod.rs`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod names;
pub mod time;
pub mod units;

pub use time::Nanos;

mod field_error;
pub use field_error::FieldError;

pub mod autoscale;
pub mod balance;
pub mod breaker;
pub mod budget;
pub mod failover;
pub mod limit;
pub mod ramp;
pub mod ratelimit;
pub mod retry;
pub mod shed;

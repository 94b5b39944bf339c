//! The engine's bounds: what a run may hold and how much work it may do,
//! so no input — however large, small or self-feeding — takes unbounded
//! memory or never lets virtual time advance.
//!
//! Each default is set at least 4× above what the incident replay at its
//! published scale (`replay --scale 1`) reaches (measured figures in
//! `docs/BENCHMARKS.md`), so no honest run meets one. A bound that is hit
//! either stops the run with a [`RunError`] naming the component, or (the
//! default app-queue bound) refuses like a configured queue and is
//! reported in the terminal and in `summary.json` as a [`BoundHit`].

use std::fmt;

use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;

/// The bounds of one run. `Limits::default()` is what the CLI uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Queue places per pod for an app whose scenario leaves `queue` unset
    /// (default 100 000). Reaching it refuses like a configured bound
    /// (`limit_rejected`) and is reported as a [`BoundHit`].
    pub default_app_queue: u32,
    /// Logical requests one client population may have in flight (default
    /// 1 000 000); past it the run stops.
    pub requests_in_flight: u32,
    /// Attempts the whole run may have in flight (default 4 000 000, about
    /// 0.5 GB); past it the run stops.
    pub attempts_in_flight: u32,
    /// Jobs waiting in one job queue (default 64 000 000, about 4 bytes
    /// each, so at most some 512 MiB with the queue's doubling); past it
    /// the run stops. `replay --scale 1` reaches 10.6 M.
    pub job_backlog: u64,
    /// Events per simulated second, measured over every
    /// [`BUDGET_WINDOW`] events (default 10 000 000): a run whose virtual
    /// time cannot advance (a zero-delay loop) stops within a second.
    pub events_per_sim_second: u64,
    /// Events in the whole run (default 100 000 000 000).
    pub events_total: u64,
}

/// Events between two checks of the work budget.
pub const BUDGET_WINDOW: u64 = 1 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_app_queue: 100_000,
            requests_in_flight: 1_000_000,
            attempts_in_flight: 4_000_000,
            job_backlog: 64_000_000,
            events_per_sim_second: 10_000_000,
            events_total: 100_000_000_000,
        }
    }
}

/// Why a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError {
    /// More work than [`Limits::events_per_sim_second`] or
    /// [`Limits::events_total`] allow.
    WorkBudget {
        /// Simulated time of the check.
        at: Nanos,
        /// What was exceeded, in words.
        what: String,
        /// The component (or population) behind most of the events.
        component: String,
    },
    /// A population, the run or a job queue holds more than its bound.
    InFlight {
        /// Simulated time.
        at: Nanos,
        /// The component or population.
        component: String,
        /// What was held, in words.
        what: String,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |at: &Nanos| stormbreak_policy::units::format_duration(*at);
        match self {
            RunError::WorkBudget {
                at,
                what,
                component,
            } => write!(
                f,
                "the run stopped at {} of simulated time: {what}; most events came from {component} \
                 (a loop whose virtual time cannot advance, e.g. zero-delay retries or a 1 ns fan-out delay?)",
                t(at)
            ),
            RunError::InFlight {
                at,
                component,
                what,
            } => write!(
                f,
                "the run stopped at {} of simulated time: {component}: {what} \
                 (the model diverges: add timeouts, queue bounds or a retry budget)",
                t(at)
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// A default bound that refused work (reported, never silent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundHit {
    /// Which bound (`default_app_queue`).
    pub bound: String,
    /// The component it applies to.
    pub component: String,
    /// Requests it refused.
    pub count: u64,
    /// Simulated time of the first refusal (nanoseconds in `recording.json`).
    #[serde(with = "stormbreak_policy::time::count")]
    pub first_at: Nanos,
}

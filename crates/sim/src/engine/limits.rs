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
//!
//! Each can be raised or lowered on the command line (`--limit
//! NAME=VALUE` of `simulate`, `replay` and `sweep`, read by
//! [`Limits::set`]); a scenario's `[limits]` table may only lower them
//! ([`crate::scenario::LimitsSpec`]), so a shared file or a sweep's Job
//! cannot lift the bounds that protect the machine running it. A run
//! stopped by one keeps what it recorded up to the stop
//! ([`Engine::run_to_stop`](crate::engine::Engine::run_to_stop)).

use std::fmt;

use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;

/// The bounds of one run. `Limits::default()` is what the CLI uses unless
/// `--limit` says otherwise; each default's reason is on its field and in
/// `docs/scenarios.md`, "Limits of a run".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Queue places per pod for an app whose scenario leaves `queue` unset
    /// (default 100 000, some 10 MB per pod: an unbounded queue is a
    /// scenario's oversight, not a server's behaviour). Reaching it
    /// refuses like a configured bound (`limit_rejected`) and is reported
    /// as a [`BoundHit`].
    pub default_app_queue: u32,
    /// Logical requests one client population may have in flight (default
    /// 1 000 000, some 100 MB); past it the run stops.
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

impl Limits {
    /// Every limit's name, as `--limit NAME=VALUE` and a scenario's
    /// `[limits]` table write it.
    pub const NAMES: [&'static str; 6] = [
        "default_app_queue",
        "requests_in_flight",
        "attempts_in_flight",
        "job_backlog",
        "events_per_sim_second",
        "events_total",
    ];

    /// The limit called `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "default_app_queue" => u64::from(self.default_app_queue),
            "requests_in_flight" => u64::from(self.requests_in_flight),
            "attempts_in_flight" => u64::from(self.attempts_in_flight),
            "job_backlog" => self.job_backlog,
            "events_per_sim_second" => self.events_per_sim_second,
            "events_total" => self.events_total,
            _ => return None,
        })
    }

    /// Sets the limit called `name` to `value` (at least 1, at most what
    /// its type holds); the error names the limits there are.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), String> {
        let small = |v: u64| {
            u32::try_from(v).map_err(|_| format!("{name} is at most {}, got {v}", u32::MAX))
        };
        if value == 0 {
            return Err(format!("{name} must be at least 1, got 0"));
        }
        match name {
            "default_app_queue" => self.default_app_queue = small(value)?,
            "requests_in_flight" => self.requests_in_flight = small(value)?,
            "attempts_in_flight" => self.attempts_in_flight = small(value)?,
            "job_backlog" => self.job_backlog = value,
            "events_per_sim_second" => self.events_per_sim_second = value,
            "events_total" => self.events_total = value,
            _ => {
                return Err(format!(
                    "unknown limit {name:?}: expected one of {}",
                    Limits::NAMES.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Parses `NAME=VALUE` (`attempts_in_flight=8000000`; `_` may group
    /// digits) and sets it.
    pub fn set_from(&mut self, assignment: &str) -> Result<(), String> {
        let (name, value) = assignment.split_once('=').ok_or_else(|| {
            format!(
                "expected NAME=VALUE such as attempts_in_flight=8000000, got {assignment:?} \
                 (limits: {})",
                Limits::NAMES.join(", ")
            )
        })?;
        let (name, value) = (name.trim(), value.trim());
        let n: u64 = value.replace('_', "").parse().map_err(|_| {
            format!("{name}: expected a whole number such as 8000000, got {value:?}")
        })?;
        self.set(name, n)
    }

    /// These limits, each lowered to the scenario's `[limits]` value where
    /// that is lower.
    pub fn lowered_to(mut self, spec: &crate::scenario::LimitsSpec) -> Limits {
        for (name, v) in spec.values() {
            if let (Some(v), Some(now)) = (v, self.get(name))
                && v < now
            {
                self.set(name, v).expect("a lower value of the same limit");
            }
        }
        self
    }
}

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
        /// The limit exceeded ([`Limits::NAMES`]).
        limit: &'static str,
        /// Simulated time of the check.
        at: Nanos,
        /// What was exceeded, in words.
        what: String,
        /// The component (or population) behind most of the events.
        component: String,
    },
    /// A population, the run or a job queue holds more than its bound.
    InFlight {
        /// The limit exceeded ([`Limits::NAMES`]).
        limit: &'static str,
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
                ..
            } => write!(
                f,
                "the run stopped at {} of simulated time: {what}; most events came from {component} \
                 (a loop whose virtual time cannot advance, e.g. zero-delay retries or a 1 ns fan-out delay?)",
                t(at)
            )?,
            RunError::InFlight {
                at,
                component,
                what,
                ..
            } => write!(
                f,
                "the run stopped at {} of simulated time: {component}: {what} \
                 (the model diverges: add timeouts, queue bounds or a retry budget)",
                t(at)
            )?,
        }
        let limit = self.limit();
        write!(
            f,
            ". It is the limit {limit}; if the run is meant to hold more, raise it with \
             --limit {limit}=N (docs/scenarios.md, \"Limits of a run\")"
        )
    }
}

impl RunError {
    /// The limit that stopped the run ([`Limits::NAMES`]).
    pub fn limit(&self) -> &'static str {
        match self {
            RunError::WorkBudget { limit, .. } | RunError::InFlight { limit, .. } => limit,
        }
    }

    /// The simulated time the run stopped at.
    pub fn at(&self) -> Nanos {
        match self {
            RunError::WorkBudget { at, .. } | RunError::InFlight { at, .. } => *at,
        }
    }
}

impl std::error::Error for RunError {}

/// Why and when a run stopped before its end, for its `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stopped {
    /// The limit ([`Limits::NAMES`]).
    pub limit: String,
    /// Simulated time of the stop (nanoseconds in `recording.json`).
    #[serde(with = "stormbreak_policy::time::count")]
    pub at: Nanos,
    /// The error, as the terminal showed it.
    pub message: String,
}

impl From<&RunError> for Stopped {
    fn from(e: &RunError) -> Stopped {
        Stopped {
            limit: e.limit().to_owned(),
            at: e.at(),
            message: e.to_string(),
        }
    }
}

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

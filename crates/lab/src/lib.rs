//! `stormbreak lab`: a scenario file run for real, on loopback, and
//! recorded as the simulator records it.
//!
//! Each scenario element maps to a real part (`docs/lab.md` has the table
//! and every gap): a service pod is a backend that serves by sleeping
//! (`backend`), its sidecar an in-process `stormbreak guard` (`sidecar`),
//! a client population an open-loop generator (`generator`, drawing from the simulator's own `engine::rate::RateSchedule`)
//! whose requests go through the `stormbreak-client` retry layer
//! (`client`). An LB pool's nodes and a gateway's instances are guards
//! too (`lb`, `gateway`, run as a `pool`, started in front of their next
//! hop by `hops`); what only those guards see is read back by `counted`.
//! `fleet` keeps each service's pods (the replica controller),
//! `autoscaler` runs the simulator's HPA over them, `actions` applies the
//! timeline. `support` refuses, by name and before anything starts,
//! every feature the lab cannot run yet; `plan` applies `--scale` and the
//! run's bounds; `runner` runs and tears down; `record` turns the run into
//! the simulator's `Recording`; `validity` judges whether the run can be
//! trusted.
//!
//! ```no_run
//! let text = std::fs::read_to_string("scenarios/lab-capacity-drop.toml").unwrap();
//! let sc = stormbreak_sim::Scenario::parse("lab-capacity-drop.toml", &text).unwrap();
//! let plan = stormbreak_lab::LabPlan::new(&sc, &Default::default()).unwrap();
//! let run = stormbreak_lab::run(&plan, &Default::default()).unwrap();
//! assert!(run.figures.validity.valid, "{:?}", run.figures.validity.reasons);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actions;
pub mod autoscaler;
pub mod backend;
pub mod client;
pub mod compare;
pub mod counted;
pub mod fanout;
pub mod fleet;
pub mod gateway;
pub mod generator;
pub mod guard_doc;
pub mod hops;
pub mod lb;
pub mod overhead;
pub mod plan;
pub mod pool;
pub mod record;
pub mod runner;
pub mod sidecar;
pub mod support;
pub mod validity;

pub use plan::{LabOptions, LabPlan, PlanError};
pub use runner::{LabError, LabFigures, LabRun, Stop, run};

/// Exit status of `stormbreak lab` for a run that finished but is invalid
/// (Nagios' UNKNOWN): its outputs are written, its summary says why.
pub const EXIT_INVALID: u8 = 3;

//! Every integration test of this crate in one binary (one link instead
//! of one per file: linking dominates the suite on a 2-core machine).
//! Each former test file is a module; test names are unchanged but for
//! the module prefix.

mod arrivals;
mod blind_spot;
mod capacity_drop;
mod closed_forms;
mod common;
mod connections;
mod conservation;
mod every_scenario_parses;
mod fan_out;
mod faults;
mod gateway_limit;
mod interval;
mod job_queue;
mod limits;
mod metastability;
mod no_alloc_engine;
mod outputs;
mod outputs_abandon;
mod replay_actions;
mod replay_seeds;
mod scenario_errors;
mod sidecar_queue;
mod stop_at;
mod sweep_fields;

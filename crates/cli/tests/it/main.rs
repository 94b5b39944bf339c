//! Every integration test of this crate in one binary (one link instead
//! of one per file: linking dominates the suite on a 2-core machine).
//! Each former test file is a module; test names are unchanged but for
//! the module prefix.

mod common;
// Shared by `fuzz` and `hostile`.
mod audit;
#[path = "fuzz_cases/bounded.rs"]
mod bounded;
mod cli;
mod fuzz;
mod guard_cmd;
mod hostile;
mod out_dir;
mod probe_cmd;
mod sensitivity_cmd;
mod sweep_cmd;
mod tidy;

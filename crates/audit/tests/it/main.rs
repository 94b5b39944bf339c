//! Every integration test of this crate in one binary (one link instead
//! of one per file: linking dominates the suite on a 2-core machine).
//! Each former test file is a module; test names are unchanged but for
//! the module prefix.

mod common;
mod export;
mod failover;
mod hostile;
mod lookup;
mod reading;
mod rules;

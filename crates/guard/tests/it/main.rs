//! Every integration test of this crate in one binary (one link instead
//! of one per file: linking dominates the suite on a 2-core machine).
//! Each former test file is a module; test names are unchanged but for
//! the module prefix.

mod access_log;
mod admin;
mod allocations;
mod common;
mod config;
mod deploy;
mod drain;
mod example;
mod hostile;
mod listeners;
mod policies;
mod proxy;
mod reload;
mod tls;

//! `stormbreak probe`: recovery verified path by path on a live system, by
//! a prober that can never add to a storm.
//!
//! The reports of the 2026-08-17 outage stress that each user path (reads,
//! API, sign-in, team sync, workflow definitions, runner start, token
//! issue) recovered at its own time. This crate probes such paths at **one
//! fixed total rate** that no answer can raise ([`schedule`]), honours
//! `Retry-After`, 429 and 503 by pausing the path and counting what it then
//! cannot see as unknown, never as up ([`timeline`]), opens a **new
//! connection per probe** by default so a load balancer refusing new flows
//! is seen ([`send`]), and reads each path's degradation and recovery with
//! the simulator's own definition (`stormbreak_sim::recovery`), so a live
//! run reads like `stormbreak replay`'s per-path table.
//!
//! A crate of its own rather than a part of `stormbreak-lab`: it is pointed
//! at staging and production systems, so it carries no test fleet, and the
//! lab is only its test bed (a dev-dependency).
//!
//! Layout: [`config`] (the TOML file, checked whole), [`schedule`] and
//! [`timeline`] (sans-IO: time is an argument), [`outcome`], [`send`] (one
//! probe on the wire), [`mod@run`] (the tokio driver), [`output`] (files and
//! the terminal table), [`metrics`] (`--listen`).

pub mod config;
pub mod expect;
pub mod metrics;
pub mod outcome;
pub mod output;
pub mod retry;
pub mod run;
pub mod schedule;
pub mod send;
pub mod timeline;

pub use config::{ConfigError, ProbeConfig};
pub use run::{ProbeRun, RunOptions, StopSignal, run};
pub use timeline::Verdict;

//! Helpers: scenarios from text, plans, a port check, and counts read
//! from a recording.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use stormbreak_lab::{LabOptions, LabPlan};
use stormbreak_sim::Scenario;
use stormbreak_sim::record::Cause;

pub fn scenario(text: &str) -> Scenario {
    Scenario::parse("test.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

pub fn plan(text: &str) -> LabPlan {
    LabPlan::new(&scenario(text), &LabOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// True when something accepts connections at `addr`.
pub fn listening(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Sum of a route series over intervals.
pub fn total(v: &[u64]) -> u64 {
    v.iter().sum()
}

/// Attempts of route 0 that failed with `cause`, over the run.
pub fn errors(rec: &stormbreak_sim::Recording, cause: Cause) -> u64 {
    errors_on(rec, 0, cause)
}

/// Attempts of route `route` (by position) that failed with `cause`.
pub fn errors_on(rec: &stormbreak_sim::Recording, route: usize, cause: Cause) -> u64 {
    let k = Cause::ALL.iter().position(|&c| c == cause).unwrap();
    rec.routes[route].errors.iter().map(|e| e[k]).sum()
}

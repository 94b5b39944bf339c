//! Helpers: scenarios from text, plans, and a port check.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use stormbreak_lab::{LabOptions, LabPlan};
use stormbreak_sim::Scenario;

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

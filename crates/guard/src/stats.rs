//! Counters of what the guard did, for tests and (later) metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals since start. Reads are relaxed snapshots.
#[derive(Debug, Default)]
pub struct Stats {
    pub(crate) requests: AtomicU64,
    pub(crate) attempts: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) shed: AtomicU64,
    pub(crate) rate_limited: AtomicU64,
    pub(crate) no_route: AtomicU64,
}

macro_rules! getter {
    ($($(#[$doc:meta])* $name:ident),*) => {
        impl Stats {
            $($(#[$doc])* pub fn $name(&self) -> u64 { self.$name.load(Ordering::Relaxed) })*
        }
    };
}

getter!(
    /// Requests received (every request, answered by the guard or forwarded).
    requests,
    /// Attempts sent upstream, first attempts and retries.
    attempts,
    /// Retries sent upstream.
    retries,
    /// Requests shed by an operator rule, by saturation or by a full queue.
    shed,
    /// Requests refused by a rate limit.
    rate_limited,
    /// Requests no route matched (answered 404).
    no_route
);

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

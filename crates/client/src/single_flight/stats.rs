//! [`FlightStats`], the counters every service of a layer shares, and the
//! atomics behind them.
//!
//! Invariant: the counters only grow; a snapshot reads each on its own
//! (relaxed), so it is not one instant across them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since the layer was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlightStats {
    /// Upstream calls started for a key (one per flight).
    pub flights: u64,
    /// Requests that joined a flight already in the air.
    pub coalesced: u64,
    /// Requests answered from the success cache.
    pub cache_hits: u64,
    /// Requests sent on their own because the key table was full.
    pub bypassed_table_full: u64,
    /// Requests sent on their own because they had no key.
    pub unkeyed: u64,
    /// Flights whose response body was over the cap: the waiters other
    /// than the first each sent their own request.
    pub too_large: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) flights: AtomicU64,
    pub(super) coalesced: AtomicU64,
    pub(super) cache_hits: AtomicU64,
    pub(super) bypassed_table_full: AtomicU64,
    pub(super) unkeyed: AtomicU64,
    pub(super) too_large: AtomicU64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> FlightStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FlightStats {
            flights: get(&self.flights),
            coalesced: get(&self.coalesced),
            cache_hits: get(&self.cache_hits),
            bypassed_table_full: get(&self.bypassed_table_full),
            unkeyed: get(&self.unkeyed),
            too_large: get(&self.too_large),
        }
    }
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

//! The key table: one slot per key in flight or cached, behind one `Mutex`
//! per `layer` call and typed on first use; keys carry their hash
//! (`Prehashed`), so the table never rehashes them.
//!
//! Invariant: at most `max_keys` slots (`SingleFlight::call` checks before
//! it inserts; landing only turns a flight's own slot into a cache entry).
//! Invariant: a flight's slot is removed only by that flight (slots are
//! compared by pointer), never a newer flight's for the same key.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::flight::{Buffered, Flight};
use super::key::RequestKey;
use super::service::FlightConfig;

pub(super) enum Slot<Key, B> {
    /// A flight in the air: some caller of it is alive; the last to go
    /// (or the one that lands it) removes the slot.
    InFlight(Arc<Flight<Key, B>>),
    /// Only ever a 2xx answer.
    Cached {
        until: Instant,
        response: Arc<Buffered>,
    },
}

impl<Key, B> Slot<Key, B> {
    pub(super) fn is_live(&self, now: Instant) -> bool {
        match self {
            Slot::InFlight(_) => true,
            Slot::Cached { until, .. } => now < *until,
        }
    }

    pub(super) fn is_flight(&self, flight: &Arc<Flight<Key, B>>) -> bool {
        matches!(self, Slot::InFlight(f) if Arc::ptr_eq(f, flight))
    }
}

pub(super) struct Table<Key, B> {
    pub(super) slots: HashMap<Prehashed<Key>, Slot<Key, B>, BuildPrehashed>,
}

/// A key with its hash, computed once per request: the table's hasher only
/// passes it through, so lookups, landing and removal never rehash it.
#[derive(Clone)]
pub(super) struct Prehashed<K> {
    pub(super) hash: u64,
    pub(super) key: K,
}

impl<K: PartialEq> PartialEq for Prehashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Prehashed<K> {}

impl<K> Hash for Prehashed<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

#[derive(Clone, Copy, Default)]
pub(super) struct BuildPrehashed;

impl BuildHasher for BuildPrehashed {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// Passes a [`Prehashed`] key's hash through.
pub(super) struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in, FNV-style.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The typed table behind [`FlightConfig::table`].
pub(super) type TableOf<Key, B> = Mutex<Table<Key, B>>;

/// The table for this key and body type, made on first use. `None` only
/// if one service is used with two request or response types (a service
/// whose inner service is generic over them): such requests are sent alone.
pub(super) fn table_of<Key, B>(config: &FlightConfig) -> Option<&TableOf<Key, B>>
where
    Key: Send + Sync + 'static,
    B: Send + 'static,
{
    config
        .table
        .get_or_init(|| {
            Box::new(Mutex::new(Table::<Key, B> {
                slots: HashMap::with_hasher(BuildPrehashed),
            }))
        })
        .downcast_ref::<TableOf<Key, B>>()
}

/// The table's hash of a key. A [`RequestKey`] carries one already (a
/// seeded hash of everything it compares), so only other keys are hashed.
pub(super) fn table_hash<Key: Hash + 'static>(
    hasher: &foldhash::fast::RandomState,
    key: &Key,
) -> u64 {
    match (key as &dyn std::any::Any).downcast_ref::<RequestKey>() {
        Some(key) => key.hash.0,
        None => hasher.hash_one(key),
    }
}

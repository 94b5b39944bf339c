//! [`SingleFlight`], the service: keys each request, then answers it from
//! the cache, seats it on the flight in the air, starts a flight, or sends
//! it alone (no key, or the table full); and `FlightConfig`, what the
//! service's clones share.
//!
//! Invariant: a key is looked up and its new flight put in the table under
//! one hold of the table's lock, so two callers of one key never start two
//! flights in the air at once.
//! Invariant: always ready; the inner service's readiness is awaited inside
//! each upstream call.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::Body;
use tokio::time::Instant;
use tower::Service;

use super::collect::fly;
use super::flight::{Call, Flight, FlightState, Seat};
use super::future::SingleFlightFuture;
use super::key::{DefaultKey, FlightKey};
use super::lock;
use super::member::Member;
use super::stats::{Counters, bump};
use super::table::{Prehashed, Slot, table_hash, table_of};
use crate::{BoxError, PrefixedBody};

/// The service [`SingleFlightLayer`] builds.
///
/// It is always ready: readiness of the inner service is awaited inside
/// each upstream call, so a waiter that joins a flight never reserves
/// capacity it will not use.
///
/// [`SingleFlightLayer`]: super::SingleFlightLayer
pub struct SingleFlight<S, K = DefaultKey> {
    pub(super) inner: S,
    pub(super) key: K,
    pub(super) config: Arc<FlightConfig>,
}

impl<S: Clone, K: Clone> Clone for SingleFlight<S, K> {
    fn clone(&self) -> Self {
        SingleFlight {
            inner: self.inner.clone(),
            key: self.key.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug> fmt::Debug for SingleFlight<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlight")
            .field("inner", &self.inner)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

pub(super) struct FlightConfig {
    pub(super) max_keys: usize,
    pub(super) max_body_bytes: usize,
    pub(super) ttl: Option<Duration>,
    pub(super) counters: Arc<Counters>,
    /// Hashes each request's key once, on arrival (seeded foldhash: the
    /// table is bounded by `max_keys`, so a crafted collision costs a
    /// bounded scan, and equality decides).
    pub(super) hasher: foldhash::fast::RandomState,
    /// The key table, typed by the first call (the layer does not know the
    /// key and body types); `Box<dyn Any>` keeps `FlightConfig` untyped.
    pub(super) table: OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

impl<S, K, ReqB, B> Service<http::Request<ReqB>> for SingleFlight<S, K>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    K: FlightKey<http::Request<ReqB>>,
    ReqB: Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<PrefixedBody<B>>;
    type Error = BoxError;
    type Future = SingleFlightFuture<S, ReqB, B, K::Key>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<ReqB>) -> Self::Future {
        let config = &self.config;
        let counters = &config.counters;
        let key = if config.max_keys == 0 {
            None
        } else {
            self.key.key(&request)
        };
        let table = key.as_ref().and_then(|_| table_of::<K::Key, B>(config));
        let (Some(key), Some(table)) = (key, table) else {
            bump(&counters.unkeyed);
            return SingleFlightFuture::alone(self.inner.clone(), request);
        };
        // Hashed once here; every later look-up of this key reuses it.
        let key = Prehashed {
            hash: table_hash(&config.hasher, &key),
            key,
        };
        let mut t = lock(table);
        if let Some(slot) = t.slots.get(&key) {
            match slot {
                Slot::Cached { until, response } if Instant::now() < *until => {
                    bump(&counters.cache_hits);
                    return SingleFlightFuture::cached(response.clone());
                }
                Slot::InFlight(flight) => {
                    bump(&counters.coalesced);
                    let flight = flight.clone();
                    let seat = {
                        let mut f = lock(&flight.state);
                        f.seats.push(Seat::Waiting(None));
                        f.members += 1;
                        f.seats.len()
                    };
                    drop(t);
                    let own = Box::new((self.inner.clone(), request));
                    return SingleFlightFuture::member(Member::new(flight, seat), Some(own));
                }
                // Expired: a new flight takes the slot.
                Slot::Cached { .. } => {}
            }
        } else if t.slots.len() >= config.max_keys {
            // Full: drop what has expired before refusing.
            let now = Instant::now();
            t.slots.retain(|_, slot| slot.is_live(now));
            if t.slots.len() >= config.max_keys {
                bump(&counters.bypassed_table_full);
                drop(t);
                return SingleFlightFuture::alone(self.inner.clone(), request);
            }
        }
        bump(&counters.flights);
        let call: Call<B> = Box::pin(fly(self.inner.clone(), request, config.max_body_bytes));
        let flight = Arc::new(Flight {
            config: config.clone(),
            key: key.clone(),
            state: Mutex::new(FlightState {
                call: Some(call),
                answer: None,
                lead: None,
                seats: Vec::new(),
                members: 1,
            }),
        });
        t.slots.insert(key, Slot::InFlight(flight.clone()));
        drop(t);
        SingleFlightFuture::member(Member::new(flight, 0), None)
    }
}

//! Single-flight: concurrent identical requests share one upstream call.
//!
//! The second storm of 2026-08-17 was an editor whose every caller
//! refreshed the same token on its own. Behind [`SingleFlightLayer`] the
//! callers that ask for the same thing while a call is in flight wait for
//! that call and share its result, errors included.
//!
//! One file per job, as in tower's `retry/`:
//!
//! * `layer.rs`: [`SingleFlightLayer`] and its settings.
//! * `service.rs`: [`SingleFlight`], which keys a request and joins,
//!   starts or bypasses a flight.
//! * `key.rs`: [`FlightKey`], [`DefaultKey`], [`RequestKey`] and the
//!   hashing behind them.
//! * `table.rs`: the bounded table of flights and cached answers.
//! * `flight.rs`: one flight: its call, its callers' wakers, its answer
//!   ([`SharedError`] for a failure).
//! * `collect.rs`: the upstream call, its response read up to the cap.
//! * `member.rs`: one caller's share of a flight.
//! * `future.rs`: [`SingleFlightFuture`].
//! * `stats.rs`: [`FlightStats`].

use std::sync::{Mutex, PoisonError};

mod collect;
mod flight;
mod future;
mod key;
mod layer;
mod member;
mod service;
mod stats;
mod table;

pub use flight::SharedError;
pub use future::SingleFlightFuture;
pub use key::{DefaultKey, FlightKey, RequestKey};
pub use layer::SingleFlightLayer;
pub use service::SingleFlight;
pub use stats::FlightStats;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

//! Workspace-level tests that need the simulator (`stormbreak-sim`) beside
//! the guard (`stormbreak-guard`) or the client's layers
//! (`stormbreak-client`) live in `tests/`; this library holds
//! what they share: the synthetic request of a trace, the draw of its
//! criticality class, the answer a refusal gets, the queue of timed trace
//! events and the paused-clock runtime the guard's side runs on.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::Rng;
use stormbreak_policy::Nanos;
use stormbreak_policy::shed::Criticality;

/// One request of a limit or queue trace.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// When it arrives.
    pub at: Nanos,
    /// Its criticality class.
    pub class: Criticality,
    /// How long the backend takes to answer it once admitted.
    pub latency: Nanos,
    /// The backend's answer.
    pub status: u16,
}

/// A refusal's answer as a client sees it: the status and `Retry-After`.
pub type Answer = (u16, Option<Nanos>);

/// A criticality class, mostly critical as production traffic is, every
/// class often enough to meet its shedding threshold: 20 % sheddable, 10 %
/// sheddable-plus, 10 % critical-plus, the rest critical.
pub fn draw_class(rng: &mut impl Rng) -> Criticality {
    match rng.random_range(0..10) {
        0 | 1 => Criticality::Sheddable,
        2 => Criticality::SheddablePlus,
        3 => Criticality::CriticalPlus,
        _ => Criticality::Critical,
    }
}

/// Timed trace events, popped in (time, kind, request) order: at one
/// instant a smaller kind goes first, then the lower request index.
pub type Events = BinaryHeap<Reverse<(Nanos, u8, usize)>>;

/// Every request's arrival as an event of kind `kind`, request `i` at
/// `times[i]`.
pub fn arrivals(times: impl IntoIterator<Item = Nanos>, kind: u8) -> Events {
    times
        .into_iter()
        .enumerate()
        .map(|(i, at)| Reverse((at, kind, i)))
        .collect()
}

/// A current-thread runtime on tokio's paused clock, where the guard's
/// side of a trace runs in virtual time.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

//! An LB node as a `stormbreak guard`: the simulator's node holds a
//! **flow** for an attempt's whole downstream life and refuses a new one
//! at `flows_per_node` (`engine/lb.rs`). The guard expresses that as its
//! route's concurrency limit, `fixed` at `flows_per_node`, with no queue
//! and shedding by class off (`guard_doc::NO_SHEDDING`): a request is admitted while fewer than that
//! many are in flight through the node (held until the next hop answers),
//! else answered at once with [`REFUSAL_STATUS`] and
//! `X-Stormbreak-Refused: limit`.
//!
//! Not the listener's `max_connections`: that counts connections, idle
//! keep-alive ones included, where a flow is a request in flight; and
//! its refusal (a reset) could not be told from a paused node's.

use std::net::SocketAddr;

use crate::guard_doc::GuardDoc;
use crate::plan::LbPlan;
use crate::pool::{LISTENER, ROUTE};

/// The status of a node's own refusal at its flow cap. No other part of
/// an LB's route answers 429 with `X-Stormbreak-Refused: limit` (sidecars
/// and apps refuse with 503), so the client tells the node's refusal from
/// a refusal further down that the node passed on; the lab then hands it
/// to the client's classifier as the refused connection the simulator's
/// callers see (`flows_exhausted`).
pub const REFUSAL_STATUS: u16 = 429;

/// The guard config of one node of `lb` forwarding to `next` (the next
/// hop's pods or instances; the guard's P2C least-request picks one).
///
/// With a `ramp` at the LB, each node has a listener per site too
/// (`guard_doc::site_listener`), which the guard's staged restore ramps in
/// the ramp's order, answering its `status` to what it has not admitted;
/// a client with that site sends to it.
pub fn doc(lb: &LbPlan, next: &[SocketAddr]) -> GuardDoc {
    let doc =
        GuardDoc::new(LISTENER, ROUTE, next).fixed_limit(lb.flows_per_node, None, REFUSAL_STATUS);
    match &lb.ramp {
        Some(r) => doc.sites(&r.sites, r.status),
        None => doc,
    }
}

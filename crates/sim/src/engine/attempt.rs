//! Attempts: every call between two hops, from creation to its one answer.
//!
//! A caller (a client population or a gateway) creates an attempt at a
//! route's hop `h`; the component there either answers it (a service) or
//! holds a resource and creates a child at hop `h + 1` (an LB node holds a
//! flow, a gateway first calls its dependency route). Answers travel back up
//! the parent chain, releasing what each hop held.
//!
//! Invariant (the conservation law, checked by [`Engine::audit`]): every
//! attempt created is answered to its caller exactly once — by its own
//! result or by its caller's timeout — or orphaned once when its parent
//! ends first; it leaves the slab exactly once; and whatever it holds (a
//! flow, a sidecar slot, a worker, a queue place) is given back when it
//! leaves.

use std::collections::VecDeque;

use stormbreak_policy::Nanos;
use stormbreak_policy::shed::Criticality;

use super::Engine;
use super::caller::CallState;
use super::conn::Conn;
use super::deadline::Link;
use super::ids::{Comp, NodeId, PodKey, RouteId, SiteId};
use crate::record::Cause;
use crate::slab::{Key, Slab};

/// Who waits for an attempt's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parent {
    /// Nobody any more (its caller timed out, or its parent ended first).
    Detached,
    /// A logical request of a client population.
    Client(Key),
    /// The attempt one hop up.
    Attempt(Key),
}

/// Where an attempt is in its component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    New,
    /// Waiting for a sidecar slot (holds a place in the sidecar queue).
    SidecarQueued,
    /// Waiting in a gateway instance's admission queue for a slot of its
    /// limit (holds a place in that queue).
    GatewayQueued,
    /// Holds a sidecar slot (if the service has a sidecar) and waits for a worker.
    AppQueued,
    /// Holds a sidecar slot (if any) and a worker.
    InService,
    /// An LB or gateway waiting for its child at the next hop.
    Forwarded,
    /// A gateway waiting for its dependency call.
    DependencyWait,
    /// A gateway pausing before it retries the dependency call.
    DependencyBackoff,
    /// A gateway pausing before it retries the forwarded call.
    Backoff,
    /// At a stalled component, holding nothing, never answered until the
    /// stall ends.
    Stalled,
}

/// The resource an attempt holds in its component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    Nothing,
    /// A flow on an LB node, for the child's whole life.
    Flow(NodeId),
    /// A place on a pod (which place is told by the phase).
    Pod(PodKey),
    /// A slot of a gateway instance's concurrency limit, for the whole
    /// request.
    Slot(super::admission::Slot),
    /// A place in a gateway instance's admission queue.
    Queued(u32),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    route: RouteId,
    hop: u8,
    // Visible: the component the attempt is at moves it from phase to
    // phase with its own counters (a pod's queued and busy, a gateway's
    // waiters), which count attempts by phase.
    pub(crate) phase: Phase,
    comp: Comp,
    parent: Parent,
    started: Nanos,
    // Visible: the resource belongs to the component that holds it (a
    // flow, a place on a pod, a slot), which sets and clears it with its
    // own counters.
    pub(crate) held: Held,
    // Visible: the LB or gateway that forwards sets it, and takes it when
    // a reset orphans the child.
    pub(crate) child: Option<Key>,
    /// Its caller has stopped waiting (the work may still be done: waste).
    abandoned: bool,
    /// Site of the client population behind the attempt (0 when none).
    site: SiteId,
    /// Criticality class of the client population behind it.
    class: Criticality,
    /// The client connection it rides to an LB (with `connections`).
    // Visible: the `conn` module's; an LB resetting its flows drops it
    // with the node's connections.
    pub(crate) conn: Conn,
    /// Its place on its caller's per-try timeout list, while armed: it
    /// leaves the list when it leaves, so an attempt answered in time
    /// costs no timeout event.
    // Visible: `deadline` threads its per-try timeout lists through it, an
    // intrusive list that costs no allocation an attempt.
    pub(crate) link: Link,
}

impl Attempt {
    #[inline]
    pub(crate) fn route(&self) -> RouteId {
        self.route
    }

    #[inline]
    pub(crate) fn hop(&self) -> u8 {
        self.hop
    }

    #[inline]
    pub(crate) fn comp(&self) -> Comp {
        self.comp
    }

    #[inline]
    pub(crate) fn parent(&self) -> Parent {
        self.parent
    }

    #[inline]
    pub(crate) fn started(&self) -> Nanos {
        self.started
    }

    #[inline]
    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned
    }

    #[inline]
    pub(crate) fn site(&self) -> SiteId {
        self.site
    }

    #[inline]
    pub(crate) fn class(&self) -> Criticality {
        self.class
    }
}

/// An entry of a waiting line: the attempt it stands for.
pub(crate) trait Waiting: Copy {
    fn key(&self) -> Key;
}

impl Waiting for Key {
    #[inline]
    fn key(&self) -> Key {
        *self
    }
}

/// What an attempt produced, as its caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Res {
    /// Answered successfully.
    Ok,
    /// Failed; a shed response may advertise `Retry-After`.
    Err(Cause, Option<Nanos>),
}

impl Res {
    pub(crate) fn fail(cause: Cause) -> Res {
        Res::Err(cause, None)
    }

    /// Whether `stormbreak guard` would see this answer as a server error
    /// (a 5xx, a timeout, a refused or reset connection): everything but a
    /// success and a 403 or 429 shed. The policies that watch outcomes
    /// (a limiter's drops, a staged restore's error guard) read it the way
    /// the guard does.
    pub fn is_server_error(self) -> bool {
        !matches!(self, Res::Ok | Res::Err(Cause::Shed403 | Cause::Shed429, _))
    }
}

/// Work in flight: attempts and logical requests, with the ledger the
/// conservation law is checked against.
#[derive(Debug)]
pub(crate) struct Flight {
    attempts: Slab<Attempt>,
    requests: Slab<super::population::Request>,
    /// Gateway attempts' retry state, by the attempt's slab index: a side
    /// table, so that the attempt every hop touches stays small (the
    /// state is 40 bytes, and only gateway attempts have one).
    ///
    /// Invariant: `calls[k.index]` is the call of attempt `k` from the
    /// moment its gateway admits it ([`Flight::start_call`]) until the
    /// attempt ends; otherwise it is whatever the slot's last gateway
    /// attempt left, and nothing reads it.
    calls: Vec<CallState>,
    /// Attempts ever created.
    created: u64,
    /// Attempts whose caller heard from them or that were orphaned.
    released: u64,
    /// Most attempts in flight at once.
    peak: usize,
}

impl Flight {
    pub(crate) fn new() -> Self {
        Flight {
            attempts: Slab::new(),
            requests: Slab::new(),
            calls: Vec::new(),
            created: 0,
            released: 0,
            peak: 0,
        }
    }

    /// The attempt of key `k`, if it is still in flight.
    #[inline]
    pub(crate) fn attempt(&self, k: Key) -> Option<&Attempt> {
        self.attempts.get(k)
    }

    #[inline]
    pub(crate) fn attempt_mut(&mut self, k: Key) -> Option<&mut Attempt> {
        self.attempts.get_mut(k)
    }

    /// Every attempt in flight, in slab order.
    pub(crate) fn for_each_attempt(&self, f: impl FnMut(Key, &Attempt)) {
        self.attempts.for_each(f);
    }

    /// The attempts' slab, for the per-try timeout lists threaded through
    /// their `link`s (`deadline`): a borrowed view, so that the lists walk
    /// and relink slots by index without a lookup a step.
    #[inline]
    pub(crate) fn slab(&self) -> &Slab<Attempt> {
        &self.attempts
    }

    #[inline]
    pub(crate) fn slab_mut(&mut self) -> &mut Slab<Attempt> {
        &mut self.attempts
    }

    /// Attempts in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.attempts.len()
    }

    #[inline]
    pub(crate) fn request(&self, k: Key) -> Option<&super::population::Request> {
        self.requests.get(k)
    }

    #[inline]
    pub(crate) fn request_mut(&mut self, k: Key) -> Option<&mut super::population::Request> {
        self.requests.get_mut(k)
    }

    pub(crate) fn for_each_request(&self, f: impl FnMut(Key, &super::population::Request)) {
        self.requests.for_each(f);
    }

    /// A logical request starts (its attempts are counted as they are
    /// created).
    #[inline]
    pub(crate) fn insert_request(&mut self, r: super::population::Request) -> Key {
        self.requests.insert(r)
    }

    #[inline]
    pub(crate) fn remove_request(&mut self, k: Key) -> Option<super::population::Request> {
        self.requests.remove(k)
    }

    /// The ledger: attempts ever created, released, and most in flight at
    /// once.
    pub(crate) fn created(&self) -> u64 {
        self.created
    }

    pub(crate) fn released(&self) -> u64 {
        self.released
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    #[inline]
    pub(crate) fn get(&self, k: Key) -> &Attempt {
        self.attempts.get(k).expect("a live attempt's key")
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, k: Key) -> &mut Attempt {
        self.attempts.get_mut(k).expect("a live attempt's key")
    }

    /// Gives gateway attempt `k` its call's retry state. The table grows
    /// with the slab, so it is as long as the most attempts ever in flight
    /// at once (bounded by `Limits::attempts_in_flight`).
    #[inline]
    pub(crate) fn start_call(&mut self, k: Key, call: CallState) {
        let i = k.index as usize;
        if i >= self.calls.len() {
            self.calls.resize_with(i + 1, CallState::default);
        }
        self.calls[i] = call;
    }

    /// A live gateway attempt and its call's retry state.
    #[inline]
    pub(crate) fn with_call(&mut self, k: Key) -> (&mut Attempt, &mut CallState) {
        let a = self.attempts.get_mut(k).expect("a live attempt's key");
        (a, &mut self.calls[k.index as usize])
    }

    /// Puts `waiter` at the back of a waiting line (a sidecar's queue, a
    /// gateway instance's admission queue) where `live` attempts wait in
    /// `phase`. An attempt that leaves the line other than at its front (a
    /// gateway waiter's timeout, a reset) leaves its key behind until the
    /// key reaches the front; a line whose slots never come back would pile
    /// such keys up, so they are dropped once the line holds twice the live
    /// ones (at least 16): amortised O(1) a push, and the line never holds
    /// more than twice its live waiters plus 16.
    pub(crate) fn enqueue<W: Waiting>(
        &self,
        line: &mut VecDeque<W>,
        live: usize,
        phase: Phase,
        waiter: W,
    ) {
        if line.len() >= 2 * live.max(8) {
            line.retain(|w| self.attempts.get(w.key()).is_some_and(|a| a.phase == phase));
        }
        line.push_back(waiter);
    }

    /// Detaches an attempt whose caller stops waiting without an answer
    /// (its parent ended first). Returns whether it was attached.
    pub(crate) fn orphan(&mut self, k: Key) -> bool {
        match self.attempts.get_mut(k) {
            Some(a) if a.parent != Parent::Detached => {
                a.parent = Parent::Detached;
                a.abandoned = true;
                self.released += 1;
                true
            }
            _ => false,
        }
    }
}

impl Engine {
    pub(crate) fn new_attempt(
        &mut self,
        route: RouteId,
        hop: u8,
        parent: Parent,
        (site, class): (SiteId, Criticality),
    ) -> Key {
        let comp = self.routes[route.ix()].hop(hop);
        if hop == 0 {
            self.rec.route_acc(route).attempts += 1;
        }
        self.flight.created += 1;
        let k = self.flight.attempts.insert(Attempt {
            route,
            hop,
            phase: Phase::New,
            comp,
            parent,
            started: self.now,
            held: Held::Nothing,
            child: None,
            abandoned: false,
            site,
            class,
            conn: Conn::None,
            link: Link::NONE,
        });
        let live = self.flight.attempts.len();
        self.flight.peak = self.flight.peak.max(live);
        if live > self.limits.attempts_in_flight as usize {
            let err = super::RunError::InFlight {
                limit: "attempts_in_flight",
                at: self.now,
                component: format!("route {:?}", self.rec.route_name(route)),
                what: format!(
                    "more than {} attempts in flight in the run",
                    self.limits.attempts_in_flight
                ),
            };
            self.stop(err);
        }
        k
    }

    /// An attempt arrives at its component.
    pub(crate) fn enter(&mut self, att: Key) {
        let a = *self.flight.get(att);
        let ci = self.series_of(a.comp);
        self.rec.arrive(ci, self.now);
        if self.stalls.any()
            && let Some(mode) = self.stalls.mode(ci)
        {
            return self.stalled_enter(att, ci, mode);
        }
        match a.comp {
            Comp::Lb(l) => self.lb_enter(att, &a, l),
            Comp::Gateway(g) => self.gateway_enter(att, g),
            Comp::Service(s) => self.service_admit(att, s),
        }
    }

    /// Creates the child attempt at the next hop and sends it, with the
    /// caller's per-try timeout when it has one.
    pub(crate) fn forward(&mut self, att: Key, timeout: Option<super::deadline::TimeoutList>) {
        let a = self.flight.get_mut(att);
        a.phase = Phase::Forwarded;
        let (route, hop, origin) = (a.route, a.hop + 1, (a.site, a.class));
        let child = self.new_attempt(route, hop, Parent::Attempt(att), origin);
        self.flight.get_mut(att).child = Some(child);
        if let Some(list) = timeout {
            self.arm_timeout(list, child);
        }
        self.enter(child);
    }

    /// Takes attempt `att` out of the slab, cancelling its timeout: once
    /// it has left, the timeout could only find it gone.
    #[inline]
    pub(crate) fn remove_attempt(&mut self, att: Key) -> Attempt {
        let a = self.flight.attempts.remove(att).expect("a live attempt");
        self.disarm_timeout(att.index, a.link);
        a
    }

    /// The component refuses the attempt at once.
    pub(crate) fn reject(&mut self, att: Key, cause: Cause) {
        let comp = self.flight.get(att).comp;
        self.rec.reject(self.series_of(comp));
        self.complete(att, Res::fail(cause));
    }

    /// The attempt is answered: release what its hop holds, tell the caller.
    pub(crate) fn complete(&mut self, att: Key, res: Res) {
        let a = self.remove_attempt(att);
        let ci = self.series_of(a.comp);
        self.rec.depart(ci, self.now, self.now - a.started);
        match (a.comp, a.held) {
            (Comp::Lb(l), Held::Flow(node)) => self.lb_release(l, node, &a, !res.is_server_error()),
            (Comp::Gateway(g), Held::Slot(slot)) => self.gateway_release(g, slot, &a, res),
            (Comp::Gateway(g), Held::Queued(instance)) => self.gateway_leave_queue(g, instance),
            _ => {}
        }
        if let (Comp::Lb(l), conn @ (Conn::Pooled { .. } | Conn::Oneshot { .. })) = (a.comp, a.conn)
        {
            self.conn_release(l, conn);
        }
        self.deliver(a, res);
    }

    /// Tells the attempt's caller, if it still waits.
    pub(crate) fn deliver(&mut self, a: Attempt, res: Res) {
        if a.parent == Parent::Detached {
            return;
        }
        self.flight.released += 1;
        if a.hop == 0 {
            let acc = &mut self.rec.route_acc(a.route);
            match res {
                Res::Ok => {
                    acc.successes += 1;
                    acc.record_latency(self.now - a.started);
                }
                Res::Err(c, _) => acc.errors[c as usize] += 1,
            }
        }
        match a.parent {
            Parent::Detached => {}
            Parent::Client(req) => self.client_outcome(req, res),
            Parent::Attempt(p) => self.child_outcome(p, res),
        }
    }

    /// A hop's child answered.
    fn child_outcome(&mut self, p: Key, res: Res) {
        let pa = self.flight.get_mut(p);
        pa.child = None;
        match pa.comp {
            Comp::Lb(_) => self.complete(p, res),
            Comp::Gateway(g) => self.gateway_child_outcome(p, g, res),
            Comp::Service(_) => unreachable!("a service has no child attempts"),
        }
    }

    /// A caller's per-try timeout: detach the attempt (it keeps running and
    /// keeps its resources) and tell the caller it timed out.
    pub(crate) fn on_timeout(&mut self, att: Key) {
        let Some(a) = self.flight.attempts.get_mut(att) else {
            return;
        };
        let parent = a.parent;
        if parent == Parent::Detached {
            return;
        }
        a.parent = Parent::Detached;
        a.abandoned = true;
        let snapshot = Attempt { parent, ..*a };
        if a.hop == 0 {
            self.conn_disown(snapshot.conn);
        }
        if let Parent::Attempt(p) = parent {
            // The parent no longer waits for this child.
            self.flight.get_mut(p).child = None;
        }
        self.deliver(snapshot, Res::fail(Cause::Timeout));
        if snapshot.phase == Phase::Stalled {
            self.drop_hung(att);
        }
    }
}

#[cfg(test)]
impl Attempt {
    /// A detached attempt at a service, in `phase`, created at `started`,
    /// for unit tests of the tables attempts sit in.
    pub(crate) fn for_test(phase: Phase, started: Nanos) -> Attempt {
        use crate::engine::ids::ServiceId;
        Attempt {
            route: RouteId::new(0),
            hop: 0,
            phase,
            comp: Comp::Service(ServiceId::new(0)),
            parent: Parent::Detached,
            started,
            held: Held::Nothing,
            child: None,
            abandoned: false,
            site: SiteId::new(0),
            class: Criticality::default(),
            conn: Conn::None,
            link: Link::NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(flight: &mut Flight) -> Key {
        flight
            .attempts
            .insert(Attempt::for_test(Phase::SidecarQueued, Nanos::ZERO))
    }

    #[test]
    fn a_waiting_line_drops_the_keys_of_waiters_gone_and_keeps_its_order() {
        let mut flight = Flight::new();
        let mut line = VecDeque::new();
        // One live waiter stays at the front while 100 others arrive and
        // time out (leave the slab), as at a pod whose slots never free.
        let first = waiting(&mut flight);
        flight.enqueue(&mut line, 0, Phase::SidecarQueued, first);
        let mut live = vec![first];
        for i in 0..100 {
            let k = waiting(&mut flight);
            flight.enqueue(&mut line, live.len(), Phase::SidecarQueued, k);
            if i % 10 == 0 {
                live.push(k);
            } else {
                flight.attempts.remove(k);
            }
            assert!(
                line.len() <= 2 * live.len() + 16,
                "{} keys for {} live waiters",
                line.len(),
                live.len()
            );
        }
        let kept: Vec<Key> = line
            .iter()
            .copied()
            .filter(|k| flight.attempts.get(*k).is_some())
            .collect();
        assert_eq!(kept, live, "live waiters kept, in arrival order");
        assert!(line.len() < 101, "stale keys were dropped: {}", line.len());
    }

    #[test]
    fn a_waiting_line_keeps_only_attempts_still_in_its_phase() {
        let mut flight = Flight::new();
        let mut line = VecDeque::new();
        let keys: Vec<Key> = (0..16).map(|_| waiting(&mut flight)).collect();
        for &k in &keys {
            flight.enqueue(&mut line, 16, Phase::SidecarQueued, k);
        }
        // Half of them were admitted meanwhile: their phase moved on.
        for &k in &keys[..8] {
            flight.get_mut(k).phase = Phase::InService;
        }
        let next = waiting(&mut flight);
        flight.enqueue(&mut line, 8, Phase::SidecarQueued, next);
        let want: Vec<Key> = keys[8..].iter().copied().chain([next]).collect();
        assert_eq!(line.iter().copied().collect::<Vec<_>>(), want);
    }
}

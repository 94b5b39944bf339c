//! Client connections at an LB: what an HAProxy `maxconn` counts.
//!
//! An LB with `connections` holds *connections*, not requests. A client
//! population with `connections` is `instances` separate processes, each
//! keeping at most one keep-alive connection to its route's first LB:
//!
//! * a request reuses its process's idle connection (the node it is on was
//!   chosen when it was opened: balancing happens at connect time), or
//!   opens one on the next running node — refused when the node holds
//!   `maxconn` connections already, idle ones included;
//! * an answer, whatever its status, returns the connection to idle; it
//!   closes after the sooner of the client's `idle_timeout` and the LB's
//!   `keepalive_timeout`;
//! * a client that times out closes its connection (HTTP/1.1 cannot cancel
//!   a request in flight); the LB keeps the slot until the request it was
//!   forwarding ends, as HAProxy keeps a stream until the server answers
//!   (without `option abortonclose`); the retry opens a new connection;
//! * a second request of a process whose connection is busy opens a
//!   one-shot connection, closed when it ends (HTTP/1.1, no pipelining);
//! * a node pause resets its connections; a process whose connection was
//!   reset or refused waits its `reconnect_backoff` (if any) before it
//!   connects again, and its requests fail at once meanwhile.
//!
//! Requests not from such a population (a gateway's calls, a population
//! without `connections`, a spill to another LB) take a one-shot
//! connection each.
//!
//! Invariant (audited): a node's `conns` equals the processes whose
//! connection is on it, plus the one-shot connections and the closing
//! (disowned) pooled connections of attempts there. Idle expiry is lazy
//! but exact wherever it is observed: every capacity check and every
//! recording tick first closes what expired before now.

use std::collections::VecDeque;

use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::retry::Backoff;

use super::Engine;
use super::attempt::{Attempt, Parent};
use super::ids::{LbId, NodeId, PopId};
use crate::record::Cause;
use crate::slab::Key;

/// No node: the process has no connection.
const NONE: u32 = u32::MAX;

/// The connection an attempt rides to an LB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Conn {
    /// None (the LB has no connection model, or the attempt holds none).
    #[default]
    None,
    /// A process's keep-alive connection, identified by its generation.
    Pooled {
        pop: PopId,
        inst: u32,
        gen_: u32,
        node: NodeId,
    },
    /// A connection for this attempt alone.
    Oneshot { node: NodeId },
}

/// One client process of a population.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Instance {
    /// The node its connection is on, or [`NONE`].
    node: u32,
    /// Tells this connection from the process's earlier ones.
    generation: u32,
    busy: bool,
    idle_since: Nanos,
    /// In reconnect backoff until then.
    retry_at: Nanos,
    failures: u32,
    last_pause: Nanos,
}

/// A population's processes and their connections to one LB.
#[derive(Debug)]
pub(crate) struct Pool {
    lb: LbId,
    instances: Vec<Instance>,
    /// The sooner of the client's idle timeout and the LB's keep-alive.
    idle_timeout: Nanos,
    backoff: Option<Backoff>,
}

impl Pool {
    pub(crate) fn new(
        lb: LbId,
        instances: u32,
        idle_timeout: Nanos,
        backoff: Option<Backoff>,
    ) -> Pool {
        Pool {
            lb,
            instances: vec![
                Instance {
                    node: NONE,
                    generation: 0,
                    busy: false,
                    idle_since: Nanos::ZERO,
                    retry_at: Nanos::ZERO,
                    failures: 0,
                    last_pause: Nanos::ZERO,
                };
                instances as usize
            ],
            idle_timeout,
            backoff,
        }
    }

    /// The LB its processes connect to.
    #[inline]
    pub(crate) fn lb(&self) -> LbId {
        self.lb
    }

    pub(crate) fn len(&self) -> u32 {
        self.instances.len() as u32
    }

    /// The process is in reconnect backoff: gRPC fails its calls at once
    /// while the channel is in TRANSIENT_FAILURE, and the LB never sees
    /// them.
    pub(crate) fn in_backoff(&self, inst: u32, now: Nanos) -> bool {
        now < self.instances[inst as usize].retry_at
    }

    /// Enters reconnect backoff after a refused or reset connection.
    fn back_off(&mut self, inst: u32, now: Nanos, rng: &mut Pcg64Mcg) {
        let Some(b) = &self.backoff else { return };
        let i = &mut self.instances[inst as usize];
        let pause = b.pause(i.failures, i.last_pause, rng);
        i.last_pause = pause;
        i.failures = i.failures.saturating_add(1);
        i.retry_at = now.saturating_add(pause);
    }
}

/// An idle connection waiting to expire.
#[derive(Debug, Clone, Copy)]
struct Idle {
    inst: u32,
    generation: u32,
    since: Nanos,
}

/// An LB's connection model: its keep-alive, and the idle connections of
/// each pooled population on each node, oldest first.
#[derive(Debug)]
pub(crate) struct LbConns {
    /// Per (node, population): idle connections in the order they became
    /// idle. One idle timeout per population, so each list is also in
    /// expiry order.
    idle: Vec<VecDeque<Idle>>,
    pops: usize,
}

impl LbConns {
    /// Forgets node `n`'s idle connections (its node reset them).
    pub(crate) fn clear_node(&mut self, n: usize) {
        for p in 0..self.pops {
            self.idle[n * self.pops + p].clear();
        }
    }

    pub(crate) fn new(nodes: usize, pops: usize) -> Self {
        LbConns {
            idle: vec![VecDeque::new(); nodes * pops],
            pops,
        }
    }
}

impl Engine {
    /// Closes the idle connections on `node` of LB `l` that expired by now.
    fn expire_idle(&mut self, l: LbId, node: NodeId) {
        let now = self.now;
        let lb = &mut self.lbs[l];
        let Some(conns) = lb.conns_mut() else {
            return;
        };
        let mut closed = 0;
        for (p, pop) in self.pops.iter_mut().enumerate() {
            let Some(pool) = pop.pool_mut().filter(|pool| pool.lb == l) else {
                continue;
            };
            let fifo = &mut conns.idle[node.ix() * conns.pops + p];
            while let Some(e) = fifo.front().copied() {
                if e.since.saturating_add(pool.idle_timeout) > now {
                    break;
                }
                fifo.pop_front();
                let i = &mut pool.instances[e.inst as usize];
                if i.generation == e.generation
                    && i.node == node.0
                    && !i.busy
                    && i.idle_since == e.since
                {
                    i.node = NONE;
                    closed += 1;
                }
            }
        }
        lb.close_conns(node, closed);
    }

    /// Expires idle connections everywhere (before a recording tick).
    pub(crate) fn expire_all_idle(&mut self) {
        for l in 0..self.lbs.len() {
            let lb = &self.lbs[LbId::new(l)];
            if !lb.has_conns() {
                continue;
            }
            for n in 0..lb.node_count() {
                self.expire_idle(LbId::new(l), NodeId::new(n));
            }
        }
    }

    /// Refuses an attempt at the LB before it has a connection.
    fn refuse_connect(&mut self, att: Key, l: LbId, cause: Cause) {
        self.lbs[l].count_refused();
        self.reject(att, cause);
    }

    /// Opens a one-shot connection on the next running node.
    fn connect_oneshot(&mut self, att: Key, l: LbId) -> Option<(NodeId, Conn)> {
        let Some(node) = self.lbs[l].pick() else {
            self.refuse_connect(att, l, Cause::Unavailable);
            return None;
        };
        self.expire_idle(l, node);
        if !self.lbs[l].try_open_conn(node) {
            self.refuse_connect(att, l, Cause::FlowsExhausted);
            return None;
        }
        Some((node, Conn::Oneshot { node }))
    }

    /// The attempt gets a connection to LB `l` — its process's idle one, a
    /// new one, or a refusal (answered here, returning `None`).
    pub(crate) fn connect(&mut self, att: Key, a: &Attempt, l: LbId) -> Option<NodeId> {
        let pooled = match a.parent() {
            Parent::Client(req) if a.hop() == 0 => {
                let r = self.flight.request(req).expect("a live request");
                let pop = r.pop();
                self.pops[pop.ix()]
                    .pool()
                    .filter(|p| p.lb == l)
                    .map(|_| (pop, r.inst()))
            }
            _ => None,
        };
        let (node, conn) = match pooled {
            None => self.connect_oneshot(att, l)?,
            Some((pop, inst)) => self.connect_pooled(att, l, pop, inst)?,
        };
        self.flight.get_mut(att).conn = conn;
        Some(node)
    }

    fn connect_pooled(
        &mut self,
        att: Key,
        l: LbId,
        pop: PopId,
        inst: u32,
    ) -> Option<(NodeId, Conn)> {
        let now = self.now;
        let pool = self.pops[pop.ix()].pool_mut().expect("pooled");
        let timeout = pool.idle_timeout;
        let i = &mut pool.instances[inst as usize];
        if i.node != NONE && !i.busy && i.idle_since.saturating_add(timeout) <= now {
            // Its idle connection expired unobserved: it is closed.
            self.lbs[l].close_conns(NodeId(i.node), 1);
            i.node = NONE;
        }
        if i.node != NONE {
            if i.busy {
                return self.connect_oneshot(att, l);
            }
            i.busy = true;
            let node = NodeId(i.node);
            let conn = Conn::Pooled {
                pop,
                inst,
                gen_: i.generation,
                node,
            };
            return Some((node, conn));
        }
        let Some(node) = self.lbs[l].pick() else {
            let (pool, rng) = self.pops[pop.ix()].pool_and_rng();
            pool.expect("pooled").back_off(inst, now, rng);
            self.refuse_connect(att, l, Cause::Unavailable);
            return None;
        };
        self.expire_idle(l, node);
        if !self.lbs[l].try_open_conn(node) {
            let (pool, rng) = self.pops[pop.ix()].pool_and_rng();
            pool.expect("pooled").back_off(inst, now, rng);
            self.refuse_connect(att, l, Cause::FlowsExhausted);
            return None;
        }
        let i = &mut self.pops[pop.ix()].pool_mut().expect("pooled").instances[inst as usize];
        i.node = node.0;
        i.generation = i.generation.wrapping_add(1);
        i.busy = true;
        i.failures = 0;
        i.last_pause = Nanos::ZERO;
        let conn = Conn::Pooled {
            pop,
            inst,
            gen_: i.generation,
            node,
        };
        Some((node, conn))
    }

    /// The attempt riding `conn` has ended: its connection goes idle (if
    /// its process still owns it) or closes.
    pub(crate) fn conn_release(&mut self, l: LbId, conn: Conn) {
        let now = self.now;
        match conn {
            Conn::None => {}
            Conn::Oneshot { node } => self.lbs[l].close_conns(node, 1),
            Conn::Pooled {
                pop,
                inst,
                gen_,
                node,
            } => {
                let pool = self.pops[pop.ix()].pool_mut().expect("pooled");
                let i = &mut pool.instances[inst as usize];
                if i.generation == gen_ && i.node == node.0 {
                    i.busy = false;
                    i.idle_since = now;
                    let conns = self.lbs[l].conns_mut().expect("an LB with connections");
                    conns.idle[node.ix() * conns.pops + pop.ix()].push_back(Idle {
                        inst,
                        generation: gen_,
                        since: now,
                    });
                } else {
                    // Its client closed it at a timeout: the slot is freed
                    // now that the request it carried has ended.
                    self.lbs[l].close_conns(node, 1);
                }
            }
        }
    }

    /// The client timed out on an attempt: it closes the connection, which
    /// the LB keeps until the attempt ends.
    pub(crate) fn conn_disown(&mut self, conn: Conn) {
        if let Conn::Pooled {
            pop, inst, gen_, ..
        } = conn
        {
            let pool = self.pops[pop.ix()].pool_mut().expect("pooled");
            let i = &mut pool.instances[inst as usize];
            if i.generation == gen_ {
                i.node = NONE;
                i.busy = false;
            }
        }
    }

    /// Paused nodes reset every connection they hold; the processes that
    /// owned one enter their reconnect backoff.
    pub(crate) fn reset_conns(&mut self, l: LbId) {
        let now = self.now;
        let lb = &mut self.lbs[l];
        if !lb.has_conns() {
            return;
        }
        lb.reset_paused_conns();
        let lb = &self.lbs[l];
        for pop in &mut self.pops {
            let (pool, rng) = pop.pool_and_rng();
            let Some(pool) = pool.filter(|pool| pool.lb == l) else {
                continue;
            };
            // A pause is a rare operator action: a scan of the processes is
            // fine here.
            for inst in 0..pool.len() {
                let i = &mut pool.instances[inst as usize];
                if i.node != NONE && lb.is_paused(i.node as usize) {
                    i.node = NONE;
                    i.busy = false;
                    i.generation = i.generation.wrapping_add(1);
                    pool.back_off(inst, now, rng);
                }
            }
        }
    }

    /// The audit's count of what holds a connection on each node of `l`:
    /// processes whose connection is there, and attempts with a one-shot
    /// or closing one.
    pub(crate) fn conns_held(&self, l: LbId) -> Vec<u32> {
        let mut held = vec![0u32; self.lbs[l].node_count()];
        for pop in &self.pops {
            let Some(pool) = pop.pool().filter(|p| p.lb == l) else {
                continue;
            };
            for i in &pool.instances {
                if i.node != NONE {
                    held[i.node as usize] += 1;
                }
            }
        }
        self.flight.for_each_attempt(|_, a| match a.conn {
            Conn::Oneshot { node } if a.comp() == super::ids::Comp::Lb(l) => held[node.ix()] += 1,
            Conn::Pooled {
                pop,
                inst,
                gen_,
                node,
            } if a.comp() == super::ids::Comp::Lb(l) => {
                let pool = self.pops[pop.ix()].pool().expect("pooled");
                let i = &pool.instances[inst as usize];
                if !(i.generation == gen_ && i.node == node.0) {
                    held[node.ix()] += 1;
                }
            }
            _ => {}
        });
        held
    }
}

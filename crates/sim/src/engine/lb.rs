//! Load-balancer pools: nodes that hold a flow for an attempt's whole
//! downstream life (HAProxy `maxconn`), the operators' shed rules, manual
//! admission gates and staged-restore ramps.
//!
//! Invariant: a node's `flows` equals the attempts holding
//! [`Held::Flow`] on it; paused nodes hold none.

use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::{StagedRestore, admit_with};

use super::ramp::{RampGate, Wake};
use stormbreak_policy::shed::{Criticality, Decision, ShedRules};

use super::Engine;
use super::attempt::{Attempt, Held, Res};
use super::audit::ensure;
use super::conn::{Conn, LbConns};
use super::ids::{Comp, LbId, NodeId, RouteId, SeriesId, SiteId};
use super::scale::scaled;
use crate::record::Cause;
use crate::scenario::LbSpec;
use crate::slab::Key;

#[derive(Debug)]
pub(crate) struct Node {
    flows: u32,
    /// Flows the node may hold (`flows_per_node`, or a `set_lb_limit`).
    limit: u32,
    /// Client connections open on the node, busy, idle or closing (only
    /// with `connections`; see the `conn` module).
    conns: u32,
    /// `maxconn` (`u32::MAX` without `connections`).
    conn_limit: u32,
    paused: bool,
}

/// A manual admission gate (`admit` action): the share of a route's
/// requests let through, for one site or every site.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gate {
    route: RouteId,
    site: Option<SiteId>,
    fraction: f64,
    status: u16,
}

/// A staged restore of one route at one LB.
#[derive(Debug)]
pub(crate) struct LbRamp {
    route: RouteId,
    gate: RampGate,
}

#[derive(Debug)]
pub(crate) struct Lb {
    /// Operator shed rules (policy crate), keyed by route index.
    rules: ShedRules,
    ramps: Vec<LbRamp>,
    gates: Vec<Gate>,
    nodes: Vec<Node>,
    /// The connection model, when the pool has `connections`.
    conns: Option<LbConns>,
    /// Round-robin position.
    next: usize,
    series: SeriesId,
    /// Whole-run counts, for controllers that measure rates (failover).
    arrivals_total: u64,
    refused_total: u64,
}

impl Lb {
    /// `routes`: the scenario's route count; the shed-rule table has room
    /// for a rule per (route, class) and per route, up to the policy
    /// crate's largest table (validation refuses more distinct rules).
    pub(crate) fn build(
        spec: &LbSpec,
        scale: f64,
        pops: usize,
        routes: usize,
        series: SeriesId,
    ) -> Lb {
        let limit = scaled(spec.flows_per_node, scale);
        let conn_limit = spec
            .connections
            .as_ref()
            .map_or(u32::MAX, |c| scaled(c.maxconn, scale));
        Lb {
            rules: ShedRules::with_capacity(
                (routes * (Criticality::ALL.len() + 1)).clamp(1, ShedRules::MAX_CAPACITY),
            )
            .expect("a capacity in range"),
            ramps: Vec::new(),
            gates: Vec::new(),
            nodes: (0..spec.nodes)
                .map(|_| Node {
                    flows: 0,
                    limit,
                    conns: 0,
                    conn_limit,
                    paused: false,
                })
                .collect(),
            conns: spec
                .connections
                .as_ref()
                .map(|_| LbConns::new(spec.nodes as usize, pops)),
            next: 0,
            series,
            arrivals_total: 0,
            refused_total: 0,
        }
    }

    #[inline]
    pub(crate) fn series(&self) -> SeriesId {
        self.series
    }

    /// Whole-run (arrivals, refusals), for controllers that measure rates.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (self.arrivals_total, self.refused_total)
    }

    /// An attempt refused before it reached the shed rules (no connection).
    #[inline]
    pub(crate) fn count_refused(&mut self) {
        self.refused_total += 1;
    }

    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    pub(crate) fn is_paused(&self, node: usize) -> bool {
        self.nodes[node].paused
    }

    #[inline]
    pub(crate) fn has_conns(&self) -> bool {
        self.conns.is_some()
    }

    /// The connection model's state (the `conn` module's), with `connections`.
    #[inline]
    pub(crate) fn conns_mut(&mut self) -> Option<&mut LbConns> {
        self.conns.as_mut()
    }

    /// A new connection on `node`, unless it is at `maxconn`.
    #[inline]
    pub(crate) fn try_open_conn(&mut self, node: NodeId) -> bool {
        let n = &mut self.nodes[node.ix()];
        if n.conns >= n.conn_limit {
            return false;
        }
        n.conns += 1;
        true
    }

    /// `count` connections on `node` close.
    #[inline]
    pub(crate) fn close_conns(&mut self, node: NodeId, count: u32) {
        self.nodes[node.ix()].conns -= count;
    }

    /// Paused nodes drop every connection they hold, idle ones included.
    pub(crate) fn reset_paused_conns(&mut self) {
        let Some(conns) = self.conns.as_mut() else {
            return;
        };
        for (n, node) in self.nodes.iter_mut().enumerate() {
            if !node.paused {
                continue;
            }
            node.conns = 0;
            conns.clear_node(n);
        }
    }

    /// Connections open on the nodes, with `connections`.
    pub(crate) fn open_conns(&self) -> Option<u64> {
        self.conns
            .as_ref()
            .map(|_| self.nodes.iter().map(|n| u64::from(n.conns)).sum())
    }

    /// Pauses the first `nodes` nodes (they take nothing new; what they
    /// hold is reset by the caller).
    pub(crate) fn pause(&mut self, nodes: u32) {
        for node in self.nodes.iter_mut().take(nodes as usize) {
            node.paused = true;
        }
    }

    /// Restarts the first `nodes` nodes.
    pub(crate) fn restart(&mut self, nodes: usize) {
        for n in self.nodes.iter_mut().take(nodes) {
            n.paused = false;
        }
    }

    /// Each node's (flow, connection) limits, to put back later.
    pub(crate) fn limits(&self) -> Vec<(u32, u32)> {
        self.nodes.iter().map(|n| (n.limit, n.conn_limit)).collect()
    }

    /// Sets the flow and connection limits (already scaled) of one node,
    /// or of every node.
    pub(crate) fn set_limits(
        &mut self,
        node: Option<u32>,
        flows: Option<u32>,
        maxconn: Option<u32>,
    ) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if node.is_none_or(|j| j as usize == i) {
                if let Some(f) = flows {
                    n.limit = f;
                }
                if let Some(m) = maxconn {
                    n.conn_limit = m;
                }
            }
        }
    }

    /// Puts back limits [`Lb::limits`] returned.
    pub(crate) fn restore_limits(&mut self, limits: Vec<(u32, u32)>) {
        for (n, (flows, conns)) in self.nodes.iter_mut().zip(limits) {
            n.limit = flows;
            n.conn_limit = conns;
        }
    }

    pub(crate) fn shed_rules_mut(&mut self) -> &mut ShedRules {
        &mut self.rules
    }

    /// An `admit` action: `fraction` of the route's requests (from `site`,
    /// or every site) pass; 1 removes the gate.
    pub(crate) fn set_gate(
        &mut self,
        route: RouteId,
        site: Option<SiteId>,
        fraction: f64,
        status: u16,
    ) {
        self.gates.retain(|g| !(g.route == route && g.site == site));
        if fraction < 1.0 {
            self.gates.push(Gate {
                route,
                site,
                fraction,
                status,
            });
        }
    }

    /// The nodes' part of the conservation law: `flows` per node is what
    /// the attempts hold.
    pub(crate) fn audit_flows(&self, name: &str, flows: &[u32]) -> Result<(), super::AuditError> {
        for (n, node) in self.nodes.iter().enumerate() {
            ensure!(
                node.flows == flows[n],
                "lb {name}: node {n} counts {} flows, {} attempts hold one",
                node.flows,
                flows[n]
            );
            ensure!(
                !node.paused || node.flows == 0,
                "lb {name}: paused node {n} holds {} flows",
                node.flows
            );
        }
        Ok(())
    }

    /// And `held` per node (with `connections`) is what the processes and
    /// attempts hold of its connections.
    pub(crate) fn audit_conns(&self, name: &str, held: &[u32]) -> Result<(), super::AuditError> {
        for (n, node) in self.nodes.iter().enumerate() {
            ensure!(
                node.conns == held[n],
                "lb {name}: node {n} counts {} connections, {} processes and attempts hold one",
                node.conns,
                held[n]
            );
            ensure!(
                !node.paused || node.conns == 0,
                "lb {name}: paused node {n} holds {} connections",
                node.conns
            );
        }
        Ok(())
    }

    /// Flows held on running and paused nodes.
    pub(crate) fn flows_in_use(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.flows)).sum()
    }

    pub(crate) fn running_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| !n.paused).count()
    }

    /// Flows the running nodes may hold together.
    pub(crate) fn capacity(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|n| !n.paused)
            .map(|n| u64::from(n.limit))
            .sum()
    }

    /// The next running node, round-robin.
    #[inline]
    pub(crate) fn pick(&mut self) -> Option<NodeId> {
        let n = self.nodes.len();
        let j = (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&j| !self.nodes[j].paused)?;
        self.next = (j + 1) % n;
        Some(NodeId::new(j))
    }

    fn ramp_mut(&mut self, route: RouteId) -> Option<&mut LbRamp> {
        self.ramps.iter_mut().find(|r| r.route == route)
    }
}

/// The LB pools and the randomness of their admission decisions.
#[derive(Debug)]
pub(crate) struct LbPools {
    pools: Vec<Lb>,
    rng: Pcg64Mcg,
    next_epoch: u32,
}

impl LbPools {
    pub(crate) fn new(pools: Vec<Lb>, rng: Pcg64Mcg) -> Self {
        LbPools {
            pools,
            rng,
            next_epoch: 0,
        }
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Lb> {
        self.pools.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.pools.len()
    }

    fn epoch(&mut self) -> u32 {
        self.next_epoch = self.next_epoch.wrapping_add(1);
        self.next_epoch
    }
}

impl std::ops::Index<LbId> for LbPools {
    type Output = Lb;
    fn index(&self, i: LbId) -> &Lb {
        &self.pools[i.ix()]
    }
}

impl std::ops::IndexMut<LbId> for LbPools {
    fn index_mut(&mut self, i: LbId) -> &mut Lb {
        &mut self.pools[i.ix()]
    }
}

impl Engine {
    /// Shed rules, gates and ramps first; then a flow on the next running
    /// node, or a refusal. With `connections`, the attempt first needs a
    /// connection, whose node it then uses: HAProxy answers nothing, not
    /// even a shed 403, before it has accepted the connection.
    pub(crate) fn lb_enter(&mut self, att: Key, a: &Attempt, l: LbId) {
        let connected = if self.lbs[l].conns.is_some() {
            match self.connect(att, a, l) {
                Some(node) => Some(node),
                None => return, // refused, and answered
            }
        } else {
            None
        };
        let lb = &mut self.lbs.pools[l.ix()];
        lb.arrivals_total += 1;
        if let Some(res) = self.lb_rules(a, l) {
            let lb = &mut self.lbs.pools[l.ix()];
            lb.refused_total += 1;
            self.rec.reject(lb.series);
            return self.complete(att, res);
        }
        let lb = &mut self.lbs.pools[l.ix()];
        let node = match connected {
            Some(node) => node,
            None => {
                let Some(node) = lb.pick() else {
                    lb.refused_total += 1;
                    return self.reject(att, Cause::Unavailable);
                };
                node
            }
        };
        let n = &mut lb.nodes[node.ix()];
        if n.flows >= n.limit {
            lb.refused_total += 1;
            return self.reject(att, Cause::FlowsExhausted);
        }
        n.flows += 1;
        self.flight.get_mut(att).held = Held::Flow(node);
        self.forward(att, None);
    }

    /// The answer of the LB's shed rules, gates and ramps, if they refuse.
    fn lb_rules(&mut self, a: &Attempt, l: LbId) -> Option<Res> {
        let now = self.now;
        let lbs = &mut self.lbs;
        let lb = &mut lbs.pools[l.ix()];
        if let Some(Decision::Reject {
            status,
            retry_after,
        }) = lb.rules.lookup(a.route().0 as u32, a.class())
        {
            Some(Res::Err(Cause::shed(status), retry_after))
        } else if let Some(g) = lb
            .gates
            .iter()
            .find(|g| g.route == a.route() && g.site == Some(a.site()))
            .or_else(|| {
                lb.gates
                    .iter()
                    .find(|g| g.route == a.route() && g.site.is_none())
            })
            .filter(|g| !admit_with(g.fraction, &mut lbs.rng))
        {
            Some(Res::fail(Cause::shed(g.status)))
        } else {
            let ramp = lb.ramps.iter_mut().find(|r| r.route == a.route())?;
            (!ramp.gate.admit(now, a.site().ix(), &mut lbs.rng))
                .then(|| Res::fail(Cause::shed(ramp.gate.status)))
        }
    }

    /// An attempt holding a flow leaves: give the flow back; the ramp's
    /// error guard watches what it admitted.
    pub(crate) fn lb_release(&mut self, l: LbId, node: NodeId, a: &Attempt, ok: bool) {
        let lb = &mut self.lbs[l];
        lb.nodes[node.ix()].flows -= 1;
        let now = self.now;
        let wake = lb.ramp_mut(a.route()).and_then(|ramp| {
            Some((
                ramp.gate.observe(now, a.site().ix(), ok)?,
                ramp.gate.epoch(),
            ))
        });
        if let Some((at, epoch)) = wake {
            self.schedule_ramp_wake(l, a.route(), at, epoch);
        }
    }

    fn schedule_ramp_wake(&mut self, l: LbId, route: RouteId, at: Nanos, epoch: u32) {
        self.queue.schedule(
            at,
            super::Ev::RampWake {
                lb: l,
                route,
                epoch,
            },
        );
    }

    /// Paused nodes drop their flows: each attempt holding one is answered
    /// with a reset and its (still running) child is orphaned.
    pub(crate) fn reset_flows(&mut self, l: LbId) {
        // Pauses are rare operator actions: a scan of the slab is fine here.
        let mut victims = Vec::new();
        let lb = &self.lbs[l];
        self.flight.for_each_attempt(|k, a| {
            if let (Comp::Lb(x), Held::Flow(node)) = (a.comp(), a.held)
                && x == l
                && lb.nodes[node.ix()].paused
            {
                victims.push((k, a.child));
            }
        });
        for (k, _) in victims {
            // Resetting one flow can end another victim first: a gateway
            // whose dependency route crosses this LB gives up on its call
            // and completes its own flow here.
            let Some(a) = self.flight.attempt_mut(k) else {
                continue;
            };
            if !matches!(a.held, Held::Flow(_)) {
                continue;
            }
            // Its connection was reset with the node's others (below).
            a.conn = Conn::None;
            if let Some(c) = a.child.take() {
                self.flight.orphan(c);
            }
            self.complete(k, Res::fail(Cause::Reset));
        }
        self.reset_conns(l);
    }

    /// Starts (or replaces) a staged restore of `route` at `l`.
    pub(crate) fn start_ramp(
        &mut self,
        l: LbId,
        route: RouteId,
        restore: StagedRestore,
        site_map: Vec<Option<usize>>,
        status: u16,
    ) {
        let epoch = self.lbs.epoch();
        let mut gate = RampGate::new(restore, site_map, status, epoch);
        let wake = gate.start(self.now);
        let lb = &mut self.lbs[l];
        lb.rules.remove_rule(route.0 as u32, None);
        lb.ramps.retain(|x| x.route != route);
        lb.ramps.push(LbRamp { route, gate });
        if let Some(at) = wake {
            self.schedule_ramp_wake(l, route, at, epoch);
        }
    }

    /// The ramp's own clock: advance it; retire it once complete.
    pub(crate) fn on_ramp_wake(&mut self, l: LbId, route: RouteId, epoch: u32) {
        let now = self.now;
        let lb = &mut self.lbs[l];
        let Some(ramp) = lb.ramp_mut(route) else {
            return; // retired
        };
        match ramp.gate.wake(now, epoch) {
            Wake::Stale | Wake::Idle => {}
            Wake::Again(at) => self.schedule_ramp_wake(l, route, at, epoch),
            Wake::Complete => {
                lb.ramps.retain(|r| r.route != route);
                let what = format!(
                    "staged restore of {} at {} complete",
                    self.rec.route_name(route),
                    self.rec.comp_name(lb.series)
                );
                self.rec.applied(now, what);
            }
        }
    }
}

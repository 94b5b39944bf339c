//! The conservation law, checked: what the model holds must equal what the
//! attempts in flight say they hold.
//!
//! Invariants checked by [`Engine::audit`]:
//! - every attempt created has left the slab exactly once or is still in it
//!   (`created = released + attached in flight`, where an attempt is
//!   released when its caller hears from it or it is orphaned);
//! - each LB node's `flows` equals the attempts holding a flow on it;
//! - each pod's `sidecar_queued`, `app_queued`, `busy` and `sidecar_in`
//!   equal the attempts on it in the matching phases;
//! - an attempt that waits for a child has that child in flight, attached;
//! - each population's `busy` equals its logical requests in flight, and
//!   jobs wait in its backlog only while every worker is busy;
//! - Little's `L` gauge of every component equals its attempts in flight.
//!
//! Debug builds run it at the end of every run; the property test in
//! `tests/conservation.rs` runs it throughout random runs.

use std::fmt;

use stormbreak_policy::Nanos;

use super::Engine;
use super::attempt::{Held, Parent, Phase};
use super::ids::Comp;

/// A broken invariant: which one, and the counts that disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditError(pub String);

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AuditError {}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err($crate::engine::AuditError(format!($($msg)*)));
        }
    };
}
// Each mechanism checks its own part of the law where its state is.
pub(crate) use ensure;

impl Engine {
    /// Checks the conservation law now. O(attempts + pods + nodes): for
    /// tests and debug builds, not for the hot path.
    pub fn audit(&self) -> Result<(), AuditError> {
        let flight = &self.flight;
        let mut attached = 0u64;
        let mut flows: Vec<Vec<u32>> = self.lbs.iter().map(|l| vec![0; l.node_count()]).collect();
        // Per service, per pod key (slot index): [sidecar_queued, app_queued, busy, sidecar_in].
        let mut pods: Vec<Vec<[u32; 4]>> = self
            .services
            .iter()
            .map(|s| vec![[0; 4]; s.pod_slots()])
            .collect();
        // Per gateway with a limit, per instance: slots held.
        let mut slots: Vec<Vec<u32>> = self
            .gateways
            .iter()
            .map(|g| vec![0; g.admission().map_or(0, |a| a.instances() as usize)])
            .collect();
        // And places in its queue.
        let mut queued = slots.clone();
        let mut present = vec![0u64; self.rec.comp_count()];
        let mut problem = None;
        flight.for_each_attempt(|k, a| {
            if problem.is_some() {
                return;
            }
            present[self.series_of(a.comp()).ix()] += 1;
            if a.parent() != Parent::Detached {
                attached += 1;
            }
            if let Parent::Attempt(p) = a.parent() {
                match flight.attempt(p) {
                    Some(pa) if pa.child == Some(k) => {}
                    _ => {
                        problem = Some(format!(
                            "attempt {k:?} is attached to {p:?}, which does not wait for it"
                        ))
                    }
                }
            }
            if let Parent::Client(r) = a.parent()
                && flight.request(r).is_none()
            {
                problem = Some(format!("attempt {k:?} is attached to a finished request"));
            }
            if let Some(c) = a.child {
                match flight.attempt(c) {
                    Some(ca) if ca.parent() == Parent::Attempt(k) => {}
                    _ => {
                        problem = Some(format!(
                            "attempt {k:?} waits for {c:?}, which is not its attached child"
                        ))
                    }
                }
            }
            if matches!(a.phase, Phase::Forwarded | Phase::DependencyWait) && a.child.is_none() {
                problem = Some(format!("attempt {k:?} waits in {:?} for no child", a.phase));
                return;
            }
            match (a.comp(), a.held) {
                (Comp::Lb(l), Held::Flow(n)) => {
                    if a.phase != Phase::Forwarded {
                        problem =
                            Some(format!("attempt {k:?} holds a flow in phase {:?}", a.phase));
                        return;
                    }
                    flows[l.ix()][n.ix()] += 1
                }
                (Comp::Service(s), Held::Pod(p)) => {
                    let svc = &self.services[s.ix()];
                    if !svc.has_pod(p) {
                        problem = Some(format!("attempt {k:?} is on a pod that has left"));
                        return;
                    }
                    let c = &mut pods[s.ix()][p.0.index as usize];
                    match a.phase {
                        Phase::SidecarQueued => c[0] += 1,
                        Phase::AppQueued => {
                            c[1] += 1;
                            c[3] += 1;
                        }
                        Phase::InService => {
                            c[2] += 1;
                            c[3] += 1;
                        }
                        other => {
                            problem = Some(format!("attempt {k:?} on a pod in phase {other:?}"))
                        }
                    }
                }
                (Comp::Gateway(g), Held::Slot(slot)) => {
                    match slots[g.ix()].get_mut(slot.instance as usize) {
                        Some(n) => *n += 1,
                        None => {
                            problem = Some(format!(
                                "attempt {k:?} holds a slot of gateway instance {}, which has none",
                                slot.instance
                            ))
                        }
                    }
                }
                (Comp::Gateway(g), Held::Queued(instance)) => {
                    match queued[g.ix()].get_mut(instance as usize) {
                        Some(n) if a.phase == Phase::GatewayQueued => *n += 1,
                        _ => {
                            problem = Some(format!(
                                "attempt {k:?} in phase {:?} holds a queue place of gateway instance {instance}",
                                a.phase
                            ))
                        }
                    }
                }
                (_, Held::Nothing) => {}
                (comp, held) => problem = Some(format!("attempt {k:?} at {comp:?} holds {held:?}")),
            }
        });
        if let Some(p) = problem {
            return Err(AuditError(p));
        }
        let live = flight.in_flight() as u64;
        ensure!(
            flight.created() == flight.released() + attached,
            "attempts: {} created, {} released, {} attached in flight ({} in flight)",
            flight.created(),
            flight.released(),
            attached,
            live
        );
        for (g, gw) in self.gateways.iter().enumerate() {
            gw.audit(self.rec.comp_name(gw.series()), &slots[g], &queued[g])?;
        }
        for (l, lb) in self.lbs.iter().enumerate() {
            lb.audit_flows(self.rec.comp_name(lb.series()), &flows[l])?;
        }
        for (l, lb) in self.lbs.iter().enumerate() {
            if lb.has_conns() {
                let held = self.conns_held(super::ids::LbId::new(l));
                lb.audit_conns(self.rec.comp_name(lb.series()), &held)?;
            }
        }
        for (s, svc) in self.services.iter().enumerate() {
            svc.audit(self.rec.comp_name(svc.series()), flight, &pods[s])?;
        }
        let mut requests = vec![0u32; self.pops.len()];
        flight.for_each_request(|_, r| requests[r.pop().ix()] += 1);
        for (p, pop) in self.pops.iter().enumerate() {
            pop.audit(p, requests[p])?;
        }
        for (c, n) in present.iter().enumerate() {
            let l = self.rec.present(super::ids::SeriesId::new(c));
            ensure!(
                l == *n,
                "component {}: Little's gauge says {l} present, {n} attempts there",
                self.rec.comp_name(super::ids::SeriesId::new(c))
            );
        }
        self.audit_deadlines()
    }

    /// The per-try timeout lists (`deadline`): each holds exactly the
    /// attempts linked to it, in creation order, and its one event is due
    /// no later than its front's deadline.
    fn audit_deadlines(&self) -> Result<(), AuditError> {
        let attempts = self.flight.slab();
        let mut on_lists = 0usize;
        for (l, (duration, expiry_at)) in self.deadlines.lists().enumerate() {
            let mut last = Nanos::ZERO;
            for (n, (_, a)) in self.deadlines.walk(attempts, l).enumerate() {
                ensure!(
                    a.link.list() == Some(l),
                    "timeout list {l}: its attempt {n} is linked to {:?}",
                    a.link.list()
                );
                ensure!(
                    a.started() >= last,
                    "timeout list {l}: attempt {n} is older than the one before it"
                );
                let due = a.started().saturating_add(duration);
                ensure!(
                    n > 0 || expiry_at.is_some_and(|t| t <= due),
                    "timeout list {l}: its front is due at {due:?}, its event at {expiry_at:?}"
                );
                last = a.started();
                on_lists += 1;
            }
        }
        let mut linked = 0usize;
        attempts.for_each(|_, a| linked += usize::from(a.link.is_linked()));
        ensure!(
            linked == on_lists,
            "{linked} attempts are linked to a timeout list, the lists hold {on_lists}"
        );
        Ok(())
    }
}

/// The attempts of line `q` that wait on pod `k` in `phase`.
pub(crate) fn in_queue<W: super::attempt::Waiting>(
    flight: &super::attempt::Flight,
    q: &std::collections::VecDeque<W>,
    phase: Phase,
    k: super::ids::PodKey,
) -> u32 {
    q.iter()
        .filter(|w| {
            flight
                .attempt(w.key())
                .is_some_and(|a| a.phase == phase && a.held == Held::Pod(k))
        })
        .count() as u32
}

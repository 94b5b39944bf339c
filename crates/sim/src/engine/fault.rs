//! Capacity triggers and faults: a service that slows down, loses workers
//! or pods, or answers nothing; an LB whose flow limit changes. Each is a
//! timeline action; with `for` it is undone after a while. Also the replica
//! controller that replaces killed pods, as a Deployment's ReplicaSet does.
//!
//! These are the *capacity-decreasing* triggers of Huang et al.,
//! "Metastable Failures in the Wild" (OSDI'22): the load stays the same and
//! the system's capacity drops, so queueing delay grows by about
//! 1/(1 − drop) and timeouts — and the retries behind them — start during
//! the trigger, not after it.
//!
//! Invariant: an attempt in [`Phase::Stalled`] holds nothing and is listed
//! in its component's hung list; a stall's end resets every one still
//! there, and a caller's timeout removes it at once (nobody waits for it
//! and it holds nothing, so keeping it would only cost memory).

use stormbreak_policy::Nanos;

use super::Engine;
use super::Ev;
use super::attempt::{Phase, Res};
use super::ids::{Comp, LbId, PodKey, SeriesId, ServiceId};
use super::scale::scaled;
use crate::record::Cause;
use crate::scenario::StallMode;
use crate::slab::Key;

/// What one applied action changed, kept to undo it after its `for`.
#[derive(Debug, Clone, Default)]
pub(crate) enum Undo {
    /// Not applied yet, not timed, or nothing to undo.
    #[default]
    Nothing,
    /// Restart the nodes a timed pause stopped.
    Restart { lb: LbId, nodes: u32 },
    /// Remove a timed shed rule.
    Unshed {
        lb: LbId,
        route: u32,
        class: Option<stormbreak_policy::shed::Criticality>,
    },
    /// Drop this action's slowdown.
    Slow { svc: ServiceId },
    /// Put the capacity back as it was.
    Capacity {
        svc: ServiceId,
        workers: u32,
        sidecar_limit: Option<u32>,
    },
    /// Let the replica controller start this many pods again.
    Reschedule { svc: ServiceId, pods: u32 },
    /// Heal the pods this action failed.
    Heal { svc: ServiceId, pods: Vec<PodKey> },
    /// End this action's stall of these components.
    Unstall { series: Vec<SeriesId> },
    /// Restore the nodes' previous (flow, connection) limits.
    LbLimits { lb: LbId, limits: Vec<(u32, u32)> },
}

/// Stalls in force and the attempts they hold, per component series.
#[derive(Debug)]
pub(crate) struct Stalls {
    /// (action, mode) per component; the last one in force decides.
    by_comp: Vec<Vec<(u16, StallMode)>>,
    /// Hung attempts per component (stale keys are skipped and compacted).
    hung: Vec<Vec<Key>>,
    /// Components with a stall in force: the hot path checks only this.
    active: u32,
}

impl Stalls {
    pub(crate) fn new(components: usize) -> Self {
        Stalls {
            by_comp: vec![Vec::new(); components],
            hung: vec![Vec::new(); components],
            active: 0,
        }
    }

    /// Some stall is in force somewhere.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.active > 0
    }

    /// The stall in force at a component, if any.
    #[inline]
    pub(crate) fn mode(&self, series: SeriesId) -> Option<StallMode> {
        self.by_comp[series.ix()].last().map(|&(_, m)| m)
    }
}

impl Engine {
    /// An attempt reaches a stalled component: it hangs or is refused.
    pub(crate) fn stalled_enter(&mut self, att: Key, series: SeriesId, mode: StallMode) {
        match mode {
            StallMode::Fail => self.reject(att, Cause::Unavailable),
            StallMode::Hang => {
                self.flight.get_mut(att).phase = Phase::Stalled;
                let hung = &mut self.stalls.hung[series.ix()];
                // Timed-out attempts leave stale keys behind; drop them
                // once they could outnumber the live ones (amortised O(1)).
                if hung.len() >= 1024 && hung.len().is_power_of_two() {
                    let flight = &self.flight;
                    hung.retain(|&k| flight.attempt(k).is_some_and(|a| a.phase == Phase::Stalled));
                }
                hung.push(att);
            }
        }
    }

    /// A hung attempt its caller stopped waiting for: nothing holds or
    /// waits for it any more, so it leaves now.
    pub(crate) fn drop_hung(&mut self, att: Key) {
        if let Some(a) = self.flight.attempt(att)
            && a.phase == Phase::Stalled
            && a.child.is_none()
        {
            let a = self.remove_attempt(att);
            let series = self.series_of(a.comp());
            self.rec.depart(series, self.now, self.now - a.started());
        }
    }

    pub(crate) fn stall(&mut self, idx: usize, targets: &[Comp], mode: StallMode) {
        let mut series = Vec::with_capacity(targets.len());
        for &c in targets {
            let s = self.series_of(c);
            let list = &mut self.stalls.by_comp[s.ix()];
            if list.is_empty() {
                self.stalls.active += 1;
            }
            list.push((idx as u16, mode));
            series.push(s);
        }
        self.undo[idx] = Undo::Unstall { series };
    }

    fn unstall(&mut self, idx: usize, series: &[SeriesId]) {
        for &s in series {
            let list = &mut self.stalls.by_comp[s.ix()];
            list.retain(|&(i, _)| usize::from(i) != idx);
            if !list.is_empty() {
                continue;
            }
            self.stalls.active -= 1;
            // The component answers again: what hung on it is reset, as a
            // recovered process drops the connections it never served.
            for k in std::mem::take(&mut self.stalls.hung[s.ix()]) {
                if self
                    .flight
                    .attempt(k)
                    .is_some_and(|a| a.phase == Phase::Stalled)
                {
                    self.complete(k, Res::fail(Cause::Reset));
                }
            }
        }
    }

    pub(crate) fn slow_service(&mut self, idx: usize, svc: ServiceId, factor: f64, add: Nanos) {
        self.services[svc.ix()].slow_down(idx as u16, factor, add);
        self.undo[idx] = Undo::Slow { svc };
    }

    pub(crate) fn set_capacity(
        &mut self,
        idx: usize,
        svc: ServiceId,
        workers: Option<u32>,
        sidecar_limit: Option<u32>,
    ) {
        let s = &self.services[svc.ix()];
        let (old_workers, old_limit) = s.capacity();
        self.undo[idx] = Undo::Capacity {
            svc,
            workers: old_workers,
            sidecar_limit: old_limit,
        };
        let fleet = s.fleet();
        self.apply_capacity(
            svc,
            workers.map(|w| fleet.per_pod(w)),
            sidecar_limit.map(|l| fleet.per_pod(l)),
        );
    }

    pub(crate) fn kill_pods(&mut self, idx: usize, svc: ServiceId, pods: u32, timed: bool) {
        let victims = self.services[svc.ix()].victims(pods, |_| true);
        self.kill_service_pods(svc, &victims);
        let killed = victims.len() as u32;
        if timed {
            self.services[svc.ix()].add_unschedulable(killed);
            self.undo[idx] = Undo::Reschedule { svc, pods: killed };
        }
        self.arm_reconcile(svc);
    }

    pub(crate) fn fail_pods(&mut self, idx: usize, svc: ServiceId, pods: u32) {
        let victims = self.services[svc.ix()].victims(pods, |p| !p.is_failing());
        self.fail_service_pods(svc, &victims);
        self.undo[idx] = Undo::Heal { svc, pods: victims };
    }

    /// Schedules a replica-controller check unless one is due.
    fn arm_reconcile(&mut self, svc: ServiceId) {
        if let Some(at) = self.services[svc.ix()].arm_reconcile(self.now) {
            self.queue.schedule(at, Ev::Reconcile { svc });
        }
    }

    pub(crate) fn on_reconcile(&mut self, svc: ServiceId) {
        self.services[svc.ix()].disarm_reconcile();
        self.reconcile(svc);
    }

    /// The Deployment's replica controller: start pods up to `desired`
    /// (less those that cannot be scheduled), or stop the newest.
    pub(crate) fn reconcile(&mut self, svc: ServiceId) {
        let (starts, ready_at) = self.services[svc.ix()].reconcile(self.now);
        for _ in 0..starts {
            self.queue.schedule(ready_at, Ev::PodReady { svc });
        }
    }

    pub(crate) fn set_lb_limit(
        &mut self,
        idx: usize,
        lb: LbId,
        node: Option<u32>,
        flows: Option<u32>,
        maxconn: Option<u32>,
    ) {
        let scale = self.scale;
        let pool = &mut self.lbs[lb];
        self.undo[idx] = Undo::LbLimits {
            lb,
            limits: pool.limits(),
        };
        pool.set_limits(
            node,
            flows.map(|f| scaled(f, scale)),
            maxconn.map(|m| scaled(m, scale)),
        );
    }

    /// A timed action's `for` ran out: undo what it changed.
    pub(crate) fn on_revert(&mut self, idx: usize) {
        match std::mem::take(&mut self.undo[idx]) {
            Undo::Nothing => {}
            Undo::Restart { lb, nodes } => {
                self.lbs[lb].restart(nodes as usize);
            }
            Undo::Unshed { lb, route, class } => {
                self.lbs[lb].shed_rules_mut().remove_rule(route, class);
            }
            Undo::Slow { svc } => {
                self.services[svc.ix()].end_slowdown(idx);
            }
            Undo::Capacity {
                svc,
                workers,
                sidecar_limit,
            } => self.apply_capacity(svc, Some(workers), sidecar_limit),
            Undo::Reschedule { svc, pods } => {
                self.services[svc.ix()].remove_unschedulable(pods);
                self.arm_reconcile(svc);
            }
            Undo::Heal { svc, pods } => {
                self.services[svc.ix()].heal(&pods);
            }
            Undo::Unstall { series } => self.unstall(idx, &series),
            Undo::LbLimits { lb, limits } => {
                self.lbs[lb].restore_limits(limits);
            }
        }
        let what = format!("end of: {}", self.timeline[idx].what());
        self.rec.applied(self.now, what);
    }
}

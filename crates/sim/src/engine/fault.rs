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
use super::attempt::{Held, Phase, Res};
use super::ids::{Comp, LbId, PodKey, SeriesId, ServiceId};
use super::scale::scaled;
use crate::record::{AppliedAction, Cause};
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
    pub(crate) active: u32,
}

impl Stalls {
    pub(crate) fn new(components: usize) -> Self {
        Stalls {
            by_comp: vec![Vec::new(); components],
            hung: vec![Vec::new(); components],
            active: 0,
        }
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
                    let attempts = &self.flight.attempts;
                    hung.retain(|&k| attempts.get(k).is_some_and(|a| a.phase == Phase::Stalled));
                }
                hung.push(att);
            }
        }
    }

    /// A hung attempt its caller stopped waiting for: nothing holds or
    /// waits for it any more, so it leaves now.
    pub(crate) fn drop_hung(&mut self, att: Key) {
        if let Some(a) = self.flight.attempts.get(att)
            && a.phase == Phase::Stalled
            && a.child.is_none()
        {
            let a = self.remove_attempt(att);
            let series = self.series_of(a.comp);
            self.rec.depart(series, self.now, self.now - a.started);
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
                    .attempts
                    .get(k)
                    .is_some_and(|a| a.phase == Phase::Stalled)
                {
                    self.complete(k, Res::fail(Cause::Reset));
                }
            }
        }
    }

    pub(crate) fn slow_service(&mut self, idx: usize, svc: ServiceId, factor: f64, add: Nanos) {
        let s = &mut self.services[svc.ix()];
        s.slowdowns.push((idx as u16, factor, add));
        s.refresh_slowdown();
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
        self.undo[idx] = Undo::Capacity {
            svc,
            workers: s.workers,
            sidecar_limit: s.sidecar.map(|sc| sc.limit),
        };
        let fleet = s.fleet;
        self.apply_capacity(
            svc,
            workers.map(|w| fleet.per_pod(w)),
            sidecar_limit.map(|l| fleet.per_pod(l)),
        );
    }

    /// Sets per-pod capacities (already scaled) and admits what now fits.
    fn apply_capacity(&mut self, svc: ServiceId, workers: Option<u32>, sidecar_limit: Option<u32>) {
        let now = self.now;
        let s = &mut self.services[svc.ix()];
        if let Some(w) = workers {
            // The pods' utilisation averages are over the old worker count
            // until now; the HPA reads them as a share of the new one.
            for k in &s.order {
                let pod = s.pods.get_mut(k.0).expect("ordered pods are live");
                pod.busy_avg.touch(now, pod.busy);
                pod.busy_tick.touch(now, pod.busy);
            }
            s.workers = w;
            s.peak_workers = s.peak_workers.max(w);
        }
        if let (Some(l), Some(sc)) = (sidecar_limit, s.sidecar.as_mut()) {
            sc.limit = l;
            s.peak_sidecar_limit = s.peak_sidecar_limit.max(l);
        }
        let pods = s.order.clone();
        for p in pods {
            if self.services[svc.ix()].pods.get(p.0).is_none() {
                continue;
            }
            self.pull_app_queue(svc, p);
            self.fill_sidecar(svc, p);
        }
    }

    /// The first `n` (scaled) ready pods, oldest first, that pass `pick`.
    fn victims(
        &self,
        svc: ServiceId,
        n: u32,
        pick: impl Fn(&super::service::Pod) -> bool,
    ) -> Vec<PodKey> {
        let s = &self.services[svc.ix()];
        let n = s.fleet.pods(n) as usize;
        s.order
            .iter()
            .copied()
            .filter(|&k| {
                let p = s.pod(k);
                p.ready && pick(p)
            })
            .take(n)
            .collect()
    }

    pub(crate) fn kill_pods(&mut self, idx: usize, svc: ServiceId, pods: u32, timed: bool) {
        let victims = self.victims(svc, pods, |_| true);
        for &p in &victims {
            // Not ready first, so no retry the resets cause lands here.
            self.services[svc.ix()].pod_mut(p).ready = false;
        }
        for &p in &victims {
            self.reset_pod(svc, p);
        }
        let s = &mut self.services[svc.ix()];
        s.remove_drained();
        let killed = victims.len() as u32;
        if timed {
            s.unschedulable += killed;
            self.undo[idx] = Undo::Reschedule { svc, pods: killed };
        }
        self.arm_reconcile(svc);
    }

    pub(crate) fn fail_pods(&mut self, idx: usize, svc: ServiceId, pods: u32) {
        let victims = self.victims(svc, pods, |p| !p.failing);
        for &p in &victims {
            self.services[svc.ix()].pod_mut(p).failing = true;
        }
        // The app is gone: what it held is reset, as if it crashed.
        for &p in &victims {
            self.reset_pod(svc, p);
            let pod = self.services[svc.ix()].pod_mut(p);
            pod.sidecar_queue.clear();
            pod.app_queue.clear();
        }
        self.undo[idx] = Undo::Heal { svc, pods: victims };
    }

    /// Every attempt on the pod is answered with a reset; the pod's
    /// counters go to zero with them.
    fn reset_pod(&mut self, svc: ServiceId, p: PodKey) {
        let now = self.now;
        // A fault is a rare operator action: a scan of the slab is fine.
        let mut on_pod = Vec::new();
        self.flight.attempts.for_each(|k, a| {
            if a.comp == Comp::Service(svc) && a.held == Held::Pod(p) {
                on_pod.push(k);
            }
        });
        let has_sidecar = self.services[svc.ix()].sidecar.is_some();
        for k in on_pod {
            // Delivering one reset starts retries elsewhere; check that
            // each attempt is still here all the same.
            let Some(a) = self.flight.attempts.get_mut(k) else {
                continue;
            };
            if a.held != Held::Pod(p) {
                continue;
            }
            let phase = a.phase;
            a.held = Held::Nothing;
            let pod = self.services[svc.ix()].pod_mut(p);
            match phase {
                Phase::SidecarQueued => pod.sidecar_queued -= 1,
                Phase::AppQueued => {
                    pod.app_queued -= 1;
                    if has_sidecar {
                        pod.sidecar_avg.touch(now, pod.sidecar_in);
                        pod.sidecar_in -= 1;
                    }
                }
                Phase::InService => {
                    pod.busy_avg.touch(now, pod.busy);
                    pod.busy_tick.touch(now, pod.busy);
                    pod.busy -= 1;
                    if has_sidecar {
                        pod.sidecar_avg.touch(now, pod.sidecar_in);
                        pod.sidecar_in -= 1;
                    }
                }
                other => unreachable!("an attempt on a pod in phase {other:?}"),
            }
            self.rec.reject(self.services[svc.ix()].series);
            self.complete(k, Res::fail(Cause::Reset));
        }
    }

    /// Schedules a replica-controller check unless one is due.
    fn arm_reconcile(&mut self, svc: ServiceId) {
        let s = &mut self.services[svc.ix()];
        if !s.reconcile_armed {
            s.reconcile_armed = true;
            let at = self.now.saturating_add(s.controller_period);
            self.queue.schedule(at, Ev::Reconcile { svc });
        }
    }

    pub(crate) fn on_reconcile(&mut self, svc: ServiceId) {
        self.services[svc.ix()].reconcile_armed = false;
        self.reconcile(svc);
    }

    /// The Deployment's replica controller: start pods up to `desired`
    /// (less those that cannot be scheduled), or stop the newest.
    pub(crate) fn reconcile(&mut self, svc: ServiceId) {
        let now = self.now;
        let s = &mut self.services[svc.ix()];
        // Serving pods and those starting; draining pods are terminating
        // (Kubernetes no longer counts them).
        let current = s.ready_pods() as u32 + s.starting;
        let allowed = s.desired.saturating_sub(s.unschedulable);
        if current < allowed {
            for _ in current..allowed {
                s.starting += 1;
                self.queue
                    .schedule(now.saturating_add(s.pod_start), Ev::PodReady { svc });
            }
        } else if s.desired < current {
            // Scale down: pods still starting go first (as a ReplicaSet
            // deletes pending pods before running ones); then stop sending
            // to the newest ready pods, which finish what they hold and
            // leave once drained (at a later sync).
            let mut to_remove = current - s.desired;
            let cancel = to_remove.min(s.starting);
            s.starting -= cancel;
            s.cancelled_starts += cancel;
            to_remove -= cancel;
            for k in s.order.iter().rev() {
                if to_remove == 0 {
                    break;
                }
                let pod = s.pods.get_mut(k.0).expect("ordered pods are live");
                if pod.ready {
                    pod.ready = false;
                    to_remove -= 1;
                }
            }
        }
        s.remove_drained();
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
            limits: pool.nodes.iter().map(|n| (n.limit, n.conn_limit)).collect(),
        };
        for (i, n) in pool.nodes.iter_mut().enumerate() {
            if node.is_none_or(|j| j as usize == i) {
                if let Some(f) = flows {
                    n.limit = scaled(f, scale);
                }
                if let Some(m) = maxconn {
                    n.conn_limit = scaled(m, scale);
                }
            }
        }
    }

    /// A timed action's `for` ran out: undo what it changed.
    pub(crate) fn on_revert(&mut self, idx: usize) {
        match std::mem::take(&mut self.undo[idx]) {
            Undo::Nothing => {}
            Undo::Restart { lb, nodes } => {
                for n in self.lbs[lb].nodes.iter_mut().take(nodes as usize) {
                    n.paused = false;
                }
            }
            Undo::Unshed { lb, route, class } => {
                self.lbs[lb].rules.remove_rule(route, class);
            }
            Undo::Slow { svc } => {
                let s = &mut self.services[svc.ix()];
                s.slowdowns.retain(|&(i, _, _)| usize::from(i) != idx);
                s.refresh_slowdown();
            }
            Undo::Capacity {
                svc,
                workers,
                sidecar_limit,
            } => self.apply_capacity(svc, Some(workers), sidecar_limit),
            Undo::Reschedule { svc, pods } => {
                let s = &mut self.services[svc.ix()];
                s.unschedulable -= pods;
                self.arm_reconcile(svc);
            }
            Undo::Heal { svc, pods } => {
                let s = &mut self.services[svc.ix()];
                for p in pods {
                    if let Some(pod) = s.pods.get_mut(p.0) {
                        pod.failing = false;
                    }
                }
            }
            Undo::Unstall { series } => self.unstall(idx, &series),
            Undo::LbLimits { lb, limits } => {
                for (n, (flows, conns)) in self.lbs[lb].nodes.iter_mut().zip(limits) {
                    n.limit = flows;
                    n.conn_limit = conns;
                }
            }
        }
        let what = format!("end of: {}", self.timeline[idx].what);
        self.rec.applied.push(AppliedAction { at: self.now, what });
    }
}

//! Services: identical pods behind a least-request balancer; each pod is a
//! sidecar (concurrency limit, bounded queue, queue timeout) in front of an
//! app container (workers, a queue, a service-time distribution).
//!
//! Invariant: a pod's counters equal the attempts on it by phase —
//! `sidecar_queued` those in `SidecarQueued`, `app_queued` in `AppQueued`,
//! `busy` in `InService`, and (with a sidecar) `sidecar_in` those in
//! `AppQueued` or `InService`. A pod leaves the service only when all four
//! are zero, so no attempt's [`PodKey`] outlives its pod.
//!
//! The sidecar's queue timeout is one timer a pod, not one a request: every
//! waiter gets the same timeout and the line is first in, first out, so its
//! front always has the earliest deadline, and the pod keeps one
//! `SidecarExpiry` event, a [`LineTimer`]. A timer a waiter would cost an
//! event and a queue entry for every request that waits, and most waiters
//! are admitted before their deadline; this costs about one event a
//! timeout period for a pod whose waiters are all admitted, and memory for
//! the line alone. Invariant: `expiry` keeps that of [`LineTimer`].

use std::collections::VecDeque;

use rand::Rng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;

use super::Engine;
use super::attempt::{Held, Phase, Res, Waiting};
use super::audit::{ensure, in_queue};
use super::autoscale::Autoscaler;
use super::ids::Comp;
use super::ids::{PodKey, SeriesId, ServiceId};
use super::line_timer::LineTimer;
use super::scale::{FleetScale, scale_autoscaler};
use super::stats::Avg;
use crate::dist::ServiceTime;
use crate::record::Cause;
use crate::slab::{Key, Slab};

#[derive(Debug)]
pub(crate) struct Pod {
    ready: bool,
    /// A `fail_pods` fault: the app refuses every attempt at once.
    failing: bool,
    sidecar_in: u32,
    /// Attempts waiting for a slot, oldest first, so deadlines never
    /// decrease along the line; the keys of attempts that left otherwise
    /// (a reset) stay behind and are skipped.
    sidecar_queue: VecDeque<Waiter>,
    sidecar_queued: u32,
    /// The pod's one sidecar queue-timeout event.
    expiry: LineTimer,
    busy: u32,
    app_queue: VecDeque<Key>,
    app_queued: u32,
    /// Since the last HPA sync.
    busy_avg: Avg,
    sidecar_avg: Avg,
    /// Since the last recording tick (the recording's own average).
    busy_tick: Avg,
}

impl Pod {
    /// A `fail_pods` fault holds the pod.
    #[inline]
    pub(crate) fn is_failing(&self) -> bool {
        self.failing
    }

    fn new(ready: bool, now: Nanos) -> Pod {
        Pod {
            ready,
            failing: false,
            sidecar_in: 0,
            sidecar_queue: VecDeque::new(),
            sidecar_queued: 0,
            expiry: LineTimer::default(),
            busy: 0,
            app_queue: VecDeque::new(),
            app_queued: 0,
            busy_avg: Avg::starting(now),
            sidecar_avg: Avg::starting(now),
            busy_tick: Avg::starting(now),
        }
    }

    /// Requests on the pod, in any stage: the least-request balancer's load.
    fn load(&self) -> u32 {
        self.sidecar_in + self.sidecar_queued + self.busy + self.app_queued
    }
}

/// An attempt waiting for a sidecar slot, and when it stops waiting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiter {
    att: Key,
    /// [`Nanos::MAX`] when the sidecar has no queue timeout.
    deadline: Nanos,
}

impl Waiting for Waiter {
    #[inline]
    fn key(&self) -> Key {
        self.att
    }
}

/// A pod's sidecar limits (per pod, after `--scale`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sidecar {
    limit: u32,
    queue_cap: u32,
    queue_timeout: Option<Nanos>,
}

#[derive(Debug)]
pub(crate) struct Service {
    pods: Slab<Pod>,
    /// Live pods in the order they were started: what the balancer picks
    /// from and the HPA reads.
    order: Vec<PodKey>,
    /// Pods being started (ready at a `PodReady` event).
    starting: u32,
    /// `PodReady` events still due for starts a scale-down cancelled.
    cancelled_starts: u32,
    sidecar: Option<Sidecar>,
    workers: u32,
    app_queue_cap: u32,
    /// The cap is [`Limits::default_app_queue`](super::Limits), not the
    /// scenario's: hitting it is reported.
    app_queue_is_default: bool,
    drop_expired: bool,
    service_time: ServiceTime,
    autoscaler: Option<Autoscaler>,
    pod_start: Nanos,
    /// How `--scale` shrinks this service (for capacities set by actions).
    fleet: FleetScale,
    /// Replicas the Deployment wants: the scenario's, then the HPA's.
    desired: u32,
    /// Pods the replica controller may not start yet (`kill_pods` with
    /// `for`: their node is gone).
    unschedulable: u32,
    /// A replica-controller check is scheduled.
    reconcile_armed: bool,
    controller_period: Nanos,
    /// Active `slow_service` actions: (action, factor, add).
    slowdowns: Vec<(u16, f64, Nanos)>,
    /// Their product of factors and sum of added latencies.
    time_factor: f64,
    time_add: Nanos,
    /// The highest `workers` and sidecar limit ever set: after a cut, pods
    /// may hold more than the new limit until they drain (audited bound).
    peak_workers: u32,
    peak_sidecar_limit: u32,
    rng: Pcg64Mcg,
    series: SeriesId,
}

impl Service {
    /// A service as the scenario declares it, `--scale` applied, its pods
    /// all ready at time zero.
    pub(crate) fn build(
        s: &crate::scenario::ServiceSpec,
        scale: f64,
        default_app_queue: u32,
        rng: Pcg64Mcg,
        series: SeriesId,
    ) -> Service {
        let fleet = FleetScale::new(s.replicas, scale);
        let autoscaler = s
            .autoscaler
            .as_ref()
            .map(|a| Autoscaler::new(&scale_autoscaler(a, fleet)));
        let mut svc = Service {
            pods: Slab::new(),
            order: Vec::new(),
            starting: 0,
            cancelled_starts: 0,
            sidecar: s.sidecar.as_ref().map(|sc| Sidecar {
                limit: fleet.per_pod(sc.limit),
                queue_cap: if sc.queue == 0 {
                    0
                } else {
                    fleet.per_pod(sc.queue)
                },
                queue_timeout: sc.queue_timeout,
            }),
            workers: fleet.per_pod(s.app.workers),
            // `queue = 0` is no queue at all, at any scale.
            app_queue_cap: s.app.queue.map_or(default_app_queue, |q| {
                if q == 0 { 0 } else { fleet.per_pod(q) }
            }),
            app_queue_is_default: s.app.queue.is_none(),
            drop_expired: s.app.drop_expired,
            service_time: s.app.service_time.sampler(),
            autoscaler,
            pod_start: s.pod_start.unwrap_or_else(|| {
                s.autoscaler
                    .as_ref()
                    .map_or(crate::scenario::DEFAULT_POD_START, |a| a.pod_start)
            }),
            fleet,
            desired: fleet.pods(s.replicas),
            unschedulable: 0,
            reconcile_armed: false,
            controller_period: s.controller_period,
            slowdowns: Vec::new(),
            time_factor: 1.0,
            time_add: Nanos::ZERO,
            peak_workers: fleet.per_pod(s.app.workers),
            peak_sidecar_limit: s.sidecar.as_ref().map_or(0, |sc| fleet.per_pod(sc.limit)),
            rng,
            series,
        };
        for _ in 0..fleet.pods(s.replicas) {
            svc.add_pod(Nanos::ZERO);
        }
        svc
    }

    #[inline]
    pub(crate) fn series(&self) -> SeriesId {
        self.series
    }

    /// How `--scale` shrinks this service (for capacities set by actions).
    #[inline]
    pub(crate) fn fleet(&self) -> FleetScale {
        self.fleet
    }

    /// The HPA's first wake-up, if the service has one.
    pub(crate) fn first_autoscale(&self) -> Option<Nanos> {
        self.autoscaler.as_ref().map(|a| a.poll_timeout())
    }

    /// The run's `default_app_queue` bound, for a service whose scenario
    /// sets no app queue.
    pub(crate) fn lower_default_app_queue(&mut self, cap: u32) {
        if self.app_queue_is_default {
            self.app_queue_cap = cap;
        }
    }

    /// One HPA sync: the Deployment's replicas become the HPA's answer.
    /// Returns the HPA's next wake-up (`None`: the service has no HPA).
    pub(crate) fn sync_autoscaler(&mut self, now: Nanos) -> Option<Nanos> {
        let ready = self.ready_pods() as u32;
        let hpa = self.autoscaler.as_mut()?;
        let workers = self.workers as f64;
        let limit = self.sidecar.map_or(1.0, |sc| sc.limit as f64);
        // The Deployment's replicas: serving pods and those starting.
        // Draining pods are terminating (Kubernetes no longer counts them),
        // so a second scale-down never takes the last serving pods for them.
        let current = ready + self.starting;
        let pods = &mut self.pods;
        let samples = self.order.iter().map(|k| {
            let p = pods.get_mut(k.0).expect("ordered pods are live");
            super::autoscale::PodSample {
                ready: p.ready,
                app_utilisation: p.busy_avg.take(now, p.busy) / workers,
                sidecar_saturation: p.sidecar_avg.take(now, p.sidecar_in) / limit,
            }
        });
        let desired = hpa.sync(now, current, samples);
        let next = hpa.poll_timeout().max(now + Nanos::NANOSECOND);
        // The HPA sets the Deployment's replicas; the replica controller
        // starts or stops pods to match.
        self.desired = desired;
        Some(next)
    }

    /// A `PodReady` event: a start completes, unless a scale-down
    /// cancelled it.
    pub(crate) fn pod_ready(&mut self, now: Nanos) {
        // Starts are interchangeable: a cancelled one is whichever comes due.
        if self.cancelled_starts > 0 {
            self.cancelled_starts -= 1;
            return;
        }
        self.starting -= 1;
        self.add_pod(now);
    }

    /// The current per-pod (workers, sidecar limit), to put back later.
    pub(crate) fn capacity(&self) -> (u32, Option<u32>) {
        (self.workers, self.sidecar.map(|sc| sc.limit))
    }

    /// Adds a `slow_service` action's slowdown.
    pub(crate) fn slow_down(&mut self, action: u16, factor: f64, add: Nanos) {
        self.slowdowns.push((action, factor, add));
        self.refresh_slowdown();
    }

    /// Drops action `action`'s slowdown.
    pub(crate) fn end_slowdown(&mut self, action: usize) {
        self.slowdowns.retain(|&(i, _, _)| usize::from(i) != action);
        self.refresh_slowdown();
    }

    /// The first `n` (scaled) ready pods, oldest first, that pass `pick`.
    pub(crate) fn victims(&self, n: u32, pick: impl Fn(&Pod) -> bool) -> Vec<PodKey> {
        let n = self.fleet.pods(n) as usize;
        self.order
            .iter()
            .copied()
            .filter(|&k| {
                let p = self.pod(k);
                p.ready && pick(p)
            })
            .take(n)
            .collect()
    }

    /// `n` more pods the replica controller may not start (their node is
    /// gone).
    pub(crate) fn add_unschedulable(&mut self, n: u32) {
        self.unschedulable += n;
    }

    /// `n` of them may be started again.
    pub(crate) fn remove_unschedulable(&mut self, n: u32) {
        self.unschedulable -= n;
    }

    /// The app of these pods answers again (those still live).
    pub(crate) fn heal(&mut self, pods: &[PodKey]) {
        for p in pods {
            if let Some(pod) = self.pods.get_mut(p.0) {
                pod.failing = false;
            }
        }
    }

    /// Arms the replica controller's next check unless one is due: when
    /// it is due, if newly armed.
    pub(crate) fn arm_reconcile(&mut self, now: Nanos) -> Option<Nanos> {
        if self.reconcile_armed {
            return None;
        }
        self.reconcile_armed = true;
        Some(now.saturating_add(self.controller_period))
    }

    /// The replica controller's check has come.
    pub(crate) fn disarm_reconcile(&mut self) {
        self.reconcile_armed = false;
    }

    /// The Deployment's replica controller: starts pods up to `desired`
    /// (less those that cannot be scheduled), or stops the newest. Returns
    /// how many pods it starts, each ready at the returned time.
    pub(crate) fn reconcile(&mut self, now: Nanos) -> (u32, Nanos) {
        // Serving pods and those starting; draining pods are terminating
        // (Kubernetes no longer counts them).
        let current = self.ready_pods() as u32 + self.starting;
        let allowed = self.desired.saturating_sub(self.unschedulable);
        let mut starts = 0;
        if current < allowed {
            starts = allowed - current;
            self.starting += starts;
        } else if self.desired < current {
            // Scale down: pods still starting go first (as a ReplicaSet
            // deletes pending pods before running ones); then stop sending
            // to the newest ready pods, which finish what they hold and
            // leave once drained (at a later sync).
            let mut to_remove = current - self.desired;
            let cancel = to_remove.min(self.starting);
            self.starting -= cancel;
            self.cancelled_starts += cancel;
            to_remove -= cancel;
            for k in self.order.iter().rev() {
                if to_remove == 0 {
                    break;
                }
                let pod = self.pods.get_mut(k.0).expect("ordered pods are live");
                if pod.ready {
                    pod.ready = false;
                    to_remove -= 1;
                }
            }
        }
        self.remove_drained();
        (starts, now.saturating_add(self.pod_start))
    }

    /// Slots of the pod slab (an upper bound on pod key indices).
    pub(crate) fn pod_slots(&self) -> usize {
        self.pods.capacity()
    }

    #[inline]
    pub(crate) fn has_pod(&self, p: PodKey) -> bool {
        self.pods.get(p.0).is_some()
    }

    /// A recording tick: the service's gauges for the interval that ends.
    pub(crate) fn record_tick(&mut self, now: Nanos, c: &mut crate::record::ComponentSeries) {
        let ready = self.ready_pods();
        let pods = || self.order.iter().map(|k| self.pod(*k));
        let (inflight, limit) = match self.sidecar {
            Some(sc) => (
                pods().map(|p| p.sidecar_in as f64).sum(),
                (sc.limit as usize * ready) as f64,
            ),
            None => (
                pods().map(|p| p.busy as f64).sum(),
                (self.workers as usize * ready) as f64,
            ),
        };
        c.in_flight.push(inflight);
        c.limit.push(limit);
        c.queue.push(
            pods()
                .map(|p| (p.sidecar_queued + p.app_queued) as f64)
                .sum(),
        );
        c.replicas.push(ready as f64);
        let n = self.order.len().max(1) as f64;
        let workers = self.workers as f64;
        let busy: f64 = self
            .order
            .iter()
            .map(|k| {
                let p = self.pods.get_mut(k.0).expect("ordered pods are live");
                p.busy_tick.take(now, p.busy)
            })
            .sum();
        c.app_utilisation.push(busy / (workers * n));
    }

    /// The pods' part of the conservation law: `counts` per pod key index
    /// is what the attempts on it say ([`super::audit`]'s order:
    /// sidecar queued, app queued, busy, sidecar in).
    pub(crate) fn audit(
        &self,
        name: &str,
        flight: &super::attempt::Flight,
        counts: &[[u32; 4]],
    ) -> Result<(), super::AuditError> {
        let svc = self;
        ensure!(
            svc.order.len() == svc.pods.len(),
            "service {name}: {} pods ordered, {} live",
            svc.order.len(),
            svc.pods.len()
        );
        let mut seen = std::collections::BTreeSet::new();
        for k in &svc.order {
            ensure!(
                seen.insert(k.0.index),
                "service {name}: pod {k:?} listed twice"
            );
            let pod = svc.pod(*k);
            // Every queued attempt must be findable in its pod's queue,
            // or no freed slot would ever admit it.
            ensure!(
                in_queue(flight, &pod.sidecar_queue, Phase::SidecarQueued, *k)
                    == pod.sidecar_queued,
                "service {name}: pod {k:?} counts {} sidecar-queued, its queue holds {} of them",
                pod.sidecar_queued,
                in_queue(flight, &pod.sidecar_queue, Phase::SidecarQueued, *k)
            );
            let mut waiting = pod.sidecar_queue.iter().filter(|w| {
                flight
                    .attempt(w.att)
                    .is_some_and(|a| a.phase == Phase::SidecarQueued)
            });
            if let Some(first) = waiting.next() {
                ensure!(
                    first.deadline == Nanos::MAX
                        || pod.expiry.due().is_some_and(|t| t <= first.deadline),
                    "service {name}: pod {k:?}'s first waiter is due at {:?}, its queue timer at {:?}",
                    first.deadline,
                    pod.expiry.due()
                );
                let mut last = first.deadline;
                for w in waiting {
                    ensure!(
                        w.deadline >= last,
                        "service {name}: pod {k:?}'s waiters are out of deadline order"
                    );
                    last = w.deadline;
                }
            }
            ensure!(
                in_queue(flight, &pod.app_queue, Phase::AppQueued, *k) == pod.app_queued,
                "service {name}: pod {k:?} counts {} app-queued, its queue holds {} of them",
                pod.app_queued,
                in_queue(flight, &pod.app_queue, Phase::AppQueued, *k)
            );
            let c = counts[k.0.index as usize];
            let has_sidecar = svc.sidecar.is_some();
            let want = [
                pod.sidecar_queued,
                pod.app_queued,
                pod.busy,
                if has_sidecar { pod.sidecar_in } else { c[3] },
            ];
            ensure!(
                want == c,
                "service {name}: pod {k:?} counts [sidecar queued, app queued, busy, sidecar in] = {want:?}, attempts say {c:?}"
            );
            ensure!(
                pod.busy <= svc.peak_workers,
                "service {name}: pod {k:?} has {} busy of at most {} workers",
                pod.busy,
                svc.peak_workers
            );
            if let Some(sc) = svc.sidecar {
                ensure!(
                    pod.sidecar_in <= svc.peak_sidecar_limit.max(sc.limit),
                    "service {name}: pod {k:?} sidecar {} over limit {}",
                    pod.sidecar_in,
                    svc.peak_sidecar_limit.max(sc.limit)
                );
                ensure!(
                    pod.sidecar_queued <= sc.queue_cap,
                    "service {name}: pod {k:?} sidecar queue over its bound"
                );
            }
            ensure!(
                pod.app_queued <= svc.app_queue_cap,
                "service {name}: pod {k:?} app queue over its bound"
            );
        }
        Ok(())
    }

    fn pod(&self, p: PodKey) -> &Pod {
        self.pods
            .get(p.0)
            .expect("a pod with attempts on it is live")
    }

    fn pod_mut(&mut self, p: PodKey) -> &mut Pod {
        self.pods
            .get_mut(p.0)
            .expect("a pod with attempts on it is live")
    }

    fn add_pod(&mut self, now: Nanos) {
        let k = self.pods.insert(Pod::new(true, now));
        self.order.push(PodKey(k));
    }

    /// Removes pods that are neither ready nor holding anything.
    fn remove_drained(&mut self) {
        let pods = &mut self.pods;
        self.order.retain(|&k| {
            let p = pods.get(k.0).expect("ordered pods are live");
            let keep = p.ready || p.load() > 0;
            if !keep {
                pods.remove(k.0);
            }
            keep
        });
    }

    fn ready_pods(&self) -> usize {
        self.order.iter().filter(|&&k| self.pod(k).ready).count()
    }

    /// Recomputes the combined effect of the active slowdowns.
    fn refresh_slowdown(&mut self) {
        self.time_factor = self.slowdowns.iter().map(|s| s.1).product();
        self.time_add = self.slowdowns.iter().map(|s| s.2).sum();
    }

    /// Least-request with two random choices (Envoy's default LEAST_REQUEST).
    fn pick_pod(&mut self) -> Option<PodKey> {
        let n = self.order.len();
        if n == 0 {
            return None;
        }
        let load = |p: &Pod| p.ready.then(|| p.load());
        let a = self.order[self.rng.random_range(0..n)];
        let b = self.order[self.rng.random_range(0..n)];
        match (load(self.pod(a)), load(self.pod(b))) {
            (Some(x), Some(y)) => Some(if y < x { b } else { a }),
            (Some(_), None) => Some(a),
            (None, Some(_)) => Some(b),
            (None, None) => self.order.iter().copied().find(|&k| self.pod(k).ready),
        }
    }
}

impl Engine {
    pub(crate) fn service_admit(&mut self, att: Key, s: ServiceId) {
        let now = self.now;
        let svc = &mut self.services[s.ix()];
        let Some(p) = svc.pick_pod() else {
            return self.reject(att, Cause::Unavailable);
        };
        if svc.pod(p).failing {
            return self.reject(att, Cause::Reset);
        }
        if let Some(sc) = svc.sidecar {
            let pod = svc.pod_mut(p);
            if pod.sidecar_in < sc.limit {
                pod.sidecar_avg.touch(now, pod.sidecar_in);
                pod.sidecar_in += 1;
            } else if pod.sidecar_queued < sc.queue_cap {
                let deadline = sc
                    .queue_timeout
                    .map_or(Nanos::MAX, |t| now.saturating_add(t));
                self.flight.enqueue(
                    &mut pod.sidecar_queue,
                    pod.sidecar_queued as usize,
                    Phase::SidecarQueued,
                    Waiter { att, deadline },
                );
                pod.sidecar_queued += 1;
                if deadline < Nanos::MAX
                    && let Some(at) = pod.expiry.on_join(deadline)
                {
                    self.queue
                        .schedule(at, super::Ev::SidecarExpiry { svc: s, pod: p });
                }
                let a = self.flight.get_mut(att);
                a.phase = Phase::SidecarQueued;
                a.held = Held::Pod(p);
                return;
            } else {
                return self.reject(att, Cause::LimitRejected);
            }
        }
        self.flight.get_mut(att).held = Held::Pod(p);
        self.app_admit(att, s, p);
    }

    /// The attempt holds its sidecar slot (if any): a worker, a queue place,
    /// or a refusal.
    fn app_admit(&mut self, att: Key, s: ServiceId, p: PodKey) {
        let now = self.now;
        let svc = &mut self.services[s.ix()];
        let (workers, cap) = (svc.workers, svc.app_queue_cap);
        let pod = svc.pods.get_mut(p.0).expect("live pod");
        if pod.busy < workers {
            pod.busy_avg.touch(now, pod.busy);
            pod.busy_tick.touch(now, pod.busy);
            pod.busy += 1;
            let mut d = svc.service_time.sample(&mut svc.rng);
            if !svc.slowdowns.is_empty() {
                d = d.mul_f64(svc.time_factor) + svc.time_add;
            }
            self.flight.get_mut(att).phase = Phase::InService;
            // A lognormal tail can saturate the cast to `Nanos`: such work
            // never finishes within the run rather than wrapping around.
            self.queue
                .schedule(now.saturating_add(d), super::Ev::Done { att });
        } else if pod.app_queued < cap {
            pod.app_queue.push_back(att);
            pod.app_queued += 1;
            self.flight.get_mut(att).phase = Phase::AppQueued;
        } else {
            if svc.app_queue_is_default {
                let series = svc.series;
                self.rec.bound_hit("default_app_queue", series, now);
            }
            self.release_sidecar(s, p);
            self.reject(att, Cause::LimitRejected);
        }
    }

    pub(crate) fn on_service_done(&mut self, att: Key) {
        // A killed pod's attempts were reset; their completions are stale.
        let Some(&a) = self.flight.attempt(att) else {
            return;
        };
        let (super::ids::Comp::Service(s), Held::Pod(p)) = (a.comp(), a.held) else {
            unreachable!("a service completion is for an attempt on a pod")
        };
        let now = self.now;
        let pod = self.services[s.ix()].pod_mut(p);
        pod.busy_avg.touch(now, pod.busy);
        pod.busy_tick.touch(now, pod.busy);
        pod.busy -= 1;
        self.complete(att, Res::Ok);
        self.pull_app_queue(s, p);
        self.release_sidecar(s, p);
    }

    /// Workers are free: start queued requests while they last.
    pub(crate) fn pull_app_queue(&mut self, s: ServiceId, p: PodKey) {
        loop {
            let svc = &mut self.services[s.ix()];
            // After a capacity cut a completion may leave no worker free.
            if svc.pod(p).busy >= svc.workers {
                return;
            }
            let drop_expired = svc.drop_expired;
            let Some(next) = svc.pod_mut(p).app_queue.pop_front() else {
                return;
            };
            let Some(a) = self.flight.attempt(next) else {
                continue;
            };
            let abandoned = a.abandoned();
            svc.pod_mut(p).app_queued -= 1;
            if abandoned && drop_expired {
                self.release_sidecar(s, p);
                self.reject(next, Cause::Timeout);
                continue;
            }
            self.app_admit(next, s, p);
        }
    }

    /// A sidecar slot is free: admit queued requests while there is room.
    fn release_sidecar(&mut self, s: ServiceId, p: PodKey) {
        let now = self.now;
        let svc = &mut self.services[s.ix()];
        if svc.sidecar.is_none() {
            return;
        }
        let pod = svc.pod_mut(p);
        pod.sidecar_avg.touch(now, pod.sidecar_in);
        pod.sidecar_in -= 1;
        self.fill_sidecar(s, p);
    }

    /// Admits sidecar-queued requests while the pod is under its limit.
    pub(crate) fn fill_sidecar(&mut self, s: ServiceId, p: PodKey) {
        let now = self.now;
        loop {
            let svc = &mut self.services[s.ix()];
            let Some(sc) = svc.sidecar else { return };
            let drop_expired = svc.drop_expired;
            let pod = svc.pod_mut(p);
            if pod.sidecar_in >= sc.limit {
                return;
            }
            let Some(Waiter { att: next, .. }) = pod.sidecar_queue.pop_front() else {
                return;
            };
            let Some(a) = self.flight.attempt(next) else {
                continue; // reset while it waited
            };
            let drop = a.abandoned() && drop_expired;
            pod.sidecar_queued -= 1;
            if drop {
                self.reject(next, Cause::Timeout);
                continue;
            }
            pod.sidecar_avg.touch(now, pod.sidecar_in);
            pod.sidecar_in += 1;
            self.app_admit(next, s, p);
        }
    }

    /// A gateway waiter's timer fired (sidecar queues keep one timer a
    /// pod: [`Engine::on_sidecar_expiry`]).
    pub(crate) fn on_queue_timeout(&mut self, att: Key) {
        let Some(a) = self.flight.attempt(att) else {
            return;
        };
        if let (Phase::GatewayQueued, super::ids::Comp::Gateway(g)) = (a.phase, a.comp()) {
            self.on_gateway_queue_timeout(att, g);
        }
    }

    /// The pod's queue-timeout event: the waiters at the front whose
    /// deadline has come leave with a queue timeout, and the event is set
    /// again for the first that stays.
    pub(crate) fn on_sidecar_expiry(&mut self, s: ServiceId, p: PodKey) {
        let now = self.now;
        // The pod may have drained and left, or an earlier event may have
        // taken this one's place.
        let live = self.services[s.ix()]
            .pods
            .get_mut(p.0)
            .is_some_and(|pod| pod.expiry.fire(now));
        if !live {
            return;
        }
        loop {
            let Some(pod) = self.services[s.ix()].pods.get_mut(p.0) else {
                return;
            };
            let Some(&w) = pod.sidecar_queue.front() else {
                return;
            };
            let waiting = self
                .flight
                .attempt(w.att)
                .is_some_and(|a| a.phase == Phase::SidecarQueued);
            if !waiting {
                pod.sidecar_queue.pop_front(); // reset while it waited
                continue;
            }
            if w.deadline > now {
                if let Some(at) = pod.expiry.rearm(w.deadline) {
                    self.queue
                        .schedule(at, super::Ev::SidecarExpiry { svc: s, pod: p });
                }
                return;
            }
            pod.sidecar_queue.pop_front();
            pod.sidecar_queued -= 1;
            self.reject(w.att, Cause::QueueTimeout);
        }
    }

    /// Sets per-pod capacities (already scaled) and admits what now fits.
    pub(crate) fn apply_capacity(
        &mut self,
        svc: ServiceId,
        workers: Option<u32>,
        sidecar_limit: Option<u32>,
    ) {
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

    /// Kills these pods: they stop taking attempts, what they hold is
    /// reset, and they leave.
    pub(crate) fn kill_service_pods(&mut self, svc: ServiceId, victims: &[PodKey]) {
        for &p in victims {
            // Not ready first, so no retry the resets cause lands here.
            self.services[svc.ix()].pod_mut(p).ready = false;
        }
        for &p in victims {
            self.reset_pod(svc, p);
        }
        self.services[svc.ix()].remove_drained();
    }

    /// Fails these pods' app: it refuses every attempt at once until healed.
    pub(crate) fn fail_service_pods(&mut self, svc: ServiceId, victims: &[PodKey]) {
        for &p in victims {
            self.services[svc.ix()].pod_mut(p).failing = true;
        }
        // The app is gone: what it held is reset, as if it crashed.
        for &p in victims {
            self.reset_pod(svc, p);
            let pod = self.services[svc.ix()].pod_mut(p);
            pod.sidecar_queue.clear();
            pod.app_queue.clear();
        }
    }

    /// Every attempt on the pod is answered with a reset; the pod's
    /// counters go to zero with them.
    fn reset_pod(&mut self, svc: ServiceId, p: PodKey) {
        let now = self.now;
        // A fault is a rare operator action: a scan of the slab is fine.
        let mut on_pod = Vec::new();
        self.flight.for_each_attempt(|k, a| {
            if a.comp() == Comp::Service(svc) && a.held == Held::Pod(p) {
                on_pod.push(k);
            }
        });
        let has_sidecar = self.services[svc.ix()].sidecar.is_some();
        for k in on_pod {
            // Delivering one reset starts retries elsewhere; check that
            // each attempt is still here all the same.
            let Some(a) = self.flight.attempt_mut(k) else {
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
}

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
use super::autoscale::Autoscaler;
use super::ids::{PodKey, SeriesId, ServiceId};
use super::line_timer::LineTimer;
use super::scale::FleetScale;
use super::stats::Avg;
use crate::dist::ServiceTime;
use crate::record::Cause;
use crate::slab::{Key, Slab};

#[derive(Debug)]
pub(crate) struct Pod {
    pub(crate) ready: bool,
    /// A `fail_pods` fault: the app refuses every attempt at once.
    pub(crate) failing: bool,
    pub(crate) sidecar_in: u32,
    /// Attempts waiting for a slot, oldest first, so deadlines never
    /// decrease along the line; the keys of attempts that left otherwise
    /// (a reset) stay behind and are skipped.
    pub(crate) sidecar_queue: VecDeque<Waiter>,
    pub(crate) sidecar_queued: u32,
    /// The pod's one sidecar queue-timeout event.
    pub(crate) expiry: LineTimer,
    pub(crate) busy: u32,
    pub(crate) app_queue: VecDeque<Key>,
    pub(crate) app_queued: u32,
    /// Since the last HPA sync.
    pub(crate) busy_avg: Avg,
    pub(crate) sidecar_avg: Avg,
    /// Since the last recording tick (the recording's own average).
    pub(crate) busy_tick: Avg,
}

impl Pod {
    pub(crate) fn new(ready: bool, now: Nanos) -> Pod {
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
    pub(crate) fn load(&self) -> u32 {
        self.sidecar_in + self.sidecar_queued + self.busy + self.app_queued
    }
}

/// An attempt waiting for a sidecar slot, and when it stops waiting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiter {
    pub(crate) att: Key,
    /// [`Nanos::MAX`] when the sidecar has no queue timeout.
    pub(crate) deadline: Nanos,
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
    pub(crate) limit: u32,
    pub(crate) queue_cap: u32,
    pub(crate) queue_timeout: Option<Nanos>,
}

#[derive(Debug)]
pub(crate) struct Service {
    pub(crate) pods: Slab<Pod>,
    /// Live pods in the order they were started: what the balancer picks
    /// from and the HPA reads.
    pub(crate) order: Vec<PodKey>,
    /// Pods being started (ready at a `PodReady` event).
    pub(crate) starting: u32,
    /// `PodReady` events still due for starts a scale-down cancelled.
    pub(crate) cancelled_starts: u32,
    pub(crate) sidecar: Option<Sidecar>,
    pub(crate) workers: u32,
    pub(crate) app_queue_cap: u32,
    /// The cap is [`Limits::default_app_queue`](super::Limits), not the
    /// scenario's: hitting it is reported.
    pub(crate) app_queue_is_default: bool,
    pub(crate) drop_expired: bool,
    pub(crate) service_time: ServiceTime,
    pub(crate) autoscaler: Option<Autoscaler>,
    pub(crate) pod_start: Nanos,
    /// How `--scale` shrinks this service (for capacities set by actions).
    pub(crate) fleet: FleetScale,
    /// Replicas the Deployment wants: the scenario's, then the HPA's.
    pub(crate) desired: u32,
    /// Pods the replica controller may not start yet (`kill_pods` with
    /// `for`: their node is gone).
    pub(crate) unschedulable: u32,
    /// A replica-controller check is scheduled.
    pub(crate) reconcile_armed: bool,
    pub(crate) controller_period: Nanos,
    /// Active `slow_service` actions: (action, factor, add).
    pub(crate) slowdowns: Vec<(u16, f64, Nanos)>,
    /// Their product of factors and sum of added latencies.
    pub(crate) time_factor: f64,
    pub(crate) time_add: Nanos,
    /// The highest `workers` and sidecar limit ever set: after a cut, pods
    /// may hold more than the new limit until they drain (audited bound).
    pub(crate) peak_workers: u32,
    pub(crate) peak_sidecar_limit: u32,
    pub(crate) rng: Pcg64Mcg,
    pub(crate) series: SeriesId,
}

impl Service {
    pub(crate) fn pod(&self, p: PodKey) -> &Pod {
        self.pods
            .get(p.0)
            .expect("a pod with attempts on it is live")
    }

    pub(crate) fn pod_mut(&mut self, p: PodKey) -> &mut Pod {
        self.pods
            .get_mut(p.0)
            .expect("a pod with attempts on it is live")
    }

    pub(crate) fn add_pod(&mut self, now: Nanos) {
        let k = self.pods.insert(Pod::new(true, now));
        self.order.push(PodKey(k));
    }

    /// Removes pods that are neither ready nor holding anything.
    pub(crate) fn remove_drained(&mut self) {
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

    pub(crate) fn ready_pods(&self) -> usize {
        self.order.iter().filter(|&&k| self.pod(k).ready).count()
    }

    /// Recomputes the combined effect of the active slowdowns.
    pub(crate) fn refresh_slowdown(&mut self) {
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
        let Some(&a) = self.flight.attempts.get(att) else {
            return;
        };
        let (super::ids::Comp::Service(s), Held::Pod(p)) = (a.comp, a.held) else {
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
            let Some(a) = self.flight.attempts.get(next) else {
                continue;
            };
            let abandoned = a.abandoned;
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
            let Some(a) = self.flight.attempts.get(next) else {
                continue; // reset while it waited
            };
            let drop = a.abandoned && drop_expired;
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
        let Some(a) = self.flight.attempts.get(att) else {
            return;
        };
        if let (Phase::GatewayQueued, super::ids::Comp::Gateway(g)) = (a.phase, a.comp) {
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
                .attempts
                .get(w.att)
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
}

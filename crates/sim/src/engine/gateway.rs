//! Gateways: a hop that first calls its dependency route (e.g. auth), then
//! forwards, under one retry policy that covers both calls — the
//! "optimistic retries" of 2026-08-17.

use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;

use stormbreak_policy::limit::{LimitConfig, QueueConfig};
use stormbreak_policy::shed::SaturationConfig;

use super::Engine;
use super::admission::{Admission, Admitted, Refusal, Slot};
use super::attempt::{Attempt, Held, Phase, Res};
use super::audit::ensure;
use super::caller::{Caller, Next};
use super::deadline::TimeoutList;
use super::ids::{GatewayId, RouteId, SeriesId};
use super::scale::{FleetScale, scale_gateway};
use crate::queue::Lane;
use crate::record::Cause;
use crate::slab::Key;

#[derive(Debug)]
pub(crate) struct Gateway {
    dependency: Option<RouteId>,
    timeout: TimeoutList,
    caller: Caller,
    rng: Pcg64Mcg,
    /// The gateway's `limit`, one limiter per instance.
    admission: Option<Admission>,
    /// With a `queue`: each instance's waiters in arrival order (keys of
    /// attempts that timed out stay until they reach the front) and the
    /// lane of their queue timeouts.
    waiters: Vec<VecDeque<Key>>,
    queue_lane: Option<Lane>,
    series: SeriesId,
}

impl Gateway {
    /// A gateway as the scenario declares it, `--scale` applied.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        g: &crate::scenario::GatewaySpec,
        scale: f64,
        names: &super::Names<'_>,
        deadlines: &mut super::deadline::Deadlines,
        queue: &mut crate::queue::EventQueue<super::Ev>,
        rng: Pcg64Mcg,
        admission_rng: Pcg64Mcg,
        series: SeriesId,
    ) -> Gateway {
        Gateway {
            dependency: g.dependency.as_ref().map(|d| names.route(d.get_ref())),
            timeout: deadlines.list(g.timeout),
            caller: Caller::new(g.retry.as_ref(), g.budget.as_ref()),
            rng,
            admission: g.limit.as_ref().map(|l| {
                self::admission(
                    l,
                    g.saturation.as_ref(),
                    g.queue.as_ref(),
                    g.instances,
                    scale,
                    admission_rng,
                )
            }),
            waiters: match (&g.limit, &g.queue) {
                (Some(_), Some(_)) => {
                    vec![
                        VecDeque::new();
                        FleetScale::new(g.instances, scale).pods(g.instances) as usize
                    ]
                }
                _ => Vec::new(),
            },
            queue_lane: g
                .limit
                .as_ref()
                .and(g.queue.as_ref())
                .map(|q| queue.lane(q.timeout)),
            series,
        }
    }

    #[inline]
    pub(crate) fn series(&self) -> SeriesId {
        self.series
    }

    /// Its retry policy and budget (a `set_retry` action changes them).
    pub(crate) fn caller_mut(&mut self) -> &mut Caller {
        &mut self.caller
    }

    /// Its limiters, with a `limit`.
    pub(crate) fn admission(&self) -> Option<&Admission> {
        self.admission.as_ref()
    }

    /// Its part of the conservation law: `slots` and `queued` per
    /// instance are what the attempts hold.
    pub(crate) fn audit(
        &self,
        name: &str,
        slots: &[u32],
        queued: &[u32],
    ) -> Result<(), super::AuditError> {
        let Some(adm) = &self.admission else {
            return Ok(());
        };
        for (i, &held) in slots.iter().enumerate() {
            ensure!(
                adm.inflight_of(i as u32) == held,
                "gateway {name}: instance {i} counts {} in flight, {} attempts hold a slot",
                adm.inflight_of(i as u32),
                held
            );
            let waiting = queued[i];
            ensure!(
                adm.waiting_of(i as u32) == waiting,
                "gateway {name}: instance {i} counts {} waiting, {} attempts hold a queue place",
                adm.waiting_of(i as u32),
                waiting
            );
            ensure!(
                self.waiters.get(i).map_or(0, |w| w.len()) >= waiting as usize,
                "gateway {name}: instance {i} has {waiting} waiting but {} keys queued",
                self.waiters.get(i).map_or(0, |w| w.len())
            );
        }
        Ok(())
    }
}

/// A gateway's limiters at `--scale scale`, scaled by
/// [`scale_gateway`](super::scale::scale_gateway) (the law `stormbreak lab`
/// uses too).
pub(crate) fn admission(
    config: &LimitConfig,
    saturation: Option<&SaturationConfig>,
    queue: Option<&QueueConfig>,
    instances: u32,
    scale: f64,
    rng: Pcg64Mcg,
) -> Admission {
    let g = scale_gateway(Some(config), queue, instances, scale);
    Admission::new(
        g.limit.as_ref().expect("a limit was given"),
        saturation,
        g.queue.as_ref(),
        g.instances,
        rng,
    )
    .expect("validated with the scenario")
}

impl Engine {
    pub(crate) fn gateway_enter(&mut self, att: Key, g: GatewayId) {
        let now = self.now;
        let gw = &mut self.gateways[g.ix()];
        if let Some(adm) = &mut gw.admission {
            let class = self.flight.get(att).class();
            match adm.admit(now, class) {
                Ok(Admitted::Now(slot)) => self.flight.get_mut(att).held = Held::Slot(slot),
                Ok(Admitted::Queued { instance }) => {
                    self.flight.enqueue(
                        &mut gw.waiters[instance as usize],
                        adm.waiting_of(instance) as usize,
                        Phase::GatewayQueued,
                        att,
                    );
                    let lane = gw.queue_lane.expect("a gateway with a queue has its lane");
                    let a = self.flight.get_mut(att);
                    a.phase = Phase::GatewayQueued;
                    a.held = Held::Queued(instance);
                    self.queue
                        .schedule_in_lane(lane, now, super::Ev::QueueTimeout { att });
                    return;
                }
                Err(refusal) => {
                    let (cause, retry_after) = match refusal {
                        Refusal::Shed {
                            status,
                            retry_after,
                        } => (Cause::shed(status), retry_after),
                        // The limit's own refusal keeps its cause where its
                        // status is the cause's; another status is a shed.
                        Refusal::Limit {
                            status: 503,
                            retry_after,
                        } => (Cause::LimitRejected, retry_after),
                        Refusal::Limit {
                            status,
                            retry_after,
                        } => (Cause::shed(status), retry_after),
                    };
                    let series = gw.series;
                    self.rec.reject(series);
                    return self.complete(att, Res::Err(cause, retry_after));
                }
            }
        }
        self.gateway_admitted(att, g);
    }

    /// `att` holds its slot (or the gateway has no limit): the call starts.
    fn gateway_admitted(&mut self, att: Key, g: GatewayId) {
        let gw = &mut self.gateways[g.ix()];
        let call = gw.caller.start(self.now);
        let (dependency, timeout) = (gw.dependency, gw.timeout);
        self.flight.start_call(att, call);
        self.flight.get_mut(att).phase = Phase::New;
        match dependency {
            Some(dep) => {
                self.rec.route_acc(dep).first_attempts += 1;
                self.call_dependency(att, g, dep);
            }
            None => self.forward(att, Some(timeout)),
        }
    }

    /// A slot of `instance` came back: the oldest live waiter tries for it
    /// (one per release, as the guard wakes one); one that finds none
    /// waits again at the back.
    fn wake_waiter(&mut self, g: GatewayId, instance: u32) {
        let now = self.now;
        let gw = &mut self.gateways[g.ix()];
        let (Some(adm), Some(waiters)) = (&mut gw.admission, gw.waiters.get_mut(instance as usize))
        else {
            return;
        };
        while let Some(k) = waiters.pop_front() {
            let live = self
                .flight
                .attempt(k)
                .is_some_and(|a| a.phase == Phase::GatewayQueued);
            if !live {
                continue; // timed out in the queue already
            }
            match adm.wake(now, instance) {
                Some(slot) => {
                    self.flight.get_mut(k).held = Held::Slot(slot);
                    return self.gateway_admitted(k, g);
                }
                None => {
                    waiters.push_back(k);
                    return;
                }
            }
        }
    }

    /// A queued attempt's wait timed out: it leaves the queue with the
    /// refusal's answer.
    pub(crate) fn on_gateway_queue_timeout(&mut self, att: Key, g: GatewayId) {
        let Some(adm) = &self.gateways[g.ix()].admission else {
            return;
        };
        let (_, retry_after) = adm.refusal_answer();
        // `complete` gives the queue place back (`gateway_leave_queue`);
        // the key stays in the queue and is skipped as stale later.
        let series = self.gateways[g.ix()].series;
        self.rec.reject(series);
        self.complete(att, Res::Err(Cause::QueueTimeout, retry_after));
    }

    /// An attempt holding a place in `instance`'s queue ended there.
    pub(crate) fn gateway_leave_queue(&mut self, g: GatewayId, instance: u32) {
        if let Some(adm) = &mut self.gateways[g.ix()].admission {
            adm.leave_queue(instance);
        }
    }

    /// The gateway calls its dependency route for `att`.
    fn call_dependency(&mut self, att: Key, g: GatewayId, dep: RouteId) {
        let a = self.flight.get(att);
        let origin = (a.site(), a.class());
        let child = self.new_attempt(dep, 0, super::attempt::Parent::Attempt(att), origin);
        let a = self.flight.get_mut(att);
        a.phase = Phase::DependencyWait;
        a.child = Some(child);
        let timeout = self.gateways[g.ix()].timeout;
        self.arm_timeout(timeout, child);
        self.enter(child);
    }

    /// The dependency call or the forwarded call answered.
    pub(crate) fn gateway_child_outcome(&mut self, p: Key, g: GatewayId, res: Res) {
        let now = self.now;
        let gw = &mut self.gateways[g.ix()];
        let (pa, call) = self.flight.with_call(p);
        match (pa.phase, res) {
            (Phase::DependencyWait, Res::Ok) => {
                let timeout = gw.timeout;
                self.forward(p, Some(timeout));
            }
            (_, Res::Ok) => {
                gw.caller.on_success(call, now, &mut gw.rng);
                self.complete(p, Res::Ok)
            }
            (phase, Res::Err(cause, retry_after)) => {
                // A failed dependency check is retried as a whole check;
                // giving up on it fails the request.
                let (backoff, failed) = if phase == Phase::DependencyWait {
                    (Phase::DependencyBackoff, Res::fail(Cause::DependencyFailed))
                } else {
                    (Phase::Backoff, res)
                };
                match gw
                    .caller
                    .after_failure(call, now, cause, retry_after, &mut gw.rng)
                {
                    Next::RetryAt(t) => {
                        pa.phase = backoff;
                        self.queue.schedule(t, super::Ev::GatewayRetry { att: p });
                    }
                    Next::GiveUp => self.complete(p, failed),
                }
            }
        }
    }

    /// A gateway attempt holding `slot` ended with `res`: the limiter gets
    /// its sample.
    pub(crate) fn gateway_release(&mut self, g: GatewayId, slot: Slot, a: &Attempt, res: Res) {
        let now = self.now;
        if let Some(adm) = &mut self.gateways[g.ix()].admission {
            adm.finish(now, slot, Admission::outcome(res, a.abandoned()));
            if adm.waiting_of(slot.instance) > 0 {
                self.wake_waiter(g, slot.instance);
            }
        }
    }

    pub(crate) fn on_gateway_retry(&mut self, att: Key) {
        let Some(a) = self.flight.attempt(att) else {
            return;
        };
        let super::ids::Comp::Gateway(g) = a.comp() else {
            return;
        };
        let gw = &self.gateways[g.ix()];
        match (a.phase, gw.dependency) {
            (Phase::Backoff, _) => {
                let timeout = gw.timeout;
                self.forward(att, Some(timeout));
            }
            (Phase::DependencyBackoff, Some(dep)) => self.call_dependency(att, g, dep),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::admission;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;
    use stormbreak_policy::limit::{AimdConfig, FixedConfig, LimitConfig};

    fn scaled(config: LimitConfig, instances: u32, scale: f64) -> (u32, u64) {
        let a = admission(
            &config,
            None,
            None,
            instances,
            scale,
            Pcg64Mcg::seed_from_u64(1),
        );
        (a.instances(), a.limit())
    }

    #[test]
    fn a_fixed_limit_keeps_the_fleets_total_and_an_adaptive_one_its_config() {
        let fixed = || LimitConfig::Fixed(FixedConfig { limit: 20 });
        assert_eq!(scaled(fixed(), 4, 1.0), (4, 80));
        assert_eq!(scaled(fixed(), 4, 0.5), (2, 40));
        // 3 × 0.5 = 1.5 instances: 2 of 15, the 30 slots of 1.5 × 20.
        assert_eq!(scaled(fixed(), 3, 0.5), (2, 30));
        // Below one instance the one instance's limit shrinks.
        assert_eq!(scaled(fixed(), 1, 0.1), (1, 2));
        let aimd = LimitConfig::Aimd(AimdConfig {
            initial_limit: 30,
            ..AimdConfig::default()
        });
        assert_eq!(
            scaled(aimd, 3, 0.5),
            (2, 60),
            "each instance starts at its own 30"
        );
    }
}

//! Gateways: a hop that first calls its dependency route (e.g. auth), then
//! forwards, under one retry policy that covers both calls — the
//! "optimistic retries" of 2026-08-17.

use rand_pcg::Pcg64Mcg;

use super::Engine;
use super::attempt::{Phase, Res};
use super::caller::{Caller, Next};
use super::ids::{GatewayId, RouteId, SeriesId};
use crate::queue::Lane;
use crate::record::Cause;
use crate::slab::Key;

#[derive(Debug)]
pub(crate) struct Gateway {
    pub(crate) dependency: Option<RouteId>,
    pub(crate) timeout_lane: Lane,
    pub(crate) caller: Caller,
    pub(crate) rng: Pcg64Mcg,
    pub(crate) series: SeriesId,
}

impl Engine {
    pub(crate) fn gateway_enter(&mut self, att: Key, g: GatewayId) {
        let gw = &mut self.gateways[g.ix()];
        let call = gw.caller.start(self.now);
        let (dependency, lane) = (gw.dependency, gw.timeout_lane);
        self.flight.get_mut(att).call = call;
        match dependency {
            Some(dep) => {
                self.rec.routes[dep.ix()].acc.first_attempts += 1;
                self.call_dependency(att, g, dep);
            }
            None => self.forward(att, Some(lane)),
        }
    }

    /// The gateway calls its dependency route for `att`.
    fn call_dependency(&mut self, att: Key, g: GatewayId, dep: RouteId) {
        let site = self.flight.get(att).site;
        let child = self.new_attempt(dep, 0, super::attempt::Parent::Attempt(att), site);
        let a = self.flight.get_mut(att);
        a.phase = Phase::DependencyWait;
        a.child = Some(child);
        let lane = self.gateways[g.ix()].timeout_lane;
        self.queue
            .schedule_in_lane(lane, self.now, super::Ev::Timeout { att: child });
        self.enter(child);
    }

    /// The dependency call or the forwarded call answered.
    pub(crate) fn gateway_child_outcome(&mut self, p: Key, g: GatewayId, res: Res) {
        let now = self.now;
        let gw = &mut self.gateways[g.ix()];
        let pa = self.flight.get_mut(p);
        match (pa.phase, res) {
            (Phase::DependencyWait, Res::Ok) => {
                let lane = gw.timeout_lane;
                self.forward(p, Some(lane));
            }
            (_, Res::Ok) => {
                gw.caller.on_success(&mut pa.call, now, &mut gw.rng);
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
                    .after_failure(&mut pa.call, now, cause, retry_after, &mut gw.rng)
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

    pub(crate) fn on_gateway_retry(&mut self, att: Key) {
        let Some(a) = self.flight.attempts.get(att) else {
            return;
        };
        let super::ids::Comp::Gateway(g) = a.comp else {
            return;
        };
        let gw = &self.gateways[g.ix()];
        match (a.phase, gw.dependency) {
            (Phase::Backoff, _) => {
                let lane = gw.timeout_lane;
                self.forward(att, Some(lane));
            }
            (Phase::DependencyBackoff, Some(dep)) => self.call_dependency(att, g, dep),
            _ => {}
        }
    }
}

//! Client populations: open-loop arrivals, the client's retries and its
//! fan-out bug, job queues (a worker pool in front of the calls), and the
//! spill to a failover route.
//!
//! Invariant: a population's `busy` equals its logical requests in the
//! slab; a job waits in `backlog` only while every worker is busy.

use rand::Rng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;

use super::Engine;
use super::attempt::{Parent, Res};
use super::caller::{CallState, Caller, Next};
use super::deadline::TimeoutList;
use super::ids::{PopId, RouteId, SiteId};
use super::rate::RateSchedule;
use crate::queue::Lane;
use crate::slab::Key;

/// One logical request of a population.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) pop: PopId,
    /// The route this request uses (primary or failover).
    pub(crate) route: RouteId,
    pub(crate) call: CallState,
    /// Attempts of this request attached or about to be sent (more than
    /// one with fan-out).
    pub(crate) live: u32,
    pub(crate) deadline: Nanos,
    /// The client process it comes from (with `connections`; else 0).
    pub(crate) inst: u32,
}

#[derive(Debug)]
pub(crate) struct Population {
    /// The scenario's name, for messages.
    pub(crate) name: String,
    pub(crate) route: RouteId,
    pub(crate) schedule: RateSchedule,
    pub(crate) timeout: TimeoutList,
    pub(crate) caller: Caller,
    pub(crate) honour_retry_after: bool,
    pub(crate) site: SiteId,
    /// Criticality class of its requests.
    pub(crate) class: stormbreak_policy::shed::Criticality,
    pub(crate) failover_route: Option<RouteId>,
    /// Share of new requests sent to `failover_route`.
    pub(crate) spill: f64,
    /// Bumped when the rate changes, so the arrival drawn at the old rate is dropped.
    pub(crate) arrival_generation: u32,
    /// Whole-run counts for controllers (failover): attempts sent on the
    /// failover route, and logical requests started.
    pub(crate) spilled_total: u64,
    pub(crate) started_total: u64,
    pub(crate) fanout: u32,
    pub(crate) fanout_cap: u32,
    /// Spawned attempts wait a fixed delay (`fanout_delay`): a FIFO lane.
    pub(crate) fanout_lane: Lane,
    pub(crate) give_up_after: Nanos,
    /// Job-queue worker pool: logical requests allowed in flight (`MAX`
    /// without a queue) and in flight now.
    pub(crate) workers: u32,
    pub(crate) busy: u32,
    /// Arrival times of jobs waiting for a worker, oldest first.
    pub(crate) backlog: super::backlog::Backlog,
    /// `Dispatch` events scheduled and not yet handled.
    pub(crate) pending_dispatch: u32,
    /// Most jobs ever waiting at once.
    pub(crate) backlog_peak: u64,
    /// Longest wait of a job dispatched since the last recording tick.
    pub(crate) wait_max: Nanos,
    /// Its processes' keep-alive connections (with `connections`).
    pub(crate) pool: Option<super::conn::Pool>,
    pub(crate) rng: Pcg64Mcg,
}

impl Population {
    pub(crate) fn is_job_queue(&self) -> bool {
        self.workers != u32::MAX
    }
}

impl Engine {
    /// Draws the next arrival of `p` at its current rate.
    pub(crate) fn schedule_arrival(&mut self, p: PopId) {
        let now = self.now;
        let pop = &mut self.pops[p.ix()];
        if let Some(t) = pop.schedule.next_after(now, &mut pop.rng) {
            let generation = pop.arrival_generation;
            self.queue
                .schedule(t, super::Ev::Arrive { pop: p, generation });
        }
    }

    pub(crate) fn on_arrival(&mut self, p: PopId, generation: u32) {
        if self.pops[p.ix()].arrival_generation != generation {
            return; // drawn at a rate that has since changed
        }
        self.schedule_arrival(p);
        let pop = &mut self.pops[p.ix()];
        // Behind the backlog even if a worker has just freed: its
        // `Dispatch` event takes the oldest job first.
        if pop.busy >= pop.workers || !pop.backlog.is_empty() {
            if pop.backlog.len() as u64 >= self.limits.job_backlog {
                let err = super::RunError::InFlight {
                    limit: "job_backlog",
                    at: self.now,
                    component: format!("client {:?}", pop.name),
                    what: format!(
                        "more than {} jobs wait for a worker",
                        self.limits.job_backlog
                    ),
                };
                return self.stop(err);
            }
            pop.backlog.push_back(self.now);
            pop.backlog_peak = pop.backlog_peak.max(pop.backlog.len() as u64);
            return;
        }
        self.start_request(p);
    }

    fn start_request(&mut self, p: PopId) {
        let now = self.now;
        let pop = &mut self.pops[p.ix()];
        if pop.busy >= self.limits.requests_in_flight {
            let err = super::RunError::InFlight {
                limit: "requests_in_flight",
                at: now,
                component: format!("client {:?}", pop.name),
                what: format!(
                    "more than {} requests in flight",
                    self.limits.requests_in_flight
                ),
            };
            return self.stop(err);
        }
        pop.busy += 1;
        pop.started_total += 1;
        let call = pop.caller.start(now);
        let deadline = now.saturating_add(pop.give_up_after);
        let route = match pop.failover_route {
            Some(f) if pop.spill > 0.0 && pop.rng.random::<f64>() < pop.spill => f,
            _ => pop.route,
        };
        self.rec.routes[route.ix()].acc.first_attempts += 1;
        let inst = match &pop.pool {
            Some(pool) => pop.rng.random_range(0..pool.len()),
            None => 0,
        };
        let req = self.flight.requests.insert(Request {
            pop: p,
            route,
            call,
            live: 1,
            deadline,
            inst,
        });
        self.client_send(req);
    }

    /// A logical request is over: its worker takes the oldest waiting job.
    fn finish_request(&mut self, req: Key) {
        let Some(r) = self.flight.requests.remove(req) else {
            return;
        };
        let pop = &mut self.pops[r.pop.ix()];
        pop.busy -= 1;
        if !pop.backlog.is_empty() {
            pop.pending_dispatch += 1;
            // Through the queue, not a direct call: a job that fails on the
            // spot would otherwise start the next one inside this call, and
            // a long backlog would recurse as deep as it is long.
            self.queue.schedule_in_lane(
                self.now_lane,
                self.now,
                super::Ev::Dispatch { pop: r.pop },
            );
        }
    }

    pub(crate) fn on_dispatch(&mut self, p: PopId) {
        let pop = &mut self.pops[p.ix()];
        pop.pending_dispatch -= 1;
        if pop.busy >= pop.workers {
            return;
        }
        if let Some(arrived) = pop.backlog.pop_front() {
            pop.wait_max = pop.wait_max.max(self.now - arrived);
            self.start_request(p);
        }
    }

    fn client_send(&mut self, req: Key) {
        let r = *self.flight.requests.get(req).expect("a live request");
        let pop = &mut self.pops[r.pop.ix()];
        let (timeout, origin) = (pop.timeout, (pop.site, pop.class));
        if r.route != pop.route {
            pop.spilled_total += 1;
        }
        if let Some(pool) = &pop.pool
            && self.routes[r.route.ix()].path[0] == super::ids::Comp::Lb(pool.lb)
            && pool.in_backoff(r.inst, self.now)
        {
            // Failed inside the client: an attempt of the route that never
            // reaches its first hop.
            let acc = &mut self.rec.routes[r.route.ix()].acc;
            acc.attempts += 1;
            acc.errors[crate::record::Cause::Unavailable as usize] += 1;
            return self.client_outcome(req, Res::fail(crate::record::Cause::Unavailable));
        }
        let att = self.new_attempt(r.route, 0, Parent::Client(req), origin);
        self.enter(att);
        if self.flight.attempts.get(att).is_some() {
            self.arm_timeout(timeout, att);
        }
    }

    pub(crate) fn on_client_retry(&mut self, req: Key, sends: u32) {
        for _ in 0..sends {
            if self.flight.requests.get(req).is_some() {
                self.client_send(req);
            }
        }
    }

    /// A client attempt answered (or timed out): retry, fan out or finish.
    pub(crate) fn client_outcome(&mut self, req: Key, res: Res) {
        let now = self.now;
        let Some(r) = self.flight.requests.get_mut(req) else {
            return;
        };
        r.live -= 1;
        let pop = &mut self.pops[r.pop.ix()];
        match res {
            Res::Ok => {
                // With fan-out, the bug's branches are independent loops: a
                // success ends its own branch, not its siblings.
                pop.caller.on_success(&mut r.call, now, &mut pop.rng);
                if pop.fanout == 0 || r.live == 0 {
                    self.finish_request(req);
                }
            }
            Res::Err(cause, retry_after) if pop.fanout > 0 => {
                // The fan-out bug: a failed operation spawns `fanout` new
                // attempts (up to the client's in-flight cap per operation),
                // again on each of their failures, until it gives up.
                pop.caller.on_failure(now, cause);
                if now < r.deadline && pop.caller.is_retryable(cause, retry_after) {
                    let n = pop.fanout.min(pop.fanout_cap.saturating_sub(r.live));
                    r.live += n;
                    if n > 0 {
                        self.queue.schedule_in_lane(
                            pop.fanout_lane,
                            now,
                            super::Ev::ClientRetry { req, sends: n },
                        );
                    }
                }
                if r.live == 0 {
                    self.finish_request(req);
                }
            }
            Res::Err(cause, retry_after) => match pop.caller.after_failure(
                &mut r.call,
                now,
                cause,
                retry_after.filter(|_| pop.honour_retry_after),
                &mut pop.rng,
            ) {
                Next::RetryAt(t) => {
                    r.live += 1;
                    let lane = (t == now).then_some(self.now_lane);
                    match lane {
                        Some(lane) => {
                            self.queue.schedule_in_lane(
                                lane,
                                now,
                                super::Ev::ClientRetry { req, sends: 1 },
                            );
                        }
                        None => self
                            .queue
                            .schedule(t, super::Ev::ClientRetry { req, sends: 1 }),
                    }
                }
                Next::GiveUp => self.finish_request(req),
            },
        }
    }
}

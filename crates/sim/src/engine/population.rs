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
use super::audit::ensure;
use super::caller::{CallState, Caller, Next};
use super::deadline::TimeoutList;
use super::ids::{PopId, RouteId, SiteId};
use super::rate::RateSchedule;
use crate::queue::Lane;
use crate::slab::Key;

/// One logical request of a population.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pop: PopId,
    /// The route this request uses (primary or failover).
    route: RouteId,
    call: CallState,
    /// Attempts of this request attached or about to be sent (more than
    /// one with fan-out).
    live: u32,
    deadline: Nanos,
    /// The client process it comes from (with `connections`; else 0).
    inst: u32,
}

impl Request {
    /// The population it belongs to.
    #[inline]
    pub(crate) fn pop(&self) -> PopId {
        self.pop
    }

    /// The client process it comes from (with `connections`; else 0).
    #[inline]
    pub(crate) fn inst(&self) -> u32 {
        self.inst
    }
}

#[derive(Debug)]
pub(crate) struct Population {
    /// The scenario's name, for messages.
    name: String,
    route: RouteId,
    schedule: RateSchedule,
    timeout: TimeoutList,
    caller: Caller,
    honour_retry_after: bool,
    site: SiteId,
    /// Criticality class of its requests.
    class: stormbreak_policy::shed::Criticality,
    failover_route: Option<RouteId>,
    /// Share of new requests sent to `failover_route`.
    spill: f64,
    /// Bumped when the rate changes, so the arrival drawn at the old rate is dropped.
    arrival_generation: u32,
    /// Whole-run counts for controllers (failover): attempts sent on the
    /// failover route, and logical requests started.
    spilled_total: u64,
    started_total: u64,
    fanout: u32,
    fanout_cap: u32,
    /// Spawned attempts wait a fixed delay (`fanout_delay`): a FIFO lane.
    fanout_lane: Lane,
    give_up_after: Nanos,
    /// Job-queue worker pool: logical requests allowed in flight (`MAX`
    /// without a queue) and in flight now.
    workers: u32,
    busy: u32,
    /// Arrival times of jobs waiting for a worker, oldest first.
    backlog: super::backlog::Backlog,
    /// `Dispatch` events scheduled and not yet handled.
    pending_dispatch: u32,
    /// Most jobs ever waiting at once.
    backlog_peak: u64,
    /// Longest wait of a job dispatched since the last recording tick.
    wait_max: Nanos,
    /// Its processes' keep-alive connections (with `connections`).
    pool: Option<super::conn::Pool>,
    rng: Pcg64Mcg,
}

impl Population {
    /// A client population as the scenario declares it, `--scale` applied
    /// (`steps`: its rate steps, scaled).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        c: &crate::scenario::ClientSpec,
        scale: f64,
        names: &super::Names<'_>,
        deadlines: &mut super::deadline::Deadlines,
        queue: &mut crate::queue::EventQueue<super::Ev>,
        steps: Vec<(Nanos, f64, Nanos)>,
        pool: Option<super::conn::Pool>,
        rng: Pcg64Mcg,
    ) -> Population {
        Population {
            name: c.name.get_ref().clone(),
            route: names.route(c.route.get_ref()),
            schedule: RateSchedule::new(c.rate * scale, &steps).with_diurnal(c.diurnal.as_ref()),
            timeout: deadlines.list(c.timeout),
            caller: Caller::new(c.retry.as_ref(), c.budget.as_ref()),
            honour_retry_after: c.honour_retry_after,
            site: c.site.as_deref().map_or(SiteId(0), |s| names.site(s)),
            class: c.criticality,
            failover_route: c.failover_route.as_ref().map(|f| names.route(f.get_ref())),
            spill: 0.0,
            arrival_generation: 0,
            spilled_total: 0,
            started_total: 0,
            fanout: c.fanout,
            fanout_cap: c.fanout_max_in_flight.unwrap_or(c.fanout.max(1)),
            fanout_lane: queue.lane(c.fanout_delay),
            give_up_after: c.give_up_after.unwrap_or(Nanos::MAX),
            workers: c
                .workers
                .map_or(u32::MAX, |w| super::scale::scaled(w, scale)),
            busy: 0,
            backlog: Default::default(),
            backlog_peak: 0,
            pending_dispatch: 0,
            wait_max: Nanos::ZERO,
            pool,
            rng,
        }
    }

    /// The scenario's name, for messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its retry policy and budget (a `set_retry` action changes them).
    pub(crate) fn caller_mut(&mut self) -> &mut Caller {
        &mut self.caller
    }

    /// Sends `share` of its new requests to its failover route.
    pub(crate) fn set_spill(&mut self, share: f64) {
        self.spill = share;
    }

    /// Whole-run (attempts sent on the failover route, requests started).
    pub(crate) fn spill_totals(&self) -> (u64, u64) {
        (self.spilled_total, self.started_total)
    }

    /// A `set_rate` action: a constant rate from now; the arrival already
    /// drawn at the old rate will be dropped (the caller draws the next).
    pub(crate) fn set_rate(&mut self, now: Nanos, rate: f64) {
        self.schedule = self.schedule.constant_from(now, rate);
        self.arrival_generation += 1;
    }

    /// Most jobs ever waiting at once.
    pub(crate) fn backlog_peak(&self) -> u64 {
        self.backlog_peak
    }

    /// A recording tick: for a job queue, its route and the longest wait
    /// of the interval that ends (which then starts again).
    pub(crate) fn take_job_wait(&mut self, now: Nanos) -> Option<(RouteId, f64)> {
        if !self.is_job_queue() {
            return None;
        }
        let oldest = self.backlog.front().map_or(Nanos::ZERO, |t| now - t);
        let wait = self.wait_max.max(oldest).as_secs_f64();
        self.wait_max = Nanos::ZERO;
        Some((self.route, wait))
    }

    /// Its part of the conservation law: `requests` is what the slab holds
    /// of its logical requests.
    pub(crate) fn audit(&self, p: usize, requests: u32) -> Result<(), super::AuditError> {
        ensure!(
            self.busy == requests,
            "client {p}: busy {} but {} requests in flight",
            self.busy,
            requests
        );
        ensure!(
            self.backlog.is_empty() || self.busy >= self.workers || self.pending_dispatch > 0,
            "client {p}: {} jobs wait with a worker free and no dispatch scheduled",
            self.backlog.len()
        );
        Ok(())
    }

    /// Its processes' keep-alive connections (the `conn` module's state).
    #[inline]
    pub(crate) fn pool(&self) -> Option<&super::conn::Pool> {
        self.pool.as_ref()
    }

    #[inline]
    pub(crate) fn pool_mut(&mut self) -> Option<&mut super::conn::Pool> {
        self.pool.as_mut()
    }

    /// The pool with the randomness of its reconnect backoff.
    #[inline]
    pub(crate) fn pool_and_rng(&mut self) -> (Option<&mut super::conn::Pool>, &mut Pcg64Mcg) {
        (self.pool.as_mut(), &mut self.rng)
    }

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
        self.rec.route_acc(route).first_attempts += 1;
        let inst = match &pop.pool {
            Some(pool) => pop.rng.random_range(0..pool.len()),
            None => 0,
        };
        let req = self.flight.insert_request(Request {
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
        let Some(r) = self.flight.remove_request(req) else {
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
        let r = *self.flight.request(req).expect("a live request");
        let pop = &mut self.pops[r.pop.ix()];
        let (timeout, origin) = (pop.timeout, (pop.site, pop.class));
        if r.route != pop.route {
            pop.spilled_total += 1;
        }
        if let Some(pool) = &pop.pool
            && self.routes[r.route.ix()].hop(0) == super::ids::Comp::Lb(pool.lb())
            && pool.in_backoff(r.inst, self.now)
        {
            // Failed inside the client: an attempt of the route that never
            // reaches its first hop.
            let acc = &mut self.rec.route_acc(r.route);
            acc.attempts += 1;
            acc.errors[crate::record::Cause::Unavailable as usize] += 1;
            return self.client_outcome(req, Res::fail(crate::record::Cause::Unavailable));
        }
        let att = self.new_attempt(r.route, 0, Parent::Client(req), origin);
        self.enter(att);
        if self.flight.attempt(att).is_some() {
            self.arm_timeout(timeout, att);
        }
    }

    pub(crate) fn on_client_retry(&mut self, req: Key, sends: u32) {
        for _ in 0..sends {
            if self.flight.request(req).is_some() {
                self.client_send(req);
            }
        }
    }

    /// A client attempt answered (or timed out): retry, fan out or finish.
    pub(crate) fn client_outcome(&mut self, req: Key, res: Res) {
        let now = self.now;
        let Some(r) = self.flight.request_mut(req) else {
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

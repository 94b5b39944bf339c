//! The recording: per-interval series per route and component, taken at
//! each recording tick. Recording ticks only read the model (and reset
//! their own per-interval averages), so the interval never changes what
//! the simulation does.

use stormbreak_policy::Nanos;

use super::Engine;
use super::ids::{RouteId, SeriesId};
use super::limits::BoundHit;
use super::stats::Little;
use crate::record::{AppliedAction, Cause, ComponentSeries, Recording, RouteAcc, RouteSeries};

/// A route's counters for the current interval and its series so far.
#[derive(Debug)]
pub(crate) struct RouteRec {
    acc: RouteAcc,
    series: RouteSeries,
}

/// Run metadata carried into the [`Recording`].
// Visible (4 fields): plain data the engine's build copies from the
// scenario and the recording copies out; it has no invariant to keep.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) scenario: String,
    pub(crate) seed: u64,
    pub(crate) scale: f64,
    pub(crate) clock_origin_s: u64,
}

#[derive(Debug)]
pub(crate) struct Recorder {
    interval: Nanos,
    routes: Vec<RouteRec>,
    comps: Vec<ComponentSeries>,
    arrivals: Vec<u64>,
    rejected: Vec<u64>,
    little: Vec<Little>,
    applied: Vec<AppliedAction>,
    meta: Meta,
    bound_hits: Vec<BoundHit>,
    /// Events at the last tick, for the events-per-second gauge.
    events_at_tick: u64,
    peak_events_per_s: f64,
}

impl Recorder {
    pub(crate) fn new(interval: Nanos, meta: Meta) -> Self {
        Recorder {
            interval,
            routes: Vec::new(),
            comps: Vec::new(),
            arrivals: Vec::new(),
            rejected: Vec::new(),
            little: Vec::new(),
            applied: Vec::new(),
            meta,
            bound_hits: Vec::new(),
            events_at_tick: 0,
            peak_events_per_s: 0.0,
        }
    }

    pub(crate) fn add_component(&mut self, name: &str, kind: &'static str) -> SeriesId {
        self.comps.push(ComponentSeries {
            name: name.to_owned(),
            kind: kind.to_owned(),
            ..Default::default()
        });
        self.arrivals.push(0);
        self.rejected.push(0);
        self.little.push(Little::default());
        SeriesId::new(self.comps.len() - 1)
    }

    pub(crate) fn add_route(&mut self, name: &str) {
        self.routes.push(RouteRec {
            acc: RouteAcc::new(),
            series: RouteSeries {
                name: name.to_owned(),
                ..Default::default()
            },
        });
    }

    #[inline]
    pub(crate) fn interval(&self) -> Nanos {
        self.interval
    }

    pub(crate) fn comp_count(&self) -> usize {
        self.comps.len()
    }

    pub(crate) fn comp(&self, c: SeriesId) -> &ComponentSeries {
        &self.comps[c.ix()]
    }

    /// A component's name in the scenario, for messages.
    pub(crate) fn comp_name(&self, c: SeriesId) -> &str {
        &self.comps[c.ix()].name
    }

    /// A route's counters for the current interval.
    #[inline]
    pub(crate) fn route_acc(&mut self, r: RouteId) -> &mut RouteAcc {
        &mut self.routes[r.ix()].acc
    }

    pub(crate) fn route_name(&self, r: RouteId) -> &str {
        &self.routes[r.ix()].series.name
    }

    /// An action (or its end) as the recording lists it.
    pub(crate) fn applied(&mut self, at: Nanos, what: String) {
        self.applied.push(AppliedAction { at, what });
    }

    pub(crate) fn bound_hits(&self) -> &[BoundHit] {
        &self.bound_hits
    }

    #[inline]
    pub(crate) fn arrive(&mut self, c: SeriesId, now: Nanos) {
        self.arrivals[c.ix()] += 1;
        self.little[c.ix()].arrive(now);
    }

    #[inline]
    pub(crate) fn depart(&mut self, c: SeriesId, now: Nanos, sojourn: Nanos) {
        self.little[c.ix()].depart(now, sojourn);
    }

    #[inline]
    pub(crate) fn reject(&mut self, c: SeriesId) {
        self.rejected[c.ix()] += 1;
    }

    /// A default bound refused a request at component `c`.
    pub(crate) fn bound_hit(&mut self, bound: &'static str, c: SeriesId, now: Nanos) {
        let component = &self.comps[c.ix()].name;
        match self
            .bound_hits
            .iter_mut()
            .find(|h| h.bound == bound && h.component == *component)
        {
            Some(h) => h.count += 1,
            None => self.bound_hits.push(BoundHit {
                bound: bound.to_owned(),
                component: component.clone(),
                count: 1,
                first_at: now,
            }),
        }
    }

    /// Attempts present at each component now (Little's `L` gauge).
    pub(crate) fn present(&self, c: SeriesId) -> u64 {
        self.little[c.ix()].present()
    }
}

impl Engine {
    pub(crate) fn on_tick(&mut self) {
        // Reading a connection count closes what expired first (lazy
        // expiry, exact where observed).
        self.expire_all_idle();
        let now = self.now;
        if now < self.end {
            self.queue
                .schedule(now + self.rec.interval, super::Ev::Tick);
        }
        let rec = &mut self.rec;
        let events = self.events - rec.events_at_tick;
        rec.events_at_tick = self.events;
        rec.peak_events_per_s = rec
            .peak_events_per_s
            .max(events as f64 / (rec.interval.as_nanos() as f64 / 1e9));
        for pop in &mut self.pops {
            let Some((route, wait)) = pop.take_job_wait(now) else {
                continue;
            };
            let series = &mut rec.routes[route.ix()].series;
            let i = series.attempts.len();
            if series.job_wait_s.len() <= i {
                series.job_wait_s.resize(i + 1, 0.0);
            }
            series.job_wait_s[i] = series.job_wait_s[i].max(wait);
        }
        for r in &mut rec.routes {
            let acc = &mut r.acc;
            let s = &mut r.series;
            s.first_attempts.push(acc.first_attempts);
            s.attempts.push(acc.attempts);
            s.successes.push(acc.successes);
            s.errors.push(acc.errors);
            let h = &acc.latency_us;
            let ms = |us: u64| us as f64 / 1000.0;
            s.latency_mean_ms.push(if acc.successes == 0 {
                0.0
            } else {
                acc.latency_sum_ns / acc.successes as f64 / 1e6
            });
            acc.latency_sum_ns = 0.0;
            s.latency_ms.push(if h.is_empty() {
                [0.0; 4]
            } else {
                [
                    ms(h.value_at_quantile(0.5)),
                    ms(h.value_at_quantile(0.9)),
                    ms(h.value_at_quantile(0.99)),
                    ms(h.max()),
                ]
            });
            acc.first_attempts = 0;
            acc.attempts = 0;
            acc.successes = 0;
            acc.errors = [0; Cause::ALL.len()];
            acc.latency_us.reset();
        }
        for (ci, c) in rec.comps.iter_mut().enumerate() {
            c.arrivals.push(std::mem::take(&mut rec.arrivals[ci]));
            c.rejected.push(std::mem::take(&mut rec.rejected[ci]));
        }
        for lb in self.lbs.iter() {
            let c = &mut rec.comps[lb.series().ix()];
            let running = lb.running_nodes();
            c.in_flight.push(lb.flows_in_use() as f64);
            c.limit.push(lb.capacity() as f64);
            if let Some(open) = lb.open_conns() {
                c.connections.push(open as f64);
            }
            c.queue.push(0.0);
            c.replicas.push(running as f64);
            c.app_utilisation.push(0.0);
        }
        for gw in &self.gateways {
            let c = &mut rec.comps[gw.series().ix()];
            // A gateway without a limit has no gauge of its own.
            let (inflight, limit, waiting, instances) =
                gw.admission().map_or((0.0, 0.0, 0.0, 0.0), |a| {
                    (
                        a.inflight() as f64,
                        a.limit() as f64,
                        a.waiting() as f64,
                        a.instances() as f64,
                    )
                });
            c.in_flight.push(inflight);
            c.limit.push(limit);
            c.queue.push(waiting);
            c.replicas.push(instances);
            c.app_utilisation.push(0.0);
        }
        for svc in &mut self.services {
            svc.record_tick(now, &mut rec.comps[svc.series().ix()]);
        }
    }

    /// The recording so far (call after the run).
    pub fn finish(mut self) -> Recording {
        let end = self.now;
        let rec = &mut self.rec;
        for (c, l) in rec.comps.iter_mut().zip(&mut rec.little) {
            c.little = l.totals(end);
        }
        let rec = self.rec;
        // A stopped run's recording ends with its last whole interval.
        let duration = if self.stopped.is_some() {
            let whole = rec.routes.first().map_or(0, |r| r.series.attempts.len());
            rec.interval * whole as u64
        } else {
            self.end
        };
        Recording {
            scenario: rec.meta.scenario,
            seed: rec.meta.seed,
            scale: rec.meta.scale,
            interval: rec.interval,
            duration,
            clock_origin_s: rec.meta.clock_origin_s,
            routes: rec.routes.into_iter().map(|r| r.series).collect(),
            components: rec.comps,
            actions: rec.applied,
            events: self.events,
            attempts: self.flight.created(),
            peak_in_flight: self.flight.peak(),
            peak_events_per_s: rec.peak_events_per_s,
            peak_job_backlog: self
                .pops
                .iter()
                .map(|p| p.backlog_peak())
                .max()
                .unwrap_or(0),
            bounds_hit: rec.bound_hits,
        }
    }
}

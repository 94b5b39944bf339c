//! Per-interval accounting of a lab run, finished into the simulator's
//! [`Recording`] (same intervals, same series, so `stormbreak report`
//! renders it) plus the figures only a real run has ([`LabSeries`]).
//!
//! Events are filed by the interval of the wall-clock instant they happen
//! at, counted from the run's start, as the simulator files them by
//! virtual time. Memory is one slot per interval and entity (at most
//! `plan::MAX_INTERVALS` intervals), histograms included.

use std::sync::{Mutex, PoisonError};

use hdrhistogram::Histogram;
use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::record::{Cause, ComponentSeries, LittleTotals, RouteSeries};
use tokio::time::Instant;

use crate::plan::LabPlan;

fn histogram() -> Histogram<u64> {
    // 1 µs to 1 h at 2 significant digits, as the simulator's.
    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("static bounds")
}

fn record_us(h: &mut Option<Histogram<u64>>, d: Nanos) {
    h.get_or_insert_with(histogram)
        .saturating_record((d.as_nanos() / 1000).max(1));
}

#[derive(Default)]
struct RouteSlot {
    first_attempts: u64,
    attempts: u64,
    successes: u64,
    errors: [u64; Cause::ALL.len()],
    latency: Option<Histogram<u64>>,
    latency_sum_ns: f64,
    intended: u64,
    dropped: u64,
    unclassified: u64,
    logical_ok: u64,
    logical_failed: u64,
    corrected: Option<Histogram<u64>>,
    raw: Option<Histogram<u64>>,
}

#[derive(Default, Clone, Copy)]
struct CompSlot {
    arrivals: u64,
    rejected: u64,
    in_flight: f64,
    limit: f64,
    queue: f64,
    replicas: f64,
    app_utilisation: f64,
}

/// The run's recorder, shared by every task of the run.
pub struct Recorder {
    start: Instant,
    interval: Nanos,
    intervals: usize,
    routes: Vec<Mutex<Vec<RouteSlot>>>,
    comps: Vec<Mutex<Vec<CompSlot>>>,
}

/// Gauges of one component at the end of an interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// Sidecar in flight (or app busy workers without a sidecar).
    pub in_flight: f64,
    /// What `in_flight` is measured against.
    pub limit: f64,
    /// Waiting in the sidecar and app queues.
    pub queue: f64,
    /// Pods.
    pub replicas: f64,
    /// Time-averaged busy workers / workers over the interval.
    pub app_utilisation: f64,
}

/// Counts of one route in one interval made by a guard, not a client
/// (a gateway's dependency calls).
#[derive(Debug, Clone, Default)]
pub struct RouteCounts {
    /// Logical calls started.
    pub first_attempts: u64,
    /// Calls made, retries included.
    pub attempts: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Failed calls by cause.
    pub errors: Vec<(Cause, u64)>,
    /// Of them, answers with no cause of their own.
    pub unclassified: u64,
}

/// Lab-only figures of one route, one value per interval (`lab.json`).
#[derive(Debug, Clone, Serialize)]
pub struct LabSeries {
    /// Route name.
    pub name: String,
    /// Sends the schedule intended.
    pub intended: Vec<u64>,
    /// Intended sends not made: the population had its cap of requests
    /// in flight.
    pub dropped: Vec<u64>,
    /// Attempts answered with a status the lab does not map to a cause
    /// (counted as `unavailable` in the recording).
    pub unclassified: Vec<u64>,
    /// Logical requests that ended in success / in failure.
    pub requests_ok: Vec<u64>,
    /// Logical requests that ended in failure.
    pub requests_failed: Vec<u64>,
    /// Latency of logical requests from their **intended** send time
    /// (coordinated omission corrected), ms: p50, p90, p99, max.
    pub corrected_ms: Vec<[f64; 4]>,
    /// Latency of logical requests from their actual first send, ms.
    pub raw_ms: Vec<[f64; 4]>,
}

fn quantiles(h: &Option<Histogram<u64>>) -> [f64; 4] {
    match h {
        Some(h) if !h.is_empty() => {
            let ms = |us: u64| us as f64 / 1000.0;
            [
                ms(h.value_at_quantile(0.5)),
                ms(h.value_at_quantile(0.9)),
                ms(h.value_at_quantile(0.99)),
                ms(h.max()),
            ]
        }
        _ => [0.0; 4],
    }
}

impl Recorder {
    /// A recorder for `plan`'s routes and services, its clock starting at
    /// `start`.
    pub fn new(plan: &LabPlan, start: Instant) -> Self {
        let n = plan.intervals();
        Recorder {
            start,
            interval: plan.interval,
            intervals: n,
            routes: plan
                .routes
                .iter()
                .map(|_| Mutex::new((0..n).map(|_| RouteSlot::default()).collect()))
                .collect(),
            comps: (0..plan.lbs.len() + plan.gateways.len() + plan.services.len())
                .map(|_| Mutex::new(vec![CompSlot::default(); n]))
                .collect(),
        }
    }

    /// The run's time zero.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Time since the start.
    pub fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.start))
    }

    fn slot(&self, t: Nanos) -> Option<usize> {
        let i = (t.as_nanos() / self.interval.as_nanos()) as usize;
        (i < self.intervals).then_some(i)
    }

    fn route(&self, r: usize, t: Nanos, f: impl FnOnce(&mut RouteSlot)) {
        if let Some(i) = self.slot(t) {
            let mut v = self.routes[r]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            f(&mut v[i]);
        }
    }

    fn comp(&self, c: usize, t: Nanos, f: impl FnOnce(&mut CompSlot)) {
        if let Some(i) = self.slot(t) {
            let mut v = self.comps[c].lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut v[i]);
        }
    }

    /// The schedule meant to send at `intended`; `sent` says whether it did.
    pub fn intended(&self, route: usize, intended: Nanos, sent: bool) {
        self.route(route, intended, |s| {
            s.intended += 1;
            if sent {
                s.first_attempts += 1;
            } else {
                s.dropped += 1;
            }
        });
    }

    /// An attempt enters the route's first hop, component `comp` when
    /// the client counts its arrivals (`None`: counted at its parts).
    pub fn attempt(&self, route: usize, comp: Option<usize>) {
        let t = self.now();
        self.route(route, t, |s| s.attempts += 1);
        if let Some(c) = comp {
            self.comp(c, t, |c| c.arrivals += 1);
        }
    }

    /// Arrivals and refusals of component `c` in interval `i` counted at
    /// its parts (a hop the client does not reach itself).
    pub fn part_counts(&self, c: usize, i: usize, arrivals: u64, rejected: u64) {
        let mut v = self.comps[c].lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = v.get_mut(i) {
            s.arrivals += arrivals;
            s.rejected += rejected;
        }
    }

    /// An attempt succeeded after `latency`.
    pub fn success(&self, route: usize, latency: Nanos) {
        self.route(route, self.now(), |s| {
            s.successes += 1;
            s.latency_sum_ns += latency.as_nanos() as f64;
            record_us(&mut s.latency, latency);
        });
    }

    /// An attempt failed with `cause`; `refused` when its first hop,
    /// component `comp`, refused it (its `rejected` counter); `unclassified` when the answer
    /// had no cause of its own.
    pub fn failure(
        &self,
        route: usize,
        comp: usize,
        cause: Cause,
        refused: bool,
        unclassified: bool,
    ) {
        let t = self.now();
        let k = Cause::ALL
            .iter()
            .position(|&c| c == cause)
            .expect("a cause");
        self.route(route, t, |s| {
            s.errors[k] += 1;
            s.unclassified += u64::from(unclassified);
        });
        if refused {
            self.comp(comp, t, |c| c.rejected += 1);
        }
    }

    /// Adds `counts` to route `route` in interval `i`.
    pub fn route_counts(&self, route: usize, i: usize, counts: &RouteCounts) {
        let mut v = self.routes[route]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = v.get_mut(i) {
            s.first_attempts += counts.first_attempts;
            s.attempts += counts.attempts;
            s.successes += counts.successes;
            s.unclassified += counts.unclassified;
            for (cause, n) in &counts.errors {
                let k = Cause::ALL.iter().position(|c| c == cause).expect("a cause");
                s.errors[k] += n;
            }
        }
    }

    /// A logical request ended: `corrected` from its intended send time,
    /// `raw` from its first actual send.
    pub fn request_done(&self, route: usize, ok: bool, corrected: Nanos, raw: Nanos) {
        self.route(route, self.now(), |s| {
            if ok {
                s.logical_ok += 1;
            } else {
                s.logical_failed += 1;
            }
            record_us(&mut s.corrected, corrected);
            record_us(&mut s.raw, raw);
        });
    }

    /// Gauges of component `c` at the end of interval `i`.
    pub fn gauges(&self, c: usize, i: usize, g: Gauges) {
        let mut v = self.comps[c].lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = v.get_mut(i) {
            s.in_flight = g.in_flight;
            s.limit = g.limit;
            s.queue = g.queue;
            s.replicas = g.replicas;
            s.app_utilisation = g.app_utilisation;
        }
    }

    /// Route totals over the whole run: (intended, dropped, unclassified).
    pub fn send_totals(&self) -> (u64, u64, u64) {
        let mut t = (0, 0, 0);
        for r in &self.routes {
            for s in r.lock().unwrap_or_else(PoisonError::into_inner).iter() {
                t.0 += s.intended;
                t.1 += s.dropped;
                t.2 += s.unclassified;
            }
        }
        t
    }

    /// The simulator's recording of the run, and the lab-only series.
    /// `little` holds each service's whole-run Little's-law figures.
    pub fn finish(&self, plan: &LabPlan, little: &[LittleTotals]) -> (Recording, Vec<LabSeries>) {
        let mut routes = Vec::new();
        let mut lab = Vec::new();
        let mut attempts_total = 0;
        for (name, r) in plan.routes.iter().zip(&self.routes) {
            let slots = r.lock().unwrap_or_else(PoisonError::into_inner);
            let mut s = RouteSeries {
                name: name.clone(),
                ..Default::default()
            };
            let mut l = LabSeries {
                name: name.clone(),
                intended: vec![],
                dropped: vec![],
                unclassified: vec![],
                requests_ok: vec![],
                requests_failed: vec![],
                corrected_ms: vec![],
                raw_ms: vec![],
            };
            for x in slots.iter() {
                attempts_total += x.attempts;
                s.first_attempts.push(x.first_attempts);
                s.attempts.push(x.attempts);
                s.successes.push(x.successes);
                s.errors.push(x.errors);
                s.latency_ms.push(quantiles(&x.latency));
                s.latency_mean_ms.push(if x.successes == 0 {
                    0.0
                } else {
                    x.latency_sum_ns / x.successes as f64 / 1e6
                });
                l.intended.push(x.intended);
                l.dropped.push(x.dropped);
                l.unclassified.push(x.unclassified);
                l.requests_ok.push(x.logical_ok);
                l.requests_failed.push(x.logical_failed);
                l.corrected_ms.push(quantiles(&x.corrected));
                l.raw_ms.push(quantiles(&x.raw));
            }
            routes.push(s);
            lab.push(l);
        }
        // LB pools first, then gateways, then services, as the simulator
        // adds them; a pool's Little's-law figures are zeros (the lab does
        // not time an attempt's stay at a guard).
        let lbs = plan.lbs.iter().map(|l| (&l.name, "lb"));
        let gateways = plan.gateways.iter().map(|g| (&g.name, "gateway"));
        let services = plan.services.iter().map(|s| (&s.name, "service"));
        let no_little = LittleTotals {
            mean_in_system: 0.0,
            throughput_per_s: 0.0,
            mean_sojourn_s: 0.0,
        };
        let littles = plan
            .lbs
            .iter()
            .map(|_| &no_little)
            .chain(plan.gateways.iter().map(|_| &no_little))
            .chain(little);
        let components = lbs
            .chain(gateways)
            .chain(services)
            .zip(&self.comps)
            .zip(littles)
            .map(|(((name, kind), c), little)| {
                let slots = c.lock().unwrap_or_else(PoisonError::into_inner);
                ComponentSeries {
                    name: name.clone(),
                    kind: kind.to_owned(),
                    arrivals: slots.iter().map(|s| s.arrivals).collect(),
                    rejected: slots.iter().map(|s| s.rejected).collect(),
                    in_flight: slots.iter().map(|s| s.in_flight).collect(),
                    limit: slots.iter().map(|s| s.limit).collect(),
                    queue: slots.iter().map(|s| s.queue).collect(),
                    replicas: slots.iter().map(|s| s.replicas).collect(),
                    app_utilisation: slots.iter().map(|s| s.app_utilisation).collect(),
                    connections: vec![],
                    little: *little,
                }
            })
            .collect();
        let rec = Recording {
            scenario: plan.name.clone(),
            seed: plan.seed,
            scale: plan.scale,
            interval: plan.interval,
            duration: plan.duration,
            clock_origin_s: plan.clock_origin_s,
            routes,
            components,
            actions: vec![],
            // A lab run has no events; its attempts are the first hops'.
            events: 0,
            attempts: attempts_total,
            peak_in_flight: 0,
            peak_events_per_s: 0.0,
            peak_job_backlog: 0,
            bounds_hit: vec![],
        };
        (rec, lab)
    }
}

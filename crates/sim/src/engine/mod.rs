//! The discrete-event engine: builds the runtime topology from a
//! [`Scenario`] and plays it in virtual time.
//!
//! This file holds the event loop, the dispatch and the clock; each
//! mechanism owns its state and its handlers in a sibling module:
//!
//! | module | mechanism |
//! |---|---|
//! | `attempt` | an attempt's life: hops, answers, timeouts, the conservation ledger |
//! | `deadline` | callers' per-try timeouts: a list a duration through the attempts, one event a list |
//! | `line_timer` | the one event of a FIFO line whose deadlines never decrease (timeout lists, sidecar queues) |
//! | `population` | client populations: arrivals, client retries, fan-out, job queues |
//! | `rate` | the arrival law (piecewise-linear rate, daily cycle) |
//! | `lb` | LB pools: nodes and flows, shed rules, admission gates, staged restores |
//! | `conn` | client connections at an LB (`maxconn`, keep-alive, reconnect backoff) |
//! | `gateway` | the dependency call and the gateway's retries |
//! | `service` | pods: sidecar, app workers, queues, least-request balancing |
//! | `autoscale` | the HPA on its own sync clock, pods started and drained |
//! | `failover` | the capacity-aware failover controller on its own period |
//! | `timeline` | operator actions, names resolved at build |
//! | `fault` | capacity triggers and faults (slow, cut, kill, fail, stall, LB limits), their undoing after `for`, the replica controller |
//! | `caller` | retry policy + budget of a client or gateway (policy crate) |
//! | `recorder` | per-interval series, read at recording ticks only |
//! | `audit` | the conservation law, checked |
//!
//! # How an attempt moves
//! Every call between two hops is an *attempt* in a slab. A caller (a client
//! population, or a gateway) creates the attempt at a route's hop `h`; the
//! component at that hop either answers it (a service) or holds a resource
//! and creates a child attempt at hop `h + 1` (an LB node holds a *flow*, a
//! gateway first calls its dependency route). Answers travel back up the
//! parent chain, releasing what each hop held. Because an LB flow is held for
//! the child's whole life, slowness downstream exhausts flows upstream — the
//! mechanism of 2026-08-17, emerging rather than scripted.
//!
//! When a caller's per-try timeout fires, it *detaches* the attempt and
//! decides (retry or give up); the detached attempt keeps running and keeps
//! its resources until it finishes (wasted work), unless the service drops
//! expired work from its queues.
//!
//! # Clocks
//! Control loops run on their own clocks — the HPA every `sync_period`, a
//! failover controller every `period`, a staged restore when its policy's
//! `poll_timeout()` says it may change — never on the recording tick, so
//! `interval` only sets the resolution of the charts.
//!
//! # Determinism
//! One seeded RNG stream per entity (client population, gateway, service),
//! ties in the event queue broken by scheduling order, no hash-map iteration
//! anywhere: same scenario, seed and scale give byte-identical recordings.

// Test seam: public only for `crates/equivalence` (feature `testing`).
#[cfg(feature = "testing")]
pub mod admission;
#[cfg(not(feature = "testing"))]
mod admission;
mod attempt;
mod audit;
pub mod autoscale;
mod backlog;
// Test seam: public only for `crates/equivalence` (feature `testing`).
#[cfg(feature = "testing")]
pub mod caller;
#[cfg(not(feature = "testing"))]
mod caller;
mod conn;
mod deadline;
mod failover;
mod fault;
mod gateway;
mod ids;
mod lb;
mod limits;
mod line_timer;
mod population;
// Test seam: public only for `crates/equivalence` (feature `testing`).
#[cfg(feature = "testing")]
pub mod ramp;
#[cfg(not(feature = "testing"))]
mod ramp;
pub mod rate;
mod recorder;
pub mod scale;
mod service;
mod stats;
mod timeline;

use std::collections::HashMap;

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::failover::Failover;

pub use attempt::Res;
pub use audit::AuditError;
pub use limits::{BUDGET_WINDOW, BoundHit, Limits, RunError, Stopped};

use self::attempt::Flight;
use self::deadline::TimeoutList;
use self::failover::FailoverCtl;
use self::gateway::Gateway;
use self::ids::{Comp, GatewayId, LbId, PodKey, PopId, RouteId, SeriesId, ServiceId, SiteId};
use self::lb::{Lb, LbPools};
use self::population::Population;

use self::recorder::{Meta, Recorder};
use self::scale::scaled;
use self::service::Service;
use self::timeline::Planned;
use crate::queue::{EventQueue, Lane};
use crate::record::Recording;
use crate::scenario::{ComponentRef, Scenario, parse_clock};
use crate::slab::Key;

/// Options that change a run without changing its scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Fraction of the traffic to simulate, with capacities scaled alike.
    pub scale: f64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: None,
            scale: 1.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Ev {
    Arrive {
        pop: PopId,
        generation: u32,
    },
    /// A job-queue worker freed: start the oldest waiting job.
    Dispatch {
        pop: PopId,
    },
    Done {
        att: Key,
    },
    /// A per-try timeout list's one event (see `deadline`).
    Timeout {
        list: TimeoutList,
    },
    /// A gateway waiter's queue timeout.
    QueueTimeout {
        att: Key,
    },
    /// A pod's one sidecar queue timer (see `service`).
    SidecarExpiry {
        svc: ServiceId,
        pod: PodKey,
    },
    /// A client sends `sends` attempts of a request, one after another
    /// (more than one only for the fan-out bug's burst: one event instead
    /// of `sends` back to back at the same instant, the same order).
    ClientRetry {
        req: Key,
        sends: u32,
    },
    GatewayRetry {
        att: Key,
    },
    /// A recording tick: reads the model, changes nothing in it.
    Tick,
    Autoscale {
        svc: ServiceId,
    },
    PodReady {
        svc: ServiceId,
    },
    Action {
        idx: u16,
    },
    RampWake {
        lb: LbId,
        route: RouteId,
        epoch: u32,
    },
    FailoverPlan {
        idx: u16,
    },
    /// A timed action's `for` has run out: undo it.
    Revert {
        idx: u16,
    },
    /// The replica controller checks a service for missing pods.
    Reconcile {
        svc: ServiceId,
    },
}

impl Ev {
    /// A stable fingerprint of the event, for the event-log digest.
    fn fingerprint(&self) -> [u64; 2] {
        let key = |k: &Key| (u64::from(k.index) << 32) | u64::from(k.generation);
        match self {
            Ev::Arrive { pop, generation } => {
                [1, (u64::from(pop.0) << 32) | u64::from(*generation)]
            }
            Ev::Dispatch { pop } => [2, u64::from(pop.0)],
            Ev::Done { att } => [3, key(att)],
            Ev::Timeout { list } => [4, u64::from(list.index())],
            Ev::QueueTimeout { att } => [5, key(att)],
            Ev::ClientRetry { req, sends } => [6, key(req) ^ (u64::from(*sends) << 56)],
            Ev::GatewayRetry { att } => [7, key(att)],
            Ev::Tick => [8, 0],
            Ev::Autoscale { svc } => [9, u64::from(svc.0)],
            Ev::PodReady { svc } => [10, u64::from(svc.0)],
            Ev::Action { idx } => [11, u64::from(*idx)],
            Ev::RampWake { lb, route, epoch } => [
                12,
                (u64::from(lb.0) << 48) | (u64::from(route.0) << 32) | u64::from(*epoch),
            ],
            Ev::FailoverPlan { idx } => [13, u64::from(*idx)],
            Ev::Revert { idx } => [14, u64::from(*idx)],
            Ev::Reconcile { svc } => [15, u64::from(svc.0)],
            Ev::SidecarExpiry { svc, pod } => [16, (u64::from(svc.0) << 48) ^ key(&pod.0)],
        }
    }
}

/// The route table of the model: each route's components, hop by hop.
#[derive(Debug)]
pub(crate) struct Route {
    path: Vec<Comp>,
}

impl Route {
    /// The component at hop `h`.
    #[inline]
    pub(crate) fn hop(&self, h: u8) -> Comp {
        self.path[h as usize]
    }
}

/// The simulator for one scenario run.
pub struct Engine {
    now: Nanos,
    end: Nanos,
    queue: EventQueue<Ev>,
    /// The zero-delay lane: events due at once, in FIFO order.
    now_lane: Lane,
    /// Callers' per-try timeouts, a list a duration.
    deadlines: deadline::Deadlines,
    events: u64,
    /// Events but recording ticks: what the work budget counts.
    work: u64,
    scale: f64,
    /// FNV-1a over (time, event) of every event but recording ticks.
    digest: u64,
    flight: Flight,
    routes: Vec<Route>,
    pops: Vec<Population>,
    lbs: LbPools,
    gateways: Vec<Gateway>,
    services: Vec<Service>,
    failovers: Vec<FailoverCtl>,
    timeline: Vec<Planned>,
    /// What each action changed, to undo it after its `for`.
    undo: Vec<fault::Undo>,
    /// Stalls in force, per component series.
    stalls: fault::Stalls,
    rec: Recorder,
    limits: Limits,
    /// The scenario's `[limits]`: what [`Engine::with_limits`] lowers to.
    lowering: crate::scenario::LimitsSpec,
    /// Set by the first bound hit that stops the run.
    stopped: Option<RunError>,
    budget: Budget,
}

/// The work budget's window: events since the last check, by kind.
#[derive(Debug, Clone, Copy, Default)]
struct Budget {
    since_events: u64,
    since_now: Nanos,
    by_kind: [u64; EV_KINDS],
    last: Option<Ev>,
}

const EV_KINDS: usize = 17;
const EV_NAMES: [&str; EV_KINDS] = [
    "-",
    "arrivals",
    "job dispatches",
    "service completions",
    "timeouts",
    "gateway queue timeouts",
    "client retries",
    "gateway retries",
    "recording ticks",
    "autoscaler syncs",
    "pod starts",
    "actions",
    "ramp wake-ups",
    "failover plans",
    "action ends",
    "replica controller checks",
    "sidecar queue timeouts",
];

fn entity_rng(seed: u64, stream: u64) -> Pcg64Mcg {
    // SplitMix64 of (seed, stream): independent, portable per-entity streams.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Pcg64Mcg::seed_from_u64(z ^ (z >> 31))
}

/// Name → handle tables of one validated scenario, used while building.
pub(crate) struct Names<'a> {
    comps: HashMap<&'a str, ComponentRef>,
    routes: HashMap<&'a str, RouteId>,
    clients: HashMap<&'a str, PopId>,
    /// Site labels in order of first appearance.
    sites: Vec<String>,
}

impl<'a> Names<'a> {
    fn new(sc: &'a Scenario) -> Self {
        let mut sites: Vec<String> = Vec::new();
        for s in sc.clients.iter().filter_map(|c| c.site.as_ref()) {
            if !sites.contains(s) {
                sites.push(s.clone());
            }
        }
        Names {
            comps: sc.components(),
            routes: sc
                .routes
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name.get_ref().as_str(), RouteId::new(i)))
                .collect(),
            clients: sc
                .clients
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.get_ref().as_str(), PopId::new(i)))
                .collect(),
            sites,
        }
    }

    pub(crate) fn comp(&self, name: &str) -> Comp {
        match self.comps.get(name) {
            Some(ComponentRef::Lb(i)) => Comp::Lb(LbId::new(*i)),
            Some(ComponentRef::Gateway(i)) => Comp::Gateway(GatewayId::new(*i)),
            Some(ComponentRef::Service(i)) => Comp::Service(ServiceId::new(*i)),
            None => panic!("component {name:?} was not validated"),
        }
    }

    pub(crate) fn service(&self, name: &str) -> ServiceId {
        match self.comp(name) {
            Comp::Service(s) => s,
            _ => panic!("{name:?} was validated as a service"),
        }
    }

    pub(crate) fn lb(&self, name: &str) -> LbId {
        match self.comp(name) {
            Comp::Lb(l) => l,
            _ => panic!("{name:?} was validated as an lb"),
        }
    }

    pub(crate) fn gateway(&self, name: &str) -> GatewayId {
        match self.comp(name) {
            Comp::Gateway(g) => g,
            _ => panic!("{name:?} was validated as a gateway"),
        }
    }

    pub(crate) fn route(&self, name: &str) -> RouteId {
        *self.routes.get(name).expect("validated route name")
    }

    pub(crate) fn client(&self, name: &str) -> Option<PopId> {
        self.clients.get(name).copied()
    }

    /// Site labels in order of first appearance.
    pub(crate) fn sites(&self) -> &[String] {
        &self.sites
    }

    pub(crate) fn site(&self, name: &str) -> SiteId {
        SiteId::new(
            self.sites
                .iter()
                .position(|s| s == name)
                .expect("validated site"),
        )
    }
}

impl Engine {
    /// Builds the runtime topology. The scenario must have been validated by
    /// [`Scenario::parse`]: every name resolves here, once, to a handle.
    pub fn new(sc: &Scenario, opts: RunOptions) -> Engine {
        let seed = opts.seed.unwrap_or(sc.scenario.seed);
        let scale = opts.scale;
        let names = Names::new(sc);
        let mut queue = EventQueue::new();
        let mut deadlines = deadline::Deadlines::default();
        let mut rec = Recorder::new(
            sc.scenario.interval,
            Meta {
                scenario: sc.scenario.name.clone(),
                seed,
                scale,
                clock_origin_s: sc
                    .scenario
                    .clock_origin
                    .as_deref()
                    .and_then(parse_clock)
                    .unwrap_or(0),
            },
        );
        let lbs: Vec<Lb> = sc
            .lbs
            .iter()
            .map(|l| {
                Lb::build(
                    l,
                    scale,
                    sc.clients.len(),
                    sc.routes.len(),
                    rec.add_component(l.name.get_ref(), "lb"),
                )
            })
            .collect();
        let gateways = sc
            .gateways
            .iter()
            .enumerate()
            .map(|(i, g)| {
                Gateway::build(
                    g,
                    scale,
                    &names,
                    &mut deadlines,
                    &mut queue,
                    entity_rng(seed, 1_000 + i as u64),
                    entity_rng(seed, 3_000 + i as u64),
                    rec.add_component(g.name.get_ref(), "gateway"),
                )
            })
            .collect();
        let services = sc
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Service::build(
                    s,
                    scale,
                    Limits::default().lowered_to(&sc.limits).default_app_queue,
                    entity_rng(seed, 2_000 + i as u64),
                    rec.add_component(s.name.get_ref(), "service"),
                )
            })
            .collect::<Vec<_>>();
        let routes = sc
            .routes
            .iter()
            .map(|r| {
                rec.add_route(r.name.get_ref());
                Route {
                    path: r.path.iter().map(|h| names.comp(h.get_ref())).collect(),
                }
            })
            .collect();
        let pops: Vec<Population> = sc
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let steps: Vec<_> = c
                    .steps
                    .iter()
                    .map(|s| (s.at, s.rate * scale, s.ramp))
                    .collect();
                let pool = c.connections.as_ref().map(|conn| {
                    let lb = match routes_first_hop(sc, &names, c.route.get_ref()) {
                        Comp::Lb(l) => l,
                        _ => unreachable!("validated: connections start at an lb"),
                    };
                    let keepalive = sc.lbs[lb.ix()]
                        .connections
                        .as_ref()
                        .expect("validated: the lb has connections")
                        .keepalive_timeout;
                    conn::Pool::new(
                        lb,
                        scaled(conn.instances, scale),
                        conn.idle_timeout.min(keepalive),
                        conn.reconnect_backoff.as_ref().map(|b| {
                            stormbreak_policy::retry::Backoff::new(b).expect("validated backoff")
                        }),
                    )
                });
                Population::build(
                    c,
                    scale,
                    &names,
                    &mut deadlines,
                    &mut queue,
                    steps,
                    pool,
                    entity_rng(seed, i as u64),
                )
            })
            .collect();
        let failovers = sc
            .failovers
            .iter()
            .map(|f| {
                FailoverCtl::new(
                    f.clients
                        .iter()
                        .map(|c| names.client(c.get_ref()).expect("validated client"))
                        .collect(),
                    names.lb(f.primary.get_ref()),
                    names.lb(f.secondary.get_ref()),
                    Failover::new(&f.policy).expect("validated failover policy"),
                    f.period,
                )
            })
            .collect();
        let timeline: Vec<Planned> = sc
            .actions
            .iter()
            .map(|a| {
                let a = a.get_ref();
                Planned::resolve(a.at, a.lasts, &a.kind, &names)
            })
            .collect();
        let now_lane = queue.lane(Nanos::ZERO);
        let mut e = Engine {
            now: Nanos::ZERO,
            end: sc.scenario.duration,
            queue,
            now_lane,
            deadlines,
            events: 0,
            work: 0,
            scale,
            digest: FNV_OFFSET,
            flight: Flight::new(),
            routes,
            pops,
            lbs: LbPools::new(lbs, entity_rng(seed, 3_000)),
            gateways,
            services,
            failovers,
            undo: vec![fault::Undo::Nothing; timeline.len()],
            stalls: fault::Stalls::new(rec.comp_count()),
            timeline,
            rec,
            limits: Limits::default().lowered_to(&sc.limits),
            lowering: sc.limits.clone(),
            stopped: None,
            budget: Budget::default(),
        };
        for p in 0..e.pops.len() {
            e.schedule_arrival(PopId::new(p));
        }
        e.queue.schedule(e.rec.interval(), Ev::Tick);
        for (s, svc) in e.services.iter().enumerate() {
            if let Some(at) = svc.first_autoscale() {
                e.queue.schedule(
                    at,
                    Ev::Autoscale {
                        svc: ServiceId::new(s),
                    },
                );
            }
        }
        for (i, f) in e.failovers.iter().enumerate() {
            e.queue
                .schedule(f.first_plan(), Ev::FailoverPlan { idx: i as u16 });
        }
        for (at, i) in timeline::plan(&e.timeline) {
            e.queue.schedule(at, Ev::Action { idx: i as u16 });
        }
        e
    }

    /// Simulated time now.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Simulated end time.
    pub fn end(&self) -> Nanos {
        self.end
    }

    /// A digest of every event handled so far except recording ticks, in
    /// order, with its time: two runs that differ only in `interval` have
    /// the same digest.
    pub fn event_digest(&self) -> u64 {
        self.digest
    }

    /// Default bounds that have refused work so far.
    pub fn bounds_hit(&self) -> &[BoundHit] {
        self.rec.bound_hits()
    }

    /// Replaces the run's bounds (before the run starts): `limits` (the
    /// command line's), each lowered to the scenario's `[limits]` where
    /// that is lower.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        let limits = limits.lowered_to(&self.lowering);
        self.limits = limits;
        for svc in &mut self.services {
            svc.lower_default_app_queue(limits.default_app_queue);
        }
        self
    }

    /// Ends the run at `at` instead of the scenario's end, if earlier (before
    /// the run starts). The run is the one a copy of the scenario with
    /// `duration = at` and no action after `at` would make, where that copy
    /// is valid (an `[[slo]]` window longer than `at` is refused in a file,
    /// and the engine does not read SLOs): events after `at`, scheduled
    /// actions and reverts included, never happen, and the recording covers
    /// `[0, at]`, in whole intervals as for any duration (`simulate
    /// --until` therefore asks for a whole number of them). For looking at
    /// the first part of a long scenario, or measuring it, without editing
    /// the file.
    ///
    /// ```
    /// # use stormbreak_sim::{Scenario, engine::{Engine, RunOptions}};
    /// # use stormbreak_policy::Nanos;
    /// let sc = Scenario::parse("s.toml", r#"
    /// [scenario]
    /// name = "s"
    /// duration = "1h"
    /// interval = "10s"
    /// [[service]]
    /// name = "svc"
    /// replicas = 1
    /// app = { workers = 4, service_time = { dist = "exponential", mean = "1ms" } }
    /// [[route]]
    /// name = "r"
    /// path = ["svc"]
    /// [[client]]
    /// name = "users"
    /// route = "r"
    /// rate = "100/s"
    /// timeout = "1s"
    /// "#).unwrap();
    /// let rec = Engine::new(&sc, RunOptions::default())
    ///     .stop_at(Nanos::from_secs(60))
    ///     .run()
    ///     .unwrap();
    /// assert_eq!(rec.duration, Nanos::from_secs(60));
    /// assert_eq!(rec.route("r").unwrap().first_attempts.len(), 6);
    /// ```
    pub fn stop_at(mut self, at: Nanos) -> Self {
        debug_assert!(self.events == 0, "stop_at before the run starts");
        self.end = self.end.min(at);
        self
    }

    /// Runs until `until` (capped at the scenario's end); returns `Ok(false)`
    /// once the run is over. Call repeatedly to drive a progress bar. A
    /// bound hit stops the run with an error (and every later call returns
    /// it again).
    pub fn run_until(&mut self, until: Nanos) -> Result<bool, RunError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        let until = until.min(self.end).max(self.now);
        while let Some((t, ev)) = self.queue.pop_until(until) {
            self.now = t;
            self.events += 1;
            self.handle(ev);
            if self.stopped.is_some() || self.budget.since_events >= BUDGET_WINDOW {
                self.check_budget();
                if let Some(e) = &self.stopped {
                    return Err(e.clone());
                }
            }
        }
        self.now = until;
        #[cfg(debug_assertions)]
        if until >= self.end
            && let Err(e) = self.audit()
        {
            panic!("conservation law broken at the end of the run: {e}");
        }
        Ok(until < self.end)
    }

    /// Runs to the end and returns the recording.
    pub fn run(mut self) -> Result<Recording, RunError> {
        while self.run_until(self.end)? {}
        Ok(self.finish())
    }

    /// Runs to the end, or to a limit: the recording either way (a stopped
    /// one holds the whole intervals before the stop), and the error that
    /// stopped it.
    pub fn run_to_stop(mut self) -> (Recording, Option<RunError>) {
        let stopped = loop {
            match self.run_until(self.end) {
                Ok(true) => {}
                Ok(false) => break None,
                Err(e) => break Some(e),
            }
        };
        (self.finish(), stopped)
    }

    /// Stops the run with `err` unless it has already stopped.
    pub(crate) fn stop(&mut self, err: RunError) {
        self.stopped.get_or_insert(err);
    }

    /// The work budget: at most `events_per_sim_second` over each window
    /// of [`BUDGET_WINDOW`] events, and `events_total` in all.
    fn check_budget(&mut self) {
        let b = self.budget;
        self.budget = Budget {
            since_now: self.now,
            ..Budget::default()
        };
        if self.stopped.is_some() {
            return;
        }
        let elapsed = self.now - b.since_now;
        let fast = u128::from(b.since_events) * 1_000_000_000
            > u128::from(self.limits.events_per_sim_second) * u128::from(elapsed.as_nanos());
        let total = self.work > self.limits.events_total;
        if !(fast || total) {
            return;
        }
        let what = if total {
            format!("more than {} events in all", self.limits.events_total)
        } else {
            format!(
                "{} events in {} of simulated time, over the budget of {} events per simulated second",
                b.since_events,
                stormbreak_policy::units::format_duration(elapsed),
                self.limits.events_per_sim_second
            )
        };
        let kind = (0..EV_KINDS).max_by_key(|&k| b.by_kind[k]).unwrap_or(0);
        let component = format!(
            "{} ({} of them; the last for {})",
            EV_NAMES[kind],
            b.by_kind[kind],
            b.last
                .map_or_else(|| "nothing".to_owned(), |ev| self.describe(ev))
        );
        self.stop(RunError::WorkBudget {
            limit: if total {
                "events_total"
            } else {
                "events_per_sim_second"
            },
            at: self.now,
            what,
            component,
        });
    }

    /// The entity an event concerns, in the scenario's names.
    fn describe(&self, ev: Ev) -> String {
        let attempt = |k: &Key| {
            self.flight.attempt(*k).map_or_else(
                || "a finished attempt".to_owned(),
                |a| {
                    let comp = self.rec.comp(self.series_of(a.comp()));
                    format!("{} {:?}", comp.kind, comp.name)
                },
            )
        };
        let pop = |p: &PopId| format!("client {:?}", self.pops[p.ix()].name());
        match &ev {
            Ev::Arrive { pop: p, .. } | Ev::Dispatch { pop: p } => pop(p),
            Ev::ClientRetry { req, .. } => self
                .flight
                .request(*req)
                .map_or_else(|| "a finished request".to_owned(), |r| pop(&r.pop())),
            Ev::Done { att } | Ev::QueueTimeout { att } | Ev::GatewayRetry { att } => attempt(att),
            Ev::Autoscale { svc }
            | Ev::PodReady { svc }
            | Ev::Reconcile { svc }
            | Ev::SidecarExpiry { svc, .. } => {
                format!(
                    "service {:?}",
                    self.rec.comp_name(self.services[svc.ix()].series())
                )
            }
            Ev::RampWake { lb, .. } => {
                format!("lb {:?}", self.rec.comp_name(self.lbs[*lb].series()))
            }
            Ev::Timeout { list } => format!(
                "the callers' per-try timeouts of {}",
                stormbreak_policy::units::format_duration(self.deadlines.duration(*list))
            ),
            Ev::Tick | Ev::Action { .. } | Ev::FailoverPlan { .. } | Ev::Revert { .. } => {
                "the engine".to_owned()
            }
        }
    }

    fn handle(&mut self, ev: Ev) {
        let fp = ev.fingerprint();
        if !matches!(ev, Ev::Tick) {
            self.digest = fnv(self.digest, self.now, fp);
        }
        // Recording ticks are not work the model asked for: leaving them
        // out keeps the budget's verdict independent of `interval`.
        if !matches!(ev, Ev::Tick) {
            self.budget.since_events += 1;
            self.budget.by_kind[fp[0] as usize] += 1;
            self.budget.last = Some(ev);
            self.work += 1;
        }
        match ev {
            Ev::Arrive { pop, generation } => self.on_arrival(pop, generation),
            Ev::Done { att } => self.on_service_done(att),
            Ev::Timeout { list } => self.on_timeouts(list),
            Ev::QueueTimeout { att } => self.on_queue_timeout(att),
            Ev::ClientRetry { req, sends } => self.on_client_retry(req, sends),
            Ev::GatewayRetry { att } => self.on_gateway_retry(att),
            Ev::Tick => self.on_tick(),
            Ev::Dispatch { pop } => self.on_dispatch(pop),
            Ev::Autoscale { svc } => self.on_autoscale(svc),
            Ev::PodReady { svc } => self.on_pod_ready(svc),
            Ev::Action { idx } => self.on_action(idx as usize),
            Ev::RampWake { lb, route, epoch } => self.on_ramp_wake(lb, route, epoch),
            Ev::FailoverPlan { idx } => self.on_failover(idx as usize),
            Ev::Revert { idx } => self.on_revert(idx as usize),
            Ev::Reconcile { svc } => self.on_reconcile(svc),
            Ev::SidecarExpiry { svc, pod } => self.on_sidecar_expiry(svc, pod),
        }
    }

    /// The recording series of a component.
    #[inline]
    fn series_of(&self, c: Comp) -> SeriesId {
        match c {
            Comp::Lb(i) => self.lbs[i].series(),
            Comp::Gateway(i) => self.gateways[i.ix()].series(),
            Comp::Service(i) => self.services[i.ix()].series(),
        }
    }
}

/// The first component of the route called `name` (validated).
fn routes_first_hop(sc: &Scenario, names: &Names<'_>, name: &str) -> Comp {
    let r = &sc.routes[names.route(name).ix()];
    names.comp(r.path[0].get_ref())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[inline]
fn fnv(mut h: u64, now: Nanos, words: [u64; 2]) -> u64 {
    for w in [now.as_nanos(), words[0], words[1]] {
        h ^= w;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

//! The discrete-event engine: builds the runtime topology from a
//! [`Scenario`] and plays it in virtual time.
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
//! # Determinism
//! One seeded RNG stream per entity (client population, gateway, service),
//! ties in the event queue broken by scheduling order, no hash-map iteration
//! anywhere: same scenario, seed and scale give byte-identical recordings.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;

use crate::dist::ServiceTime;
use crate::glue::{Autoscaler, CallState, Caller, Next, PodSample};
use crate::queue::{EventQueue, Lane};
use crate::record::{
    AppliedAction, Cause, ComponentSeries, LittleTotals, Recording, RouteAcc, RouteSeries,
};
use crate::scenario::{ActionKind, ComponentRef, DiurnalSpec, Scenario, parse_clock};
use crate::slab::{Key, Slab};
use stormbreak_policy::failover::{Failover, RegionRates};
use stormbreak_policy::ramp::StagedRestore;
use stormbreak_policy::shed::{Criticality, Decision, ShedRule, ShedRules};

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
enum Ev {
    Arrive {
        pop: u16,
        generation: u32,
    },
    /// A job-queue worker freed: start the oldest waiting job.
    Dispatch {
        pop: u16,
    },
    Done {
        att: Key,
    },
    Timeout {
        att: Key,
    },
    QueueTimeout {
        att: Key,
    },
    ClientRetry {
        req: Key,
    },
    GatewayRetry {
        att: Key,
    },
    Tick,
    Autoscale {
        svc: u16,
    },
    PodReady {
        svc: u16,
    },
    Action {
        idx: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comp {
    Lb(u16),
    Gateway(u16),
    Service(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    Detached,
    Client(Key),
    Attempt(Key),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    New,
    SidecarQueued,
    AppQueued,
    InService,
    Forwarded,
    DependencyWait,
    DependencyBackoff,
    Backoff,
}

#[derive(Debug, Clone, Copy)]
struct Attempt {
    route: u16,
    hop: u8,
    phase: Phase,
    comp: Comp,
    parent: Parent,
    started: Nanos,
    /// LB node or pod index while a resource there is held.
    slot: u32,
    child: Option<Key>,
    /// Gateway-only: retry state of the forwarded call.
    call: CallState,
    abandoned: bool,
    /// Site of the client population behind the attempt (0 when none).
    site: u8,
}

#[derive(Debug, Clone, Copy)]
struct Request {
    pop: u16,
    /// The route this logical request uses (primary or failover).
    route: u16,
    call: CallState,
    /// Attempts of this request still attached (more than one with fan-out).
    live: u32,
    deadline: Nanos,
}

#[derive(Debug)]
struct Route {
    path: Vec<Comp>,
    acc: RouteAcc,
    series: RouteSeries,
}

#[derive(Debug)]
struct Node {
    flows: u32,
    paused: bool,
}

#[derive(Debug)]
struct Lb {
    /// Operator shed rules (policy crate), keyed by route index.
    rules: ShedRules,
    /// Staged restores in progress.
    ramps: Vec<LbRamp>,
    /// Manual admission gates: (route, site or every site, fraction, status).
    gates: Vec<(u16, Option<u8>, f64, u16)>,
    nodes: Vec<Node>,
    flows_per_node: u32,
    next: usize,
    comp: usize,
}

#[derive(Debug)]
struct LbRamp {
    route: u16,
    restore: StagedRestore,
    /// Scenario site index → the ramp's site number (None: not ramped).
    site_map: Vec<Option<usize>>,
    status: u16,
}

/// Capacity-aware failover: a policy-crate `Failover` fed every interval
/// with rates measured at two LB pools.
#[derive(Debug)]
struct FailoverCtl {
    pops: Vec<usize>,
    primary: usize,
    secondary: usize,
    policy: Failover,
}

#[derive(Debug)]
struct Gateway {
    dependency: Option<u16>,
    timeout_lane: Lane,
    caller: Caller,
    rng: Pcg64Mcg,
    comp: usize,
}

/// A time-weighted average of an integer gauge, reset at each read.
#[derive(Debug, Clone, Copy, Default)]
struct Avg {
    area: f64,
    last: Nanos,
    since: Nanos,
}

impl Avg {
    #[inline]
    fn touch(&mut self, now: Nanos, level: u32) {
        self.area += level as f64 * (now - self.last) as f64;
        self.last = now;
    }
    fn take(&mut self, now: Nanos, level: u32) -> f64 {
        self.touch(now, level);
        let span = now.saturating_sub(self.since);
        let v = if span == 0 {
            0.0
        } else {
            self.area / span as f64
        };
        self.area = 0.0;
        self.since = now;
        v
    }
}

#[derive(Debug)]
struct Pod {
    ready: bool,
    sidecar_in: u32,
    sidecar_queue: VecDeque<Key>,
    sidecar_queued: u32,
    busy: u32,
    app_queue: VecDeque<Key>,
    app_queued: u32,
    busy_avg: Avg,
    sidecar_avg: Avg,
    /// Since the last interval tick (the recording's own average).
    busy_tick: Avg,
}

impl Pod {
    fn new(ready: bool, now: Nanos) -> Pod {
        let fresh = Avg {
            area: 0.0,
            last: now,
            since: now,
        };
        Pod {
            ready,
            sidecar_in: 0,
            sidecar_queue: VecDeque::new(),
            sidecar_queued: 0,
            busy: 0,
            app_queue: VecDeque::new(),
            app_queued: 0,
            busy_avg: fresh,
            sidecar_avg: fresh,
            busy_tick: fresh,
        }
    }
}

#[derive(Debug)]
struct Service {
    pods: Vec<Pod>,
    /// Pods being started (ready at a `PodReady` event).
    starting: u32,
    sidecar: Option<(u32, u32, Option<Lane>)>,
    workers: u32,
    app_queue_cap: u32,
    drop_expired: bool,
    service_time: ServiceTime,
    autoscaler: Option<Autoscaler>,
    pod_start: Nanos,
    rng: Pcg64Mcg,
    comp: usize,
}

#[derive(Debug)]
struct Population {
    route: u16,
    schedule: RateSchedule,
    timeout_lane: Lane,
    caller: Caller,
    honour_retry_after: bool,
    /// Index into the scenario's site labels.
    site: u8,
    failover_route: Option<u16>,
    /// Share of new requests sent to `failover_route`.
    spill: f64,
    /// Bumped when the rate changes, so the arrival drawn at the old rate is dropped.
    arrival_generation: u32,
    /// Attempts sent on `failover_route` in the current interval.
    spilled: u64,
    /// Logical requests started in the current interval.
    started: u64,
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
    backlog: VecDeque<Nanos>,
    /// Longest wait of a job dispatched in the current interval.
    wait_max: Nanos,
    rng: Pcg64Mcg,
}

/// A piecewise-linear rate function sampled as a non-homogeneous Poisson
/// process by thinning within each piece.
#[derive(Debug, Clone)]
struct RateSchedule {
    /// (start, end, rate at start, rate at end), per second; the last piece is open-ended.
    pieces: Vec<(Nanos, Nanos, f64, f64)>,
    /// Daily cycle multiplying the pieces: (amplitude, period, time of peak).
    diurnal: Option<(f64, Nanos, Nanos)>,
}

impl RateSchedule {
    fn with_diurnal(mut self, d: Option<&DiurnalSpec>) -> Self {
        self.diurnal = d.map(|d| (d.amplitude, d.period, d.peak_at));
        self
    }

    /// The diurnal multiplier at `t`: 1 + a·cos(2π(t − peak)/period).
    fn cycle(&self, t: Nanos) -> f64 {
        match self.diurnal {
            None => 1.0,
            Some((a, period, peak)) => {
                let phase = (t as f64 - peak as f64) / period as f64;
                1.0 + a * (std::f64::consts::TAU * phase).cos()
            }
        }
    }

    fn new(initial: f64, steps: &[(Nanos, f64, Nanos)]) -> Self {
        let mut pieces = Vec::new();
        let (mut t, mut r) = (0, initial);
        for &(at, rate, ramp) in steps {
            if at > t {
                pieces.push((t, at, r, r));
            }
            if ramp > 0 {
                pieces.push((at, at + ramp, r, rate));
            }
            t = at + ramp;
            r = rate;
        }
        pieces.push((t, Nanos::MAX, r, r));
        RateSchedule {
            pieces,
            diurnal: None,
        }
    }

    /// The next arrival strictly after `now`, or `None` if the rate stays 0.
    fn next_after<R: Rng + ?Sized>(&self, mut now: Nanos, rng: &mut R) -> Option<Nanos> {
        let mut i = self.pieces.iter().position(|p| now < p.1)?;
        loop {
            let (start, end, r0, r1) = self.pieces[i];
            let amp = self.diurnal.map_or(0.0, |d| d.0);
            let max = r0.max(r1) * (1.0 + amp);
            if max <= 0.0 {
                if end == Nanos::MAX {
                    return None;
                }
                now = end;
                i += 1;
                continue;
            }
            let gap: f64 = Exp1.sample(rng);
            let cand = now.saturating_add(((gap / max) * 1e9).ceil().max(1.0) as Nanos);
            if cand >= end {
                // Memoryless: restart the draw at the next piece.
                now = end;
                i += 1;
                continue;
            }
            if r0 == r1 && self.diurnal.is_none() {
                return Some(cand);
            }
            let frac = (cand - start) as f64 / (end - start) as f64;
            let rate = (r0 + (r1 - r0) * frac) * self.cycle(cand);
            if rng.random::<f64>() * max < rate {
                return Some(cand);
            }
            now = cand;
        }
    }
}

/// Whole-run accounting for Little's law per component: the time integral
/// of attempts present, their total sojourn, and departures.
#[derive(Debug, Clone, Copy, Default)]
struct Little {
    present: u64,
    area: f64,
    last: Nanos,
    sojourn: f64,
    departures: u64,
}

impl Little {
    #[inline]
    fn step(&mut self, now: Nanos, up: bool) {
        self.area += self.present as f64 * (now - self.last) as f64;
        self.last = now;
        if up {
            self.present += 1;
        } else {
            self.present -= 1;
        }
    }
}

/// What an attempt produced, as its caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Res {
    /// Answered successfully.
    Ok,
    /// Failed; a shed response may advertise `Retry-After`.
    Err(Cause, Option<Nanos>),
}

impl Res {
    fn fail(cause: Cause) -> Res {
        Res::Err(cause, None)
    }
}

/// The simulator for one scenario run.
pub struct Engine {
    now: Nanos,
    end: Nanos,
    interval: Nanos,
    queue: EventQueue<Ev>,
    now_lane: Lane,
    attempts: Slab<Attempt>,
    requests: Slab<Request>,
    routes: Vec<Route>,
    lbs: Vec<Lb>,
    gateways: Vec<Gateway>,
    services: Vec<Service>,
    pops: Vec<Population>,
    comps: Vec<ComponentSeries>,
    comp_arrivals: Vec<u64>,
    comp_rejected: Vec<u64>,
    little: Vec<Little>,
    /// Randomness for LB decisions (ramp admission).
    lb_rng: Pcg64Mcg,
    actions: Vec<(Nanos, ActionKind)>,
    sites: Vec<String>,
    failovers: Vec<FailoverCtl>,
    client_names: Vec<String>,
    scale: f64,
    applied: Vec<AppliedAction>,
    events: u64,
    attempts_total: u64,
    peak: usize,
    rec_meta: (String, u64, f64, u64),
}

fn entity_rng(seed: u64, stream: u64) -> Pcg64Mcg {
    // SplitMix64 of (seed, stream): independent, portable per-entity streams.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Pcg64Mcg::seed_from_u64(z ^ (z >> 31))
}

fn scaled(n: u32, scale: f64) -> u32 {
    ((n as f64 * scale).round() as u32).max(1)
}

/// How `--scale F` shrinks a service: a fleet of identical pods keeps its
/// per-pod behaviour (queueing, limits) and loses pods, so F × 400 pods run
/// as 4 pods of the same shape. Only when fewer than one pod would remain do
/// the pod's own capacities (workers, sidecar limit, queues) shrink instead.
#[derive(Debug, Clone, Copy)]
struct FleetScale {
    pod_factor: f64,
    capacity_factor: f64,
}

impl FleetScale {
    fn new(replicas: u32, scale: f64) -> Self {
        let pods = replicas.max(1) as f64 * scale;
        if pods >= 1.0 || scale >= 1.0 {
            FleetScale {
                pod_factor: scale,
                capacity_factor: 1.0,
            }
        } else {
            FleetScale {
                pod_factor: 1.0 / replicas.max(1) as f64,
                capacity_factor: pods,
            }
        }
    }

    fn pods(&self, n: u32) -> u32 {
        scaled(n, self.pod_factor)
    }

    fn per_pod(&self, n: u32) -> u32 {
        scaled(n, self.capacity_factor)
    }
}

impl Engine {
    /// Builds the runtime topology. The scenario must have been validated by
    /// [`Scenario::parse`].
    pub fn new(sc: &Scenario, opts: RunOptions) -> Engine {
        let seed = opts.seed.unwrap_or(sc.scenario.seed);
        let scale = opts.scale;
        let mut queue = EventQueue::new();
        let names = sc.components();
        let mut comps = Vec::new();
        let mut comp_series = |name: &str, kind: &'static str| {
            comps.push(ComponentSeries {
                name: name.to_owned(),
                kind: kind.to_owned(),
                ..Default::default()
            });
            comps.len() - 1
        };
        let lbs = sc
            .lbs
            .iter()
            .map(|l| Lb {
                rules: ShedRules::with_capacity(64).expect("static capacity"),
                ramps: Vec::new(),
                gates: Vec::new(),
                nodes: (0..l.nodes)
                    .map(|_| Node {
                        flows: 0,
                        paused: false,
                    })
                    .collect(),
                flows_per_node: scaled(l.flows_per_node, scale),
                next: 0,
                comp: comp_series(l.name.get_ref(), "lb"),
            })
            .collect();
        let gateways = sc
            .gateways
            .iter()
            .enumerate()
            .map(|(i, g)| Gateway {
                dependency: g
                    .dependency
                    .as_ref()
                    .and_then(|d| sc.route_index(d.get_ref()))
                    .map(|r| r as u16),
                timeout_lane: queue.lane(g.timeout),
                caller: Caller::new(g.retry.as_ref(), g.budget.as_ref()),
                rng: entity_rng(seed, 1_000 + i as u64),
                comp: comp_series(g.name.get_ref(), "gateway"),
            })
            .collect();
        let services = sc
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let fleet = FleetScale::new(s.replicas, scale);
                let autoscaler = s.autoscaler.as_ref().map(|a| {
                    let mut a = a.clone();
                    a.min = fleet.pods(a.min);
                    a.max = fleet.pods(a.max).max(a.min);
                    Autoscaler::new(&a)
                });
                Service {
                    pods: (0..fleet.pods(s.replicas))
                        .map(|_| Pod::new(true, 0))
                        .collect(),
                    starting: 0,
                    sidecar: s.sidecar.as_ref().map(|sc| {
                        (
                            fleet.per_pod(sc.limit),
                            if sc.queue == 0 {
                                0
                            } else {
                                fleet.per_pod(sc.queue)
                            },
                            sc.queue_timeout.map(|t| queue.lane(t)),
                        )
                    }),
                    workers: fleet.per_pod(s.app.workers),
                    app_queue_cap: s.app.queue.map_or(u32::MAX, |q| fleet.per_pod(q)),
                    drop_expired: s.app.drop_expired,
                    service_time: s.app.service_time.sampler(),
                    autoscaler,
                    pod_start: s.autoscaler.as_ref().map_or(0, |a| a.pod_start),
                    rng: entity_rng(seed, 2_000 + i as u64),
                    comp: comp_series(s.name.get_ref(), "service"),
                }
            })
            .collect::<Vec<_>>();
        let comp = |name: &str| match names[name] {
            ComponentRef::Lb(i) => Comp::Lb(i as u16),
            ComponentRef::Gateway(i) => Comp::Gateway(i as u16),
            ComponentRef::Service(i) => Comp::Service(i as u16),
        };
        let routes = sc
            .routes
            .iter()
            .map(|r| Route {
                path: r.path.iter().map(|h| comp(h.get_ref())).collect(),
                acc: RouteAcc::new(),
                series: RouteSeries {
                    name: r.name.get_ref().clone(),
                    ..Default::default()
                },
            })
            .collect();
        let mut sites: Vec<String> = Vec::new();
        for c in &sc.clients {
            if let Some(s) = &c.site {
                if !sites.contains(s) {
                    sites.push(s.clone());
                }
            }
        }
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
                Population {
                    route: sc.route_index(c.route.get_ref()).expect("validated") as u16,
                    schedule: RateSchedule::new(c.rate * scale, &steps)
                        .with_diurnal(c.diurnal.as_ref()),
                    timeout_lane: queue.lane(c.timeout),
                    caller: Caller::new(c.retry.as_ref(), c.budget.as_ref()),
                    honour_retry_after: c.honour_retry_after,
                    site: c
                        .site
                        .as_deref()
                        .and_then(|s| sites.iter().position(|x| x == s))
                        .map_or(0, |i| i as u8),
                    failover_route: c
                        .failover_route
                        .as_ref()
                        .and_then(|f| sc.route_index(f.get_ref()))
                        .map(|r| r as u16),
                    spill: 0.0,
                    arrival_generation: 0,
                    spilled: 0,
                    started: 0,
                    fanout: c.fanout,
                    fanout_cap: c.fanout_max_in_flight.unwrap_or(c.fanout.max(1)),
                    fanout_lane: queue.lane(c.fanout_delay),
                    give_up_after: c.give_up_after.unwrap_or(Nanos::MAX),
                    workers: c.workers.map_or(u32::MAX, |w| scaled(w, scale)),
                    busy: 0,
                    backlog: VecDeque::new(),
                    wait_max: 0,
                    rng: entity_rng(seed, i as u64),
                }
            })
            .collect();
        let n = comps.len();
        let now_lane = queue.lane(0);
        let mut e = Engine {
            now_lane,
            now: 0,
            end: sc.scenario.duration,
            interval: sc.scenario.interval,
            queue,
            attempts: Slab::new(),
            requests: Slab::new(),
            routes,
            lbs,
            gateways,
            services,
            pops,
            comps,
            comp_arrivals: vec![0; n],
            little: vec![Little::default(); n],
            lb_rng: entity_rng(seed, 3_000),
            comp_rejected: vec![0; n],
            actions: sc
                .actions
                .iter()
                .map(|a| (a.get_ref().at, a.get_ref().kind.clone()))
                .collect(),
            sites,
            failovers: sc
                .failovers
                .iter()
                .map(|f| {
                    let lb = |n: &str| {
                        sc.lbs
                            .iter()
                            .position(|l| l.name.get_ref() == n)
                            .expect("validated")
                    };
                    FailoverCtl {
                        pops: f
                            .clients
                            .iter()
                            .map(|c| {
                                sc.clients
                                    .iter()
                                    .position(|x| x.name.get_ref() == c.get_ref())
                                    .expect("validated")
                            })
                            .collect(),
                        primary: lb(f.primary.get_ref()),
                        secondary: lb(f.secondary.get_ref()),
                        policy: Failover::new(&f.policy).expect("validated"),
                    }
                })
                .collect(),
            client_names: sc
                .clients
                .iter()
                .map(|c| c.name.get_ref().clone())
                .collect(),
            scale,
            applied: Vec::new(),
            events: 0,
            attempts_total: 0,
            peak: 0,
            rec_meta: (
                sc.scenario.name.clone(),
                seed,
                scale,
                sc.scenario
                    .clock_origin
                    .as_deref()
                    .and_then(parse_clock)
                    .unwrap_or(0),
            ),
        };
        for p in 0..e.pops.len() {
            let pop = &mut e.pops[p];
            if let Some(t) = pop.schedule.next_after(0, &mut pop.rng) {
                e.queue.schedule(
                    t,
                    Ev::Arrive {
                        pop: p as u16,
                        generation: 0,
                    },
                );
            }
        }
        e.queue.schedule(e.interval, Ev::Tick);
        for (s, svc) in e.services.iter().enumerate() {
            if let Some(a) = &svc.autoscaler {
                e.queue
                    .schedule(a.period(), Ev::Autoscale { svc: s as u16 });
            }
        }
        for (i, (at, _)) in e.actions.iter().enumerate() {
            e.queue.schedule(*at, Ev::Action { idx: i as u16 });
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

    /// Runs until `until` (capped at the scenario's end); returns false once
    /// the run is over. Call repeatedly to drive a progress bar.
    pub fn run_until(&mut self, until: Nanos) -> bool {
        let until = until.min(self.end);
        while let Some((t, ev)) = self.queue.pop_until(until) {
            self.now = t;
            self.events += 1;
            self.handle(ev);
        }
        self.now = until;
        until < self.end
    }

    /// Runs to the end and returns the recording.
    pub fn run(mut self) -> Recording {
        while self.run_until(self.end) {}
        self.finish()
    }

    /// The recording so far (call after the run).
    pub fn finish(mut self) -> Recording {
        let end = self.now;
        for (c, l) in self.comps.iter_mut().zip(&mut self.little) {
            l.step(end, true); // close the integral (the +1 is discarded)
            let secs = end as f64 / 1e9;
            c.little = LittleTotals {
                mean_in_system: if end == 0 { 0.0 } else { l.area / end as f64 },
                throughput_per_s: l.departures as f64 / secs,
                mean_sojourn_s: if l.departures == 0 {
                    0.0
                } else {
                    l.sojourn / l.departures as f64 / 1e9
                },
            };
        }
        Recording {
            scenario: self.rec_meta.0,
            seed: self.rec_meta.1,
            scale: self.rec_meta.2,
            interval: self.interval,
            duration: self.end,
            clock_origin_s: self.rec_meta.3,
            routes: self.routes.into_iter().map(|r| r.series).collect(),
            components: self.comps,
            actions: self.applied,
            events: self.events,
            attempts: self.attempts_total,
            peak_in_flight: self.peak,
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { pop, generation } => {
                if self.pops[pop as usize].arrival_generation == generation {
                    self.on_arrival(pop as usize)
                }
            }
            Ev::Done { att } => self.on_service_done(att),
            Ev::Timeout { att } => self.on_timeout(att),
            Ev::QueueTimeout { att } => self.on_queue_timeout(att),
            Ev::ClientRetry { req } => self.on_client_retry(req),
            Ev::GatewayRetry { att } => self.on_gateway_retry(att),
            Ev::Tick => self.on_tick(),
            Ev::Dispatch { pop } => self.on_dispatch(pop as usize),
            Ev::Autoscale { svc } => self.on_autoscale(svc as usize),
            Ev::PodReady { svc } => self.on_pod_ready(svc as usize),
            Ev::Action { idx } => self.on_action(idx as usize),
        }
    }

    // ---- clients -------------------------------------------------------

    fn on_arrival(&mut self, p: usize) {
        let now = self.now;
        let pop = &mut self.pops[p];
        if let Some(t) = pop.schedule.next_after(now, &mut pop.rng) {
            let generation = pop.arrival_generation;
            self.queue.schedule(
                t,
                Ev::Arrive {
                    pop: p as u16,
                    generation,
                },
            );
        }
        // Behind the backlog even if a worker has just freed: its
        // `Dispatch` event takes the oldest job first.
        if pop.busy >= pop.workers || !pop.backlog.is_empty() {
            pop.backlog.push_back(now);
            return;
        }
        self.start_request(p);
    }

    fn start_request(&mut self, p: usize) {
        let now = self.now;
        let pop = &mut self.pops[p];
        pop.busy += 1;
        pop.started += 1;
        let call = pop.caller.start(now);
        let deadline = now.saturating_add(pop.give_up_after);
        let route = match pop.failover_route {
            Some(f) if pop.spill > 0.0 && pop.rng.random::<f64>() < pop.spill => f,
            _ => pop.route,
        };
        self.routes[route as usize].acc.first_attempts += 1;
        let req = self.requests.insert(Request {
            pop: p as u16,
            route,
            call,
            live: 1,
            deadline,
        });
        self.client_send(req);
    }

    /// A logical request is over: its worker takes the oldest waiting job.
    fn finish_request(&mut self, req: Key) {
        let Some(r) = self.requests.remove(req) else {
            return;
        };
        let pop = &mut self.pops[r.pop as usize];
        pop.busy -= 1;
        if !pop.backlog.is_empty() {
            // Through the queue, not a direct call: a job that fails on the
            // spot would otherwise start the next one inside this call, and
            // a long backlog would recurse as deep as it is long.
            self.queue
                .schedule_in_lane(self.now_lane, self.now, Ev::Dispatch { pop: r.pop });
        }
    }

    fn on_dispatch(&mut self, p: usize) {
        let pop = &mut self.pops[p];
        if pop.busy >= pop.workers {
            return;
        }
        if let Some(arrived) = pop.backlog.pop_front() {
            pop.wait_max = pop.wait_max.max(self.now - arrived);
            self.start_request(p);
        }
    }

    fn client_send(&mut self, req: Key) {
        let r = self.requests.get(req).expect("live request");
        let pop = &self.pops[r.pop as usize];
        let (route, lane, site) = (r.route, pop.timeout_lane, pop.site);
        if route != pop.route {
            self.pops[r.pop as usize].spilled += 1;
        }
        let att = self.new_attempt(route, 0, Parent::Client(req));
        self.attempts.get_mut(att).expect("new").site = site;
        self.enter(att);
        if self.attempts.get(att).is_some() {
            self.queue
                .schedule_in_lane(lane, self.now, Ev::Timeout { att });
        }
    }

    fn on_client_retry(&mut self, req: Key) {
        if self.requests.get(req).is_some() {
            self.client_send(req);
        }
    }

    /// A client attempt answered (or timed out): retry, fan out or finish.
    fn client_outcome(&mut self, req: Key, res: Res) {
        let now = self.now;
        let Some(r) = self.requests.get_mut(req) else {
            return;
        };
        r.live -= 1;
        let pop = &mut self.pops[r.pop as usize];
        match res {
            Res::Ok if pop.fanout > 0 => {
                // The bug's branches are independent loops: a success ends
                // its own branch, not its siblings.
                pop.caller.on_success(&mut r.call, now, &mut pop.rng);
                if r.live == 0 {
                    self.finish_request(req);
                }
            }
            Res::Ok => {
                pop.caller.on_success(&mut r.call, now, &mut pop.rng);
                self.finish_request(req);
            }
            Res::Err(cause, retry_after) if pop.fanout > 0 => {
                // The fan-out bug: a failed operation spawns `fanout` new
                // attempts (up to the client's in-flight cap per operation),
                // again on each of their failures, until it gives up.
                pop.caller.on_failure(now, cause);
                if now < r.deadline && pop.caller.is_retryable(cause, retry_after) {
                    let n = pop.fanout.min(pop.fanout_cap.saturating_sub(r.live));
                    r.live += n;
                    for _ in 0..n {
                        self.queue
                            .schedule_in_lane(pop.fanout_lane, now, Ev::ClientRetry { req });
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
                    if t == now {
                        self.queue
                            .schedule_in_lane(self.now_lane, now, Ev::ClientRetry { req });
                    } else {
                        self.queue.schedule(t, Ev::ClientRetry { req });
                    }
                }
                Next::GiveUp => {
                    self.finish_request(req);
                }
            },
        }
    }

    // ---- attempts ------------------------------------------------------

    fn new_attempt(&mut self, route: u16, hop: u8, parent: Parent) -> Key {
        let comp = self.routes[route as usize].path[hop as usize];
        if hop == 0 {
            self.routes[route as usize].acc.attempts += 1;
        }
        self.attempts_total += 1;
        let k = self.attempts.insert(Attempt {
            route,
            hop,
            phase: Phase::New,
            comp,
            parent,
            started: self.now,
            slot: u32::MAX,
            child: None,
            call: CallState::default(),
            abandoned: false,
            site: 0,
        });
        self.peak = self.peak.max(self.attempts.len());
        k
    }

    fn comp_index(&self, c: Comp) -> usize {
        match c {
            Comp::Lb(i) => self.lbs[i as usize].comp,
            Comp::Gateway(i) => self.gateways[i as usize].comp,
            Comp::Service(i) => self.services[i as usize].comp,
        }
    }

    /// An attempt arrives at its component.
    fn enter(&mut self, att: Key) {
        let a = *self.attempts.get(att).expect("live attempt");
        let ci = self.comp_index(a.comp);
        self.comp_arrivals[ci] += 1;
        self.little[ci].step(self.now, true);
        match a.comp {
            Comp::Lb(l) => {
                let now = self.now;
                let lb = &mut self.lbs[l as usize];
                if let Some(Decision::Reject {
                    status,
                    retry_after,
                }) = lb.rules.lookup(a.route as u32, Criticality::Critical)
                {
                    self.comp_rejected[ci] += 1;
                    return self.complete(att, Res::Err(Cause::shed(status), retry_after));
                }
                let gate = lb
                    .gates
                    .iter()
                    .find(|g| g.0 == a.route && g.1 == Some(a.site))
                    .or_else(|| lb.gates.iter().find(|g| g.0 == a.route && g.1.is_none()));
                if let Some(&(_, _, fraction, status)) = gate {
                    if self.lb_rng.random::<f64>() >= fraction {
                        self.comp_rejected[ci] += 1;
                        return self.complete(att, Res::Err(Cause::shed(status), None));
                    }
                }
                if let Some(ramp) = lb.ramps.iter_mut().find(|r| r.route == a.route) {
                    if let Some(site) = ramp.site_map[a.site as usize] {
                        if !ramp.restore.admit(now, site, &mut self.lb_rng) {
                            let status = ramp.status;
                            self.comp_rejected[ci] += 1;
                            return self.complete(att, Res::Err(Cause::shed(status), None));
                        }
                    }
                }
                let n = lb.nodes.len();
                let mut pick = None;
                for i in 0..n {
                    let j = (lb.next + i) % n;
                    if !lb.nodes[j].paused {
                        pick = Some(j);
                        break;
                    }
                }
                let Some(j) = pick else {
                    return self.reject(att, ci, Cause::Unavailable);
                };
                lb.next = (j + 1) % n;
                if lb.nodes[j].flows >= lb.flows_per_node {
                    return self.reject(att, ci, Cause::FlowsExhausted);
                }
                lb.nodes[j].flows += 1;
                let a = self.attempts.get_mut(att).expect("live");
                a.slot = j as u32;
                self.forward(att, None);
            }
            Comp::Gateway(g) => {
                // One retry policy covers the whole call: the dependency
                // check and the forwarded request ("optimistic retries").
                let gw = &mut self.gateways[g as usize];
                let call = gw.caller.start(self.now);
                self.attempts.get_mut(att).expect("live").call = call;
                match gw.dependency {
                    Some(dep) => {
                        self.routes[dep as usize].acc.first_attempts += 1;
                        self.call_dependency(att, g as usize, dep);
                    }
                    None => {
                        let lane = gw.timeout_lane;
                        self.forward(att, Some(lane));
                    }
                }
            }
            Comp::Service(s) => self.service_admit(att, s as usize, ci),
        }
    }

    /// The gateway calls its dependency route (e.g. auth) for `att`.
    fn call_dependency(&mut self, att: Key, g: usize, dep: u16) {
        let site = self.attempts.get(att).expect("live").site;
        let child = self.new_attempt(dep, 0, Parent::Attempt(att));
        self.attempts.get_mut(child).expect("new").site = site;
        let a = self.attempts.get_mut(att).expect("live");
        a.phase = Phase::DependencyWait;
        a.child = Some(child);
        let lane = self.gateways[g].timeout_lane;
        self.queue
            .schedule_in_lane(lane, self.now, Ev::Timeout { att: child });
        self.enter(child);
    }

    /// Creates the child attempt at the next hop and sends it.
    fn forward(&mut self, att: Key, timeout: Option<Lane>) {
        let a = self.attempts.get_mut(att).expect("live");
        a.phase = Phase::Forwarded;
        let (route, hop) = (a.route, a.hop + 1);
        let site = self.attempts.get(att).expect("live").site;
        let child = self.new_attempt(route, hop, Parent::Attempt(att));
        self.attempts.get_mut(child).expect("new").site = site;
        self.attempts.get_mut(att).expect("live").child = Some(child);
        if let Some(lane) = timeout {
            self.queue
                .schedule_in_lane(lane, self.now, Ev::Timeout { att: child });
        }
        self.enter(child);
    }

    fn reject(&mut self, att: Key, ci: usize, cause: Cause) {
        self.comp_rejected[ci] += 1;
        self.complete(att, Res::fail(cause));
    }

    /// The attempt is answered: release what its hop holds, tell the caller.
    fn complete(&mut self, att: Key, res: Res) {
        let a = self.attempts.remove(att).expect("live attempt");
        let ci = self.comp_index(a.comp);
        let little = &mut self.little[ci];
        little.step(self.now, false);
        little.sojourn += (self.now - a.started) as f64;
        little.departures += 1;
        if let Comp::Lb(l) = a.comp {
            if a.slot != u32::MAX {
                let lb = &mut self.lbs[l as usize];
                let node = &mut lb.nodes[a.slot as usize];
                node.flows = node.flows.saturating_sub(1);
                // The ramp's error guard watches what it admitted.
                if let Some(ramp) = lb.ramps.iter_mut().find(|r| r.route == a.route) {
                    if let Some(site) = ramp.site_map[a.site as usize] {
                        ramp.restore.observe(self.now, site, res == Res::Ok);
                    }
                }
            }
        }
        self.deliver(a, res);
    }

    fn deliver(&mut self, a: Attempt, res: Res) {
        if a.hop == 0 && a.parent != Parent::Detached {
            let acc = &mut self.routes[a.route as usize].acc;
            match res {
                Res::Ok => {
                    acc.successes += 1;
                    acc.record_latency(self.now - a.started);
                }
                Res::Err(c, _) => acc.errors[c as usize] += 1,
            }
        }
        match a.parent {
            Parent::Detached => {}
            Parent::Client(req) => self.client_outcome(req, res),
            Parent::Attempt(p) => self.child_outcome(p, res),
        }
    }

    /// A hop's child answered.
    fn child_outcome(&mut self, p: Key, res: Res) {
        let Some(pa) = self.attempts.get_mut(p) else {
            return;
        };
        pa.child = None;
        match pa.comp {
            Comp::Lb(_) => self.complete(p, res),
            Comp::Gateway(g) => {
                let gw = &mut self.gateways[g as usize];
                match (pa.phase, res) {
                    (Phase::DependencyWait, Res::Ok) => {
                        let lane = gw.timeout_lane;
                        self.forward(p, Some(lane));
                    }
                    (_, Res::Ok) => {
                        gw.caller.on_success(&mut pa.call, self.now, &mut gw.rng);
                        self.complete(p, Res::Ok)
                    }
                    (phase, Res::Err(cause, retry_after)) => {
                        // A failed dependency check is retried as a whole
                        // check; giving up on it fails the request.
                        let (backoff, failed) = if phase == Phase::DependencyWait {
                            (Phase::DependencyBackoff, Res::fail(Cause::DependencyFailed))
                        } else {
                            (Phase::Backoff, res)
                        };
                        match gw.caller.after_failure(
                            &mut pa.call,
                            self.now,
                            cause,
                            retry_after,
                            &mut gw.rng,
                        ) {
                            Next::RetryAt(t) => {
                                pa.phase = backoff;
                                self.queue.schedule(t, Ev::GatewayRetry { att: p });
                            }
                            Next::GiveUp => self.complete(p, failed),
                        }
                    }
                }
            }
            Comp::Service(_) => unreachable!("services have no children"),
        }
    }

    fn on_gateway_retry(&mut self, att: Key) {
        let Some(a) = self.attempts.get(att) else {
            return;
        };
        match (a.phase, a.comp) {
            (Phase::Backoff, Comp::Gateway(g)) => {
                let lane = self.gateways[g as usize].timeout_lane;
                self.forward(att, Some(lane));
            }
            (Phase::DependencyBackoff, Comp::Gateway(g)) => {
                let dep = self.gateways[g as usize]
                    .dependency
                    .expect("has a dependency");
                self.call_dependency(att, g as usize, dep);
            }
            _ => {}
        }
    }

    /// A caller's per-try timeout: detach the attempt (it keeps running) and
    /// tell the caller it timed out.
    fn on_timeout(&mut self, att: Key) {
        let Some(a) = self.attempts.get_mut(att) else {
            return;
        };
        let parent = a.parent;
        if parent == Parent::Detached {
            return;
        }
        a.parent = Parent::Detached;
        a.abandoned = true;
        let snapshot = Attempt { parent, ..*a };
        if let Parent::Attempt(p) = parent {
            // The parent no longer waits for this child.
            if let Some(pa) = self.attempts.get_mut(p) {
                pa.child = None;
            }
        }
        self.deliver(snapshot, Res::fail(Cause::Timeout));
    }

    // ---- services ------------------------------------------------------

    fn pick_pod(&mut self, s: usize) -> Option<usize> {
        // Least-request with two random choices (Envoy's default LEAST_REQUEST).
        let svc = &mut self.services[s];
        let n = svc.pods.len();
        if n == 0 {
            return None;
        }
        let load = |p: &Pod| {
            if p.ready {
                Some(p.sidecar_in + p.sidecar_queued + p.busy + p.app_queued)
            } else {
                None
            }
        };
        let a = svc.rng.random_range(0..n);
        let b = svc.rng.random_range(0..n);
        match (load(&svc.pods[a]), load(&svc.pods[b])) {
            (Some(x), Some(y)) => Some(if y < x { b } else { a }),
            (Some(_), None) => Some(a),
            (None, Some(_)) => Some(b),
            (None, None) => svc.pods.iter().position(|p| p.ready),
        }
    }

    fn service_admit(&mut self, att: Key, s: usize, ci: usize) {
        let Some(p) = self.pick_pod(s) else {
            return self.reject(att, ci, Cause::Unavailable);
        };
        let now = self.now;
        let svc = &mut self.services[s];
        self.attempts.get_mut(att).expect("live").slot = p as u32;
        if let Some((limit, qcap, lane)) = svc.sidecar {
            let pod = &mut svc.pods[p];
            if pod.sidecar_in < limit {
                pod.sidecar_avg.touch(now, pod.sidecar_in);
                pod.sidecar_in += 1;
            } else if pod.sidecar_queued < qcap {
                pod.sidecar_queue.push_back(att);
                pod.sidecar_queued += 1;
                self.attempts.get_mut(att).expect("live").phase = Phase::SidecarQueued;
                if let Some(lane) = lane {
                    self.queue
                        .schedule_in_lane(lane, now, Ev::QueueTimeout { att });
                }
                return;
            } else {
                return self.reject(att, ci, Cause::LimitRejected);
            }
        }
        self.app_admit(att, s, p, ci);
    }

    fn app_admit(&mut self, att: Key, s: usize, p: usize, ci: usize) {
        let now = self.now;
        let svc = &mut self.services[s];
        let pod = &mut svc.pods[p];
        if pod.busy < svc.workers {
            pod.busy_avg.touch(now, pod.busy);
            pod.busy_tick.touch(now, pod.busy);
            pod.busy += 1;
            let d = svc.service_time.sample(&mut svc.rng);
            self.attempts.get_mut(att).expect("live").phase = Phase::InService;
            self.queue.schedule(now + d, Ev::Done { att });
        } else if pod.app_queued < svc.app_queue_cap {
            pod.app_queue.push_back(att);
            pod.app_queued += 1;
            self.attempts.get_mut(att).expect("live").phase = Phase::AppQueued;
        } else {
            self.release_sidecar(s, p);
            self.reject(att, ci, Cause::LimitRejected);
        }
    }

    fn on_service_done(&mut self, att: Key) {
        let a = *self.attempts.get(att).expect("in service");
        let Comp::Service(s) = a.comp else {
            unreachable!()
        };
        let (s, p) = (s as usize, a.slot as usize);
        let now = self.now;
        {
            let pod = &mut self.services[s].pods[p];
            pod.busy_avg.touch(now, pod.busy);
            pod.busy_tick.touch(now, pod.busy);
            pod.busy -= 1;
        }
        self.complete(att, Res::Ok);
        self.pull_app_queue(s, p);
        self.release_sidecar(s, p);
    }

    /// A worker is free: start the next queued request.
    fn pull_app_queue(&mut self, s: usize, p: usize) {
        let ci = self.services[s].comp;
        while let Some(next) = self.services[s].pods[p].app_queue.pop_front() {
            let Some(a) = self.attempts.get(next) else {
                continue;
            };
            self.services[s].pods[p].app_queued -= 1;
            if a.abandoned && self.services[s].drop_expired {
                self.release_sidecar(s, p);
                self.reject(next, ci, Cause::Timeout);
                continue;
            }
            self.app_admit(next, s, p, ci);
            return;
        }
    }

    /// A sidecar slot is free: admit the next queued request.
    fn release_sidecar(&mut self, s: usize, p: usize) {
        let now = self.now;
        let ci = self.services[s].comp;
        let svc = &mut self.services[s];
        if svc.sidecar.is_none() {
            return;
        }
        let pod = &mut svc.pods[p];
        pod.sidecar_avg.touch(now, pod.sidecar_in);
        pod.sidecar_in -= 1;
        while let Some(next) = self.services[s].pods[p].sidecar_queue.pop_front() {
            let Some(a) = self.attempts.get(next) else {
                continue; // timed out in the queue already
            };
            let drop = a.abandoned && self.services[s].drop_expired;
            let pod = &mut self.services[s].pods[p];
            pod.sidecar_queued -= 1;
            if drop {
                self.reject(next, ci, Cause::Timeout);
                continue;
            }
            pod.sidecar_avg.touch(now, pod.sidecar_in);
            pod.sidecar_in += 1;
            self.app_admit(next, s, p, ci);
            return;
        }
    }

    fn on_queue_timeout(&mut self, att: Key) {
        let Some(a) = self.attempts.get(att) else {
            return;
        };
        if a.phase != Phase::SidecarQueued {
            return;
        }
        let Comp::Service(s) = a.comp else {
            unreachable!()
        };
        let (s, p) = (s as usize, a.slot as usize);
        self.services[s].pods[p].sidecar_queued -= 1;
        let ci = self.services[s].comp;
        // The key stays in the VecDeque and is skipped as stale later.
        self.reject(att, ci, Cause::QueueTimeout);
    }

    // ---- autoscaling ---------------------------------------------------

    fn on_autoscale(&mut self, s: usize) {
        let now = self.now;
        let svc = &mut self.services[s];
        let Some(hpa) = svc.autoscaler.as_mut() else {
            return;
        };
        self.queue
            .schedule(now + hpa.period(), Ev::Autoscale { svc: s as u16 });
        let workers = svc.workers as f64;
        let limit = svc.sidecar.map_or(1.0, |(l, _, _)| l as f64);
        let current = svc.pods.len() as u32 + svc.starting;
        let samples = svc.pods.iter_mut().map(|p| PodSample {
            ready: p.ready,
            app_utilisation: p.busy_avg.take(now, p.busy) / workers,
            sidecar_saturation: p.sidecar_avg.take(now, p.sidecar_in) / limit,
        });
        let desired = hpa.sync(now, current, samples);
        if desired > current {
            for _ in current..desired {
                svc.starting += 1;
                self.queue
                    .schedule(now + svc.pod_start, Ev::PodReady { svc: s as u16 });
            }
        } else if desired < current {
            // Scale down: stop sending to the newest ready pods; they finish
            // what they hold (removed once idle at the next sync).
            let mut to_remove = current - desired;
            for pod in svc.pods.iter_mut().rev() {
                if to_remove == 0 {
                    break;
                }
                if pod.ready {
                    pod.ready = false;
                    to_remove -= 1;
                }
            }
        }
        svc.pods
            .retain(|p| p.ready || p.sidecar_in + p.sidecar_queued + p.busy + p.app_queued > 0);
    }

    fn on_pod_ready(&mut self, s: usize) {
        let svc = &mut self.services[s];
        svc.starting = svc.starting.saturating_sub(1);
        svc.pods.push(Pod::new(true, self.now));
    }

    // ---- timeline ------------------------------------------------------

    fn on_action(&mut self, idx: usize) {
        let (at, kind) = self.actions[idx].clone();
        let what = match &kind {
            ActionKind::PauseNodes { lb, nodes } => {
                let l = self
                    .lbs
                    .iter()
                    .position(|x| self.comps[x.comp].name == *lb)
                    .expect("validated");
                for node in self.lbs[l].nodes.iter_mut().take(*nodes as usize) {
                    node.paused = true;
                }
                self.reset_flows(l);
                format!("pause {nodes} node(s) of {}", lb.as_str())
            }
            ActionKind::RestartNodes { lb } => {
                let l = self
                    .lbs
                    .iter()
                    .position(|x| self.comps[x.comp].name == *lb)
                    .expect("validated");
                for node in &mut self.lbs[l].nodes {
                    node.paused = false;
                }
                format!("restart nodes of {}", lb.as_str())
            }
            ActionKind::SetRetry { target, retry } => {
                let name = target.as_str();
                if let Some(p) = self.client_index(name) {
                    self.pops[p].caller.set_retry(retry.as_ref());
                } else if let Some(g) = self
                    .gateways
                    .iter()
                    .position(|g| self.comps[g.comp].name == *name)
                {
                    self.gateways[g].caller.set_retry(retry.as_ref());
                }
                match retry {
                    Some(r) => format!("{name}: retries set to {} attempt(s)", r.max_attempts),
                    None => format!("{name}: retries off"),
                }
            }
            ActionKind::Shed {
                lb,
                route,
                status,
                retry_after,
            } => {
                let (l, r) = (self.lb_index(lb.as_str()), self.route_idx(route.as_str()));
                let rule = ShedRule {
                    route: r as u32,
                    class: None,
                    status: *status,
                    retry_after: *retry_after,
                };
                self.lbs[l]
                    .rules
                    .add_rule(rule)
                    .expect("validated; 64 rules");
                format!("shed {} with {status} at {}", route.as_str(), lb.as_str())
            }
            ActionKind::Unshed { lb, route } => {
                let (l, r) = (self.lb_index(lb.as_str()), self.route_idx(route.as_str()));
                self.lbs[l].rules.remove_rule(r as u32, None);
                format!("stop shedding {} at {}", route.as_str(), lb.as_str())
            }
            ActionKind::Ramp {
                lb,
                route,
                sites,
                restore,
                status,
            } => {
                let (l, r) = (self.lb_index(lb.as_str()), self.route_idx(route.as_str()));
                self.lbs[l].rules.remove_rule(r as u32, None);
                let site_map = self
                    .sites
                    .iter()
                    .map(|s| sites.iter().position(|x| x.as_str() == s))
                    .collect();
                let mut staged = StagedRestore::new(restore, sites.len()).expect("validated");
                staged.start(self.now);
                let lb_ramps = &mut self.lbs[l].ramps;
                lb_ramps.retain(|x| x.route != r as u16);
                lb_ramps.push(LbRamp {
                    route: r as u16,
                    restore: staged,
                    site_map,
                    status: *status,
                });
                format!(
                    "staged restore of {} at {} over {} site(s)",
                    route.as_str(),
                    lb.as_str(),
                    sites.len()
                )
            }
            ActionKind::Admit {
                lb,
                route,
                site,
                fraction,
                status,
            } => {
                let (l, r) = (self.lb_index(lb), self.route_idx(route));
                let site_idx = site
                    .as_ref()
                    .map(|s| self.sites.iter().position(|x| x == s).expect("validated") as u8);
                let gates = &mut self.lbs[l].gates;
                gates.retain(|g| !(g.0 == r as u16 && g.1 == site_idx));
                if *fraction < 1.0 {
                    gates.push((r as u16, site_idx, *fraction, *status));
                }
                format!(
                    "admit {:.0}% of {route}{} at {lb}",
                    fraction * 100.0,
                    site.as_ref()
                        .map_or(String::new(), |s| format!(" from {s}"))
                )
            }
            ActionKind::ShiftTraffic { clients, fraction } => {
                for c in clients {
                    let p = self.client_index(c.as_str()).expect("validated");
                    self.pops[p].spill = *fraction;
                }
                format!(
                    "shift {:.0}% of {} to failover",
                    fraction * 100.0,
                    clients
                        .iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            ActionKind::SetRate { client, rate } => {
                let p = self.client_index(client.as_str()).expect("validated");
                let now = self.now;
                let pop = &mut self.pops[p];
                let diurnal = pop.schedule.diurnal;
                pop.schedule = RateSchedule::new(0.0, &[(now, rate * self.scale, 0)]);
                pop.schedule.diurnal = diurnal;
                pop.arrival_generation += 1;
                if let Some(t) = pop.schedule.next_after(now, &mut pop.rng) {
                    let generation = pop.arrival_generation;
                    self.queue.schedule(
                        t,
                        Ev::Arrive {
                            pop: p as u16,
                            generation,
                        },
                    );
                }
                format!("{}: rate set to {rate}/s", client.as_str())
            }
        };
        self.applied.push(AppliedAction { at, what });
    }

    /// Re-plans every failover from this interval's measurements. An LB's
    /// capacity is estimated by Little's law from its flows: admitted rate ×
    /// flow limit / flows in use (at saturation, simply what it admits).
    fn plan_failovers(&mut self) {
        let secs = self.interval as f64 / 1e9;
        let now = self.now;
        for f in &mut self.failovers {
            let lb_rates = |l: usize| {
                let lb = &self.lbs[l];
                let ci = lb.comp;
                let arrivals = self.comp_arrivals[ci] as f64 / secs;
                let admitted = arrivals - self.comp_rejected[ci] as f64 / secs;
                let in_use: u32 = lb.nodes.iter().map(|n| n.flows).sum();
                let running = lb.nodes.iter().filter(|n| !n.paused).count() as f64;
                let limit = running * lb.flows_per_node as f64;
                let capacity = if in_use == 0 {
                    f64::INFINITY
                } else {
                    admitted * limit / in_use as f64
                };
                (arrivals, admitted, capacity)
            };
            let spilled: f64 = f
                .pops
                .iter()
                .map(|&p| self.pops[p].spilled as f64)
                .sum::<f64>()
                / secs;
            let started: f64 = f
                .pops
                .iter()
                .map(|&p| self.pops[p].started as f64)
                .sum::<f64>()
                / secs;
            let (p_arrivals, _, p_capacity) = lb_rates(f.primary);
            let (_, s_admitted, s_capacity) = lb_rates(f.secondary);
            let rates = RegionRates {
                primary_demand: p_arrivals + spilled,
                primary_capacity: p_capacity,
                secondary_capacity: s_capacity,
                secondary_base_load: (s_admitted - spilled).max(0.0),
            };
            let fraction_of_primary = f.policy.observe(now, rates);
            let spill_rate = fraction_of_primary * rates.primary_demand;
            let share = if started > 0.0 {
                (spill_rate / started).clamp(0.0, 1.0)
            } else {
                0.0
            };
            for &p in &f.pops {
                self.pops[p].spill = share;
            }
        }
    }

    fn client_index(&self, name: &str) -> Option<usize> {
        self.client_names.iter().position(|n| n == name)
    }

    fn lb_index(&self, name: &str) -> usize {
        self.lbs
            .iter()
            .position(|x| self.comps[x.comp].name == name)
            .expect("validated lb name")
    }

    fn route_idx(&self, name: &str) -> usize {
        self.routes
            .iter()
            .position(|r| r.series.name == name)
            .expect("validated route name")
    }

    /// Paused nodes drop their flows: each attempt holding one is answered
    /// with a reset and detached from its (still running) child.
    fn reset_flows(&mut self, l: usize) {
        // Scan the slab for attempts on paused nodes of this LB. Pauses are
        // rare operator actions, so a linear scan is fine here.
        let mut victims = Vec::new();
        self.attempts.for_each(|k, a| {
            if a.comp == Comp::Lb(l as u16)
                && a.slot != u32::MAX
                && self.lbs[l].nodes[a.slot as usize].paused
            {
                victims.push((k, a.child));
            }
        });
        for (k, child) in victims {
            if let Some(c) = child {
                if let Some(ca) = self.attempts.get_mut(c) {
                    ca.parent = Parent::Detached;
                    ca.abandoned = true;
                }
            }
            self.complete(k, Res::fail(Cause::Reset));
        }
    }

    // ---- recording -----------------------------------------------------

    fn on_tick(&mut self) {
        let now = self.now;
        for l in 0..self.lbs.len() {
            let lb = &mut self.lbs[l];
            let before = lb.ramps.len();
            for r in &mut lb.ramps {
                r.restore.advance(now);
            }
            let mut done = Vec::new();
            lb.ramps.retain(|r| {
                let complete = r.restore.is_complete();
                if complete {
                    done.push(r.route);
                }
                !complete
            });
            if lb.ramps.len() != before {
                let lb_name = self.comps[lb.comp].name.clone();
                for r in done {
                    let what = format!(
                        "staged restore of {} at {lb_name} complete",
                        self.routes[r as usize].series.name
                    );
                    self.applied.push(AppliedAction { at: now, what });
                }
            }
        }
        if now < self.end {
            self.queue.schedule(now + self.interval, Ev::Tick);
        }
        for pop in self.pops.iter_mut().filter(|p| p.workers != u32::MAX) {
            let oldest = pop.backlog.front().map_or(0, |&t| now - t);
            let wait = pop.wait_max.max(oldest) as f64 / 1e9;
            pop.wait_max = 0;
            let series = &mut self.routes[pop.route as usize].series;
            let i = series.attempts.len();
            if series.job_wait_s.len() <= i {
                series.job_wait_s.resize(i + 1, 0.0);
            }
            series.job_wait_s[i] = series.job_wait_s[i].max(wait);
        }
        for r in &mut self.routes {
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
        self.plan_failovers();
        for p in &mut self.pops {
            p.spilled = 0;
            p.started = 0;
        }
        for (ci, c) in self.comps.iter_mut().enumerate() {
            c.arrivals.push(std::mem::take(&mut self.comp_arrivals[ci]));
            c.rejected.push(std::mem::take(&mut self.comp_rejected[ci]));
        }
        for lb in &self.lbs {
            let c = &mut self.comps[lb.comp];
            let running = lb.nodes.iter().filter(|n| !n.paused).count();
            c.in_flight
                .push(lb.nodes.iter().map(|n| n.flows as f64).sum());
            c.limit.push((running as u32 * lb.flows_per_node) as f64);
            c.queue.push(0.0);
            c.replicas.push(running as f64);
            c.app_utilisation.push(0.0);
        }
        for gw in &self.gateways {
            let c = &mut self.comps[gw.comp];
            c.in_flight.push(0.0);
            c.limit.push(0.0);
            c.queue.push(0.0);
            c.replicas.push(0.0);
            c.app_utilisation.push(0.0);
        }
        for svc in &mut self.services {
            let c = &mut self.comps[svc.comp];
            let ready = svc.pods.iter().filter(|p| p.ready).count();
            let (inflight, limit) = match svc.sidecar {
                Some((l, _, _)) => (
                    svc.pods.iter().map(|p| p.sidecar_in as f64).sum(),
                    (l as usize * ready) as f64,
                ),
                None => (
                    svc.pods.iter().map(|p| p.busy as f64).sum(),
                    (svc.workers as usize * ready) as f64,
                ),
            };
            c.in_flight.push(inflight);
            c.limit.push(limit);
            c.queue.push(
                svc.pods
                    .iter()
                    .map(|p| (p.sidecar_queued + p.app_queued) as f64)
                    .sum(),
            );
            c.replicas.push(ready as f64);
            let pods = svc.pods.len().max(1) as f64;
            let util: f64 = svc
                .pods
                .iter_mut()
                .map(|p| p.busy_tick.take(now, p.busy))
                .sum::<f64>()
                / (svc.workers as f64 * pods);
            c.app_utilisation.push(util);
        }
    }
}

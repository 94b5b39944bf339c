//! A scenario turned into what the lab starts: pods per service at
//! `--scale`, populations with their rates, the timeline it applies, and
//! the run's bounds, all checked before anything binds a port.

use std::time::Duration;

use stormbreak_policy::Nanos;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::limit::{LimitConfig, QueueConfig};
use stormbreak_policy::ramp::StagedRestoreConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::SaturationConfig;
use stormbreak_sim::Scenario;
use stormbreak_sim::dist::ServiceTimeSpec;
use stormbreak_sim::engine::scale::{FleetScale, scale_autoscaler, scale_gateway};
use stormbreak_sim::scenario::{ActionKind, AutoscalerSpec, GatewaySpec, SidecarSpec, StallMode};

use crate::support;

/// What an app whose `queue` is left unset may hold per pod: the
/// simulator's `Limits::default_app_queue`, so both refuse at the same
/// depth.
pub const DEFAULT_APP_QUEUE: u32 = 100_000;
/// Most logical requests one population may have in flight; a send that
/// finds this many is counted as dropped (k6's `dropped_iterations`).
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 4_096;
/// Most sends the whole run may make (rates × duration, bounded from
/// above before the run starts).
pub const MAX_SENDS: f64 = 2_000_000.0;
/// Most attempts a fan-out population may have in flight: its logical
/// requests in flight (`max_in_flight`) × `fanout_max_in_flight`, bounded
/// from above before the run starts (each is a task and a connection).
pub const MAX_FANOUT_ATTEMPTS_IN_FLIGHT: u64 = 262_144;
/// Most pods the lab starts (each is a listening socket and, with a
/// sidecar, a guard).
pub const MAX_PODS: u32 = 64;
/// Most guard instances of LB pools (nodes) a run starts: each is a
/// listening socket and a guard.
pub const MAX_POOL_INSTANCES: u32 = 64;
/// Most recording intervals of a lab run.
pub const MAX_INTERVALS: u64 = 10_000;

/// Flags of a lab run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Overrides the scenario's `seed`.
    pub seed: Option<u64>,
    /// Traffic and pods scaled alike, pods as the simulator shrinks them
    /// (`stormbreak_sim::engine::scale::FleetScale`).
    pub scale: f64,
    /// Longest scenario `duration` the lab agrees to run.
    pub duration_cap: Duration,
    /// Per-population cap on logical requests in flight.
    pub max_in_flight: u32,
    /// Where to write each route's entry addresses when the run's clock
    /// starts, for a prober pointed at the lab (`stormbreak lab --entries`).
    pub entries: Option<std::path::PathBuf>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            seed: None,
            scale: 1.0,
            duration_cap: Duration::from_secs(120),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            entries: None,
        }
    }
}

/// One service: identical pods, each a backend and maybe a sidecar, at
/// `--scale` as the simulator shrinks it (pods rounded, per-pod
/// capacities bent by the rest: [`FleetScale`]).
#[derive(Debug, Clone)]
pub struct ServicePlan {
    /// Component name.
    pub name: String,
    /// Pods at time zero (replicas at scale).
    pub pods: u32,
    /// App workers per pod.
    pub workers: u32,
    /// App queue per pod (0: none).
    pub app_queue: u32,
    /// Service time, slept.
    pub service_time: ServiceTimeSpec,
    /// The sidecar's limit and queue, run by a guard in front of each pod.
    pub sidecar: Option<SidecarSpec>,
    /// The HPA at scale (`min`, `max` and `Pods` policies converted).
    pub autoscaler: Option<AutoscalerSpec>,
    /// From the controller's start of a pod until it is ready.
    pub pod_start: Nanos,
    /// How often the replica controller looks again after a kill.
    pub controller_period: Nanos,
    /// How `--scale` shrinks this service (fault pod counts, capacities).
    pub fleet: FleetScale,
}

impl ServicePlan {
    /// The most replicas the service may want: its autoscaler's `max`, or
    /// its pods at time zero.
    pub fn max_pods(&self) -> u32 {
        self.autoscaler
            .as_ref()
            .map_or(self.pods, |a| a.max.max(self.pods))
    }
}

/// A component on a route's path, by its index in its own list of the
/// plan ([`LabPlan::lbs`], [`LabPlan::services`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// An LB pool.
    Lb(usize),
    /// A gateway.
    Gateway(usize),
    /// A service.
    Service(usize),
}

/// One LB pool: `nodes` guards, each holding at most `flows_per_node`
/// requests in flight (the simulator's flows).
#[derive(Debug, Clone)]
pub struct LbPlan {
    /// Component name.
    pub name: String,
    /// Nodes (not scaled, as in the simulator).
    pub nodes: u32,
    /// Flows one node holds (scaled as the simulator's `scaled`).
    pub flows_per_node: u32,
    /// The staged restore its `ramp` actions run, when it has any: each
    /// node then has a listener per site.
    pub ramp: Option<LbRampPlan>,
}

/// The sites an LB's `ramp` restores, in order, and its refusal's status
/// (`support.rs` checked that every ramp at the LB agrees on both).
#[derive(Debug, Clone)]
pub struct LbRampPlan {
    /// Client `site` labels in restore order.
    pub sites: Vec<String>,
    /// The status a request not yet admitted gets.
    pub status: u16,
}

/// One gateway: `instances` guards (at scale), each with the gateway's
/// limit, queue and saturation table, calling its dependency route and
/// forwarding under its retry policy and budget.
#[derive(Debug, Clone)]
pub struct GatewayPlan {
    /// Component name.
    pub name: String,
    /// Instances at scale (the simulator's `FleetScale` pods).
    pub instances: u32,
    /// Per-instance limit at scale (a `fixed` one bent by the rest).
    pub limit: Option<LimitConfig>,
    /// Per-instance queue at scale.
    pub queue: Option<QueueConfig>,
    /// Shedding by class (with `limit`); `None`: the guard's defaults.
    pub saturation: Option<SaturationConfig>,
    /// Retries of both calls.
    pub retry: Option<RetryConfig>,
    /// Retry budget (`None`: unbudgeted, as the simulator's gateway).
    pub budget: Option<BudgetConfig>,
    /// Per-try timeout of the dependency call and of each forwarded call.
    pub timeout: Nanos,
    /// Index of the dependency route in [`LabPlan::routes`].
    pub dependency: Option<usize>,
}

/// One client population.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// Population name.
    pub name: String,
    /// Index of its route in [`LabPlan::routes`].
    pub route: usize,
    /// The route's first hop: where its attempts go.
    pub first: Hop,
    /// Rate at time zero (per second, scaled).
    pub rate: f64,
    /// Later changes: (at, rate, ramp), rates scaled.
    pub steps: Vec<(Nanos, f64, Nanos)>,
    /// The daily cycle the rate is multiplied by, as the simulator's.
    pub diurnal: Option<stormbreak_sim::scenario::DiurnalSpec>,
    /// Per-attempt timeout.
    pub timeout: Nanos,
    /// Retry policy, `per_try_timeout` set to `timeout`.
    pub retry: Option<RetryConfig>,
    /// Retry budget (`None`: unbudgeted, as the simulator's default).
    pub budget: Option<BudgetConfig>,
    /// Whether `Retry-After` is waited for.
    pub honour_retry_after: bool,
    /// The fan-out bug (`fanout` > 0), run by `fanout.rs` instead of the
    /// retry layer.
    pub fanout: Option<FanoutPlan>,
    /// Its `site` label: at an LB with a `ramp`, it sends to the nodes'
    /// listener for that site.
    pub site: Option<String>,
}

/// A population's fan-out bug, as the scenario gives it.
#[derive(Debug, Clone, Copy)]
pub struct FanoutPlan {
    /// Attempts each failed attempt spawns (`fanout`, at least 1).
    pub fanout: u32,
    /// Most attempts of one operation in flight (`fanout_max_in_flight`,
    /// default `fanout`), spawned ones waiting their delay included.
    pub max_in_flight: u32,
    /// Delay before spawned attempts are sent (`fanout_delay`).
    pub delay: Nanos,
    /// How long after its start an operation still spawns
    /// (`give_up_after`).
    pub give_up_after: Nanos,
}

/// A timeline action the lab applies.
#[derive(Debug, Clone)]
pub enum LabAction {
    /// Service times that start from `at` on are `factor × sample + add`.
    SlowService {
        /// Index into [`LabPlan::services`].
        service: usize,
        /// Multiplier.
        factor: f64,
        /// Added latency.
        add: Nanos,
    },
    /// A population's rate from now on (scaled).
    SetRate {
        /// Index into [`LabPlan::clients`].
        client: usize,
        /// Per second.
        rate: f64,
    },
    /// A population's retry policy from now on (`None`: no retries),
    /// `per_try_timeout` set to the client's `timeout`.
    SetRetry {
        /// Index into [`LabPlan::clients`].
        client: usize,
        /// The new policy.
        retry: Option<RetryConfig>,
    },
    /// Workers and sidecar limit per pod (scaled), for the pods running
    /// and those to come.
    SetCapacity {
        /// Index into [`LabPlan::services`].
        service: usize,
        /// Workers per pod, when changed.
        workers: Option<u32>,
        /// Sidecar limit per pod, when changed.
        sidecar_limit: Option<u32>,
    },
    /// An LB pool's flow cap per node (scaled), one node or every one.
    SetLbLimit {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
        /// One node, counting from 0; every node when `None`.
        node: Option<u32>,
        /// The new `flows_per_node`.
        flows: u32,
    },
    /// A gateway's retry policy from now on (`None`: one attempt), its
    /// budget's state kept.
    SetGatewayRetry {
        /// Index into [`LabPlan::gateways`].
        gateway: usize,
        /// The new policy, as the scenario gives it.
        retry: Option<RetryConfig>,
    },
    /// The oldest `pods` (scaled) ready pods are closed at once.
    KillPods {
        /// Index into [`LabPlan::services`].
        service: usize,
        /// How many.
        pods: u32,
    },
    /// The oldest `pods` (scaled) ready pods' apps fail: every request is
    /// answered by a closed connection.
    FailPods {
        /// Index into [`LabPlan::services`].
        service: usize,
        /// How many.
        pods: u32,
    },
    /// The first `nodes` nodes of an LB pool pause: out of the rotation,
    /// their flows reset.
    PauseNodes {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
        /// How many, counting from the first.
        nodes: u32,
    },
    /// An operator shed rule at an LB pool, for the one route it carries:
    /// every request answered `status` (with `Retry-After` when set).
    Shed {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
        /// HTTP status (403, 429, 503).
        status: u16,
        /// `Retry-After` to advertise.
        retry_after: Option<Nanos>,
    },
    /// The LB pool's shed rule is removed.
    Unshed {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
    },
    /// A staged restore of the LB's route, site by site (its sites and
    /// refusal status are the node's config, [`LbPlan::ramp`]).
    Ramp {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
        /// Ramp steps, hold and error guard.
        restore: StagedRestoreConfig,
    },
    /// Every paused node of an LB pool starts again.
    RestartNodes {
        /// Index into [`LabPlan::lbs`].
        lb: usize,
    },
    /// Services stop answering (`hang`) or refuse at once (`fail`).
    Stall {
        /// Indices into [`LabPlan::services`].
        services: Vec<usize>,
        /// How.
        mode: StallMode,
    },
}

/// An action on the timeline: applied at `at`, undone at `until` if set.
#[derive(Debug, Clone)]
pub struct Timed {
    /// When it applies.
    pub at: Nanos,
    /// When it is undone (`at + for`).
    pub until: Option<Nanos>,
    /// What it does.
    pub action: LabAction,
    /// Human description, as the simulator words it in its recording.
    pub what: String,
}

/// Everything a lab run starts.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// Scenario name.
    pub name: String,
    /// Run length.
    pub duration: Nanos,
    /// Recording interval.
    pub interval: Nanos,
    /// Seed used.
    pub seed: u64,
    /// Scale used.
    pub scale: f64,
    /// Seconds after midnight of time zero.
    pub clock_origin_s: u64,
    /// Route names, scenario order.
    pub routes: Vec<String>,
    /// Each route's path, edge first, as [`LabPlan::routes`].
    pub paths: Vec<Vec<Hop>>,
    /// LB pools, scenario order.
    pub lbs: Vec<LbPlan>,
    /// Gateways, scenario order.
    pub gateways: Vec<GatewayPlan>,
    /// Services, scenario order.
    pub services: Vec<ServicePlan>,
    /// Populations, scenario order.
    pub clients: Vec<ClientPlan>,
    /// Timeline, in time order.
    pub actions: Vec<Timed>,
    /// Per-population cap on logical requests in flight.
    pub max_in_flight: u32,
    /// Where the entry addresses go when the clock starts ([`LabOptions::entries`]).
    pub entries: Option<std::path::PathBuf>,
}

/// Why a scenario cannot be run by the lab.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Features the lab does not run yet, one per line.
    #[error(
        "the lab cannot run this scenario yet; nothing was started. Not supported:\n  - {}",
        .0.join("\n  - ")
    )]
    Unsupported(Vec<String>),
    /// A bound of the run.
    #[error("{0}")]
    Bound(String),
}

fn ns_secs(n: Nanos) -> f64 {
    n.as_nanos() as f64 / 1e9
}

impl LabPlan {
    /// Checks `sc` against what the lab runs and its bounds, and builds the
    /// plan; nothing is started.
    pub fn new(sc: &Scenario, opts: &LabOptions) -> Result<LabPlan, PlanError> {
        let refused = support::unsupported(sc);
        let scale = opts.scale;
        let mut services = Vec::new();
        for s in &sc.services {
            let fleet = FleetScale::new(s.replicas, scale);
            // Per-pod capacities as the simulator's `Engine::new` sets
            // them: `0` stays none at any scale.
            let per_pod_or_none = |q: u32| if q == 0 { 0 } else { fleet.per_pod(q) };
            services.push(ServicePlan {
                name: s.name.get_ref().clone(),
                pods: fleet.pods(s.replicas),
                workers: fleet.per_pod(s.app.workers),
                app_queue: s.app.queue.map_or(DEFAULT_APP_QUEUE, per_pod_or_none),
                service_time: s.app.service_time,
                sidecar: s.sidecar.as_ref().map(|sc| SidecarSpec {
                    limit: fleet.per_pod(sc.limit),
                    queue: per_pod_or_none(sc.queue),
                    queue_timeout: sc.queue_timeout,
                }),
                autoscaler: s.autoscaler.as_ref().map(|a| scale_autoscaler(a, fleet)),
                pod_start: s.pod_start.unwrap_or_else(|| {
                    s.autoscaler
                        .as_ref()
                        .map_or(stormbreak_sim::scenario::DEFAULT_POD_START, |a| a.pod_start)
                }),
                controller_period: s.controller_period,
                fleet,
            });
        }
        if !refused.is_empty() {
            return Err(PlanError::Unsupported(refused));
        }
        // Bounded by the replicas each service may want (its HPA's `max`):
        // a run never serves more.
        let pods: u32 = services.iter().map(|s| s.max_pods()).sum();
        if pods > MAX_PODS {
            return Err(PlanError::Bound(format!(
                "up to {pods} pods at --scale {scale} (replicas, or an autoscaler's max); the lab \
                 serves at most {MAX_PODS}"
            )));
        }
        let instances: u32 = sc.lbs.iter().map(|l| l.nodes).sum::<u32>()
            + sc.gateways
                .iter()
                .map(|g| FleetScale::new(g.instances, scale).pods(g.instances))
                .sum::<u32>();
        if instances > MAX_POOL_INSTANCES {
            return Err(PlanError::Bound(format!(
                "{instances} LB nodes and gateway instances at --scale {scale}; the lab starts \
                 at most {MAX_POOL_INSTANCES}"
            )));
        }
        let meta = &sc.scenario;
        let cap = Nanos::from(opts.duration_cap);
        if meta.duration > cap {
            return Err(PlanError::Bound(format!(
                "duration = {} is longer than the lab's --duration-cap {}s; shorten the scenario \
                 or raise the cap",
                stormbreak_policy::units::format_duration(meta.duration),
                opts.duration_cap.as_secs()
            )));
        }
        if meta.duration.as_nanos() / meta.interval.as_nanos().max(1) > MAX_INTERVALS {
            return Err(PlanError::Bound(format!(
                "more than {MAX_INTERVALS} recording intervals; use a longer interval"
            )));
        }
        let routes: Vec<String> = sc.routes.iter().map(|r| r.name.get_ref().clone()).collect();
        let service_ix = |name: &str| services.iter().position(|s| s.name == name);
        let lbs: Vec<LbPlan> = sc
            .lbs
            .iter()
            .map(|l| LbPlan {
                name: l.name.get_ref().clone(),
                nodes: l.nodes,
                flows_per_node: stormbreak_sim::engine::scale::scaled(l.flows_per_node, scale),
                ramp: sc.actions.iter().find_map(|a| match &a.get_ref().kind {
                    ActionKind::Ramp {
                        lb, sites, status, ..
                    } if lb == l.name.get_ref() => Some(LbRampPlan {
                        sites: sites.clone(),
                        status: *status,
                    }),
                    _ => None,
                }),
            })
            .collect();
        let gateways: Vec<GatewayPlan> = sc
            .gateways
            .iter()
            .map(|g| gateway_plan(sc, g, scale))
            .collect();
        let hop = |name: &str| {
            lbs.iter()
                .position(|l| l.name == name)
                .map(Hop::Lb)
                .or_else(|| {
                    gateways
                        .iter()
                        .position(|g| g.name == name)
                        .map(Hop::Gateway)
                })
                .or_else(|| service_ix(name).map(Hop::Service))
                .expect("support checked every hop")
        };
        let paths: Vec<Vec<Hop>> = sc
            .routes
            .iter()
            .map(|r| r.path.iter().map(|h| hop(h.get_ref())).collect())
            .collect();
        let mut clients = Vec::new();
        for c in &sc.clients {
            let route = sc.route_index(c.route.get_ref()).expect("validated route");
            let first = paths[route][0];
            let retry = c.retry.clone().map(|mut r| {
                r.per_try_timeout = Some(c.timeout);
                r
            });
            clients.push(ClientPlan {
                name: c.name.get_ref().clone(),
                route,
                first,
                rate: c.rate * scale,
                steps: c
                    .steps
                    .iter()
                    .map(|s| (s.at, s.rate * scale, s.ramp))
                    .collect(),
                diurnal: c.diurnal.clone(),
                timeout: c.timeout,
                retry,
                budget: c.budget.clone(),
                honour_retry_after: c.honour_retry_after,
                site: c.site.clone(),
                // As the simulator's `engine/mod.rs` builds its population.
                fanout: (c.fanout > 0).then(|| FanoutPlan {
                    fanout: c.fanout,
                    max_in_flight: c.fanout_max_in_flight.unwrap_or(c.fanout.max(1)),
                    delay: c.fanout_delay,
                    give_up_after: c
                        .give_up_after
                        .expect("validated: fanout needs give_up_after"),
                }),
            });
        }
        let client_ix = |name: &str| {
            clients
                .iter()
                .position(|c| c.name == name)
                .expect("validated client")
        };
        let lb_ix = |name: &str| {
            lbs.iter()
                .position(|l| l.name == name)
                .expect("validated LB pool")
        };
        let mut actions = Vec::new();
        for a in &sc.actions {
            let a = a.get_ref();
            let until = a.lasts.map(|d| a.at + d);
            let action = match &a.kind {
                ActionKind::SlowService {
                    service,
                    factor,
                    capacity,
                    add,
                } => LabAction::SlowService {
                    service: service_ix(service).expect("validated service"),
                    // The simulator's own reading of factor or capacity.
                    factor: stormbreak_sim::scenario::slowdown(*factor, *capacity),
                    add: *add,
                },
                ActionKind::SetRate { client, rate } => LabAction::SetRate {
                    client: client_ix(client),
                    rate: rate * scale,
                },
                ActionKind::SetRetry { target, retry } => {
                    match gateways.iter().position(|g| g.name == *target) {
                        Some(gateway) => LabAction::SetGatewayRetry {
                            gateway,
                            retry: retry.clone(),
                        },
                        None => LabAction::SetRetry {
                            client: client_ix(target),
                            retry: retry.clone().map(|mut r| {
                                r.per_try_timeout = Some(clients[client_ix(target)].timeout);
                                r
                            }),
                        },
                    }
                }
                ActionKind::SetCapacity {
                    service,
                    workers,
                    sidecar_limit,
                } => {
                    let s = service_ix(service).expect("validated service");
                    let fleet = &services[s].fleet;
                    LabAction::SetCapacity {
                        service: s,
                        workers: workers.map(|w| fleet.per_pod(w)),
                        sidecar_limit: sidecar_limit.map(|l| fleet.per_pod(l)),
                    }
                }
                ActionKind::SetLbLimit {
                    lb,
                    node,
                    flows_per_node,
                    ..
                } => LabAction::SetLbLimit {
                    lb: lb_ix(lb),
                    node: *node,
                    // support.rs refused one with maxconn, and the
                    // simulator asks for one of the two.
                    flows: stormbreak_sim::engine::scale::scaled(
                        flows_per_node.expect("support checked flows_per_node"),
                        scale,
                    ),
                },
                ActionKind::KillPods { service, pods } => {
                    let s = service_ix(service).expect("validated service");
                    LabAction::KillPods {
                        service: s,
                        pods: services[s].fleet.pods(*pods),
                    }
                }
                ActionKind::FailPods { service, pods } => {
                    let s = service_ix(service).expect("validated service");
                    LabAction::FailPods {
                        service: s,
                        pods: services[s].fleet.pods(*pods),
                    }
                }
                ActionKind::PauseNodes { lb, nodes } => LabAction::PauseNodes {
                    lb: lb_ix(lb),
                    nodes: *nodes,
                },
                ActionKind::RestartNodes { lb } => LabAction::RestartNodes { lb: lb_ix(lb) },
                ActionKind::Ramp { lb, restore, .. } => LabAction::Ramp {
                    lb: lb_ix(lb),
                    restore: restore.clone(),
                },
                ActionKind::Shed {
                    lb,
                    status,
                    retry_after,
                    ..
                } => LabAction::Shed {
                    lb: lb_ix(lb),
                    status: *status,
                    retry_after: *retry_after,
                },
                ActionKind::Unshed { lb, .. } => LabAction::Unshed { lb: lb_ix(lb) },
                ActionKind::Stall { targets, mode } => LabAction::Stall {
                    services: targets
                        .iter()
                        .map(|t| service_ix(t).expect("support checked the targets"))
                        .collect(),
                    mode: *mode,
                },
                _ => unreachable!("support::unsupported refused it"),
            };
            let what = describe(&a.kind);
            actions.push(Timed {
                at: a.at,
                until,
                // The simulator's wording, so both recordings read alike.
                what: match a.lasts {
                    Some(d) => format!("{what} for {d}"),
                    None => what,
                },
                action,
            });
        }
        actions.sort_by_key(|t| t.at);
        // The most any population could send: its highest rate for the
        // whole run (rates are piecewise linear between these points).
        let sends: f64 = clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let set = actions.iter().filter_map(|t| match t.action {
                    LabAction::SetRate { client, rate } if client == i => Some(rate),
                    _ => None,
                });
                let peak = c
                    .steps
                    .iter()
                    .map(|s| s.1)
                    .chain(set)
                    .fold(c.rate, f64::max);
                peak * ns_secs(meta.duration)
            })
            .sum();
        if sends > MAX_SENDS {
            return Err(PlanError::Bound(format!(
                "up to {sends:.0} requests in {}; the lab sends at most {MAX_SENDS:.0} in a run \
                 (lower the rates or use --scale)",
                stormbreak_policy::units::format_duration(meta.duration)
            )));
        }
        for c in &clients {
            let Some(f) = &c.fanout else { continue };
            let attempts = u64::from(opts.max_in_flight) * u64::from(f.max_in_flight);
            if attempts > MAX_FANOUT_ATTEMPTS_IN_FLIGHT {
                return Err(PlanError::Bound(format!(
                    "[[client]] {:?}: fanout_max_in_flight = {} × {} logical requests in flight \
                     is up to {attempts} attempts in flight; the lab allows at most \
                     {MAX_FANOUT_ATTEMPTS_IN_FLIGHT} (lower fanout_max_in_flight)",
                    c.name, f.max_in_flight, opts.max_in_flight
                )));
            }
        }
        Ok(LabPlan {
            name: meta.name.clone(),
            duration: meta.duration,
            interval: meta.interval,
            seed: opts.seed.unwrap_or(meta.seed),
            scale,
            clock_origin_s: meta
                .clock_origin
                .as_deref()
                .and_then(stormbreak_sim::scenario::parse_clock)
                .unwrap_or(0),
            routes,
            paths,
            lbs,
            gateways,
            services,
            clients,
            actions,
            max_in_flight: opts.max_in_flight,
            entries: opts.entries.clone(),
        })
    }

    /// The recording's component index of `hop`: LB pools first, then
    /// services, as the simulator adds them.
    pub fn component(&self, hop: Hop) -> usize {
        match hop {
            Hop::Lb(i) => i,
            Hop::Gateway(i) => self.lbs.len() + i,
            Hop::Service(i) => self.lbs.len() + self.gateways.len() + i,
        }
    }

    /// Whether service `s` is reached through a guard (an LB node or a
    /// gateway: after the first hop of a route, or first on a gateway's
    /// dependency route): its pods are then that guard's upstream, and it
    /// is counted at its parts.
    pub fn is_behind_a_hop(&self, s: usize) -> bool {
        let dependency = |r: usize| self.gateways.iter().any(|g| g.dependency == Some(r));
        self.paths.iter().enumerate().any(|(r, p)| {
            p.iter().skip(1).any(|h| *h == Hop::Service(s))
                || (dependency(r) && p.first() == Some(&Hop::Service(s)))
        })
    }

    /// Number of recording intervals (the last may be partial, as in the
    /// simulator).
    pub fn intervals(&self) -> usize {
        self.duration.as_nanos().div_ceil(self.interval.as_nanos()) as usize
    }
}

/// A gateway at `scale`, by the simulator's own law
/// (`engine::scale::scale_gateway`).
fn gateway_plan(sc: &Scenario, g: &GatewaySpec, scale: f64) -> GatewayPlan {
    let scaled = scale_gateway(g.limit.as_ref(), g.queue.as_ref(), g.instances, scale);
    GatewayPlan {
        name: g.name.get_ref().clone(),
        instances: scaled.instances,
        limit: scaled.limit,
        queue: scaled.queue,
        saturation: g.saturation.clone(),
        retry: g.retry.clone(),
        budget: g.budget.clone(),
        timeout: g.timeout,
        dependency: g
            .dependency
            .as_ref()
            .map(|d| sc.route_index(d.get_ref()).expect("validated route")),
    }
}

/// The simulator's wording of an action (`engine/timeline.rs`,
/// `Planned::resolve`), with the scenario's own numbers, so both
/// recordings read alike.
fn describe(kind: &ActionKind) -> String {
    match kind {
        ActionKind::SlowService {
            service,
            factor,
            capacity,
            add,
        } => {
            let factor = stormbreak_sim::scenario::slowdown(*factor, *capacity);
            format!("{service}: service time × {factor} + {add}")
        }
        ActionKind::SetRate { client, rate } => format!("{client}: rate set to {rate}/s"),
        ActionKind::SetRetry { target, retry } => match retry {
            Some(r) => format!("{target}: retries set to {} attempt(s)", r.max_attempts),
            None => format!("{target}: retries off"),
        },
        ActionKind::SetCapacity {
            service,
            workers,
            sidecar_limit,
        } => format!(
            "{service}: capacity set to{}{}",
            workers.map_or(String::new(), |w| format!(" {w} worker(s)")),
            sidecar_limit.map_or(String::new(), |l| format!(" sidecar limit {l}"))
        ),
        ActionKind::KillPods { service, pods } => format!("kill {pods} pod(s) of {service}"),
        ActionKind::FailPods { service, pods } => format!("fail {pods} pod(s) of {service}"),
        ActionKind::PauseNodes { lb, nodes } => format!("pause {nodes} node(s) of {lb}"),
        ActionKind::RestartNodes { lb } => format!("restart nodes of {lb}"),
        ActionKind::Shed {
            lb, route, status, ..
        } => format!("shed {route} with {status} at {lb}"),
        ActionKind::Unshed { lb, route, .. } => format!("stop shedding {route} at {lb}"),
        ActionKind::Stall { targets, mode } => format!(
            "stall ({}) {}",
            match mode {
                StallMode::Hang => "hang",
                StallMode::Fail => "fail",
            },
            targets.join(", ")
        ),
        other => other.name().to_owned(),
    }
}

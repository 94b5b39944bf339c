//! Timeline actions: the operators' levers, with every name resolved to a
//! typed handle when the engine is built.

use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::{StagedRestore, StagedRestoreConfig};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::{Criticality, ShedRule};

use super::Engine;
use super::Names;
use super::ids::{Comp, GatewayId, LbId, PopId, RouteId, ServiceId, SiteId};
use crate::scenario::{ActionKind, StallMode};

/// Whose retry policy a `set_retry` replaces.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RetryTarget {
    Client(PopId),
    Gateway(GatewayId),
}

/// A resolved action.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    PauseNodes {
        lb: LbId,
        nodes: u32,
    },
    RestartNodes {
        lb: LbId,
    },
    SetRetry {
        target: RetryTarget,
        retry: Option<RetryConfig>,
    },
    Shed {
        lb: LbId,
        route: RouteId,
        class: Option<Criticality>,
        status: u16,
        retry_after: Option<Nanos>,
    },
    Unshed {
        lb: LbId,
        route: RouteId,
        class: Option<Criticality>,
    },
    Ramp {
        lb: LbId,
        route: RouteId,
        sites: Vec<Option<usize>>,
        ramp_sites: usize,
        restore: StagedRestoreConfig,
        status: u16,
    },
    Admit {
        lb: LbId,
        route: RouteId,
        site: Option<SiteId>,
        fraction: f64,
        status: u16,
    },
    ShiftTraffic {
        pops: Vec<PopId>,
        fraction: f64,
    },
    SetRate {
        pop: PopId,
        rate: f64,
    },
    SlowService {
        svc: ServiceId,
        factor: f64,
        add: Nanos,
    },
    SetCapacity {
        svc: ServiceId,
        workers: Option<u32>,
        sidecar_limit: Option<u32>,
    },
    KillPods {
        svc: ServiceId,
        pods: u32,
    },
    FailPods {
        svc: ServiceId,
        pods: u32,
    },
    Stall {
        targets: Vec<Comp>,
        mode: StallMode,
    },
    SetLbLimit {
        lb: LbId,
        node: Option<u32>,
        flows_per_node: Option<u32>,
        maxconn: Option<u32>,
    },
}

/// An action, when it applies, how long it lasts, and how the run log
/// words it.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    at: Nanos,
    /// Undone this long after `at` (`for`).
    lasts: Option<Nanos>,
    action: Action,
    what: String,
}

impl Planned {
    /// Resolves a validated action's names.
    /// The action as the recording names it.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    pub(crate) fn resolve(
        at: Nanos,
        lasts: Option<Nanos>,
        kind: &ActionKind,
        names: &Names<'_>,
    ) -> Planned {
        let (action, what) = match kind {
            ActionKind::PauseNodes { lb, nodes } => (
                Action::PauseNodes {
                    lb: names.lb(lb),
                    nodes: *nodes,
                },
                format!("pause {nodes} node(s) of {lb}"),
            ),
            ActionKind::RestartNodes { lb } => (
                Action::RestartNodes { lb: names.lb(lb) },
                format!("restart nodes of {lb}"),
            ),
            ActionKind::SetRetry { target, retry } => {
                let t = match names.client(target) {
                    Some(p) => RetryTarget::Client(p),
                    None => RetryTarget::Gateway(names.gateway(target)),
                };
                let what = match retry {
                    Some(r) => format!("{target}: retries set to {} attempt(s)", r.max_attempts),
                    None => format!("{target}: retries off"),
                };
                (
                    Action::SetRetry {
                        target: t,
                        retry: retry.clone(),
                    },
                    what,
                )
            }
            ActionKind::Shed {
                lb,
                route,
                class,
                status,
                retry_after,
            } => (
                Action::Shed {
                    lb: names.lb(lb),
                    route: names.route(route),
                    class: *class,
                    status: *status,
                    retry_after: *retry_after,
                },
                match class {
                    None => format!("shed {route} with {status} at {lb}"),
                    Some(c) => format!("shed {route} ({}) with {status} at {lb}", c.name()),
                },
            ),
            ActionKind::Unshed { lb, route, class } => (
                Action::Unshed {
                    lb: names.lb(lb),
                    route: names.route(route),
                    class: *class,
                },
                match class {
                    None => format!("stop shedding {route} at {lb}"),
                    Some(c) => format!("stop shedding {route} ({}) at {lb}", c.name()),
                },
            ),
            ActionKind::Ramp {
                lb,
                route,
                sites,
                restore,
                status,
            } => (
                Action::Ramp {
                    lb: names.lb(lb),
                    route: names.route(route),
                    sites: names
                        .sites()
                        .iter()
                        .map(|s| sites.iter().position(|x| x == s))
                        .collect(),
                    ramp_sites: sites.len(),
                    restore: restore.clone(),
                    status: *status,
                },
                format!(
                    "staged restore of {route} at {lb} over {} site(s)",
                    sites.len()
                ),
            ),
            ActionKind::Admit {
                lb,
                route,
                site,
                fraction,
                status,
            } => (
                Action::Admit {
                    lb: names.lb(lb),
                    route: names.route(route),
                    site: site.as_deref().map(|s| names.site(s)),
                    fraction: *fraction,
                    status: *status,
                },
                format!(
                    "admit {:.0}% of {route}{} at {lb}",
                    fraction * 100.0,
                    site.as_ref()
                        .map_or(String::new(), |s| format!(" from {s}"))
                ),
            ),
            ActionKind::ShiftTraffic { clients, fraction } => (
                Action::ShiftTraffic {
                    pops: clients
                        .iter()
                        .map(|c| names.client(c).expect("validated client name"))
                        .collect(),
                    fraction: *fraction,
                },
                format!(
                    "shift {:.0}% of {} to failover",
                    fraction * 100.0,
                    clients.join(", ")
                ),
            ),
            ActionKind::SetRate { client, rate } => (
                Action::SetRate {
                    pop: names.client(client).expect("validated client name"),
                    rate: *rate,
                },
                format!("{client}: rate set to {rate}/s"),
            ),
            ActionKind::SlowService {
                service,
                factor,
                capacity,
                add,
            } => {
                let factor = crate::scenario::slowdown(*factor, *capacity);
                (
                    Action::SlowService {
                        svc: names.service(service),
                        factor,
                        add: *add,
                    },
                    format!("{service}: service time × {factor} + {add}"),
                )
            }
            ActionKind::SetCapacity {
                service,
                workers,
                sidecar_limit,
            } => (
                Action::SetCapacity {
                    svc: names.service(service),
                    workers: *workers,
                    sidecar_limit: *sidecar_limit,
                },
                format!(
                    "{service}: capacity set to{}{}",
                    workers.map_or(String::new(), |w| format!(" {w} worker(s)")),
                    sidecar_limit.map_or(String::new(), |l| format!(" sidecar limit {l}"))
                ),
            ),
            ActionKind::KillPods { service, pods } => (
                Action::KillPods {
                    svc: names.service(service),
                    pods: *pods,
                },
                format!("kill {pods} pod(s) of {service}"),
            ),
            ActionKind::FailPods { service, pods } => (
                Action::FailPods {
                    svc: names.service(service),
                    pods: *pods,
                },
                format!("fail {pods} pod(s) of {service}"),
            ),
            ActionKind::Stall { targets, mode } => (
                Action::Stall {
                    targets: targets.iter().map(|t| names.comp(t)).collect(),
                    mode: *mode,
                },
                format!(
                    "stall ({}) {}",
                    match mode {
                        StallMode::Hang => "hang",
                        StallMode::Fail => "fail",
                    },
                    targets.join(", ")
                ),
            ),
            ActionKind::SetLbLimit {
                lb,
                node,
                flows_per_node,
                maxconn,
            } => (
                Action::SetLbLimit {
                    lb: names.lb(lb),
                    node: *node,
                    flows_per_node: *flows_per_node,
                    maxconn: *maxconn,
                },
                format!(
                    "{lb}{}:{}{}",
                    node.map_or(String::new(), |n| format!(" node {n}")),
                    flows_per_node.map_or(String::new(), |f| format!(" flow limit set to {f}")),
                    maxconn.map_or(String::new(), |m| format!(" maxconn set to {m}"))
                ),
            ),
        };
        let what = match lasts {
            Some(d) => format!("{what} for {d}"),
            None => what,
        };
        Planned {
            at,
            lasts,
            action,
            what,
        }
    }
}

impl Engine {
    pub(crate) fn on_action(&mut self, idx: usize) {
        let Planned {
            at,
            lasts,
            action,
            what,
        } = self.timeline[idx].clone();
        if let Some(d) = lasts {
            let end = at.saturating_add(d);
            if end <= self.end {
                self.queue
                    .schedule(end, super::Ev::Revert { idx: idx as u16 });
            }
        }
        match action {
            Action::PauseNodes { lb, nodes } => {
                self.lbs[lb].pause(nodes);
                self.undo[idx] = super::fault::Undo::Restart { lb, nodes };
                self.reset_flows(lb);
            }
            Action::RestartNodes { lb } => {
                let all = self.lbs[lb].node_count();
                self.lbs[lb].restart(all);
            }
            Action::SetRetry { target, retry } => match target {
                RetryTarget::Client(p) => self.pops[p.ix()].caller_mut().set_retry(retry.as_ref()),
                RetryTarget::Gateway(g) => {
                    self.gateways[g.ix()].caller_mut().set_retry(retry.as_ref())
                }
            },
            Action::Shed {
                lb,
                route,
                class,
                status,
                retry_after,
            } => {
                let rule = ShedRule {
                    route: route.0 as u32,
                    class,
                    status,
                    retry_after,
                };
                self.lbs[lb]
                    .shed_rules_mut()
                    .add_rule(rule)
                    .expect("validated rule; the table has room for every (route, class)");
                self.undo[idx] = super::fault::Undo::Unshed {
                    lb,
                    route: route.0 as u32,
                    class,
                };
            }
            Action::Unshed { lb, route, class } => {
                self.lbs[lb]
                    .shed_rules_mut()
                    .remove_rule(route.0 as u32, class);
            }
            Action::Ramp {
                lb,
                route,
                sites,
                ramp_sites,
                restore,
                status,
            } => {
                let restore = StagedRestore::new(&restore, ramp_sites).expect("validated restore");
                self.start_ramp(lb, route, restore, sites, status);
            }
            Action::Admit {
                lb,
                route,
                site,
                fraction,
                status,
            } => {
                self.lbs[lb].set_gate(route, site, fraction, status);
            }
            Action::ShiftTraffic { pops, fraction } => {
                for p in pops {
                    self.pops[p.ix()].set_spill(fraction);
                }
            }
            Action::SetRate { pop, rate } => {
                let now = self.now;
                let scaled = rate * self.scale;
                self.pops[pop.ix()].set_rate(now, scaled);
                self.schedule_arrival(pop);
            }
            Action::SlowService { svc, factor, add } => self.slow_service(idx, svc, factor, add),
            Action::SetCapacity {
                svc,
                workers,
                sidecar_limit,
            } => self.set_capacity(idx, svc, workers, sidecar_limit),
            Action::KillPods { svc, pods } => self.kill_pods(idx, svc, pods, lasts.is_some()),
            Action::FailPods { svc, pods } => self.fail_pods(idx, svc, pods),
            Action::Stall { targets, mode } => self.stall(idx, &targets, mode),
            Action::SetLbLimit {
                lb,
                node,
                flows_per_node,
                maxconn,
            } => self.set_lb_limit(idx, lb, node, flows_per_node, maxconn),
        }
        self.rec.applied(at, what);
    }
}

/// Schedules every planned action.
pub(crate) fn plan(timeline: &[Planned]) -> impl Iterator<Item = (Nanos, usize)> + '_ {
    timeline.iter().enumerate().map(|(i, p)| (p.at, i))
}

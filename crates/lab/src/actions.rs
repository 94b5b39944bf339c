//! The timeline: each planned action applied at its time and, with `for`,
//! undone at its end, recorded as the simulator words it. What each one
//! does to the real parts (and how that differs from the simulator) is in
//! docs/lab.md's mapping table.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use stormbreak_policy::Nanos;
use stormbreak_sim::engine::rate::RateSchedule;
use stormbreak_sim::record::AppliedAction;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::Slowdown;
use crate::client::Population;
use crate::fleet::{Fleet, Pod, RunShared};
use crate::plan::{LabAction, LabPlan};
use crate::pool::Pool;

/// The parts the timeline acts on, indexed as in the plan.
pub struct Levers {
    /// Per service: its active slowdowns.
    pub slowdowns: Vec<Arc<Slowdown>>,
    /// Per service: its pods and replica controller.
    pub fleets: Vec<Arc<Fleet>>,
    /// Per population: its rate schedule.
    pub schedules: Vec<watch::Sender<Arc<RateSchedule>>>,
    /// Per population: its callers.
    pub populations: Vec<Arc<Population>>,
    /// Per LB pool: its nodes.
    pub lbs: Vec<Arc<Pool>>,
    /// Per gateway: its instances.
    pub gateways: Vec<Arc<Pool>>,
    /// Per gateway: its plan (its timeout arms each retry policy set).
    pub gateway_plans: Vec<crate::plan::GatewayPlan>,
    /// Where a lever that fails reports (ends the run).
    pub shared: Arc<RunShared>,
}

/// What an applied action changed, kept to undo it after its `for`.
enum Undo {
    Nothing,
    Reschedule {
        service: usize,
        pods: u32,
    },
    Heal(Vec<Arc<Pod>>),
    Capacity {
        service: usize,
        workers: Option<u32>,
        sidecar_limit: Option<u32>,
    },
    LbLimits {
        lb: usize,
        limits: Vec<Option<u32>>,
    },
    Restart {
        lb: usize,
        nodes: u32,
    },
    Unshed {
        lb: usize,
    },
}

/// Applies the plan's actions at their times (and undoes those with
/// `for`), appending each to `applied` as the simulator words it.
pub async fn timeline(
    plan: LabPlan,
    start: Instant,
    levers: Levers,
    applied: Arc<Mutex<Vec<AppliedAction>>>,
) {
    // (time, undo?, action index) in time order; undoing comes first at a
    // tie, as the simulator schedules a revert before a later action.
    let mut events: Vec<(Nanos, bool, usize)> = Vec::new();
    for (i, t) in plan.actions.iter().enumerate() {
        events.push((t.at, false, i));
        if let Some(u) = t.until
            && u <= plan.duration
        {
            events.push((u, true, i));
        }
    }
    events.sort_by_key(|&(at, undo, i)| (at, !undo, i));
    let mut undo: Vec<Undo> = plan.actions.iter().map(|_| Undo::Nothing).collect();
    for (at, reverting, i) in events {
        tokio::time::sleep_until(start + Duration::from(at)).await;
        let t = &plan.actions[i];
        if reverting {
            revert(
                &levers,
                i,
                &t.action,
                std::mem::replace(&mut undo[i], Undo::Nothing),
            )
            .await;
        } else {
            undo[i] = apply(&levers, i, &t.action, t.until.is_some(), start).await;
        }
        let what = if reverting {
            format!("end of: {}", t.what)
        } else {
            t.what.clone()
        };
        applied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(AppliedAction { at, what });
    }
}

async fn apply(
    levers: &Levers,
    id: usize,
    action: &LabAction,
    timed: bool,
    start: Instant,
) -> Undo {
    match action {
        LabAction::SlowService {
            service,
            factor,
            add,
        } => {
            levers.slowdowns[*service].add(id, *factor, *add);
            Undo::Nothing
        }
        LabAction::SetRate { client, rate } => {
            let now = Nanos::from(start.elapsed());
            // A `set_rate` keeps the population's daily cycle, as in the
            // simulator.
            let next = levers.schedules[*client].borrow().constant_from(now, *rate);
            levers.schedules[*client].send_replace(Arc::new(next));
            Undo::Nothing
        }
        LabAction::SetRetry { client, retry } => {
            if let Err(e) = levers.populations[*client].set_retry(retry.as_ref()) {
                levers.shared.fail(format!("set_retry: {e}"));
            }
            Undo::Nothing
        }
        LabAction::SetCapacity {
            service,
            workers,
            sidecar_limit,
        } => {
            let fleet = &levers.fleets[*service];
            let undo = Undo::Capacity {
                service: *service,
                workers: workers.map(|_| fleet.workers()),
                sidecar_limit: sidecar_limit.map(|_| fleet.sidecar_limit()),
            };
            set_capacity(levers, *service, *workers, *sidecar_limit);
            undo
        }
        LabAction::SetLbLimit { lb, node, flows } => {
            let pool = &levers.lbs[*lb];
            let limits = pool.limits();
            if let Err(e) = pool.set_limit(*node, *flows) {
                levers.shared.fail(format!("set_lb_limit: [[lb]] {e}"));
            }
            Undo::LbLimits { lb: *lb, limits }
        }
        LabAction::SetGatewayRetry { gateway, retry } => {
            let gw = &levers.gateway_plans[*gateway];
            let policy = crate::gateway::route_retry(gw, retry.as_ref());
            if let Err(e) = levers.gateways[*gateway].set_retry(&policy) {
                levers.shared.fail(format!("set_retry: [[gateway]] {e}"));
            }
            Undo::Nothing
        }
        LabAction::KillPods { service, pods } => {
            let killed = levers.fleets[*service].kill(*pods, timed);
            Undo::Reschedule {
                service: *service,
                pods: killed,
            }
        }
        LabAction::FailPods { service, pods } => Undo::Heal(levers.fleets[*service].fail(*pods)),
        LabAction::Stall { services, mode } => {
            for s in services {
                levers.fleets[*s].stall(id, *mode);
            }
            Undo::Nothing
        }
        LabAction::PauseNodes { lb, nodes } => {
            levers.lbs[*lb].pause(*nodes).await;
            Undo::Restart {
                lb: *lb,
                nodes: *nodes,
            }
        }
        LabAction::Shed {
            lb,
            status,
            retry_after,
        } => {
            shed(levers, *lb, Some((*status, *retry_after)));
            Undo::Unshed { lb: *lb }
        }
        LabAction::Unshed { lb } => {
            shed(levers, *lb, None);
            Undo::Nothing
        }
        LabAction::Ramp { lb, restore } => {
            if let Err(e) = levers.lbs[*lb].start_restore(restore) {
                levers.shared.fail(format!("ramp: [[lb]] {e}"));
            }
            Undo::Nothing
        }
        LabAction::RestartNodes { lb } => {
            restart(levers, *lb, levers.lbs[*lb].instances().len()).await;
            Undo::Nothing
        }
    }
}

/// Sets pool `lb`'s shed rule (`None`: none) on every node.
fn shed(levers: &Levers, lb: usize, rule: Option<(u16, Option<Nanos>)>) {
    if let Err(e) = levers.lbs[lb].set_shed(rule) {
        levers.shared.fail(format!("shed: [[lb]] {e}"));
    }
}

/// A service's per-pod workers and sidecar limit, each when given.
fn set_capacity(levers: &Levers, service: usize, workers: Option<u32>, limit: Option<u32>) {
    let fleet = &levers.fleets[service];
    if let Some(w) = workers {
        fleet.set_workers(w);
    }
    if let Some(l) = limit
        && let Err(e) = fleet.set_sidecar_limit(l)
    {
        levers.shared.fail(format!("set_capacity: {e}"));
    }
}

/// Restarts the first `n` paused nodes of pool `lb`; their new ports are
/// the run's, closed at its end.
async fn restart(levers: &Levers, lb: usize, n: usize) {
    match levers.lbs[lb].restart(n).await {
        Ok(addrs) => {
            for a in addrs {
                levers.shared.listen(a);
            }
        }
        Err(e) => levers.shared.fail(format!("restart_nodes: [[lb]] {e}")),
    }
}

async fn revert(levers: &Levers, id: usize, action: &LabAction, undo: Undo) {
    match (action, undo) {
        (LabAction::SlowService { service, .. }, _) => levers.slowdowns[*service].remove(id),
        (LabAction::Stall { services, .. }, _) => {
            for s in services {
                levers.fleets[*s].unstall(id);
            }
        }
        (_, Undo::Reschedule { service, pods }) => levers.fleets[service].reschedule(pods),
        (_, Undo::Heal(pods)) => {
            for p in pods {
                p.app.set_failing(false);
            }
        }
        (
            _,
            Undo::Capacity {
                service,
                workers,
                sidecar_limit,
            },
        ) => set_capacity(levers, service, workers, sidecar_limit),
        (_, Undo::LbLimits { lb, limits }) => {
            if let Err(e) = levers.lbs[lb].restore_limits(&limits) {
                levers.shared.fail(format!("set_lb_limit: [[lb]] {e}"));
            }
        }
        (_, Undo::Restart { lb, nodes }) => restart(levers, lb, nodes as usize).await,
        (_, Undo::Unshed { lb }) => shed(levers, lb, None),
        (_, Undo::Nothing) => {}
    }
}

//! One lab run: start every pod (backend, then its sidecar), start the
//! recorder's clock, run the generators, the autoscalers, the timeline,
//! the gauges and the timer probe until the scenario's duration (or a
//! stop, or a part's failure), then tear it all down and judge the run.
//!
//! Everything runs on one tokio runtime that the run builds and shuts
//! down: when [`run`] returns, every task, connection and listening socket
//! of the run is gone, whether it ended, failed or was stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::record::LittleTotals;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::actions::{self, Levers};
use crate::autoscaler;
use crate::backend::Slowdown;
use crate::client::{AttemptService, Pods, Population, Target};
use crate::counted::Counted;
use crate::fleet::{Fleet, RunShared, Seeds, Totals};
use crate::generator::{self, SendLog};
use crate::hops;
use crate::plan::Hop;
use crate::plan::LabPlan;
use crate::pool::Pool;
use crate::record::{Gauges, LabSeries, Recorder};
use crate::validity::{self, Delays, HostCounters, Validity};
use stormbreak_sim::engine::rate::RateSchedule;

/// How long teardown may take before the runtime is dropped regardless.
pub const TEARDOWN: Duration = Duration::from_secs(3);

/// Asks a running lab to stop early (Ctrl-C, a test).
#[derive(Debug, Clone)]
pub struct Stop(Arc<watch::Sender<bool>>);

impl Default for Stop {
    fn default() -> Self {
        Stop(Arc::new(watch::channel(false).0))
    }
}

impl Stop {
    /// Stops the run: it tears down and returns [`LabError::Stopped`].
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

/// Why a run did not finish.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A part could not start (a bind, the guard's config).
    #[error("cannot start the lab: {0}")]
    Start(String),
    /// [`Stop::stop`] was called; everything was torn down.
    #[error("stopped before the end of the run; everything was torn down")]
    Stopped {
        /// Every address the run had listened on (all closed by then).
        listened: Vec<SocketAddr>,
    },
    /// A part failed during the run (a pod that could not start, a lever
    /// that could not be pulled); everything was torn down.
    #[error("a part of the run failed, so the run was ended and torn down: {reason}")]
    Failed {
        /// What failed.
        reason: String,
        /// Every address the run had listened on (all closed by then).
        listened: Vec<SocketAddr>,
    },
}

/// Figures of the run as a whole (`summary.json` `lab`).
#[derive(Debug, Clone, Serialize)]
pub struct LabFigures {
    /// Wall time from the first pod's start to the end of teardown, s.
    pub wall_s: f64,
    /// This process's CPU time over the same span, s (None if unreadable).
    pub cpu_s: Option<f64>,
    /// Pods started: the first ones and every one the replica controller
    /// started after (autoscaling, replacements).
    pub pods: u32,
    /// Sidecar guards started, likewise.
    pub sidecars: u32,
    /// Worst and mean lateness of the backends' service sleeps, ms.
    pub sleep_late_max_ms: f64,
    /// Mean lateness of the service sleeps, ms.
    pub sleep_late_mean_ms: f64,
    /// Every threshold and its measure.
    pub validity: Validity,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct LabRun {
    /// The simulator's recording of the run.
    pub recording: Recording,
    /// Lab-only per-interval series per route.
    pub series: Vec<LabSeries>,
    /// Whole-run figures and the validity verdict.
    pub figures: LabFigures,
    /// Every address the run listened on (all closed when `run` returns).
    pub listened: Vec<SocketAddr>,
}

struct Log {
    rec: Arc<Recorder>,
    route: usize,
    slip: Arc<Delays>,
}

impl SendLog for Log {
    fn intended(&self, intended: Nanos, sent: bool, slip: Nanos) {
        self.rec.intended(self.route, intended, sent);
        if sent {
            self.slip.record(slip);
        }
    }
}

/// Runs `plan` on a fresh runtime until its duration or `stop`.
pub fn run(plan: &LabPlan, stop: &Stop) -> Result<LabRun, LabError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LabError::Start(format!("the runtime: {e}")))?;
    let result = runtime.block_on(run_on_runtime(plan, stop.subscribe()));
    // Drops every task still running: connections, service sleeps,
    // requests in flight. Listeners were closed by then.
    runtime.shutdown_timeout(TEARDOWN);
    result
}

/// How a run's main loop ended.
enum End {
    Finished,
    Stopped,
    Failed(String),
}

/// Schema tag of the entries file.
pub const ENTRIES_SCHEMA: &str = "stormbreak.lab-entries/1";

/// Writes where each route's traffic enters the lab (its first hop's
/// listening addresses) as the run's clock starts, with that moment in
/// Unix milliseconds, so a prober started beside the run can aim at the
/// same doors and align its clock.
fn write_entries(
    path: &std::path::Path,
    plan: &LabPlan,
    pools: &hops::Pools,
    fleets: &[Arc<Fleet>],
) -> Result<(), String> {
    let mut routes = Vec::new();
    for (r, name) in plan.routes.iter().enumerate() {
        let Some(client) = plan.clients.iter().find(|c| c.route == r) else {
            continue;
        };
        let addrs: Vec<std::net::SocketAddr> = match client.first {
            Hop::Lb(l) => pools.lbs[l].addrs(),
            Hop::Gateway(g) => pools.gateways[g].addrs(),
            Hop::Service(s) => fleets[s].members().borrow().clone(),
        };
        routes.push(serde_json::json!({
            "route": name,
            "first_hop": plan.component(client.first),
            "urls": addrs.iter().map(|a| format!("http://{a}/")).collect::<Vec<_>>(),
        }));
    }
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let doc = serde_json::json!({
        "schema": ENTRIES_SCHEMA,
        "started_unix_ms": started_unix_ms,
        "routes": routes,
    });
    stormbreak_sim::output::write_atomic(
        path,
        &serde_json::to_vec_pretty(&doc).expect("plain data"),
    )
    .map_err(|e| format!("--entries {}: {e}", path.display()))
}

async fn run_on_runtime(
    plan: &LabPlan,
    mut stopped: watch::Receiver<bool>,
) -> Result<LabRun, LabError> {
    let wall = std::time::Instant::now();
    let before = HostCounters::read();
    let shared = Arc::new(RunShared::default());
    let slowdowns: Vec<Arc<Slowdown>> = plan.services.iter().map(|_| Arc::default()).collect();
    let mut seeds = Seeds(plan.seed);
    let fleets: Vec<Arc<Fleet>> = plan
        .services
        .iter()
        .zip(&slowdowns)
        .map(|(svc, slow)| {
            Fleet::new(
                svc,
                plan.clients.len(),
                slow.clone(),
                seeds.next(),
                shared.clone(),
            )
        })
        .collect();
    for f in &fleets {
        for _ in 0..f.plan().pods {
            if let Err(e) = f.start_pod().await {
                close(&[], &fleets).await;
                return Err(LabError::Start(e));
            }
        }
    }
    let pools = match hops::start(plan, &fleets, &shared).await {
        Ok(p) => p,
        Err(e) => {
            close(&[], &fleets).await;
            return Err(LabError::Start(e));
        }
    };
    let start = Instant::now();
    if let Some(path) = &plan.entries
        && let Err(e) = write_entries(path, plan, &pools, &fleets)
    {
        close(&pools.all(), &fleets).await;
        return Err(LabError::Start(e));
    }
    let rec = Arc::new(Recorder::new(plan, start));
    let end = plan.duration;
    let slip = Arc::new(Delays::default());
    let timer = Arc::new(Delays::default());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(validity::timer_probe(timer.clone()));
    let mut schedules = Vec::new();
    let mut populations = Vec::new();
    for (i, client) in plan.clients.iter().enumerate() {
        let (tx, rx) = watch::channel(Arc::new(
            RateSchedule::new(client.rate, &client.steps).with_diurnal(client.diurnal.as_ref()),
        ));
        schedules.push(tx);
        let target = match client.first {
            Hop::Service(s) => {
                Target::Pods(Arc::new(Pods::new(fleets[s].clone(), i, seeds.next())))
            }
            Hop::Lb(l) => Target::Lb(pools.lbs[l].clone()),
            Hop::Gateway(g) => Target::Gateway(pools.gateways[g].clone()),
        };
        let comp = plan.component(client.first);
        let attempts =
            AttemptService::new(target, rec.clone(), client.route, comp, client.site.clone());
        let population = match Population::new(client, attempts, seeds.next(), start) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                close(&pools.all(), &fleets).await;
                return Err(LabError::Start(e));
            }
        };
        populations.push(population.clone());
        let log = Arc::new(Log {
            rec: rec.clone(),
            route: client.route,
            slip: slip.clone(),
        });
        let (rec2, route) = (rec.clone(), client.route);
        let seed = seeds.next();
        let cap = plan.max_in_flight;
        tasks.spawn(async move {
            generator::open_loop(rx, seed, start, end, cap, log, move |intended| {
                let (request, rec) = (population.request(), rec2.clone());
                async move {
                    let sent = Instant::now();
                    let ok = request.await;
                    let corrected = Nanos::from(
                        Instant::now().saturating_duration_since(start + Duration::from(intended)),
                    );
                    rec.request_done(route, ok, corrected, Nanos::from(sent.elapsed()));
                }
            })
            .await;
        });
    }
    for f in &fleets {
        if let Some(spec) = &f.plan().autoscaler {
            tasks.spawn(autoscaler::run(f.clone(), spec.clone(), start));
        }
    }
    let applied = Arc::new(std::sync::Mutex::new(Vec::new()));
    tasks.spawn(actions::timeline(
        plan.clone(),
        start,
        Levers {
            slowdowns: slowdowns.clone(),
            fleets: fleets.clone(),
            schedules,
            populations,
            lbs: pools.lbs.clone(),
            gateways: pools.gateways.clone(),
            gateway_plans: plan.gateways.clone(),
            shared: shared.clone(),
        },
        applied.clone(),
    ));
    let mut failures = shared.failures();
    // Gauges at each interval's end, on the run's clock.
    let mut interval_end = 1usize;
    let mut counted = Counted::new(plan);
    let run_end = start + Duration::from(end);
    let ended = loop {
        let at = (start + Duration::from(plan.interval * interval_end as u64)).min(run_end);
        tokio::select! {
            _ = tokio::time::sleep_until(at) => {}
            _ = stopped.wait_for(|s| *s) => break End::Stopped,
            f = failures.wait_for(|f| f.is_some()) => {
                let reason = f.ok().and_then(|f| f.clone()).unwrap_or_default();
                break End::Failed(reason);
            }
        }
        let i = interval_end - 1;
        for (l, pool) in pools.lbs.iter().enumerate() {
            rec.gauges(plan.component(Hop::Lb(l)), i, lb_gauges(pool, &plan.lbs[l]));
        }
        for (g, pool) in pools.gateways.iter().enumerate() {
            let limited = plan.gateways[g].limit.is_some();
            rec.gauges(
                plan.component(Hop::Gateway(g)),
                i,
                gateway_gauges(pool, limited),
            );
        }
        for (s, fleet) in fleets.iter().enumerate() {
            rec.gauges(plan.component(Hop::Service(s)), i, gauges(fleet));
        }
        counted.file(plan, &rec, i, &fleets, &pools);
        if at >= run_end {
            break End::Finished;
        }
        interval_end += 1;
    };
    // Teardown: generators, autoscalers and the timeline first, then the
    // pods.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    close(&pools.all(), &fleets).await;
    let listened = shared.listened();
    match ended {
        End::Finished => {}
        End::Stopped => return Err(LabError::Stopped { listened }),
        End::Failed(reason) => return Err(LabError::Failed { reason, listened }),
    }
    let elapsed = start.elapsed();
    let totals: Vec<Totals> = fleets.iter().map(|f| f.totals()).collect();
    let little: Vec<LittleTotals> = totals
        .iter()
        .map(|t| {
            let mean = t.present_area / elapsed.as_nanos().max(1) as f64;
            let thr = t.served as f64 / elapsed.as_secs_f64().max(1e-9);
            LittleTotals {
                mean_in_system: mean,
                throughput_per_s: thr,
                mean_sojourn_s: if thr > 0.0 { mean / thr } else { 0.0 },
            }
        })
        .collect();
    let served: u64 = totals.iter().map(|t| t.served).sum();
    let late_sum: u64 = totals.iter().map(|t| t.late_sum_ns).sum();
    let late_max = totals.iter().map(|t| t.late_max_ns).max().unwrap_or(0);
    let after = HostCounters::read();
    let (intended, dropped, _) = rec.send_totals();
    let validity = validity::judge(&before, &after, &slip, &timer, intended, dropped);
    let (mut recording, series) = rec.finish(plan, &little);
    recording.actions = std::mem::take(&mut *applied.lock().unwrap_or_else(|e| e.into_inner()));
    let figures = LabFigures {
        wall_s: wall.elapsed().as_secs_f64(),
        cpu_s: match (before.process_cpu_s, after.process_cpu_s) {
            (Some(b), Some(a)) => Some(a - b),
            _ => None,
        },
        pods: totals.iter().map(|t| t.started).sum(),
        sidecars: totals.iter().map(|t| t.sidecars).sum(),
        sleep_late_max_ms: late_max as f64 / 1e6,
        sleep_late_mean_ms: late_sum as f64 / served.max(1) as f64 / 1e6,
        validity,
    };
    Ok(LabRun {
        recording,
        series,
        figures,
        listened,
    })
}

/// Closes the pools (front first), then the pods.
async fn close(pools: &[Arc<Pool>], fleets: &[Arc<Fleet>]) {
    for p in pools {
        p.close().await;
    }
    for f in fleets {
        f.close().await;
    }
}

/// A gateway's gauges, as the simulator's recorder reads them: summed
/// over its instances, zeros without a `limit` (no gauge of its own).
fn gateway_gauges(pool: &Pool, limited: bool) -> Gauges {
    if !limited {
        return Gauges::default();
    }
    let (in_flight, queue) = pool.reading();
    Gauges {
        in_flight,
        limit: pool.sum("stormbreak_guard_limit{", None),
        queue,
        replicas: pool.instances().len() as f64,
        app_utilisation: 0.0,
    }
}

/// An LB pool's gauges, as the simulator's recorder reads them: flows in
/// use on every node, the running nodes' flow capacity, running nodes.
fn lb_gauges(pool: &Pool, lb: &crate::plan::LbPlan) -> Gauges {
    let running = pool.running();
    Gauges {
        in_flight: pool.reading().0,
        limit: f64::from(running) * f64::from(lb.flows_per_node),
        queue: 0.0,
        replicas: f64::from(running),
        app_utilisation: 0.0,
    }
}

/// A service's gauges at an interval's end, as the simulator's recorder
/// reads them: in flight at the sidecars (at the apps without), both
/// queues, ready pods, the limit of the ready pods, and the mean over the
/// live pods of their time-averaged busy workers / workers.
fn gauges(fleet: &Fleet) -> Gauges {
    let pods = fleet.pods();
    let mut g = Gauges::default();
    let mut util = 0.0;
    for p in pods.iter() {
        let r = p.app.read();
        util += r.utilisation;
        g.queue += r.queued as f64;
        match p.sidecar_reading() {
            Some((inflight, queued)) => {
                g.in_flight += inflight;
                g.queue += queued;
            }
            None => g.in_flight += r.busy as f64,
        }
        if p.is_ready() {
            g.replicas += 1.0;
        }
    }
    let per_pod = match &fleet.plan().sidecar {
        Some(_) => fleet.sidecar_limit(),
        None => fleet.workers(),
    };
    g.limit = per_pod as f64 * g.replicas;
    g.app_utilisation = if pods.is_empty() {
        0.0
    } else {
        (util / pods.len() as f64).min(1.0)
    };
    g
}

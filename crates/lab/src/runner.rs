//! One lab run: start every pod (backend, then its sidecar), start the
//! recorder's clock, run the generators, the timeline, the gauges and the
//! timer probe until the scenario's duration (or a stop), then tear it all
//! down and judge the run.
//!
//! Everything runs on one tokio runtime that the run builds and shuts
//! down: when [`run`] returns, every task, connection and listening socket
//! of the run is gone, whether it ended, failed or was stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use stormbreak_guard::Guard;
use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::record::{AppliedAction, LittleTotals};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::{self, App, Slowdown};
use crate::client::{AttemptService, Caller, Pods};
use crate::generator::{self, SendLog};
use crate::plan::{LabAction, LabPlan};
use crate::record::{Gauges, LabSeries, Recorder};
use crate::sidecar;
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
}

/// Figures of the run as a whole (`summary.json` `lab`).
#[derive(Debug, Clone, Serialize)]
pub struct LabFigures {
    /// Wall time from the first pod's start to the end of teardown, s.
    pub wall_s: f64,
    /// This process's CPU time over the same span, s (None if unreadable).
    pub cpu_s: Option<f64>,
    /// Pods started.
    pub pods: u32,
    /// Sidecar guards started.
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

struct Pod {
    app: Arc<App>,
    guard: Option<Guard>,
    target: SocketAddr,
}

async fn run_on_runtime(
    plan: &LabPlan,
    mut stopped: watch::Receiver<bool>,
) -> Result<LabRun, LabError> {
    let wall = std::time::Instant::now();
    let before = HostCounters::read();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut listened = Vec::new();
    let slowdowns: Vec<Arc<Slowdown>> = plan.services.iter().map(|_| Arc::default()).collect();
    let mut pods: Vec<Vec<Pod>> = Vec::new();
    let mut seeds = Seeds(plan.seed);
    for (s, svc) in plan.services.iter().enumerate() {
        let mut v = Vec::new();
        for _ in 0..svc.pods {
            let app = App::new(
                svc.workers,
                svc.app_queue,
                &svc.service_time,
                slowdowns[s].clone(),
                seeds.next(),
            );
            let b = backend::start(app, stop_rx.clone())
                .await
                .map_err(|e| LabError::Start(format!("service {:?}: bind: {e}", svc.name)))?;
            listened.push(b.addr);
            let (guard, target) = match &svc.sidecar {
                Some(spec) => {
                    let (g, addr) = sidecar::start(spec, b.addr).await.map_err(|e| {
                        LabError::Start(format!("service {:?}: sidecar: {e}", svc.name))
                    })?;
                    listened.push(addr);
                    (Some(g), addr)
                }
                None => (None, b.addr),
            };
            v.push(Pod {
                app: b.app,
                guard,
                target,
            });
        }
        pods.push(v);
    }
    let start = Instant::now();
    let rec = Arc::new(Recorder::new(plan, start));
    let end = plan.duration;
    let slip = Arc::new(Delays::default());
    let timer = Arc::new(Delays::default());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(validity::timer_probe(timer.clone()));
    let service_pods: Vec<Arc<Pods>> = pods
        .iter()
        .map(|v| {
            Arc::new(Pods::new(
                v.iter().map(|p| p.target).collect(),
                seeds.next(),
            ))
        })
        .collect();
    let mut schedules = Vec::new();
    for client in &plan.clients {
        let (tx, rx) = watch::channel(Arc::new(
            RateSchedule::new(client.rate, &client.steps).with_diurnal(client.diurnal.as_ref()),
        ));
        schedules.push(tx);
        let attempts = AttemptService::new(
            service_pods[client.service].clone(),
            rec.clone(),
            client.route,
            client.service,
        );
        let caller = Caller::new(client, attempts, seeds.next()).map_err(LabError::Start)?;
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
                let (caller, rec) = (caller.clone(), rec2.clone());
                async move {
                    let sent = Instant::now();
                    let ok = caller.call().await;
                    let corrected = Nanos::from(
                        Instant::now().saturating_duration_since(start + Duration::from(intended)),
                    );
                    rec.request_done(route, ok, corrected, Nanos::from(sent.elapsed()));
                }
            })
            .await;
        });
    }
    let applied = Arc::new(std::sync::Mutex::new(Vec::new()));
    tasks.spawn(timeline(
        plan.clone(),
        start,
        slowdowns.clone(),
        schedules,
        applied.clone(),
    ));
    // Gauges at each interval's end, on the run's clock.
    let (tick_rec, tick_plan) = (rec.clone(), plan);
    let apps: Vec<Vec<Arc<App>>> = pods
        .iter()
        .map(|v| v.iter().map(|p| p.app.clone()).collect())
        .collect();
    let mut interval_end = 1usize;
    let run_end = start + Duration::from(end);
    let stopped_early = loop {
        let at = (start + Duration::from(tick_plan.interval * interval_end as u64)).min(run_end);
        tokio::select! {
            _ = tokio::time::sleep_until(at) => {}
            _ = stopped.wait_for(|s| *s) => break true,
        }
        let i = interval_end - 1;
        let span = if at == run_end {
            Duration::from(end).saturating_sub(Duration::from(tick_plan.interval * i as u64))
        } else {
            Duration::from(tick_plan.interval)
        };
        for (s, svc) in tick_plan.services.iter().enumerate() {
            let mut g = Gauges {
                replicas: svc.pods as f64,
                ..Default::default()
            };
            let mut busy_ns = 0.0;
            for (k, app) in apps[s].iter().enumerate() {
                let r = app.read();
                busy_ns += r.busy_ns;
                g.queue += r.queued as f64;
                match &pods[s][k].guard {
                    Some(guard) => {
                        let (inflight, queued) = sidecar::reading(guard);
                        g.in_flight += inflight;
                        g.queue += queued;
                    }
                    None => g.in_flight += r.busy as f64,
                }
            }
            let per_pod = match &svc.sidecar {
                Some(sc) => sc.limit,
                None => svc.workers,
            };
            g.limit = (per_pod * svc.pods) as f64;
            let capacity_ns = (svc.workers * svc.pods) as f64 * span.as_nanos() as f64;
            g.app_utilisation = if capacity_ns > 0.0 {
                (busy_ns / capacity_ns).min(1.0)
            } else {
                0.0
            };
            tick_rec.gauges(s, i, g);
        }
        if at >= run_end {
            break false;
        }
        interval_end += 1;
    };
    // Teardown: generators and the timeline first, then the listeners.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    stop_tx.send_replace(true);
    let elapsed = start.elapsed();
    let little: Vec<LittleTotals> = plan
        .services
        .iter()
        .enumerate()
        .map(|(s, _)| {
            let mean: f64 = apps[s].iter().map(|a| a.mean_present(elapsed)).sum();
            let served: u64 = apps[s]
                .iter()
                .map(|a| a.served.load(std::sync::atomic::Ordering::Relaxed))
                .sum();
            let thr = served as f64 / elapsed.as_secs_f64().max(1e-9);
            LittleTotals {
                mean_in_system: mean,
                throughput_per_s: thr,
                mean_sojourn_s: if thr > 0.0 { mean / thr } else { 0.0 },
            }
        })
        .collect();
    let (mut late_max, mut late_sum, mut n) = (0u64, 0.0, 0.0);
    for a in apps.iter().flatten() {
        let (m, mean) = a.sleep_lateness();
        late_max = late_max.max(m);
        late_sum += mean;
        n += 1.0;
    }
    let mut sidecars = 0;
    for p in pods.into_iter().flatten() {
        if let Some(g) = p.guard {
            sidecars += 1;
            let _ = tokio::time::timeout(TEARDOWN, g.shutdown()).await;
        }
    }
    if stopped_early {
        return Err(LabError::Stopped { listened });
    }
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
        pods: plan.services.iter().map(|s| s.pods).sum(),
        sidecars,
        sleep_late_max_ms: late_max as f64 / 1e6,
        sleep_late_mean_ms: if n > 0.0 { late_sum / n / 1e6 } else { 0.0 },
        validity,
    };
    Ok(LabRun {
        recording,
        series,
        figures,
        listened,
    })
}

/// Applies the plan's actions at their times (and undoes those with
/// `for`), recording each as the simulator words it.
async fn timeline(
    plan: LabPlan,
    start: Instant,
    slowdowns: Vec<Arc<Slowdown>>,
    schedules: Vec<watch::Sender<Arc<RateSchedule>>>,
    applied: Arc<std::sync::Mutex<Vec<AppliedAction>>>,
) {
    // (time, action index, undo?) in time order; undoing comes first at a tie.
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
    for (at, undo, i) in events {
        tokio::time::sleep_until(start + Duration::from(at)).await;
        let t = &plan.actions[i];
        match (&t.action, undo) {
            (
                LabAction::SlowService {
                    service,
                    factor,
                    add,
                },
                false,
            ) => slowdowns[*service].add(i, *factor, *add),
            (LabAction::SlowService { service, .. }, true) => slowdowns[*service].remove(i),
            (LabAction::SetRate { client, rate }, _) => {
                let now = Nanos::from(start.elapsed());
                // A `set_rate` keeps the population's daily cycle, as in
                // the simulator.
                let next = schedules[*client].borrow().constant_from(now, *rate);
                schedules[*client].send_replace(Arc::new(next));
            }
        }
        let what = if undo {
            format!("end of: {}", t.what)
        } else {
            t.what.clone()
        };
        applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(AppliedAction { at, what });
    }
}

/// Seeds of the run's parts, drawn in a fixed order from the run's seed
/// (SplitMix64), so a seed fixes every RNG of the run.
struct Seeds(u64);

impl Seeds {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

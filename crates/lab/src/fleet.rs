//! A service's pods at run time and the replica controller that keeps
//! them: each pod a backend and (with one) its sidecar guard, on fresh
//! `127.0.0.1` ports, started `pod_start` after the controller asks and
//! joining the service's balancer set when ready.
//!
//! The controller is the simulator's (`engine/fault.rs`, `reconcile`): it
//! starts pods up to the Deployment's `desired` replicas (less those a
//! timed `kill_pods` made unschedulable), or scales down by cancelling
//! starts first and then taking the newest ready pods out of the balancer
//! set; those finish what they hold and leave once drained, checked at
//! each sync and controller pass, as in the simulator.
//!
//! Lock order: `control` before `pods`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use stormbreak_guard::Guard;
use stormbreak_sim::engine::autoscale::PodSample;
use stormbreak_sim::scenario::StallMode;
use tokio::sync::watch;

use crate::backend::{self, App, Slowdown};
use crate::guard_doc::GuardDoc;
use crate::plan::ServicePlan;
use crate::sidecar;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Seeds of the run's parts, drawn in a fixed order from the run's seed
/// (SplitMix64), so a seed fixes every RNG of the run.
#[derive(Debug)]
pub struct Seeds(pub u64);

impl Seeds {
    /// The next seed.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// What every part of a run shares: the addresses it listened on, the
/// first failure of a part (which ends the run), and whether teardown has
/// begun (no pod starts after it).
#[derive(Debug)]
pub struct RunShared {
    listened: Mutex<Vec<SocketAddr>>,
    failure: watch::Sender<Option<String>>,
    closing: AtomicBool,
}

impl Default for RunShared {
    fn default() -> Self {
        RunShared {
            listened: Mutex::default(),
            failure: watch::channel(None).0,
            closing: AtomicBool::new(false),
        }
    }
}

impl RunShared {
    /// Every address listened on so far.
    pub fn listened(&self) -> Vec<SocketAddr> {
        lock(&self.listened).clone()
    }

    /// The run listens on `addr` (a part outside a fleet: an LB node).
    pub fn listen(&self, addr: SocketAddr) {
        lock(&self.listened).push(addr);
    }

    /// A part failed: the run ends with this error (the first one wins).
    pub fn fail(&self, why: String) {
        self.failure.send_if_modified(|f| {
            if f.is_none() {
                *f = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Watches for a part's failure.
    pub fn failures(&self) -> watch::Receiver<Option<String>> {
        self.failure.subscribe()
    }

    /// Teardown has begun.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    fn closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}

/// One pod: its app, its sidecar, and what the balancer and the HPA read.
pub struct Pod {
    /// The app container.
    pub app: Arc<App>,
    guard: Mutex<Option<Guard>>,
    /// The sidecar's config, to reload it with a new limit.
    sidecar_doc: Mutex<Option<GuardDoc>>,
    /// Where attempts go: the sidecar, or the app without one.
    pub target: SocketAddr,
    ready: AtomicBool,
    /// Attempts in flight on this pod, per population (least-request's
    /// load, as each population's Envoy counts it).
    load: Vec<AtomicU32>,
    stop: watch::Sender<bool>,
    /// Sidecar in-flight samples since the last sync: (sum, count).
    sidecar_samples: Mutex<(f64, u32)>,
}

impl Pod {
    /// Whether the balancer may pick it.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Population `pop`'s attempts in flight on it.
    pub fn load(&self, pop: usize) -> &AtomicU32 {
        &self.load[pop]
    }

    /// The sidecar's (in flight, queued); `None` without a sidecar.
    pub fn sidecar_reading(&self) -> Option<(f64, f64)> {
        lock(&self.guard).as_ref().map(sidecar::reading)
    }

    /// (arrived, refused) at this pod so far: at its sidecar (its
    /// refusals and the app's), or at the app without one.
    fn part_counts(&self) -> (u64, u64) {
        let app_refused = self.app.refused.load(Ordering::Relaxed);
        match lock(&self.guard).as_ref().map(sidecar::counts) {
            Some((arrived, refused)) => (arrived, refused + app_refused),
            None => (self.app.arrived.load(Ordering::Relaxed), app_refused),
        }
    }

    fn drained(&self) -> bool {
        self.load.iter().all(|l| l.load(Ordering::Relaxed) == 0)
            && self.app.present() == 0
            && self.sidecar_reading().is_none_or(|(i, q)| i + q == 0.0)
    }

    /// Closes its listeners and every connection (a drained pod has none
    /// in use; a killed one's attempts see resets).
    async fn shut_down(&self) {
        self.stop.send_replace(true);
        let guard = lock(&self.guard).take();
        if let Some(g) = guard {
            let _ = tokio::time::timeout(crate::runner::TEARDOWN, g.shutdown()).await;
        }
    }
}

/// The replica controller's counts (the simulator's `Service` fields of
/// the same names).
#[derive(Debug, Default)]
struct Control {
    desired: u32,
    starting: u32,
    cancelled_starts: u32,
    unschedulable: u32,
    reconcile_armed: bool,
}

/// Figures of the pods that left, kept so a run's totals count them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Pods started, the first ones included.
    pub started: u32,
    /// Of them, with a sidecar guard.
    pub sidecars: u32,
    /// Requests served to the end.
    pub served: u64,
    /// ∫ requests present dt, request·ns.
    pub present_area: f64,
    /// Service-sleep lateness: worst and total, ns.
    pub late_max_ns: u64,
    /// Total lateness, ns.
    pub late_sum_ns: u64,
}

impl Totals {
    fn add(&mut self, app: &App) {
        self.served += app.served.load(Ordering::Relaxed);
        self.present_area += app.present_area();
        self.late_max_ns = self.late_max_ns.max(app.sleep_lateness().0);
        self.late_sum_ns += app.sleep_late_total_ns();
    }
}

/// A service's pods and its replica controller.
pub struct Fleet {
    plan: ServicePlan,
    populations: usize,
    pods: RwLock<Arc<Vec<Arc<Pod>>>>,
    control: Mutex<Control>,
    slowdown: Arc<Slowdown>,
    seeds: Mutex<Seeds>,
    shared: Arc<RunShared>,
    retired: Mutex<Totals>,
    /// (arrived, refused) of the pods gone, banked as they leave, under
    /// this lock with their removal so [`Fleet::part_counts`] never dips.
    retired_parts: Mutex<(u64, u64)>,
    workers: AtomicU32,
    /// The per-pod sidecar limit now (a `set_capacity` changes it).
    sidecar_limit: AtomicU32,
    stalls: watch::Sender<Vec<(usize, StallMode)>>,
    /// The balancer set's addresses (ready pods' targets, oldest first),
    /// for the guards forwarding to this service.
    members: watch::Sender<Vec<SocketAddr>>,
    tasks: Mutex<tokio::task::JoinSet<()>>,
}

impl Fleet {
    /// The fleet of `plan`, with no pod yet; `populations` is the run's
    /// number of client populations.
    pub fn new(
        plan: &ServicePlan,
        populations: usize,
        slowdown: Arc<Slowdown>,
        seed: u64,
        shared: Arc<RunShared>,
    ) -> Arc<Fleet> {
        Arc::new(Fleet {
            plan: plan.clone(),
            populations,
            pods: RwLock::new(Arc::new(Vec::new())),
            control: Mutex::new(Control {
                desired: plan.pods,
                ..Control::default()
            }),
            slowdown,
            seeds: Mutex::new(Seeds(seed)),
            shared,
            retired: Mutex::default(),
            retired_parts: Mutex::default(),
            workers: AtomicU32::new(plan.workers),
            sidecar_limit: AtomicU32::new(plan.sidecar.as_ref().map_or(0, |sc| sc.limit)),
            stalls: watch::channel(Vec::new()).0,
            members: watch::channel(Vec::new()).0,
            tasks: Mutex::new(tokio::task::JoinSet::new()),
        })
    }

    /// The service's plan.
    pub fn plan(&self) -> &ServicePlan {
        &self.plan
    }

    /// The live pods (ready and draining), oldest first.
    pub fn pods(&self) -> Arc<Vec<Arc<Pod>>> {
        self.pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_pods(&self, f: impl FnOnce(&mut Vec<Arc<Pod>>)) {
        {
            let mut w = self.pods.write().unwrap_or_else(PoisonError::into_inner);
            let mut v = (**w).clone();
            f(&mut v);
            *w = Arc::new(v);
        }
        self.publish();
    }

    /// Tells the guards forwarding to this service its balancer set, when
    /// it changed (a pod joined, was taken out, or left).
    fn publish(&self) {
        let ready: Vec<SocketAddr> = self
            .pods()
            .iter()
            .filter(|p| p.is_ready())
            .map(|p| p.target)
            .collect();
        self.members.send_if_modified(|m| {
            let changed = *m != ready;
            *m = ready;
            changed
        });
    }

    /// The balancer set as it changes: the addresses a guard in front of
    /// this service forwards to (ready pods only, so a pod taken out gets
    /// no new request and drains).
    pub fn members(&self) -> watch::Receiver<Vec<SocketAddr>> {
        self.members.subscribe()
    }

    /// Pods the balancer may pick.
    pub fn ready_count(&self) -> u32 {
        self.pods().iter().filter(|p| p.is_ready()).count() as u32
    }

    /// Starts one pod now (backend, then sidecar) and adds it, ready.
    pub async fn start_pod(&self) -> Result<(), String> {
        let pod = self.bind_pod().await?;
        self.set_pods(|v| v.push(pod));
        Ok(())
    }

    async fn bind_pod(&self) -> Result<Arc<Pod>, String> {
        let name = &self.plan.name;
        let seed = lock(&self.seeds).next();
        let app = App::new(
            self.workers.load(Ordering::Relaxed),
            self.plan.app_queue,
            &self.plan.service_time,
            self.slowdown.clone(),
            seed,
        );
        let (stop, stopped) = watch::channel(false);
        let b = backend::start(app, stopped)
            .await
            .map_err(|e| format!("service {name:?}: bind: {e}"))?;
        lock(&self.shared.listened).push(b.addr);
        let (guard, doc, target) = match &self.plan.sidecar {
            Some(spec) => {
                let limit = self.sidecar_limit.load(Ordering::Relaxed);
                let (g, doc, addr) = sidecar::start(spec, limit, b.addr)
                    .await
                    .map_err(|e| format!("service {name:?}: sidecar: {e}"))?;
                lock(&self.shared.listened).push(addr);
                (Some(g), Some(doc), addr)
            }
            None => (None, None, b.addr),
        };
        let mut t = lock(&self.retired);
        t.started += 1;
        t.sidecars += u32::from(guard.is_some());
        drop(t);
        Ok(Arc::new(Pod {
            app: b.app,
            guard: Mutex::new(guard),
            sidecar_doc: Mutex::new(doc),
            target,
            ready: AtomicBool::new(true),
            load: (0..self.populations).map(|_| AtomicU32::new(0)).collect(),
            stop,
            sidecar_samples: Mutex::default(),
        }))
    }

    /// Runs `f` as a task of this fleet (ended by [`Fleet::close`]).
    fn spawn(&self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(f);
    }

    /// Most pods the service may have listening at once (serving,
    /// starting and draining): twice its largest replica count, so a
    /// scale-up never waits on pods that drain slowly unless they are as
    /// many as the serving ones. A start over it waits for a later pass.
    pub fn max_live(&self) -> u32 {
        2 * self.plan.max_pods()
    }

    /// The replica controller's pass: start pods up to `desired` (less
    /// the unschedulable), or scale down (cancel starts, then take the
    /// newest ready pods out of the balancer set); then let drained pods
    /// go.
    pub fn reconcile(self: &Arc<Self>) {
        let mut c = lock(&self.control);
        let pods = self.pods();
        let ready = pods.iter().filter(|p| p.is_ready()).count() as u32;
        let current = ready + c.starting;
        let allowed = c.desired.saturating_sub(c.unschedulable);
        if current < allowed {
            let room = self
                .max_live()
                .saturating_sub(pods.len() as u32 + c.starting);
            let n = (allowed - current).min(room);
            if n < allowed - current {
                // Over the bound: try again at the next controller pass.
                drop(c);
                self.arm_reconcile();
                c = lock(&self.control);
            }
            for _ in 0..n {
                c.starting += 1;
                let fleet = self.clone();
                self.spawn(async move { fleet.start_after_delay().await });
            }
        } else if c.desired < current {
            let mut to_remove = current - c.desired;
            let cancel = to_remove.min(c.starting);
            c.starting -= cancel;
            c.cancelled_starts += cancel;
            to_remove -= cancel;
            for p in pods.iter().rev() {
                if to_remove == 0 {
                    break;
                }
                if p.ready.swap(false, Ordering::Relaxed) {
                    to_remove -= 1;
                }
            }
        }
        drop(c);
        self.publish();
        self.remove_drained();
    }

    async fn start_after_delay(self: Arc<Self>) {
        tokio::time::sleep(Duration::from(self.plan.pod_start)).await;
        {
            // Starts are interchangeable: a cancelled one is whichever
            // comes due first, as in the simulator.
            let mut c = lock(&self.control);
            if c.cancelled_starts > 0 {
                c.cancelled_starts -= 1;
                return;
            }
        }
        if self.shared.closing() {
            return;
        }
        match self.bind_pod().await {
            Ok(pod) => {
                let mut c = lock(&self.control);
                c.starting -= 1;
                self.set_pods(|v| v.push(pod));
            }
            Err(e) => self.shared.fail(format!("starting a pod: {e}")),
        }
    }

    /// Pods out of the balancer set with nothing left on them leave: their
    /// listeners close.
    pub fn remove_drained(&self) {
        let pods = self.pods();
        let gone: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| !p.is_ready() && p.drained())
            .cloned()
            .collect();
        if gone.is_empty() {
            return;
        }
        self.remove(&gone);
        for p in gone {
            self.retire(p);
        }
    }

    /// Takes `gone` out of the pod list, banking their counts first.
    fn remove(&self, gone: &[Arc<Pod>]) {
        let mut banked = lock(&self.retired_parts);
        for p in gone {
            let (arrived, refused) = p.part_counts();
            banked.0 += arrived;
            banked.1 += refused;
        }
        self.set_pods(|v| v.retain(|p| !gone.iter().any(|g| Arc::ptr_eq(p, g))));
    }

    fn retire(&self, p: Arc<Pod>) {
        lock(&self.retired).add(&p.app);
        self.spawn(async move { p.shut_down().await });
    }

    /// Schedules a controller pass `controller_period` from now unless one
    /// is due.
    pub fn arm_reconcile(self: &Arc<Self>) {
        let mut c = lock(&self.control);
        if c.reconcile_armed {
            return;
        }
        c.reconcile_armed = true;
        drop(c);
        let fleet = self.clone();
        self.spawn(async move {
            tokio::time::sleep(Duration::from(fleet.plan.controller_period)).await;
            lock(&fleet.control).reconcile_armed = false;
            fleet.reconcile();
        });
    }

    /// The HPA set the Deployment's replicas.
    pub fn set_desired(self: &Arc<Self>, desired: u32) {
        lock(&self.control).desired = desired;
        self.reconcile();
    }

    /// The Deployment's replicas now: serving pods and those starting
    /// (draining pods are terminating: Kubernetes no longer counts them).
    pub fn current(&self) -> u32 {
        let c = lock(&self.control);
        self.ready_count() + c.starting
    }

    /// Reads each sidecar's in-flight gauge once (the HPA's saturation is
    /// the mean of these samples over its sync period).
    pub fn sample_sidecars(&self) {
        for p in self.pods().iter() {
            if let Some((inflight, _)) = p.sidecar_reading() {
                let mut s = lock(&p.sidecar_samples);
                s.0 += inflight;
                s.1 += 1;
            }
        }
    }

    /// One HPA sync's view: the Deployment's replicas, and every live
    /// pod's sample since the last sync.
    pub fn hpa_view(&self) -> (u32, Vec<PodSample>) {
        let c = lock(&self.control);
        let pods = self.pods();
        let ready = pods.iter().filter(|p| p.is_ready()).count() as u32;
        let current = ready + c.starting;
        drop(c);
        // The limit now (a `set_capacity` may have changed it), as the
        // simulator divides by its sidecar's current limit.
        let limit = match self.plan.sidecar {
            Some(_) => f64::from(self.sidecar_limit().max(1)),
            None => 1.0,
        };
        let samples = pods
            .iter()
            .map(|p| {
                let (sum, n) = std::mem::take(&mut *lock(&p.sidecar_samples));
                PodSample {
                    ready: p.is_ready(),
                    app_utilisation: p.app.take_sync_utilisation(),
                    sidecar_saturation: if n > 0 { sum / n as f64 / limit } else { 0.0 },
                }
            })
            .collect();
        (current, samples)
    }

    /// The first `n` ready pods, oldest first, that pass `pick` (the
    /// simulator's `victims`; `n` already scaled).
    fn victims(&self, n: u32, pick: impl Fn(&Pod) -> bool) -> Vec<Arc<Pod>> {
        self.pods()
            .iter()
            .filter(|p| p.is_ready() && pick(p))
            .take(n as usize)
            .cloned()
            .collect()
    }

    /// `kill_pods`: the pods are out of the balancer set, closed at once
    /// (what they held sees resets) and gone; the controller replaces them
    /// after `controller_period` + `pod_start`, not before `for` ends when
    /// `timed`. Returns how many were killed.
    pub fn kill(self: &Arc<Self>, n: u32, timed: bool) -> u32 {
        let victims = self.victims(n, |_| true);
        for p in &victims {
            p.ready.store(false, Ordering::Relaxed);
        }
        self.remove(&victims);
        let killed = victims.len() as u32;
        for p in victims {
            self.retire(p);
        }
        if timed {
            lock(&self.control).unschedulable += killed;
        }
        self.arm_reconcile();
        killed
    }

    /// A timed `kill_pods` ended: its pods may be scheduled again.
    pub fn reschedule(self: &Arc<Self>, pods: u32) {
        let mut c = lock(&self.control);
        c.unschedulable = c.unschedulable.saturating_sub(pods);
        drop(c);
        self.arm_reconcile();
    }

    /// `fail_pods`: the first `n` ready pods not failing yet start failing;
    /// returned so that `for` can heal the same pods.
    pub fn fail(&self, n: u32) -> Vec<Arc<Pod>> {
        let victims = self.victims(n, |p| !p.app.is_failing());
        for p in &victims {
            p.app.set_failing(true);
        }
        victims
    }

    /// `set_capacity` `workers`: every pod's, and new pods'.
    pub fn set_workers(&self, workers: u32) {
        self.workers.store(workers, Ordering::Relaxed);
        for p in self.pods().iter() {
            p.app.set_workers(workers);
        }
    }

    /// `set_capacity` `sidecar_limit` (per pod): every running sidecar's
    /// limit changes in place (requests in flight keep their slots), and
    /// new pods start with it.
    pub fn set_sidecar_limit(&self, limit: u32) -> Result<(), String> {
        self.sidecar_limit.store(limit, Ordering::Relaxed);
        for p in self.pods().iter() {
            let mut doc = lock(&p.sidecar_doc);
            if let (Some(doc), Some(g)) = (doc.as_mut(), lock(&p.guard).as_ref()) {
                doc.set_fixed(limit);
                doc.reload(g)
                    .map_err(|e| format!("service {:?}: sidecar: {e}", self.plan.name))?;
            }
        }
        Ok(())
    }

    /// The per-pod sidecar limit now (0 without a sidecar).
    pub fn sidecar_limit(&self) -> u32 {
        self.sidecar_limit.load(Ordering::Relaxed)
    }

    /// The per-pod workers now.
    pub fn workers(&self) -> u32 {
        self.workers.load(Ordering::Relaxed)
    }

    /// A `stall` of this service by action `id` starts.
    pub fn stall(&self, id: usize, mode: StallMode) {
        self.stalls.send_modify(|v| v.push((id, mode)));
    }

    /// Action `id`'s stall ends.
    pub fn unstall(&self, id: usize) {
        self.stalls.send_modify(|v| v.retain(|s| s.0 != id));
    }

    /// The stalls in force (the last one decides, as in the simulator).
    pub fn stalls(&self) -> watch::Receiver<Vec<(usize, StallMode)>> {
        self.stalls.subscribe()
    }

    /// (arrived, refused) at the live pods' sidecars and apps so far: what
    /// a service reached through another hop records, as the client does
    /// not see it. An attempt through a sidecar arrives once (at the
    /// sidecar); the sidecar's and the app's refusals both count.
    ///
    /// Pods that left count what they had when they left.
    pub fn part_counts(&self) -> (u64, u64) {
        let banked = lock(&self.retired_parts);
        let mut t = *banked;
        for p in self.pods().iter() {
            let (arrived, refused) = p.part_counts();
            t.0 += arrived;
            t.1 += refused;
        }
        t
    }

    /// Whole-run totals: the pods gone and those still live.
    pub fn totals(&self) -> Totals {
        let mut t = *lock(&self.retired);
        for p in self.pods().iter() {
            t.add(&p.app);
        }
        t
    }

    /// Teardown: no more starts; every pod closed; the fleet's tasks end.
    pub async fn close(&self) {
        self.shared.close();
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        drop(tasks); // aborts starts, drains and controller passes
        for p in self.pods().iter() {
            p.shut_down().await;
        }
    }
}

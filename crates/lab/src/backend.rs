//! A service pod's app container: an HTTP/1.1 server on its own loopback
//! port with the scenario's workers, app queue and service time.
//!
//! Admission is the simulator's (`engine/service.rs`, `app_admit`): a free
//! worker serves at once; otherwise the request waits in the app queue if
//! there is room (first come, first served: tokio's semaphore is fair);
//! otherwise it is refused at once with 503 (`limit_rejected`). A worker
//! serves by **sleeping** the sampled service time (times the active
//! slowdowns, plus their added latency), so the pod's capacity is workers /
//! service time whatever CPU the load generator takes. The work runs in its
//! own task: a caller that gives up does not stop it, as the simulator's
//! server keeps working on abandoned attempts (`drop_expired = false`).
//!
//! Faults: `set_capacity` changes the workers ([`App::set_workers`]: a cut
//! lets running work finish); `fail_pods` makes the app close every
//! connection it is asked on and drop what it holds ([`App::set_failing`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_sim::dist::{ServiceTime, ServiceTimeSpec};
use tokio::net::TcpSocket;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::time::Instant;

/// Listen backlog of every backend socket, set explicitly so the kernel's
/// accept queue is a known bound (its overflows are counted by
/// `validity.rs`).
pub const BACKEND_BACKLOG: u32 = 1024;

/// Header a backend sets on its own refusal (app queue full), so the
/// client can tell it from the sidecar's.
pub const REFUSED_HEADER: &str = "x-stormbreak-lab-refused";

/// The active `slow_service` actions of one service, shared by its pods.
#[derive(Debug, Default)]
pub struct Slowdown {
    active: Mutex<Vec<(usize, f64, Nanos)>>,
}

impl Slowdown {
    /// Action `id` applies from now on.
    pub fn add(&self, id: usize, factor: f64, add: Nanos) {
        self.lock().push((id, factor, add));
    }

    /// Action `id` ends.
    pub fn remove(&self, id: usize) {
        self.lock().retain(|a| a.0 != id);
    }

    /// `d` as the active slowdowns make it: factors multiply, added
    /// latencies add up (the simulator's `refresh_slowdown`).
    pub fn apply(&self, d: Nanos) -> Nanos {
        let a = self.lock();
        if a.is_empty() {
            return d;
        }
        let factor: f64 = a.iter().map(|s| s.1).product();
        d.mul_f64(factor) + a.iter().map(|s| s.2).sum::<Nanos>()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(usize, f64, Nanos)>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Time integrals of a pod's busy workers (as a share of its workers, so
/// a `set_capacity` is read as the simulator reads it: busy / the workers
/// of the moment) and of the requests present (queued or in service), for
/// app utilisation, the HPA and Little's law.
#[derive(Debug)]
struct Gauges {
    busy: u32,
    present: u32,
    workers: u32,
    last: Instant,
    /// Since the last recording tick: ∫ busy / workers dt, and its start.
    util_tick: f64,
    tick_since: Instant,
    /// Since the last HPA sync.
    util_sync: f64,
    sync_since: Instant,
    present_ns_total: f64,
}

impl Gauges {
    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_nanos() as f64;
        let util = dt * self.busy as f64 / self.workers.max(1) as f64;
        self.util_tick += util;
        self.util_sync += util;
        self.present_ns_total += dt * self.present as f64;
        self.last = now;
    }
}

/// The average of an integral since `since`, restarted at `now`.
fn take_avg(area: &mut f64, since: &mut Instant, now: Instant) -> f64 {
    let span = now.saturating_duration_since(*since).as_nanos() as f64;
    let v = if span > 0.0 { *area / span } else { 0.0 };
    *area = 0.0;
    *since = now;
    v
}

/// What a pod has done, read by the recorder.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodReading {
    /// Busy workers now.
    pub busy: u32,
    /// Waiting in the app queue now.
    pub queued: u32,
    /// Time-averaged busy workers / workers since the last reading (or
    /// the pod's start).
    pub utilisation: f64,
}

/// One pod's app: its admission state and its figures.
#[derive(Debug)]
pub struct App {
    workers: Arc<Semaphore>,
    /// Permits still to be forgotten as they come back: a `set_capacity`
    /// cut below the busy workers lets running work finish.
    owed: AtomicU32,
    queue_cap: u32,
    queued: AtomicU32,
    gauges: Mutex<Gauges>,
    sampler: ServiceTime,
    rng: Mutex<Pcg64Mcg>,
    slowdown: Arc<Slowdown>,
    /// Requests that reached the app (admitted or refused).
    pub arrived: AtomicU64,
    /// Requests served to the end.
    pub served: AtomicU64,
    /// Requests refused because the app queue was full.
    pub refused: AtomicU64,
    /// A `fail_pods` fault: every request is answered by closing its
    /// connection, at once, including those already admitted.
    failing: watch::Sender<bool>,
    /// Timer lateness of the service sleeps: worst, and total, in ns.
    late_max_ns: AtomicU64,
    late_sum_ns: AtomicU64,
}

impl App {
    /// An app of `workers` workers, a queue of `queue` and service times
    /// from `spec`, slowed by `slowdown`.
    pub fn new(
        workers: u32,
        queue: u32,
        spec: &ServiceTimeSpec,
        slowdown: Arc<Slowdown>,
        seed: u64,
    ) -> Arc<App> {
        let now = Instant::now();
        Arc::new(App {
            workers: Arc::new(Semaphore::new(workers as usize)),
            owed: AtomicU32::new(0),
            queue_cap: queue,
            queued: AtomicU32::new(0),
            gauges: Mutex::new(Gauges {
                busy: 0,
                present: 0,
                workers,
                last: now,
                util_tick: 0.0,
                tick_since: now,
                util_sync: 0.0,
                sync_since: now,
                present_ns_total: 0.0,
            }),
            sampler: spec.sampler(),
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(seed)),
            slowdown,
            arrived: AtomicU64::new(0),
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            failing: watch::channel(false).0,
            late_max_ns: AtomicU64::new(0),
            late_sum_ns: AtomicU64::new(0),
        })
    }

    /// Workers of the pod now.
    pub fn worker_count(&self) -> u32 {
        self.lock_gauges().workers
    }

    /// Sets the pod's workers (`set_capacity`): a rise admits waiting
    /// requests at once; a cut admits nothing new until the busy workers
    /// are under it, and running work finishes (the simulator's
    /// `apply_capacity`).
    pub fn set_workers(&self, n: u32) {
        let mut g = self.lock_gauges();
        g.advance(Instant::now());
        let old = g.workers;
        g.workers = n;
        drop(g);
        if n > old {
            let mut more = n - old;
            // Cancel a debt first: those permits are still out.
            let paid = self
                .owed
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
                    Some(o - o.min(more))
                })
                .unwrap_or(0);
            more -= paid.min(more);
            self.workers.add_permits(more as usize);
        } else {
            let cut = old - n;
            let forgotten = self.workers.forget_permits(cut as usize) as u32;
            self.owed.fetch_add(cut - forgotten, Ordering::Relaxed);
        }
    }

    /// A worker is done: its permit goes back, unless a cut is owed it.
    fn release(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        let owed = self
            .owed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| o.checked_sub(1));
        if owed.is_ok() {
            permit.forget();
        }
    }

    /// Starts or ends a `fail_pods` fault on this pod.
    pub fn set_failing(&self, failing: bool) {
        self.failing.send_replace(failing);
    }

    /// Whether a `fail_pods` fault is in force.
    pub fn is_failing(&self) -> bool {
        *self.failing.borrow()
    }

    fn lock_gauges(&self) -> std::sync::MutexGuard<'_, Gauges> {
        self.gauges.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn gauge(&self, f: impl FnOnce(&mut Gauges)) {
        let mut g = self.lock_gauges();
        g.advance(Instant::now());
        f(&mut g);
    }

    /// The gauges now, and the utilisation since the last reading.
    pub fn read(&self) -> PodReading {
        let now = Instant::now();
        let mut g = self.lock_gauges();
        g.advance(now);
        let g = &mut *g;
        let utilisation = take_avg(&mut g.util_tick, &mut g.tick_since, now);
        PodReading {
            busy: g.busy,
            queued: self.queued.load(Ordering::Relaxed),
            utilisation,
        }
    }

    /// Time-averaged busy workers / workers since the last HPA sync (or
    /// the pod's start): the autoscaler's app CPU.
    pub fn take_sync_utilisation(&self) -> f64 {
        let now = Instant::now();
        let mut g = self.lock_gauges();
        g.advance(now);
        let g = &mut *g;
        take_avg(&mut g.util_sync, &mut g.sync_since, now)
    }

    /// Requests present now (queued or in service): a draining pod leaves
    /// once this and its sidecar are at zero.
    pub fn present(&self) -> u32 {
        self.lock_gauges().present
    }

    /// ∫ requests present dt over the pod's life, in request·ns.
    pub fn present_area(&self) -> f64 {
        let mut g = self.lock_gauges();
        g.advance(Instant::now());
        g.present_ns_total
    }

    /// Total lateness of the service sleeps, ns.
    pub fn sleep_late_total_ns(&self) -> u64 {
        self.late_sum_ns.load(Ordering::Relaxed)
    }

    /// Worst and mean lateness of the service sleeps (time slept beyond
    /// the service time asked for), in ns.
    pub fn sleep_lateness(&self) -> (u64, f64) {
        let n = self.served.load(Ordering::Relaxed).max(1);
        (
            self.late_max_ns.load(Ordering::Relaxed),
            self.late_sum_ns.load(Ordering::Relaxed) as f64 / n as f64,
        )
    }

    /// Admits one request: `None` when refused (no worker and no queue
    /// place), else a receiver answered when its service ends. The service
    /// runs in its own task, to the end, whether or not anyone waits.
    pub fn admit(self: &Arc<Self>) -> Option<oneshot::Receiver<()>> {
        self.arrived.fetch_add(1, Ordering::Relaxed);
        let now_permit = self.workers.clone().try_acquire_owned().ok();
        if now_permit.is_none() {
            let waiting = self.queued.fetch_add(1, Ordering::Relaxed);
            if waiting >= self.queue_cap {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        let (tx, rx) = oneshot::channel();
        let app = self.clone();
        self.gauge(|g| g.present += 1);
        tokio::spawn(async move {
            // A `fail_pods` fault resets what the app holds, queued or in
            // service, as the simulator's `reset_pod` does.
            let mut failing = app.failing.subscribe();
            let permit = match now_permit {
                Some(p) => p,
                None => {
                    let p = tokio::select! {
                        p = app.workers.clone().acquire_owned() => p.ok(),
                        _ = failing.wait_for(|f| *f) => None,
                    };
                    app.queued.fetch_sub(1, Ordering::Relaxed);
                    match p {
                        Some(p) => p,
                        None => {
                            app.gauge(|g| g.present -= 1);
                            return;
                        }
                    }
                }
            };
            app.gauge(|g| g.busy += 1);
            let d = {
                let mut rng = app.rng.lock().unwrap_or_else(PoisonError::into_inner);
                app.sampler.sample(&mut *rng)
            };
            let d = app.slowdown.apply(d);
            let start = Instant::now();
            let served = tokio::select! {
                _ = tokio::time::sleep(d.into()) => true,
                _ = failing.wait_for(|f| *f) => false,
            };
            if served {
                let late = Nanos::from(start.elapsed()).saturating_sub(d).as_nanos();
                app.late_max_ns.fetch_max(late, Ordering::Relaxed);
                app.late_sum_ns.fetch_add(late, Ordering::Relaxed);
                app.served.fetch_add(1, Ordering::Relaxed);
            }
            app.gauge(|g| {
                g.busy -= 1;
                g.present -= 1;
            });
            app.release(permit);
            if served {
                let _ = tx.send(());
            }
        });
        Some(rx)
    }
}

/// A running backend: its address, and the watch that stops it.
#[derive(Debug)]
pub struct Backend {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its app.
    pub app: Arc<App>,
}

/// Binds 127.0.0.1:0 with [`BACKEND_BACKLOG`] and serves `app` until
/// `stop` turns true (then the listener is closed; connections end with
/// the runtime).
pub async fn start(app: Arc<App>, mut stop: watch::Receiver<bool>) -> std::io::Result<Backend> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let listener = socket.listen(BACKEND_BACKLOG)?;
    let addr = listener.local_addr()?;
    let served = app.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            let Ok((stream, _)) = accepted else {
                // EMFILE and friends: back off rather than spin.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let app = served.clone();
            let conn_stop = stop.clone();
            tokio::spawn(serve_connection(stream, app, conn_stop));
        }
    });
    Ok(Backend { addr, app })
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Arc<App>,
    mut stop: watch::Receiver<bool>,
) {
    let svc = hyper::service::service_fn(move |_req: Request<Incoming>| {
        let app = app.clone();
        async move { answer(&app).await }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        _ = stop.wait_for(|s| *s) => {}
    };
}

/// Why a failing app closed a connection instead of answering.
#[derive(Debug)]
struct Failing;

impl std::fmt::Display for Failing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the app is failing (fail_pods)")
    }
}

impl std::error::Error for Failing {}

/// The answer, or an error (hyper then closes the connection: the
/// caller sees a reset, as from a crashed app) while `fail_pods` holds.
async fn answer(app: &Arc<App>) -> Result<Response<Full<Bytes>>, Failing> {
    let mut failing = app.failing.subscribe();
    if *failing.borrow_and_update() {
        return Err(Failing);
    }
    let status = match app.admit() {
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"app queue full\n")));
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r.headers_mut()
                .insert(REFUSED_HEADER, http::HeaderValue::from_static("app-queue"));
            return Ok(r);
        }
        Some(done) => tokio::select! {
            r = done => match r {
                Ok(()) => StatusCode::OK,
                Err(_) => StatusCode::SERVICE_UNAVAILABLE,
            },
            _ = failing.wait_for(|f| *f) => return Err(Failing),
        },
    };
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = status;
    Ok(r)
}

#[cfg(test)]
mod tests {
    //! The app's admission and its app-CPU reading in virtual time
    //! (tokio's paused clock).

    use super::*;

    fn app(workers: u32, queue: u32, service: u64) -> Arc<App> {
        let spec = ServiceTimeSpec::Constant {
            value: Nanos::from_secs(service),
        };
        App::new(workers, queue, &spec, Arc::default(), 1)
    }

    async fn advance(secs: u64) {
        tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn app_cpu_is_busy_workers_over_workers_averaged_since_the_last_sync() {
        let a = app(2, 0, 1);
        let done = a.admit().expect("a free worker");
        advance(2).await;
        done.await.unwrap();
        // One of two workers busy for 1 s of 2: 0.25.
        assert!((a.take_sync_utilisation() - 0.25).abs() < 1e-3);
        // A new period starts at the sync: nothing busy since.
        advance(1).await;
        assert_eq!(a.take_sync_utilisation(), 0.0);
        // The recording's reading keeps its own period.
        assert!((a.read().utilisation - 1.0 / 6.0).abs() < 1e-3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_lets_running_work_finish_and_admits_nothing_over_it() {
        let a = app(2, 0, 1);
        let first = a.admit().unwrap();
        let second = a.admit().unwrap();
        a.set_workers(1);
        assert!(a.admit().is_none(), "no worker free, no queue");
        advance(2).await;
        first.await.unwrap();
        second.await.unwrap();
        // Both permits came back, one was owed: one worker now.
        let third = a.admit().unwrap();
        assert!(a.admit().is_none(), "{} workers", a.worker_count());
        advance(2).await;
        third.await.unwrap();
        a.set_workers(3);
        let held: Vec<_> = (0..3).map(|_| a.admit().unwrap()).collect();
        assert!(a.admit().is_none());
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_app_drops_what_it_holds_and_serves_again_when_healed() {
        let a = app(1, 5, 10);
        let running = a.admit().unwrap();
        let queued = a.admit().unwrap();
        a.set_failing(true);
        // Both ended without an answer, at once, and the worker is free.
        assert!(running.await.is_err());
        assert!(queued.await.is_err());
        tokio::task::yield_now().await;
        assert_eq!(a.present(), 0);
        a.set_failing(false);
        let again = a.admit().unwrap();
        advance(11).await;
        again.await.unwrap();
        assert_eq!(a.served.load(Ordering::Relaxed), 1);
    }
}

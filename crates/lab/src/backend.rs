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

use std::convert::Infallible;
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

/// Time integrals of a pod's busy workers and of the requests present
/// (queued or in service), for app utilisation and Little's law.
#[derive(Debug)]
struct Gauges {
    busy: u32,
    present: u32,
    last: Instant,
    busy_ns_tick: f64,
    busy_ns_total: f64,
    present_ns_total: f64,
}

impl Gauges {
    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_nanos() as f64;
        self.busy_ns_tick += dt * self.busy as f64;
        self.busy_ns_total += dt * self.busy as f64;
        self.present_ns_total += dt * self.present as f64;
        self.last = now;
    }
}

/// What a pod has done, read by the recorder.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodReading {
    /// Busy workers now.
    pub busy: u32,
    /// Waiting in the app queue now.
    pub queued: u32,
    /// Busy-worker nanoseconds since the last reading.
    pub busy_ns: f64,
}

/// One pod's app: its admission state and its figures.
#[derive(Debug)]
pub struct App {
    workers: Arc<Semaphore>,
    worker_count: u32,
    queue_cap: u32,
    queued: AtomicU32,
    gauges: Mutex<Gauges>,
    sampler: ServiceTime,
    rng: Mutex<Pcg64Mcg>,
    slowdown: Arc<Slowdown>,
    /// Requests served to the end.
    pub served: AtomicU64,
    /// Requests refused because the app queue was full.
    pub refused: AtomicU64,
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
        Arc::new(App {
            workers: Arc::new(Semaphore::new(workers as usize)),
            worker_count: workers,
            queue_cap: queue,
            queued: AtomicU32::new(0),
            gauges: Mutex::new(Gauges {
                busy: 0,
                present: 0,
                last: Instant::now(),
                busy_ns_tick: 0.0,
                busy_ns_total: 0.0,
                present_ns_total: 0.0,
            }),
            sampler: spec.sampler(),
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(seed)),
            slowdown,
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            late_max_ns: AtomicU64::new(0),
            late_sum_ns: AtomicU64::new(0),
        })
    }

    /// Workers of the pod.
    pub fn worker_count(&self) -> u32 {
        self.worker_count
    }

    fn gauge(&self, f: impl FnOnce(&mut Gauges)) {
        let mut g = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        g.advance(Instant::now());
        f(&mut g);
    }

    /// The gauges now; resets the per-reading busy integral.
    pub fn read(&self) -> PodReading {
        let mut g = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        g.advance(Instant::now());
        let busy_ns = std::mem::take(&mut g.busy_ns_tick);
        PodReading {
            busy: g.busy,
            queued: self.queued.load(Ordering::Relaxed),
            busy_ns,
        }
    }

    /// Mean requests present (queued or in service) over `elapsed`.
    pub fn mean_present(&self, elapsed: std::time::Duration) -> f64 {
        let mut g = self.gauges.lock().unwrap_or_else(PoisonError::into_inner);
        g.advance(Instant::now());
        g.present_ns_total / elapsed.as_nanos().max(1) as f64
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
            let permit = match now_permit {
                Some(p) => p,
                None => {
                    let p = app.workers.clone().acquire_owned().await;
                    app.queued.fetch_sub(1, Ordering::Relaxed);
                    match p {
                        Ok(p) => p,
                        Err(_) => return, // closed: the pod is going away
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
            tokio::time::sleep(d.into()).await;
            let late = Nanos::from(start.elapsed()).saturating_sub(d).as_nanos();
            app.late_max_ns.fetch_max(late, Ordering::Relaxed);
            app.late_sum_ns.fetch_add(late, Ordering::Relaxed);
            app.served.fetch_add(1, Ordering::Relaxed);
            app.gauge(|g| {
                g.busy -= 1;
                g.present -= 1;
            });
            drop(permit);
            let _ = tx.send(());
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
        async move { Ok::<_, Infallible>(answer(&app).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        _ = stop.wait_for(|s| *s) => {}
    };
}

async fn answer(app: &Arc<App>) -> Response<Full<Bytes>> {
    let status = match app.admit() {
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"app queue full\n")));
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r.headers_mut()
                .insert(REFUSED_HEADER, http::HeaderValue::from_static("app-queue"));
            return r;
        }
        Some(done) => match done.await {
            Ok(()) => StatusCode::OK,
            Err(_) => StatusCode::SERVICE_UNAVAILABLE,
        },
    };
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = status;
    r
}

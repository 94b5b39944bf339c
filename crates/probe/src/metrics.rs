//! `--listen ADDR`: the probe's results as Prometheus metrics, in
//! blackbox_exporter's naming so existing dashboards and alerts read them,
//! plus what blackbox_exporter cannot say: the failure reason, the window
//! state and the slots lost to a pause.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `probe_success` | gauge | `path` | 1 if the path's last probe succeeded |
//! | `probe_duration_seconds` | gauge | `path` | the last probe's duration |
//! | `probe_http_status_code` | gauge | `path` | the last answer's status (0: none) |
//! | `stormbreak_probe_results_total` | counter | `path`, `result`, `reason` | probes by result (`ok`, `ok_after_retry`, `failed`) and failure reason (`""` unless failed) |
//! | `stormbreak_probe_paused_slots_total` | counter | `path` | slots lost to a pause the target asked for |
//! | `stormbreak_probe_skipped_slots_total` | counter | `path` | slots skipped at `max_in_flight` |
//! | `stormbreak_probe_window_state` | gauge | `path` | the latest window: 1 good, 0 bad, -1 unknown |
//!
//! Label values are bounded by the config (path names, at most
//! [`crate::config::MAX_PATHS`]) and the fixed reasons; none carries a URL
//! or a header.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use stormbreak_sim::recovery::WindowState;
use tokio::net::TcpListener;

use crate::outcome::{Outcome, Reason};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabel {
    path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    path: String,
    result: &'static str,
    reason: &'static str,
}

/// The probe's metrics, updated by the run and read by scrapes.
pub struct Metrics {
    registry: Registry,
    names: Vec<String>,
    success: Family<PathLabel, Gauge>,
    duration: Family<PathLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    status: Family<PathLabel, Gauge>,
    results: Family<ResultLabel, Counter>,
    paused: Family<PathLabel, Counter>,
    skipped: Family<PathLabel, Counter>,
    window: Family<PathLabel, Gauge>,
}

impl Metrics {
    /// Metrics for the paths `names`, in config order.
    pub fn new(names: Vec<String>) -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            success: Family::default(),
            duration: Family::default(),
            status: Family::default(),
            results: Family::default(),
            paused: Family::default(),
            skipped: Family::default(),
            window: Family::default(),
            names,
            registry: Registry::default(),
        };
        registry.register(
            "probe_success",
            "Whether the path's last probe succeeded",
            m.success.clone(),
        );
        registry.register(
            "probe_duration_seconds",
            "The path's last probe's duration",
            m.duration.clone(),
        );
        registry.register(
            "probe_http_status_code",
            "The path's last answer's status (0: none)",
            m.status.clone(),
        );
        registry.register(
            "stormbreak_probe_results",
            "Probes by result and failure reason",
            m.results.clone(),
        );
        registry.register(
            "stormbreak_probe_paused_slots",
            "Slots lost to a pause the target asked for",
            m.paused.clone(),
        );
        registry.register(
            "stormbreak_probe_skipped_slots",
            "Slots skipped at max_in_flight",
            m.skipped.clone(),
        );
        registry.register(
            "stormbreak_probe_window_state",
            "The path's latest window: 1 good, 0 bad, -1 unknown",
            m.window.clone(),
        );
        Metrics { registry, ..m }
    }

    fn label(&self, path: usize) -> PathLabel {
        PathLabel {
            path: self.names[path].clone(),
        }
    }

    /// Counts one ended probe.
    pub fn record(&self, o: &Outcome) {
        let l = self.label(o.path);
        self.success.get_or_create(&l).set(i64::from(o.ok()));
        self.duration
            .get_or_create(&l)
            .set(o.latency().as_secs_f64());
        self.status
            .get_or_create(&l)
            .set(i64::from(o.status.unwrap_or(0)));
        let result = if !o.ok() {
            "failed"
        } else if o.ok_after_retry() {
            "ok_after_retry"
        } else {
            "ok"
        };
        self.results
            .get_or_create(&ResultLabel {
                path: l.path,
                result,
                reason: o.reason.map_or("", Reason::label),
            })
            .inc();
    }

    /// Counts a paused slot.
    pub fn paused(&self, path: usize) {
        self.paused.get_or_create(&self.label(path)).inc();
    }

    /// Counts a skipped slot.
    pub fn skipped(&self, path: usize) {
        self.skipped.get_or_create(&self.label(path)).inc();
    }

    /// Sets a path's latest window state.
    pub fn window(&self, path: usize, state: WindowState) {
        let v = match state {
            WindowState::Good => 1,
            WindowState::Bad => 0,
            WindowState::Unknown => -1,
        };
        self.window.get_or_create(&self.label(path)).set(v);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        out
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped; other
/// paths get 404. HTTP/1.1 only; connections at once are capped at 64
/// (a connection beyond waits in the kernel's backlog).
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(64));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // EMFILE and the like: wait a little rather than spin.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let metrics = Arc::clone(&metrics);
                async move {
                    let mut r = if req.uri().path() == "/metrics"
                        && req.method() == http::Method::GET
                    {
                        let mut r = http::Response::new(Full::new(Bytes::from(metrics.encode())));
                        r.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static(
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            ),
                        );
                        r
                    } else {
                        http::Response::new(Full::new(Bytes::from_static(
                            b"not found: GET /metrics\n",
                        )))
                    };
                    if req.uri().path() != "/metrics" || req.method() != http::Method::GET {
                        *r.status_mut() = http::StatusCode::NOT_FOUND;
                    }
                    Ok::<_, Infallible>(r)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(std::time::Duration::from_secs(10))
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
            drop(permit);
        });
    }
}

//! The access log: one JSON line per answered request, naming the decision
//! that shaped the answer, rate-bounded by the policy crate's GCRA.
//!
//! The request path never writes: it checks the rate gate (one GCRA cell,
//! [`stormbreak_policy::ratelimit::Gcra`], on the guard's clock), formats
//! the line only when admitted, and hands it to a bounded queue
//! ([`QUEUE_LINES`]) that one writer thread drains into stdout or a file.
//! A line refused by the gate or by a full queue (stdout blocked, disk
//! slow) is dropped and counted in `stormbreak_guard_access_log_dropped`,
//! so a flood costs a counter increment, never memory or a blocked worker.

use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::ratelimit::{Gcra, RateLimitConfig};

use crate::config::{AccessLogConfig, AccessLogTo};
use crate::metrics::ShedReason;

/// Most lines waiting for the writer; beyond it lines are dropped (and
/// counted). With the guard's header limits a line is a few kilobytes at
/// most, so the queue holds at most a few tens of megabytes.
pub const QUEUE_LINES: usize = 4096;

/// The decision that shaped an answer, as the access log's `decision`
/// field spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Forwarded upstream; the answer is the upstream's (or the guard's
    /// 502/503/504 when no attempt got one).
    #[default]
    Proxied,
    /// Shed by the guard: an operator rule, class shedding under
    /// saturation, or a staged restore not admitting yet.
    Shed(ShedReason),
    /// Over the route's concurrency limit (and its queue).
    Limited,
    /// Forwarded, failed, and the retry budget refused the retry.
    BudgetDenied,
    /// Refused by the route's keyed rate limit (429).
    RateLimited,
    /// No route matched (404).
    NoRoute,
    /// The listener's `request_timeout` passed (504).
    TimedOut,
    /// The route's dependency check failed for good (502); nothing was
    /// forwarded.
    DependencyFailed,
    /// The client failed its own request: its body ended early (logged
    /// 499), was malformed (400), too large (413) or too slow (408).
    Client(crate::blame::ClientFault),
}

impl Decision {
    /// `decision` field value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Decision::Proxied => "proxied",
            Decision::Shed(ShedReason::Limit) | Decision::Limited => "limited",
            Decision::Shed(_) => "shed",
            Decision::BudgetDenied => "budget_denied",
            Decision::RateLimited => "rate_limited",
            Decision::NoRoute => "no_route",
            Decision::TimedOut => "timed_out",
            Decision::DependencyFailed => "dependency_failed",
            Decision::Client(f) => f.name(),
        }
    }

    /// `shed_reason` field value, for sheds.
    pub(crate) fn shed_reason(self) -> Option<&'static str> {
        match self {
            Decision::Shed(r) if r != ShedReason::Limit => Some(r.name()),
            _ => None,
        }
    }
}

/// What the request path learned about one request, for its line.
#[derive(Debug, Default)]
pub(crate) struct Note {
    /// The decision (default: proxied).
    pub(crate) decision: Decision,
    /// Index of the matched route.
    pub(crate) route: Option<usize>,
    /// Index of the cluster the last attempt went to.
    pub(crate) upstream: Option<usize>,
    /// Attempts sent upstream (0 when the guard answered itself).
    pub(crate) attempts: u32,
    /// How far the client got sending its body, when it had one to send.
    pub(crate) body: Option<std::sync::Arc<crate::blame::Progress>>,
}

impl Note {
    /// The status the access log records: the one sent, or 499 for a
    /// client that went away mid-body (nginx's convention).
    pub(crate) fn logged_status(&self, sent: u16) -> u16 {
        match self.decision {
            Decision::Client(f) => f.status(),
            _ => sent,
        }
    }
}

/// One line, in field order.
#[derive(Serialize)]
pub(crate) struct Line<'a> {
    /// Wall-clock time the request arrived, milliseconds since the Unix epoch.
    pub(crate) time_unix_ms: u64,
    pub(crate) listener: &'a str,
    pub(crate) method: &'a str,
    /// The path without the query (which may carry credentials).
    pub(crate) path: &'a str,
    pub(crate) route: Option<&'a str>,
    pub(crate) upstream: Option<&'a str>,
    pub(crate) status: u16,
    pub(crate) attempts: u32,
    pub(crate) decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) shed_reason: Option<&'static str>,
    /// Request head to response head, in milliseconds.
    pub(crate) latency_ms: f64,
}

enum Msg {
    Line(String),
    Close,
}

/// The open access log: rate gate, queue and writer thread.
pub(crate) struct AccessLog {
    gate: Gcra,
    /// The gate's theoretical arrival time (GCRA's one number of state).
    tat: Mutex<Nanos>,
    queue: SyncSender<Msg>,
    writer: Mutex<Option<JoinHandle<()>>>,
    dropped_rate: Counter,
    dropped_full: Counter,
}

impl AccessLog {
    /// Opens the sink `config` names; `None` for `to = "off"`.
    pub(crate) fn open(
        config: &AccessLogConfig,
        dropped_rate: Counter,
        dropped_full: Counter,
    ) -> Result<Option<AccessLog>, String> {
        let sink: Box<dyn Write + Send> = match config.to {
            AccessLogTo::Off => return Ok(None),
            AccessLogTo::Stdout => Box::new(std::io::stdout()),
            AccessLogTo::File => {
                let path = config.path.as_deref().unwrap_or_default();
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("access_log.path {path:?}: cannot open: {e}"))?;
                Box::new(file)
            }
        };
        let gate = gate_of(config).map_err(|e| format!("access_log: {e}"))?;
        let (queue, lines) = sync_channel(QUEUE_LINES);
        let writer = std::thread::Builder::new()
            .name("stormbreak-access-log".into())
            .spawn(move || write_lines(lines, sink))
            .map_err(|e| format!("access_log: cannot start its writer thread: {e}"))?;
        Ok(Some(AccessLog {
            gate,
            tat: Mutex::new(Nanos::ZERO),
            queue,
            writer: Mutex::new(Some(writer)),
            dropped_rate,
            dropped_full,
        }))
    }

    /// Logs the line `line` makes, if the gate admits one at `now`; `line`
    /// runs only then, so dropped lines are never formatted.
    pub(crate) fn record(&self, now: Nanos, line: impl FnOnce() -> String) {
        {
            let mut tat = self.tat.lock().unwrap_or_else(PoisonError::into_inner);
            match self.gate.check(*tat, now) {
                Ok(next) => *tat = next,
                Err(_) => {
                    self.dropped_rate.inc();
                    return;
                }
            }
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.queue.try_send(Msg::Line(line()))
        {
            self.dropped_full.inc();
        }
    }

    /// Writes out every queued line and stops the writer (later lines are
    /// dropped as if the queue were full).
    pub(crate) async fn close(&self) {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(writer) = writer else { return };
        let queue = self.queue.clone();
        let _ = tokio::task::spawn_blocking(move || {
            // Blocking send: behind every line already queued.
            let _ = queue.send(Msg::Close);
            let _ = writer.join();
        })
        .await;
    }
}

/// The gate: the policy crate's GCRA, validated as a rate limit's is.
pub(crate) fn gate_of(config: &AccessLogConfig) -> Result<Gcra, stormbreak_policy::FieldError> {
    RateLimitConfig {
        rate: config.rate,
        burst: config.burst,
        max_keys: 1,
    }
    .gcra()
}

/// The writer thread: lines in order, flushed whenever the queue runs dry.
fn write_lines(lines: Receiver<Msg>, sink: Box<dyn Write + Send>) {
    let mut out = std::io::BufWriter::new(sink);
    let mut failed = false;
    let mut check = |r: std::io::Result<()>| {
        if let Err(e) = r
            && !failed
        {
            // Once: a full disk must not turn into a log flood of its own.
            failed = true;
            tracing::warn!(error = %e, "access log: write failed; lines are being lost");
        }
    };
    loop {
        let msg = match lines.try_recv() {
            Ok(m) => m,
            Err(_) => {
                check(out.flush());
                match lines.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                }
            }
        };
        match msg {
            Msg::Line(mut l) => {
                l.push('\n');
                check(out.write_all(l.as_bytes()));
            }
            Msg::Close => {
                check(out.flush());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(path: &std::path::Path, rate: f64, burst: u32) -> AccessLogConfig {
        AccessLogConfig {
            to: AccessLogTo::File,
            path: Some(path.display().to_string()),
            rate,
            burst,
        }
    }

    /// In virtual time (explicit `Nanos`): `burst` lines at once, then one
    /// per `1/rate`; every refused line counted, none formatted.
    #[tokio::test]
    async fn the_gate_admits_burst_then_rate_and_counts_the_rest() {
        let dir =
            std::env::temp_dir().join(format!("stormbreak-access-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let _ = std::fs::remove_file(&path);
        let (rate_drops, full_drops) = (Counter::default(), Counter::default());
        let log = AccessLog::open(
            &config(&path, 10.0, 5),
            rate_drops.clone(),
            full_drops.clone(),
        )
        .unwrap()
        .unwrap();
        let formatted = std::sync::atomic::AtomicU64::new(0);
        let mut n = 0;
        let mut line = || {
            formatted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            n += 1;
            format!("{{\"n\":{n}}}")
        };
        // 100 at t = 0: the burst of 5 passes (TAT 0 → 500 ms; τ = 400 ms).
        for _ in 0..100 {
            log.record(Nanos::ZERO, &mut line);
        }
        // The next conforms from TAT − τ = 100 ms on: not at 99 ms, at 100 ms.
        log.record(Nanos::from_millis(99), &mut line);
        log.record(Nanos::from_millis(100), &mut line);
        // Idle since (TAT 600 ms < 1 s): a full burst again, no more.
        for _ in 0..100 {
            log.record(Nanos::from_secs(1), &mut line);
        }
        log.close().await;
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5 + 1 + 5, "{text}");
        assert_eq!(lines[0], "{\"n\":1}");
        assert_eq!(lines[10], "{\"n\":11}");
        assert_eq!(
            formatted.into_inner(),
            11,
            "dropped lines are never formatted"
        );
        assert_eq!(rate_drops.get(), 202 - 11);
        assert_eq!(full_drops.get(), 0);
    }

    #[test]
    fn decision_names_are_the_documented_ones() {
        let all = [
            (Decision::Proxied, "proxied", None),
            (Decision::Shed(ShedReason::Rule), "shed", Some("rule")),
            (
                Decision::Shed(ShedReason::Saturation),
                "shed",
                Some("saturation"),
            ),
            (Decision::Shed(ShedReason::Restore), "shed", Some("restore")),
            (Decision::Shed(ShedReason::Limit), "limited", None),
            (Decision::Limited, "limited", None),
            (Decision::BudgetDenied, "budget_denied", None),
            (Decision::RateLimited, "rate_limited", None),
            (Decision::NoRoute, "no_route", None),
            (
                Decision::Client(crate::blame::ClientFault::TooLarge),
                "body_too_large",
                None,
            ),
            (
                Decision::Client(crate::blame::ClientFault::Incomplete),
                "body_incomplete",
                None,
            ),
            (Decision::TimedOut, "timed_out", None),
        ];
        for (d, name, reason) in all {
            assert_eq!((d.name(), d.shed_reason()), (name, reason), "{d:?}");
        }
    }
}

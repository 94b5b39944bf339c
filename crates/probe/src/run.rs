//! The driver: tokio time and sockets around the sans-IO [`Schedule`] and
//! [`Timeline`].
//!
//! Bounds: at most `max_in_flight` probes out at once (a slot that finds
//! that many is skipped and counted, never queued); each probe ends by its
//! timeout; the run ends at its duration, then waits for the probes still
//! out (each within its timeout) and stops.

use std::io::Write;
use std::sync::Arc;

use serde::Serialize;
use stormbreak_policy::Nanos;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::ProbeConfig;
use crate::outcome::{Outcome, Reason};
use crate::retry::Retries;
use crate::schedule::{Schedule, Slot};
use crate::send::Sender;
use crate::timeline::{PathReport, Timeline, Verdict, overall};

/// Called after each interval closes, with the timeline so far.
pub type IntervalHook = Box<dyn FnMut(&Timeline) + Send>;

/// What a run is told from outside.
#[derive(Default)]
pub struct RunOptions {
    /// Where each probe's JSON line goes (`None`: nowhere).
    pub jsonl: Option<Box<dyn Write + Send>>,
    /// Called after each interval closes, with the timeline so far (the
    /// live table).
    pub on_interval: Option<IntervalHook>,
    /// Stops the run early; what was seen is still reported.
    pub stop: StopSignal,
    /// Seed of the schedule when the config gives none.
    pub seed: u64,
    /// Prometheus metrics to keep up to date (`--listen`).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// Stops a run from outside (a signal handler, a test): the run ends at
/// once, drops the probes still out (they are not counted) and reports
/// what it saw.
#[derive(Clone, Debug)]
pub struct StopSignal(Arc<watch::Sender<bool>>);

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal(Arc::new(watch::channel(false).0))
    }
}

impl StopSignal {
    /// Stops the run.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// A finished run.
#[derive(Debug, Serialize)]
pub struct ProbeRun {
    /// The run's verdict: breached over unknown over met.
    pub verdict: Verdict,
    /// Its exit status (0, 99, 3).
    pub exit_code: u8,
    /// Per path.
    pub paths: Vec<PathReport>,
    /// Said before the run started (windows the rate cannot judge).
    pub warnings: Vec<String>,
    /// When the run started, Unix milliseconds (its time zero).
    pub started_unix_ms: u64,
    /// Seconds the run lasted (its duration, or less when stopped).
    pub ran_s: f64,
    /// Whether it was stopped before its duration.
    pub stopped_early: bool,
    /// Probes sent in all, and probes per second over the run: flat by
    /// construction, whatever the target answered.
    pub probes_sent: u64,
    /// `probes_sent` plus paused and skipped slots, per second.
    pub slots_per_s: f64,
    /// Largest lateness of a probe's send behind its due time, milliseconds.
    pub max_send_lateness_ms: f64,
    /// The seed of the schedule.
    pub seed: u64,
    /// Retries sent (0 without a `retry` table).
    pub retries: u64,
    /// Retries the budget refused.
    pub retry_budget_denied: u64,
    /// The timeline rows, per path, for the outputs.
    #[serde(skip)]
    pub timeline: TimelineRows,
}

/// Each path's name and rows.
#[derive(Debug, Default)]
pub struct TimelineRows(pub Vec<(String, Vec<crate::timeline::Row>)>);

/// One probe's JSON line.
#[derive(Serialize)]
struct Line<'a> {
    unix_ms: u64,
    t_s: f64,
    path: &'a str,
    due_s: f64,
    late_ms: f64,
    status: Option<u16>,
    ok: bool,
    latency_ms: f64,
    reason: Option<&'static str>,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    paused_for_s: Option<f64>,
}

/// Runs the probe described by `config` on the current tokio runtime.
pub async fn run(config: &ProbeConfig, mut opts: RunOptions) -> Result<ProbeRun, String> {
    let run = &config.run;
    let seed = run.seed.unwrap_or(opts.seed);
    let senders: Vec<Arc<Sender>> = config
        .paths
        .iter()
        .map(|p| Sender::new(p.clone(), run.max_in_flight as usize).map(Arc::new))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS: {e}"))?;
    let retries = match &run.retry {
        None => None,
        Some(r) => {
            let budget = run
                .budget
                .clone()
                .unwrap_or_else(crate::config::default_budget);
            Some(Arc::new(Retries::new(
                r,
                &budget,
                seed ^ 0x9e37_79b9_7f4a_7c15,
            )?))
        }
    };
    let mut schedule = Schedule::new(run.rate, run.spacing, config.paths.len(), seed);
    let mut timeline = Timeline::new(config);
    // Every probe out, each ending within its timeout: at most max_in_flight.
    let mut out: JoinSet<Outcome> = JoinSet::new();
    let mut stop = opts.stop.0.subscribe();
    let start = Instant::now();
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let since = move |at: Instant| Nanos::from(at.saturating_duration_since(start));
    let end = run.duration;
    // The last interval stays open until the probes still out at the end
    // are in: a probe that ends after `end` is counted in it, not lost.
    let last_open = end.saturating_sub(Nanos::NANOSECOND);
    // Each path's share of the in-flight cap: a hanging path fills its own
    // share and cannot take the slots of the others.
    let per_path_cap = (run.max_in_flight as usize / config.paths.len()).max(1);
    let mut out_per_path = vec![0usize; config.paths.len()];
    let mut sent: u64 = 0;
    let mut slots: u64 = 0;
    let mut max_late = Nanos::ZERO;
    let mut jsonl_failed = None;

    let mut handle = |o: Outcome,
                      schedule: &mut Schedule,
                      timeline: &mut Timeline,
                      opts: &mut RunOptions,
                      limit: Nanos| {
        close(timeline, o.done.min(limit), opts);
        if let Some(m) = &opts.metrics {
            m.record(&o);
        }
        timeline.record(&o);
        let mut paused_for = None;
        if o.overloaded() {
            let ask = o
                .retry_after
                .unwrap_or(run.overload_pause)
                .min(run.max_pause);
            schedule.pause(o.path, o.done + ask);
            paused_for = Some(ask);
        }
        if let Some(w) = opts.jsonl.as_mut() {
            let line = Line {
                unix_ms: started_unix_ms + o.done.as_nanos() / 1_000_000,
                t_s: o.done.as_secs_f64(),
                path: &config.paths[o.path].name,
                due_s: o.due.as_secs_f64(),
                late_ms: o.sent.saturating_sub(o.due).as_secs_f64() * 1e3,
                status: o.status,
                ok: o.ok(),
                latency_ms: o.latency().as_secs_f64() * 1e3,
                reason: o.reason.map(Reason::label),
                attempts: o.attempts,
                paused_for_s: paused_for.map(Nanos::as_secs_f64),
            };
            let mut text = serde_json::to_vec(&line).expect("plain data");
            text.push(b'\n');
            if let Err(e) = w.write_all(&text).and_then(|()| w.flush()) {
                jsonl_failed = Some(e.to_string());
                opts.jsonl = None;
            }
        }
    };

    let stopped_early = loop {
        let due = schedule.poll_timeout();
        if due >= end || *stop.borrow() {
            break *stop.borrow();
        }
        tokio::select! {
            biased;
            _ = stop.changed() => {}
            Some(joined) = out.join_next() => {
                if let Ok(o) = joined {
                    out_per_path[o.path] -= 1;
                    handle(o, &mut schedule, &mut timeline, &mut opts, last_open);
                }
            }
            () = tokio::time::sleep_until(start + due.into()) => {
                let now = since(Instant::now());
                close(&mut timeline, now.min(last_open), &mut opts);
                while schedule.poll_timeout() < end
                    && let Some(slot) = schedule.handle_timeout(now)
                {
                    slots += 1;
                    match slot {
                        Slot::Paused { path, .. } => {
                            timeline.record_paused(path);
                            if let Some(m) = &opts.metrics {
                                m.paused(path);
                            }
                        }
                        Slot::Send { path, .. }
                            if out.len() >= run.max_in_flight as usize
                                || out_per_path[path] >= per_path_cap =>
                        {
                            timeline.record_skipped(path);
                            if let Some(m) = &opts.metrics {
                                m.skipped(path);
                            }
                        }
                        Slot::Send { path, at } => {
                            sent += 1;
                            out_per_path[path] += 1;
                            let sender = Arc::clone(&senders[path]);
                            let retries = retries.clone();
                            let sent_at = since(Instant::now());
                            max_late = max_late.max(sent_at.saturating_sub(at));
                            out.spawn(async move {
                                let deadline = Instant::now() + sender.spec().timeout.into();
                                let (answer, attempts) = match &retries {
                                    Some(r) => r.probe(&sender, deadline).await,
                                    None => (sender.send(deadline).await, 1),
                                };
                                let done = since(Instant::now());
                                let reason = answer.failure.or_else(|| {
                                    answer
                                        .status
                                        .filter(|&s| !sender.spec().expect_status(s))
                                        .map(|_| Reason::Status)
                                });
                                Outcome {
                                    path,
                                    due: at,
                                    sent: sent_at,
                                    done,
                                    status: answer.status,
                                    reason,
                                    retry_after: answer.retry_after,
                                    attempts,
                                }
                            });
                        }
                    }
                }
            }
        }
    };
    // The probes still out end within their timeouts, unless a stop comes
    // first: then they are dropped, not awaited.
    let mut dropping = stopped_early;
    loop {
        if dropping {
            out.abort_all();
        }
        tokio::select! {
            biased;
            changed = stop.changed(), if !dropping => {
                // A closed channel cannot stop the run any more.
                dropping = changed.is_ok() && *stop.borrow();
                if changed.is_err() {
                    // Only the sender's drop closes it; keep draining.
                    while let Some(joined) = out.join_next().await {
                        if let Ok(o) = joined {
                            handle(o, &mut schedule, &mut timeline, &mut opts, last_open);
                        }
                    }
                    break;
                }
            }
            joined = out.join_next() => match joined {
                None => break,
                Some(Ok(o)) => handle(o, &mut schedule, &mut timeline, &mut opts, last_open),
                Some(Err(_)) => {}
            },
        }
    }
    let ran = if stopped_early {
        since(Instant::now()).min(end)
    } else {
        end
    };
    close(&mut timeline, ran, &mut opts);
    if let Some(e) = jsonl_failed {
        eprintln!("probe: writing JSON lines failed, stopped writing them: {e}");
    }
    let paths = timeline.reports();
    let verdict = overall(&paths);
    let ran_s = (timeline.interval() * timeline.closed()).as_secs_f64();
    Ok(ProbeRun {
        started_unix_ms,
        verdict,
        exit_code: verdict.exit_code(),
        paths,
        warnings: config.sample_warnings(),
        ran_s,
        stopped_early,
        probes_sent: sent,
        slots_per_s: if ran.is_zero() {
            0.0
        } else {
            slots as f64 / ran.as_secs_f64()
        },
        max_send_lateness_ms: max_late.as_secs_f64() * 1e3,
        seed,
        retries: retries.as_ref().map_or(0, |r| r.retries()),
        retry_budget_denied: retries.as_ref().map_or(0, |r| r.budget_denied()),
        timeline: TimelineRows(
            timeline
                .rows()
                .map(|(n, r)| (n.to_owned(), r.to_vec()))
                .collect(),
        ),
    })
}

/// Closes the intervals ending by `until`; if any closed, calls the hook
/// and sets the window-state gauges.
fn close(timeline: &mut Timeline, until: Nanos, opts: &mut RunOptions) {
    if timeline.close_until(until) == 0 {
        return;
    }
    if let Some(f) = opts.on_interval.as_mut() {
        f(timeline);
    }
    if let Some(m) = &opts.metrics {
        for (i, (_, row)) in timeline.latest().enumerate() {
            if let Some(r) = row {
                m.window(i, r.state);
            }
        }
    }
}

//! What a run writes: `probe.json` (verdicts and per-path recovery),
//! `timeline.csv` and `timeline.json` (one row per path per interval),
//! written together as one set; and the tables printed to the terminal.

use std::fmt::Write as _;

use stormbreak_sim::output::{OutputSet, csv_field};
use stormbreak_sim::recovery::WindowState;

use crate::config::ProbeConfig;
use crate::run::ProbeRun;
use crate::timeline::{PathReport, Timeline, Verdict};

/// Schema tag of `probe.json`.
pub const PROBE_SCHEMA: &str = "stormbreak.probe/1";
/// The run's verdicts and per-path recovery.
pub const PROBE_FILE: &str = "probe.json";
/// Every path's rows, as CSV.
pub const TIMELINE_CSV: &str = "timeline.csv";
/// Every path's rows, as JSON.
pub const TIMELINE_JSON: &str = "timeline.json";

/// The run's output set; `versus`, with `--expect`, goes into
/// `probe.json` as `expected`.
pub fn output_set(
    config: &ProbeConfig,
    run: &ProbeRun,
    versus: Option<&[crate::expect::Versus]>,
) -> OutputSet {
    let paths: Vec<serde_json::Value> = config
        .paths
        .iter()
        .map(|p| {
            // Header names only: their values are credentials.
            serde_json::json!({
                "name": p.name,
                "method": p.method.as_str(),
                "url": shown_url(&p.url),
                "headers": p.headers.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
                "timeout_s": p.timeout.as_secs_f64(),
                "connection": format!("{:?}", p.connection).to_lowercase(),
                "slo": {
                    "error_rate": p.slo.error_rate,
                    "window_s": p.slo.window.as_secs_f64(),
                    "latency": p.slo.latency.map(|l| serde_json::json!({
                        "quantile": l.quantile, "under_s": l.under.as_secs_f64()
                    })),
                    "min_samples": p.slo.min_samples(),
                },
            })
        })
        .collect();
    let doc = serde_json::json!({
        "schema": PROBE_SCHEMA,
        "config": {
            "rate_per_s": config.run.rate,
            "duration_s": config.run.duration.as_secs_f64(),
            "interval_s": config.run.interval.as_secs_f64(),
            "hysteresis": config.run.hysteresis,
            "max_in_flight": config.run.max_in_flight,
            "paths": paths,
        },
        "run": run,
        "expected": versus,
    });
    let mut set = OutputSet::new();
    set.add(
        PROBE_FILE,
        serde_json::to_vec_pretty(&doc).expect("plain data"),
    );
    set.add(TIMELINE_CSV, timeline_csv(run));
    let rows: Vec<serde_json::Value> = run
        .timeline
        .0
        .iter()
        .map(|(name, rows)| serde_json::json!({ "path": name, "rows": rows }))
        .collect();
    set.add(
        TIMELINE_JSON,
        serde_json::to_vec_pretty(&serde_json::json!({ "schema": PROBE_SCHEMA, "paths": rows }))
            .expect("plain data"),
    );
    set
}

/// The URL as outputs show it: without its query, which may carry a
/// credential (`?access_token=`), said to be there by `?…`.
pub fn shown_url(url: &http::Uri) -> String {
    let mut shown = format!(
        "{}://{}{}",
        url.scheme_str().unwrap_or("http"),
        url.authority().map_or("", |a| a.as_str()),
        url.path()
    );
    if url.query().is_some() {
        shown.push_str("?…");
    }
    shown
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v}"))
}

fn state_label(s: WindowState) -> &'static str {
    match s {
        WindowState::Good => "good",
        WindowState::Bad => "bad",
        WindowState::Unknown => "unknown",
    }
}

/// `timeline.csv`: one row per path per interval; `t_s` is the interval's end.
pub fn timeline_csv(run: &ProbeRun) -> String {
    let mut out = String::from(
        "t_s,path,probes,failed,ok_after_retry,paused,skipped,window_probes,window_error_rate,window_p50_ms,window_quantile_ms,state,full\n",
    );
    for (name, rows) in &run.timeline.0 {
        for r in rows {
            let c = &r.interval;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.t_s,
                csv_field(name),
                c.probes,
                c.failed,
                c.ok_after_retry,
                c.paused,
                c.skipped,
                r.window_probes,
                opt(r.window_error_rate),
                opt(r.window_p50_ms),
                opt(r.window_quantile_ms),
                state_label(r.state),
                r.full
            );
        }
    }
    out
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |s| format!("{} s", seconds(s)))
}

/// Seconds as the tables print them: whole when whole, else one decimal.
pub fn seconds(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn millis(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |m| format!("{m:.0} ms"))
}

fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Met => "met",
        Verdict::Unknown => "UNKNOWN",
        Verdict::Breached => "BREACHED",
    }
}

/// Left-aligned columns, two spaces apart.
pub(crate) fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The final per-path table: the replay's columns (degraded at,
/// recovered at, worst error rate) plus the hysteresis column and the
/// failure reasons.
pub fn final_table(reports: &[PathReport], hysteresis: u32) -> String {
    let mut rows = vec![vec![
        "path".to_owned(),
        "verdict".to_owned(),
        "degraded at".to_owned(),
        "recovered at".to_owned(),
        format!("confirmed ({hysteresis} windows)"),
        "worst error rate".to_owned(),
        "worst window pQ".to_owned(),
        "p50 / p99".to_owned(),
        "probes".to_owned(),
        "failed".to_owned(),
        "retried ok".to_owned(),
        "paused".to_owned(),
        "unknown windows".to_owned(),
        "reasons".to_owned(),
    ]];
    for r in reports {
        rows.push(vec![
            r.path.clone(),
            verdict_label(r.verdict).to_owned(),
            secs(r.degraded_at_s),
            secs(r.recovered_at_s),
            secs(r.confirmed_at_s),
            pct(r.worst_error_rate),
            millis(r.worst_quantile_ms),
            format!("{} / {}", millis(r.p50_ms), millis(r.p99_ms)),
            r.totals.probes.to_string(),
            r.totals.failed.to_string(),
            r.totals.ok_after_retry.to_string(),
            r.totals.paused.to_string(),
            r.unknown_windows.to_string(),
            r.reasons
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    columns(&rows)
}

/// The live table: each path's latest window.
pub fn live_table(t: &Timeline) -> String {
    let mut rows = vec![vec![
        format!(
            "t = {} s",
            seconds((t.interval() * t.closed()).as_secs_f64())
        ),
        "window".to_owned(),
        "error rate".to_owned(),
        "p50".to_owned(),
        "pQ".to_owned(),
        "probes".to_owned(),
        "paused".to_owned(),
    ]];
    for (name, row) in t.latest() {
        let Some(r) = row else { continue };
        rows.push(vec![
            name.to_owned(),
            state_label(r.state).to_owned(),
            pct(r.window_error_rate),
            millis(r.window_p50_ms),
            millis(r.window_quantile_ms),
            r.window_probes.to_string(),
            r.interval.paused.to_string(),
        ]);
    }
    columns(&rows)
}

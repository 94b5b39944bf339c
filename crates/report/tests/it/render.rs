//! The report's HTML without a browser: self-contained, markers and
//! overlays where they belong, bounded size, deterministic; a real
//! simulator run re-rendered from its `recording.json`; and
//! `docs/outputs.md` covering every column the outputs write.

use std::collections::BTreeSet;
use std::path::Path;

use stormbreak_policy::Nanos;
use stormbreak_report::{REPORT_FILE, ReportExtras, render, write_report};
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::output::{self, SUMMARY_SCHEMA};
use stormbreak_sim::{Recording, Scenario};

/// `<svg class="chart"…>…</svg>` elements.
fn charts(html: &str) -> Vec<&str> {
    html.split(r#"<svg class="chart""#)
        .skip(1)
        .map(|s| &s[..s.find("</svg>").unwrap()])
        .collect()
}

fn two_runs() -> (Recording, Recording) {
    (
        crate::common::storm(false, 10),
        crate::common::storm(true, 10),
    )
}

#[test]
fn the_page_is_self_contained() {
    let (a, b) = two_runs();
    let html = render(
        &[("as happened", &a), ("fixed", &b)],
        &crate::common::extras(),
    );
    // The only URL is the SVG namespace; nothing is fetched.
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    for needle in [
        "http://",
        "https://",
        "src=",
        "@import",
        "url(",
        "<link rel=\"stylesheet\"",
    ] {
        assert!(!without_ns.contains(needle), "found {needle:?}");
    }
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("<style>") && html.contains("@media print"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn every_chart_has_data_and_every_action_is_a_marker() {
    let (a, _) = two_runs();
    let html = render(&[("as happened", &a)], &ReportExtras::default());
    let charts = charts(&html);
    // load, errors, amplification, 6 route panels, p99, p50, saturation,
    // utilisation, replicas.
    assert_eq!(charts.len(), 14);
    for c in &charts {
        assert!(c.contains(r#"class="series""#), "chart without data");
        assert_eq!(c.matches(r#"class="badge""#).count(), a.actions.len());
    }
    // Actions are numbered in the timeline list too, with their clock time.
    assert!(html.contains("16:36:00"));
    assert!(html.contains("pause 4 node(s) of haproxy-cus"));
    // Clock axis, not seconds since start.
    assert!(html.contains(">13:00<") && html.contains(">21:00<"));
}

#[test]
fn a_job_queue_gets_its_chart_and_other_runs_do_not() {
    let (mut a, _) = two_runs();
    let plain = render(&[("as happened", &a)], &ReportExtras::default());
    assert!(!plain.contains(r#"id="jobs""#));
    // A backlog that builds for three hours and drains in one and a half.
    let n = a.routes[0].attempts.len();
    a.routes[0].job_wait_s = (0..n)
        .map(|i| {
            let t = i as f64 * 10.0;
            if t < 1800.0 {
                0.0
            } else if t < 12_960.0 {
                t - 1800.0
            } else {
                (11_160.0 - 2.0 * (t - 12_960.0)).max(0.0)
            }
        })
        .collect();
    let html = render(&[("as happened", &a)], &ReportExtras::default());
    assert!(html.contains(r#"id="jobs""#));
    assert_eq!(charts(&html).len(), charts(&plain).len() + 1);
    let job_chart = html
        .split(r#"id="fig-job-wait""#)
        .nth(1)
        .expect("the figure");
    assert!(job_chart.contains(r#"class="series""#));
}

#[test]
fn two_runs_overlay_on_the_same_axes_with_one_style_per_run() {
    let (a, b) = two_runs();
    let html = render(
        &[("as happened", &a), ("with follow-ups", &b)],
        &ReportExtras::default(),
    );
    for c in charts(&html) {
        // Data lines only: faint raw lines (class "raw") follow the same
        // run styles but are context.
        let series: Vec<&str> = c
            .split("<path ")
            .filter(|p| p.starts_with(r#"class="series""#))
            .collect();
        let dashed = series
            .iter()
            .filter(|p| p.contains(r#"stroke-dasharray="7 4""#))
            .count();
        assert!(
            dashed > 0 && dashed < series.len(),
            "second run missing on a chart"
        );
    }
    assert!(html.contains("with follow-ups"));
    // Headline table: one row per route and run.
    assert_eq!(html.matches("<td>web</td>").count(), 2);
}

#[test]
fn long_runs_stay_small_and_lines_bounded() {
    // 1 s intervals over 8.5 h: 30 600 points per line before downsampling.
    let a = crate::common::storm(false, 1);
    let html = render(&[("as happened", &a)], &ReportExtras::default());
    assert!(html.len() < 1_500_000, "report is {} bytes", html.len());
    for c in charts(&html) {
        for d in c
            .split(r#" d=""#)
            .skip(1)
            .map(|s| &s[..s.find('"').unwrap()])
        {
            // Every point is one command pair; count numbers / 2.
            let numbers = d
                .split(|ch: char| ch.is_ascii_alphabetic() || ch == ' ' || ch == '-')
                .filter(|t| !t.is_empty())
                .count();
            assert!(numbers / 2 <= 1500, "{} points on a line", numbers / 2);
        }
    }
}

#[test]
fn rendering_is_deterministic_and_escapes_names() {
    let (a, b) = two_runs();
    let extras = crate::common::extras();
    let one = render(&[("a <b>", &a), ("fixed", &b)], &extras);
    let two = render(&[("a <b>", &a), ("fixed", &b)], &extras);
    assert_eq!(one, two);
    assert!(one.contains("api &lt;v3&gt;"));
    assert!(one.contains("a &lt;b&gt;"));
    assert!(!one.contains("<script>alert"));
    assert!(!one.contains("<v3>"));
}

#[test]
fn an_empty_recording_renders_a_page_without_charts() {
    let rec = Recording {
        scenario: "empty".into(),
        seed: 1,
        scale: 1.0,
        interval: Nanos::from_secs(1),
        duration: Nanos::ZERO,
        clock_origin_s: 0,
        routes: Vec::new(),
        components: Vec::new(),
        actions: Vec::new(),
        events: 0,
        attempts: 0,
        peak_in_flight: 0,
        peak_events_per_s: 0.0,
        peak_job_backlog: 0,
        bounds_hit: Vec::new(),
    };
    let html = render(&[("empty", &rec)], &ReportExtras::default());
    assert!(html.contains("Nothing was recorded"));
    assert!(charts(&html).is_empty());
    let html = render(&[], &ReportExtras::default());
    assert!(html.contains("</html>"));
}

const SCENARIO: &str = r#"
[scenario]
name = "one-server"
duration = "20s"
interval = "1s"
clock_origin = "13:28"
[[service]]
name = "backend"
replicas = 1
app = { workers = 1, service_time = { dist = "exponential", mean = "1ms" } }
[[route]]
name = "r"
path = ["backend"]
[[client]]
name = "users"
route = "r"
rate = "500/s"
timeout = "1s"
"#;

fn simulate() -> Recording {
    let sc = Scenario::parse("one-server.toml", SCENARIO).expect("valid scenario");
    Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds")
}

#[test]
fn a_simulated_run_is_re_rendered_from_its_directory() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-rerender");
    let _ = std::fs::remove_dir_all(&dir);
    let rec = simulate();
    output::write_outputs(&dir, &rec, None).unwrap();
    let html = render(&[("run", &rec)], &ReportExtras::default());
    write_report(&dir, &html).unwrap();

    let back = output::read_recording(&dir.join("recording.json")).unwrap();
    let again = render(&[("run", &back)], &ReportExtras::default());
    assert_eq!(html, again, "recording.json loses nothing the report shows");
    assert!(dir.join(REPORT_FILE).is_file() && dir.join("summary.json").is_file());
    assert!(html.contains(">13:28:"), "clock origin from the scenario");
    for c in charts(&html) {
        assert!(c.contains(r#"class="series""#));
    }
}

/// Every metric the CSV writes, every key of summary.json and the schema
/// tag appear in docs/outputs.md.
#[test]
fn docs_outputs_md_covers_every_column_and_key() {
    let docs_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/outputs.md");
    let docs = std::fs::read_to_string(&docs_path).expect("docs/outputs.md");
    let rec = simulate();

    assert!(docs.contains(SUMMARY_SCHEMA), "schema tag {SUMMARY_SCHEMA}");
    let csv = output::timeseries_csv(&rec);
    let mut lines = csv.lines();
    for column in lines.next().unwrap().split(',') {
        assert!(docs.contains(&format!("`{column}`")), "csv column {column}");
    }
    let metrics: BTreeSet<&str> = lines.filter_map(|l| l.split(',').nth(3)).collect();
    for m in metrics {
        assert!(docs.contains(&format!("`{m}`")), "csv metric {m}");
    }
    for c in stormbreak_sim::record::Cause::ALL {
        assert!(
            docs.contains(&format!("`{}`", c.name())),
            "cause {}",
            c.name()
        );
    }

    let summary = output::summary_json(&rec, None);
    let mut keys = Vec::new();
    fn walk(prefix: &str, v: &serde_json::Value, keys: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    if prefix.ends_with("errors") {
                        continue; // cause names, checked above
                    }
                    keys.push(path.clone());
                    walk(&path, v, keys);
                }
            }
            serde_json::Value::Array(a) => {
                if let Some(first) = a.first() {
                    walk(&format!("{prefix}[]"), first, keys);
                }
            }
            _ => {}
        }
    }
    walk("", &summary, &mut keys);
    assert!(keys.len() > 10, "{keys:?}");
    for k in keys {
        assert!(docs.contains(&format!("`{k}`")), "summary.json key {k}");
    }
}

/// A route or component keeps its colour on every chart, so the sidecar
/// pinned at 100 % and its idle app read as the same thing.
#[test]
fn an_entity_has_one_colour_across_charts() {
    let (a, _) = two_runs();
    let html = render(&[("as happened", &a)], &ReportExtras::default());
    for name in ["auth-svc", "token-svc", "web", "token"] {
        let colours: BTreeSet<&str> = charts(&html)
            .iter()
            .flat_map(|c| c.split("<path ").skip(1))
            .filter(|p| p.contains(&format!("<title>{name} (peak")))
            .map(|p| {
                p.split(r#"stroke=""#)
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(colours.len(), 1, "{name}: {colours:?}");
    }
}

/// `count` routes over `n` intervals whose totals differ from route to
/// route and run to run (`salt`); `reversed` lists them in the opposite
/// order, so a total found by position instead of by name is caught.
fn many_routes(count: usize, n: usize, salt: u64, reversed: bool) -> Recording {
    let route = |k: usize| {
        let mut r = stormbreak_sim::record::RouteSeries {
            name: format!("route-{k:05}"),
            ..Default::default()
        };
        for i in 0..n {
            let first = k as u64 + salt + i as u64;
            let failed = (k as u64 + salt) % 7 + i as u64;
            let mut errors = [0; stormbreak_sim::record::Cause::ALL.len()];
            errors[stormbreak_sim::record::Cause::Timeout as usize] = failed;
            r.first_attempts.push(first);
            r.attempts.push(first + failed);
            r.successes.push(first);
            r.errors.push(errors);
            r.latency_ms.push([1.0, 2.0, 3.0, 4.0]);
            r.latency_mean_ms.push(1.5);
        }
        r
    };
    let mut routes: Vec<_> = (0..count).map(route).collect();
    if reversed {
        routes.reverse();
    }
    Recording {
        scenario: "many-routes".into(),
        seed: 1,
        scale: 1.0,
        interval: Nanos::from_secs(10),
        duration: Nanos::from_secs(n as u64 * 10),
        clock_origin_s: 0,
        routes,
        components: Vec::new(),
        actions: Vec::new(),
        events: 0,
        attempts: 0,
        peak_in_flight: 0,
        peak_events_per_s: 0.0,
        peak_job_backlog: 0,
        bounds_hit: Vec::new(),
    }
}

/// The text of each cell of each body row of the table captioned `caption`.
fn table_rows(html: &str, caption: &str) -> Vec<Vec<String>> {
    let table = html
        .split(&format!("<caption>{caption}</caption>"))
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the table");
    let body = table.split("<tbody>").nth(1).unwrap_or("");
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..];
                    text[..text.find("</td>").unwrap()].replace('\u{202F}', "")
                })
                .collect()
        })
        .collect()
}

/// 8 000 routes in two runs (the second listing them backwards): the
/// headline table has one row per route and run, each with that route's
/// own totals. The page used to recompute every route's totals for each
/// row (quadratic: about two minutes here); the timeout only guards
/// against a hang, docs/BENCHMARKS.md has the measured times.
#[test]
fn eight_thousand_routes_get_their_own_totals() {
    const ROUTES: usize = 8_000;
    const N: usize = 4;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let a = many_routes(ROUTES, N, 0, false);
        let b = many_routes(ROUTES, N, 3, true);
        let _ = tx.send(render(&[("a", &a), ("b", &b)], &ReportExtras::default()));
    });
    let html = rx
        .recv_timeout(std::time::Duration::from_secs(600))
        .expect("rendering 8 000 routes hung (or panicked)");
    let rows = table_rows(&html, "Routes: headline figures");
    assert_eq!(rows.len(), 2 * ROUTES);
    for (j, row) in rows.iter().enumerate() {
        let k = j / 2;
        let (run, salt) = if j % 2 == 0 { ("a", 0) } else { ("b", 3) };
        let first: u64 = (0..N as u64).map(|i| k as u64 + salt + i).sum();
        let failed: u64 = (0..N as u64).map(|i| (k as u64 + salt) % 7 + i).sum();
        let expect = [
            format!("route-{k:05}"),
            run.to_owned(),
            first.to_string(),
            (first + failed).to_string(),
        ];
        assert_eq!(row[..4], expect, "row {j}");
        assert_eq!(row[5], first.to_string(), "successes, row {j}");
        assert_eq!(row[6], failed.to_string(), "failed, row {j}");
    }
}

/// `archive` answers 4 attempts per interval over 15 minutes; for 100 s
/// from minute 5 every attempt fails, otherwise none does. Over 5-minute
/// windows its error rate peaks at a third.
fn burst(interval_s: u64) -> Recording {
    let n = (900 / interval_s) as usize;
    let mut rec = many_routes(1, n, 0, false);
    rec.interval = Nanos::from_secs(interval_s);
    rec.duration = n as u64 * rec.interval;
    let r = &mut rec.routes[0];
    r.name = "archive".into();
    for i in 0..n {
        let t = i as u64 * interval_s;
        let failed = if (300..400).contains(&t) { 4 } else { 0 };
        let mut errors = [0; stormbreak_sim::record::Cause::ALL.len()];
        errors[stormbreak_sim::record::Cause::Timeout as usize] = failed;
        r.errors[i] = errors;
        r.successes[i] = 4 - failed;
        r.attempts[i] = 4;
        r.first_attempts[i] = 4;
    }
    rec
}

/// The error-rate chart draws the 5-minute trailing rate that `stormbreak
/// replay` judges paths by, with the raw rate faint behind it and both
/// named in the legend.
#[test]
fn the_error_rate_chart_draws_the_headline_window_over_the_raw_rate() {
    let rec = burst(10);
    let headline = stormbreak_sim::replay::summarize(&rec, &[]).headline;
    assert_eq!(headline.archive_peak_error_rate, 1.0 / 3.0);
    let html = render(&[("run", &rec)], &ReportExtras::default());
    let fig = html
        .split(r#"id="fig-errors""#)
        .nth(1)
        .and_then(|f| f.split("</figure>").next())
        .expect("the error-rate figure");
    let paths: Vec<&str> = fig.split("<path ").skip(1).collect();
    assert_eq!(paths.len(), 2, "one raw and one windowed line");
    // Raw behind (first), faint, with the raw peak.
    assert!(paths[0].starts_with(r#"class="raw""#), "{}", paths[0]);
    assert!(paths[0].contains(r#"stroke-opacity="0.3""#));
    assert!(paths[0].contains("<title>archive, raw (peak 100%)</title>"));
    // The windowed line peaks where the replay's headline figure does.
    assert!(paths[1].starts_with(r#"class="series""#), "{}", paths[1]);
    assert!(paths[1].contains("<title>archive, 5-min window (peak 33.3%)</title>"));
    for label in ["5-min window", "raw, per interval", "30 intervals of 10 s"] {
        assert!(fig.contains(label), "{label} missing");
    }

    // Five-minute intervals: the window is one interval, the raw rate.
    let html = render(&[("run", &burst(300))], &ReportExtras::default());
    let fig = html.split(r#"id="fig-errors""#).nth(1).unwrap();
    let fig = fig.split("</figure>").next().unwrap();
    assert!(!fig.contains(r#"class="raw""#) && !fig.contains("5-min window"));
    assert_eq!(fig.matches(r#"<path class="series""#).count(), 1);
}

/// The key-figure card of `title`: its value and the line under it.
fn card(html: &str, title: &str) -> (String, String) {
    let c = html
        .split(&format!(r#"<div class="k">{title}</div>"#))
        .nth(1)
        .expect("the card");
    let text = |class: &str| {
        let t = c
            .split(&format!(r#"<div class="{class}">"#))
            .nth(1)
            .unwrap();
        t[..t.find("</div>").unwrap()].to_owned()
    };
    (text("v"), text("s"))
}

/// The key figures are taken over the window their charts draw and the
/// headline table uses, and say which: a burst that fails every attempt
/// for 100 s reads 33.3 % over the 5-minute window on the card, in the
/// table and on the chart's solid line, not the 100 % of its worst
/// 10-second interval.
#[test]
fn key_figure_cards_use_the_headline_window_and_name_it() {
    let rec = burst(10);
    let html = render(&[("run", &rec)], &ReportExtras::default());
    let (v, s) = card(&html, "Peak error rate");
    assert_eq!(v, "33.3%", "{s}");
    assert!(
        s.contains("archive at") && s.contains("trailing 5-min window (30 intervals of 10 s)"),
        "{s}"
    );
    let rows = table_rows(&html, "Routes: headline figures");
    assert_eq!(rows[0][6], "33.3%", "{:?}", rows[0]);
    let (_, s) = card(&html, "Degraded at the end");
    assert!(s.contains("last trailing 5-min window"), "{s}");
    let storm = crate::common::storm(false, 10);
    let (_, s) = card(
        &render(&[("run", &storm)], &ReportExtras::default()),
        "Peak saturation",
    );
    assert!(s.contains("at an interval&#39;s end, every 10 s"), "{s}");

    // One interval fills the window: the card says it is per interval, and
    // its worst interval is the whole figure.
    let html = render(&[("run", &burst(300))], &ReportExtras::default());
    let (v, s) = card(&html, "Peak error rate");
    assert_eq!(v, "100%", "{s}");
    assert!(s.contains("per interval of 5 min"), "{s}");
}

/// A retry burst in one interval (8 attempts for 4 requests, the retries
/// of requests started earlier) reads 2× raw; over the 5-minute window the
/// card and the amplification chart's solid line read the 124 attempts
/// over 120 requests the window holds.
#[test]
fn the_amplification_card_and_chart_use_the_headline_window() {
    let mut rec = burst(10);
    let r = &mut rec.routes[0];
    for e in r.errors.iter_mut() {
        *e = [0; stormbreak_sim::record::Cause::ALL.len()];
    }
    r.successes.iter_mut().for_each(|s| *s = 4);
    r.attempts[40] = 8;
    r.successes[40] = 8;
    let html = render(&[("run", &rec)], &ReportExtras::default());
    let (v, s) = card(&html, "Peak amplification");
    assert_eq!(v, "1.03×", "{s}");
    assert!(s.contains("trailing 5-min window"), "{s}");
    let fig = html
        .split(r#"id="fig-amplification""#)
        .nth(1)
        .and_then(|f| f.split("</figure>").next())
        .expect("the amplification figure");
    assert!(
        fig.contains("<title>archive, raw (peak 2×)</title>"),
        "{fig}"
    );
    assert!(fig.contains("<title>archive, 5-min window (peak 1.03×)</title>"));
}

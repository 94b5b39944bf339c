//! The HTML page: header, key figures, timeline, figures, tables, CSS and
//! the legend-highlighting script.

use std::fmt::Write as _;

use stormbreak_sim::Recording;

use crate::charts::{
    self, Action, DEMAND, Figure, Frame, GOODPUT, OFFERED, Order, Run, Size, amplification, at_f,
    at_u, entity_legend, entity_lines, error_rate, has_limit, human_duration, latency, route_len,
    saturation,
};
use crate::svg::{Line, ScaleKind, Stroke, Unit, escape, fmt_clock, fmt_value};
use crate::{DEGRADED_ERROR_RATE, ReportExtras, Table};

const CSS: &str = r#"
:root{--bg:#fff;--fg:#1d1f23;--muted:#5b6068;--line:#dfe2e6;--card:#f4f6f8;--grid:#e8eaed;--mark:#444;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#15171b;--fg:#e6e8eb;--muted:#a3a9b2;--line:#30343a;--card:#1e2126;--grid:#2a2e34;--mark:#8a9099}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 2px;font-weight:650}
h2{font-size:17px;margin:30px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line);font-weight:650}
h3{font-size:14px;margin:0;font-weight:600}
p.desc{margin:4px 0 8px;max-width:75ch}
.meta{color:var(--muted);font-size:13px;margin:2px 0}
.meta b{color:var(--fg);font-weight:600}
nav{margin:10px 0 0;font-size:13px}
nav a{color:inherit;margin-right:14px;text-decoration:none;border-bottom:1px dotted var(--muted)}
.runs{display:flex;flex-wrap:wrap;gap:4px 16px;margin:6px 0 0;padding:0;list-style:none;font-size:13px}
.runs li{display:flex;align-items:center;gap:6px}
.runrow{margin:8px 0 4px;font-weight:600;font-size:13px;display:flex;align-items:center;gap:6px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(230px,1fr));gap:10px}
.card{background:var(--card);border-radius:8px;padding:9px 12px;min-width:0}
.card .k{color:var(--muted);font-size:11.5px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:22px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.2}
.card .s{color:var(--muted);font-size:12.5px;overflow-wrap:anywhere}
.card.bad .v{color:#c0392b}
@media (prefers-color-scheme:dark){.card.bad .v{color:#ff7b6b}}
ol.timeline{list-style:none;padding:0;margin:0;columns:2 420px;column-gap:28px;font-size:13px}
ol.timeline li{display:flex;gap:8px;align-items:baseline;padding:2px 0;break-inside:avoid}
ol.timeline time{font-variant-numeric:tabular-nums;color:var(--muted);min-width:5.2em}
.n{display:inline-block;min-width:20px;padding:0 5px;border-radius:9px;background:var(--mark);color:#fff;font-size:11px;line-height:16px;text-align:center;font-variant-numeric:tabular-nums}
.fig{margin:0 0 14px;border:1px solid var(--line);border-radius:8px;padding:10px 12px 8px;break-inside:avoid;min-width:0}
.fig figcaption p{margin:2px 0 4px;color:var(--muted);font-size:12.5px}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:0 14px}
svg.chart{display:block;width:100%;height:auto;overflow:visible}
svg.chart text{fill:var(--muted)}
svg.chart .grid line{stroke:var(--grid)}
svg.chart .grid line.v{stroke-dasharray:2 4}
svg.chart .markers line{stroke:var(--mark)}
svg.chart .badge rect{fill:var(--mark)}
svg.chart .badge text{fill:#fff}
svg.chart .badge{cursor:help}
.legend{list-style:none;display:flex;flex-wrap:wrap;gap:3px 14px;margin:6px 0 0;padding:0;font-size:12.5px}
.legend li{display:flex;align-items:center;gap:5px}
.legend li[data-k]{cursor:pointer}
.legend li.run{color:var(--muted)}
.fig.focus path.series,.fig.focus path.raw{opacity:.13}
.fig.focus path.series.hl{opacity:1;stroke-width:2.8}
.fig.focus path.raw.hl{opacity:1}
.tablewrap{overflow-x:auto;margin:0 0 6px}
table{border-collapse:collapse;min-width:min(100%,640px);font-size:13px;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;font-size:14px;padding:12px 0 6px}
th,td{padding:4px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-weight:600;background:var(--card);white-space:nowrap}
td.num,th.num{text-align:right;white-space:nowrap}
tbody tr:hover{background:var(--card)}
p.note{color:var(--muted);font-size:12.5px;margin:4px 0 12px}
.nodata{color:var(--muted);font-size:13px}
footer{color:var(--muted);font-size:12px;margin-top:34px;border-top:1px solid var(--line);padding-top:8px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em}
@media print{
 @page{size:A4 landscape;margin:10mm}
 :root{--bg:#fff;--fg:#000;--muted:#444;--line:#ccc;--card:#f2f2f2;--grid:#e4e4e4;--mark:#444}
 body{font-size:11px;-webkit-print-color-adjust:exact;print-color-adjust:exact}
 main{max-width:none;padding:0}
 nav{display:none}
 h2{break-after:avoid}
 .fig,tr,.card{break-inside:avoid}
 .tablewrap{overflow:visible}
}
"#;

const SCRIPT: &str = r#"
document.querySelectorAll('figure.fig').forEach(function (f) {
  f.querySelectorAll('.legend li[data-k]').forEach(function (li) {
    li.addEventListener('mouseenter', function () {
      f.classList.add('focus');
      f.querySelectorAll('path[data-k="' + li.dataset.k + '"]').forEach(function (p) { p.classList.add('hl'); });
    });
    li.addEventListener('mouseleave', function () {
      f.classList.remove('focus');
      f.querySelectorAll('path.hl').forEach(function (p) { p.classList.remove('hl'); });
    });
  });
});
"#;

/// Renders the whole page.
pub fn render(input: &[(&str, &Recording)], extras: &ReportExtras) -> String {
    let runs: Vec<Run> = input.iter().map(|(l, r)| Run::new(l, r)).collect();
    let title = extras
        .title
        .clone()
        .or_else(|| runs.first().map(|r| r.rec.scenario.clone()))
        .unwrap_or_else(|| "no run".to_owned());

    let mut h = String::with_capacity(256 * 1024);
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="stormbreak-report {}">
<link rel="icon" href="data:,">
<title>{} · Stormbreak report</title>
<style>{CSS}</style></head>
<body><main>
"#,
        env!("CARGO_PKG_VERSION"),
        escape(&title)
    );

    header(&mut h, &runs, &title, extras);
    if runs.is_empty() || runs.iter().all(|r| r.rec.intervals() == 0) {
        h.push_str(r#"<p class="nodata">Nothing was recorded: no interval to chart.</p>"#);
        tables(&mut h, &runs, extras);
        footer(&mut h);
        return h;
    }

    let origin = runs[0].rec.clock_origin_s;
    let end = runs.iter().map(Run::duration_s).fold(0.0, f64::max);
    let actions = charts::actions(&runs);
    let markers = charts::markers(&actions, &runs, origin);
    let frame = Frame {
        x_domain: (0.0, end),
        clock_origin_s: origin,
        markers: &markers,
    };

    key_figures(&mut h, &runs);
    timeline(&mut h, &runs, &actions, origin);
    let mut empty: Vec<String> = Vec::new();

    h.push_str(r#"<h2 id="storm">The storm</h2>"#);
    for f in [
        load_figure(&runs, &frame),
        error_rate_figure(&runs, &frame),
        amplification_figure(&runs, &frame),
    ] {
        emit(&mut h, &f, &runs, &mut empty);
    }

    h.push_str(r#"<h2 id="routes">Per route: demand, offered load and goodput</h2>"#);
    let _ = write!(
        h,
        r#"<p class="note">First attempts are the clients' demand; all attempts add every retry (their ratio is the amplification); goodput is the successful attempts. Per second.</p>{}"#,
        charts::legend_html(
            &[
                (0, DEMAND, "demand (first attempts/s)".into()),
                (1, OFFERED, "offered (all attempts/s)".into()),
                (2, GOODPUT, "goodput (successes/s)".into()),
            ],
            &[],
            &runs
        )
    );
    h.push_str(r#"<div class="grid2">"#);
    for f in route_panels(&runs, &frame) {
        emit(&mut h, &f, &runs, &mut empty);
    }
    h.push_str("</div>");

    h.push_str(r#"<h2 id="latency">Latency of successful attempts</h2><div class="grid2">"#);
    for (q, name) in [(2, "p99"), (0, "p50")] {
        emit(
            &mut h,
            &latency_figure(&runs, &frame, q, name),
            &runs,
            &mut empty,
        );
    }
    h.push_str("</div>");

    let queued = job_wait_figure(&runs, &frame);
    if queued.chart.has_data() {
        h.push_str(r#"<h2 id="jobs">Job queues</h2>"#);
        h.push_str(&queued.to_html(&runs));
    }

    h.push_str(r#"<h2 id="saturation">Saturation and capacity</h2>"#);
    for f in [
        saturation_figure(&runs, &frame),
        utilisation_figure(&runs, &frame),
        replicas_figure(&runs, &frame),
    ] {
        emit(&mut h, &f, &runs, &mut empty);
    }
    if !empty.is_empty() {
        let _ = write!(
            h,
            r#"<p class="nodata">No data to chart for: {}.</p>"#,
            escape(&empty.join("; "))
        );
    }

    tables(&mut h, &runs, extras);
    footer(&mut h);
    h
}

/// A figure, or its title in the "no data" list when nothing can be drawn.
fn emit(h: &mut String, f: &Figure, runs: &[Run], empty: &mut Vec<String>) {
    if f.chart.has_data() {
        h.push_str(&f.to_html(runs));
    } else {
        empty.push(f.title.clone());
    }
}

fn footer(h: &mut String) {
    let _ = write!(
        h,
        r#"<footer>Generated by stormbreak-report {}. Times are the end of each recording interval, as in <code>timeseries.csv</code>; the files of a run directory are described in <code>docs/outputs.md</code>.</footer>
</main><script>{SCRIPT}</script></body></html>
"#,
        env!("CARGO_PKG_VERSION")
    );
}

fn header(h: &mut String, runs: &[Run], title: &str, extras: &ReportExtras) {
    let _ = write!(h, "<header><h1>{}</h1>", escape(title));
    if let Some(d) = &extras.description {
        let _ = write!(h, r#"<p class="desc">{}</p>"#, escape(d));
    }
    if let Some(first) = runs.first() {
        let rec = first.rec;
        let start = rec.clock_origin_s as f64;
        let end = runs.iter().map(Run::duration_s).fold(0.0, f64::max);
        let seconds = start % 60.0 != 0.0 || end % 60.0 != 0.0;
        let _ = write!(
            h,
            r#"<p class="meta">Clock <b>{} → {}</b> · duration <b>{}</b> · interval <b>{}</b></p>"#,
            fmt_clock(start, seconds),
            fmt_clock(start + end, seconds),
            human_duration(end),
            human_duration(first.dt),
        );
        h.push_str(r#"<ul class="runs">"#);
        for (i, r) in runs.iter().enumerate() {
            let style = if runs.len() > 1 {
                charts::swatch("currentColor", charts::dash(i))
            } else {
                String::new()
            };
            let _ = write!(
                h,
                r#"<li>{style}<span><b>{}</b> — scenario <code>{}</code>, seed {}, scale {}, {} attempts simulated</span></li>"#,
                escape(r.label),
                escape(&r.rec.scenario),
                r.rec.seed,
                r.rec.scale,
                fmt_int(r.rec.attempts),
            );
        }
        h.push_str("</ul>");
    }
    h.push_str(
        r##"<nav><a href="#storm">Storm</a><a href="#routes">Routes</a><a href="#latency">Latency</a><a href="#saturation">Saturation</a><a href="#tables">Tables</a></nav></header>"##,
    );
}

/// `12 345 678`, grouped with narrow no-break spaces.
fn fmt_int(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202F}');
        }
        out.push(c);
    }
    out
}

/// The highest finite value of `f` over entities and intervals, with where
/// and when.
fn peak<'a, T>(
    entities: impl Iterator<Item = (&'a str, T)>,
    len: impl Fn(&T) -> usize,
    f: impl Fn(&T, usize) -> f64,
) -> Option<(f64, &'a str, usize)> {
    let mut best: Option<(f64, &str, usize)> = None;
    for (name, e) in entities {
        for i in 0..len(&e) {
            let v = f(&e, i);
            if v.is_finite() && best.is_none_or(|b| v > b.0) {
                best = Some((v, name, i));
            }
        }
    }
    best
}

/// The trailing window a run's route figures are judged over: the whole
/// intervals that fit in the headline's 5 minutes, as the error-rate and
/// amplification charts draw them and `stormbreak replay` judges paths.
fn headline_window(run: &Run) -> usize {
    charts::window_intervals(run.rec.interval)
}

/// "trailing 5-min window (30 intervals of 10 s)", or "per interval of
/// 5 min" when one interval fills the window: what a card or table says its
/// figure is taken over.
fn window_words(run: &Run) -> String {
    let w = headline_window(run);
    if w > 1 {
        format!(
            "trailing 5-min window ({})",
            charts::window_phrase(w, run.dt)
        )
    } else {
        format!("per interval of {}", human_duration(run.dt))
    }
}

/// Route `r`'s error rate over the headline window, one value per interval.
fn windowed_error_rate(run: &Run, r: &stormbreak_sim::record::RouteSeries) -> Vec<f64> {
    charts::trailing_error_rate(r, headline_window(run))
}

/// Route `r`'s amplification over the headline window, one value per
/// interval.
fn windowed_amplification(run: &Run, r: &stormbreak_sim::record::RouteSeries) -> Vec<f64> {
    charts::trailing_amplification(r, headline_window(run))
}

/// The highest finite value among named series, with where and when.
fn highest<'a>(v: &'a [(&'a str, Vec<f64>)]) -> Option<(f64, &'a str, usize)> {
    peak(v.iter().map(|(n, s)| (*n, s)), |s| s.len(), |s, i| s[i])
}

/// Key figures: each card is taken over the same window as the chart it
/// summarises and says which (the error rate and amplification over the
/// headline's trailing 5-minute window, saturation per interval), so a
/// card can never read 100 % for one 10-second interval while the table
/// and the chart say 21 %.
fn key_figures(h: &mut String, runs: &[Run]) {
    h.push_str(r#"<h2 id="key">Key figures</h2>"#);
    for (ri, run) in runs.iter().enumerate() {
        let rec = run.rec;
        let origin = rec.clock_origin_s;
        if runs.len() > 1 {
            let _ = write!(
                h,
                r#"<div class="runrow">{}{}</div>"#,
                charts::swatch("currentColor", charts::dash(ri)),
                escape(run.label)
            );
        }
        h.push_str(r#"<div class="cards">"#);
        let window = window_words(run);
        let errors: Vec<(&str, Vec<f64>)> = rec
            .routes
            .iter()
            .map(|r| (r.name.as_str(), windowed_error_rate(run, r)))
            .collect();
        let amplifications: Vec<(&str, Vec<f64>)> = rec
            .routes
            .iter()
            .map(|r| (r.name.as_str(), windowed_amplification(run, r)))
            .collect();
        let when = |i: usize| charts::clock(origin, run.t(i), run.dt);
        let card = |h: &mut String, k: &str, v: String, s: String, bad: bool| {
            let _ = write!(
                h,
                r#"<div class="card{}"><div class="k">{}</div><div class="v">{}</div><div class="s">{}</div></div>"#,
                if bad { " bad" } else { "" },
                escape(k),
                escape(&v),
                escape(&s)
            );
        };
        match highest(&errors) {
            Some((0.0, _, _)) => card(
                h,
                "Peak error rate",
                "0%".into(),
                format!("no attempt failed · {window}"),
                false,
            ),
            Some((v, name, i)) => card(
                h,
                "Peak error rate",
                fmt_value(v, Unit::Fraction),
                format!("{name} at {} · {window}", when(i)),
                v >= DEGRADED_ERROR_RATE,
            ),
            None => card(
                h,
                "Peak error rate",
                "–".into(),
                "nothing answered".into(),
                false,
            ),
        }
        match highest(&amplifications) {
            Some((v, name, i)) => card(
                h,
                "Peak amplification",
                fmt_value(v, Unit::Factor),
                format!("attempts per request, {name} at {} · {window}", when(i)),
                v >= 2.0,
            ),
            None => card(
                h,
                "Peak amplification",
                "–".into(),
                "no requests".into(),
                false,
            ),
        }
        let comps = || {
            rec.components
                .iter()
                .filter(|c| has_limit(c))
                .map(|c| (c.name.as_str(), c))
        };
        match peak(comps(), |c| c.limit.len(), |c, i| saturation(c, i)) {
            Some((v, name, i)) => card(
                h,
                "Peak saturation",
                fmt_value(v, Unit::Fraction),
                format!(
                    "in-flight / limit, {name} at {} · at an interval's end, every {}",
                    when(i),
                    human_duration(run.dt)
                ),
                v >= 0.999,
            ),
            None => card(
                h,
                "Peak saturation",
                "–".into(),
                "no limits recorded".into(),
                false,
            ),
        }
        let still: Vec<&str> = errors
            .iter()
            .filter(|(_, e)| e.last().is_some_and(|&v| v >= DEGRADED_ERROR_RATE))
            .map(|(n, _)| *n)
            .collect();
        card(
            h,
            "Degraded at the end",
            format!("{} of {}", still.len(), rec.routes.len()),
            if still.is_empty() {
                format!(
                    "no route at or above {} errors over the last {window}",
                    fmt_value(DEGRADED_ERROR_RATE, Unit::Fraction)
                )
            } else {
                format!("routes: {} · last {window}", still.join(", "))
            },
            !still.is_empty(),
        );
        h.push_str("</div>");
    }
}

fn timeline(h: &mut String, runs: &[Run], actions: &[Action], origin: u64) {
    h.push_str(r#"<h2 id="timeline">Timeline</h2>"#);
    if actions.is_empty() {
        h.push_str(r#"<p class="nodata">No timeline actions were applied.</p>"#);
        return;
    }
    h.push_str(r#"<ol class="timeline">"#);
    for (i, a) in actions.iter().enumerate() {
        let which = if runs.len() > 1 && a.runs.len() < runs.len() {
            let labels: Vec<&str> = a.runs.iter().map(|&r| runs[r].label).collect();
            format!(
                r#" <span class="meta">({})</span>"#,
                escape(&labels.join(", "))
            )
        } else {
            String::new()
        };
        let _ = write!(
            h,
            r#"<li><span class="n">{}</span><time>{}</time><span>{}{which}</span></li>"#,
            i + 1,
            fmt_clock(origin as f64 + a.at_s, true),
            escape(&a.what)
        );
    }
    h.push_str("</ol>");
}

fn sum_routes(
    run: &Run,
    n: usize,
    f: impl Fn(&stormbreak_sim::record::RouteSeries, usize) -> f64,
) -> Vec<(f64, f64)> {
    run.series(n, |i| {
        run.rec
            .routes
            .iter()
            .map(|r| f(r, i))
            .filter(|v| v.is_finite())
            .sum::<f64>()
            / run.dt
    })
}

fn load_figure(runs: &[Run], frame: &Frame) -> Figure {
    let mut chart = frame.chart(
        Size::Wide,
        ScaleKind::Linear,
        Unit::Rate,
        "Offered load against goodput, all routes",
    );
    for (ri, run) in runs.iter().enumerate() {
        let n = run.rec.intervals();
        let suffix = if runs.len() > 1 {
            format!(" — {}", run.label)
        } else {
            String::new()
        };
        for (k, colour, name, points) in [
            (
                0,
                DEMAND,
                "demand (first attempts/s)",
                sum_routes(run, n, |r, i| at_u(&r.first_attempts, i)),
            ),
            (
                1,
                OFFERED,
                "offered (all attempts/s)",
                sum_routes(run, n, |r, i| at_u(&r.attempts, i)),
            ),
            (
                2,
                GOODPUT,
                "goodput (successes/s)",
                sum_routes(run, n, |r, i| at_u(&r.successes, i)),
            ),
        ] {
            chart.lines.push(Line {
                key: k,
                colour,
                dash: charts::dash(ri),
                stroke: Stroke::Normal,
                title: format!("{name}{suffix}"),
                points,
            });
        }
    }
    Figure {
        id: "fig-load".into(),
        title: "Offered load against goodput".into(),
        caption: "Summed over all routes (a gateway's dependency calls, such as auth, count on their own route). A storm shows as offered load far above demand while goodput falls.".into(),
        chart,
        legend: vec![
            (0, DEMAND, "demand (first attempts/s)".into()),
            (1, OFFERED, "offered (all attempts/s)".into()),
            (2, GOODPUT, "goodput (successes/s)".into()),
        ],
        strokes: Vec::new(),
    }
}

fn route_names(runs: &[Run]) -> Vec<String> {
    charts::union_names(runs, |rec| {
        rec.routes.iter().map(|r| r.name.as_str()).collect()
    })
}

/// A figure of one line per entity (route or component) and run, coloured
/// by the entity's place in `order`, with the entity legend: what most
/// figures on the page are.
struct EntityFigure<'a> {
    id: String,
    title: String,
    caption: &'a str,
    /// The chart's own label (its accessible name).
    label: String,
    size: Size,
    kind: ScaleKind,
    unit: Unit,
    names: &'a [String],
    order: &'a [String],
}

impl EntityFigure<'_> {
    fn build(
        self,
        runs: &[Run],
        frame: &Frame,
        values: impl Fn(&Run, &str) -> Option<Vec<(f64, f64)>>,
    ) -> Figure {
        let mut chart = frame.chart(self.size, self.kind, self.unit, &self.label);
        let order = Order::new(self.order);
        chart.lines = entity_lines(runs, self.names, &order, values, self.unit);
        Figure {
            id: self.id,
            title: self.title,
            caption: self.caption.to_owned(),
            chart,
            legend: entity_legend(self.names, &order),
            strokes: Vec::new(),
        }
    }
}

/// Lines of a per-route ratio over the headline window (solid), with its
/// raw per-interval value faint behind: at a 10 s interval and a small
/// scale a route answers a handful of attempts per interval, and its raw
/// ratio alone is a band of noise. Also whether any run was smoothed (a
/// window of one interval is the raw value: nothing to draw behind it) and
/// how the window reads.
struct WindowedLines {
    lines: Vec<Line>,
    smoothed: bool,
    window: String,
}

fn windowed_lines(
    runs: &[Run],
    names: &[String],
    order: &Order,
    windowed: impl Fn(&Run, &stormbreak_sim::record::RouteSeries) -> Vec<f64>,
    raw: impl Fn(&stormbreak_sim::record::RouteSeries, usize) -> f64,
    unit: Unit,
) -> WindowedLines {
    let windows: Vec<usize> = runs.iter().map(headline_window).collect();
    let smoothed = windows.iter().any(|&w| w > 1);
    let mut lines = Vec::new();
    if smoothed {
        lines = charts::styled_entity_lines(
            runs,
            names,
            order,
            |run: &Run, name: &str| {
                let r = run.route(name).filter(|_| headline_window(run) > 1)?;
                Some(run.series(route_len(r), |i| raw(r, i)))
            },
            unit,
            Stroke::Faint,
            ", raw",
        );
    }
    lines.extend(charts::styled_entity_lines(
        runs,
        names,
        order,
        |run: &Run, name: &str| {
            let v = windowed(run, run.route(name)?);
            Some(run.series(v.len(), |i| v[i]))
        },
        unit,
        Stroke::Normal,
        if smoothed { ", 5-min window" } else { "" },
    ));
    let window = match (runs.first(), windows.first()) {
        (Some(run), Some(&w)) if windows.iter().all(|&x| x == w) => {
            charts::window_phrase(w, run.dt)
        }
        _ => "the whole intervals that fit in 5 minutes, per run".to_owned(),
    };
    WindowedLines {
        lines,
        smoothed,
        window,
    }
}

/// The legend entries naming the two strokes of a smoothed figure.
fn window_strokes(smoothed: bool) -> Vec<(Stroke, String)> {
    if smoothed {
        vec![
            (Stroke::Normal, "5-min window".into()),
            (Stroke::Faint, "raw, per interval".into()),
        ]
    } else {
        Vec::new()
    }
}

/// The error rate over the trailing 5-minute window the headline figures
/// use, with the raw per-interval rate faint behind it.
fn error_rate_figure(runs: &[Run], frame: &Frame) -> Figure {
    let names = route_names(runs);
    let order = Order::new(&names);
    let mut chart = frame.chart(
        Size::Wide,
        ScaleKind::Linear,
        Unit::Fraction,
        "Error rate per route over a trailing 5-minute window, raw per-interval rate faint behind",
    );
    let w = windowed_lines(
        runs,
        &names,
        &order,
        windowed_error_rate,
        error_rate,
        Unit::Fraction,
    );
    chart.lines = w.lines;
    let caption = if w.smoothed {
        format!(
            "Failed attempts over answered attempts (failed + successful), every cause counted: refusals, timeouts, resets, failed dependencies, shedding. Solid: over the trailing 5-minute window the headline figures use ({}); faint: each interval on its own.",
            w.window
        )
    } else {
        "Failed attempts over answered attempts (failed + successful) in each interval, every cause counted: refusals, timeouts, resets, failed dependencies, shedding. An interval is as long as the headline figures' 5-minute window, or longer.".to_owned()
    };
    Figure {
        id: "fig-errors".into(),
        title: if w.smoothed {
            "Error rate per route (5-min window)".into()
        } else {
            "Error rate per route".into()
        },
        caption,
        chart,
        legend: entity_legend(&names, &order),
        strokes: window_strokes(w.smoothed),
    }
}

/// Amplification over the same trailing window as the error rate, raw
/// per-interval value faint behind: an interval's attempts include retries
/// of requests started in earlier intervals, so the raw ratio can read
/// above the clients' attempts per request, which the window's cannot for
/// long.
fn amplification_figure(runs: &[Run], frame: &Frame) -> Figure {
    let names = route_names(runs);
    let order = Order::new(&names);
    let mut chart = frame.chart(
        Size::Wide,
        ScaleKind::Linear,
        Unit::Factor,
        "Amplification per route over a trailing 5-minute window, raw per-interval value faint behind",
    );
    let w = windowed_lines(
        runs,
        &names,
        &order,
        windowed_amplification,
        amplification,
        Unit::Factor,
    );
    chart.lines = w.lines;
    chart.reference = Some(1.0);
    let caption = if w.smoothed {
        format!(
            "All attempts over first attempts: 1× means no retries; the dotted line marks 1×. Solid: over the trailing 5-minute window the headline figures use ({}); faint: each interval on its own, which counts retries of requests started in earlier intervals and so can read above the attempts a client makes per request.",
            w.window
        )
    } else {
        "All attempts over first attempts in each interval: 1× means no retries; the dotted line marks 1×. An interval is as long as the headline figures' 5-minute window, or longer.".to_owned()
    };
    Figure {
        id: "fig-amplification".into(),
        title: if w.smoothed {
            "Amplification per route (5-min window)".into()
        } else {
            "Amplification per route".into()
        },
        caption,
        chart,
        legend: entity_legend(&names, &order),
        strokes: window_strokes(w.smoothed),
    }
}

fn route_panels(runs: &[Run], frame: &Frame) -> Vec<Figure> {
    let names = route_names(runs);
    // A lone panel spans the page: draw it at full width, not stretched.
    let size = if names.len() == 1 {
        Size::Wide
    } else {
        Size::Half
    };
    names
        .into_iter()
        .enumerate()
        .map(|(k, name)| {
            let mut chart = frame.chart(
                size,
                ScaleKind::Linear,
                Unit::Rate,
                &format!("Route {name}: demand, offered load and goodput"),
            );
            let mut caption = Vec::new();
            for (ri, run) in runs.iter().enumerate() {
                let Some(r) = run.route(&name) else {
                    continue;
                };
                let n = route_len(r);
                let suffix = if runs.len() > 1 {
                    format!(" — {}", run.label)
                } else {
                    String::new()
                };
                for (key, colour, what, v) in [
                    (0, DEMAND, "demand", &r.first_attempts),
                    (1, OFFERED, "offered", &r.attempts),
                    (2, GOODPUT, "goodput", &r.successes),
                ] {
                    chart.lines.push(Line {
                        key,
                        colour,
                        dash: charts::dash(ri),
                        stroke: Stroke::Normal,
                        title: format!("{name} {what}{suffix}"),
                        points: run.series(n, |i| at_u(v, i) / run.dt),
                    });
                }
                if let Some(t) = run.route_totals(&name) {
                    let who = if runs.len() > 1 {
                        format!("{}: ", run.label)
                    } else {
                        String::new()
                    };
                    let peak_rate = windowed_error_rate(run, r)
                        .into_iter()
                        .filter(|v| v.is_finite())
                        .fold(0.0, f64::max);
                    caption.push(format!(
                        "{who}amplification {} over the run, peak error rate {} ({})",
                        fmt_value(t.amplification, Unit::Factor),
                        fmt_value(peak_rate, Unit::Fraction),
                        window_words(run)
                    ));
                }
            }
            Figure {
                id: format!("fig-route-{k}"),
                title: name.clone(),
                caption: caption.join(" · "),
                chart,
                legend: Vec::new(),
                strokes: Vec::new(),
            }
        })
        .collect()
}

fn latency_figure(runs: &[Run], frame: &Frame, q: usize, label: &str) -> Figure {
    let names = route_names(runs);
    EntityFigure {
        id: format!("fig-latency-{label}"),
        title: format!("Latency {label}"),
        caption: "Successful attempts only, log scale; gaps are intervals without a success.",
        label: format!("Latency {label} per route"),
        size: Size::Half,
        kind: ScaleKind::Log,
        unit: Unit::Millis,
        names: &names,
        order: &names,
    }
    .build(runs, frame, |run, name| {
        let r = run.route(name)?;
        Some(run.series(route_len(r), |i| latency(r, i, q)))
    })
}

/// Routes whose clients queue jobs (`workers`): how long the oldest job
/// had waited. Absent from the page when no route has a job queue.
fn job_wait_figure(runs: &[Run], frame: &Frame) -> Figure {
    let names = charts::union_names(runs, |rec| {
        rec.routes
            .iter()
            .filter(|r| !r.job_wait_s.is_empty())
            .map(|r| r.name.as_str())
            .collect()
    });
    EntityFigure {
        id: "fig-job-wait".into(),
        title: "Longest job wait".into(),
        caption: "The oldest job still waiting for a worker, or the longest wait of a job dispatched, per interval: a backlog delays jobs without failing them.",
        label: "Longest job wait per route".into(),
        size: Size::Wide,
        kind: ScaleKind::Linear,
        unit: Unit::Millis,
        names: &names,
        order: &names,
    }
    .build(runs, frame, |run, name| {
        let r = run.route(name).filter(|r| !r.job_wait_s.is_empty())?;
        Some(run.series(r.job_wait_s.len(), |i| r.job_wait_s[i] * 1000.0))
    })
}

fn saturation_figure(runs: &[Run], frame: &Frame) -> Figure {
    let names = charts::union_names(runs, |rec| {
        rec.components
            .iter()
            .filter(|c| has_limit(c))
            .map(|c| c.name.as_str())
            .collect()
    });
    let mut chart = frame.chart(
        Size::Wide,
        ScaleKind::Linear,
        Unit::Fraction,
        "Saturation per component",
    );
    chart.reference = Some(1.0);
    chart.y_cap = None;
    let order_names = component_order(runs);
    let order = Order::new(&order_names);
    chart.lines = entity_lines(
        runs,
        &names,
        &order,
        |run, name| {
            let c = run.component(name)?;
            Some(run.series(c.limit.len(), |i| saturation(c, i)))
        },
        Unit::Fraction,
    );
    let legend = names
        .iter()
        .map(|n| {
            let k = order.of(n);
            let kind =
                runs.iter()
                    .find_map(|r| r.component(n))
                    .map_or("", |c| match c.kind.as_str() {
                        "lb" => " (LB flows)",
                        "service" => " (sidecar or workers)",
                        _ => "",
                    });
            (k, charts::colour(k), format!("{n}{kind}"))
        })
        .collect();
    Figure {
        id: "fig-saturation".into(),
        title: "Saturation: in-flight over limit".into(),
        caption: "Load balancers: flows held over the running nodes' flow limit. Services: sidecar in-flight over the sidecar concurrency limit (app workers when there is no sidecar). The dotted line is 100 %. A sidecar pinned at 100 % while app utilisation stays low is the autoscaler's blind spot.".into(),
        chart,
        legend,
        strokes: Vec::new(),
    }
}

/// Components that can be charted (gateways record no gauges), in order of
/// first appearance: their colours, the same on every chart.
fn component_order(runs: &[Run]) -> Vec<String> {
    charts::union_names(runs, |rec| {
        rec.components
            .iter()
            .filter(|c| c.kind != "gateway")
            .map(|c| c.name.as_str())
            .collect()
    })
}

fn service_names(runs: &[Run]) -> Vec<String> {
    charts::union_names(runs, |rec| {
        rec.components
            .iter()
            .filter(|c| c.kind == "service")
            .map(|c| c.name.as_str())
            .collect()
    })
}

fn utilisation_figure(runs: &[Run], frame: &Frame) -> Figure {
    let names = service_names(runs);
    let order = component_order(runs);
    EntityFigure {
        id: "fig-utilisation".into(),
        title: "App utilisation".into(),
        caption: "Busy workers over workers of the app containers, averaged over each interval: what a CPU-based autoscaler sees.",
        label: "App utilisation per service".into(),
        size: Size::Wide,
        kind: ScaleKind::Linear,
        unit: Unit::Fraction,
        names: &names,
        order: &order,
    }
    .build(runs, frame, |run, name| {
        let c = run.component(name)?;
        Some(run.series(c.app_utilisation.len(), |i| at_f(&c.app_utilisation, i)))
    })
}

fn replicas_figure(runs: &[Run], frame: &Frame) -> Figure {
    let varies = |c: &stormbreak_sim::record::ComponentSeries| {
        c.kind != "gateway"
            && c.replicas
                .first()
                .is_some_and(|f| c.replicas.iter().any(|r| r != f))
    };
    let mut names = charts::union_names(runs, |rec| {
        rec.components
            .iter()
            .filter(|c| varies(c))
            .map(|c| c.name.as_str())
            .collect()
    });
    let caption = if names.is_empty() {
        names = service_names(runs);
        "No replica count changed during the run; every service is shown."
    } else {
        "Ready pods of services and running nodes of load balancers, for those whose count changed (autoscaled services, paused nodes)."
    };
    let order = component_order(runs);
    EntityFigure {
        id: "fig-replicas".into(),
        title: "Replicas".into(),
        caption,
        label: "Replicas".into(),
        size: Size::Wide,
        kind: ScaleKind::Linear,
        unit: Unit::Count,
        names: &names,
        order: &order,
    }
    .build(runs, frame, |run, name| {
        let c = run.component(name)?;
        Some(run.series(c.replicas.len(), |i| at_f(&c.replicas, i)))
    })
}

// ---- tables ---------------------------------------------------------------

fn is_numeric(cell: &str) -> bool {
    let mut c = cell
        .trim_start_matches(['+', '-', '−', '≈', '~', '<', '>', '≤', '≥', ' '])
        .chars();
    c.next().is_some_and(|c| c.is_ascii_digit())
}

/// A table as HTML; numeric-looking cells are right-aligned.
pub fn table_html(t: &Table) -> String {
    let mut s = String::from(r#"<div class="tablewrap"><table>"#);
    let _ = write!(s, "<caption>{}</caption><thead><tr>", escape(&t.title));
    let width = t
        .rows
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(t.columns.len());
    let numeric_col: Vec<bool> = (0..width)
        .map(|j| {
            let cells: Vec<&str> = t
                .rows
                .iter()
                .filter_map(|r| r.get(j).map(String::as_str))
                .filter(|c| !c.is_empty() && *c != "–" && *c != "-")
                .collect();
            !cells.is_empty() && cells.iter().all(|c| is_numeric(c))
        })
        .collect();
    let class = |numeric: bool| if numeric { r#" class="num""# } else { "" };
    for (j, &numeric) in numeric_col.iter().enumerate() {
        let name = t.columns.get(j).map_or("", String::as_str);
        let _ = write!(s, "<th{}>{}</th>", class(numeric), escape(name));
    }
    s.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        s.push_str("<tr>");
        for (j, &numeric) in numeric_col.iter().enumerate() {
            let cell = row.get(j).map_or("", String::as_str);
            let _ = write!(s, "<td{}>{}</td>", class(numeric), escape(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    if let Some(n) = &t.note {
        let _ = write!(s, r#"<p class="note">{}</p>"#, escape(n));
    }
    s
}

fn tables(h: &mut String, runs: &[Run], extras: &ReportExtras) {
    h.push_str(r#"<h2 id="tables">Tables</h2>"#);
    if !runs.is_empty() {
        h.push_str(&table_html(&headline_table(runs)));
    }
    for t in &extras.tables {
        h.push_str(&table_html(t));
    }
    if !runs.is_empty() {
        h.push_str(&table_html(&component_table(runs)));
    }
}

/// Whole-run figures per route and run, with when each route was degraded.
pub fn headline_table(runs: &[Run]) -> Table {
    let multi = runs.len() > 1;
    let mut columns: Vec<String> = vec!["route".into()];
    if multi {
        columns.push("run".into());
    }
    columns.extend(
        [
            "requests",
            "attempts",
            "amplification",
            "successes",
            "failed",
            "peak error rate",
            "degraded from",
            "recovered at",
        ]
        .map(String::from),
    );
    let mut rows = Vec::new();
    for name in route_names(runs) {
        for run in runs {
            let Some(r) = run.route(&name) else {
                continue;
            };
            let Some(t) = run.route_totals(&name) else {
                continue;
            };
            let rates = windowed_error_rate(run, r);
            let n = rates.len();
            let degraded: Vec<usize> = (0..n)
                .filter(|&i| rates[i] >= DEGRADED_ERROR_RATE)
                .collect();
            let peak_rate = rates
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            let when = |i: usize| charts::clock(run.rec.clock_origin_s, run.t(i), run.dt);
            let (from, to) = match (degraded.first(), degraded.last()) {
                (Some(&a), Some(&b)) if b + 1 < n => (when(a), when(b + 1)),
                (Some(&a), Some(_)) => (when(a), "not by the end".into()),
                _ => ("–".into(), "–".into()),
            };
            let mut row = vec![name.clone()];
            if multi {
                row.push(run.label.to_owned());
            }
            row.extend([
                fmt_int(t.first_attempts),
                fmt_int(t.attempts),
                fmt_value(t.amplification, Unit::Factor),
                fmt_int(t.successes),
                fmt_int(t.failed),
                fmt_value(peak_rate, Unit::Fraction),
                from,
                to,
            ]);
            rows.push(row);
        }
    }
    Table {
        title: "Routes: headline figures".into(),
        columns,
        rows,
        note: Some(format!(
            "Requests are first attempts; amplification is attempts over requests, over the whole run. The peak error rate and the degraded times are taken over the {} that the error-rate chart draws and the key figures use: a route is degraded at the end of a window whose error rate is at least {}; \"degraded from\" is the end of the first such window, \"recovered at\" the end of the first window under it after the last one (a window trails its end, so recovery began up to a window earlier).",
            runs.first()
                .map_or_else(|| "trailing 5-min window".to_owned(), window_words),
            fmt_value(DEGRADED_ERROR_RATE, Unit::Fraction)
        )),
    }
}

/// Peaks per component and run.
pub fn component_table(runs: &[Run]) -> Table {
    let multi = runs.len() > 1;
    let mut columns: Vec<String> = vec!["component".into(), "kind".into()];
    if multi {
        columns.push("run".into());
    }
    columns.extend(
        [
            "peak in-flight / limit",
            "peak app utilisation",
            "peak queue",
            "replicas (min–max)",
            "arrivals",
            "rejected",
        ]
        .map(String::from),
    );
    let names = charts::union_names(runs, |rec| {
        rec.components.iter().map(|c| c.name.as_str()).collect()
    });
    let mut rows = Vec::new();
    for name in names {
        for run in runs {
            let Some(c) = run.component(&name) else {
                continue;
            };
            let max = |v: &[f64]| {
                v.iter()
                    .copied()
                    .filter(|x| x.is_finite())
                    .fold(f64::NAN, f64::max)
            };
            let min = |v: &[f64]| {
                v.iter()
                    .copied()
                    .filter(|x| x.is_finite())
                    .fold(f64::NAN, f64::min)
            };
            let sat = (0..c.limit.len())
                .map(|i| saturation(c, i))
                .filter(|x| x.is_finite())
                .fold(f64::NAN, f64::max);
            let service = c.kind == "service";
            let mut row = vec![name.clone(), c.kind.clone()];
            if multi {
                row.push(run.label.to_owned());
            }
            row.extend([
                fmt_value(sat, Unit::Fraction),
                if service {
                    fmt_value(max(&c.app_utilisation), Unit::Fraction)
                } else {
                    "–".into()
                },
                if c.kind == "gateway" {
                    "–".into()
                } else {
                    fmt_value(max(&c.queue), Unit::Count)
                },
                if c.kind == "gateway" || c.replicas.is_empty() {
                    "–".into()
                } else {
                    format!("{}–{}", min(&c.replicas), max(&c.replicas))
                },
                fmt_int(c.arrivals.iter().sum()),
                fmt_int(c.rejected.iter().sum()),
            ]);
            rows.push(row);
        }
    }
    Table {
        title: "Components: peaks and totals".into(),
        columns,
        rows,
        note: Some("Replicas are ready pods for services and running nodes for load balancers; rejected counts refusals (limits, flows, queue timeouts, nothing to send to).".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_detected() {
        assert_eq!(fmt_int(0), "0");
        assert_eq!(fmt_int(1234), "1\u{202F}234");
        assert_eq!(fmt_int(12_345_678), "12\u{202F}345\u{202F}678");
        assert!(is_numeric("20.1%"));
        assert!(is_numeric("-3"));
        assert!(is_numeric("≈ 20%"));
        assert!(is_numeric("~18:03"));
        assert!(!is_numeric("web"));
        assert!(!is_numeric(""));
    }

    #[test]
    fn tables_escape_pad_and_align() {
        let t = Table {
            title: "A & B".into(),
            columns: vec!["name".into(), "value".into(), "extra".into()],
            rows: vec![
                vec!["<x>".into(), "12%".into()],
                vec!["y".into(), "3.5×".into(), "z".into()],
            ],
            note: Some("n < m".into()),
        };
        let html = table_html(&t);
        assert!(html.contains("<caption>A &amp; B</caption>"));
        assert!(html.contains("<td>&lt;x&gt;</td>"));
        assert!(html.contains(r#"<td class="num">12%</td>"#));
        assert!(html.contains(r#"<th class="num">value</th>"#));
        assert_eq!(html.matches("<tr>").count(), 3);
        assert_eq!(html.matches("<td").count(), 6, "short rows are padded");
        assert!(html.contains(r#"<p class="note">n &lt; m</p>"#));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(10.0), "10 s");
        assert_eq!(human_duration(90.0), "1.5 min");
        assert_eq!(human_duration(7.0 * 3600.0 + 47.0 * 60.0), "7 h 47 min");
        assert_eq!(human_duration(3600.0), "1 h");
    }
}

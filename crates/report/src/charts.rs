//! From recordings to charts: the per-interval series the report plots,
//! the entity colours, the run line styles and the action markers.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::output::{RouteTotals, route_totals};
use stormbreak_sim::record::{ComponentSeries, RouteSeries};

use crate::svg::{self, Chart, Line, Marker, ScaleKind, Stroke, Unit, escape, fmt_clock};

/// Colour-blind-safe qualitative palette: Okabe–Ito (without yellow and
/// black), then Paul Tol's darker "muted" colours.
pub const PALETTE: [&str; 12] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#882255", "#117733",
    "#332288", "#999933", "#44AA99", "#AA4499",
];

/// Line style per run: solid, dashed, dotted, dash-dot.
pub const RUN_DASH: [&str; 4] = ["", "7 4", "2 3", "10 3 2 3"];

/// Colours of the three load curves (demand, offered, goodput).
pub const DEMAND: &str = "#0072B2";
/// Offered load (all attempts).
pub const OFFERED: &str = "#D55E00";
/// Goodput (successful attempts).
pub const GOODPUT: &str = "#009E73";

/// Colour of entity `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Line style of run `i`.
pub fn dash(i: usize) -> &'static str {
    RUN_DASH[i % RUN_DASH.len()]
}

/// One run as the charts see it.
pub struct Run<'a> {
    /// Label shown in legends and tables.
    pub label: &'a str,
    /// The recording.
    pub rec: &'a Recording,
    /// Interval length, seconds.
    pub dt: f64,
    /// Whole-run totals, one per route in the recording's order.
    pub totals: Vec<RouteTotals>,
    // Every figure looks entities up by name; a linear search per name
    // made the page quadratic in routes (8 000 routes: minutes).
    routes: HashMap<&'a str, usize>,
    components: HashMap<&'a str, usize>,
}

/// Position of each name, the first one winning when a name repeats (as
/// [`Recording::route`] does).
fn positions<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut map = HashMap::new();
    for (i, n) in names.enumerate() {
        map.entry(n).or_insert(i);
    }
    map
}

impl<'a> Run<'a> {
    /// Wraps a recording, computing its route totals once.
    pub fn new(label: &'a str, rec: &'a Recording) -> Run<'a> {
        Run {
            label,
            rec,
            dt: rec.interval.as_nanos() as f64 / 1e9,
            totals: route_totals(rec),
            routes: positions(rec.routes.iter().map(|r| r.name.as_str())),
            components: positions(rec.components.iter().map(|c| c.name.as_str())),
        }
    }

    /// The route called `name`.
    pub fn route(&self, name: &str) -> Option<&'a RouteSeries> {
        self.routes.get(name).map(|&i| &self.rec.routes[i])
    }

    /// The whole-run totals of the route called `name`.
    pub fn route_totals(&self, name: &str) -> Option<&RouteTotals> {
        self.routes.get(name).and_then(|&i| self.totals.get(i))
    }

    /// The component called `name`.
    pub fn component(&self, name: &str) -> Option<&'a ComponentSeries> {
        self.components.get(name).map(|&i| &self.rec.components[i])
    }

    /// Seconds since the start at the end of interval `i` (as in timeseries.csv).
    pub fn t(&self, i: usize) -> f64 {
        (i + 1) as f64 * self.dt
    }

    /// Simulated length, seconds.
    pub fn duration_s(&self) -> f64 {
        let d = self.rec.duration.as_nanos() as f64 / 1e9;
        if d > 0.0 {
            d
        } else {
            self.rec.intervals() as f64 * self.dt
        }
    }

    /// `(t, f(i))` for every interval `i < n`.
    pub fn series(&self, n: usize, f: impl Fn(usize) -> f64) -> Vec<(f64, f64)> {
        (0..n).map(|i| (self.t(i), f(i))).collect()
    }
}

/// `v[i]` as a float, `NaN` when missing.
pub fn at_u(v: &[u64], i: usize) -> f64 {
    v.get(i).map_or(f64::NAN, |&x| x as f64)
}

/// `v[i]`, `NaN` when missing.
pub fn at_f(v: &[f64], i: usize) -> f64 {
    v.get(i).copied().unwrap_or(f64::NAN)
}

/// Intervals a route recorded.
pub fn route_len(r: &RouteSeries) -> usize {
    r.attempts.len()
}

/// Failed attempts of `r` in interval `i`, `NaN` when missing.
pub fn failed(r: &RouteSeries, i: usize) -> f64 {
    if i < r.errors.len() {
        r.failed(i) as f64
    } else {
        f64::NAN
    }
}

/// Failed / answered attempts; `NaN` when nothing was answered.
pub fn error_rate(r: &RouteSeries, i: usize) -> f64 {
    let f = failed(r, i);
    let answered = f + at_u(&r.successes, i);
    if answered > 0.0 {
        f / answered
    } else {
        f64::NAN
    }
}

/// The window of the headline error rates, nanoseconds: `stormbreak
/// replay` judges a path by its error rate over trailing 5-minute windows.
pub const HEADLINE_WINDOW: Nanos = Nanos::from_secs(5 * 60);

/// Intervals in the headline window: the whole intervals that fit in 5
/// minutes, at least one. The same as `stormbreak_sim::replay::summarize`
/// (which keeps its own copy private).
pub fn window_intervals(interval: Nanos) -> usize {
    usize::try_from(HEADLINE_WINDOW / interval.max(Nanos::NANOSECOND))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Error rate over trailing windows of `w` intervals, one value per
/// interval: failed over answered attempts summed over the window (shorter
/// at the start of the run), as `stormbreak_sim::replay` computes its
/// 5-minute figures. `NaN` (a gap) where nothing was answered in the
/// window, where the simulator's copy says 0.
pub fn trailing_error_rate(r: &RouteSeries, w: usize) -> Vec<f64> {
    trailing_ratio(
        (0..route_len(r)).map(|i| {
            let failed: u128 = r
                .errors
                .get(i)
                .map_or(0, |e| e.iter().map(|&c| c as u128).sum());
            let ok = r.successes.get(i).map_or(0, |&s| s as u128);
            (failed, failed + ok)
        }),
        w,
    )
}

/// Amplification over trailing windows of `w` intervals, one value per
/// interval: all attempts over first attempts summed over the window
/// (shorter at the start of the run). Unlike the per-interval ratio it
/// cannot read above the clients' attempts per request for long: the
/// retries an interval sends belong to requests of the window's earlier
/// intervals, which the window counts too. `NaN` where the window holds
/// no first attempt.
pub fn trailing_amplification(r: &RouteSeries, w: usize) -> Vec<f64> {
    trailing_ratio(
        (0..route_len(r)).map(|i| {
            let attempts = r.attempts.get(i).map_or(0, |&a| a as u128);
            let first = r.first_attempts.get(i).map_or(0, |&f| f as u128);
            (attempts, first)
        }),
        w,
    )
}

/// `Σ num / Σ den` over trailing windows of `w` (at least 1) of `counts`,
/// one value per element; `NaN` where the window's `den` is 0. u128: a sum
/// of u64 counts cannot overflow, even unchecked.
fn trailing_ratio(counts: impl Iterator<Item = (u128, u128)>, w: usize) -> Vec<f64> {
    let w = w.max(1);
    let counts: Vec<(u128, u128)> = counts.collect();
    let (mut num, mut den) = (0u128, 0u128);
    let mut out = Vec::with_capacity(counts.len());
    for i in 0..counts.len() {
        num += counts[i].0;
        den += counts[i].1;
        if i >= w {
            num -= counts[i - w].0;
            den -= counts[i - w].1;
        }
        out.push(if den == 0 {
            f64::NAN
        } else {
            num as f64 / den as f64
        });
    }
    out
}

/// The headline window of a run as a reader should see it named: "30
/// intervals of 10 s"; one interval when intervals are 5 minutes or longer.
pub fn window_phrase(intervals: usize, dt_s: f64) -> String {
    format!(
        "{intervals} interval{} of {}",
        if intervals == 1 { "" } else { "s" },
        human_duration(dt_s)
    )
}

/// `10 s`, `5 min`, `2 h 30 min`: a length of time as it reads best.
pub fn human_duration(s: f64) -> String {
    if s >= 3600.0 {
        let m = (s / 60.0).round() as u64;
        if m.is_multiple_of(60) {
            format!("{} h", m / 60)
        } else {
            format!("{} h {} min", m / 60, m % 60)
        }
    } else if s >= 60.0 {
        format!("{} min", crate::svg::trim_num(s / 60.0, 1))
    } else {
        format!("{} s", crate::svg::trim_num(s, 3))
    }
}

/// All attempts / first attempts; `NaN` without first attempts.
pub fn amplification(r: &RouteSeries, i: usize) -> f64 {
    let first = at_u(&r.first_attempts, i);
    if first > 0.0 {
        at_u(&r.attempts, i) / first
    } else {
        f64::NAN
    }
}

/// Latency percentile `q` (0 = p50, 1 = p90, 2 = p99, 3 = max), `NaN`
/// when no attempt succeeded (an empty histogram records 0).
pub fn latency(r: &RouteSeries, i: usize, q: usize) -> f64 {
    if at_u(&r.successes, i) > 0.0 {
        r.latency_ms.get(i).map_or(f64::NAN, |l| l[q])
    } else {
        f64::NAN
    }
}

/// In-flight / limit; `NaN` while the limit is zero (nothing running).
pub fn saturation(c: &ComponentSeries, i: usize) -> f64 {
    let limit = at_f(&c.limit, i);
    if limit > 0.0 {
        at_f(&c.in_flight, i) / limit
    } else {
        f64::NAN
    }
}

/// Whether a component has a limit worth charting (gateways record none).
pub fn has_limit(c: &ComponentSeries) -> bool {
    c.limit.iter().any(|&l| l > 0.0)
}

/// Names in order of first appearance across runs.
pub fn union_names<'r>(
    runs: &[Run<'r>],
    names: impl Fn(&'r Recording) -> Vec<&'r str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for run in runs {
        for n in names(run.rec) {
            if seen.insert(n) {
                out.push(n.to_owned());
            }
        }
    }
    out
}

/// A timeline action shared by one or more runs.
pub struct Action {
    /// Seconds since the start.
    pub at_s: f64,
    /// Description.
    pub what: String,
    /// Indices of the runs that applied it.
    pub runs: Vec<usize>,
}

/// Actions of all runs in time order, identical ones (same time and text)
/// merged.
pub fn actions(runs: &[Run]) -> Vec<Action> {
    let mut out: Vec<Action> = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        for a in &run.rec.actions {
            let at_s = a.at.as_nanos() as f64 / 1e9;
            match out
                .iter_mut()
                .find(|x| x.what == a.what && (x.at_s - at_s).abs() < 1e-9)
            {
                Some(x) => x.runs.push(ri),
                None => out.push(Action {
                    at_s,
                    what: a.what.clone(),
                    runs: vec![ri],
                }),
            }
        }
    }
    out.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    out
}

/// Clock label of `t` seconds after the run start.
pub fn clock(origin_s: u64, t: f64, dt: f64) -> String {
    let with_seconds = dt.fract() != 0.0 || dt < 60.0 || (origin_s as f64 + t) % 60.0 != 0.0;
    fmt_clock(origin_s as f64 + t, with_seconds)
}

/// Markers for the charts, numbered from 1 like the timeline list.
pub fn markers(actions: &[Action], runs: &[Run], origin_s: u64) -> Vec<Marker> {
    actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut title = format!("{} · {}", fmt_clock(origin_s as f64 + a.at_s, true), a.what);
            if runs.len() > 1 && a.runs.len() < runs.len() {
                let labels: Vec<&str> = a.runs.iter().map(|&r| runs[r].label).collect();
                let _ = write!(title, " ({})", labels.join(", "));
            }
            Marker {
                x: a.at_s,
                label: (i + 1).to_string(),
                title,
            }
        })
        .collect()
}

/// A chart with its heading, explanation and legend.
pub struct Figure {
    /// Anchor id.
    pub id: String,
    /// Heading.
    pub title: String,
    /// One or two sentences on what it shows and what to look for.
    pub caption: String,
    /// The chart.
    pub chart: Chart,
    /// Legend entries: (key, colour, label).
    pub legend: Vec<(usize, &'static str, String)>,
    /// What each kind of line means, when a chart has more than one (e.g.
    /// a windowed rate over its faint raw values).
    pub strokes: Vec<(Stroke, String)>,
}

impl Figure {
    /// The figure as HTML, with its legend (entities by colour, then runs
    /// by line style when there are several).
    pub fn to_html(&self, runs: &[Run]) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<figure class="fig" id="{}"><figcaption><h3>{}</h3><p>{}</p></figcaption>"#,
            escape(&self.id),
            escape(&self.title),
            escape(&self.caption)
        );
        s.push_str(&self.chart.to_svg());
        if !self.legend.is_empty() {
            s.push_str(&legend_html(&self.legend, &self.strokes, runs));
        }
        s.push_str("</figure>");
        s
    }
}

/// A legend: entries by colour, then the kinds of line (`strokes`), then
/// the runs by line style when there are several.
pub fn legend_html(
    entries: &[(usize, &'static str, String)],
    strokes: &[(Stroke, String)],
    runs: &[Run],
) -> String {
    let mut s = String::from(r#"<ul class="legend">"#);
    for (k, c, label) in entries {
        let _ = write!(
            s,
            r#"<li data-k="{k}">{}{}</li>"#,
            swatch(c, ""),
            escape(label)
        );
    }
    for (stroke, label) in strokes {
        let _ = write!(
            s,
            r#"<li class="run">{}{}</li>"#,
            stroke_swatch("currentColor", "", *stroke),
            escape(label)
        );
    }
    if runs.len() > 1 {
        for (i, r) in runs.iter().enumerate() {
            let _ = write!(
                s,
                r#"<li class="run">{}{}</li>"#,
                swatch("currentColor", dash(i)),
                escape(r.label)
            );
        }
    }
    s.push_str("</ul>");
    s
}

/// A short line sample for legends.
pub fn swatch(colour: &str, dash: &str) -> String {
    stroke_swatch(colour, dash, Stroke::Normal)
}

/// A short line sample drawn as a line of that [`Stroke`] is.
pub fn stroke_swatch(colour: &str, dash: &str, stroke: Stroke) -> String {
    let dash = if dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{dash}""#)
    };
    let width = match stroke {
        Stroke::Normal => String::from(r#"stroke-width="2.5""#),
        Stroke::Faint => format!(
            r#"stroke-width="{}" stroke-opacity="{}""#,
            svg::FAINT_WIDTH,
            svg::FAINT_OPACITY
        ),
    };
    format!(
        r#"<svg class="swatch" width="26" height="10" viewBox="0 0 26 10" aria-hidden="true"><line x1="1" y1="5" x2="25" y2="5" stroke="{colour}" {width}{dash}/></svg>"#
    )
}

/// Sizes of the two figure widths.
#[derive(Clone, Copy)]
pub enum Size {
    /// Full width of the page.
    Wide,
    /// Half width (two per row).
    Half,
}

/// Common frame of a chart.
pub struct Frame<'a> {
    /// Time range, seconds since the start.
    pub x_domain: (f64, f64),
    /// Clock of x = 0.
    pub clock_origin_s: u64,
    /// Action markers.
    pub markers: &'a [Marker],
}

impl Frame<'_> {
    /// An empty chart of the given size and scale.
    pub fn chart(&self, size: Size, y_kind: ScaleKind, unit: Unit, label: &str) -> Chart {
        let (width, height) = match size {
            Size::Wide => (1120.0, 300.0),
            Size::Half => (540.0, 240.0),
        };
        Chart {
            width,
            height,
            x_domain: self.x_domain,
            clock_origin_s: self.clock_origin_s,
            y_kind,
            unit,
            reference: None,
            y_cap: if unit == Unit::Fraction {
                Some(1.0)
            } else {
                None
            },
            lines: Vec::new(),
            markers: self.markers.to_vec(),
            label: label.to_owned(),
        }
    }
}

/// The place of each entity in an ordered list of names: its colour and
/// legend key, the same on every chart.
pub struct Order<'a> {
    index: HashMap<&'a str, usize>,
    len: usize,
}

impl<'a> Order<'a> {
    /// The order of `names` (the first place of a repeated name counts).
    pub fn new(names: &'a [String]) -> Order<'a> {
        Order {
            index: positions(names.iter().map(String::as_str)),
            len: names.len(),
        }
    }

    /// Position of `name`; past the end when absent.
    pub fn of(&self, name: &str) -> usize {
        self.index.get(name).copied().unwrap_or(self.len)
    }
}

/// One line per (run, entity): colour by the entity's place in `order`,
/// style by run. `values` gives an entity's points in a run, `None` when
/// the run lacks it.
pub fn entity_lines(
    runs: &[Run],
    names: &[String],
    order: &Order,
    values: impl Fn(&Run, &str) -> Option<Vec<(f64, f64)>>,
    unit: Unit,
) -> Vec<Line> {
    styled_entity_lines(runs, names, order, values, unit, Stroke::Normal, "")
}

/// [`entity_lines`] drawn with `stroke`, `what` following the entity's
/// name in tooltips (e.g. `", raw"`).
pub fn styled_entity_lines(
    runs: &[Run],
    names: &[String],
    order: &Order,
    values: impl Fn(&Run, &str) -> Option<Vec<(f64, f64)>>,
    unit: Unit,
    stroke: Stroke,
    what: &str,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        for name in names {
            let k = order.of(name);
            let Some(points) = values(run, name) else {
                continue;
            };
            let peak = points
                .iter()
                .map(|p| p.1)
                .filter(|v| v.is_finite())
                .fold(f64::NAN, f64::max);
            let run_part = if runs.len() > 1 {
                format!(" — {}", run.label)
            } else {
                String::new()
            };
            lines.push(Line {
                key: k,
                colour: colour(k),
                dash: dash(ri),
                stroke,
                title: format!(
                    "{name}{what}{run_part} (peak {})",
                    svg::fmt_value(peak, unit)
                ),
                points,
            });
        }
    }
    lines
}

/// Legend of entities by colour (their place in `order`).
pub fn entity_legend(names: &[String], order: &Order) -> Vec<(usize, &'static str, String)> {
    names
        .iter()
        .map(|n| {
            let k = order.of(n);
            (k, colour(k), n.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_labels_drop_seconds_on_whole_minutes() {
        assert_eq!(clock(13 * 3600, 28.0 * 60.0, 60.0), "13:28");
        assert_eq!(clock(13 * 3600, 28.0 * 60.0, 10.0), "13:28:00");
        assert_eq!(clock(13 * 3600, 90.0, 60.0), "13:01:30");
    }

    #[test]
    fn the_window_is_the_whole_intervals_in_five_minutes() {
        const S: Nanos = Nanos::SECOND;
        assert_eq!(window_intervals(10 * S), 30);
        assert_eq!(window_intervals(60 * S), 5);
        assert_eq!(window_intervals(120 * S), 2);
        assert_eq!(window_intervals(600 * S), 1);
        assert_eq!(
            window_intervals(Nanos::ZERO),
            usize::try_from(HEADLINE_WINDOW.as_nanos()).unwrap()
        );
    }

    #[test]
    fn trailing_error_rates_sum_counts_over_the_window() {
        // (failed, successes) per interval.
        let intervals = [(1, 1), (0, 2), (2, 0), (0, 0), (0, 0), (0, 0)];
        let mut r = RouteSeries::default();
        for (f, ok) in intervals {
            let mut e = [0; stormbreak_sim::record::Cause::ALL.len()];
            e[0] = f;
            r.errors.push(e);
            r.successes.push(ok);
            r.attempts.push(f + ok);
        }
        let got = trailing_error_rate(&r, 2);
        // The same figures as the simulator's own test of its copy, then a
        // gap once the window holds nothing answered.
        assert_eq!(got[..4], [0.5, 0.25, 0.5, 1.0]);
        assert!(got[4].is_nan() && got[5].is_nan());
        // A window of one interval is the raw rate.
        let raw: Vec<f64> = (0..3).map(|i| error_rate(&r, i)).collect();
        assert_eq!(trailing_error_rate(&r, 1)[..3], raw[..]);
        // A window longer than the run is the run's running rate.
        assert_eq!(trailing_error_rate(&r, 100)[2], 3.0 / 6.0);
    }

    #[test]
    fn palette_and_dashes_cycle() {
        assert_eq!(colour(0), colour(PALETTE.len()));
        assert_ne!(colour(0), colour(1));
        assert_eq!(dash(0), "");
        assert_ne!(dash(1), "");
    }
}

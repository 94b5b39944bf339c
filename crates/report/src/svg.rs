//! Dependency-free SVG line charts: scales, ticks, value formatting,
//! downsampling and escaping.
//!
//! A [`Chart`] is a time axis (seconds since the run started, labelled with
//! the run's wall clock), one y scale (linear or log), lines that may have
//! gaps (`NaN` values), optional vertical markers (the timeline's actions)
//! and an optional horizontal reference line (e.g. 100 % of a limit).
//! Everything is emitted as text; every piece of user text is escaped.

use std::fmt::Write as _;

/// Most points a single line is drawn with, whatever the run's length.
pub const MAX_POINTS: usize = 1500;

/// Escapes text for HTML and SVG, in element content and in quoted
/// attribute values alike.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newline are not allowed in XML.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Linear or logarithmic (base 10) mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleKind {
    /// `v ↦ r0 + (v - d0) / (d1 - d0) · (r1 - r0)`.
    Linear,
    /// The same on `log10(v)`; non-positive values have no position.
    Log,
}

/// A mapping from a data domain to a pixel range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    kind: ScaleKind,
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    /// Linear scale from `domain` onto `range` (a reversed range, as for a
    /// y axis, is fine).
    pub fn linear(domain: (f64, f64), range: (f64, f64)) -> Scale {
        Scale {
            kind: ScaleKind::Linear,
            d0: domain.0,
            d1: domain.1,
            r0: range.0,
            r1: range.1,
        }
    }

    /// Log scale; `domain` must be positive.
    pub fn log(domain: (f64, f64), range: (f64, f64)) -> Scale {
        Scale {
            kind: ScaleKind::Log,
            d0: domain.0.max(f64::MIN_POSITIVE).log10(),
            d1: domain.1.max(f64::MIN_POSITIVE).log10(),
            r0: range.0,
            r1: range.1,
        }
    }

    /// Position of `v`, or `None` when it has none (not finite, or ≤ 0 on
    /// a log scale). A degenerate domain maps everything to the middle.
    pub fn map(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        let v = match self.kind {
            ScaleKind::Linear => v,
            ScaleKind::Log if v > 0.0 => v.log10(),
            ScaleKind::Log => return None,
        };
        let span = self.d1 - self.d0;
        if span == 0.0 || !span.is_finite() {
            return Some((self.r0 + self.r1) / 2.0);
        }
        Some(self.r0 + (v - self.d0) / span * (self.r1 - self.r0))
    }
}

/// A "nice" tick step (1, 2, 2.5 or 5 × 10ⁿ) giving about `target` steps
/// over `span`.
pub fn nice_step(span: f64, target: usize) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick step for an axis in milliseconds: below a second the decimal
/// steps of [`nice_step`]; above, steps a clock reader expects (1, 2, 5,
/// 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6, 12, 24 h), so a
/// three-hour backlog is not ticked every 41.7 minutes.
pub fn nice_millis_step(span: f64, target: usize) -> f64 {
    const SECOND: f64 = 1000.0;
    const MINUTE: f64 = 60.0 * SECOND;
    const HOUR: f64 = 60.0 * MINUTE;
    const STEPS: [f64; 18] = [
        SECOND,
        2.0 * SECOND,
        5.0 * SECOND,
        10.0 * SECOND,
        15.0 * SECOND,
        30.0 * SECOND,
        MINUTE,
        2.0 * MINUTE,
        5.0 * MINUTE,
        10.0 * MINUTE,
        15.0 * MINUTE,
        30.0 * MINUTE,
        HOUR,
        2.0 * HOUR,
        3.0 * HOUR,
        6.0 * HOUR,
        12.0 * HOUR,
        24.0 * HOUR,
    ];
    let raw = span / target.max(1) as f64;
    if !(raw.is_finite() && raw >= SECOND) {
        return nice_step(span, target);
    }
    STEPS
        .into_iter()
        .find(|&s| s >= raw)
        .unwrap_or_else(|| (raw / (24.0 * HOUR)).ceil() * 24.0 * HOUR)
}

/// Linear axis covering `[min, max]`: zero-based when the data are not
/// negative, ends rounded out to whole steps. Returns the domain and ticks.
pub fn linear_ticks(min: f64, max: f64, target: usize) -> ((f64, f64), Vec<f64>) {
    linear_ticks_by(min, max, target, nice_step)
}

/// [`linear_ticks`] with another choice of step (e.g. [`nice_millis_step`]).
pub fn linear_ticks_by(
    min: f64,
    max: f64,
    target: usize,
    nice: fn(f64, usize) -> f64,
) -> ((f64, f64), Vec<f64>) {
    // Far from f64::MAX, so that rounding the ends out to a whole step
    // stays finite (an infinite end made the tick count overflow).
    const LIMIT: f64 = f64::MAX / 16.0;
    let (min, max) = if min.is_finite() && max.is_finite() && min <= max {
        (min.max(-LIMIT), max.min(LIMIT))
    } else {
        (0.0, 1.0)
    };
    let lo0 = min.min(0.0);
    // All zero (or one value): a unit span, so the axis still has ticks.
    let max = if max > lo0 { max } else { lo0 + 1.0 };
    let step = nice(max - lo0, target);
    let lo = (lo0 / step).floor() * step;
    let mut hi = (max / step - 1e-9).ceil() * step;
    if hi <= lo {
        hi = lo + step;
    }
    let n = (((hi - lo) / step).round() as usize).min(1000);
    let ticks = (0..=n).map(|k| lo + k as f64 * step).collect();
    ((lo, hi), ticks)
}

/// Log axis covering `[min, max]` (both positive) in whole decades; ticks
/// at each decade, plus 2× and 5× when there are at most two decades.
pub fn log_ticks(min: f64, max: f64) -> ((f64, f64), Vec<f64>) {
    let (min, max) = if min.is_finite() && max.is_finite() && 0.0 < min && min <= max {
        (min, max)
    } else {
        (1.0, 10.0)
    };
    let e0 = min.log10().floor() as i32;
    let mut e1 = max.log10().ceil() as i32;
    if e1 <= e0 {
        e1 = e0 + 1;
    }
    let mut ticks = Vec::new();
    for e in e0..=e1 {
        let d = 10f64.powi(e);
        ticks.push(d);
        if e1 - e0 <= 2 && e < e1 {
            ticks.push(2.0 * d);
            ticks.push(5.0 * d);
        }
    }
    ((10f64.powi(e0), 10f64.powi(e1)), ticks)
}

/// Clock time of `secs` after midnight: `HH:MM` or `HH:MM:SS`, with a
/// `+Nd` prefix past the first day.
pub fn fmt_clock(secs: f64, with_seconds: bool) -> String {
    let total = if secs.is_finite() {
        secs.max(0.0).round() as u64
    } else {
        0
    };
    let (days, rest) = (total / 86_400, total % 86_400);
    let (h, m, s) = (rest / 3600, rest / 60 % 60, rest % 60);
    let day = if days > 0 {
        format!("+{days}d ")
    } else {
        String::new()
    };
    if with_seconds {
        format!("{day}{h:02}:{m:02}:{s:02}")
    } else {
        format!("{day}{h:02}:{m:02}")
    }
}

/// Time ticks over `[x0, x1]` (seconds since the run began), aligned to the
/// wall clock `origin_s + x`, about `target` of them. Returns (x, label).
pub fn time_ticks(x0: f64, x1: f64, origin_s: u64, target: usize) -> Vec<(f64, String)> {
    const STEPS: [f64; 19] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0, 43200.0, 86400.0, 172800.0,
    ];
    if !(x0.is_finite() && x1.is_finite() && x1 > x0) {
        return Vec::new();
    }
    let span = x1 - x0;
    let target = target.max(2) as f64;
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= target)
        .unwrap_or_else(|| (span / target / 86400.0).ceil() * 86400.0);
    let origin = origin_s as f64;
    let first = ((origin + x0) / step - 1e-9).ceil() * step - origin;
    let mut out = Vec::new();
    let mut k = 0.0;
    loop {
        let x = first + k * step;
        if x > x1 + 1e-9 {
            break;
        }
        out.push((x, fmt_clock(origin + x, step < 60.0)));
        k += 1.0;
    }
    out
}

/// Formats `v` with at most `decimals` decimals, trailing zeros removed.
pub fn trim_num(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    };
    if s == "-0" { "0".to_owned() } else { s }
}

/// What a y value means, for tick labels and tooltips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A plain count (SI suffixes k, M, G).
    Count,
    /// Per second (SI suffixes, `/s` in tooltips).
    Rate,
    /// A fraction, shown as a percentage.
    Fraction,
    /// Milliseconds, shown as ms, s or min.
    Millis,
    /// A multiplier, shown with `×`.
    Factor,
}

fn decimals_for(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) {
        return 0;
    }
    // The fewest decimals that write every multiple of `step` exactly
    // (a 2.5 step needs one more than a 2 step).
    (0..4)
        .find(|&d| {
            let scaled = step * 10f64.powi(d as i32);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(4)
}

fn si_divisor(magnitude: f64) -> (f64, &'static str) {
    let m = magnitude.abs();
    if m >= 1e9 {
        (1e9, "G")
    } else if m >= 1e6 {
        (1e6, "M")
    } else if m >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    }
}

fn fmt_millis(v: f64) -> String {
    if v >= 60_000.0 {
        format!("{} min", trim_num(v / 60_000.0, 1))
    } else if v >= 1000.0 {
        format!("{} s", trim_num(v / 1000.0, 2))
    } else if v >= 1.0 {
        format!("{} ms", trim_num(v, 1))
    } else {
        format!("{} ms", trim_num(v, 3))
    }
}

/// Tick label for `v` on an axis whose ticks are `step` apart and reach `top`.
pub fn fmt_tick(v: f64, step: f64, top: f64, unit: Unit) -> String {
    match unit {
        _ if v == 0.0 => "0".to_owned(),
        Unit::Count | Unit::Rate => {
            let (div, suffix) = si_divisor(top);
            format!("{}{suffix}", trim_num(v / div, decimals_for(step / div)))
        }
        Unit::Fraction => format!("{}%", trim_num(v * 100.0, decimals_for(step * 100.0))),
        Unit::Millis => fmt_millis(v),
        Unit::Factor => format!("{}×", trim_num(v, decimals_for(step))),
    }
}

/// A value on its own (tooltips, tables): three significant figures.
pub fn fmt_value(v: f64, unit: Unit) -> String {
    if !v.is_finite() {
        return "–".to_owned();
    }
    let sig3 = |x: f64| {
        let a = x.abs();
        let d = if a >= 100.0 {
            0
        } else if a >= 10.0 {
            1
        } else {
            2
        };
        trim_num(x, d)
    };
    match unit {
        Unit::Count | Unit::Rate => {
            let (div, suffix) = si_divisor(v);
            let per = if unit == Unit::Rate { "/s" } else { "" };
            format!("{}{suffix}{per}", sig3(v / div))
        }
        Unit::Fraction => format!("{}%", sig3(v * 100.0)),
        Unit::Millis => fmt_millis(v),
        Unit::Factor => format!("{}×", sig3(v)),
    }
}

/// Reduces a line to at most `max_points` points (min-max decimation):
/// the points are cut into `max_points / 2` buckets of consecutive points
/// and each bucket keeps its lowest and highest point, in x order, so
/// spikes survive. A bucket with no finite value becomes one gap (`NaN`).
/// Lines already short enough are returned unchanged.
pub fn downsample(points: &[(f64, f64)], max_points: usize) -> Vec<(f64, f64)> {
    let max_points = max_points.max(2);
    if points.len() <= max_points {
        return points.to_vec();
    }
    let buckets = max_points / 2;
    let size = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max_points);
    for chunk in points.chunks(size) {
        let mut lo: Option<usize> = None;
        let mut hi: Option<usize> = None;
        for (i, p) in chunk.iter().enumerate() {
            if !p.1.is_finite() {
                continue;
            }
            if lo.is_none_or(|l| p.1 < chunk[l].1) {
                lo = Some(i);
            }
            if hi.is_none_or(|h| p.1 > chunk[h].1) {
                hi = Some(i);
            }
        }
        match (lo, hi) {
            (Some(l), Some(h)) if l == h => out.push(chunk[l]),
            (Some(l), Some(h)) => {
                out.push(chunk[l.min(h)]);
                out.push(chunk[l.max(h)]);
            }
            _ => out.push((chunk[chunk.len() / 2].0, f64::NAN)),
        }
    }
    out
}

/// A coordinate in tenths of a unit, written compactly: `12`, `12.5`,
/// `-.5`, `.5`.
fn write_tenths(d: &mut String, v: i64) {
    if v < 0 {
        d.push('-');
    }
    let a = v.unsigned_abs();
    let (int, frac) = (a / 10, a % 10);
    if int > 0 || frac == 0 {
        let _ = write!(d, "{int}");
    }
    if frac > 0 {
        let _ = write!(d, ".{frac}");
    }
}

/// SVG path data for points already in pixels, rounded to 0.1 px; `None`
/// coordinates break the line. Each piece starts with an absolute `M`,
/// then relative `l` steps; points on a straight run (collinear at that
/// resolution, e.g. a flat stretch) are left out, so the shape is
/// unchanged. A lone point becomes a dot (zero-length segment, round cap).
pub fn path_data(points: &[Option<(f64, f64)>]) -> String {
    let tenths = |v: f64| (v * 10.0).round() as i64;
    let mut d = String::new();
    let mut i = 0;
    while i < points.len() {
        // One unbroken piece: points[i..j].
        let mut j = i;
        while j < points.len() && points[j].is_some() {
            j += 1;
        }
        if j == i {
            i += 1;
            continue;
        }
        let mut piece: Vec<(i64, i64)> = Vec::with_capacity(j - i);
        for &(x, y) in points[i..j].iter().flatten() {
            let p = (tenths(x), tenths(y));
            if piece.last() != Some(&p) {
                piece.push(p);
            }
        }
        // Drop the middle of collinear, same-direction triples.
        let mut kept: Vec<(i64, i64)> = Vec::with_capacity(piece.len());
        for &p in &piece {
            while kept.len() >= 2 {
                let (a, b) = (kept[kept.len() - 2], kept[kept.len() - 1]);
                let (u, v) = ((b.0 - a.0, b.1 - a.1), (p.0 - b.0, p.1 - b.1));
                let cross = u.0 as i128 * v.1 as i128 - u.1 as i128 * v.0 as i128;
                let dot = u.0 as i128 * v.0 as i128 + u.1 as i128 * v.1 as i128;
                if cross == 0 && dot > 0 {
                    kept.pop();
                } else {
                    break;
                }
            }
            kept.push(p);
        }
        let (x0, y0) = kept[0];
        d.push('M');
        write_tenths(&mut d, x0);
        d.push(' ');
        write_tenths(&mut d, y0);
        if kept.len() == 1 {
            d.push_str("h0");
        } else {
            d.push('l');
            for (n, w) in kept.windows(2).enumerate() {
                let (dx, dy) = (w[1].0 - w[0].0, w[1].1 - w[0].1);
                if n > 0 && dx >= 0 {
                    d.push(' ');
                }
                write_tenths(&mut d, dx);
                if dy >= 0 {
                    d.push(' ');
                }
                write_tenths(&mut d, dy);
            }
        }
        i = j;
    }
    d
}

/// Absolute points of path data written by [`path_data`] (`M`, `l`, `h0`),
/// one `Vec` per piece. For tests.
#[cfg(test)]
pub fn parse_path(d: &str) -> Vec<Vec<(f64, f64)>> {
    let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut nums: Vec<f64> = Vec::new();
    let mut cmd = ' ';
    let flush = |cmd: char, nums: &mut Vec<f64>, pieces: &mut Vec<Vec<(f64, f64)>>| {
        match cmd {
            'M' => pieces.push(vec![(nums[0], nums[1])]),
            'l' => {
                let piece = pieces.last_mut().expect("l after M");
                for pair in nums.chunks(2) {
                    let (x, y) = *piece.last().unwrap();
                    piece.push((x + pair[0], y + pair[1]));
                }
            }
            'h' => {}
            _ => assert!(nums.is_empty()),
        }
        nums.clear();
    };
    let mut tok = String::new();
    for c in d.chars().chain(std::iter::once(' ')) {
        let starts_new =
            c == '-' || c.is_ascii_alphabetic() || c == ' ' || (c == '.' && tok.contains('.'));
        if starts_new && !tok.is_empty() {
            nums.push(tok.parse().unwrap());
            tok.clear();
        }
        if c.is_ascii_alphabetic() {
            flush(cmd, &mut nums, &mut pieces);
            cmd = c;
        } else if c != ' ' {
            tok.push(c);
        }
    }
    flush(cmd, &mut nums, &mut pieces);
    pieces
}

/// How a line is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stroke {
    /// A data line.
    #[default]
    Normal,
    /// Thin and translucent, drawn as `path.raw`: context behind the data
    /// lines (the raw per-interval values behind a windowed rate), which the
    /// eye should read past.
    Faint,
}

/// Stroke width and opacity of a faint line.
pub const FAINT_WIDTH: f64 = 1.0;
/// See [`FAINT_WIDTH`].
pub const FAINT_OPACITY: f64 = 0.3;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend key: lines with the same key are highlighted together.
    pub key: usize,
    /// Stroke colour.
    pub colour: &'static str,
    /// `stroke-dasharray`, empty for a solid line.
    pub dash: &'static str,
    /// Data line or faint context.
    pub stroke: Stroke,
    /// Tooltip text.
    pub title: String,
    /// `(seconds since start, value)`; `NaN` values are gaps.
    pub points: Vec<(f64, f64)>,
}

/// A labelled vertical marker (a timeline action).
#[derive(Debug, Clone)]
pub struct Marker {
    /// Seconds since the start.
    pub x: f64,
    /// Short label drawn in a badge above the plot (the action's number).
    pub label: String,
    /// Tooltip text (time and description).
    pub title: String,
}

/// A time-series line chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Width in SVG units (≈ CSS pixels at the page's normal width).
    pub width: f64,
    /// Height in SVG units.
    pub height: f64,
    /// Time range shown, seconds since the start.
    pub x_domain: (f64, f64),
    /// Wall clock of `x = 0`, seconds after midnight.
    pub clock_origin_s: u64,
    /// Linear or log y axis.
    pub y_kind: ScaleKind,
    /// What the y values are.
    pub unit: Unit,
    /// A dashed horizontal reference line (always inside the y domain).
    pub reference: Option<f64>,
    /// Largest y domain worth showing: a linear axis stops here even if
    /// rounding would go further (e.g. 100 % for error rates).
    pub y_cap: Option<f64>,
    /// The lines.
    pub lines: Vec<Line>,
    /// Vertical markers.
    pub markers: Vec<Marker>,
    /// Accessible name of the chart.
    pub label: String,
}

const ML: f64 = 58.0;
const MR: f64 = 14.0;
const MB: f64 = 24.0;
const MT0: f64 = 8.0;
const BADGE_ROW: f64 = 16.0;
const MAX_BADGE_ROWS: usize = 3;

impl Chart {
    /// Whether any line has a value that can be drawn on this chart's scale.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| {
            l.points.iter().any(|p| {
                p.0.is_finite()
                    && p.1.is_finite()
                    && (self.y_kind == ScaleKind::Linear || p.1 > 0.0)
            })
        })
    }

    fn y_extent(&self) -> Option<(f64, f64)> {
        let mut ext: Option<(f64, f64)> = None;
        for l in &self.lines {
            for &(_, y) in &l.points {
                if !y.is_finite() || (self.y_kind == ScaleKind::Log && y <= 0.0) {
                    continue;
                }
                ext = Some(ext.map_or((y, y), |(a, b)| (a.min(y), b.max(y))));
            }
        }
        ext
    }

    /// Places marker badges in rows so that labels do not overlap; returns
    /// (pixel x, row) per marker and the number of rows used.
    fn badge_rows(&self, xs: &Scale) -> (Vec<Option<(f64, usize)>>, usize) {
        let mut last: Vec<f64> = Vec::new();
        let mut placed = Vec::new();
        let mut order: Vec<usize> = (0..self.markers.len()).collect();
        order.sort_by(|&a, &b| self.markers[a].x.total_cmp(&self.markers[b].x));
        placed.resize(self.markers.len(), None);
        for i in order {
            let m = &self.markers[i];
            let Some(px) = xs.map(m.x) else { continue };
            if m.x < self.x_domain.0 || m.x > self.x_domain.1 {
                continue;
            }
            let w = badge_width(&m.label);
            let row = match last.iter().position(|&end| end + 2.0 < px - w / 2.0) {
                Some(r) => r,
                None if last.len() < MAX_BADGE_ROWS => {
                    last.push(f64::NEG_INFINITY);
                    last.len() - 1
                }
                None => (0..last.len())
                    .min_by(|&a, &b| last[a].total_cmp(&last[b]))
                    .unwrap_or(0),
            };
            last[row] = px + w / 2.0;
            placed[i] = Some((px, row));
        }
        (placed, last.len())
    }

    /// The chart as a standalone `<svg class="chart">` element.
    pub fn to_svg(&self) -> String {
        let (w, h) = (self.width, self.height);
        let x0 = ML;
        let x1 = (w - MR).max(x0 + 1.0);
        let (xd0, xd1) = if self.x_domain.1 > self.x_domain.0 {
            self.x_domain
        } else {
            (self.x_domain.0, self.x_domain.0 + 1.0)
        };
        let xs = Scale::linear((xd0, xd1), (x0, x1));
        let (badges, rows) = self.badge_rows(&xs);
        let y_top = MT0 + rows as f64 * BADGE_ROW + if rows > 0 { 4.0 } else { 0.0 };
        let y_bot = (h - MB).max(y_top + 1.0);

        let mut s = String::with_capacity(8 * 1024);
        let _ = write!(
            s,
            r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}" font-family="system-ui, sans-serif" font-size="11">"#,
            escape(&self.label)
        );

        // Y scale and ticks.
        let ext = self.y_extent();
        let (ys, ticks, step) = match self.y_kind {
            ScaleKind::Linear => {
                let (mut lo, mut hi) = ext.unwrap_or((0.0, 1.0));
                if let Some(r) = self.reference {
                    lo = lo.min(r);
                    hi = hi.max(r);
                }
                let target = ((y_bot - y_top) / 40.0).clamp(2.0, 8.0) as usize;
                let ((d0, mut d1), mut ticks) = if self.unit == Unit::Millis {
                    linear_ticks_by(lo, hi, target, nice_millis_step)
                } else {
                    linear_ticks(lo, hi, target)
                };
                if let Some(cap) = self.y_cap
                    && d1 > cap
                    && hi <= cap
                {
                    d1 = cap;
                    ticks.retain(|t| *t <= cap + 1e-12);
                    if ticks.last().is_some_and(|t| (t - cap).abs() > 1e-12) {
                        ticks.push(cap);
                    }
                }
                let step = if ticks.len() > 1 {
                    ticks[1] - ticks[0]
                } else {
                    1.0
                };
                (Scale::linear((d0, d1), (y_bot, y_top)), ticks, step)
            }
            ScaleKind::Log => {
                let (lo, hi) = ext.unwrap_or((1.0, 10.0));
                let ((d0, d1), ticks) = log_ticks(lo, hi);
                (Scale::log((d0, d1), (y_bot, y_top)), ticks, 1.0)
            }
        };
        let top_tick = ticks.last().copied().unwrap_or(1.0);

        // Grid and axis labels.
        s.push_str(r##"<g class="grid" stroke="#e3e3e3" stroke-width="1">"##);
        for &t in &ticks {
            if let Some(py) = ys.map(t) {
                let _ = write!(
                    s,
                    r#"<line x1="{x0}" x2="{x1}" y1="{py:.1}" y2="{py:.1}"/>"#
                );
            }
        }
        let xt = time_ticks(xd0, xd1, self.clock_origin_s, ((x1 - x0) / 85.0) as usize);
        for (x, _) in &xt {
            if let Some(px) = xs.map(*x) {
                let _ = write!(
                    s,
                    r#"<line class="v" x1="{px:.1}" x2="{px:.1}" y1="{y_top:.1}" y2="{y_bot:.1}"/>"#
                );
            }
        }
        s.push_str("</g>");
        s.push_str(r##"<g class="axis" fill="#555">"##);
        for &t in &ticks {
            if let Some(py) = ys.map(t) {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    x0 - 6.0,
                    py + 3.5,
                    escape(&fmt_tick(t, step, top_tick, self.unit))
                );
            }
        }
        for (x, label) in &xt {
            if let Some(px) = xs.map(*x) {
                let _ = write!(
                    s,
                    r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    y_bot + 15.0,
                    escape(label)
                );
            }
        }
        s.push_str("</g>");
        let _ = write!(
            s,
            r##"<line class="baseline" x1="{x0}" x2="{x1}" y1="{y_bot:.1}" y2="{y_bot:.1}" stroke="#888"/>"##
        );

        // Reference line.
        if let Some(py) = self.reference.and_then(|r| ys.map(r)) {
            let _ = write!(
                s,
                r##"<line class="reference" x1="{x0}" x2="{x1}" y1="{py:.1}" y2="{py:.1}" stroke="#888" stroke-dasharray="2 3"/>"##
            );
        }

        // Markers: lines behind the data.
        s.push_str(r##"<g class="markers" stroke="#6b6b6b" stroke-dasharray="3 3">"##);
        for (m, b) in self.markers.iter().zip(&badges) {
            if let Some((px, _)) = b {
                let _ = write!(
                    s,
                    r#"<line x1="{px:.1}" x2="{px:.1}" y1="{y_top:.1}" y2="{y_bot:.1}"><title>{}</title></line>"#,
                    escape(&m.title)
                );
            }
        }
        s.push_str("</g>");

        // Data.
        if self.has_data() {
            let plot_w = (x1 - x0).max(1.0);
            let budget = MAX_POINTS.min(plot_w as usize);
            for l in &self.lines {
                let pts = downsample(&l.points, budget);
                let px: Vec<Option<(f64, f64)>> = pts
                    .iter()
                    .map(|&(x, y)| Some((xs.map(x)?, ys.map(y)?)))
                    .collect();
                let d = path_data(&px);
                if d.is_empty() {
                    continue;
                }
                let dash = if l.dash.is_empty() {
                    String::new()
                } else {
                    format!(r#" stroke-dasharray="{}""#, l.dash)
                };
                let (class, width) = match l.stroke {
                    Stroke::Normal => ("series", String::from(r#"stroke-width="1.8""#)),
                    Stroke::Faint => (
                        "raw",
                        format!(r#"stroke-width="{FAINT_WIDTH}" stroke-opacity="{FAINT_OPACITY}""#),
                    ),
                };
                let _ = write!(
                    s,
                    r#"<path class="{class}" data-k="{}" d="{d}" fill="none" stroke="{}" {width} stroke-linejoin="round" stroke-linecap="round"{dash}><title>{}</title></path>"#,
                    l.key,
                    l.colour,
                    escape(&l.title)
                );
            }
        } else {
            let _ = write!(
                s,
                r##"<text class="nodata" x="{:.1}" y="{:.1}" text-anchor="middle" fill="#888">no data</text>"##,
                (x0 + x1) / 2.0,
                (y_top + y_bot) / 2.0
            );
        }

        // Badges on top.
        s.push_str(r#"<g class="badges">"#);
        for (m, b) in self.markers.iter().zip(&badges) {
            if let Some((px, row)) = b {
                let bw = badge_width(&m.label);
                let cy = MT0 + *row as f64 * BADGE_ROW + 6.0;
                let _ = write!(
                    s,
                    r##"<g class="badge"><title>{}</title><rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="13" rx="6.5" fill="#444"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#fff">{}</text></g>"##,
                    escape(&m.title),
                    px - bw / 2.0,
                    cy - 6.5,
                    cy + 3.5,
                    escape(&m.label)
                );
            }
        }
        s.push_str("</g></svg>");
        s
    }
}

fn badge_width(label: &str) -> f64 {
    8.0 + 6.0 * label.chars().count() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(lines: Vec<Line>) -> Chart {
        Chart {
            width: 600.0,
            height: 200.0,
            x_domain: (0.0, 3600.0),
            clock_origin_s: 13 * 3600,
            y_kind: ScaleKind::Linear,
            unit: Unit::Fraction,
            reference: None,
            y_cap: Some(1.0),
            lines,
            markers: Vec::new(),
            label: "test".into(),
        }
    }

    fn line(points: Vec<(f64, f64)>) -> Line {
        Line {
            key: 0,
            colour: "#0072B2",
            dash: "",
            stroke: Stroke::Normal,
            title: "r".into(),
            points,
        }
    }

    /// Absolute points of the chart's series paths, one list per path.
    fn path_points(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split(r#"class="series""#)
            .skip(1)
            .map(|rest| {
                let d = rest
                    .split(r#"d=""#)
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                parse_path(d).concat()
            })
            .collect()
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("bell\u{7}"), "bell\u{FFFD}");
        assert_eq!(escape("plain 13:45 → ok"), "plain 13:45 → ok");
    }

    #[test]
    fn user_text_is_escaped_in_the_svg() {
        let mut c = chart(vec![Line {
            title: "<script>alert(1)</script>".into(),
            ..line(vec![(0.0, 0.1), (60.0, 0.2)])
        }]);
        c.markers.push(Marker {
            x: 30.0,
            label: "1".into(),
            title: "shed \"token\" <403> & more".into(),
        });
        c.label = "a<b".into();
        let svg = c.to_svg();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(svg.contains("shed &quot;token&quot; &lt;403&gt; &amp; more"));
        assert!(svg.contains(r#"aria-label="a&lt;b""#));
    }

    #[test]
    fn linear_scale_maps_ends_and_middle_and_reverses() {
        let s = Scale::linear((0.0, 100.0), (200.0, 0.0));
        assert_eq!(s.map(0.0), Some(200.0));
        assert_eq!(s.map(100.0), Some(0.0));
        assert_eq!(s.map(25.0), Some(150.0));
        assert_eq!(s.map(f64::NAN), None);
        assert_eq!(s.map(f64::INFINITY), None);
        // A degenerate domain puts everything in the middle instead of NaN.
        assert_eq!(Scale::linear((5.0, 5.0), (0.0, 10.0)).map(5.0), Some(5.0));
    }

    #[test]
    fn log_scale_maps_decades_evenly_and_drops_non_positive() {
        let s = Scale::log((1.0, 1000.0), (300.0, 0.0));
        assert!((s.map(1.0).unwrap() - 300.0).abs() < 1e-9);
        assert!((s.map(10.0).unwrap() - 200.0).abs() < 1e-9);
        assert!((s.map(100.0).unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(s.map(0.0), None);
        assert_eq!(s.map(-3.0), None);
    }

    #[test]
    fn time_axes_step_in_seconds_minutes_and_hours() {
        let min = 60_000.0;
        // 208 minutes over 5 ticks: hourly, not every 41.7 minutes.
        assert_eq!(nice_millis_step(208.0 * min, 5), 60.0 * min);
        assert_eq!(nice_millis_step(50.0 * min, 5), 10.0 * min);
        assert_eq!(nice_millis_step(40_000.0, 4), 10_000.0);
        assert_eq!(
            nice_millis_step(3.0 * 24.0 * 60.0 * min, 2),
            2.0 * 24.0 * 60.0 * min
        );
        // Below a second the decimal steps stay.
        assert_eq!(nice_millis_step(900.0, 4), nice_step(900.0, 4));
        let ((_, hi), ticks) = linear_ticks_by(0.0, 178.0 * min, 5, nice_millis_step);
        assert_eq!(hi, 180.0 * min);
        assert_eq!(ticks.len(), 4);
    }

    #[test]
    fn nice_steps_are_one_two_two_and_a_half_or_five() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(100.0, 4), 25.0);
        assert_eq!(nice_step(0.9, 4), 0.25);
        assert_eq!(nice_step(7.0, 2), 5.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(nice_step(f64::NAN, 5), 1.0);
    }

    #[test]
    fn linear_ticks_start_at_zero_and_cover_the_data() {
        let ((lo, hi), ticks) = linear_ticks(3.0, 87.0, 5);
        assert_eq!(lo, 0.0);
        assert_eq!(hi, 100.0);
        assert_eq!(ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        // Exactly on a step: no extra empty step above the data.
        let ((_, hi), _) = linear_ticks(0.0, 1.0, 5);
        assert_eq!(hi, 1.0);
        // All zero: a unit axis with its usual ticks, not a degenerate one.
        let ((lo, hi), ticks) = linear_ticks(0.0, 0.0, 5);
        assert_eq!((lo, hi), (0.0, 1.0));
        assert_eq!(ticks.len(), 6);
        // Negative data round outwards.
        let ((lo, hi), _) = linear_ticks(-3.0, 7.0, 5);
        assert!(lo <= -3.0 && hi >= 7.0);
        // Near the largest float the ends stay finite and the ticks few.
        for (lo, hi) in [(0.0, f64::MAX), (-f64::MAX, f64::MAX), (1e-300, 1.7e308)] {
            let ((d0, d1), ticks) = linear_ticks(lo, hi, 5);
            assert!(d0.is_finite() && d1.is_finite() && d0 < d1, "{lo} {hi}");
            assert!(
                (2..=12).contains(&ticks.len()),
                "{lo} {hi}: {}",
                ticks.len()
            );
        }
    }

    #[test]
    fn log_ticks_are_whole_decades_with_fillers_when_narrow() {
        let ((lo, hi), ticks) = log_ticks(3.0, 4500.0);
        assert_eq!((lo, hi), (1.0, 10000.0));
        assert_eq!(ticks, vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        let ((lo, hi), ticks) = log_ticks(20.0, 80.0);
        assert_eq!((lo, hi), (10.0, 100.0));
        assert_eq!(ticks, vec![10.0, 20.0, 50.0, 100.0]);
    }

    #[test]
    fn clock_labels_follow_the_origin() {
        assert_eq!(fmt_clock(13.0 * 3600.0 + 28.0 * 60.0, false), "13:28");
        assert_eq!(fmt_clock(13.0 * 3600.0 + 5.0, true), "13:00:05");
        assert_eq!(fmt_clock(86_400.0 + 60.0, false), "+1d 00:01");
        // A one-hour window from 13:07 gets ten-minute ticks, on the clock.
        let t = time_ticks(0.0, 3600.0, 13 * 3600 + 7 * 60, 6);
        assert_eq!(t.len(), 6, "{t:?}");
        assert_eq!(t[0], (180.0, "13:10".to_owned()));
        assert_eq!(t[5].1, "14:00");
        for w in t.windows(2) {
            assert!(w[1].0 > w[0].0);
        }
        // Short runs get seconds.
        let t = time_ticks(0.0, 20.0, 0, 5);
        assert_eq!(t[1].1, "00:00:05");
        assert!(time_ticks(5.0, 5.0, 0, 5).is_empty());
    }

    #[test]
    fn tick_and_value_formatting() {
        assert_eq!(fmt_tick(20_000.0, 10_000.0, 100_000.0, Unit::Rate), "20k");
        assert_eq!(fmt_tick(0.0, 10_000.0, 100_000.0, Unit::Rate), "0");
        assert_eq!(fmt_tick(2_500.0, 2_500.0, 10_000.0, Unit::Rate), "2.5k");
        assert_eq!(fmt_tick(0.25, 0.05, 1.0, Unit::Fraction), "25%");
        assert_eq!(fmt_tick(0.025, 0.005, 0.05, Unit::Fraction), "2.5%");
        assert_eq!(fmt_tick(1500.0, 1.0, 10_000.0, Unit::Millis), "1.5 s");
        assert_eq!(fmt_tick(0.5, 1.0, 10.0, Unit::Millis), "0.5 ms");
        assert_eq!(fmt_tick(2.0, 0.5, 4.0, Unit::Factor), "2×");
        assert_eq!(fmt_value(84_321.0, Unit::Rate), "84.3k/s");
        assert_eq!(fmt_value(0.2013, Unit::Fraction), "20.1%");
        assert_eq!(fmt_value(f64::NAN, Unit::Count), "–");
        assert_eq!(trim_num(-0.0001, 2), "0");
    }

    #[test]
    fn downsample_keeps_short_lines_and_bounds_long_ones() {
        let short: Vec<_> = (0..10).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(downsample(&short, 100), short);

        let long: Vec<_> = (0..100_000)
            .map(|i| (i as f64, ((i as f64) / 300.0).sin()))
            .collect();
        let d = downsample(&long, MAX_POINTS);
        assert!(d.len() <= MAX_POINTS, "{}", d.len());
        assert!(d.len() >= MAX_POINTS / 2);
        for w in d.windows(2) {
            assert!(w[1].0 > w[0].0, "x order kept");
        }
    }

    #[test]
    fn downsample_keeps_spikes_and_gaps() {
        let mut pts: Vec<_> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        pts[4321].1 = 50.0; // a one-interval spike
        pts[777].1 = -5.0; // and a dip
        for p in &mut pts[6000..7000] {
            p.1 = f64::NAN; // a long gap
        }
        let d = downsample(&pts, 200);
        assert!(d.len() <= 200);
        assert!(d.iter().any(|p| p == &(4321.0, 50.0)), "spike lost");
        assert!(d.iter().any(|p| p == &(777.0, -5.0)), "dip lost");
        let gaps = d.iter().filter(|p| p.1.is_nan()).count();
        assert!(gaps >= 1, "gap lost");
        assert!(
            d.iter()
                .filter(|p| p.0 > 6000.0 && p.0 < 6950.0)
                .all(|p| p.1.is_nan())
        );
    }

    #[test]
    fn path_data_breaks_at_gaps_and_draws_lone_points() {
        let d = path_data(&[
            Some((0.0, 1.0)),
            Some((2.0, 3.5)),
            None,
            Some((4.0, 5.0)),
            None,
        ]);
        assert_eq!(d, "M0 1l2 2.5M4 5h0");
        assert_eq!(
            parse_path(&d),
            vec![vec![(0.0, 1.0), (2.0, 3.5)], vec![(4.0, 5.0)]]
        );
        assert_eq!(path_data(&[None, None]), "");
    }

    #[test]
    fn path_data_is_relative_exact_and_drops_straight_runs() {
        // A flat stretch, a rise, a fall: the flat middle points go.
        let pts: Vec<_> = [
            (10.0, 50.0),
            (10.7, 50.0),
            (11.4, 50.0),
            (12.1, 50.0),
            (12.8, 40.2),
            (13.5, 60.0),
        ]
        .iter()
        .map(|&p| Some(p))
        .collect();
        let d = path_data(&pts);
        assert_eq!(d, "M10 50l2.1 0 .7-9.8 .7 19.8");
        let back = parse_path(&d).concat();
        let expect = [(10.0, 50.0), (12.1, 50.0), (12.8, 40.2), (13.5, 60.0)];
        assert_eq!(back.len(), expect.len());
        for (a, b) in back.iter().zip(expect) {
            assert!(
                (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9,
                "{a:?} {b:?}"
            );
        }
        // Rounding never drifts: a long walk ends where it should.
        let walk: Vec<_> = (0..10_000)
            .map(|i| Some((i as f64 * 0.33, (i as f64 * 0.7).sin() * 40.0 + 100.0)))
            .collect();
        let back = parse_path(&path_data(&walk)).concat();
        let last = back.last().unwrap();
        assert!((last.0 - 9999.0 * 0.33).abs() < 0.051, "{last:?}");
        // Straight-run removal keeps a reversal (a spike up and back down).
        let spike = [Some((0.0, 10.0)), Some((1.0, 0.0)), Some((2.0, 10.0))];
        assert_eq!(parse_path(&path_data(&spike)).concat().len(), 3);
    }

    #[test]
    fn chart_paths_stay_inside_the_plot() {
        let pts: Vec<_> = (0..=360)
            .map(|i| (i as f64 * 10.0, (i % 50) as f64 / 50.0))
            .collect();
        let c = chart(vec![line(pts)]);
        let svg = c.to_svg();
        let paths = path_points(&svg);
        assert_eq!(paths.len(), 1);
        for &(x, y) in &paths[0] {
            assert!((ML - 0.05..=c.width - MR + 0.05).contains(&x), "x {x}");
            assert!((MT0 - 0.05..=c.height - MB + 0.05).contains(&y), "y {y}");
        }
        // The first point (x = 0, y = 0) is the bottom-left corner of the plot.
        assert_eq!(paths[0][0], (ML, c.height - MB));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Clock labels on the x axis.
        assert!(svg.contains(">13:30<"), "{svg}");
    }

    #[test]
    fn faint_lines_are_thin_translucent_and_kept_apart_from_the_series() {
        let raw = Line {
            stroke: Stroke::Faint,
            title: "r raw".into(),
            ..line(vec![(0.0, 0.9), (60.0, 0.0), (120.0, 1.0)])
        };
        let svg = chart(vec![raw, line(vec![(0.0, 0.3), (120.0, 0.4)])]).to_svg();
        let raw_at = svg.find(r#"<path class="raw""#).expect("the faint line");
        let series_at = svg.find(r#"<path class="series""#).expect("the data line");
        assert!(raw_at < series_at, "drawn in the order given: behind");
        let raw = &svg[raw_at..svg[raw_at..].find("</path>").unwrap() + raw_at];
        assert!(
            raw.contains(r#"stroke-width="1" stroke-opacity="0.3""#),
            "{raw}"
        );
        assert_eq!(path_points(&svg).len(), 1, "only data lines are series");
    }

    #[test]
    fn error_rates_are_capped_at_one_hundred_percent() {
        let c = chart(vec![line(vec![(0.0, 0.5), (60.0, 0.97)])]);
        let svg = c.to_svg();
        assert!(svg.contains(">100%<"));
        assert!(!svg.contains(">120%<"));
    }

    #[test]
    fn empty_and_all_gap_series_render_a_no_data_chart() {
        for lines in [
            vec![],
            vec![line(vec![])],
            vec![line(vec![(0.0, f64::NAN), (10.0, f64::NAN)])],
        ] {
            let c = chart(lines);
            assert!(!c.has_data());
            let svg = c.to_svg();
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
            assert!(svg.contains("no data"));
            assert!(!svg.contains(r#"class="series""#));
            assert!(!svg.contains("NaN"));
        }
        // Non-positive values only: nothing to draw on a log axis.
        let mut c = chart(vec![line(vec![(0.0, 0.0), (10.0, 0.0)])]);
        c.y_kind = ScaleKind::Log;
        assert!(!c.has_data());
        assert!(c.to_svg().contains("no data"));
    }

    #[test]
    fn long_series_are_downsampled_in_the_svg() {
        let pts: Vec<_> = (0..50_000)
            .map(|i| (i as f64 * 0.072, 0.5 + 0.4 * (i as f64 * 0.37).sin()))
            .collect();
        let svg = chart(vec![line(pts)]).to_svg();
        let paths = path_points(&svg);
        assert!(!paths[0].is_empty());
        assert!(paths[0].len() <= MAX_POINTS);
    }

    #[test]
    fn markers_get_badges_in_rows_when_crowded() {
        let mut c = chart(vec![line(vec![(0.0, 0.1), (3600.0, 0.2)])]);
        for i in 0..4 {
            c.markers.push(Marker {
                x: 1000.0 + i as f64,
                label: (i + 1).to_string(),
                title: format!("action {i}"),
            });
        }
        c.markers.push(Marker {
            x: 99_999.0, // outside the run: not drawn
            label: "9".into(),
            title: "late".into(),
        });
        let xs = Scale::linear(c.x_domain, (ML, c.width - MR));
        let (placed, rows) = c.badge_rows(&xs);
        assert_eq!(rows, MAX_BADGE_ROWS);
        assert!(placed[4].is_none());
        let rows_used: std::collections::BTreeSet<_> =
            placed.iter().flatten().map(|p| p.1).collect();
        assert_eq!(rows_used.len(), 3);
        let svg = c.to_svg();
        assert_eq!(svg.matches(r#"class="badge""#).count(), 4);
        assert!(svg.contains("<title>action 0</title>"));
    }
}

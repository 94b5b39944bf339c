//! `report.html`: the metastability map, self-contained (inline SVG and
//! CSS, no script, no network).
//!
//! * two axes on a grid: a heatmap of the share of metastable runs over
//!   them, with the 50% contour drawn on the cell edges where the share
//!   crosses one half;
//! * more than two axes on a grid: small multiples, one such heatmap (with
//!   its own contour) per combination of the further axes' values, so no
//!   axis is averaged away into the colour (at most [`MAX_PANELS`] panels;
//!   the table lists every cell);
//! * a Latin-hypercube sample: a scatter of the first two axes, each point
//!   coloured by its share;
//! * one axis: a line of the share metastable and of the share recovered
//!   or stable against the axis's points.

use std::fmt::Write as _;

use crate::classify::Class;
use crate::output::CellSummary;
use crate::plan::Plan;

const W: f64 = 640.0;
const H: f64 = 420.0;
const LEFT: f64 = 110.0;
const BOTTOM: f64 = 60.0;
const TOP: f64 = 20.0;
const RIGHT: f64 = 20.0;

/// The most heatmaps a map of more than two axes draws. A grid may hold
/// [`crate::plan::MAX_CELLS`] cells, which over 2 × 2 first axes would be
/// 2 500 panels no reader compares; beyond this the page says how many were
/// left out and the table still lists every cell.
pub const MAX_PANELS: usize = 64;

/// The size of one heatmap and its margins, px.
#[derive(Clone, Copy)]
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    bottom: f64,
}

/// The one heatmap of a two-axis map.
const FULL: Frame = Frame {
    w: W,
    h: H,
    left: LEFT,
    bottom: BOTTOM,
};

/// A panel of small multiples: two or three fit across the page.
const PANEL: Frame = Frame {
    w: 340.0,
    h: 250.0,
    left: 80.0,
    bottom: 48.0,
};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Green (0) through amber to red (1).
fn colour(share: f64) -> String {
    let s = share.clamp(0.0, 1.0);
    let (r, g) = if s < 0.5 {
        (60.0 + 390.0 * s, 170.0)
    } else {
        (255.0, 170.0 - 240.0 * (s - 0.5))
    };
    format!("rgb({:.0},{:.0},70)", r.min(255.0), g.max(40.0))
}

/// The whole page.
pub fn render(plan: &Plan, cells: &[CellSummary]) -> String {
    let mut body = String::new();
    let title = format!("Metastability map: {}", plan.name);
    let _ = write!(
        body,
        "<h1>{}</h1><p>{} cells × {} seeds = {} runs. Colour: share of runs metastable \
         (a breach of the SLO lasting to the end of observation).</p>",
        esc(&title),
        plan.cells.len(),
        plan.seeds_per_cell(),
        plan.runs()
    );
    let chart = if plan.spec.samples.is_some() && plan.axes.len() >= 2 {
        scatter(plan, cells)
    } else if plan.axes.len() >= 2 {
        heatmap(plan, cells)
    } else {
        line(plan, cells)
    };
    body.push_str(&chart);
    body.push_str(&legend());
    body.push_str(&table(plan, cells));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font:14px system-ui,sans-serif;margin:24px;max-width:1100px}}\
         svg text{{font:12px system-ui,sans-serif}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}\
         .legend .scale{{display:inline-block;width:220px;height:14px;margin:0 8px;vertical-align:middle}}\
         .multiples{{display:flex;flex-wrap:wrap;gap:8px}}.panel{{margin:0}}\
         .panel figcaption{{font-weight:600;margin:4px 0 0 80px}}</style>\
         </head><body>{body}</body></html>\n",
        esc(&title)
    )
}

fn svg_open(out: &mut String, label: &str) {
    svg_open_sized(out, label, W, H);
}

fn svg_open_sized(out: &mut String, label: &str, w: f64, h: f64) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
}

/// One grid cell of a heatmap: its share metastable, and the runs it
/// counts (for the tooltip, so the colour can be checked against counts).
#[derive(Clone, Copy, Default)]
struct Share {
    metastable: usize,
    runs: usize,
}

impl Share {
    fn value(self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.metastable as f64 / self.runs as f64
        }
    }
}

/// The cells of the panel whose further coordinates are `rest`, on the
/// first two axes. Each grid point is one cell: nothing is averaged.
fn panel_shares(plan: &Plan, cells: &[CellSummary], rest: &[usize]) -> Vec<Vec<Share>> {
    let (nx, ny) = (plan.axes[0].len(), plan.axes[1].len());
    let mut out = vec![vec![Share::default(); ny]; nx];
    for c in cells.iter().filter(|c| c.coords.get(2..) == Some(rest)) {
        out[c.coords[0]][c.coords[1]] = Share {
            metastable: c
                .classes
                .iter()
                .filter(|k| **k == Class::Metastable)
                .count(),
            runs: c.classes.len(),
        };
    }
    out
}

/// Two axes: one heatmap. More: one heatmap per combination of the
/// further axes' values, in the order the grid lists them.
fn heatmap(plan: &Plan, cells: &[CellSummary]) -> String {
    if plan.axes.len() == 2 {
        let share = panel_shares(plan, cells, &[]);
        return heatmap_panel(
            plan,
            &share,
            FULL,
            "heatmap of the share of metastable runs",
        );
    }
    let extra = &plan.axes[2..];
    let panels: usize = extra.iter().map(|a| a.len()).product();
    let mut s = String::new();
    let _ = write!(
        s,
        "<p>{} axes: one map of <code>{}</code> × <code>{}</code> per value of {}; each square is one cell of the grid.</p><div class=\"multiples\">",
        plan.axes.len(),
        esc(plan.axes[0].path.as_str()),
        esc(plan.axes[1].path.as_str()),
        extra
            .iter()
            .map(|a| format!("<code>{}</code>", esc(a.path.as_str())))
            .collect::<Vec<_>>()
            .join(" × ")
    );
    let points: Vec<Vec<toml_edit::Value>> = extra.iter().map(|a| a.points()).collect();
    let mut rest = vec![0usize; extra.len()];
    for _ in 0..panels.min(MAX_PANELS) {
        let title = rest
            .iter()
            .zip(extra)
            .zip(&points)
            .map(|((&i, a), p)| format!("{} = {}", a.path.as_str(), crate::value::display(&p[i])))
            .collect::<Vec<_>>()
            .join(", ");
        let share = panel_shares(plan, cells, &rest);
        let _ = write!(
            s,
            "<figure class=\"panel\"><figcaption>{}</figcaption>{}</figure>",
            esc(&title),
            heatmap_panel(
                plan,
                &share,
                PANEL,
                &format!("heatmap of the share of metastable runs at {title}")
            )
        );
        // The last further axis varies fastest, as in the grid's cell order.
        for j in (0..rest.len()).rev() {
            rest[j] += 1;
            if rest[j] < extra[j].len() {
                break;
            }
            rest[j] = 0;
        }
    }
    s.push_str("</div>");
    if panels > MAX_PANELS {
        let _ = write!(
            s,
            "<p>{} more maps are not drawn (at most {MAX_PANELS}); the table below lists every cell.</p>",
            panels - MAX_PANELS
        );
    }
    s
}

fn heatmap_panel(plan: &Plan, share: &[Vec<Share>], f: Frame, label: &str) -> String {
    let (nx, ny) = (share.len(), share.first().map_or(0, Vec::len));
    let (cw, ch) = (
        (f.w - f.left - RIGHT) / nx as f64,
        (f.h - TOP - f.bottom) / ny as f64,
    );
    let mut s = String::new();
    svg_open_sized(&mut s, label, f.w, f.h);
    let px = |x: usize| f.left + x as f64 * cw;
    // y grows upwards: point 0 at the bottom.
    let py = |y: usize| f.h - f.bottom - (y as f64 + 1.0) * ch;
    for (x, col) in share.iter().enumerate() {
        for (y, v) in col.iter().enumerate() {
            let _ = write!(
                s,
                "<rect class=\"cell\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" data-share=\"{:.4}\"><title>{:.0}% metastable ({} of {} runs)</title></rect>",
                px(x),
                py(y),
                cw,
                ch,
                colour(v.value()),
                v.value(),
                v.value() * 100.0,
                v.metastable,
                v.runs
            );
        }
    }
    // The 50% contour: every edge between two cells on opposite sides.
    let above = |x: usize, y: usize| share[x][y].value() >= 0.5;
    let mut path = String::new();
    for x in 0..nx {
        for y in 0..ny {
            let here = above(x, y);
            if x + 1 < nx && above(x + 1, y) != here {
                let _ = write!(path, "M{:.1},{:.1}V{:.1}", px(x + 1), py(y), py(y) + ch);
            }
            if y + 1 < ny && above(x, y + 1) != here {
                let _ = write!(path, "M{:.1},{:.1}H{:.1}", px(x), py(y), px(x) + cw);
            }
        }
    }
    if !path.is_empty() {
        let _ = write!(
            s,
            "<path class=\"contour\" d=\"{path}\" stroke=\"#000\" stroke-width=\"3\" fill=\"none\"><title>50% metastable</title></path>"
        );
    }
    axis_labels(&mut s, plan, f, cw, ch);
    s.push_str("</svg>");
    s
}

fn axis_labels(s: &mut String, plan: &Plan, f: Frame, cw: f64, ch: f64) {
    let xs = plan.axes[0].points();
    let ys = plan.axes[1].points();
    let (nx, ny) = (xs.len(), ys.len());
    let every = |n: usize| n.div_ceil(10).max(1);
    for (i, v) in xs.iter().enumerate().step_by(every(nx)) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            f.left + (i as f64 + 0.5) * cw,
            f.h - f.bottom + 16.0,
            esc(&crate::value::display(v))
        );
    }
    for (i, v) in ys.iter().enumerate().step_by(every(ny)) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            f.left - 6.0,
            f.h - f.bottom - (i as f64 + 0.5) * ch + 4.0,
            esc(&crate::value::display(v))
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        f.left + (f.w - f.left - RIGHT) / 2.0,
        f.h - 16.0,
        esc(plan.axes[0].path.as_str()),
        TOP + (f.h - TOP - f.bottom) / 2.0,
        TOP + (f.h - TOP - f.bottom) / 2.0,
        esc(plan.axes[1].path.as_str())
    );
}

/// A coordinate of a sample on axis `j` as a number, when it is one.
fn number(v: &str) -> Option<f64> {
    v.parse::<f64>()
        .ok()
        .or_else(|| {
            stormbreak_policy::units::parse_duration(v)
                .ok()
                .map(|d| d.as_nanos() as f64 / 1e9)
        })
        .or_else(|| stormbreak_policy::units::parse_rate(v).ok())
}

fn scatter(plan: &Plan, cells: &[CellSummary]) -> String {
    let pts: Vec<(f64, f64, f64)> = cells
        .iter()
        .filter_map(|c| {
            Some((
                number(&c.values[0])?,
                number(&c.values[1])?,
                c.share_metastable,
            ))
        })
        .collect();
    let mut s = String::new();
    svg_open(&mut s, "scatter of the share of metastable runs");
    let span = |f: fn(&(f64, f64, f64)) -> f64| {
        let lo = pts.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        if hi > lo {
            (lo, hi)
        } else {
            (lo - 1.0, lo + 1.0)
        }
    };
    let ((x0, x1), (y0, y1)) = (span(|p| p.0), span(|p| p.1));
    for &(x, y, v) in &pts {
        let _ = write!(
            s,
            "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\" stroke=\"#333\"><title>{:.0}% metastable</title></circle>",
            LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT),
            H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM),
            colour(v),
            v * 100.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{LEFT}\" y=\"{:.1}\">{x0}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{x1}</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{y0}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{y1}</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        H - BOTTOM + 16.0,
        W - RIGHT,
        H - BOTTOM + 16.0,
        LEFT - 6.0,
        H - BOTTOM,
        LEFT - 6.0,
        TOP + 10.0,
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 16.0,
        esc(plan.axes[0].path.as_str()),
        H / 2.0,
        H / 2.0,
        esc(plan.axes[1].path.as_str())
    );
    s.push_str("</svg>");
    s
}

fn line(plan: &Plan, cells: &[CellSummary]) -> String {
    let n = cells.len().max(2);
    let x = |i: usize| LEFT + i as f64 / (n - 1) as f64 * (W - LEFT - RIGHT);
    let y = |v: f64| H - BOTTOM - v * (H - TOP - BOTTOM);
    let mut s = String::new();
    svg_open(&mut s, "share of metastable runs along the axis");
    let series = |f: &dyn Fn(&CellSummary) -> f64| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { "L" },
                    x(i),
                    y(f(c))
                )
            })
            .collect()
    };
    let ok = |c: &CellSummary| {
        c.classes
            .iter()
            .filter(|k| matches!(k, Class::Stable | Class::Recovered))
            .count() as f64
            / c.classes.len().max(1) as f64
    };
    let _ = write!(
        s,
        "<path class=\"line\" d=\"{}\" stroke=\"#c0392b\" stroke-width=\"2.5\" fill=\"none\"><title>share metastable</title></path>\
         <path class=\"line\" d=\"{}\" stroke=\"#27ae60\" stroke-width=\"2\" stroke-dasharray=\"6 3\" fill=\"none\"><title>share stable or recovered</title></path>\
         <path d=\"M{LEFT},{:.1}H{:.1}\" stroke=\"#888\" stroke-dasharray=\"2 3\"><title>50%</title></path>",
        series(&|c| c.share_metastable),
        series(&ok),
        y(0.5),
        W - RIGHT
    );
    let every = n.div_ceil(10).max(1);
    for (i, c) in cells.iter().enumerate().step_by(every) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(i),
            H - BOTTOM + 16.0,
            esc(&c.values[0])
        );
    }
    for v in [0.0, 0.5, 1.0] {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}%</text>",
            LEFT - 6.0,
            y(v) + 4.0,
            v * 100.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 16.0,
        esc(plan.axes[0].path.as_str())
    );
    s.push_str("</svg>");
    s
}

/// The colour scale is continuous: the legend is a gradient through the
/// same stops `colour` interpolates, so a square's colour reads as its own
/// share (its tooltip gives the count).
fn legend() -> String {
    let stops: Vec<String> = (0..=10)
        .map(|i| format!("{} {}%", colour(i as f64 / 10.0), i * 10))
        .collect();
    format!(
        "<p class=\"legend\">0% metastable <span class=\"scale\" style=\"background:linear-gradient(to right,{})\"></span> 100% — continuous; black line: the 50% contour</p>",
        stops.join(",")
    )
}

fn table(plan: &Plan, cells: &[CellSummary]) -> String {
    let mut s = String::from("<table><thead><tr><th>cell</th>");
    for a in &plan.axes {
        let _ = write!(s, "<th>{}</th>", esc(a.path.as_str()));
    }
    s.push_str("<th>metastable</th><th>classes</th><th>recovery p50 (s)</th><th>amplification after the trigger</th><th>largest amplification in one interval</th><th>error rate</th></tr></thead><tbody>");
    for c in cells {
        let _ = write!(s, "<tr><td>{}</td>", c.cell);
        for v in &c.values {
            let _ = write!(s, "<td>{}</td>", esc(v));
        }
        let classes: Vec<&str> = c.classes.iter().map(|k| k.name()).collect();
        let _ = write!(
            s,
            "<td>{:.0}%</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.3}</td></tr>",
            c.share_metastable * 100.0,
            classes.join(" "),
            c.recovery_s
                .map_or_else(String::new, |q| format!("{:.1}", q.p50)),
            c.window_amplification,
            c.max_interval_amplification,
            c.error_rate
        );
    }
    s.push_str("</tbody></table>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::SweepSpec;

    const SCENARIO: &str = include_str!("../../../scenarios/capacity-drop.toml");

    /// A summary of `cell` whose runs are `classes`.
    fn summary(cell: &crate::plan::Cell, classes: Vec<Class>) -> CellSummary {
        let metastable = classes.iter().filter(|k| **k == Class::Metastable).count();
        CellSummary {
            cell: cell.index,
            coords: cell.coords.clone(),
            values: vec![String::new(); cell.coords.len()],
            share_metastable: metastable as f64 / classes.len() as f64,
            classes,
            recovery_s: None,
            max_interval_amplification: 1.0,
            window_amplification: 1.0,
            error_rate: 0.0,
            runs_hitting_bounds: 0,
        }
    }

    /// Three axes: one heatmap per value of the third, each square its own
    /// cell's share (never an average over the third axis), with its own
    /// contour. The cell that was drawn in the 50 % bin when the third
    /// axis was averaged away (stable at one value, metastable at two)
    /// reads 0 % and 100 % in its panels, and a cell of 2 of 3 runs reads
    /// 67 %.
    #[test]
    fn three_axes_are_small_multiples_of_unaveraged_cells() {
        let spec = SweepSpec::grid(&[
            "action.cut.factor=2,4",
            "action.cut.for=4s,8s",
            "client.app.rate=100/s,200/s,300/s",
        ]);
        let plan = Plan::new("capacity-drop.toml", SCENARIO, spec).unwrap();
        let cells: Vec<CellSummary> = plan
            .cells
            .iter()
            .map(|c| {
                use Class::{Metastable as M, Stable as S};
                let classes = match c.coords[..] {
                    // Metastable at the two higher loads only.
                    [1, 1, 0] => vec![S, S, S],
                    [1, 1, _] => vec![M, M, M],
                    [0, 1, 2] => vec![M, M, S],
                    _ => vec![S, S, S],
                };
                summary(c, classes)
            })
            .collect();
        let html = render(&plan, &cells);
        let panels: Vec<&str> = html.split("<figure class=\"panel\">").skip(1).collect();
        assert_eq!(panels.len(), 3, "one panel per rate");
        for (k, rate) in ["100/s", "200/s", "300/s"].iter().enumerate() {
            let caption = format!("<figcaption>client.app.rate = {rate}</figcaption>");
            assert!(panels[k].starts_with(&caption), "{}", &panels[k][..80]);
            assert_eq!(panels[k].matches("<rect class=\"cell\"").count(), 4);
        }
        let share = |panel: &str, pct: &str| panel.contains(&format!("<title>{pct}</title>"));
        assert!(share(panels[0], "0% metastable (0 of 3 runs)"));
        assert!(!share(panels[0], "100% metastable (3 of 3 runs)"));
        assert!(share(panels[1], "100% metastable (3 of 3 runs)"));
        assert!(share(panels[2], "67% metastable (2 of 3 runs)"));
        assert!(!html.contains("50% metastable ("), "no averaged cell");
        // Panels with a cell at or above one half draw their own contour.
        assert!(!panels[0].contains("class=\"contour\""));
        assert!(panels[1].contains("class=\"contour\""));
        assert!(panels[2].contains("class=\"contour\""));
        assert!(html.contains("linear-gradient"), "a continuous scale");
    }

    /// Two axes keep the one full-size heatmap.
    #[test]
    fn two_axes_are_one_heatmap() {
        let spec = SweepSpec::grid(&["action.cut.factor=2,4", "action.cut.for=4s,8s"]);
        let plan = Plan::new("capacity-drop.toml", SCENARIO, spec).unwrap();
        let cells: Vec<CellSummary> = plan
            .cells
            .iter()
            .map(|c| summary(c, vec![Class::Stable]))
            .collect();
        let html = render(&plan, &cells);
        assert!(!html.contains("class=\"panel\""));
        assert_eq!(html.matches("<rect class=\"cell\"").count(), 4);
        assert!(html.contains(&format!("width=\"{W}\"")));
    }

    /// More panels than [`MAX_PANELS`]: the first are drawn, the page says
    /// how many were not.
    #[test]
    fn panels_are_bounded() {
        let spec = SweepSpec::grid(&[
            "action.cut.factor=2,4",
            "action.cut.for=4s,8s",
            "service.db.replicas=1..8:8",
            "action.cut.at=10s..100s:10",
        ]);
        let plan = Plan::new("capacity-drop.toml", SCENARIO, spec).unwrap();
        let cells: Vec<CellSummary> = plan
            .cells
            .iter()
            .map(|c| summary(c, vec![Class::Stable]))
            .collect();
        let html = render(&plan, &cells);
        assert_eq!(html.matches("<figure class=\"panel\">").count(), MAX_PANELS);
        assert!(html.contains(&format!("{} more maps are not drawn", 80 - MAX_PANELS)));
    }
}

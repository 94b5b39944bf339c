//! `report.html`: the metastability map, self-contained (inline SVG and
//! CSS, no script, no network).
//!
//! * two or more axes on a grid: a heatmap of the share of metastable runs
//!   over the first two axes (averaged over any further axes), with the
//!   50% contour drawn on the cell edges where the share crosses one half;
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
         .legend span{{display:inline-block;width:14px;height:14px;margin:0 4px 0 12px;vertical-align:middle}}</style>\
         </head><body>{body}</body></html>\n",
        esc(&title)
    )
}

fn svg_open(out: &mut String, label: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
}

/// Mean share over cells with the same first two coordinates.
fn grid_shares(plan: &Plan, cells: &[CellSummary]) -> (usize, usize, Vec<Vec<f64>>) {
    let (nx, ny) = (plan.axes[0].len(), plan.axes[1].len());
    let mut sum = vec![vec![0.0; ny]; nx];
    let mut n = vec![vec![0usize; ny]; nx];
    for c in cells {
        sum[c.coords[0]][c.coords[1]] += c.share_metastable;
        n[c.coords[0]][c.coords[1]] += 1;
    }
    for (col, counts) in sum.iter_mut().zip(&n) {
        for (v, &k) in col.iter_mut().zip(counts) {
            *v /= k.max(1) as f64;
        }
    }
    (nx, ny, sum)
}

fn heatmap(plan: &Plan, cells: &[CellSummary]) -> String {
    let (nx, ny, share) = grid_shares(plan, cells);
    let (cw, ch) = (
        (W - LEFT - RIGHT) / nx as f64,
        (H - TOP - BOTTOM) / ny as f64,
    );
    let mut s = String::new();
    svg_open(&mut s, "heatmap of the share of metastable runs");
    let px = |x: usize| LEFT + x as f64 * cw;
    // y grows upwards: point 0 at the bottom.
    let py = |y: usize| H - BOTTOM - (y as f64 + 1.0) * ch;
    for (x, col) in share.iter().enumerate() {
        for (y, &v) in col.iter().enumerate() {
            let _ = write!(
                s,
                "<rect class=\"cell\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{:.0}% metastable</title></rect>",
                px(x),
                py(y),
                cw,
                ch,
                colour(v),
                v * 100.0
            );
        }
    }
    // The 50% contour: every edge between two cells on opposite sides.
    let mut path = String::new();
    for x in 0..nx {
        for y in 0..ny {
            let here = share[x][y] >= 0.5;
            if x + 1 < nx && (share[x + 1][y] >= 0.5) != here {
                let _ = write!(path, "M{:.1},{:.1}V{:.1}", px(x + 1), py(y), py(y) + ch);
            }
            if y + 1 < ny && (share[x][y + 1] >= 0.5) != here {
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
    axis_labels(&mut s, plan, nx, ny, cw, ch);
    s.push_str("</svg>");
    s
}

fn axis_labels(s: &mut String, plan: &Plan, nx: usize, ny: usize, cw: f64, ch: f64) {
    let xs = plan.axes[0].points();
    let ys = plan.axes[1].points();
    let every = |n: usize| n.div_ceil(10).max(1);
    for (i, v) in xs.iter().enumerate().step_by(every(nx)) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            LEFT + (i as f64 + 0.5) * cw,
            H - BOTTOM + 16.0,
            esc(&crate::value::display(v))
        );
    }
    for (i, v) in ys.iter().enumerate().step_by(every(ny)) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            H - BOTTOM - (i as f64 + 0.5) * ch + 4.0,
            esc(&crate::value::display(v))
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 16.0,
        esc(plan.axes[0].path.as_str()),
        TOP + (H - TOP - BOTTOM) / 2.0,
        TOP + (H - TOP - BOTTOM) / 2.0,
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

fn legend() -> String {
    let mut s = String::from("<p class=\"legend\">");
    for (v, l) in [(0.0, "0% metastable"), (0.5, "50%"), (1.0, "100%")] {
        let _ = write!(s, "<span style=\"background:{}\"></span>{l}", colour(v));
    }
    s.push_str(" — black line: the 50% contour</p>");
    s
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

//! A sweep's plan: the axes read against the scenario, the cells (a full
//! grid or a Latin-hypercube sample), each cell's seeds, and every cell's
//! scenario built and validated before anything runs.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::Limits;
use toml_edit::{DocumentMut, Value};

use crate::axis::{Axis, AxisSpec, MAX_AXES};
use crate::classify::{ClassifyOptions, Slo, Timeline, slos};
use crate::seeds::Seeds;
use crate::value::display;

/// Most cells in one sweep (grid points or samples).
pub const MAX_CELLS: usize = 10_000;
/// Most runs in one sweep: cells × seeds.
pub const MAX_RUNS: usize = 100_000;
/// Most seeds per cell.
pub const MAX_SEEDS: u32 = 1_000;

/// What a sweep is asked to do: everything that decides its outputs, and
/// nothing that does not (threads, shards, paths).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// `PATH=SPEC` axes (see [`crate::axis`]).
    pub axes: Vec<String>,
    /// A Latin-hypercube sample of this many cells instead of the grid.
    pub samples: Option<usize>,
    /// Runs per cell: a count, each run on a seed derived from the sweep
    /// seed and the cell, or the seeds themselves ([`crate::seeds`]).
    pub seeds: Seeds,
    /// The sweep seed (default: the scenario's `seed`).
    pub seed: Option<u64>,
    /// Classification windows.
    pub classify: ClassifyOptions,
    /// `--scale` of every run.
    pub scale: f64,
}

/// One cell: a point of the grid or one sample.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Position in the sweep's order.
    pub index: usize,
    /// Per-axis point indices (grid), or `[sample]` (Latin hypercube).
    pub coords: Vec<usize>,
    /// Each axis's value in this cell, as written into the scenario.
    pub values: Vec<Value>,
    /// When its trigger ends and observation stops.
    pub timeline: Timeline,
}

/// A validated sweep, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario file, as named in errors and outputs.
    pub file: String,
    /// The scenario's text.
    pub text: String,
    /// The scenario's name.
    pub name: String,
    /// The request.
    pub spec: SweepSpec,
    /// The sweep seed in force.
    pub sweep_seed: u64,
    /// The axes, read against the file.
    pub axes: Vec<Axis>,
    /// The cells, in order.
    pub cells: Vec<Cell>,
    /// The SLOs that define a breach.
    pub slos: Vec<Slo>,
    /// The engine's limits for every run: the defaults unless the command
    /// line's `--limit` set them (each cell's `[limits]` may lower them).
    /// Not part of the spec: a spec file (a Job's) cannot raise them.
    pub limits: Limits,
    doc: DocumentMut,
}

impl Plan {
    /// Reads the axes against `text`, lays out the cells and builds and
    /// validates every cell's scenario; the first problem is returned,
    /// naming the axis path or the cell and its values.
    pub fn new(file: &str, text: &str, spec: SweepSpec) -> Result<Plan, String> {
        let base = Scenario::parse(file, text).map_err(|e| e.to_string())?;
        let doc: DocumentMut = text.parse().map_err(|e| format!("{file}: {e}"))?;
        if spec.axes.is_empty() {
            return Err("a sweep needs at least one --axis PATH=SPEC".to_owned());
        }
        if spec.axes.len() > MAX_AXES {
            return Err(format!("at most {MAX_AXES} axes, got {}", spec.axes.len()));
        }
        if !(1..=MAX_SEEDS).contains(&spec.seeds.len()) {
            return Err(format!(
                "--seeds must give 1 to {MAX_SEEDS} runs per cell, got {}",
                spec.seeds.len()
            ));
        }
        let mut axes = Vec::with_capacity(spec.axes.len());
        for a in &spec.axes {
            let axis = AxisSpec::parse(a)?.resolve(&doc)?;
            if axes.iter().any(|b: &Axis| b.path == axis.path) {
                return Err(format!("axis {a:?}: {} is already an axis", axis.path));
            }
            axes.push(axis);
        }
        let sweep_seed = spec.seed.unwrap_or(base.scenario.seed);
        let layout = match spec.samples {
            None => grid(&axes)?,
            Some(n) => latin_hypercube(&axes, n, sweep_seed)?,
        };
        let runs = layout.len().saturating_mul(spec.seeds.len() as usize);
        if runs > MAX_RUNS {
            return Err(format!(
                "{} cells × {} seeds = {runs} runs, more than {MAX_RUNS}; use fewer points or seeds, or --samples",
                layout.len(),
                spec.seeds.len()
            ));
        }
        let mut plan = Plan {
            file: file.to_owned(),
            text: text.to_owned(),
            name: base.scenario.name.clone(),
            slos: slos(&base),
            spec,
            sweep_seed,
            axes,
            cells: Vec::with_capacity(layout.len()),
            limits: Limits::default(),
            doc,
        };
        for (index, (coords, values)) in layout.into_iter().enumerate() {
            let sc = plan
                .build(&values)
                .map_err(|e| format!("cell {index} ({}): {e}", assignments(&plan.axes, &values)))?;
            let timeline = Timeline::of(&sc).map_err(|e| {
                format!(
                    "{file}: cell {index} ({}): {e}",
                    assignments(&plan.axes, &values)
                )
            })?;
            plan.cells.push(Cell {
                index,
                coords,
                values,
                timeline,
            });
        }
        Ok(plan)
    }

    /// The scenario of a cell with these axis values.
    pub fn build(&self, values: &[Value]) -> Result<Scenario, String> {
        let mut doc = self.doc.clone();
        for (axis, v) in self.axes.iter().zip(values) {
            axis.path.set(&mut doc, v.clone())?;
        }
        Scenario::parse(&self.file, &doc.to_string()).map_err(|e| e.to_string())
    }

    /// The seed of run `k` of `cell`: the `k`-th chosen seed, the
    /// simulator's own (`--seeds 1,2,3`); for a count (`--seeds 3`), the
    /// sweep seed mixed with the cell's coordinates and `k`, so it depends
    /// on nothing else (not on the order cells run in, the thread count or
    /// the shard).
    pub fn run_seed(&self, cell: &Cell, k: u32) -> u64 {
        self.spec.seeds.seed(k, |k| {
            let mut h = splitmix(self.sweep_seed ^ 0x5357_4545_5053_4545);
            for &c in &cell.coords {
                h = splitmix(h ^ c as u64);
            }
            splitmix(h ^ u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        })
    }

    /// Runs per cell.
    pub fn seeds_per_cell(&self) -> u32 {
        self.spec.seeds.len()
    }

    /// Total runs.
    pub fn runs(&self) -> usize {
        self.cells.len() * self.seeds_per_cell() as usize
    }
}

/// `path = value, …` for errors.
pub fn assignments(axes: &[Axis], values: &[Value]) -> String {
    axes.iter()
        .zip(values)
        .map(|(a, v)| format!("{} = {}", a.path, display(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// SplitMix64's finaliser (Steele, Lea, Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a bijective mix, so
/// distinct inputs give distinct seeds.
pub(crate) fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

type Layout = Vec<(Vec<usize>, Vec<Value>)>;

/// Every combination, the first axis varying slowest.
fn grid(axes: &[Axis]) -> Result<Layout, String> {
    let mut total: usize = 1;
    for a in axes {
        total = total.saturating_mul(a.len());
    }
    if total > MAX_CELLS {
        return Err(format!(
            "the grid has {total} cells, more than {MAX_CELLS}; use fewer points or --samples N"
        ));
    }
    let points: Vec<Vec<Value>> = axes.iter().map(Axis::points).collect();
    let mut out = Vec::with_capacity(total);
    for flat in 0..total {
        let mut coords = vec![0; axes.len()];
        let mut rest = flat;
        for (j, a) in axes.iter().enumerate().rev() {
            coords[j] = rest % a.len();
            rest /= a.len();
        }
        let values = coords
            .iter()
            .enumerate()
            .map(|(j, &c)| points[j][c].clone())
            .collect();
        out.push((coords, values));
    }
    Ok(out)
}

/// `n` cells, each axis cut into `n` strata and each stratum used once
/// (McKay, Beckman, Conover, Technometrics 1979), drawn from the sweep
/// seed.
fn latin_hypercube(axes: &[Axis], n: usize, seed: u64) -> Result<Layout, String> {
    if !(1..=MAX_CELLS).contains(&n) {
        return Err(format!("--samples must be 1 to {MAX_CELLS}, got {n}"));
    }
    let mut rng = Pcg64Mcg::seed_from_u64(splitmix(seed ^ 0x4C48_5321));
    let mut columns: Vec<Vec<Value>> = Vec::with_capacity(axes.len());
    for a in axes {
        let mut strata: Vec<usize> = (0..n).collect();
        // Fisher–Yates, written out so the draw order is this file's.
        for i in (1..n).rev() {
            let j = rng.random_range(0..=i);
            strata.swap(i, j);
        }
        columns.push(
            strata
                .iter()
                .map(|&s| a.at((s as f64 + rng.random::<f64>()) / n as f64))
                .collect(),
        );
    }
    Ok((0..n)
        .map(|i| (vec![i], columns.iter().map(|c| c[i].clone()).collect()))
        .collect())
}

impl SweepSpec {
    /// A grid over `axes`, one seed per cell, default classification.
    pub fn grid(axes: &[&str]) -> SweepSpec {
        SweepSpec {
            axes: axes.iter().map(|s| (*s).to_owned()).collect(),
            samples: None,
            seeds: Seeds::Count(1),
            seed: None,
            classify: ClassifyOptions::default(),
            scale: 1.0,
        }
    }
}

/// A duration for outputs, in seconds.
pub fn secs(n: Nanos) -> f64 {
    n.as_nanos() as f64 / 1e9
}

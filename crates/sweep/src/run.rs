//! Running a plan's runs (all of them, or one shard's) and classifying
//! each.

use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;
use stormbreak_sim::engine::{Engine, RunOptions};

use crate::classify::{Class, Outcome, classify};
use crate::plan::{Plan, assignments};
use stormbreak_sim::parallel::map_in_order;

/// A deterministic subset of the cells: those whose index is `index`
/// modulo `count` (`--shard I/N` is `index = I − 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based.
    pub index: usize,
    /// How many shards.
    pub count: usize,
}

/// Most shards.
pub const MAX_SHARDS: usize = 10_000;

impl Shard {
    /// Every cell.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` (1 ≤ I ≤ N ≤ [`MAX_SHARDS`]).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("expected I/N with 1 ≤ I ≤ N ≤ {MAX_SHARDS}, such as 2/3, got {s:?}");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (i, n): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if i == 0 || i > n || n > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard {
            index: i - 1,
            count: n,
        })
    }

    /// Whether cell `cell` is in this shard.
    pub fn has(self, cell: usize) -> bool {
        cell % self.count == self.index
    }
}

/// One run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunResult {
    /// Cell index.
    pub cell: usize,
    /// Run within the cell, 0-based.
    pub run: u32,
    /// The run's seed.
    pub seed: u64,
    /// What it came to.
    pub outcome: Outcome,
    /// Requests the engine's own bounds refused (`Limits`, e.g. the
    /// default app queue; see `BoundHit`): refusals no scenario asked for,
    /// so a run with any is judged partly on the engine's bound.
    pub bounds_hit: u64,
    /// For a run of class `stopped`: the limit that stopped it (not kept
    /// in shard files).
    pub stopped_by: Option<&'static str>,
}

/// Runs the shard's runs of `plan` on `threads` threads, in (cell, run)
/// order; `on_done` after each.
pub fn run(
    plan: &Plan,
    shard: Shard,
    threads: usize,
    on_done: impl Fn() + Sync,
) -> Result<Vec<RunResult>, String> {
    run_keeping(plan, shard, threads, false, on_done).map(|(results, _)| results)
}

/// Most runs whose recordings `--keep-series` keeps: each is held in
/// memory (as the `recording.json` `simulate` would write, some kB to a
/// few MB) until the sweep's outputs are written as one set.
pub const MAX_KEPT_RUNS: usize = 1_000;

/// One run's recording, kept with `--keep-series`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSeries {
    /// Cell index.
    pub cell: usize,
    /// Run within the cell.
    pub run: u32,
    /// Its `recording.json`, byte for byte what `stormbreak simulate
    /// --seed SEED` writes for the cell's scenario and the run's seed.
    pub json: Vec<u8>,
}

impl KeptSeries {
    /// The file it is written to in the sweep's outputs.
    pub fn file_name(&self) -> String {
        format!("cell-{}-run-{}.recording.json", self.cell, self.run)
    }
}

/// [`run`], also keeping every run's recording when `keep` (at most
/// [`MAX_KEPT_RUNS`] runs, refused before anything runs).
pub fn run_keeping(
    plan: &Plan,
    shard: Shard,
    threads: usize,
    keep: bool,
    on_done: impl Fn() + Sync,
) -> Result<(Vec<RunResult>, Vec<KeptSeries>), String> {
    let todo: Vec<(usize, u32)> = plan
        .cells
        .iter()
        .filter(|c| shard.has(c.index))
        .flat_map(|c| (0..plan.seeds_per_cell()).map(move |k| (c.index, k)))
        .collect();
    if keep && todo.len() > MAX_KEPT_RUNS {
        return Err(format!(
            "--keep-series keeps at most {MAX_KEPT_RUNS} runs' recordings (they are held in \
             memory until the outputs are written), and this sweep has {}; use fewer cells or seeds",
            todo.len()
        ));
    }
    let done = map_in_order(
        threads,
        todo,
        |(cell, k)| run_one(plan, cell, k, keep),
        on_done,
    )?;
    let mut results = Vec::with_capacity(done.len());
    let mut kept = Vec::new();
    for (r, json) in done {
        if let Some(json) = json {
            kept.push(KeptSeries {
                cell: r.cell,
                run: r.run,
                json,
            });
        }
        results.push(r);
    }
    Ok((results, kept))
}

/// The number of runs `shard` holds.
pub fn runs_in(plan: &Plan, shard: Shard) -> usize {
    plan.cells.iter().filter(|c| shard.has(c.index)).count() * plan.seeds_per_cell() as usize
}

fn run_one(
    plan: &Plan,
    cell: usize,
    k: u32,
    keep: bool,
) -> Result<(RunResult, Option<Vec<u8>>), String> {
    let c = &plan.cells[cell];
    let who = || {
        format!(
            "cell {cell} ({}), run {k}",
            assignments(&plan.axes, &c.values)
        )
    };
    // Validated when the plan was made; building again keeps the plan small.
    let sc = plan
        .build(&c.values)
        .map_err(|e| format!("{}: {e}", who()))?;
    let seed = plan.run_seed(c, k);
    // A run stopped by a limit is a result, not the sweep's end: it keeps
    // its recording up to the stop and gets the class `stopped`.
    let (rec, stopped) = Engine::new(
        &sc,
        RunOptions {
            seed: Some(seed),
            scale: plan.spec.scale,
        },
    )
    .with_limits(plan.limits)
    .run_to_stop();
    let json = if keep {
        Some(
            stormbreak_sim::output::recording_json(&rec)
                .map_err(|e| format!("{}: cannot encode its recording: {e}", who()))?,
        )
    } else {
        None
    };
    let mut outcome = classify(&rec, &plan.slos, c.timeline, plan.spec.classify);
    if stopped.is_some() {
        outcome.class = Class::Stopped;
        outcome.recovery = None;
    }
    let result = RunResult {
        cell,
        run: k,
        seed,
        outcome,
        bounds_hit: rec.bounds_hit.iter().map(|b| b.count).sum(),
        stopped_by: stopped.as_ref().map(|e| e.limit()),
    };
    Ok((result, json))
}

/// One run's result as a shard file stores it: floats as their bits, so a
/// merge reproduces every figure exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRun {
    cell: usize,
    run: u32,
    seed: u64,
    class: Class,
    recovery_ns: Option<u64>,
    breach_start_ns: Option<u64>,
    max_interval_amplification_bits: u64,
    window_amplification_bits: u64,
    error_rate_bits: u64,
    #[serde(default)]
    bounds_hit: u64,
}

impl StoredRun {
    /// Its cell.
    pub fn cell_index(&self) -> usize {
        self.cell
    }

    /// Its run within the cell.
    pub fn run_index(&self) -> u32 {
        self.run
    }
}

impl From<&RunResult> for StoredRun {
    fn from(r: &RunResult) -> Self {
        StoredRun {
            cell: r.cell,
            run: r.run,
            seed: r.seed,
            class: r.outcome.class,
            recovery_ns: r.outcome.recovery.map(Nanos::as_nanos),
            breach_start_ns: r.outcome.breach_start.map(Nanos::as_nanos),
            max_interval_amplification_bits: r.outcome.max_interval_amplification.to_bits(),
            window_amplification_bits: r.outcome.window_amplification.to_bits(),
            error_rate_bits: r.outcome.error_rate.to_bits(),
            bounds_hit: r.bounds_hit,
        }
    }
}

impl From<&StoredRun> for RunResult {
    fn from(s: &StoredRun) -> Self {
        RunResult {
            cell: s.cell,
            run: s.run,
            seed: s.seed,
            outcome: Outcome {
                class: s.class,
                recovery: s.recovery_ns.map(Nanos::from_nanos),
                breach_start: s.breach_start_ns.map(Nanos::from_nanos),
                max_interval_amplification: f64::from_bits(s.max_interval_amplification_bits),
                window_amplification: f64::from_bits(s.window_amplification_bits),
                error_rate: f64::from_bits(s.error_rate_bits),
            },
            bounds_hit: s.bounds_hit,
            stopped_by: None,
        }
    }
}

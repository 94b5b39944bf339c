//! The files a sweep writes: `sweep.csv` (one row per cell × run),
//! `summary.json` (schema [`SUMMARY_SCHEMA`]), `report.html`; a shard
//! writes `shard.json` instead, and [`merge`] turns shards back into
//! exactly the files one run writes.
//!
//! Nothing here reads a clock, the host or the thread count: the files
//! are a function of the scenario, the sweep spec and the runs' results.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use stormbreak_sim::output::OutputSet;

use crate::classify::Class;
use crate::html;
use crate::plan::{Plan, SweepSpec, secs};
use crate::run::{RunResult, Shard, StoredRun};
use crate::value::display;

/// `summary.json`'s schema name and version.
pub const SUMMARY_SCHEMA: &str = "stormbreak.sweep/2";
/// `shard.json`'s schema name and version.
pub const SHARD_SCHEMA: &str = "stormbreak.sweep-shard/2";
/// The files of a whole sweep.
pub const SWEEP_CSV: &str = "sweep.csv";
/// See [`SWEEP_CSV`].
pub const SUMMARY_JSON: &str = "summary.json";
/// See [`SWEEP_CSV`].
pub const REPORT_HTML: &str = "report.html";
/// The file of one shard.
pub const SHARD_JSON: &str = "shard.json";

/// Per-cell figures over its runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSummary {
    /// Cell index.
    pub cell: usize,
    /// Grid coordinates, or `[sample]`.
    pub coords: Vec<usize>,
    /// Axis values as written into the scenario, in axis order.
    pub values: Vec<String>,
    /// Class of each run, in run order.
    pub classes: Vec<Class>,
    /// Share of runs that were metastable.
    pub share_metastable: f64,
    /// Recovery time quantiles (nearest rank) over recovered and slow
    /// runs, seconds.
    pub recovery_s: Option<Quantiles>,
    /// Mean over runs of each run's largest single-interval amplification.
    pub max_interval_amplification: f64,
    /// Mean over runs of each run's amplification from the trigger's end
    /// to the end of observation.
    pub window_amplification: f64,
    /// Mean over runs of each run's error rate after the trigger.
    pub error_rate: f64,
    /// Runs in which the engine's own bounds refused requests
    /// ([`RunResult::bounds_hit`]).
    pub runs_hitting_bounds: usize,
}

/// Nearest-rank quantiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Largest.
    pub max: f64,
}

fn quantiles(mut v: Vec<f64>) -> Option<Quantiles> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Quantiles {
        p50: rank(0.5),
        p90: rank(0.9),
        max: v[v.len() - 1],
    })
}

/// Per-cell summaries of `results` (every run of every cell, in order).
pub fn summarise(plan: &Plan, results: &[RunResult]) -> Vec<CellSummary> {
    plan.cells
        .iter()
        .map(|c| {
            let runs: Vec<&RunResult> = results.iter().filter(|r| r.cell == c.index).collect();
            let n = runs.len().max(1) as f64;
            CellSummary {
                cell: c.index,
                coords: c.coords.clone(),
                values: c.values.iter().map(display).collect(),
                classes: runs.iter().map(|r| r.outcome.class).collect(),
                share_metastable: runs
                    .iter()
                    .filter(|r| r.outcome.class == Class::Metastable)
                    .count() as f64
                    / n,
                recovery_s: quantiles(
                    runs.iter()
                        .filter_map(|r| r.outcome.recovery.map(secs))
                        .collect(),
                ),
                max_interval_amplification: runs
                    .iter()
                    .map(|r| r.outcome.max_interval_amplification)
                    .sum::<f64>()
                    / n,
                window_amplification: runs
                    .iter()
                    .map(|r| r.outcome.window_amplification)
                    .sum::<f64>()
                    / n,
                error_rate: runs.iter().map(|r| r.outcome.error_rate).sum::<f64>() / n,
                runs_hitting_bounds: runs.iter().filter(|r| r.bounds_hit > 0).count(),
            }
        })
        .collect()
}

/// The files of a whole sweep from every run's result.
pub fn outputs(plan: &Plan, results: &[RunResult]) -> Result<OutputSet, String> {
    if results.len() != plan.runs() {
        return Err(format!(
            "{} results for a sweep of {} runs",
            results.len(),
            plan.runs()
        ));
    }
    let cells = summarise(plan, results);
    let summary = summary_json(plan, &cells);
    let mut set = OutputSet::new();
    set.add(SWEEP_CSV, csv(plan, results))
        .add(
            SUMMARY_JSON,
            serde_json::to_vec_pretty(&summary).map_err(|e| e.to_string())?,
        )
        .add(REPORT_HTML, html::render(plan, &cells));
    Ok(set)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn opt_secs(n: Option<stormbreak_policy::Nanos>) -> String {
    n.map_or_else(String::new, |n| secs(n).to_string())
}

/// `sweep.csv`: tidy, one row per run.
pub fn csv(plan: &Plan, results: &[RunResult]) -> String {
    let mut out = String::from("cell,run");
    for a in &plan.axes {
        out.push(',');
        out.push_str(&csv_field(a.path.as_str()));
    }
    out.push_str(
        ",seed,class,recovery_s,breach_start_s,max_interval_amplification,window_amplification,error_rate,bounds_hit\n",
    );
    for r in results {
        let c = &plan.cells[r.cell];
        let _ = write!(out, "{},{}", r.cell, r.run);
        for v in &c.values {
            out.push(',');
            out.push_str(&csv_field(&display(v)));
        }
        let o = &r.outcome;
        let _ = writeln!(
            out,
            ",{},{},{},{},{},{},{},{}",
            r.seed,
            o.class.name(),
            opt_secs(o.recovery),
            opt_secs(o.breach_start),
            o.max_interval_amplification,
            o.window_amplification,
            o.error_rate,
            r.bounds_hit
        );
    }
    out
}

fn summary_json(plan: &Plan, cells: &[CellSummary]) -> Json {
    let mut counts = serde_json::Map::new();
    for class in Class::ALL {
        let n: usize = cells
            .iter()
            .map(|c| c.classes.iter().filter(|&&k| k == class).count())
            .sum();
        // `stopped` is counted only when a run was: a sweep no limit
        // stopped writes the summary it always did.
        if class != Class::Stopped || n > 0 {
            counts.insert(class.name().to_owned(), n.into());
        }
    }
    json!({
        "schema": SUMMARY_SCHEMA,
        "scenario": plan.name,
        "file": plan.file,
        "sweep_seed": plan.sweep_seed,
        "spec": plan.spec,
        "axes": plan.axes.iter().map(|a| json!({
            "path": a.path.as_str(),
            "spec": a.text,
            "points": if plan.spec.samples.is_none() {
                Json::from(a.points().iter().map(display).collect::<Vec<_>>())
            } else {
                Json::Null
            },
        })).collect::<Vec<_>>(),
        "slos": plan.slos,
        "runs": plan.runs(),
        "classes": counts,
        "cells": cells,
    })
}

/// `shard.json`: what [`merge`] needs to rebuild the plan and the
/// shard's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFile {
    schema: String,
    file: String,
    text: String,
    spec: SweepSpec,
    shard: Shard,
    runs: Vec<StoredRun>,
}

/// The shard file of `shard`'s results.
pub fn shard_file(plan: &Plan, shard: Shard, results: &[RunResult]) -> Result<OutputSet, String> {
    let f = ShardFile {
        schema: SHARD_SCHEMA.to_owned(),
        file: plan.file.clone(),
        text: plan.text.clone(),
        spec: plan.spec.clone(),
        shard,
        runs: results.iter().map(StoredRun::from).collect(),
    };
    let mut set = OutputSet::new();
    set.add(
        SHARD_JSON,
        serde_json::to_vec(&f).map_err(|e| e.to_string())?,
    );
    Ok(set)
}

/// Reads one `shard.json` (`name` for errors).
pub fn read_shard(name: &str, bytes: &[u8]) -> Result<ShardFile, String> {
    let f: ShardFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("{name}: not a sweep shard file: {e}"))?;
    if f.schema != SHARD_SCHEMA {
        return Err(format!(
            "{name}: schema {:?}, expected {SHARD_SCHEMA:?}",
            f.schema
        ));
    }
    Ok(f)
}

/// Combines every shard of one sweep into the files a single run writes.
/// Refuses shards of different sweeps, a missing or repeated shard, and a
/// shard whose runs are not exactly its cells'.
pub fn merge(shards: &[(String, ShardFile)]) -> Result<(Plan, OutputSet), String> {
    let Some((first_name, first)) = shards.first() else {
        return Err("merge needs at least one shard directory".to_owned());
    };
    let count = first.shard.count;
    let mut seen = vec![None::<&str>; count];
    for (name, s) in shards {
        if s.file != first.file || s.text != first.text || s.spec != first.spec {
            return Err(format!(
                "{name} is a shard of another sweep than {first_name} (scenario or spec differ)"
            ));
        }
        if s.shard.count != count {
            return Err(format!(
                "{name} is shard {}/{}, {first_name} is of {count} shards",
                s.shard.index + 1,
                s.shard.count
            ));
        }
        if let Some(other) = seen[s.shard.index].replace(name) {
            return Err(format!(
                "shard {}/{count} is given twice: {other} and {name}",
                s.shard.index + 1
            ));
        }
    }
    if let Some(missing) = seen.iter().position(Option::is_none) {
        return Err(format!(
            "shard {}/{count} is missing; give every shard's directory",
            missing + 1
        ));
    }
    let plan = Plan::new(&first.file, &first.text, first.spec.clone())?;
    let mut results: Vec<RunResult> = Vec::with_capacity(plan.runs());
    for (name, s) in shards {
        let expected = crate::run::runs_in(&plan, s.shard);
        let ok = s.runs.len() == expected
            && s.runs.iter().all(|r| {
                r.cell_index() < plan.cells.len()
                    && s.shard.has(r.cell_index())
                    && r.run_index() < plan.seeds_per_cell()
            });
        if !ok {
            return Err(format!(
                "{name}: its runs are not those of shard {}/{count} ({expected} expected, {} found)",
                s.shard.index + 1,
                s.runs.len()
            ));
        }
        results.extend(s.runs.iter().map(RunResult::from));
    }
    results.sort_by_key(|r| (r.cell, r.run));
    results.dedup_by_key(|r| (r.cell, r.run));
    let set = outputs(&plan, &results)?;
    Ok((plan, set))
}

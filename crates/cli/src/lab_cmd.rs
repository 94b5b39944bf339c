//! `stormbreak lab FILE`: the scenario run for real on loopback (crate
//! `stormbreak-lab`, documented in docs/lab.md), written as a run's
//! outputs plus `lab.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use stormbreak_lab::{LabOptions, LabPlan, Stop};
use stormbreak_report::REPORT_FILE;
use stormbreak_sim::Scenario;
use stormbreak_sim::output::{OutputSet, summary_json};

/// The lab's side file: per-interval figures only a real run has.
pub const LAB_FILE: &str = "lab.json";

/// Flags of `stormbreak lab`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario file (TOML); see docs/scenarios.md and docs/lab.md for what the lab runs.
    pub file: PathBuf,
    /// Output directory, replaced whole [default: ./stormbreak-out/<scenario name>-lab/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// RNG seed; overrides the scenario's `seed`.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::parse_u64)]
    pub seed: Option<u64>,
    /// Run this fraction of the traffic with pods scaled alike; replicas × F must be whole.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true, value_parser = crate::simulate::parse_scale)]
    pub scale: f64,
    /// Longest scenario duration the lab agrees to run, in seconds (1 to 3600).
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration_cap: u64,
    /// Also run the simulator on the same scenario, seed and scale, print
    /// both sides per route (class, peak error rate, amplification,
    /// saturation and recovery times, as `stormbreak sweep` classifies)
    /// and write compare.json; report.html overlays both runs.
    #[arg(long)]
    pub compare: bool,
    /// With --compare: a breach ending within this of the trigger's end is
    /// "recovered", later "slow" (as `stormbreak sweep`'s flag).
    #[arg(long, value_parser = crate::sweep_cmd::parse_duration_flag, default_value = "60s", requires = "compare")]
    pub recover_within: stormbreak_policy::Nanos,
    /// With --compare: less observation than this after the trigger is
    /// "undetermined" [default: --recover-within].
    #[arg(long, value_parser = crate::sweep_cmd::parse_duration_flag, requires = "compare")]
    pub observe: Option<stormbreak_policy::Nanos>,
    /// With --compare: run both sides N times, over seeds seed, seed+1, …
    /// (2 to 100), and report each route's runs by class on both sides;
    /// invalid lab runs are left out and counted. Writes repeat.json.
    #[arg(long, value_name = "N", requires = "compare", value_parser = clap::value_parser!(u32).range(2..=100))]
    pub repeat: Option<u32>,
    /// Write each route's entry URLs to FILE (JSON, `stormbreak.lab-entries/1`)
    /// when the run's clock starts, for `stormbreak probe` aimed at the lab.
    #[arg(long, value_name = "FILE")]
    pub entries: Option<PathBuf>,
    /// Window of recovery.json's per-route table (degraded at, recovered
    /// at, as the replay's per-path table reads them; default the replay's
    /// 5 minutes, at least one recording interval).
    #[arg(long, value_name = "DURATION", value_parser = crate::sweep_cmd::parse_duration_flag, default_value = "5m")]
    pub recovery_window: stormbreak_policy::Nanos,
}

/// The file `--repeat` writes.
pub const REPEAT_FILE: &str = "repeat.json";

/// Requests of each kind `--compare` measures a guard hop with.
const OVERHEAD_SAMPLES: u32 = 200;

/// The comparison's file, written with `--compare`.
pub const COMPARE_FILE: &str = "compare.json";

/// Runs `stormbreak lab`: 0 for a valid run, [`stormbreak_lab::EXIT_INVALID`]
/// for a finished but invalid one (outputs written), 1 on an error.
pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(stormbreak_lab::EXIT_INVALID),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<bool, String> {
    let file = args.file.display().to_string();
    let text = crate::simulate::read_scenario(&args.file)?;
    let scenario = Scenario::parse(&file, &text).map_err(|e| e.to_string())?;
    for w in &scenario.warnings {
        eprintln!("warning: {w}");
    }
    let opts = LabOptions {
        seed: args.seed,
        scale: args.scale,
        duration_cap: std::time::Duration::from_secs(args.duration_cap),
        entries: args.entries.clone(),
        ..LabOptions::default()
    };
    let plan = LabPlan::new(&scenario, &opts).map_err(|e| format!("{file}: {e}"))?;
    // Checked before the run: a scenario the comparison cannot classify
    // (no trigger) is refused before a minute is spent on it.
    let classify = if args.compare {
        let opts =
            stormbreak_sweep::classify::ClassifyOptions::new(args.recover_within, args.observe)?;
        stormbreak_sweep::classify::Timeline::of(&scenario)
            .map_err(|e| format!("{file}: --compare: {e}"))?;
        Some(opts)
    } else {
        None
    };
    let out = match args.out {
        Some(out) => out,
        None => crate::default_out(&format!("{}-lab", scenario.scenario.name))
            .map_err(|e| format!("{file}: {e}"))?,
    };
    let out_dir = crate::prepare_out(&out)?;
    // What the scenario does not say (a guard hop's and a connection's
    // cost here) is measured before comparing, never fitted.
    let overhead = match classify {
        Some(_) => {
            let o = stormbreak_lab::overhead::measure(OVERHEAD_SAMPLES)
                .map_err(|e| format!("measuring a guard hop: {e}"))?;
            eprintln!("lab: {o}");
            Some(o)
        }
        None => None,
    };
    if let (Some(n), Some(classify)) = (args.repeat, classify) {
        let runs = Repeat {
            scenario: &scenario,
            file: &file,
            opts: &opts,
            first_seed: plan.seed,
            n,
            classify,
            overhead,
        };
        return repeat(runs, &out, &out_dir);
    }
    eprintln!(
        "lab: running {:?} for {} on loopback",
        plan.name,
        stormbreak_policy::units::format_duration(plan.duration)
    );
    let run = stormbreak_lab::run(&plan, &Stop::default()).map_err(|e| format!("{file}: {e}"))?;
    let rec = &run.recording;
    let compared = match classify {
        Some(opts) => {
            let sim = stormbreak_lab::compare::simulate(&scenario, plan.seed, plan.scale)
                .map_err(|e| format!("{file}: --compare: {e}"))?;
            let c = stormbreak_lab::compare::Comparison::new(&scenario, &sim, rec, opts)
                .map_err(|e| format!("{file}: --compare: {e}"))?;
            Some((sim, c))
        }
        None => None,
    };
    let html = match &compared {
        Some((sim, _)) => {
            stormbreak_report::render(&[("lab", rec), ("simulator", sim)], &Default::default())
        }
        None => stormbreak_report::render(&[(plan.name.as_str(), rec)], &Default::default()),
    };
    let mut set = OutputSet::of_recording(rec, None)
        .map_err(|e| format!("{}: cannot encode outputs: {e}", out.display()))?;
    let figures = serde_json::to_value(&run.figures).expect("plain data");
    let mut summary = summary_json(rec, None);
    summary["lab"] = figures.clone();
    set.add(
        "summary.json",
        serde_json::to_vec_pretty(&summary).expect("plain data"),
    );
    let side = serde_json::json!({
        "schema": "stormbreak.lab/1",
        "interval_s": rec.interval.as_secs_f64(),
        "figures": figures,
        "routes": run.series,
    });
    set.add(
        LAB_FILE,
        serde_json::to_vec_pretty(&side).expect("plain data"),
    );
    set.add(REPORT_FILE, html);
    crate::simulate::add_recovery(&mut set, rec, args.recovery_window);
    if let Some((_, c)) = &compared {
        let doc = serde_json::json!({
            "schema": "stormbreak.lab-compare/1",
            "seed": plan.seed,
            "scale": plan.scale,
            "valid": run.figures.validity.valid,
            "overhead": overhead,
            "goals": stormbreak_lab::compare::GOALS,
            "comparison": c,
        });
        set.add(
            COMPARE_FILE,
            serde_json::to_vec_pretty(&doc).expect("plain data"),
        );
    }
    crate::write_out(&out_dir, &set)?;
    print!("{}", crate::table::route_table(rec));
    let f = &run.figures;
    println!(
        "lab: wall {:.1} s, CPU {} s; slip p99 {:.2} ms, timer lateness p99 {:.2} ms, dropped {} of {}, listen overflows {}",
        f.wall_s,
        f.cpu_s.map_or("?".to_owned(), |c| format!("{c:.1}")),
        f.validity.slip_p99_ms,
        f.validity.timer_late_p99_ms,
        f.validity.dropped,
        f.validity.intended,
        f.validity
            .listen_overflows
            .map_or("?".to_owned(), |o| o.to_string()),
    );
    if let Some((_, c)) = &compared {
        println!("compare (simulator / lab, seed {}):", plan.seed);
        print!("{}", c.table());
        if let Some(o) = overhead {
            println!("{o}");
        }
    }
    println!("outputs: {}", out.display());
    if !f.validity.valid {
        eprintln!("lab: this run is INVALID:");
        for r in &f.validity.reasons {
            eprintln!("  - {r}");
        }
    }
    Ok(f.validity.valid)
}

/// What `--repeat` runs.
struct Repeat<'a> {
    scenario: &'a Scenario,
    file: &'a str,
    opts: &'a LabOptions,
    first_seed: u64,
    n: u32,
    classify: stormbreak_sweep::classify::ClassifyOptions,
    overhead: Option<stormbreak_lab::overhead::Overhead>,
}

/// `--repeat N`: N lab runs and N simulator runs over seeds `first_seed`,
/// `first_seed + 1`, …, compared run by run; each route's runs by class
/// on both sides, invalid lab runs left out and counted. `Ok(false)` (exit
/// 3) when any lab run was invalid.
fn repeat(
    r: Repeat<'_>,
    out: &std::path::Path,
    out_dir: &stormbreak_sim::output::OutDir,
) -> Result<bool, String> {
    use stormbreak_lab::compare::{self, Comparison, RepeatRun};
    let mut runs = Vec::with_capacity(r.n as usize);
    for k in 0..r.n {
        let seed = r.first_seed.wrapping_add(u64::from(k));
        let opts = LabOptions {
            seed: Some(seed),
            ..r.opts.clone()
        };
        let plan = LabPlan::new(r.scenario, &opts).map_err(|e| format!("{}: {e}", r.file))?;
        eprintln!("lab: run {} of {}, seed {seed}", k + 1, r.n);
        let run =
            stormbreak_lab::run(&plan, &Stop::default()).map_err(|e| format!("{}: {e}", r.file))?;
        let sim = compare::simulate(r.scenario, seed, plan.scale)
            .map_err(|e| format!("{}: --compare: {e}", r.file))?;
        let comparison = Comparison::new(r.scenario, &sim, &run.recording, r.classify)
            .map_err(|e| format!("{}: --compare: {e}", r.file))?;
        let v = &run.figures.validity;
        runs.push(RepeatRun {
            seed,
            valid: v.valid,
            reasons: v.reasons.clone(),
            comparison,
        });
    }
    let shares = compare::shares(&runs);
    let doc = serde_json::json!({
        "schema": "stormbreak.lab-repeat/1",
        "first_seed": r.first_seed,
        "overhead": r.overhead,
        "runs": runs,
        "shares": shares,
        "goals": "lock-in (metastable) shares within 0.3",
    });
    let mut set = stormbreak_sim::output::OutputSet::new();
    set.add(
        REPEAT_FILE,
        serde_json::to_vec_pretty(&doc).expect("plain data"),
    );
    crate::write_out(out_dir, &set)?;
    println!(
        "repeat: {} runs, seeds {} to {}:",
        r.n,
        r.first_seed,
        r.first_seed.wrapping_add(u64::from(r.n - 1))
    );
    print!("{}", compare::shares_table(&shares, &runs));
    if let Some(o) = r.overhead {
        println!("{o}");
    }
    println!("outputs: {}", out.display());
    Ok(runs.iter().all(|x| x.valid))
}

//! `stormbreak sweep FILE --axis …` and `stormbreak sweep merge DIR…`.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stormbreak_policy::Nanos;
use stormbreak_policy::units::parse_duration;
use stormbreak_sweep::classify::ClassifyOptions;
use stormbreak_sweep::k8s::{self, JobOptions, object_name};
use stormbreak_sweep::output::{self, SHARD_JSON};
use stormbreak_sweep::plan::MAX_SEEDS;
use stormbreak_sweep::plan::{Plan, SweepSpec};
use stormbreak_sweep::run::{self, Shard};
use stormbreak_sweep::seeds::Seeds;

/// Flags of `stormbreak sweep`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Scenario file (TOML); see docs/scenarios.md and docs/sweep.md.
    file: Option<PathBuf>,
    /// An axis, PATH=SPEC: `client.users.rate=0.6k/s..1.0k/s:9`,
    /// `action.cut.for=1s..30s:log:12`, `service.db.app.workers=0.8x..1.2x:5`,
    /// or a list `a,b,c` (repeat the flag for more axes; grammar in docs/sweep.md).
    #[arg(long = "axis", value_name = "PATH=SPEC")]
    axes: Vec<String>,
    /// A Latin-hypercube sample of N cells instead of the full grid.
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// Runs per cell: a count (3: seeds derived from --seed and the cell),
    /// a list (1,2,3) or a range (1..=10) of the simulator's own seeds;
    /// one chosen seed is 7..=7 or "7," (grammar in docs/sweep.md).
    #[arg(long, default_value = "1", value_name = "SEEDS", value_parser = parse_seeds)]
    seeds: Seeds,
    /// Sweep seed [default: the scenario's seed]; every run's seed derives
    /// from it and the cell's coordinates.
    #[arg(long, value_parser = crate::parse_u64)]
    seed: Option<u64>,
    /// A breach ending within this of the trigger's end is "recovered",
    /// later "slow" (`classify::DEFAULT_RECOVER_WITHIN`).
    #[arg(long, value_parser = parse_duration_flag, default_value = "60s")]
    recover_within: Nanos,
    /// Less observation than this after the trigger is "undetermined"
    /// [default: --recover-within].
    #[arg(long, value_parser = parse_duration_flag)]
    observe: Option<Nanos>,
    /// Simulate this fraction of the traffic in every run (0 < F ≤ 1000).
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true, value_parser = crate::simulate::parse_scale)]
    scale: f64,
    /// Worker threads [default: the machine's parallelism]; outputs are
    /// byte-identical whatever it is.
    #[arg(long, value_parser = crate::parallel::parse_jobs)]
    jobs: Option<usize>,
    /// Run only shard I of N (cells whose index is I−1 modulo N) and write
    /// its shard.json, for `stormbreak sweep merge`.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// Run the shard JOB_COMPLETION_INDEX (0-based, as a Kubernetes
    /// Indexed Job sets it) of N.
    #[arg(long, value_name = "N", conflicts_with = "shard")]
    shard_from_env: Option<usize>,
    /// Read the sweep spec (axes, samples, seeds, seed, classification,
    /// scale) from this JSON file, as `--emit-k8s-job` writes it, instead
    /// of from flags.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["axes", "samples", "seeds", "seed", "recover_within", "observe", "scale"])]
    spec: Option<PathBuf>,
    /// Write a Kubernetes Indexed Job and ConfigMap that run the sweep as
    /// --shards shards into DIR, instead of running it.
    #[arg(long, value_name = "DIR", requires = "image")]
    emit_k8s_job: Option<PathBuf>,
    /// Container image holding the stormbreak binary (with --emit-k8s-job).
    #[arg(long, requires = "emit_k8s_job")]
    image: Option<String>,
    /// Shards of the emitted Job (its completions).
    #[arg(long, default_value_t = 8, requires = "emit_k8s_job")]
    shards: usize,
    /// Pods of the emitted Job at once [default: --shards].
    #[arg(long, requires = "emit_k8s_job")]
    parallelism: Option<usize>,
    /// Existing PersistentVolumeClaim the emitted Job's shards write to
    /// [default: <scenario>-sweep-out].
    #[arg(long, requires = "emit_k8s_job")]
    claim: Option<String>,
    /// Raise or lower a limit of the engine for every run, NAME=VALUE
    /// (repeatable; names and defaults in docs/scenarios.md, "Limits of a
    /// run"). A run a limit stops is classed "stopped" and the sweep goes on.
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    limits: Vec<String>,
    /// Also write each run's recording, as `simulate --seed SEED` writes
    /// its recording.json, to cell-C-run-K.recording.json (at most 1 000 runs).
    #[arg(long, conflicts_with_all = ["shard", "shard_from_env", "emit_k8s_job"])]
    keep_series: bool,
    /// Output directory, replaced whole [default: ./stormbreak-out/<scenario>-sweep/].
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress: neither the bar (on a terminal) nor the lines logged
    /// every twentieth of the runs (otherwise).
    #[arg(long)]
    quiet: bool,
}

/// The environment variable a Kubernetes Indexed Job sets in each pod.
const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

fn shard_from_env(n: usize) -> Result<Shard, String> {
    let v = std::env::var(COMPLETION_INDEX_ENV)
        .map_err(|_| format!("--shard-from-env: {COMPLETION_INDEX_ENV} is not set"))?;
    let i: usize = v.trim().parse().map_err(|_| {
        format!("--shard-from-env: {COMPLETION_INDEX_ENV}={v:?} is not a whole number")
    })?;
    Shard::parse(&format!("{}/{n}", i.saturating_add(1)))
        .map_err(|e| format!("--shard-from-env: {COMPLETION_INDEX_ENV}={i} of {n} shards: {e}"))
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Combine shard directories into exactly what one sweep writes.
    #[command(after_help = crate::EXIT_CODES_HELP)]
    Merge(MergeArgs),
}

/// Flags of `stormbreak sweep merge`.
#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Shard output directories (each holding a shard.json).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Output directory, replaced whole [default: ./stormbreak-out/<scenario>-sweep/].
    #[arg(long)]
    out: Option<PathBuf>,
}

fn parse_seeds(s: &str) -> Result<Seeds, String> {
    Seeds::parse(s, MAX_SEEDS)
}

pub(crate) fn parse_duration_flag(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Runs `stormbreak sweep`.
pub fn run(args: Args) -> Result<(), String> {
    if let Some(Sub::Merge(m)) = args.command {
        return merge(m);
    }
    let file = args
        .file
        .ok_or("expected a scenario FILE (or `sweep merge DIR…`)")?;
    crate::set_limits(&args.limits)?;
    let text = crate::simulate::read_scenario(&file)?;
    let spec = match &args.spec {
        Some(path) => {
            let bytes = read_bounded(path, 1024 * 1024)?;
            serde_json::from_slice::<SweepSpec>(&bytes)
                .map_err(|e| format!("{}: not a sweep spec: {e}", path.display()))?
        }
        None => SweepSpec {
            axes: args.axes,
            samples: args.samples,
            seeds: args.seeds,
            seed: args.seed,
            classify: ClassifyOptions::new(args.recover_within, args.observe)?,
            scale: args.scale,
        },
    };
    let name = file.display().to_string();
    let mut plan = Plan::new(&name, &text, spec)?;
    plan.limits = crate::run_limits();
    if let Some(dir) = args.emit_k8s_job {
        let opts = JobOptions {
            image: args.image.unwrap_or_default(),
            shards: args.shards,
            parallelism: args.parallelism.unwrap_or(args.shards),
            claim: args
                .claim
                .unwrap_or_else(|| format!("{}-out", object_name(&plan.name))),
        };
        let set = k8s::manifests(&plan, &opts)?;
        let out_dir = crate::prepare_out(&dir)?;
        crate::write_out(&out_dir, &set)?;
        println!(
            "wrote {} and {} for {} shards of {} runs: {}",
            k8s::CONFIGMAP_FILE,
            k8s::JOB_FILE,
            opts.shards,
            plan.runs(),
            dir.display()
        );
        return Ok(());
    }
    let chosen = match args.shard_from_env {
        Some(n) => Some(shard_from_env(n)?),
        None => args.shard,
    };
    let shard = chosen.unwrap_or(Shard::ALL);
    let out = match args.out {
        Some(o) => o,
        None => default_out(&plan, chosen)?,
    };
    let out_dir = crate::prepare_out(&out)?;
    let total = run::runs_in(&plan, shard);
    let progress = Progress::new(total, args.quiet);
    let jobs = args.jobs.unwrap_or_else(crate::parallel::default_jobs);
    let done = run::run_keeping(&plan, shard, jobs, args.keep_series, || progress.inc());
    progress.finish();
    let (results, kept) = done?;
    let mut set = match chosen {
        Some(s) => output::shard_file(&plan, s, &results)?,
        None => output::outputs(&plan, &results)?,
    };
    for k in kept {
        set.add(&k.file_name(), k.json);
    }
    crate::write_out(&out_dir, &set)?;
    print_counts(&results);
    println!("outputs: {}", out.display());
    Ok(())
}

fn merge(m: MergeArgs) -> Result<(), String> {
    let mut shards = Vec::with_capacity(m.dirs.len());
    for d in &m.dirs {
        let path = d.join(SHARD_JSON);
        let name = path.display().to_string();
        // A shard file holds the scenario (≤ 4 MiB) and one short record
        // per run (≤ 100 000): refuse anything far larger.
        let bytes = read_bounded(&path, 64 * 1024 * 1024)?;
        shards.push((name.clone(), output::read_shard(&name, &bytes)?));
    }
    let (plan, set) = output::merge(&shards)?;
    let out = match m.out {
        Some(o) => o,
        None => default_out(&plan, None)?,
    };
    let out_dir = crate::prepare_out(&out)?;
    crate::write_out(&out_dir, &set)?;
    println!("merged {} shards: {}", shards.len(), out.display());
    Ok(())
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("{}: cannot read: {e}", path.display());
    let f = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "{}: larger than {} MiB, not a shard file this sweep wrote",
            path.display(),
            max / (1024 * 1024)
        ));
    }
    Ok(bytes)
}

fn default_out(plan: &Plan, shard: Option<Shard>) -> Result<PathBuf, String> {
    let base = crate::default_out(&plan.name).map_err(|e| format!("{}: {e}", plan.file))?;
    let mut name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.push_str("-sweep");
    if let Some(s) = shard {
        name.push_str(&format!("-shard-{}-of-{}", s.index + 1, s.count));
    }
    Ok(base.with_file_name(name))
}

/// Progress on standard error: a bar with an ETA on a terminal, else
/// (a CI log, `2>file`) a line every [`log_every`] runs and after the last,
/// so a long sweep in a pipeline still shows that it advances.
enum Progress {
    Bar(ProgressBar),
    Log {
        total: usize,
        every: usize,
        done: std::sync::Mutex<usize>,
    },
}

/// Runs between two progress lines when standard error is not a
/// terminal: a twentieth of the sweep (at least one), so a sweep logs
/// about 20 lines whatever its size.
fn log_every(total: usize) -> usize {
    total.div_ceil(20).max(1)
}

impl Progress {
    fn new(total: usize, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        if !quiet && !std::io::stderr().is_terminal() {
            return Progress::Log {
                total,
                every: log_every(total),
                done: std::sync::Mutex::new(0),
            };
        }
        let target = if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(total as u64), target);
        bar.set_style(
            ProgressStyle::with_template("sweeping [{bar:30}] {pos}/{len} runs, ETA {eta}")
                .expect("static template")
                .progress_chars("=> "),
        );
        Progress::Bar(bar)
    }

    /// One more run done (called from any worker thread).
    fn inc(&self) {
        match self {
            Progress::Bar(bar) => bar.inc(1),
            Progress::Log { total, every, done } => {
                // Counted and printed under one lock, so lines come in order.
                let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
                *done += 1;
                if done.is_multiple_of(*every) || *done == *total {
                    eprintln!(
                        "sweeping: {}/{total} runs done ({}%)",
                        *done,
                        *done * 100 / (*total).max(1)
                    );
                }
            }
        }
    }

    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

fn print_counts(results: &[run::RunResult]) {
    use stormbreak_sweep::classify::Class;
    let counts: Vec<String> = Class::ALL
        .iter()
        .filter_map(|c| {
            let n = results.iter().filter(|r| r.outcome.class == *c).count();
            // As in summary.json: `stopped` only when a run was.
            (*c != Class::Stopped || n > 0).then(|| format!("{n} {}", c.name()))
        })
        .collect();
    println!("{} runs: {}", results.len(), counts.join(", "));
    let stopped: Vec<&str> = results.iter().filter_map(|r| r.stopped_by).collect();
    if let Some(first) = stopped.first() {
        eprintln!(
            "warning: {} runs were stopped by a limit of the engine (class \"stopped\" in sweep.csv), \
             the first by {first}; if the runs are meant to hold more, raise it with \
             --limit {first}=N (docs/scenarios.md, \"Limits of a run\")",
            stopped.len()
        );
    }
    let bounded = results.iter().filter(|r| r.bounds_hit > 0).count();
    if bounded > 0 {
        eprintln!(
            "warning: {bounded} runs hit an engine bound (a refusal no scenario asked for, \
             counted in sweep.csv's bounds_hit; see docs/scenarios.md, \"Limits of a run\"): \
             give the queue that filled a `queue` of its own"
        );
    }
}

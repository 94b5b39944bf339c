//! `stormbreak replay --sensitivity`: which of the replay's assumptions its
//! verdict rests on. The analysis is `stormbreak_sweep::sensitivity`; this
//! module reads the flags, shows progress and writes the outputs.

use stormbreak_sim::replay;
use stormbreak_sweep::seeds::{self, Seeds};
use stormbreak_sweep::sensitivity::{self, Change, Plan, Spec};

use std::path::Path;

/// The flags of `stormbreak replay` that only `--sensitivity` reads,
/// flattened into the replay's own (their `requires = "sensitivity"`
/// names the replay's flag: clap resolves ids across a flatten).
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    /// With --sensitivity: only these assumptions (comma-separated names
    /// such as service.auth-cus.app.service_time.mean; --list-assumptions).
    #[arg(
        long,
        value_name = "NAMES",
        requires = "sensitivity",
        value_delimiter = ','
    )]
    pub only: Vec<String>,
    /// With --sensitivity: the changes made to each assumption
    /// [default: -25%,-10%,+10%,+25%].
    #[arg(
        long,
        value_name = "LIST",
        requires = "sensitivity",
        allow_hyphen_values = true,
        value_parser = parse_changes
    )]
    pub changes: Option<ChangeList>,
    /// With --sensitivity: seeds every variant runs on, in the sweep's
    /// grammar: a list (1,2,3), a range (1..=5), one seed ("7," or 7..=7), or
    /// a count (3: the scenario's seed and two derived from it)
    /// [default: --seed, else the scenario's].
    #[arg(
        long,
        value_name = "SEEDS",
        requires = "sensitivity",
        conflicts_with = "seed",
        value_parser = parse_seeds
    )]
    pub seeds: Option<SeedList>,
    /// With --sensitivity: print the assumptions it would vary, and exit.
    #[arg(long, requires = "sensitivity")]
    pub list_assumptions: bool,
}

/// The replay's flags a sensitivity run shares with every other replay.
#[derive(Debug, Clone, Copy)]
pub struct Common<'a> {
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--scale`.
    pub scale: f64,
    /// `--out`.
    pub out: Option<&'a Path>,
    /// `--quiet`.
    pub quiet: bool,
    /// `--jobs`.
    pub jobs: Option<usize>,
}

/// A parsed `--changes` list.
#[derive(Debug, Clone)]
pub struct ChangeList(Vec<Change>);

/// Parses `--changes -25%,+10%`.
pub fn parse_changes(s: &str) -> Result<ChangeList, String> {
    Change::parse_list(s).map(ChangeList)
}

/// A parsed `--seeds`, in the grammar `stormbreak sweep` shares
/// (`stormbreak_sweep::seeds`).
#[derive(Debug, Clone)]
pub struct SeedList(Seeds);

/// Parses `--seeds`: a count (`3`: the scenario's seed and two derived from
/// it), a list (`1,2,3`) or a range (`1..=5`); one chosen seed is `7,` or
/// `7..=7` (1 to [`sensitivity::MAX_SEEDS`] seeds).
pub fn parse_seeds(s: &str) -> Result<SeedList, String> {
    Seeds::parse(s, sensitivity::MAX_SEEDS as u32).map(SeedList)
}

/// Runs the analysis the flags describe.
pub fn run(args: &Flags, common: &Common<'_>) -> Result<(), String> {
    let base = replay::scenario().map_err(|e| e.to_string())?;
    let seeds = match (&args.seeds, common.seed) {
        (Some(list), _) => list.0.all(|k| seeds::derived(base.scenario.seed, k)),
        (None, Some(seed)) => vec![seed],
        (None, None) => vec![base.scenario.seed],
    };
    let spec = Spec {
        file: replay::SCENARIO_FILE.to_owned(),
        text: replay::SCENARIO_TOML.to_owned(),
        scale: common.scale,
        seeds,
        changes: args
            .changes
            .as_ref()
            .map_or_else(|| Change::DEFAULT.to_vec(), |c| c.0.clone()),
        only: args.only.iter().map(|s| s.trim().to_owned()).collect(),
    };
    let plan = Plan::new(spec)?;
    if args.list_assumptions {
        for a in plan.assumptions() {
            let linked = if a.linked.is_empty() {
                String::new()
            } else {
                format!("  (with {})", a.linked.join(", "))
            };
            println!("{} = {}{linked}", a.name, a.base);
        }
        return Ok(());
    }
    let out = match common.out {
        Some(out) => out.to_path_buf(),
        None => crate::default_out(replay::scenario_name())?.join("sensitivity"),
    };
    let out_dir = crate::prepare_out(&out)?;
    let bar = if common.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(plan.runs() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sensitivity: {pos}/{len} runs [{bar:30}] {elapsed}, ETA {eta}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar
    };
    let jobs = common.jobs.unwrap_or_else(crate::parallel::default_jobs);
    let report = plan.run(jobs, || bar.inc(1));
    bar.finish_and_clear();
    let report = report?;
    let mut json = serde_json::to_vec_pretty(&report.json())
        .map_err(|e| format!("{}: cannot encode outputs: {e}", out.display()))?;
    json.push(b'\n');
    let table = report.table();
    let mut set = stormbreak_sim::output::OutputSet::new();
    set.add(sensitivity::FILE, json)
        .add("sensitivity.md", table.clone());
    crate::write_out(&out_dir, &set)?;
    print!("{table}");
    println!("\noutputs: {}", out.display());
    Ok(())
}

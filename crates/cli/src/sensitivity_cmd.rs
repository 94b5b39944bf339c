//! `stormbreak replay --sensitivity`: which of the replay's assumptions its
//! verdict rests on. The analysis is `stormbreak_sweep::sensitivity`; this
//! module reads the flags, shows progress and writes the outputs.

use stormbreak_sim::replay;
use stormbreak_sweep::seeds::{self, Seeds};
use stormbreak_sweep::sensitivity::{self, Change, Plan, Spec};

use crate::replay::Args;

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
pub fn run(args: &Args) -> Result<(), String> {
    let base = replay::scenario().map_err(|e| e.to_string())?;
    let seeds = match (&args.seeds, args.seed) {
        (Some(list), _) => list.0.all(|k| seeds::derived(base.scenario.seed, k)),
        (None, Some(seed)) => vec![seed],
        (None, None) => vec![base.scenario.seed],
    };
    let spec = Spec {
        file: replay::SCENARIO_FILE.to_owned(),
        text: replay::SCENARIO_TOML.to_owned(),
        scale: args.scale,
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
    let out = match &args.out {
        Some(out) => out.clone(),
        None => crate::default_out(replay::scenario_name())?.join("sensitivity"),
    };
    let out_dir = crate::prepare_out(&out)?;
    let bar = if args.quiet {
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
    let jobs = args.jobs.unwrap_or_else(crate::parallel::default_jobs);
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

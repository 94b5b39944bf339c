//! `stormbreak replay`: the 2026-08-17 incident from its mechanisms, and
//! the five follow-ups that prevent it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use stormbreak_report::{EXTRAS_FILE, REPORT_FILE, ReportExtras, Table};
use stormbreak_sim::Recording;
use stormbreak_sim::engine::RunOptions;
use stormbreak_sim::output::OutputSet;
use stormbreak_sim::replay::{self, Fix, ReplaySummary};

use crate::simulate::{parse_scale, simulate_with_progress};

/// Flags of `stormbreak replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Apply all five follow-ups and no operator actions.
    #[arg(long, conflicts_with_all = ["fix", "ablation"])]
    pub fixed: bool,
    /// Apply these follow-ups (comma-separated: autoscaling, limits, retries,
    /// single-flight, failover) and no operator actions.
    #[arg(long, value_name = "LIST", value_parser = parse_fixes)]
    pub fix: Option<FixList>,
    /// Run each follow-up alone and all-but-one, and rank them.
    #[arg(long)]
    pub ablation: bool,
    /// Run as it happened and with the follow-ups (all five, or --fix), side by side.
    #[arg(long, conflicts_with = "ablation")]
    pub compare: bool,
    /// Fraction of the published traffic to simulate (capacities scaled alike; 0 < F ≤ 1000).
    #[arg(
        long,
        default_value_t = replay::DEFAULT_SCALE,
        allow_hyphen_values = true,
        value_parser = parse_scale
    )]
    pub scale: f64,
    /// RNG seed [default: the scenario's].
    #[arg(long, allow_negative_numbers = true, value_parser = crate::parse_u64)]
    pub seed: Option<u64>,
    /// Output directory, replaced whole: new, empty, or one Stormbreak wrote
    /// [default: ./stormbreak-out/github-2026-08-17/<variant>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the replay summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Vary each ASSUMPTION number of the scenario by --changes, one at a
    /// time, and report which the verdict rests on (docs/replay.md).
    #[arg(long, conflicts_with_all = ["fixed", "fix", "ablation", "compare", "json"])]
    pub sensitivity: bool,
    /// The flags only --sensitivity reads.
    #[command(flatten)]
    pub sensitivity_flags: crate::sensitivity_cmd::Flags,
    /// Simulations to run at once for --ablation, --compare and
    /// --sensitivity [default: the cores available]. Outputs are the same
    /// whatever it is.
    #[arg(long, value_name = "N", value_parser = crate::parallel::parse_jobs)]
    pub jobs: Option<usize>,
    /// Raise or lower a limit of the engine, NAME=VALUE (repeatable; names
    /// and defaults in docs/scenarios.md, "Limits of a run"). A replay a
    /// limit stops writes nothing.
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub limits: Vec<String>,
}

/// A parsed `--fix` list (a newtype, so clap takes it as one value).
#[derive(Debug, Clone)]
pub struct FixList(Vec<Fix>);

fn parse_fixes(s: &str) -> Result<FixList, String> {
    Fix::parse_list(s).map(FixList)
}

struct Run {
    label: String,
    rec: Recording,
    summary: ReplaySummary,
}

fn variant_scenario(fixes: &[Fix]) -> Result<stormbreak_sim::Scenario, String> {
    let mut sc = replay::scenario().map_err(|e| e.to_string())?;
    replay::apply(&mut sc, fixes);
    Ok(sc)
}

/// Runs independent simulations on `jobs` threads, results in order. With
/// more than one, the per-run progress bars give way to one over the runs.
fn run_all(
    jobs: usize,
    runs: Vec<(stormbreak_sim::Scenario, Vec<Fix>)>,
    opts: RunOptions,
    quiet: bool,
) -> Result<Vec<Run>, String> {
    let jobs = jobs.min(runs.len()).max(1);
    if jobs == 1 {
        return runs
            .into_iter()
            .map(|(sc, fixes)| run_scenario(sc, &fixes, opts, quiet))
            .collect();
    }
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(runs.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulating {pos}/{len} runs on {msg} threads [{bar:30}] {elapsed}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar.set_message(jobs.to_string());
        bar
    };
    let out = crate::parallel::map_in_order(
        jobs,
        runs,
        |(sc, fixes)| run_scenario(sc, &fixes, opts, true),
        || bar.inc(1),
    );
    bar.finish_and_clear();
    out
}

fn run_scenario(
    sc: stormbreak_sim::Scenario,
    fixes: &[Fix],
    opts: RunOptions,
    quiet: bool,
) -> Result<Run, String> {
    let (rec, stopped) = simulate_with_progress(&sc, opts, None, quiet);
    if let Some(e) = stopped {
        return Err(format!("{}: {e}", sc.scenario.name));
    }
    let summary = replay::summarize(&rec, fixes);
    let label = if fixes.is_empty() {
        "as it happened".to_owned()
    } else if fixes.len() == Fix::ALL.len() {
        "with the five follow-ups".to_owned()
    } else {
        format!(
            "with {}",
            fixes
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(" + ")
        )
    };
    Ok(Run {
        label,
        rec,
        summary,
    })
}

pub fn run(args: Args) -> Result<(), String> {
    crate::set_limits(&args.limits)?;
    let opts = RunOptions {
        seed: args.seed,
        scale: args.scale,
    };
    let quiet = args.quiet || args.json;
    let chosen: Vec<Fix> = match (&args.fix, args.fixed) {
        (Some(list), _) => list.0.clone(),
        (None, true) => Fix::ALL.to_vec(),
        (None, false) if args.compare => Fix::ALL.to_vec(),
        _ => Vec::new(),
    };
    if args.ablation {
        return ablation(&args, opts, quiet);
    }
    if args.sensitivity {
        return crate::sensitivity_cmd::run(
            &args.sensitivity_flags,
            &crate::sensitivity_cmd::Common {
                seed: args.seed,
                scale: args.scale,
                out: args.out.as_deref(),
                quiet: args.quiet,
                jobs: args.jobs,
            },
        );
    }
    let variant = if args.compare {
        "compare".to_owned()
    } else if chosen.is_empty() {
        "as-happened".to_owned()
    } else if chosen.len() == Fix::ALL.len() {
        "fixed".to_owned()
    } else {
        format!(
            "fix-{}",
            chosen
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join("+")
        )
    };
    let out = match &args.out {
        Some(out) => out.clone(),
        None => crate::default_out(replay::scenario_name())?.join(&variant),
    };
    let out_dir = crate::prepare_out(&out)?;
    let mut todo = Vec::new();
    if args.compare || chosen.is_empty() {
        todo.push((variant_scenario(&[])?, Vec::new()));
    }
    if !chosen.is_empty() {
        todo.push((variant_scenario(&chosen)?, chosen.clone()));
    }
    let jobs = args.jobs.unwrap_or_else(crate::parallel::default_jobs);
    let runs = run_all(jobs, todo, opts, quiet)?;
    // Outputs: the last run's files, every run's summary under `replay`.
    let main = runs.last().expect("at least one run");
    let replay_json = serde_json::json!({
        "runs": runs.iter().map(|r| serde_json::json!({
            "label": r.label,
            "fixes": r.summary.fixes,
            "headline": r.summary.headline,
            "paths": r.summary.paths,
        })).collect::<Vec<_>>(),
    });
    let extras = report_extras(&runs);
    let labelled: Vec<(&str, &Recording)> =
        runs.iter().map(|r| (r.label.as_str(), &r.rec)).collect();
    let html = stormbreak_report::render(&labelled, &extras);
    let set = output_set(&out, &main.rec, replay_json.clone(), &extras, html)?;
    crate::write_out(&out_dir, &set)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&replay_json).expect("json")
        );
        return Ok(());
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "GitHub 2026-08-17, replayed from its mechanisms (scale {}, seed {})\n",
        main.rec.scale, main.rec.seed
    );
    for r in &runs {
        s.push_str(&timeline(r));
    }
    s.push_str(&headline_table(&runs));
    for r in &runs {
        s.push_str(&path_table(r));
    }
    let _ = writeln!(s, "outputs: {}", out.display());
    print!("{s}");
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn rate(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.1}k/s", x / 1000.0)
    } else {
        format!("{x:.0}/s")
    }
}

fn timeline(r: &Run) -> String {
    let mut s = format!("Timeline — {}\n", r.label);
    let mut events: Vec<(f64, String)> = r
        .rec
        .actions
        .iter()
        .map(|a| (a.at.as_nanos() as f64 / 1e9, format!("action: {}", a.what)))
        .collect();
    for p in &r.summary.paths {
        if let Some(t) = p.degraded_at_s {
            events.push((t, format!("{} degraded", p.path)));
        }
        if let Some(t) = p.recovered_at_s {
            events.push((t, format!("{} recovered", p.path)));
        }
    }
    if let Some(t) = r.summary.headline.token_storm_from_s {
        let what = format!(
            "Copilot token storm: attempts over {}× first attempts (1 min)",
            replay::STORM_AMPLIFICATION
        );
        events.push((t, what));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, what) in events {
        let _ = writeln!(s, "  {}  {what}", replay::clock(&r.rec, t));
    }
    s.push('\n');
    s
}

// The storm row's label names the threshold.
const _: () = assert!(replay::STORM_AMPLIFICATION == 5.0);

fn headline_rows(r: &Run) -> Vec<(&'static str, String, &'static str)> {
    let h = &r.summary.headline;
    vec![
        (
            "web/API peak error rate (5 min)",
            pct(h.web_api_peak_error_rate),
            "≈ 20%",
        ),
        (
            "archive/raw peak error rate (5 min)",
            pct(h.archive_peak_error_rate),
            "≈ 50%",
        ),
        (
            "token arrivals before 13:28",
            rate(h.token_arrivals_before_per_s),
            "7–9k/s",
        ),
        (
            "token arrivals, peak 1-min avg",
            rate(h.token_arrivals_peak_per_s),
            "70–100k/s",
        ),
        (
            "token first-attempt demand, peak 1-min",
            rate(h.token_demand_peak_per_s),
            "flat",
        ),
        (
            "token storm from (attempts > 5× first)",
            h.token_storm_from_s
                .map_or_else(|| "never".to_owned(), |t| replay::clock(&r.rec, t)),
            "unpublished",
        ),
        (
            "web/API error 30 min after the peak passed",
            pct(h.web_api_error_rate_30m_after_trigger),
            "degraded",
        ),
        (
            "metastable",
            if h.metastable { "yes" } else { "no" }.into(),
            "yes",
        ),
    ]
}

fn headline_table(runs: &[Run]) -> String {
    let mut s = String::from("Headline figures (token rates read at scale 1)\n");
    let _ = write!(s, "  {:<44}", "figure");
    for r in runs {
        let _ = write!(s, " {:>26}", r.label);
    }
    let _ = writeln!(s, " {:>12}", "incident");
    let rows: Vec<_> = runs.iter().map(headline_rows).collect();
    for i in 0..rows[0].len() {
        let _ = write!(s, "  {:<44}", rows[0][i].0);
        for r in &rows {
            let _ = write!(s, " {:>26}", r[i].1);
        }
        let _ = writeln!(s, " {:>12}", rows[0][i].2);
    }
    s.push('\n');
    s
}

fn when(r: &Run, t: Option<f64>) -> String {
    t.map_or_else(|| "—".into(), |t| replay::clock(&r.rec, t))
}

/// "—" when never degraded, "not yet" when still degraded at the end.
fn recovered(r: &Run, p: &replay::PathRecovery) -> String {
    match (p.degraded_at_s, p.recovered_at_s) {
        (None, _) => "—".to_owned(),
        (Some(_), None) => "not yet".to_owned(),
        (Some(_), t) => when(r, t),
    }
}

/// A path's longest job wait, "—" for paths without a job queue.
fn job_wait(p: &replay::PathRecovery) -> String {
    match p.worst_job_wait_s {
        None => "—".to_owned(),
        Some(s) if s.round() < 60.0 => format!("{s:.0} s"),
        Some(s) => {
            let m = (s / 60.0).round() as u64;
            format!("{}h{:02}m", m / 60, m % 60)
        }
    }
}

fn path_table(r: &Run) -> String {
    let mut s = format!(
        "Per-path recovery — {} (SLO: error rate ≤ {} over 5 min; queued jobs start within {:.0} min)\n",
        r.label,
        pct(replay::SLO_ERROR_RATE),
        replay::SLO_JOB_WAIT_S / 60.0
    );
    let _ = writeln!(
        s,
        "  {:<38} {:>9} {:>10} {:>10} {:>10}",
        "user path", "degraded", "recovered", "worst", "job wait"
    );
    for p in &r.summary.paths {
        let _ = writeln!(
            s,
            "  {:<38} {:>9} {:>10} {:>10} {:>10}",
            p.path,
            when(r, p.degraded_at_s),
            recovered(r, p),
            pct(p.worst_error_rate),
            job_wait(p)
        );
    }
    s.push('\n');
    s
}

fn report_extras(runs: &[Run]) -> ReportExtras {
    let mut columns = vec!["figure".to_owned()];
    columns.extend(runs.iter().map(|r| r.label.clone()));
    columns.push("published".into());
    let rows_per_run: Vec<_> = runs.iter().map(headline_rows).collect();
    let headline = Table {
        title: "Headline figures".into(),
        columns,
        rows: (0..rows_per_run[0].len())
            .map(|i| {
                let mut row = vec![rows_per_run[0][i].0.to_owned()];
                row.extend(rows_per_run.iter().map(|r| r[i].1.clone()));
                row.push(rows_per_run[0][i].2.to_owned());
                row
            })
            .collect(),
        note: Some("Token rates are read at scale 1 (divided by --scale).".into()),
    };
    let mut tables = vec![headline];
    for r in runs {
        tables.push(Table {
            title: format!("Per-path recovery — {}", r.label),
            columns: vec![
                "user path".into(),
                "degraded".into(),
                "recovered".into(),
                "worst 5-min error rate".into(),
                "longest job wait".into(),
            ],
            rows: r
                .summary
                .paths
                .iter()
                .map(|p| {
                    vec![
                        p.path.clone(),
                        when(r, p.degraded_at_s),
                        recovered(r, p),
                        pct(p.worst_error_rate),
                        job_wait(p),
                    ]
                })
                .collect(),
            note: None,
        });
    }
    tables.push(Table {
        title: "Assumptions".into(),
        columns: vec!["where".into(), "assumption".into()],
        rows: assumptions(),
        note: Some(
            "Every number the reports do not give, from the scenario file's comments.".into(),
        ),
    });
    ReportExtras {
        title: Some("GitHub 2026-08-17, replayed from its mechanisms".into()),
        description: Some(
            "A traffic peak fills the auth service's sidecars, which the app-CPU autoscaler \
             cannot see; the gateway holds HAProxy flows while it waits; retries and the \
             editor client's fan-out keep the flows exhausted after the peak has passed."
                .into(),
        ),
        tables,
    }
}

/// The scenario's ASSUMPTION comments, with the section they belong to.
fn assumptions() -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut section = String::from("scenario");
    let mut current: Option<String> = None;
    for line in replay::SCENARIO_TOML.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("name = ") {
            section = name.trim_matches('"').to_owned();
        }
        match t.strip_prefix('#').map(str::trim) {
            Some(c) if c.starts_with("ASSUMPTION") => {
                if let Some(done) = current.take() {
                    rows.push(vec![section.clone(), done]);
                }
                current = Some(
                    c.trim_start_matches("ASSUMPTION")
                        .trim_start_matches(':')
                        .trim()
                        .to_owned(),
                );
            }
            Some(c) if current.is_some() && !c.is_empty() => {
                let cur = current.as_mut().expect("checked");
                cur.push(' ');
                cur.push_str(c);
            }
            _ => {
                if let Some(done) = current.take() {
                    rows.push(vec![section.clone(), done]);
                }
            }
        }
    }
    rows
}

/// The files of a replay run: the recording's, `report.html` and the
/// report's extra tables.
fn output_set(
    out: &Path,
    rec: &Recording,
    summary_extra: serde_json::Value,
    extras: &ReportExtras,
    html: String,
) -> Result<OutputSet, String> {
    let encoding =
        |e: &dyn std::fmt::Display| format!("{}: cannot encode outputs: {e}", out.display());
    let mut set = OutputSet::of_recording(rec, Some(summary_extra)).map_err(|e| encoding(&e))?;
    let extras = serde_json::to_vec_pretty(extras).map_err(|e| encoding(&e))?;
    set.add(EXTRAS_FILE, extras).add(REPORT_FILE, html);
    Ok(set)
}

fn ablation(args: &Args, opts: RunOptions, quiet: bool) -> Result<(), String> {
    let out = match &args.out {
        Some(out) => out.clone(),
        None => crate::default_out(replay::scenario_name())?.join("ablation"),
    };
    let out_dir = crate::prepare_out(&out)?;
    let mut variants: Vec<Vec<Fix>> = Vec::new();
    for f in Fix::ALL {
        variants.push(vec![f]);
    }
    for f in Fix::ALL {
        variants.push(Fix::ALL.into_iter().filter(|x| *x != f).collect());
    }
    variants.push(Fix::ALL.to_vec());
    // The yardstick: no follow-up and no operator action either.
    let mut bare = replay::scenario().map_err(|e| e.to_string())?;
    bare.actions.clear();
    let mut todo = vec![(bare, Vec::new())];
    for v in &variants {
        todo.push((variant_scenario(v)?, v.clone()));
    }
    let jobs = args.jobs.unwrap_or_else(crate::parallel::default_jobs);
    let mut runs = run_all(jobs, todo, opts, quiet)?;
    let mut baseline = runs.remove(0);
    baseline.label = "no follow-ups, no operator actions".into();
    let mut s =
        String::from("Ablation: each follow-up alone, and all but one (no operator actions)\n");
    let _ = writeln!(
        s,
        "  {:<58} {:>10} {:>10} {:>12} {:>11}",
        "variant", "web/API", "archive", "token peak", "metastable"
    );
    let mut rows = Vec::new();
    for r in std::iter::once(&baseline).chain(&runs) {
        let h = &r.summary.headline;
        let _ = writeln!(
            s,
            "  {:<58} {:>10} {:>10} {:>12} {:>11}",
            r.label,
            pct(h.web_api_peak_error_rate),
            pct(h.archive_peak_error_rate),
            rate(h.token_arrivals_peak_per_s),
            if h.metastable { "yes" } else { "no" }
        );
        rows.push(vec![
            r.label.clone(),
            pct(h.web_api_peak_error_rate),
            pct(h.archive_peak_error_rate),
            rate(h.token_arrivals_peak_per_s),
            if h.metastable { "yes" } else { "no" }.to_owned(),
        ]);
    }
    // Rank by what a follow-up does on its own (the peak web/API error it
    // removes from the bare run), then by what leaving it out of the full
    // set costs: redundant fixes cost nothing when left out.
    let base = &baseline.summary.headline;
    let all = &runs.last().expect("all five").summary.headline;
    let mut impact: Vec<(Fix, f64, f64, bool)> = Fix::ALL
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let alone = &runs[i].summary.headline;
            let without = &runs[Fix::ALL.len() + i].summary.headline;
            (
                *f,
                base.web_api_peak_error_rate - alone.web_api_peak_error_rate,
                without.web_api_peak_error_rate - all.web_api_peak_error_rate,
                !alone.metastable,
            )
        })
        .collect();
    impact.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    let _ = writeln!(
        s,
        "\nWhich follow-ups matter most (peak web/API error removed alone; added when left out):"
    );
    for (f, alone, left_out, ends_storm) in &impact {
        let _ = writeln!(
            s,
            "  {:<14} −{:>6}  +{:>6}   {}{}",
            f.name(),
            pct(alone.max(0.0)),
            pct(left_out.max(0.0)),
            f.description(),
            if *ends_storm {
                " — no metastable state even alone"
            } else {
                ""
            }
        );
    }
    let json = serde_json::json!({
        "ablation": runs.iter().map(|r| serde_json::json!({
            "label": r.label, "fixes": r.summary.fixes, "headline": r.summary.headline,
        })).collect::<Vec<_>>(),
        "baseline": serde_json::json!({"label": baseline.label, "headline": baseline.summary.headline}),
        "impact": impact.iter().map(|(f, alone, left_out, ends)| serde_json::json!({
            "fix": f,
            "peak_web_api_error_removed_alone": alone,
            "peak_web_api_error_added_when_left_out": left_out,
            "prevents_metastability_alone": ends,
        })).collect::<Vec<_>>(),
    });
    let main = runs.last().expect("all five");
    let extras = ReportExtras {
        title: Some("GitHub 2026-08-17: which follow-ups matter".into()),
        description: None,
        tables: vec![Table {
            title: "Ablation".into(),
            columns: vec![
                "variant".into(),
                "web/API peak".into(),
                "archive peak".into(),
                "token peak".into(),
                "metastable".into(),
            ],
            rows,
            note: Some("No operator actions in any variant.".into()),
        }],
    };
    let html = stormbreak_report::render(&[(main.label.as_str(), &main.rec)], &extras);
    let set = output_set(&out, &main.rec, json.clone(), &extras, html)?;
    crate::write_out(&out_dir, &set)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json).expect("json"));
    } else {
        let _ = writeln!(s, "\noutputs: {}", out.display());
        print!("{s}");
    }
    Ok(())
}

//! `stormbreak simulate FILE`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stormbreak_policy::Nanos;
use stormbreak_policy::units::format_duration;
use stormbreak_report::REPORT_FILE;
use stormbreak_sim::engine::{Engine, RunError, RunOptions, Stopped};
use stormbreak_sim::output::OutputSet;
use stormbreak_sim::scenario::{self, MAX_SCENARIO_BYTES};
use stormbreak_sim::{Recording, Scenario, output};

/// Flags of `stormbreak simulate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario file (TOML); see docs/scenarios.md.
    pub file: PathBuf,
    /// Output directory, replaced whole: new, empty, or one Stormbreak wrote
    /// [default: ./stormbreak-out/<scenario name>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// RNG seed; overrides the scenario's `seed`.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::parse_u64)]
    pub seed: Option<u64>,
    /// Simulate this fraction of the traffic, with capacities scaled alike (0 < F ≤ 1000).
    // Hyphenated values are taken as values so `--scale -1` (or `-inf`)
    // meets the range check rather than clap's "unexpected argument".
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true, value_parser = parse_scale)]
    pub scale: f64,
    /// Stop at this simulated time, e.g. "60m": the run a copy of the
    /// scenario with this `duration` and no later action would make (a
    /// whole number of recording intervals, at most the scenario's duration).
    #[arg(long, value_name = "DURATION", value_parser = parse_until)]
    pub until: Option<Nanos>,
    /// Print the summary as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Raise or lower a limit of the engine, NAME=VALUE (repeatable):
    /// default_app_queue, requests_in_flight, attempts_in_flight,
    /// job_backlog, events_per_sim_second, events_total (defaults and
    /// reasons in docs/scenarios.md, "Limits of a run").
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub limits: Vec<String>,
    /// Window of recovery.json's per-route table (degraded at, recovered
    /// at, as the replay's per-path table reads them; default the replay's
    /// 5 minutes, at least one recording interval).
    #[arg(long, value_name = "DURATION", value_parser = crate::sweep_cmd::parse_duration_flag, default_value = "5m")]
    pub recovery_window: Nanos,
}

/// `--until` must be a duration above zero (clap prefixes the flag's name).
fn parse_until(s: &str) -> Result<Nanos, String> {
    match stormbreak_policy::units::parse_duration(s) {
        Ok(d) if d > Nanos::ZERO => Ok(d),
        Ok(_) => Err(format!(
            "expected a duration above 0 such as \"60m\", got {s:?}"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// `--scale` must be a positive, finite factor of at most 1000 (clap
/// prefixes the message with the flag's name).
pub fn parse_scale(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a number 0 < F ≤ 1000 such as 0.1, got {s:?}"))?;
    if v.is_finite() && v > 0.0 && v <= 1000.0 {
        Ok(v)
    } else {
        Err(format!("expected 0 < F ≤ 1000, got {v}"))
    }
}

/// Runs `stormbreak simulate`.
pub fn run(args: Args) -> Result<(), crate::Failure> {
    crate::set_limits(&args.limits)?;
    let text = read_scenario(&args.file)?;
    let scenario =
        Scenario::parse(&args.file.display().to_string(), &text).map_err(|e| e.to_string())?;
    for w in &scenario.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(until) = args.until {
        check_until(until, &scenario).map_err(|e| format!("{}: {e}", args.file.display()))?;
    }
    let out = match args.out {
        Some(out) => out,
        None => crate::default_out(&scenario.scenario.name)
            .map_err(|e| format!("{}: {e}", args.file.display()))?,
    };
    let out_dir = crate::prepare_out(&out)?;
    let opts = RunOptions {
        seed: args.seed,
        scale: args.scale,
    };
    let (rec, stopped) =
        simulate_with_progress(&scenario, opts, args.until, args.quiet || args.json);
    let html = stormbreak_report::render(
        &[(scenario.scenario.name.as_str(), &rec)],
        &Default::default(),
    );
    let stop = stopped.as_ref().map(Stopped::from);
    let mut set = OutputSet::of_run(&rec, None, stop.as_ref())
        .map_err(|e| format!("{}: cannot encode outputs: {e}", out.display()))?;
    set.add(REPORT_FILE, html);
    add_recovery(&mut set, &rec, args.recovery_window);
    if let Some(e) = stopped {
        // A stopped run's outputs are a set of their own, beside --out:
        // a good earlier run there is never replaced by a partial one.
        let beside = stopped_out(&out);
        let dir = crate::prepare_out(&beside)?;
        crate::write_out(&dir, &set)?;
        return Err(crate::Failure {
            message: format!(
                "{}: {e}\noutputs up to the stop (summary.json \"stopped\"): {}",
                args.file.display(),
                beside.display()
            ),
            code: crate::EXIT_STOPPED,
        });
    }
    crate::write_out(&out_dir, &set)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&output::summary_json(&rec, None)).expect("json")
        );
    } else {
        print!("{}", crate::table::route_table(&rec));
        println!("outputs: {}", out.display());
    }
    Ok(())
}

/// Where a stopped run's outputs go: `<out>-stopped`, beside `out`.
fn stopped_out(out: &Path) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "stormbreak-out".into());
    name.push("-stopped");
    out.with_file_name(name)
}

/// `--until` must end the run within the scenario, on a recording
/// interval's end: a shorter run would record nothing, and a partial last
/// interval is left out of the summary's counts while `duration_s` would
/// include it.
fn check_until(until: Nanos, sc: &Scenario) -> Result<(), String> {
    let (duration, interval) = (sc.scenario.duration, sc.scenario.interval);
    let show = |n| format!("{:?}", format_duration(n));
    if until > duration {
        return Err(format!(
            "--until {} is after the end of the run (duration = {})",
            format_duration(until),
            show(duration)
        ));
    }
    if until < interval {
        return Err(format!(
            "--until {} is shorter than one recording interval (interval = {})",
            format_duration(until),
            show(interval)
        ));
    }
    if !until.as_nanos().is_multiple_of(interval.as_nanos()) && until != duration {
        let below = interval * (until.as_nanos() / interval.as_nanos());
        let above = (below + interval).min(duration);
        return Err(format!(
            "--until {} is not a whole number of recording intervals (interval = {}): \
             expected e.g. {} or {}",
            format_duration(until),
            show(interval),
            format_duration(below),
            format_duration(above)
        ));
    }
    Ok(())
}

/// Reads a scenario file, refusing one over [`MAX_SCENARIO_BYTES`] after
/// reading at most one byte more, so `/dev/zero` or a huge file fails at
/// once instead of filling memory.
pub fn read_scenario(path: &Path) -> Result<String, String> {
    let cannot = |e: std::io::Error| format!("{}: cannot read: {e}", path.display());
    let file = File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_SCENARIO_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() > MAX_SCENARIO_BYTES {
        return Err(format!("{}: {}", path.display(), scenario::too_large()));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("{}: cannot read: not UTF-8 text: {e}", path.display()))
}

/// Runs the engine in slices so a progress bar with an ETA can be drawn;
/// the bar only appears once a run has taken more than a second. `until`
/// stops the run early ([`Engine::stop_at`]). The limits are the command
/// line's (`--limit`). Returns the recording, up to the stop when a limit
/// stopped the run, and that limit's error.
pub fn simulate_with_progress(
    scenario: &Scenario,
    opts: RunOptions,
    until: Option<Nanos>,
    quiet: bool,
) -> (Recording, Option<RunError>) {
    let mut engine = Engine::new(scenario, opts).with_limits(crate::run_limits());
    if let Some(t) = until {
        engine = engine.stop_at(t);
    }
    let end = engine.end();
    let slices = 200u64;
    let started = Instant::now();
    let bar = ProgressBar::with_draw_target(Some(slices), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{spinner} simulating {msg} [{bar:30}] {percent}% ETA {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(scenario.scenario.name.clone());
    let mut shown = false;
    let mut stopped = None;
    for i in 1..=slices {
        if let Err(e) = engine.run_until(end / slices * i) {
            stopped = Some(e);
            break;
        }
        if !quiet && !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_position(i);
    }
    if stopped.is_none()
        && let Err(e) = engine.run_until(end)
    {
        stopped = Some(e);
    }
    bar.finish_and_clear();
    if !quiet {
        for h in &engine_bounds(&engine) {
            eprintln!("{h}");
        }
    }
    (engine.finish(), stopped)
}

/// Lines telling which default bounds refused work, if any.
fn engine_bounds(engine: &Engine) -> Vec<String> {
    engine
        .bounds_hit()
        .iter()
        .map(|h| {
            format!(
                "warning: {}: the default bound {} refused {} request(s), the first at {} \
                 (set the queue explicitly in the scenario)",
                h.component,
                h.bound,
                h.count,
                stormbreak_policy::units::format_duration(h.first_at)
            )
        })
        .collect()
}

/// Adds `recovery.json`: every route's degradation and recovery over
/// trailing windows of `window`, by the replay's own reading.
pub(crate) fn add_recovery(set: &mut OutputSet, rec: &stormbreak_sim::Recording, window: Nanos) {
    use stormbreak_sim::recovery::{RECOVERY_FILE, route_table};
    set.add(
        RECOVERY_FILE,
        serde_json::to_vec_pretty(&route_table(rec, window)).expect("plain data"),
    );
}

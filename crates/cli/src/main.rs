//! The `stormbreak` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{Parser, Subcommand};
use stormbreak_sim::engine::Limits;
use stormbreak_sim::output::{self, FileWriter, FsWriter, OutDir, OutputSet};

mod audit_cmd;
mod guard_cmd;
mod lab_cmd;
mod parallel;
mod probe_cmd;
mod replay;
mod report_cmd;
mod sensitivity_cmd;
mod simulate;
mod sweep_cmd;
mod table;

/// Reproduce, find and stop retry storms and blind-spot overload in service meshes.
#[derive(Debug, Parser)]
#[command(name = "stormbreak", version, about, long_about = None, after_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay GitHub's 2026-08-17 incident from its mechanisms (built in).
    #[command(after_help = EXIT_CODES_HELP)]
    Replay(replay::Args),
    /// Run a scenario file in the discrete-event simulator.
    #[command(after_help = EXIT_CODES_HELP)]
    Simulate(simulate::Args),
    /// Re-render report.html from saved runs (overlaid when several).
    #[command(after_help = EXIT_CODES_HELP)]
    Report(report_cmd::Args),
    /// Audit Kubernetes, Istio and HAProxy configs: capacity chain, blind autoscalers, retry amplification.
    #[command(after_help = EXIT_CODES_HELP)]
    Audit(audit_cmd::Args),
    /// Run the guard reverse proxy (`--config FILE`), or validate its config (`--check FILE`).
    #[command(after_help = EXIT_CODES_HELP)]
    Guard(guard_cmd::Args),
    /// Map where a scenario stops recovering: vary fields along axes, classify every run.
    // Boxed: its flags make it twice the size of any other command's.
    #[command(after_help = EXIT_CODES_HELP)]
    Sweep(Box<sweep_cmd::Args>),
    /// Run a scenario file for real on loopback (backends, guard sidecars, open-loop clients) and record it.
    #[command(after_help = EXIT_CODES_HELP)]
    Lab(lab_cmd::Args),
    /// Probe a live system's user paths at one fixed total rate; per-path degradation and recovery, SLO verdicts.
    #[command(after_help = EXIT_CODES_HELP)]
    Probe(probe_cmd::Args),
}

/// The line every subcommand's `--help` ends with: exit codes are one
/// table for all subcommands, which a new subcommand extends.
const EXIT_CODES_HELP: &str = "Exit codes: see docs/outputs.md#exit-codes";

/// Exit status of a run a limit of the engine stopped (`simulate`): its
/// outputs up to the stop are in `<out>-stopped/` (docs/scenarios.md,
/// "Limits of a run").
const EXIT_STOPPED: u8 = 3;

/// Why a command failed, and the exit status that says so.
#[derive(Debug)]
struct Failure {
    message: String,
    code: u8,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure { message, code: 1 }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::from(message.to_owned())
    }
}

/// The command line's `--limit NAME=VALUE`s, set once before anything
/// runs: every run a command makes (simulate's, each replay variant, each
/// sweep cell) uses them, each lowered by its scenario's `[limits]`.
static RUN_LIMITS: OnceLock<Limits> = OnceLock::new();

/// Reads `--limit`s (repeatable) into [`RUN_LIMITS`].
fn set_limits(assignments: &[String]) -> Result<(), String> {
    let mut limits = Limits::default();
    for a in assignments {
        limits.set_from(a).map_err(|e| format!("--limit: {e}"))?;
    }
    let _ = RUN_LIMITS.set(limits);
    Ok(())
}

/// The limits in force (the defaults unless `--limit` set some).
fn run_limits() -> Limits {
    RUN_LIMITS.get().copied().unwrap_or_default()
}

/// Exit status after SIGINT, SIGTERM or SIGHUP (the handler cannot tell
/// which arrived): 128 + SIGINT, as a shell reports an interrupted command.
const EXIT_INTERRUPTED: i32 = 130;

/// Test hook (undocumented in `--help`, described in docs/outputs.md):
/// milliseconds to sleep between staging an output set and swapping it in,
/// so a test's signal lands inside the write phase.
const PAUSE_BEFORE_SWAP_ENV: &str = "STORMBREAK_TEST_PAUSE_BEFORE_SWAP_MS";

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Without a handler a signal kills the process mid-write and leaves a
    // staging directory for the next run to remove; with one, nothing is
    // left behind. `guard` handles SIGTERM (drain) and SIGHUP (reload) itself.
    if !matches!(cli.command, Command::Guard(_) | Command::Probe(_)) {
        let _ = ctrlc::set_handler(|| {
            let removed = output::abandon_pending();
            if removed.is_empty() {
                eprintln!("interrupted");
            } else {
                eprintln!(
                    "interrupted: unfinished outputs removed, previous outputs left as they were"
                );
            }
            std::process::exit(EXIT_INTERRUPTED);
        });
    }
    let result: Result<(), Failure> = match cli.command {
        Command::Replay(args) => replay::run(args).map_err(Failure::from),
        Command::Simulate(args) => simulate::run(args),
        Command::Report(args) => report_cmd::run(args).map_err(Failure::from),
        Command::Audit(args) => audit_cmd::run(args).map_err(Failure::from),
        Command::Guard(args) => guard_cmd::run(args).map_err(Failure::from),
        Command::Sweep(args) => sweep_cmd::run(*args).map_err(Failure::from),
        // Its own exit codes: a finished run may be invalid (docs/lab.md).
        Command::Lab(args) => return lab_cmd::main(args),
        // Its own exit codes: 0 met, 99 breached, 3 unknown (docs/probe.md).
        Command::Probe(args) => return probe_cmd::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// Default output directory for a scenario: one sanitised component under
/// `./stormbreak-out/`, so a name such as `../../x` cannot climb out.
fn default_out(scenario: &str) -> Result<PathBuf, String> {
    let dir = output::scenario_dir_name(scenario).ok_or_else(|| {
        format!(
            "scenario name {scenario:?} has no letter or digit to name its output directory \
             ./stormbreak-out/<name>/; rename the scenario or give --out"
        )
    })?;
    Ok(PathBuf::from("stormbreak-out").join(dir))
}

/// Checks the output directory before a run: a refusal or an unwritable
/// parent is reported now rather than after minutes of simulating.
fn prepare_out(out: &Path) -> Result<OutDir, String> {
    pause_before_swap()?;
    let dir = OutDir::prepare(out).map_err(|e| e.to_string())?;
    for note in dir.notes() {
        eprintln!("note: {note}");
    }
    Ok(dir)
}

/// Writes `set` into `out` as one set, replacing what was there whole.
fn write_out(out: &OutDir, set: &OutputSet) -> Result<(), String> {
    let mut writer = CliWriter {
        pause: pause_before_swap()?,
    };
    out.write_with(set, &mut writer).map_err(|e| e.to_string())
}

/// The test hook's pause, when [`PAUSE_BEFORE_SWAP_ENV`] is set.
fn pause_before_swap() -> Result<Option<Duration>, String> {
    match std::env::var(PAUSE_BEFORE_SWAP_ENV) {
        Ok(ms) => ms
            .trim()
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| {
                format!("{PAUSE_BEFORE_SWAP_ENV}: expected whole milliseconds, got {ms:?}")
            }),
        Err(_) => Ok(None),
    }
}

/// The filesystem writer, plus the test hook's pause before the swap.
struct CliWriter {
    pause: Option<Duration>,
}

impl FileWriter for CliWriter {
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        FsWriter.write_file(path, bytes)
    }

    fn before_swap(&mut self, staging: &Path) {
        if let Some(pause) = self.pause {
            // A test waits for this line before it sends its signal.
            eprintln!(
                "{PAUSE_BEFORE_SWAP_ENV}: staged in {}, pausing {} ms before the swap",
                staging.display(),
                pause.as_millis()
            );
            std::thread::sleep(pause);
        }
    }
}

/// Parses a whole-number flag such as `--seed` (any `u64`), naming the
/// range when it is negative or not a number.
fn parse_u64(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("expected a whole number 0 ≤ N ≤ {}, got {s:?}", u64::MAX))
}

//! The `stormbreak` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod replay;
mod report_cmd;
mod simulate;
mod table;

/// Reproduce, find and stop retry storms and blind-spot overload in service meshes.
#[derive(Debug, Parser)]
#[command(name = "stormbreak", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay GitHub's 2026-08-17 incident from its mechanisms (built in).
    Replay(replay::Args),
    /// Run a scenario file in the discrete-event simulator.
    Simulate(simulate::Args),
    /// Re-render report.html from saved runs (overlaid when several).
    Report(report_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => replay::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Report(args) => report_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Default output directory for a scenario.
fn default_out(scenario: &str) -> PathBuf {
    PathBuf::from("stormbreak-out").join(scenario)
}

//! `stormbreak audit PATH...`: the static audit of Kubernetes, Istio and
//! HAProxy configs (crate `stormbreak-audit`; rules in docs/audit-rules.md).
//!
//! Exit status: 0 when no finding reaches `--fail-on`, 1 when one does,
//! 2 for usage errors and unreadable paths only.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::finding::Severity;
use stormbreak_audit::inputs::{self, InputOptions};
use stormbreak_audit::{explain, export, output};

/// Flags of `stormbreak audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files and directories (recursive) of YAML/JSON manifests and
    /// haproxy*.cfg; `-` reads YAML from stdin. Optional when `--haproxy`
    /// names a file.
    #[arg(required_unless_present_any = ["explain", "haproxy"])]
    pub paths: Vec<PathBuf>,
    /// Read FILE as an haproxy.cfg whatever its name (repeatable).
    #[arg(long, value_name = "FILE")]
    pub haproxy: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_parser = ["text", "json", "sarif"], default_value = "text")]
    pub format: String,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_parser = ["info", "warning", "error"], default_value = "error")]
    pub fail_on: String,
    /// Print a rule's documentation (e.g. SB101) and exit.
    #[arg(long, value_name = "RULE")]
    pub explain: Option<String>,
    /// Largest input file read, in bytes [default: 16 MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_file_size: Option<u64>,
    /// Latency assumed when turning a rate into a concurrency (Little's law).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_latency)]
    pub assume_latency: Duration,
    /// Attempts the clients make before the edge (not in any config).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub client_attempts: u32,
    /// Print every route's capacity chain (text format).
    #[arg(long)]
    pub chains: bool,
    /// Write the audited topology as a Stormbreak scenario to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_scenario: Option<PathBuf>,
    /// Traffic of an exported route: ROUTE=RATE (e.g. auth=2k/s; repeatable).
    #[arg(long, value_name = "ROUTE=RATE", requires = "export_scenario")]
    pub load: Vec<String>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("expected a size in bytes ≥ 1, got {s:?}"))
}

fn parse_latency(s: &str) -> Result<Duration, String> {
    let d = stormbreak_audit::units::parse_go_duration(s)?;
    if d.is_zero() {
        return Err("expected a latency above 0, such as 50ms".into());
    }
    Ok(d)
}

fn usage(msg: String) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

/// Runs `stormbreak audit`; exits 1 or 2 itself, returns for status 0.
pub fn run(args: Args) -> Result<(), String> {
    if let Some(rule) = &args.explain {
        match explain(rule) {
            Some(text) => {
                println!("{text}");
                return Ok(());
            }
            None => usage(format!(
                "--explain: no rule {rule:?}; rules are {}",
                stormbreak_audit::rules::RULES
                    .iter()
                    .map(|r| r.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    let opts = InputOptions {
        max_file_bytes: args.max_file_size.unwrap_or(inputs::DEFAULT_MAX_FILE_BYTES),
    };
    let collected = inputs::collect(
        &args.paths,
        &args.haproxy,
        &opts,
        &mut std::io::stdin().lock(),
    )
    .unwrap_or_else(|e| usage(e.0));
    let chain_opts = ChainOptions {
        assumed_latency: args.assume_latency,
        client_attempts: args.client_attempts,
    };
    let (report, inv) = stormbreak_audit::audit(collected, &chain_opts);
    if let Some(path) = &args.export_scenario {
        let loads = export::parse_loads(&args.load).unwrap_or_else(|e| usage(e));
        let text = export::scenario(&inv, &report.chains, &chain_opts, &loads)
            .unwrap_or_else(|e| usage(e));
        // A temporary file beside it, then a rename: an error or a signal
        // never leaves a half-written scenario (and no temporary survives).
        stormbreak_sim::output::write_atomic(path, text.as_bytes())
            .unwrap_or_else(|e| usage(format!("{}: cannot write: {e}", path.display())));
        eprintln!("scenario written to {}", path.display());
    }
    let out = match args.format.as_str() {
        "json" => serde_json::to_string_pretty(&output::json::render(&report)).expect("json"),
        "sarif" => serde_json::to_string_pretty(&output::sarif::render(
            &report,
            &output::sarif::default_help_base(),
        ))
        .expect("sarif"),
        _ => output::text::render(&report, args.chains),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", out.trim_end());
    let _ = stdout.flush();
    let fail_on = Severity::parse(&args.fail_on).unwrap_or(Severity::Error);
    if report.worst().is_some_and(|w| w >= fail_on) {
        std::process::exit(1);
    }
    Ok(())
}

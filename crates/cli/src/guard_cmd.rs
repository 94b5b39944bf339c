//! `stormbreak guard --config FILE`: the reverse proxy (crate
//! `stormbreak-guard`, documented in docs/guard.md);
//! `stormbreak guard --check FILE` validates a config without serving.

use std::path::PathBuf;

use stormbreak_guard::{Guard, GuardConfig};

/// Flags of `stormbreak guard`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve with this config file (SIGHUP reloads it, SIGTERM drains).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "check",
        conflicts_with = "check"
    )]
    pub config: Option<PathBuf>,
    /// Validate this config file and exit: 0 when valid, 1 with the error's file:line:column.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
    /// On SIGTERM (or `POST /drain`), how long in-flight requests may take
    /// to finish before the guard exits anyway.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_drain)]
    pub drain_timeout: std::time::Duration,
    /// Operational logs (admin changes, reloads, drain) on stderr: `text`
    /// (key=value lines) or `json` (one JSON object per line). The access
    /// log is JSON lines either way.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

fn parse_drain(s: &str) -> Result<std::time::Duration, String> {
    let d = stormbreak_policy::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() || d > stormbreak_policy::Nanos::from_secs(3600) {
        return Err(format!("expected a duration from 1ms to 1h, got {s:?}"));
    }
    Ok(d.into())
}

pub fn run(args: Args) -> Result<(), String> {
    if let Some(path) = args.check {
        let config = GuardConfig::load(&path).map_err(|e| e.to_string())?;
        // The token source must yield a token here, as it must at start.
        config.check_admin_token()?;
        println!(
            "{}: ok ({} listener(s), {} cluster(s), {} route(s))",
            path.display(),
            config.listeners.len(),
            config.clusters.len(),
            config.routes.len()
        );
        return Ok(());
    }
    let path = args.config.ok_or("give --config FILE or --check FILE")?;
    let config = GuardConfig::load(&path).map_err(|e| e.to_string())?;
    // Logs (admin changes with who and what) go to stderr, one line each.
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = if args.log_format == "json" {
        logs.json().try_init()
    } else {
        logs.try_init()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        // Before the "listening" lines: a script may signal as soon as it reads them.
        let hup = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?;
        let term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
        let guard = Guard::start_file(&path).await.map_err(|e| e.to_string())?;
        for l in &config.listeners {
            if let Some(addr) = guard.local_addr(&l.name) {
                // Tests and scripts read this line to learn a port-0 address.
                println!("listening {} on {addr}", l.name);
            }
        }
        if let Some(addr) = guard.admin_addr() {
            println!("admin on {addr}");
        }
        serve(guard, hup, term, args.drain_timeout).await
    })
}

/// Until SIGTERM or `POST /drain`: SIGHUP reloads the file (a file that
/// fails validation is refused and logged, the old config stays); then a
/// graceful drain, and exit 0.
async fn serve(
    guard: Guard,
    mut hup: tokio::signal::unix::Signal,
    mut term: tokio::signal::unix::Signal,
    drain_timeout: std::time::Duration,
) -> Result<(), String> {
    loop {
        tokio::select! {
            _ = hup.recv() => match guard.reload_file() {
                Ok(done) => tracing::info!(kept = ?done.kept, rebuilt = ?done.rebuilt, policies = ?done.policies, endpoints = ?done.endpoints, certificates = ?done.certificates, "reloaded on SIGHUP"),
                Err(e) => tracing::warn!(error = %e, "reload on SIGHUP refused; the old config stays"),
            },
            _ = term.recv() => break,
            () = guard.drain_requested() => break,
        }
    }
    tracing::info!(timeout = ?drain_timeout, "draining");
    let left = guard.drain(drain_timeout).await;
    if left > 0 {
        tracing::warn!(
            connections = left,
            "drain deadline passed with connections open"
        );
    }
    Ok(())
}

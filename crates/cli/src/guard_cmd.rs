//! `stormbreak guard --config FILE`: the reverse proxy (crate
//! `stormbreak-guard`, documented in docs/guard.md);
//! `stormbreak guard --check FILE` validates a config without serving.

use std::path::PathBuf;

use stormbreak_guard::{Guard, GuardConfig};

/// Flags of `stormbreak guard`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Args {
    /// Serve with this config file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate this config file and exit: 0 when valid, 1 with the error's file:line:column.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), String> {
    if let Some(path) = args.check {
        let config = GuardConfig::load(&path).map_err(|e| e.to_string())?;
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
    // Logs (admin changes with who and what) go to stderr as text lines.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let guard = Guard::start(&config).await.map_err(|e| e.to_string())?;
        for l in &config.listeners {
            if let Some(addr) = guard.local_addr(&l.name) {
                // Tests and scripts read this line to learn a port-0 address.
                println!("listening {} on {addr}", l.name);
            }
        }
        if let Some(addr) = guard.admin_addr() {
            println!("admin on {addr}");
        }
        guard.wait().await;
        Ok(())
    })
}

//! `stormbreak probe CONFIG`: the paths of a live system probed at one
//! fixed total rate, each path's degradation and recovery read as the
//! replay reads them (crate `stormbreak-probe`, docs/probe.md).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stormbreak_probe::StopSignal;

use stormbreak_probe::output::{final_table, live_table, output_set};
use stormbreak_probe::timeline::Timeline;
use stormbreak_probe::{ProbeConfig, RunOptions};
use stormbreak_sim::recovery::WindowState;

/// Exit status of a config or usage error.
const EXIT_CONFIG: u8 = 2;
/// Exit status of a run stopped by SIGINT or SIGTERM (outputs written).
const EXIT_INTERRUPTED: u8 = 130;

/// Flags of `stormbreak probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Probe config (TOML); see docs/probe.md.
    pub config: PathBuf,
    /// Output directory, replaced whole [default: ./stormbreak-out/probe-<config file stem>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write one JSON line per probe to FILE as the run goes (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// Seed of the probe schedule when the config gives none [default: from the OS].
    #[arg(long, allow_negative_numbers = true, value_parser = crate::parse_u64)]
    pub seed: Option<u64>,
    /// Serve Prometheus metrics on ADDR (`GET /metrics`, blackbox_exporter's
    /// names plus a `reason` label) while the run lasts.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Print predicted against observed recovery per path from FILE: a
    /// `recovery.json` (from `simulate` or `lab`) or a replay's `summary.json`.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// With --expect: the probe's start in the prediction's clock, seconds
    /// (observed times are moved by it).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 0.0,
        requires = "expect",
        allow_negative_numbers = true
    )]
    pub expect_offset: f64,
}

/// Runs `stormbreak probe`: 0 every SLO met, 99 one breached, 3 one
/// unknown, 2 a config or usage error, 1 another error, 130 stopped by a
/// signal (outputs written).
pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err((code, e)) => {
            eprintln!("error: {e}");
            ExitCode::from(code)
        }
    }
}

fn run(args: Args) -> Result<u8, (u8, String)> {
    let config = ProbeConfig::load(&args.config).map_err(|e| (EXIT_CONFIG, e.to_string()))?;
    let out = match args.out {
        Some(out) => out,
        None => {
            let stem = args
                .config
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            crate::default_out(&format!("probe-{stem}")).map_err(|e| (EXIT_CONFIG, e))?
        }
    };
    let expected = match &args.expect {
        Some(p) => Some(stormbreak_probe::expect::load(p).map_err(|e| (EXIT_CONFIG, e))?),
        None => None,
    };
    if !args.expect_offset.is_finite() {
        return Err((
            EXIT_CONFIG,
            "--expect-offset: expected a finite number of seconds".to_owned(),
        ));
    }
    let out_dir = crate::prepare_out(&out).map_err(|e| (1, e))?;
    let jsonl: Option<Box<dyn std::io::Write + Send>> = match &args.jsonl {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| (1, format!("--jsonl {}: {e}", p.display())))?,
        ))),
    };
    for w in config.sample_warnings() {
        eprintln!("warning: {w}");
    }
    let seed = args.seed.unwrap_or_else(rand_seed);
    let stop = StopSignal::default();
    let tty = std::io::stderr().is_terminal();
    let metrics = args.listen.map(|_| {
        Arc::new(stormbreak_probe::metrics::Metrics::new(
            config.paths.iter().map(|p| p.name.clone()).collect(),
        ))
    });
    let opts = RunOptions {
        jsonl,
        on_interval: Some(live(tty)),
        stop: stop.clone(),
        seed,
        metrics: metrics.clone(),
    };
    eprintln!(
        "probe: {} paths at {}/s in all for {} (seed {seed})",
        config.paths.len(),
        config.run.rate,
        stormbreak_policy::units::format_duration(config.run.duration)
    );
    // Bound before the run, so a taken or forbidden address is a usage error.
    let listener = match args.listen {
        None => None,
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| (EXIT_CONFIG, format!("--listen {addr}: cannot bind: {e}")))?;
            if let Ok(a) = l.local_addr() {
                eprintln!("probe: metrics on http://{a}/metrics");
            }
            Some(l)
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (1, format!("cannot start the runtime: {e}")))?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let result = rt.block_on(async {
        let _server = match (listener, metrics) {
            (Some(l), Some(m)) => {
                let l =
                    tokio::net::TcpListener::from_std(l).map_err(|e| format!("--listen: {e}"))?;
                Some(AbortOnDrop(tokio::spawn(stormbreak_probe::metrics::serve(
                    l, m,
                ))))
            }
            _ => None,
        };
        let (stop, interrupted) = (stop.clone(), Arc::clone(&interrupted));
        tokio::spawn(async move {
            if wait_for_signal().await {
                interrupted.store(true, Ordering::Relaxed);
                stop.stop();
            }
        });
        stormbreak_probe::run(&config, opts).await
    });
    let probe = result.map_err(|e| (1, format!("{}: {e}", args.config.display())))?;
    // With `--jsonl -` standard output carries the JSON lines alone.
    let lines_on_stdout = args.jsonl.as_ref().is_some_and(|p| p.as_os_str() == "-");
    let say = |text: String| {
        if lines_on_stdout {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    say(final_table(&probe.paths, config.run.hysteresis));
    say(format!(
        "verdict: {:?} (exit {}); {} probes, {:.2} slots/s; send lateness at most {:.1} ms\n",
        probe.verdict,
        probe.exit_code,
        probe.probes_sent,
        probe.slots_per_s,
        probe.max_send_lateness_ms
    ));
    let versus = expected.as_ref().map(|e| {
        let v = stormbreak_probe::expect::versus(&config, e, &probe.paths, args.expect_offset);
        let windows: Vec<f64> = config
            .paths
            .iter()
            .map(|p| p.slo.window.as_secs_f64())
            .collect();
        say(stormbreak_probe::expect::table(e, &v, &windows));
        v
    });
    crate::write_out(&out_dir, &output_set(&config, &probe, versus.as_deref()))
        .map_err(|e| (1, e))?;
    say(format!("outputs: {}\n", out.display()));
    if interrupted.load(Ordering::Relaxed) {
        eprintln!(
            "probe: stopped by a signal after {:.0} s; outputs cover what was seen",
            probe.ran_s
        );
        return Ok(EXIT_INTERRUPTED);
    }
    Ok(probe.exit_code)
}

/// Ends the metrics listener with the run.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Waits for SIGINT or SIGTERM; `false` if no handler could be set.
async fn wait_for_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return false;
        };
        tokio::select! {
            _ = int.recv() => true,
            _ = term.recv() => true,
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.is_ok()
    }
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// The live view: the table redrawn in place on a terminal; otherwise a
/// plain line when a path's window changes state.
fn live(tty: bool) -> Box<dyn FnMut(&Timeline) + Send> {
    let mut drawn = 0usize;
    let mut last: Vec<Option<WindowState>> = Vec::new();
    Box::new(move |t: &Timeline| {
        if tty {
            let table = live_table(t);
            if drawn > 0 {
                eprint!("\x1b[{drawn}A\x1b[J");
            }
            eprint!("{table}");
            drawn = table.lines().count();
            return;
        }
        let secs = (t.interval() * t.closed()).as_secs_f64();
        for (i, (name, row)) in t.latest().enumerate() {
            let Some(r) = row else { continue };
            if last.len() <= i {
                last.resize(i + 1, None);
            }
            if last[i] != Some(r.state) {
                last[i] = Some(r.state);
                let rate = r
                    .window_error_rate
                    .map_or_else(|| "-".to_owned(), |e| format!("{:.1}%", e * 100.0));
                eprintln!(
                    "probe: t={}s {name:?} {:?} (window error rate {rate}, {} probes)",
                    stormbreak_probe::output::seconds(secs),
                    r.state,
                    r.window_probes
                );
            }
        }
    })
}

//! Is the HAProxy pause decisive once connections are modelled?
//!
//! Runs the replay's operator actions three ways — pause and shed (the
//! replay), the pause without the 403 shed, the shed without the pause —
//! under three connection models of the Central-US HAProxy pool and the
//! editor clients: none (a flow per request, the replay's model); keep-alive
//! connections that a pause resets, clients reconnecting at their next
//! request (HTTP/1.1 clients); and the same with gRPC's connection backoff
//! after a reset or refused connect. Prints, per run, whether the storm
//! outlived the peak and when web/API and the token path recovered, for
//! `docs/replay.md`.
//!
//! `cargo run --release -p stormbreak-sim --example pause_question [SEED...]`

use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::replay::{self, ConnectionModel as Model, ReplaySummary};
use stormbreak_sim::scenario::{ActionKind, Scenario};

#[derive(Clone, Copy, PartialEq)]
enum Actions {
    PauseAndShed,
    PauseOnly,
    ShedOnly,
}

fn scenario(actions: Actions, model: Model) -> Scenario {
    let mut sc = replay::scenario().expect("built-in scenario parses");
    sc.actions.retain(|a| match a.get_ref().kind {
        ActionKind::Shed { .. } => actions != Actions::PauseOnly,
        ActionKind::PauseNodes { .. } | ActionKind::RestartNodes { .. } => {
            actions != Actions::ShedOnly
        }
        _ => true,
    });
    replay::with_connections(&mut sc, model);
    sc
}

/// The replay's summary, and the token route's attempts per second
/// (scale 1) in the minute after the nodes resume at 16:36:30.
fn run(sc: &Scenario, seed: Option<u64>) -> (ReplaySummary, f64) {
    let rec = Engine::new(
        sc,
        RunOptions {
            seed,
            scale: replay::DEFAULT_SCALE,
        },
    )
    .run()
    .expect("the run stays within its bounds");
    let token = rec.route("copilot-token").expect("the token route");
    let from = (3 * 3600 + 36 * 60 + 30) / 10;
    let sent: u64 = token.attempts[from..from + 6].iter().sum();
    let after = sent as f64 / 60.0 / replay::DEFAULT_SCALE;
    (replay::summarize(&rec, &[]), after)
}

/// Wall-clock time of a path's recovery (the replay starts at 13:00).
fn at(r: &ReplaySummary, path: &str) -> String {
    let p = r.paths.iter().find(|p| p.path == path).expect("path");
    p.recovered_at_s.map_or("not".to_owned(), |s| {
        let m = ((13.0 * 3600.0 + s) / 60.0).round() as u64;
        format!("{:02}:{:02}", m / 60, m % 60)
    })
}

fn main() {
    let seeds: Vec<u64> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("a seed"))
        .collect();
    let seeds = if seeds.is_empty() {
        vec![20260817]
    } else {
        seeds
    };
    println!(
        "| connections | actions | seed | repository read back | token attempts, minute after resume | token peak | Copilot token back |"
    );
    println!("|---|---|---|---|---|---|---|");
    for model in [Model::Flows, Model::KeepAlive, Model::KeepAliveBackoff] {
        for actions in [Actions::PauseAndShed, Actions::PauseOnly, Actions::ShedOnly] {
            for &seed in &seeds {
                let (r, after) = run(&scenario(actions, model), Some(seed));
                println!(
                    "| {} | {} | {seed} | {} | {:.1} k/s | {:.1} k/s | {} |",
                    match model {
                        Model::Flows => "none (flows)",
                        Model::KeepAlive => "keep-alive",
                        Model::KeepAliveBackoff => "keep-alive + gRPC backoff",
                    },
                    match actions {
                        Actions::PauseAndShed => "pause + shed",
                        Actions::PauseOnly => "pause only",
                        Actions::ShedOnly => "shed only",
                    },
                    at(&r, "repository read"),
                    after / 1000.0,
                    r.headline.token_arrivals_peak_per_s / 1000.0,
                    at(&r, "Copilot token issue"),
                );
            }
        }
    }
}

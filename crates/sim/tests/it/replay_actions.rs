//! Which operator action ends the storm in the model. The published record
//! credits the HAProxy pause with the broad recovery and lists the 403 shed
//! of Copilot token requests without a time; the replay places the shed
//! inside the pause. These counterfactuals pin down the model's causal
//! story (docs/replay.md, "Known gaps"): the pause alone is undone when the
//! nodes resume, because the editors' fan-out refills the released flows;
//! the shed alone releases them for good.

use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::replay::{self, ReplaySummary};
use stormbreak_sim::scenario::{ActionKind, Scenario};

const PAUSE_H: f64 = 3.6; // 16:36

fn run(edit: impl FnOnce(&mut Scenario)) -> ReplaySummary {
    let mut sc = replay::scenario().expect("built-in scenario parses");
    edit(&mut sc);
    let rec = Engine::new(
        &sc,
        RunOptions {
            seed: None,
            scale: replay::DEFAULT_SCALE,
        },
    )
    .run()
    .expect("the run stays within its bounds");
    replay::summarize(&rec, &[])
}

fn recovered_h(r: &ReplaySummary, path: &str) -> f64 {
    let p = r.paths.iter().find(|p| p.path == path).expect("path");
    p.recovered_at_s.expect("recovers by the end") / 3600.0
}

#[test]
fn the_pause_without_the_shed_is_undone_by_the_token_loop() {
    let r = run(|sc| {
        sc.actions
            .retain(|a| !matches!(a.get_ref().kind, ActionKind::Shed { .. }));
    });
    assert!(r.headline.metastable);
    // Still degraded long after the pause: the storm re-forms on resume and
    // lasts until the site-by-site restore sheds most token traffic (19:00).
    let web = recovered_h(&r, "repository read");
    assert!(web > PAUSE_H + 1.0, "repository read back at {web:.2} h");
}

#[test]
fn the_shed_without_the_pause_ends_the_storm() {
    let r = run(|sc| {
        sc.actions.retain(|a| {
            !matches!(
                a.get_ref().kind,
                ActionKind::PauseNodes { .. } | ActionKind::RestartNodes { .. }
            )
        });
    });
    for path in [
        "repository read",
        "archive / raw download",
        "git operations",
    ] {
        let t = recovered_h(&r, path);
        assert!(
            (PAUSE_H - 0.1..=PAUSE_H + 0.15).contains(&t),
            "{path} back at {t:.2} h"
        );
    }
}

/// Modelling connections does not change that answer (docs/replay.md, "The
/// pause question"): with keep-alive connections that the pause resets and
/// editors that then wait gRPC's reconnect backoff, the storm still
/// re-forms within a minute of the resume, because what sustains it — the
/// editors' live operations and their pending fan-out — lives in the
/// clients, which a pause does not touch.
#[test]
fn with_connections_and_a_reconnect_backoff_the_pause_alone_is_still_undone() {
    let r = run(|sc| {
        sc.actions
            .retain(|a| !matches!(a.get_ref().kind, ActionKind::Shed { .. }));
        replay::with_connections(sc, replay::ConnectionModel::KeepAliveBackoff);
    });
    assert!(r.headline.metastable);
    let web = recovered_h(&r, "repository read");
    assert!(web > PAUSE_H + 1.0, "repository read back at {web:.2} h");
}

//! Scenario (b), `scenarios/lab-incident.toml`: the incident's failure
//! class at lab size. The lab plans every part of it (a full run takes
//! 100 s, so it is a bench, not a test: docs/lab.md); the simulator, which
//! the lab is compared against, shows the shape the scenario exists for:
//! without the remedies the storm outlives its trigger, and with them each
//! path recovers at its own restore.

use stormbreak_lab::{LabOptions, LabPlan};
use stormbreak_policy::Nanos;
use stormbreak_sim::Recording;
use stormbreak_sim::engine::{Engine, RunOptions};

use crate::common::scenario;

const INCIDENT: &str = include_str!("../../../../scenarios/lab-incident.toml");

#[test]
fn the_lab_plans_every_part_of_scenario_b() {
    let plan =
        LabPlan::new(&scenario(INCIDENT), &LabOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.lbs.len(), 3);
    assert_eq!(plan.gateways.len(), 2);
    assert!(plan.gateways.iter().all(|g| g.dependency.is_some()));
    let auth = plan.services.iter().find(|s| s.name == "auth").unwrap();
    assert!(auth.sidecar.is_some() && auth.autoscaler.is_some());
    assert!(plan.clients.iter().any(|c| c.fanout.is_some()));
    assert_eq!(plan.actions.len(), 7);
    assert!(plan.duration <= Nanos::from_secs(120));
}

fn simulate(text: &str) -> Recording {
    let sc = scenario(text);
    Engine::new(
        &sc,
        RunOptions {
            seed: None,
            scale: 1.0,
        },
    )
    .run()
    .unwrap()
}

/// Successes over attempts of `route` in the intervals ending in
/// `(from, to]` seconds (over attempts, not requests: a fan-out operation
/// can succeed on several branches).
fn goodput(rec: &Recording, route: &str, from: u64, to: u64) -> f64 {
    let r = rec.route(route).unwrap();
    let step = rec.interval.as_secs_f64();
    let (mut ok, mut started) = (0, 0);
    for i in 0..r.successes.len() {
        let end = (i + 1) as f64 * step;
        if end > from as f64 && end <= to as f64 {
            ok += r.successes[i];
            started += r.attempts[i];
        }
    }
    ok as f64 / started.max(1) as f64
}

#[test]
fn in_the_simulator_the_storm_outlives_its_trigger_and_each_path_recovers_at_its_restore() {
    // The peak ends at 42 s. Without the remedies no path comes back.
    let actions = INCIDENT.find("[[action]]").unwrap();
    let bare = simulate(&INCIDENT[..actions]);
    for route in ["web", "git", "token"] {
        let g = goodput(&bare, route, 60, 100);
        assert!(g < 0.2, "{route}: goodput {g} from 60 s without remedies");
    }
    // With them: everything shed from 50 s, then web back at 65 s, git at
    // 75 s and the token path at 85 s, each healthy within a few seconds
    // of its own restore and not before.
    let rec = simulate(INCIDENT);
    for (route, restored) in [("web", 65), ("git", 75), ("token", 85)] {
        let before = goodput(&rec, route, 52, restored);
        let after = goodput(&rec, route, restored + 5, 100);
        assert!(
            before < 0.05,
            "{route}: goodput {before} before its restore"
        );
        assert!(after > 0.95, "{route}: goodput {after} after its restore");
    }
}

#[test]
fn the_comparisons_figures_see_the_paths_recover_in_their_restore_order() {
    let rec = simulate(INCIDENT);
    let opts = stormbreak_sweep::classify::ClassifyOptions::new(Nanos::from_secs(5), None).unwrap();
    let figures = stormbreak_lab::compare::figures(&scenario(INCIDENT), &rec, opts).unwrap();
    let after = |route: &str| {
        let f = figures.iter().find(|f| f.route == route).unwrap();
        assert_eq!(f.class.name(), "metastable", "{f:?}");
        f.after_remedy.unwrap().as_secs_f64()
    };
    // Restored 15, 25 and 35 s after the first remedy; each out of breach
    // once its 4 s SLO window is clear of the failures before.
    let (web, git, token) = (after("web"), after("git"), after("token"));
    assert!((15.0..=22.0).contains(&web), "web {web}");
    assert!((25.0..=32.0).contains(&git), "git {git}");
    assert!((35.0..=42.0).contains(&token), "token {token}");
}

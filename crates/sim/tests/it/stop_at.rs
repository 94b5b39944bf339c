//! `Engine::stop_at(t)` makes the run a copy of the scenario cut at `t`
//! would make: the same recording, the same events, the same digest. The
//! copy is made the way a user would make it: `duration = t` and every
//! action after `t` deleted from the file (where that copy is valid: an
//! `[[slo]]` window longer than `t` would make it invalid, while the
//! engine, which does not read SLOs, runs either way).

use stormbreak_policy::Nanos;
use stormbreak_policy::units::{format_duration, parse_duration};
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::{Recording, Scenario};

/// The scenario text with `duration = at` and no `[[action]]` after `at`.
fn cut(text: &str, at: Nanos) -> String {
    let mut doc: toml::Table = text.parse().expect("scenario TOML");
    let meta = doc["scenario"].as_table_mut().expect("[scenario]");
    meta.insert("duration".into(), format_duration(at).into());
    if let Some(actions) = doc.get_mut("action").and_then(|a| a.as_array_mut()) {
        actions
            .retain(|a| parse_duration(a["at"].as_str().expect("at")).expect("a duration") <= at);
    }
    toml::to_string(&doc).expect("TOML out")
}

fn run(sc: &Scenario, opts: RunOptions, stop: Option<Nanos>) -> (Recording, u64, u64) {
    let mut e = Engine::new(sc, opts);
    if let Some(t) = stop {
        e = e.stop_at(t);
    }
    while e
        .run_until(e.end())
        .expect("the run stays within its bounds")
    {}
    let (events, digest) = (e.events(), e.event_digest());
    let rec = e.run().expect("already at the end");
    (rec, events, digest)
}

fn same_run_as_the_cut_copy(file: &str, at: Nanos, opts: RunOptions) -> Recording {
    let text = std::fs::read_to_string(file).expect("scenario file");
    let whole = Scenario::parse(file, &text).expect("valid scenario");
    let copy = Scenario::parse("cut.toml", &cut(&text, at)).expect("the cut copy is valid");
    let (a, a_events, a_digest) = run(&whole, opts, Some(at));
    let (b, b_events, b_digest) = run(&copy, opts, None);
    assert_eq!(a.duration, at);
    assert_eq!(
        (a_events, a_digest),
        (b_events, b_digest),
        "{file} cut at {at:?}"
    );
    let json = |r: &Recording| serde_json::to_string(r).expect("json");
    assert!(
        json(&a) == json(&b),
        "{file} cut at {at:?}: the recordings differ"
    );
    a
}

#[test]
fn a_run_stopped_between_actions_is_the_cut_copy() {
    // Actions at 5, 12 and 20 minutes happen (the first two revert within
    // the cut); those from 27 minutes on never do.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    );
    let rec = same_run_as_the_cut_copy(file, Nanos::from_secs(21 * 60), RunOptions::default());
    assert_eq!(
        rec.actions.len(),
        3 + 2,
        "three actions and two reverts: {:?}",
        rec.actions
    );
}

#[test]
fn a_run_stopped_inside_an_interval_is_the_cut_copy() {
    // 25 min 5 s: half an interval, five minutes after the pods killed at
    // 20 minutes.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    );
    same_run_as_the_cut_copy(file, Nanos::from_secs(25 * 60 + 5), RunOptions::default());
}

#[test]
fn a_run_stopped_before_a_revert_is_the_cut_copy() {
    // The pods killed at 27 minutes come back at 32: not within the cut.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    );
    let rec = same_run_as_the_cut_copy(file, Nanos::from_secs(29 * 60), RunOptions::default());
    assert_eq!(rec.actions.len(), 4 + 2, "{:?}", rec.actions);
}

#[test]
fn a_run_stopped_at_an_action_applies_it() {
    // The action at 35 minutes is at the cut itself: both runs apply it.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    );
    let rec = same_run_as_the_cut_copy(file, Nanos::from_secs(35 * 60), RunOptions::default());
    assert_eq!(rec.actions.len(), 5 + 3, "{:?}", rec.actions);
}

/// The incident's first 10 minutes: LBs, gateways, sidecars, job queues,
/// fan-out and the failover controllers' plans, all cut alike.
#[test]
fn the_incident_stopped_at_ten_minutes_is_the_cut_copy() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/github-2026-08-17.toml"
    );
    let opts = RunOptions {
        seed: None,
        scale: 0.01,
    };
    let rec = same_run_as_the_cut_copy(file, Nanos::from_secs(600), opts);
    assert!(rec.actions.is_empty(), "the operators act from 1h30m on");
}

#[test]
fn stopping_after_the_end_changes_nothing() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    );
    let text = std::fs::read_to_string(file).unwrap();
    let sc = Scenario::parse(file, &text).unwrap();
    let (a, a_events, a_digest) = run(&sc, RunOptions::default(), Some(Nanos::from_secs(86_400)));
    let (b, b_events, b_digest) = run(&sc, RunOptions::default(), None);
    assert_eq!(a.duration, sc.scenario.duration);
    assert_eq!((a_events, a_digest), (b_events, b_digest));
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

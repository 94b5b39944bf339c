//! A whole sweep: axes over the example scenario, outputs byte-identical
//! whatever the thread count, three shards merged into exactly what one
//! run writes, and every cell's scenario validated before anything runs.

use stormbreak_sim::output::OutputSet;
use stormbreak_sweep::output::{self, SHARD_JSON, merge, read_shard};
use stormbreak_sweep::plan::{Plan, SweepSpec};
use stormbreak_sweep::run::{self, Shard};

const SCENARIO: &str = include_str!("../../../../scenarios/capacity-drop.toml");

/// 3 × 2 cells × 2 seeds on the capacity drop: depth and length of the cut.
fn spec() -> SweepSpec {
    let mut s = SweepSpec::grid(&["action.cut.factor=2.5,5,6", "action.cut.for=0.5x..1x:2"]);
    s.seeds = 2.into();
    s
}

fn files(set: &OutputSet) -> Vec<(String, Vec<u8>)> {
    set.names()
        .map(|n| (n.to_owned(), set.get(n).unwrap().to_vec()))
        .collect()
}

fn whole(threads: usize) -> OutputSet {
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec()).unwrap();
    let results = run::run(&plan, Shard::ALL, threads, || {}).unwrap();
    output::outputs(&plan, &results).unwrap()
}

#[test]
fn outputs_are_byte_identical_at_one_and_two_threads() {
    let one = whole(1);
    let two = whole(2);
    assert_eq!(
        one.names().collect::<Vec<_>>(),
        ["sweep.csv", "summary.json", "report.html"]
    );
    assert_eq!(files(&one), files(&two));
    // And the sweep found both sides of the edge, so the identity is not
    // that of an all-alike map.
    let csv = String::from_utf8(one.get("sweep.csv").unwrap().to_vec()).unwrap();
    assert!(csv.contains(",metastable,"), "{csv}");
    assert!(
        csv.contains(",recovered,") || csv.contains(",stable,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 1 + 6 * 2, "{csv}");
    assert!(csv.starts_with(
        "cell,run,action.cut.factor,action.cut.for,seed,class,recovery_s,breach_start_s,max_interval_amplification,window_amplification,error_rate,bounds_hit\n"
    ));
}

#[test]
fn three_shards_merge_into_exactly_one_runs_outputs() {
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec()).unwrap();
    let mut shards = Vec::new();
    for i in 1..=3 {
        let shard = Shard::parse(&format!("{i}/3")).unwrap();
        let results = run::run(&plan, shard, 2, || {}).unwrap();
        assert_eq!(results.len(), 4, "6 cells over 3 shards, 2 seeds each");
        let set = output::shard_file(&plan, shard, &results).unwrap();
        // Through bytes, as a merge reads them from disk; shards given out
        // of order.
        let name = format!("shard-{i}/{SHARD_JSON}");
        shards.insert(
            0,
            (
                name.clone(),
                read_shard(&name, set.get(SHARD_JSON).unwrap()).unwrap(),
            ),
        );
    }
    let (_, merged) = merge(&shards).unwrap();
    assert_eq!(files(&merged), files(&whole(1)));

    let e = merge(&shards[..2]).unwrap_err();
    assert!(e.contains("is missing"), "{e}");
    let mut twice = shards.clone();
    twice[0] = shards[1].clone();
    let e = merge(&twice).unwrap_err();
    assert!(e.contains("is given twice"), "{e}");
}

#[test]
fn a_shard_of_another_sweep_is_refused() {
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec()).unwrap();
    let mut other_spec = spec();
    other_spec.seeds = 1.into();
    let other = Plan::new("capacity-drop.toml", SCENARIO, other_spec).unwrap();
    let mk = |p: &Plan, i: usize| {
        let shard = Shard { index: i, count: 2 };
        let r = run::run(p, shard, 1, || {}).unwrap();
        let set = output::shard_file(p, shard, &r).unwrap();
        read_shard("x", set.get(SHARD_JSON).unwrap()).unwrap()
    };
    let e = merge(&[("a".into(), mk(&plan, 0)), ("b".into(), mk(&other, 1))]).unwrap_err();
    assert!(e.contains("b is a shard of another sweep than a"), "{e}");
}

#[test]
fn cell_seeds_depend_on_the_sweep_seed_and_coordinates_only() {
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec()).unwrap();
    let mut seeds: Vec<u64> = plan
        .cells
        .iter()
        .flat_map(|c| (0..2).map(|k| plan.run_seed(c, k)))
        .collect();
    let mut reseeded = spec();
    reseeded.seed = Some(7);
    let other = Plan::new("capacity-drop.toml", SCENARIO, reseeded).unwrap();
    assert_ne!(
        plan.run_seed(&plan.cells[0], 0),
        other.run_seed(&other.cells[0], 0)
    );
    // The same coordinates in a bigger grid keep their seed.
    let mut wider = spec();
    wider.axes[0] = "action.cut.factor=2.5,5,6,7".into();
    let wide = Plan::new("capacity-drop.toml", SCENARIO, wider).unwrap();
    assert_eq!(
        plan.run_seed(&plan.cells[3], 1),
        wide.run_seed(&wide.cells[3], 1)
    );
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 12, "every run its own seed");
}

#[test]
fn errors_name_the_path_and_what_exists() {
    let plan = |axes: &[&str]| {
        Plan::new("capacity-drop.toml", SCENARIO, SweepSpec::grid(axes)).unwrap_err()
    };
    let e = plan(&["client.users.rate=1..2:3"]);
    assert!(e.contains("`client` has no element \"users\""), "{e}");
    assert!(e.contains("\"app\""), "lists the clients: {e}");
    let e = plan(&["client.app.rte=1..2:3"]);
    assert!(e.contains("`client.app` has no `rte`"), "{e}");
    assert!(
        e.contains("`rate`") && e.contains("`timeout`"),
        "lists the fields: {e}"
    );
    let e = plan(&["action.cutt.factor=1..2:3"]);
    assert!(e.contains("\"cut\""), "lists action ids: {e}");
    let e = plan(&["service.db.app=1..2:3"]);
    assert!(e.contains("is a table, not a single value"), "{e}");
    assert!(e.contains("`workers`"), "{e}");
    let e = plan(&["client.app.timeout=fast,slow"]);
    assert!(e.contains("expected a duration"), "{e}");
    let e = plan(&["service.db.app.workers=1..3:5"]);
    assert!(
        e.contains("the values 1.5 and 2 (points 2 and 3) both become 2"),
        "{e}"
    );
    let e = plan(&["client.app.rate"]);
    assert!(e.contains("expected PATH=LO..HI:N"), "{e}");
    let e = plan(&["client.app.budget.kind=ratio"]);
    assert!(
        e.contains("has no `budget`") && e.contains("must be written in the scenario"),
        "{e}"
    );
}

/// A value the scenario's own validation refuses is reported for its
/// cell, with the file's line and column, before any run.
#[test]
fn every_cell_is_validated_before_anything_runs() {
    let e = Plan::new(
        "capacity-drop.toml",
        SCENARIO,
        SweepSpec::grid(&["action.cut.factor=2,5,2000"]),
    )
    .unwrap_err();
    assert!(
        e.starts_with("cell 2 (action.cut.factor = 2000.0): capacity-drop.toml:"),
        "{e}"
    );
    let line = SCENARIO
        .lines()
        .position(|l| l.starts_with("factor = "))
        .unwrap()
        + 1;
    assert!(e.contains(&format!("capacity-drop.toml:{line}:")), "{e}");
    assert!(e.contains("factor"), "{e}");
}

#[test]
fn a_latin_hypercube_uses_each_stratum_once() {
    let mut spec = SweepSpec::grid(&[
        "action.cut.factor=2..6:2",
        "client.app.rate=500/s..1000/s:2",
    ]);
    spec.samples = Some(8);
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec).unwrap();
    assert_eq!(plan.cells.len(), 8);
    let mut strata: Vec<usize> = plan
        .cells
        .iter()
        .map(|c| {
            let f: f64 = stormbreak_sweep::value::display(&c.values[0])
                .parse()
                .unwrap();
            ((f - 2.0) / 4.0 * 8.0) as usize
        })
        .collect();
    strata.sort_unstable();
    assert_eq!(strata, (0..8).collect::<Vec<_>>());
}

#[test]
fn a_run_that_hits_an_engine_bound_says_so_in_every_output() {
    // No `queue` on the app: the engine's default bound of 100 000 places
    // fills after 10 s of 10k/s against one slow worker, in one cell of
    // two.
    let text = r#"
[scenario]
name = "unbounded"
duration = "30s"
interval = "10s"

[[service]]
name = "slow"
replicas = 1
app = { workers = 1, service_time = { dist = "constant", value = "1s" } }

[[route]]
name = "r"
path = ["slow"]

[[client]]
name = "users"
route = "r"
rate = "1/s"
timeout = "60s"

[[action]]
id = "flood"
role = "trigger"
at = "5s"
do = "set_rate"
client = "users"
rate = "10k/s"

[[action]]
role = "trigger"
at = "25s"
do = "set_rate"
client = "users"
rate = "1/s"
"#;
    let plan = Plan::new(
        "unbounded.toml",
        text,
        SweepSpec::grid(&["action.flood.rate=1/s,10k/s"]),
    )
    .unwrap();
    let results = run::run(&plan, Shard::ALL, 1, || {}).unwrap();
    assert_eq!(results[0].bounds_hit, 0, "{:?}", results[0]);
    assert!(results[1].bounds_hit > 50_000, "{:?}", results[1]);
    let set = output::outputs(&plan, &results).unwrap();
    let csv = String::from_utf8(set.get("sweep.csv").unwrap().to_vec()).unwrap();
    assert!(csv.lines().nth(1).unwrap().ends_with(",0"), "{csv}");
    assert!(
        csv.lines()
            .nth(2)
            .unwrap()
            .ends_with(&format!(",{}", results[1].bounds_hit))
    );
    let summary: serde_json::Value =
        serde_json::from_slice(set.get("summary.json").unwrap()).unwrap();
    assert_eq!(summary["cells"][0]["runs_hitting_bounds"], 0);
    assert_eq!(summary["cells"][1]["runs_hitting_bounds"], 1);
    // A shard keeps the count through a merge.
    let shard = output::shard_file(&plan, Shard::ALL, &results).unwrap();
    let back = read_shard(SHARD_JSON, shard.get(SHARD_JSON).unwrap()).unwrap();
    let (_, merged) = merge(&[("shard".to_owned(), back)]).unwrap();
    assert_eq!(files(&merged), files(&set));
}

/// Chosen seeds (`--seeds 1..=2`) are every cell's seeds as given, travel
/// in the spec to the shards, and the shards merge into the single run.
#[test]
fn chosen_seeds_are_every_cells_and_shards_keep_them() {
    let mut chosen = spec();
    chosen.seeds = stormbreak_sweep::seeds::Seeds::parse("1..=2", 1000).unwrap();
    let plan = Plan::new("capacity-drop.toml", SCENARIO, chosen).unwrap();
    for c in &plan.cells {
        assert_eq!([plan.run_seed(c, 0), plan.run_seed(c, 1)], [1, 2]);
    }
    let results = run::run(&plan, Shard::ALL, 2, || {}).unwrap();
    assert!(results.iter().all(|r| r.seed == u64::from(r.run) + 1));
    let whole = output::outputs(&plan, &results).unwrap();
    let summary: serde_json::Value =
        serde_json::from_slice(whole.get("summary.json").unwrap()).unwrap();
    assert_eq!(summary["spec"]["seeds"], serde_json::json!([1, 2]));
    let mut shards = Vec::new();
    for i in 0..2 {
        let shard = Shard { index: i, count: 2 };
        let r = run::run(&plan, shard, 1, || {}).unwrap();
        let set = output::shard_file(&plan, shard, &r).unwrap();
        shards.push((
            format!("s{i}"),
            read_shard("x", set.get(SHARD_JSON).unwrap()).unwrap(),
        ));
    }
    let (_, merged) = merge(&shards).unwrap();
    assert_eq!(files(&merged), files(&whole));
}

/// An autoscaler's `behavior` is the policy crate's table, reached by the
/// same paths as any field: durations sweep as durations, pod counts as
/// whole numbers, and a cell the policy's bounds refuse is named before
/// anything runs.
#[test]
fn an_autoscaler_behavior_field_is_an_axis_like_any_other() {
    let text = r#"[scenario]
name = "hpa"
duration = "2m"

[[service]]
name = "api"
replicas = 2
app = { workers = 4, service_time = { dist = "exponential", mean = "10ms" } }
autoscaler = { metric = "app_cpu", target = 0.6, min = 2, max = 20, pod_start = "30s",
  behavior = { scale_up = { policies = [{ type = "Pods", value = 1, period = "60s" }] } } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "100/s"
timeout = "1s"

[[client.step]]
at = "30s"
rate = "300/s"
role = "trigger"
"#;
    let up = "service.api.autoscaler.behavior.scale_up.policies.0";
    let plan = Plan::new(
        "hpa.toml",
        text,
        SweepSpec::grid(&[
            &format!("{up}.period=15s..60s:2"),
            &format!("{up}.value=1..4:4"),
        ]),
    )
    .unwrap();
    let kinds: Vec<_> = plan.axes.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            stormbreak_sweep::value::Kind::Duration,
            stormbreak_sweep::value::Kind::Integer
        ]
    );
    assert_eq!(plan.cells.len(), 8);
    let e = Plan::new(
        "hpa.toml",
        text,
        SweepSpec::grid(&[&format!("{up}.period=60s,31m")]),
    )
    .unwrap_err();
    assert!(e.starts_with("cell 1 ("), "{e}");
    assert!(
        e.contains("hpa.toml:10:78: ")
            && e.contains("policies[0].period must be in (0s, 30m], got 31m"),
        "{e}"
    );
}

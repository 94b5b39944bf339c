//! `stormbreak sweep`: the metastability map of a scenario.
//!
//! A sweep varies scenario fields along axes ([`axis`], addressed by
//! [`path`]), builds and validates every cell's scenario before anything
//! runs ([`plan`]), runs each cell on seeds derived from the sweep seed and
//! the cell's coordinates, or on seeds chosen in the grammar of [`seeds`],
//! on any number of threads ([`run`], on `stormbreak_sim::parallel`),
//! classifies each run as stable, recovered, slow, metastable or
//! undetermined ([`classify`]) and writes `sweep.csv`, `summary.json` and
//! `report.html` ([`output`], [`html`]), or one shard's `shard.json` for
//! [`output::merge`]. The user's guide is `docs/sweep.md`.
//! [`sensitivity`] varies the built-in replay's ASSUMPTION numbers one at
//! a time (`stormbreak replay --sensitivity`, `docs/replay.md`).
//!
//! ```
//! use stormbreak_sweep::{plan::{Plan, SweepSpec}, run, output};
//! let text = r#"
//! [scenario]
//! name = "tiny"
//! duration = "60s"
//! [[service]]
//! name = "s"
//! replicas = 1
//! app = { workers = 4, service_time = { dist = "exponential", mean = "1ms" } }
//! [[route]]
//! name = "r"
//! path = ["s"]
//! [[client]]
//! name = "c"
//! route = "r"
//! rate = "100/s"
//! timeout = "1s"
//! [[action]]
//! id = "spike"
//! role = "trigger"
//! at = "10s"
//! do = "set_rate"
//! client = "c"
//! rate = "200/s"
//! "#;
//! let plan = Plan::new("tiny.toml", text, SweepSpec::grid(&["action.spike.rate=200/s,300/s"])).unwrap();
//! let results = run::run(&plan, run::Shard::ALL, 1, || {}).unwrap();
//! let files = output::outputs(&plan, &results).unwrap();
//! assert!(files.get("sweep.csv").is_some());
//! ```
#![warn(missing_docs)]

pub mod axis;
pub mod classify;
pub mod html;
pub mod k8s;
pub mod output;
pub mod path;
pub mod plan;
pub mod run;
pub mod seeds;
pub mod sensitivity;
pub mod value;

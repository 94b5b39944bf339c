//! A deterministic discrete-event simulator of service-mesh overload.
//!
//! A [`Scenario`] (TOML) describes components — load-balancer pools whose
//! nodes hold flows, gateways with a dependency call and retries, services
//! whose pods are a sidecar (concurrency limit, queue) plus an app container
//! (workers, service-time distribution), autoscalers — the routes through
//! them, open-loop client populations with their retry habits, and timeline
//! actions. The [`engine::Engine`] plays it in virtual time; every policy
//! decision (retries, budgets, autoscaling) is made by `stormbreak-policy`,
//! the same code the gateway runs. Outcomes — error rates, amplification,
//! recovery — are never inputs; they come out in the [`Recording`].
//!
//! ```
//! use stormbreak_sim::{Scenario, engine::{Engine, RunOptions}};
//! let text = r#"
//! [scenario]
//! name = "one-server"
//! duration = "10s"
//! [[service]]
//! name = "backend"
//! replicas = 1
//! app = { workers = 1, service_time = { dist = "exponential", mean = "1ms" } }
//! [[route]]
//! name = "r"
//! path = ["backend"]
//! [[client]]
//! name = "users"
//! route = "r"
//! rate = "500/s"
//! timeout = "1s"
//! "#;
//! let scenario = Scenario::parse("example.toml", text).unwrap();
//! let rec = Engine::new(&scenario, RunOptions::default()).run().unwrap();
//! let r = rec.route("r").unwrap();
//! assert!(r.successes.iter().sum::<u64>() > 4_000);
//! ```

pub mod dist;
pub mod engine;
pub mod output;
pub mod parallel;
pub mod queue;
pub mod record;
pub mod recovery;
pub mod replay;
pub mod scenario;
pub mod slab;

pub use record::Recording;
pub use scenario::{Scenario, ScenarioError};

//! What several test files share: a run audited as it goes, and the known
//! metastable storm of `tests/metastability.rs`.

// Each test binary includes this module and uses part of it.
#![allow(dead_code)]

use stormbreak_policy::Nanos;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::{Recording, Scenario};

/// Parses `text` and runs it to its end at scale 1, checking the
/// conservation law (`Engine::audit`) every `step` of simulated time, not
/// only at the end. Panics with the scenario text on any failure.
pub fn run_audited(text: &str, seed: Option<u64>, step: Nanos) -> Recording {
    let sc = Scenario::parse("case.toml", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut e = Engine::new(&sc, RunOptions { seed, scale: 1.0 });
    let mut t = Nanos::ZERO;
    loop {
        t += step;
        let more = e.run_until(t).unwrap_or_else(|err| panic!("{err}\n{text}"));
        if let Err(err) = e.audit() {
            panic!("at {t}: {err}\n{text}");
        }
        if !more {
            break;
        }
    }
    e.finish()
}

/// The metastable client's spike: from 60 s to 70 s of simulated time.
pub const SPIKE_START_S: usize = 60;
pub const SPIKE_END_S: usize = 70;

/// Three immediate retries: the policy that locks the storm in.
pub const NAIVE: &str =
    r#"retry = { max_attempts = 4, backoff = { kind = "constant", base = "0" } }"#;

/// A retrying client population against a 10-worker service (Bronson et
/// al., "Metastable Failures in Distributed Systems", HotOS '21): 9 k/s of
/// demand against 10 k/s of capacity, a 10 s spike to 11.7 k/s, a 200 ms
/// timeout, an app queue of 3 000 (300 ms of work, longer than the
/// timeout), and the client's `retry` line (empty: none).
pub fn metastable(duration: &str, interval: &str, retry: &str) -> String {
    format!(
        r#"
[scenario]
name = "metastable"
duration = "{duration}"
interval = "{interval}"

[[service]]
name = "backend"
replicas = 1
app = {{ workers = 10, queue = 3000, service_time = {{ dist = "exponential", mean = "1ms" }} }}

[[route]]
name = "r"
path = ["backend"]

[[client]]
name = "users"
route = "r"
rate = "9k/s"
timeout = "200ms"
{retry}

[[client.step]]
at = "{SPIKE_START_S}s"
rate = "11.7k/s"

[[client.step]]
at = "{SPIKE_END_S}s"
rate = "9k/s"
"#
    )
}

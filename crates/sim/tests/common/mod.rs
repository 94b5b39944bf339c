//! What several test files share: a run audited as it goes.

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

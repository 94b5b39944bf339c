//! What one run's outcome is: stable, recovered, slow, metastable or
//! undetermined (definitions in `docs/sweep.md`).
//!
//! Everything here reads the run's [`Recording`] and the scenario's
//! markers (`role` on `[[action]]`, `[[slo]]`); it never looks at wall
//! time, so a run's class is as deterministic as the run.

use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;
use stormbreak_policy::units::format_duration;
use stormbreak_sim::Scenario;
use stormbreak_sim::record::Recording;
use stormbreak_sim::scenario::{ActionRole, DEFAULT_SLO_WINDOW};

/// `--recover-within`'s default: a breach that ends within a minute of the
/// trigger's end is a recovery (the known cases of
/// `crates/sim/tests/it/metastability.rs` return within a minute).
pub const DEFAULT_RECOVER_WITHIN: Nanos = Nanos::from_secs(60);

/// The error rate of the SLO a sweep applies to each client route when the
/// scenario has no `[[slo]]`: 5% of logical requests failing over
/// [`DEFAULT_SLO_WINDOW`].
pub const DEFAULT_ERROR_RATE: f64 = 0.05;

/// A run's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// No SLO breach while observed.
    Stable,
    /// A breach that ended within `--recover-within` of the trigger's end.
    Recovered,
    /// A breach that ended later, before observation ended.
    Slow,
    /// A breach lasting to the end of observation (the run's end, or the
    /// first operator action).
    Metastable,
    /// Observation ended less than the observation window after the
    /// trigger: too early to say.
    Undetermined,
    /// A limit of the engine (`engine::Limits`) stopped the run: it says
    /// nothing about recovery, and the sweep goes on.
    Stopped,
}

impl Class {
    /// Every class, in the order outputs list them.
    pub const ALL: [Class; 6] = [
        Class::Stable,
        Class::Recovered,
        Class::Slow,
        Class::Metastable,
        Class::Undetermined,
        Class::Stopped,
    ];

    /// The name outputs use.
    pub fn name(self) -> &'static str {
        match self {
            Class::Stable => "stable",
            Class::Recovered => "recovered",
            Class::Slow => "slow",
            Class::Metastable => "metastable",
            Class::Undetermined => "undetermined",
            Class::Stopped => "stopped",
        }
    }
}

/// One route's SLO, in recording intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slo {
    /// Route name.
    pub route: String,
    /// Largest failing share of logical requests over the window.
    pub error_rate: Option<f64>,
    /// The window, a whole number of intervals.
    pub window: Nanos,
    /// Longest job wait.
    pub job_wait: Option<Nanos>,
    /// Whether it is the sweep's default rather than the scenario's.
    pub default: bool,
}

/// The SLOs of `sc`: its `[[slo]]` tables, else [`DEFAULT_ERROR_RATE`]
/// over [`DEFAULT_SLO_WINDOW`] on every route a client population calls.
pub fn slos(sc: &Scenario) -> Vec<Slo> {
    if !sc.slos.is_empty() {
        return sc
            .slos
            .iter()
            .map(|s| Slo {
                route: s.route.get_ref().clone(),
                error_rate: s.error_rate,
                window: s.window,
                job_wait: s.job_wait,
                default: false,
            })
            .collect();
    }
    let mut routes: Vec<&str> = Vec::new();
    for c in &sc.clients {
        let r = c.route.get_ref().as_str();
        if !routes.contains(&r) {
            routes.push(r);
        }
    }
    routes
        .into_iter()
        .map(|r| Slo {
            route: r.to_owned(),
            error_rate: Some(DEFAULT_ERROR_RATE),
            window: DEFAULT_SLO_WINDOW.max(sc.scenario.interval),
            job_wait: None,
            default: true,
        })
        .collect()
}

/// When the trigger ends and observation stops, from the scenario's
/// action roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// End of the last trigger (`at` + `for`, else `at`).
    pub trigger_end: Nanos,
    /// The first operator action, else the run's end.
    pub observe_until: Nanos,
}

impl Timeline {
    /// Reads the roles of `sc`'s actions; a scenario without a trigger
    /// cannot say when recovery starts, and is refused.
    pub fn of(sc: &Scenario) -> Result<Timeline, String> {
        let mut trigger_end = None;
        let mut operator: Option<Nanos> = None;
        // Actions end after `for`; a client's rate step after its ramp.
        let actions = sc.actions.iter().map(|a| {
            let a = a.get_ref();
            (a.role, a.at, a.lasts.unwrap_or(Nanos::ZERO))
        });
        let steps = sc
            .clients
            .iter()
            .flat_map(|c| c.steps.iter().map(|s| (s.role, s.at, s.ramp)));
        for (role, at, lasts) in actions.chain(steps) {
            match role {
                Some(ActionRole::Trigger) => {
                    let end = at.saturating_add(lasts);
                    trigger_end = Some(trigger_end.map_or(end, |t: Nanos| t.max(end)));
                }
                Some(ActionRole::Operator) => {
                    operator = Some(operator.map_or(at, |t| t.min(at)));
                }
                None => {}
            }
        }
        let trigger_end = trigger_end.ok_or_else(|| {
            "no trigger: mark the [[action]]s (or the client rate steps) that push the system \
             (a spike, a capacity drop) with role = \"trigger\", so recovery can be measured \
             from their end"
                .to_owned()
        })?;
        let end = sc.scenario.duration;
        Ok(Timeline {
            trigger_end,
            observe_until: operator.map_or(end, |o| o.min(end)),
        })
    }
}

/// How a sweep classifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifyOptions {
    /// A breach ending within this of the trigger's end is a recovery.
    pub recover_within: Nanos,
    /// Observation shorter than this after the trigger is undetermined;
    /// at least `recover_within`.
    pub observe: Nanos,
}

impl ClassifyOptions {
    /// Checks `observe ≥ recover_within`: with less, a breach still short
    /// of `recover_within` at the end would be called metastable.
    pub fn new(recover_within: Nanos, observe: Option<Nanos>) -> Result<Self, String> {
        let observe = observe.unwrap_or(recover_within);
        if observe < recover_within {
            return Err(format!(
                "--observe {} is shorter than --recover-within {}: a breach could not be told \
                 metastable from recovering; give --observe at least {}",
                format_duration(observe),
                format_duration(recover_within),
                format_duration(recover_within)
            ));
        }
        if recover_within.is_zero() {
            return Err("--recover-within must be > 0".to_owned());
        }
        Ok(ClassifyOptions {
            recover_within,
            observe,
        })
    }
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        ClassifyOptions {
            recover_within: DEFAULT_RECOVER_WITHIN,
            observe: DEFAULT_RECOVER_WITHIN,
        }
    }
}

/// What one run came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The class.
    pub class: Class,
    /// For recovered and slow runs: end of the breach minus the end of the
    /// trigger (zero if the breach ended first).
    pub recovery: Option<Nanos>,
    /// Start of the first breached interval, if any.
    pub breach_start: Option<Nanos>,
    /// Highest attempts per logical request in any single recording
    /// interval, over the SLO routes. An interval's attempts include the
    /// retries of requests started in earlier ones, so under a storm it
    /// can exceed the clients' `max_attempts`; see `window_amplification`
    /// for the figure over the classification's window.
    pub max_interval_amplification: f64,
    /// Attempts over logical requests started (first attempts), summed
    /// over the SLO routes from the trigger's end to the end of
    /// observation: the window `error_rate` is measured over.
    pub window_amplification: f64,
    /// Failing share of logical requests on the SLO routes from the
    /// trigger's end to the end of observation.
    pub error_rate: f64,
}

/// Whether each recording interval is in breach of any of `slos`.
pub fn breaches(rec: &Recording, slos: &[Slo]) -> Vec<bool> {
    let n = rec.intervals();
    let mut out = vec![false; n];
    let step = rec.interval.as_nanos().max(1);
    for slo in slos {
        let Some(r) = rec.route(&slo.route) else {
            continue;
        };
        let w = (slo.window.as_nanos().div_ceil(step) as usize).max(1);
        for (i, hit) in out.iter_mut().enumerate().take(r.first_attempts.len()) {
            // The run's first window is not judged on its error rate: the
            // requests still in flight at its end count as not answered,
            // and in a window shorter than its SLO's they are a large share.
            if let Some(limit) = slo.error_rate.filter(|_| i + 1 >= w) {
                let from = (i + 1).saturating_sub(w);
                let started: u64 = r.first_attempts[from..=i].iter().sum();
                let ok: u64 = r.successes[from..=i].iter().sum();
                if started > 0 && 1.0 - (ok as f64 / started as f64).min(1.0) > limit {
                    *hit = true;
                }
            }
            if let (Some(limit), Some(&wait)) = (slo.job_wait, r.job_wait_s.get(i))
                && wait > limit.as_nanos() as f64 / 1e9
            {
                *hit = true;
            }
        }
    }
    out
}

/// Classifies one run (see the module docs and `docs/sweep.md`).
pub fn classify(rec: &Recording, slos: &[Slo], tl: Timeline, opts: ClassifyOptions) -> Outcome {
    let step = rec.interval.as_nanos().max(1);
    let end_of = |i: usize| Nanos::from_nanos((i as u64 + 1).saturating_mul(step));
    let hits = breaches(rec, slos);
    // Intervals that end by the end of observation.
    let observed = hits
        .iter()
        .enumerate()
        .take_while(|(i, _)| end_of(*i) <= tl.observe_until)
        .count();
    let first = hits[..observed].iter().position(|&b| b);
    let last = hits[..observed].iter().rposition(|&b| b);
    let f = figures(rec, slos, tl, observed);
    let mut out = Outcome {
        class: Class::Stable,
        recovery: None,
        breach_start: first.map(|i| Nanos::from_nanos(i as u64 * step)),
        max_interval_amplification: f.max_interval_amplification,
        window_amplification: f.window_amplification,
        error_rate: f.error_rate,
    };
    if tl.observe_until < tl.trigger_end.saturating_add(opts.observe) {
        out.class = Class::Undetermined;
        return out;
    }
    let Some(last) = last else {
        return out;
    };
    if last + 1 == observed {
        out.class = Class::Metastable;
        return out;
    }
    let recovery = end_of(last).saturating_sub(tl.trigger_end);
    out.recovery = Some(recovery);
    out.class = if recovery <= opts.recover_within {
        Class::Recovered
    } else {
        Class::Slow
    };
    out
}

/// A run's figures over the SLO routes.
struct Figures {
    max_interval_amplification: f64,
    window_amplification: f64,
    error_rate: f64,
}

/// The largest single-interval amplification over the whole run, and
/// the amplification and error rate from the trigger's end to the end of
/// observation.
fn figures(rec: &Recording, slos: &[Slo], tl: Timeline, observed: usize) -> Figures {
    let step = rec.interval.as_nanos().max(1);
    let from = (tl.trigger_end.as_nanos() / step) as usize;
    let mut peak: f64 = 0.0;
    let (mut started, mut ok, mut attempts) = (0u64, 0u64, 0u64);
    let mut seen: Vec<&str> = Vec::new();
    for slo in slos {
        if seen.contains(&slo.route.as_str()) {
            continue;
        }
        seen.push(&slo.route);
        let Some(r) = rec.route(&slo.route) else {
            continue;
        };
        for (&a, &f) in r.attempts.iter().zip(&r.first_attempts) {
            if f > 0 {
                peak = peak.max(a as f64 / f as f64);
            }
        }
        let to = observed.min(r.first_attempts.len());
        if from < to {
            started += r.first_attempts[from..to].iter().sum::<u64>();
            ok += r.successes[from..to].iter().sum::<u64>();
            attempts += r.attempts[from..to].iter().sum::<u64>();
        }
    }
    let (error_rate, window_amplification) = if started == 0 {
        (0.0, 0.0)
    } else {
        (
            1.0 - (ok as f64 / started as f64).min(1.0),
            attempts as f64 / started as f64,
        )
    };
    Figures {
        max_interval_amplification: peak,
        window_amplification,
        error_rate,
    }
}

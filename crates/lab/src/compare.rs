//! `stormbreak lab --compare`: the simulator run on the same scenario,
//! seed and scale, and both runs read figure by figure, per route, by the
//! code `stormbreak sweep` classifies with (`stormbreak_sweep::classify`),
//! so a class or a recovery time means the same on both sides.
//!
//! Per route (each route an SLO covers: the scenario's `[[slo]]`, else the
//! sweep's default on every client route):
//! * **class** and **recovery** (end of the breach after the trigger's
//!   end): `classify::classify` with that route's SLOs alone;
//! * **amplification**: attempts over logical requests from the trigger's
//!   end to the end of observation (the classification's window);
//! * **peak error rate (5 min)**: the worst share of failed attempts
//!   (failed over answered) over trailing 5-minute windows, taken by the
//!   replay's own code (`stormbreak_sim::replay::
//!   peak_error_rate_over_headline_window`), so it means what the replay's
//!   headline means; in a run shorter than 5 minutes it is the failed
//!   share from the run's start, which a short burst barely moves;
//! * **peak error rate (SLO window)**: the same share over any window of
//!   the route's SLO, which a short burst fills;
//! * **saturated after**: start of the first breached interval minus the
//!   first trigger's start;
//! * **after remedy**: with operator actions, from the first operator
//!   action to the end of the first interval after it that the route is
//!   out of breach (`None` if it never is): when a staged remedy reached
//!   that path. A later breach (a restore elsewhere disturbing it) does
//!   not move it; the class and the other figures see those.
//!
//! [`GOALS`] are issue 39's: a figure is **met** when the lab's is within
//! its tolerance of the simulator's.

use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::units::format_duration;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;
use stormbreak_sim::replay;
use stormbreak_sim::scenario::ActionRole;
use stormbreak_sweep::classify::{self, Class, ClassifyOptions, Slo, Timeline};

/// One route's figures on one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteFigures {
    /// Route name.
    pub route: String,
    /// The sweep's class of the run, judged on this route alone.
    pub class: Class,
    /// Worst failed share of answered attempts over trailing 5-minute
    /// windows (the replay's headline window).
    pub peak_error_rate_5m: f64,
    /// Worst failed share of answered attempts over any SLO window.
    pub peak_error_rate: f64,
    /// Attempts per logical request over the classification's window.
    pub amplification: f64,
    /// From the first trigger's start to the route's first breach.
    pub saturated_after: Option<Nanos>,
    /// From the trigger's end to the end of the breach (recovered and
    /// slow runs).
    pub recovery: Option<Nanos>,
    /// From the first operator action to the end of the first interval
    /// after it in which the route is out of breach (scenarios with
    /// operator actions; `None` if it never is).
    pub after_remedy: Option<Nanos>,
}

/// Issue 39's tolerances: peak error rate within 10 percentage points,
/// amplification within 20 %, recovery within max(20 %, 10 s), the same
/// class.
pub const GOALS: &str = "peak error rate within 10 pp, amplification within 20 %, recovery \
                         and after-remedy within max(20 %, 10 s), the same class";

/// Both sides of a comparison, route by route (the same routes, in the
/// scenario's SLO order).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// What the classification used.
    pub recover_within: Nanos,
    /// Observation needed after the trigger.
    pub observe: Nanos,
    /// Per route: (simulator, lab).
    pub routes: Vec<(RouteFigures, RouteFigures)>,
}

/// Runs the simulator on `sc` with `seed` and `scale`, as `stormbreak
/// simulate --seed --scale` would.
pub fn simulate(sc: &Scenario, seed: u64, scale: f64) -> Result<Recording, String> {
    Engine::new(
        sc,
        RunOptions {
            seed: Some(seed),
            scale,
        },
    )
    .run()
    .map_err(|e| format!("the simulator's run stopped: {e}"))
}

/// The start of the first trigger (an action or a client rate step with
/// `role = "trigger"`).
fn trigger_start(sc: &Scenario) -> Option<Nanos> {
    let actions = sc
        .actions
        .iter()
        .map(|a| a.get_ref())
        .filter(|a| a.role == Some(ActionRole::Trigger))
        .map(|a| a.at);
    let steps = sc
        .clients
        .iter()
        .flat_map(|c| c.steps.iter())
        .filter(|s| s.role == Some(ActionRole::Trigger))
        .map(|s| s.at);
    actions.chain(steps).min()
}

/// The first operator action, if any.
fn first_operator(sc: &Scenario) -> Option<Nanos> {
    sc.actions
        .iter()
        .map(|a| a.get_ref())
        .filter(|a| a.role == Some(ActionRole::Operator))
        .map(|a| a.at)
        .min()
}

/// The worst failed share of answered attempts of `route` over any
/// window of `w` intervals.
fn peak_error_rate(rec: &Recording, route: &str, w: usize) -> f64 {
    let Some(r) = rec.route(route) else {
        return 0.0;
    };
    let n = r.successes.len();
    let w = w.clamp(1, n.max(1));
    (0..n.saturating_sub(w - 1))
        .map(|from| {
            let failed: u64 = (from..from + w).map(|i| r.failed(i)).sum();
            let ok: u64 = r.successes[from..from + w].iter().sum();
            if failed + ok == 0 {
                0.0
            } else {
                failed as f64 / (failed + ok) as f64
            }
        })
        .fold(0.0, f64::max)
}

/// Every SLO route's figures in `rec`, a run of `sc`.
pub fn figures(
    sc: &Scenario,
    rec: &Recording,
    opts: ClassifyOptions,
) -> Result<Vec<RouteFigures>, String> {
    let tl = Timeline::of(sc)?;
    let start = trigger_start(sc).unwrap_or(tl.trigger_end);
    let operator = first_operator(sc);
    let step = rec.interval.as_nanos().max(1);
    let slos = classify::slos(sc);
    let mut routes: Vec<&str> = Vec::new();
    for s in &slos {
        if !routes.contains(&s.route.as_str()) {
            routes.push(&s.route);
        }
    }
    Ok(routes
        .into_iter()
        .map(|route| {
            let own: Vec<Slo> = slos.iter().filter(|s| s.route == route).cloned().collect();
            let outcome = classify::classify(rec, &own, tl, opts);
            let window = own
                .iter()
                .map(|s| s.window.as_nanos().div_ceil(step) as usize)
                .max()
                .unwrap_or(1);
            let hits = classify::breaches(rec, &own);
            let end_of = |i: usize| Nanos::from_nanos((i as u64 + 1) * step);
            let after_remedy = operator.and_then(|op| {
                let first_clear = (0..hits.len()).find(|&i| end_of(i) > op && !hits[i])?;
                Some(end_of(first_clear).saturating_sub(op))
            });
            RouteFigures {
                route: route.to_owned(),
                class: outcome.class,
                peak_error_rate_5m: replay::peak_error_rate_over_headline_window(rec, &[route]),
                peak_error_rate: peak_error_rate(rec, route, window),
                amplification: outcome.window_amplification,
                saturated_after: outcome.breach_start.map(|b| b.saturating_sub(start)),
                recovery: outcome.recovery,
                after_remedy,
            }
        })
        .collect())
}

impl Comparison {
    /// The simulator's figures (`sim`, a run of `sc`) beside the lab's.
    pub fn new(
        sc: &Scenario,
        sim: &Recording,
        lab: &Recording,
        opts: ClassifyOptions,
    ) -> Result<Comparison, String> {
        let s = figures(sc, sim, opts)?;
        let l = figures(sc, lab, opts)?;
        Ok(Comparison {
            recover_within: opts.recover_within,
            observe: opts.observe,
            routes: s.into_iter().zip(l).collect(),
        })
    }

    /// The table `--compare` prints: per route, simulator / lab and
    /// whether the goal is met.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:<28} {:<20} {:<20} {:<20} {:<16} {:<16} {:<16}\n",
            "route",
            "class sim / lab",
            "peak err 5 min",
            "peak err SLO win",
            "amplification",
            "saturated",
            "recovery",
            "after remedy"
        );
        for (s, l) in &self.routes {
            let pct = |v: f64| format!("{:.0}%", v * 100.0);
            let dur = |d: Option<Nanos>| d.map_or("-".to_owned(), format_duration);
            let mark = |ok: Option<bool>| match ok {
                Some(true) => " ok",
                Some(false) => " MISS",
                None => "",
            };
            out.push_str(&format!(
                "{:<14} {:<28} {:<20} {:<20} {:<20} {:<16} {:<16} {:<16}\n",
                s.route,
                format!(
                    "{} / {}{}",
                    s.class.name(),
                    l.class.name(),
                    mark(Some(s.class == l.class))
                ),
                format!(
                    "{} / {}{}",
                    pct(s.peak_error_rate_5m),
                    pct(l.peak_error_rate_5m),
                    mark(Some(within_10pp(
                        s.peak_error_rate_5m,
                        l.peak_error_rate_5m
                    )))
                ),
                format!(
                    "{} / {}{}",
                    pct(s.peak_error_rate),
                    pct(l.peak_error_rate),
                    mark(Some(within_10pp(s.peak_error_rate, l.peak_error_rate)))
                ),
                format!(
                    "{:.2}x / {:.2}x{}",
                    s.amplification,
                    l.amplification,
                    mark(Some(amplification_met(s, l)))
                ),
                format!("{} / {}", dur(s.saturated_after), dur(l.saturated_after)),
                format!(
                    "{} / {}{}",
                    dur(s.recovery),
                    dur(l.recovery),
                    mark(time_met(s.recovery, l.recovery))
                ),
                format!(
                    "{} / {}{}",
                    dur(s.after_remedy),
                    dur(l.after_remedy),
                    mark(time_met(s.after_remedy, l.after_remedy))
                ),
            ));
        }
        out.push_str(&format!("goals: {GOALS}\n"));
        out
    }
}

/// One run of a `--repeat`: its seed, whether the lab's run was valid
/// (an invalid one is never compared), and both sides' figures.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatRun {
    /// The seed both sides ran with.
    pub seed: u64,
    /// Whether the lab's run was valid.
    pub valid: bool,
    /// Why not, when it was not.
    pub reasons: Vec<String>,
    /// The comparison (the lab's side is not counted when invalid).
    pub comparison: Comparison,
}

/// One route's classes over a `--repeat`: how many runs of each side fell
/// in each class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassShares {
    /// Route name.
    pub route: String,
    /// The simulator's runs by class name (every seed counts).
    pub simulator: std::collections::BTreeMap<&'static str, u32>,
    /// The lab's valid runs by class name.
    pub lab: std::collections::BTreeMap<&'static str, u32>,
    /// Simulator runs.
    pub simulator_runs: u32,
    /// Valid lab runs.
    pub lab_runs: u32,
    /// Lab runs discarded as invalid.
    pub discarded: u32,
}

impl ClassShares {
    /// The share of `side`'s runs that locked in (metastable).
    pub fn lock_in(side: &std::collections::BTreeMap<&'static str, u32>, runs: u32) -> f64 {
        if runs == 0 {
            return f64::NAN;
        }
        f64::from(side.get(Class::Metastable.name()).copied().unwrap_or(0)) / f64::from(runs)
    }

    /// Issue 39's goal at a boundary: lock-in shares within 0.3 (`None`
    /// without a valid lab run).
    pub fn met(&self) -> Option<bool> {
        let (s, l) = (
            Self::lock_in(&self.simulator, self.simulator_runs),
            Self::lock_in(&self.lab, self.lab_runs),
        );
        (self.lab_runs > 0).then(|| (s - l).abs() <= 0.3)
    }
}

/// Class shares per route over `runs` (the lab's invalid runs left out
/// and counted).
pub fn shares(runs: &[RepeatRun]) -> Vec<ClassShares> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .comparison
        .routes
        .iter()
        .enumerate()
        .map(|(k, (s, _))| {
            let mut out = ClassShares {
                route: s.route.clone(),
                simulator: Default::default(),
                lab: Default::default(),
                simulator_runs: 0,
                lab_runs: 0,
                discarded: 0,
            };
            for run in runs {
                let Some((s, l)) = run.comparison.routes.get(k) else {
                    continue;
                };
                *out.simulator.entry(s.class.name()).or_default() += 1;
                out.simulator_runs += 1;
                if run.valid {
                    *out.lab.entry(l.class.name()).or_default() += 1;
                    out.lab_runs += 1;
                } else {
                    out.discarded += 1;
                }
            }
            out
        })
        .collect()
}

/// The table `--repeat` prints: per route, each side's runs by class,
/// the lock-in shares and whether they are within 0.3.
pub fn shares_table(shares: &[ClassShares], runs: &[RepeatRun]) -> String {
    let count = |m: &std::collections::BTreeMap<&'static str, u32>| {
        Class::ALL
            .iter()
            .filter_map(|c| m.get(c.name()).map(|n| format!("{} {n}", c.name())))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    for s in shares {
        out.push_str(&format!(
            "{}: simulator {} of {} runs ({}); lab {} of {} valid runs ({}); lock-in {:.2} / {:.2}{}\n",
            s.route,
            s.simulator.get("metastable").copied().unwrap_or(0),
            s.simulator_runs,
            count(&s.simulator),
            s.lab.get("metastable").copied().unwrap_or(0),
            s.lab_runs,
            count(&s.lab),
            ClassShares::lock_in(&s.simulator, s.simulator_runs),
            ClassShares::lock_in(&s.lab, s.lab_runs),
            match s.met() {
                Some(true) => " ok",
                Some(false) => " MISS",
                None => "",
            }
        ));
    }
    let discarded: Vec<String> = runs
        .iter()
        .filter(|r| !r.valid)
        .map(|r| format!("seed {}: {}", r.seed, r.reasons.join("; ")))
        .collect();
    out.push_str(&format!(
        "lab runs discarded as invalid: {}{}\n",
        discarded.len(),
        if discarded.is_empty() {
            String::new()
        } else {
            format!(" ({})", discarded.join(" | "))
        }
    ));
    out
}

/// Two error rates within 10 percentage points.
pub fn within_10pp(s: f64, l: f64) -> bool {
    (s - l).abs() <= 0.10
}

/// Peak error rates within 10 percentage points, over both windows.
pub fn peak_met(s: &RouteFigures, l: &RouteFigures) -> bool {
    within_10pp(s.peak_error_rate_5m, l.peak_error_rate_5m)
        && within_10pp(s.peak_error_rate, l.peak_error_rate)
}

/// Amplifications within 20 % of the simulator's.
pub fn amplification_met(s: &RouteFigures, l: &RouteFigures) -> bool {
    (s.amplification - l.amplification).abs() <= 0.20 * s.amplification
}

/// Two times within max(20 % of the simulator's, 10 s); `None` when
/// neither side has one, unmet when only one has.
pub fn time_met(s: Option<Nanos>, l: Option<Nanos>) -> Option<bool> {
    match (s, l) {
        (None, None) => None,
        (Some(s), Some(l)) => {
            let tol = (s.as_secs_f64() * 0.2).max(10.0);
            Some((s.as_secs_f64() - l.as_secs_f64()).abs() <= tol)
        }
        _ => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(class: Class, peak: f64, ampl: f64) -> RouteFigures {
        RouteFigures {
            route: "r".into(),
            class,
            peak_error_rate_5m: peak,
            peak_error_rate: peak,
            amplification: ampl,
            saturated_after: None,
            recovery: None,
            after_remedy: None,
        }
    }

    #[test]
    fn shares_count_every_seed_and_leave_invalid_lab_runs_out() {
        let run = |seed, valid, sim: Class, lab: Class| RepeatRun {
            seed,
            valid,
            reasons: if valid { vec![] } else { vec!["late".into()] },
            comparison: Comparison {
                recover_within: Nanos::from_secs(1),
                observe: Nanos::from_secs(1),
                routes: vec![(f(sim, 0.0, 1.0), f(lab, 0.0, 1.0))],
            },
        };
        let runs = [
            run(1, true, Class::Metastable, Class::Metastable),
            run(2, true, Class::Recovered, Class::Metastable),
            run(3, false, Class::Metastable, Class::Recovered),
            run(4, true, Class::Recovered, Class::Recovered),
        ];
        let s = &shares(&runs)[0];
        assert_eq!((s.simulator_runs, s.lab_runs, s.discarded), (4, 3, 1));
        assert_eq!(ClassShares::lock_in(&s.simulator, s.simulator_runs), 0.5);
        assert!((ClassShares::lock_in(&s.lab, s.lab_runs) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.met(), Some(true), "0.5 against 0.67");
        let table = shares_table(std::slice::from_ref(s), &runs);
        assert!(
            table.contains("discarded as invalid: 1 (seed 3: late)"),
            "{table}"
        );
    }

    #[test]
    fn the_goals_are_the_issues_tolerances() {
        let s = f(Class::Metastable, 0.50, 2.0);
        assert!(peak_met(&s, &f(Class::Metastable, 0.60, 2.0)));
        assert!(!peak_met(&s, &f(Class::Metastable, 0.61, 2.0)));
        assert!(amplification_met(&s, &f(Class::Metastable, 0.5, 2.4)));
        assert!(!amplification_met(&s, &f(Class::Metastable, 0.5, 2.41)));
        let secs = |s| Some(Nanos::from_secs(s));
        assert_eq!(time_met(secs(30), secs(40)), Some(true), "10 s floor");
        assert_eq!(time_met(secs(100), secs(120)), Some(true), "20 %");
        assert_eq!(time_met(secs(100), secs(121)), Some(false));
        assert_eq!(time_met(secs(5), None), Some(false));
        assert_eq!(time_met(None, None), None);
    }
}

//! The built-in replay of GitHub's 2026-08-17 incident, the five follow-ups
//! that should have prevented it, and the figures a replay is judged by.
//!
//! The scenario (`scenarios/github-2026-08-17.toml`) is embedded in the
//! binary. A *fix* is a transformation of that scenario — the change an SRE
//! would make to the configuration — never a change of an outcome. With any
//! fix applied the operators' timeline actions are dropped: the question is
//! whether the system recovers on its own.

use std::fmt;
use stormbreak_policy::budget::BudgetConfig;

use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::RatioBudgetConfig;
use stormbreak_policy::failover::FailoverConfig;
use stormbreak_policy::retry::{BackoffConfig, BackoffKind, Jitter, RetryConfig};
use toml::Spanned;

use crate::record::Recording;
pub use crate::recovery::PathRecovery;
use crate::recovery::{self, RecordedSlo, path_counts, trailing_error_rate};
use crate::scenario::{FailoverSpec, ScaleMetric, Scenario, ScenarioError};

/// The incident scenario, as shipped.
pub const SCENARIO_TOML: &str = include_str!("../../../scenarios/github-2026-08-17.toml");
/// Where it lives in the repository (for error messages).
pub const SCENARIO_FILE: &str = "<builtin>/scenarios/github-2026-08-17.toml";
/// Default `--scale` of `stormbreak replay`: 5% of the published traffic.
/// Its error peaks run about 5 points above the full-scale run's (at 1%,
/// about 10: small pools refuse more), and the seed test's ten runs of it
/// stay a few minutes of CI (`docs/replay.md`, "Scale and speed").
pub const DEFAULT_SCALE: f64 = 0.05;

/// The trigger (a traffic peak at the Central US edge) starts at 13:28 …
pub const TRIGGER_START: Nanos = Nanos::from_secs(28 * 60);
/// … and has passed by 13:58 (the scenario's peak ramps down by then).
pub const TRIGGER_END: Nanos = Nanos::from_secs(58 * 60);

/// The scenario's name (its default output directory).
pub fn scenario_name() -> &'static str {
    "github-2026-08-17"
}

/// The built-in scenario, parsed.
pub fn scenario() -> Result<Scenario, ScenarioError> {
    Scenario::parse(SCENARIO_FILE, SCENARIO_TOML)
}

/// One of GitHub's five promised follow-ups, as a configuration change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fix {
    /// 1. Autoscale on sidecar saturation, not app CPU.
    Autoscaling,
    /// 2. Audit sidecar limits: no sidecar admits fewer requests than its app has workers.
    Limits,
    /// 3. Retry budgets, exponential backoff and jitter in the gateway and clients.
    Retries,
    /// 4. Fix the editor client: single-flight token refresh with backoff.
    SingleFlight,
    /// 5. LB capacity monitoring with capacity-aware failover to Northern Virginia.
    Failover,
}

impl Fix {
    /// All five, in GitHub's order.
    pub const ALL: [Fix; 5] = [
        Fix::Autoscaling,
        Fix::Limits,
        Fix::Retries,
        Fix::SingleFlight,
        Fix::Failover,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fix::Autoscaling => "autoscaling",
            Fix::Limits => "limits",
            Fix::Retries => "retries",
            Fix::SingleFlight => "single-flight",
            Fix::Failover => "failover",
        }
    }

    /// What the follow-up says.
    pub fn description(self) -> &'static str {
        match self {
            Fix::Autoscaling => "autoscaling that accounts for sidecar concurrency",
            Fix::Limits => "audited Istio request and concurrency limits",
            Fix::Retries => "retry budgets, backoff and jitter in gateway and clients",
            Fix::SingleFlight => "editor client fixed: single-flight token refresh",
            Fix::Failover => "LB capacity monitoring with capacity-aware failover",
        }
    }

    /// Parses a comma-separated list such as `retries,single-flight`.
    pub fn parse_list(s: &str) -> Result<Vec<Fix>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let fix = Fix::ALL
                .into_iter()
                .find(|f| f.name() == part)
                .ok_or_else(|| {
                    format!(
                        "unknown fix {part:?}: expected a comma-separated list of {}",
                        Fix::ALL.map(Fix::name).join(", ")
                    )
                })?;
            if !out.contains(&fix) {
                out.push(fix);
            }
        }
        if out.is_empty() {
            return Err("expected at least one fix".into());
        }
        Ok(out)
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the Central-US HAProxy pool and the editor clients hold
/// connections, for the question of whether the pause alone is decisive
/// (`docs/replay.md`, "The pause question"). The replay itself runs
/// [`ConnectionModel::Flows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionModel {
    /// A flow per request, held for its life (the replay's model).
    Flows,
    /// Keep-alive connections that a pause resets and a timeout closes;
    /// editors reconnect at their next request (HTTP/1.1 clients).
    KeepAlive,
    /// The same, and editors wait gRPC's connection backoff (1 s × 1.6ⁿ,
    /// ±20%, at most 120 s) after a reset or refused connect, failing
    /// their requests at once meanwhile.
    KeepAliveBackoff,
}

/// ASSUMPTION: 100 000 editor processes per site at scale 1 (one token
/// request every ~37 s each at 2.7 k/s).
pub const EDITORS_PER_SITE: u32 = 100_000;

/// ASSUMPTION: a `maxconn` far above what the editors open (~74 000 idle
/// connections per site at a 50 s keep-alive), so the calibrated flow
/// limit stays the binding one: the variant adds what a connection does —
/// a pause resets it, a timeout closes it, a reset client backs off — not
/// a new limit.
pub const VARIANT_MAXCONN: u32 = 1_000_000;

/// Gives the incident scenario the connection model `model`.
pub fn with_connections(sc: &mut Scenario, model: ConnectionModel) {
    use crate::scenario::{
        ClientConnSpec, DEFAULT_CLIENT_IDLE_TIMEOUT, DEFAULT_KEEPALIVE_TIMEOUT, LbConnSpec,
    };
    if model == ConnectionModel::Flows {
        return;
    }
    for lb in sc
        .lbs
        .iter_mut()
        .filter(|l| l.name.get_ref() == "haproxy-cus")
    {
        lb.connections = Some(LbConnSpec {
            maxconn: VARIANT_MAXCONN,
            keepalive_timeout: DEFAULT_KEEPALIVE_TIMEOUT,
        });
    }
    for c in sc
        .clients
        .iter_mut()
        .filter(|c| c.name.get_ref().starts_with("editors-"))
    {
        c.connections = Some(ClientConnSpec {
            instances: EDITORS_PER_SITE,
            idle_timeout: DEFAULT_CLIENT_IDLE_TIMEOUT,
            reconnect_backoff: (model == ConnectionModel::KeepAliveBackoff)
                .then(BackoffConfig::grpc_connection),
        });
    }
}

/// Applies `fixes` to the incident scenario and drops the operators'
/// actions (when `fixes` is non-empty): the system must recover by itself.
pub fn apply(sc: &mut Scenario, fixes: &[Fix]) {
    if fixes.is_empty() {
        return;
    }
    sc.actions.clear();
    for fix in fixes {
        match fix {
            Fix::Autoscaling => {
                for s in &mut sc.services {
                    if let (Some(a), Some(_)) = (&mut s.autoscaler, &s.sidecar) {
                        a.metric = ScaleMetric::SidecarSaturation;
                        a.target = 0.7;
                        a.pod_start = a.pod_start.min(60 * Nanos::SECOND);
                    }
                }
            }
            Fix::Limits => {
                for s in &mut sc.services {
                    if let Some(side) = &mut s.sidecar {
                        side.limit = side.limit.max(s.app.workers);
                    }
                }
            }
            Fix::Retries => {
                let budget = || {
                    Some(BudgetConfig::Ratio(RatioBudgetConfig {
                        retry_ratio: 0.1,
                        ..RatioBudgetConfig::default()
                    }))
                };
                for g in &mut sc.gateways {
                    if let Some(r) = &mut g.retry {
                        r.max_attempts = r.max_attempts.min(2);
                        r.backoff = jittered(50 * stormbreak_policy::Nanos::MILLISECOND);
                    }
                    g.budget = budget();
                }
                for c in &mut sc.clients {
                    if let Some(r) = &mut c.retry {
                        r.backoff.base = r
                            .backoff
                            .base
                            .max(100 * stormbreak_policy::Nanos::MILLISECOND);
                        r.backoff.kind = BackoffKind::Exponential;
                        r.backoff.jitter = Jitter::Full;
                        c.budget = budget();
                    }
                    c.honour_retry_after = true;
                }
            }
            Fix::SingleFlight => {
                for c in &mut sc.clients {
                    if c.fanout > 0 {
                        c.fanout = 0;
                        c.fanout_max_in_flight = None;
                        c.give_up_after = None;
                        c.retry = Some(RetryConfig {
                            max_attempts: 3,
                            backoff: jittered(Nanos::SECOND),
                            ..RetryConfig::default()
                        });
                    }
                }
            }
            Fix::Failover => {
                let clients: Vec<Spanned<String>> = sc
                    .clients
                    .iter()
                    .filter(|c| c.failover_route.is_some())
                    .map(|c| c.name.clone())
                    .collect();
                let lb = |n: &str| {
                    sc.lbs
                        .iter()
                        .find(|l| l.name.get_ref() == n)
                        .map(|l| l.name.clone())
                };
                if let (Some(primary), Some(secondary)) = (lb("haproxy-cus"), lb("haproxy-nva"))
                    && !clients.is_empty()
                {
                    sc.failovers.push(FailoverSpec {
                        clients,
                        primary,
                        secondary,
                        policy: FailoverConfig::default(),
                        period: crate::scenario::DEFAULT_FAILOVER_PERIOD,
                    });
                }
            }
        }
    }
}

fn jittered(base: Nanos) -> BackoffConfig {
    BackoffConfig {
        kind: BackoffKind::Exponential,
        base,
        jitter: Jitter::Full,
        ..BackoffConfig::default()
    }
}

/// A user path the reports say must be verified on its own.
#[derive(Debug, Clone, Copy)]
pub struct UserPath {
    /// As the reports name it.
    pub name: &'static str,
    /// Its routes in the scenario (Central US first, then failover routes).
    pub routes: &'static [&'static str],
}

/// The paths of the per-path recovery table.
pub const PATHS: [UserPath; 9] = [
    UserPath {
        name: "repository read",
        routes: &["web", "web-nva"],
    },
    UserPath {
        name: "API request",
        routes: &["api", "api-nva"],
    },
    UserPath {
        name: "git operations",
        routes: &["git"],
    },
    UserPath {
        name: "archive / raw download",
        routes: &["archive"],
    },
    UserPath {
        name: "SSO sign-in",
        routes: &["sso"],
    },
    UserPath {
        name: "team sync",
        routes: &["scim"],
    },
    UserPath {
        name: "public workflow definition download",
        routes: &["workflow-defs"],
    },
    UserPath {
        name: "runner start",
        routes: &["runner-start"],
    },
    UserPath {
        name: "Copilot token issue",
        routes: &["copilot-token"],
    },
];

/// A path is degraded while its error rate is above this (5-minute windows).
pub const SLO_ERROR_RATE: f64 = 0.01;

/// Token-route attempts per first attempt above which the editors' storm
/// counts as on (1-minute windows): between the plateau the fan-out holds
/// before it runs away (about 2×: the failures of one round spawn the
/// next) and its ceiling (about 10×: three rounds of three). A reading of
/// the run, not a model input.
pub const STORM_AMPLIFICATION: f64 = 5.0;

/// A path whose requests wait in a job queue (runner start) is also
/// degraded while a job has waited longer than this for a worker, in the
/// last 5 minutes: queued jobs are delayed, not failed.
pub const SLO_JOB_WAIT_S: f64 = 300.0;

/// The replay's headline window: its error rates are failed over
/// answered attempts over trailing windows this long.
pub const HEADLINE_WINDOW: Nanos = Nanos::from_secs(5 * 60);

/// The highest error rate of `routes` together over trailing
/// [`HEADLINE_WINDOW`]s, one window ending at each interval (shorter at
/// the start of the run, so in a run shorter than the window it is the
/// failed share from the start): how the replay's headline takes its
/// peak error rates, for anyone comparing against it.
pub fn peak_error_rate_over_headline_window(rec: &Recording, routes: &[&str]) -> f64 {
    let iv = rec.interval.max(Nanos::NANOSECOND);
    let w = (HEADLINE_WINDOW / iv).max(1) as usize;
    trailing_error_rate(&path_counts(rec, routes), w)
        .into_iter()
        .fold(0.0, f64::max)
}

/// The figures a replay is judged by, under stable keys (docs/replay.md).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Headline {
    /// Worst 5-minute error rate of web and API requests (both regions).
    pub web_api_peak_error_rate: f64,
    /// Worst 5-minute error rate of archive/raw downloads.
    pub archive_peak_error_rate: f64,
    /// Token-route attempts per second at the edge before the trigger, read at scale 1.
    pub token_arrivals_before_per_s: f64,
    /// Highest 1-minute average of token-route attempts per second, at scale 1.
    pub token_arrivals_peak_per_s: f64,
    /// Token first attempts (logical requests) per second over the run, at scale 1.
    pub token_demand_per_s: f64,
    /// Highest 1-minute average of token first attempts per second, at scale 1.
    pub token_demand_peak_per_s: f64,
    /// Web/API 5-minute error rate 30 minutes after the trigger has passed.
    pub web_api_error_rate_30m_after_trigger: f64,
    /// Degraded long after the trigger passed (the error rate above is over the SLO).
    pub metastable: bool,
    /// Seconds after the scenario's start at which the first 1-minute
    /// window from the trigger on begins whose token-route attempts exceed
    /// [`STORM_AMPLIFICATION`] × its first attempts: when the editors'
    /// storm ran away (`None`: it never did).
    pub token_storm_from_s: Option<f64>,
}

/// A headline figure's published band: the incident's value within the
/// noise of a run at the default scale. One table for everything that
/// judges a replay: `tests/replay_seeds.rs` asserts every band on five
/// seeds, and `stormbreak replay --sensitivity` reports which figures leave
/// them when an assumption changes.
#[derive(Debug, Clone, Copy)]
pub struct Band {
    /// The figure's key in [`Headline`] (and in `summary.json`).
    pub key: &'static str,
    /// What it is, for tables.
    pub label: &'static str,
    /// Lowest value in the band.
    pub lo: f64,
    /// Highest value in the band.
    pub hi: f64,
    read: fn(&Headline) -> f64,
}

impl Band {
    /// The figure's value in `h`.
    pub fn value(&self, h: &Headline) -> f64 {
        (self.read)(h)
    }

    /// Whether `h`'s figure lies in the band (ends included).
    pub fn holds(&self, h: &Headline) -> bool {
        (self.lo..=self.hi).contains(&self.value(h))
    }

    /// Which side of the band `h`'s figure lies on: `Less` below it,
    /// `Greater` above it, `Equal` inside it (ends included).
    pub fn side(&self, h: &Headline) -> std::cmp::Ordering {
        let v = self.value(h);
        if v < self.lo {
            std::cmp::Ordering::Less
        } else if v > self.hi {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }

    /// `v` in the figure's own units, as the tables print it: error rates
    /// as percentages, arrival rates in k/s, one decimal.
    pub fn format(&self, v: f64) -> String {
        if self.hi <= 1.0 {
            format!("{:.1}%", v * 100.0)
        } else {
            format!("{:.1} k/s", v / 1000.0)
        }
    }
}

/// The bands of the as-it-happened run's headline figures (see
/// `docs/replay.md`, "Reading the output").
pub const BANDS: [Band; 5] = [
    Band {
        key: "web_api_peak_error_rate",
        label: "web/API peak error rate",
        lo: 0.15,
        hi: 0.25,
        read: |h| h.web_api_peak_error_rate,
    },
    Band {
        key: "archive_peak_error_rate",
        label: "archive peak error rate",
        lo: 0.40,
        hi: 0.60,
        read: |h| h.archive_peak_error_rate,
    },
    Band {
        key: "token_arrivals_before_per_s",
        label: "token arrivals before",
        lo: 7_000.0,
        hi: 9_000.0,
        read: |h| h.token_arrivals_before_per_s,
    },
    Band {
        key: "token_arrivals_peak_per_s",
        label: "token arrivals peak",
        lo: 70_000.0,
        hi: 100_000.0,
        read: |h| h.token_arrivals_peak_per_s,
    },
    // First-attempt demand stays flat through the storm (Poisson noise on
    // 1-minute windows at 1% scale is about ±4%).
    Band {
        key: "token_demand_peak_per_s",
        label: "token demand peak",
        lo: 7_000.0,
        hi: 9_000.0,
        read: |h| h.token_demand_peak_per_s,
    },
];

/// The keys of the bands `h` leaves, in [`BANDS`] order.
pub fn bands_left(h: &Headline) -> Vec<&'static str> {
    BANDS
        .iter()
        .filter(|b| !b.holds(h))
        .map(|b| b.key)
        .collect()
}

/// Everything `replay` reports about one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplaySummary {
    /// Fixes applied (empty: as it happened).
    pub fixes: Vec<Fix>,
    /// Headline figures.
    pub headline: Headline,
    /// Per-path recovery.
    pub paths: Vec<PathRecovery>,
}

/// Computes the replay's figures from a recording of the incident scenario.
pub fn summarize(rec: &Recording, fixes: &[Fix]) -> ReplaySummary {
    let iv = rec.interval.max(Nanos::NANOSECOND);
    let five = (HEADLINE_WINDOW / iv).max(1) as usize;
    let one = (Nanos::MINUTE / iv).max(1) as usize;
    let web_api = path_counts(rec, &["web", "web-nva", "api", "api-nva"]);
    let web_api_5m = trailing_error_rate(&web_api, five);
    let peak = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let scale = rec.scale;
    let per_s = |count: u64, intervals: usize| {
        count as f64 / (intervals as f64 * iv.as_nanos() as f64 / 1e9) / scale
    };
    let token = rec.route("copilot-token");
    let (mut before, mut peak_arrivals, mut demand, mut peak_demand) = (0.0, 0.0, 0.0, 0.0);
    let mut storm_from = None;
    if let Some(t) = token {
        let trig = ((TRIGGER_START / iv) as usize).min(t.attempts.len());
        if trig > 0 {
            before = per_s(t.attempts[..trig].iter().sum(), trig);
        }
        for w in t.attempts.windows(one) {
            peak_arrivals = f64::max(peak_arrivals, per_s(w.iter().sum(), one));
        }
        for w in t.first_attempts.windows(one) {
            peak_demand = f64::max(peak_demand, per_s(w.iter().sum(), one));
        }
        // Windows that start from the trigger on and end inside the run.
        let n = t.attempts.len().min(t.first_attempts.len());
        storm_from = (trig..(n + 1).saturating_sub(one))
            .find(|&i| {
                let sent: u64 = t.attempts[i..i + one].iter().sum();
                let first: u64 = t.first_attempts[i..i + one].iter().sum();
                sent as f64 > STORM_AMPLIFICATION * first.max(1) as f64
            })
            .map(|i| (i as u64 * iv).as_nanos() as f64 / 1e9);
        demand = per_s(t.first_attempts.iter().sum(), t.first_attempts.len().max(1));
    }
    let after = (((TRIGGER_END + 30 * Nanos::MINUTE) / iv) as usize)
        .min(web_api_5m.len().saturating_sub(1));
    let after_rate = web_api_5m.get(after).copied().unwrap_or(0.0);
    let headline = Headline {
        web_api_peak_error_rate: peak(&web_api_5m),
        archive_peak_error_rate: peak_error_rate_over_headline_window(rec, &["archive"]),
        token_arrivals_before_per_s: before,
        token_arrivals_peak_per_s: peak_arrivals,
        token_demand_per_s: demand,
        token_demand_peak_per_s: peak_demand,
        web_api_error_rate_30m_after_trigger: after_rate,
        metastable: after_rate > SLO_ERROR_RATE,
        token_storm_from_s: storm_from,
    };
    let paths = PATHS
        .iter()
        .map(|p| recovery::recorded(rec, p.name, p.routes, five, &RecordedSlo::REPLAY))
        .collect();
    ReplaySummary {
        fixes: fixes.to_vec(),
        headline,
        paths,
    }
}

/// `HH:MM` of `secs` after the run's clock origin.
pub fn clock(rec: &Recording, secs: f64) -> String {
    let t = rec.clock_origin_s as f64 + secs;
    let m = (t / 60.0).round() as u64;
    format!("{:02}:{:02}", (m / 60) % 24, m % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_scenario_parses() {
        scenario().unwrap();
    }

    #[test]
    fn fix_lists_parse_and_reject_unknown_names() {
        assert_eq!(
            Fix::parse_list("retries, single-flight,retries").unwrap(),
            vec![Fix::Retries, Fix::SingleFlight]
        );
        let e = Fix::parse_list("retries,magic").unwrap_err();
        assert!(e.contains("\"magic\"") && e.contains("autoscaling"), "{e}");
        assert!(Fix::parse_list("").is_err());
    }

    #[test]
    fn fixes_change_configuration_and_drop_operator_actions() {
        let mut sc = scenario().unwrap();
        assert!(!sc.actions.is_empty());
        apply(&mut sc, &Fix::ALL);
        assert!(sc.actions.is_empty());
        let auth = sc
            .services
            .iter()
            .find(|s| s.name.get_ref() == "auth-cus")
            .unwrap();
        assert_eq!(
            auth.autoscaler.as_ref().unwrap().metric,
            ScaleMetric::SidecarSaturation
        );
        assert!(auth.sidecar.as_ref().unwrap().limit >= auth.app.workers);
        assert!(sc.clients.iter().all(|c| c.fanout == 0));
        assert!(sc.gateways.iter().all(|g| g.budget.is_some()));
        assert_eq!(sc.failovers.len(), 1);
    }

    #[test]
    fn a_band_says_which_side_a_figure_left_it_on() {
        let h = |web: f64, token: f64| Headline {
            web_api_peak_error_rate: web,
            archive_peak_error_rate: 0.5,
            token_arrivals_before_per_s: 8_000.0,
            token_arrivals_peak_per_s: token,
            token_demand_per_s: 8_000.0,
            token_demand_peak_per_s: 8_000.0,
            web_api_error_rate_30m_after_trigger: 0.1,
            metastable: true,
            token_storm_from_s: Some(1860.0),
        };
        let (web, token) = (&BANDS[0], &BANDS[3]);
        use std::cmp::Ordering::*;
        assert_eq!(web.side(&h(0.10, 90e3)), Less);
        assert_eq!(web.side(&h(0.15, 90e3)), Equal, "ends are in the band");
        assert_eq!(web.side(&h(0.30, 90e3)), Greater);
        assert_eq!(token.side(&h(0.2, 106_200.0)), Greater);
        assert_eq!(
            bands_left(&h(0.30, 106_200.0)),
            ["web_api_peak_error_rate", "token_arrivals_peak_per_s"]
        );
        assert_eq!(web.format(0.2264), "22.6%");
        assert_eq!(token.format(106_249.0), "106.2 k/s");
    }

    #[test]
    fn trailing_windows() {
        let counts = [(1, 2), (0, 2), (2, 2), (0, 0)];
        assert_eq!(trailing_error_rate(&counts, 2), vec![0.5, 0.25, 0.5, 1.0]);
    }
}

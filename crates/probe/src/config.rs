//! The probe's config file (TOML), read once and checked whole before
//! anything is sent; every error names `file:line:column` and the field.
//!
//! TOML, as the project's scenarios and the guard's config, so one syntax
//! and one error machinery (`stormbreak-spans`) serve every hand-written
//! input; YAML's implicit typing (`no`, `on`, `0755`) is a poor fit for
//! lists of status codes and header names.
//!
//! ```
//! use stormbreak_probe::config::ProbeConfig;
//! let text = r#"
//! [probe]
//! rate = "10/s"
//! duration = "10m"
//!
//! [[path]]
//! name = "API request"
//! url = "http://127.0.0.1:8080/api"
//! slo = { error_rate = 0.01, window = "5m" }
//! "#;
//! let c = ProbeConfig::parse("probe.toml", text).unwrap();
//! assert_eq!(c.paths[0].expect_status(204), true);
//! let e = ProbeConfig::parse("probe.toml", &text.replace("10/s", "0/s")).unwrap_err();
//! assert!(e.to_string().starts_with("probe.toml:3:8: rate must be"), "{e}");
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{BudgetConfig, RatioBudgetConfig};
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
use stormbreak_policy::units;
use stormbreak_spans::{DeTable, Spans, line_col};

/// Largest config file read.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// Most paths one run probes.
pub const MAX_PATHS: usize = 64;
/// Highest total probe rate, per second.
pub const MAX_RATE: f64 = 1000.0;
/// Longest run.
pub const MAX_DURATION: Nanos = Nanos::from_secs(7 * 24 * 3600);
/// Most intervals in a run's timeline (rows per path).
pub const MAX_INTERVALS: u64 = 100_000;
/// Most intervals in one SLO window (the latency histograms each path keeps).
pub const MAX_WINDOW_INTERVALS: u64 = 3_600;
/// Shortest timeline interval.
pub const MIN_INTERVAL: Nanos = Nanos::from_millis(10);
/// Longest per-request timeout.
pub const MAX_TIMEOUT: Nanos = Nanos::from_secs(300);
/// Largest request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Most probes in flight at once, whatever the config asks.
pub const MAX_IN_FLIGHT: u32 = 10_000;
/// Most probes one SLO window may hold at the total rate (each path keeps
/// its window's durations, 4 bytes a probe, and a copy to read quantiles).
pub const MAX_WINDOW_PROBES: f64 = 2_000_000.0;
/// Most timeline rows in a run, over every path.
pub const MAX_ROWS: u64 = 1_000_000;

/// A rejected config: where, and what was expected (`file:line:column`).
pub use stormbreak_spans::ConfigError;

/// How probe times are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Spacing {
    /// Exponential gaps: a Poisson process at the total rate.
    #[default]
    Poisson,
    /// Full jitter: each gap uniform in `[0, 2 × mean)`.
    Jitter,
}

/// Whether a probe opens its own connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Connection {
    /// A new TCP (and TLS) connection for every probe, closed after it, so
    /// a load balancer refusing new flows is seen.
    #[default]
    New,
    /// Keep-alive connections kept per path and reused while they last.
    Reuse,
}

/// The `[probe]` table: the run as a whole.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Total probes per second over every path, fixed for the whole run.
    #[serde(with = "units::rate")]
    pub rate: f64,
    /// How long the run lasts.
    pub duration: Nanos,
    /// Gap shape between probe times.
    #[serde(default)]
    pub spacing: Spacing,
    /// The timeline's step: one row per path per interval.
    #[serde(default = "default_interval")]
    pub interval: Nanos,
    /// Most probes in flight at once; a probe time that finds this many
    /// is skipped (counted, never queued).
    #[serde(default = "default_in_flight")]
    pub max_in_flight: u32,
    /// Seed of the schedule's draws (default: from the OS).
    #[serde(default)]
    pub seed: Option<u64>,
    /// How long a 429 or 503 without `Retry-After` pauses its path.
    #[serde(default = "default_overload_pause")]
    pub overload_pause: Nanos,
    /// Longest pause a `Retry-After` may ask for.
    #[serde(default = "default_max_pause")]
    pub max_pause: Nanos,
    /// Good windows in a row before a recovery is confirmed.
    #[serde(default = "default_hysteresis")]
    pub hysteresis: u32,
    /// Retries (off when absent): the policy crate's retry table, run by
    /// `stormbreak-client`'s retry layer. Its `overall_timeout` is ignored
    /// (each probe ends by its path's `timeout`), and 429 and 503 are never
    /// retried (they pause the path).
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// The one budget every path's retries spend from (with `retry`;
    /// default: a ratio budget of 10 % of first attempts and no floor, so
    /// retries add at most a tenth to the probe rate).
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
}

/// The budget of a probe's retries when the config names none: 10 % of
/// first attempts over 10 s, and no retries per second beyond that, so
/// attempts stay within 1.1 × the probe rate.
pub fn default_budget() -> BudgetConfig {
    BudgetConfig::Ratio(RatioBudgetConfig {
        retry_ratio: 0.1,
        min_retries_per_sec: 0.0,
        ..RatioBudgetConfig::default()
    })
}

fn default_interval() -> Nanos {
    Nanos::from_secs(10)
}
fn default_in_flight() -> u32 {
    64
}
fn default_overload_pause() -> Nanos {
    Nanos::from_secs(5)
}
fn default_max_pause() -> Nanos {
    Nanos::from_secs(300)
}
fn default_hysteresis() -> u32 {
    3
}

/// A path's service-level objective over trailing windows.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Highest error rate a window may have and be good (0.01 for 99 %).
    pub error_rate: f64,
    /// Window length (a whole number of intervals).
    #[serde(default = "default_window")]
    pub window: Nanos,
    /// Optional latency objective.
    #[serde(default)]
    pub latency: Option<LatencySlo>,
}

fn default_window() -> Nanos {
    Nanos::from_secs(300)
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            error_rate: stormbreak_sim::replay::SLO_ERROR_RATE,
            window: default_window(),
            latency: None,
        }
    }
}

/// "The `quantile` of a window's probe durations is under `under`."
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencySlo {
    /// Quantile in (0, 1), such as 0.99.
    pub quantile: f64,
    /// Bound the quantile must stay under.
    pub under: Nanos,
}

impl Slo {
    /// Fewest probes a window needs before it can be judged: one failure
    /// in fewer than `1 / error_rate` probes is already a breach, so a
    /// smaller window cannot tell a met target from a missed one (a 99.9 %
    /// target needs 1 000); likewise `1 / (1 − quantile)` for the latency
    /// quantile.
    pub fn min_samples(&self) -> u64 {
        let need = |share: f64| {
            if share <= 0.0 {
                1
            } else {
                // Less a hair, so 1 / (1 − 0.9) is 10, not 10.000000000000002 → 11.
                (1.0 / share - 1e-9).ceil().max(1.0) as u64
            }
        };
        let errors = need(self.error_rate);
        let latency = self.latency.map_or(1, |l| need(1.0 - l.quantile));
        errors.max(latency)
    }
}

/// A header whose value is read from the environment at start.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EnvHeader {
    /// The environment variable holding the value (a token, a cookie).
    pub env: String,
    /// Text put before it, such as `"Bearer "`.
    #[serde(default)]
    pub prefix: String,
}

/// TLS options of an `https` path.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsSpec {
    /// PEM file of the CA certificates to trust (default: the system's
    /// bundle at one of the usual paths).
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// PEM client certificate chain, for mutual TLS.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Name to verify and send as SNI (default: the URL's host).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// A `[[path]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    name: String,
    #[serde(default = "default_method")]
    method: String,
    url: String,
    #[serde(default)]
    expect: Vec<u16>,
    #[serde(default)]
    headers: BTreeMap<String, EnvHeader>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    timeout: Option<Nanos>,
    #[serde(default)]
    connection: Option<Connection>,
    #[serde(default)]
    tls: Option<TlsSpec>,
    #[serde(default)]
    slo: Option<Slo>,
    #[serde(default)]
    predicted_as: Option<String>,
}

fn default_method() -> String {
    "GET".to_owned()
}

/// The `[defaults]` table: values a path leaves out.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Defaults {
    #[serde(default)]
    timeout: Option<Nanos>,
    #[serde(default)]
    connection: Option<Connection>,
    #[serde(default)]
    tls: Option<TlsSpec>,
    #[serde(default)]
    slo: Option<Slo>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    probe: RunSpec,
    #[serde(default)]
    defaults: Defaults,
    #[serde(default, rename = "path")]
    paths: Vec<RawPath>,
}

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Nanos = Nanos::from_secs(5);

/// One user path, checked, with its defaults filled in.
#[derive(Clone)]
pub struct PathSpec {
    /// As the reports name it.
    pub name: String,
    /// Request method.
    pub method: http::Method,
    /// Request URL (`http` or `https`).
    pub url: http::Uri,
    /// Statuses that count as success (empty: any 2xx).
    pub expect: Vec<u16>,
    /// Headers, values already read from the environment (never printed).
    pub headers: http::HeaderMap,
    /// Request body.
    pub body: bytes::Bytes,
    /// Time allowed for the whole probe: connect, TLS, answer and body.
    pub timeout: Nanos,
    /// New connection per probe, or reused.
    pub connection: Connection,
    /// TLS options (`https` URLs).
    pub tls: TlsSpec,
    /// The path's objective.
    pub slo: Slo,
    /// The row of an `--expect` prediction it is compared with (default:
    /// its own name): a route of `recovery.json`, a path of a replay.
    pub predicted_as: Option<String>,
}

impl fmt::Debug for PathSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are credentials: only their names are shown.
        f.debug_struct("PathSpec")
            .field("name", &self.name)
            .field("method", &self.method)
            .field("url", &self.url)
            .field("expect", &self.expect)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("body_bytes", &self.body.len())
            .field("timeout", &self.timeout)
            .field("connection", &self.connection)
            .field("slo", &self.slo)
            .finish()
    }
}

impl PathSpec {
    /// Whether `status` counts as this path's success.
    pub fn expect_status(&self, status: u16) -> bool {
        if self.expect.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expect.contains(&status)
        }
    }

    /// Whether the URL is `https`.
    pub fn is_tls(&self) -> bool {
        self.url.scheme_str() == Some("https")
    }
}

/// A checked probe config.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The `[probe]` table.
    pub run: RunSpec,
    /// The paths, in file order.
    pub paths: Vec<PathSpec>,
}

impl ProbeConfig {
    /// Reads and checks the config at `path`, with header values from the
    /// process environment.
    pub fn load(path: &Path) -> Result<ProbeConfig, ConfigError> {
        let (file, text) = stormbreak_spans::read_config(path, MAX_CONFIG_BYTES, "a probe config")?;
        Self::parse_with_env(&file, &text, &|k| std::env::var(k).ok())
    }

    /// [`ProbeConfig::load`] of `text`, with the process environment.
    pub fn parse(file: &str, text: &str) -> Result<ProbeConfig, ConfigError> {
        Self::parse_with_env(file, text, &|k| std::env::var(k).ok())
    }

    /// Parses and checks `text`, reading header values through `env`.
    pub fn parse_with_env(
        file: &str,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProbeConfig, ConfigError> {
        if text.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::whole(
                file,
                stormbreak_spans::too_large(MAX_CONFIG_BYTES, "a probe config"),
            ));
        }
        let serde_error = |e: toml::de::Error| ConfigError::from_toml(file, text, &e);
        let root = DeTable::parse(text).map_err(serde_error)?;
        let raw = RawConfig::deserialize(toml::de::Deserializer::from(root.clone()))
            .map_err(serde_error)?;
        let doc = Doc {
            file,
            text,
            spans: Spans::new(root),
        };
        doc.check(raw, env)
    }

    /// The gap between two probes of one path, on average.
    pub fn path_spacing(&self) -> Nanos {
        Nanos::from_secs_f64(self.paths.len() as f64 / self.run.rate)
    }

    /// Probes a path gets in one of its windows, on average.
    pub fn expected_samples(&self, path: usize) -> f64 {
        self.run.rate / self.paths.len() as f64 * self.paths[path].slo.window.as_secs_f64()
    }

    /// One sentence per path whose windows the rate cannot be relied on
    /// to judge, said before the run: its mean probes per window fall
    /// short of `need + 3√need` (the count is Poisson-like, so a mean of
    /// just `need` leaves about half the windows unknown).
    pub fn sample_warnings(&self) -> Vec<String> {
        (0..self.paths.len())
            .filter_map(|i| {
                let p = &self.paths[i];
                let need = p.slo.min_samples();
                let plan = need as f64 + 3.0 * (need as f64).sqrt();
                let get = self.expected_samples(i);
                (get < plan).then(|| {
                    format!(
                        "path {:?}: about {get:.0} probes per {} window at {}/s over {} paths, \
                         but its SLO needs at least {need} to be judged (plan for {plan:.0}): windows \
                         that fall short will be unknown (raise the rate, widen the window or loosen the target)",
                        p.name,
                        units::format_duration(p.slo.window),
                        self.run.rate,
                        self.paths.len()
                    )
                })
            })
            .collect()
    }
}

struct Doc<'a> {
    file: &'a str,
    text: &'a str,
    spans: Spans<'a>,
}

impl Doc<'_> {
    fn at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        let span = self.spans.nearest(path);
        ConfigError {
            line_col: Some(line_col(self.text, span.start)),
            ..ConfigError::whole(self.file, message)
        }
    }

    fn check(
        &self,
        raw: RawConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProbeConfig, ConfigError> {
        let run = raw.probe;
        self.check_run(&run)?;
        if raw.paths.is_empty() {
            return Err(self.at("", "at least one [[path]] is needed"));
        }
        if raw.paths.len() > MAX_PATHS {
            return Err(self.at(
                "path",
                format!(
                    "at most {MAX_PATHS} [[path]] tables, got {}",
                    raw.paths.len()
                ),
            ));
        }
        let rows = (run.duration / run.interval).saturating_mul(raw.paths.len() as u64);
        if rows > MAX_ROWS {
            return Err(self.at(
                "probe.interval",
                format!("at most {MAX_ROWS} timeline rows in a run (intervals × paths, here {rows}): lengthen the interval"),
            ));
        }
        let d = &raw.defaults;
        if let Some(t) = d.timeout {
            self.check_timeout("defaults.timeout", t)?;
        }
        if let Some(slo) = &d.slo {
            self.check_slo("defaults.slo", slo, &run)?;
        }
        let mut names = HashSet::new();
        let mut paths = Vec::with_capacity(raw.paths.len());
        for (i, p) in raw.paths.into_iter().enumerate() {
            let at = |field: &str| format!("path.{i}.{field}");
            if p.name.trim().is_empty()
                || p.name.len() > 200
                || p.name.chars().any(char::is_control)
            {
                return Err(self.at(
                    &at("name"),
                    "expected a name of 1 to 200 printable characters",
                ));
            }
            if !names.insert(p.name.clone()) {
                return Err(self.at(&at("name"), format!("path {:?} is defined twice", p.name)));
            }
            let who = format!("path {:?}", p.name);
            let method = http::Method::from_bytes(p.method.as_bytes()).map_err(|_| {
                self.at(
                    &at("method"),
                    format!("{who}: expected an HTTP method such as \"GET\""),
                )
            })?;
            let url = self.check_url(&at("url"), &who, &p.url)?;
            for (j, s) in p.expect.iter().enumerate() {
                if !(100..=599).contains(s) {
                    return Err(self.at(
                        &format!("path.{i}.expect.{j}"),
                        format!("{who}: expected an HTTP status from 100 to 599, got {s}"),
                    ));
                }
            }
            let headers = self.check_headers(i, &who, &p.headers, env)?;
            let body = p.body.unwrap_or_default();
            if body.len() > MAX_BODY_BYTES {
                return Err(self.at(
                    &at("body"),
                    format!("{who}: a body of at most {} KiB", MAX_BODY_BYTES >> 10),
                ));
            }
            let timeout = p.timeout.or(d.timeout).unwrap_or(DEFAULT_TIMEOUT);
            if p.timeout.is_some() {
                self.check_timeout(&at("timeout"), timeout)?;
            }
            let slo = p.slo.or(d.slo).unwrap_or_default();
            if p.slo.is_some() {
                self.check_slo(&at("slo"), &slo, &run)?;
            } else if d.slo.is_none() {
                self.check_slo(&at("name"), &slo, &run)?;
            }
            let tls = p.tls.or_else(|| d.tls.clone()).unwrap_or_default();
            let https = url.scheme_str() == Some("https");
            if tls != TlsSpec::default() && !https {
                return Err(self.at(&at("tls"), format!("{who}: tls options need an https URL")));
            }
            if tls.client_cert.is_some() != tls.client_key.is_some() {
                return Err(self.at(
                    &at("tls"),
                    format!("{who}: client_cert and client_key go together"),
                ));
            }
            if let Some(name) = &tls.server_name
                && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
            {
                return Err(self.at(
                    &at("tls.server_name"),
                    format!("{who}: expected a DNS name or IP address, got {name:?}"),
                ));
            }
            if https {
                crate::send::tls_config(&tls)
                    .map_err(|e| self.at(&at("tls"), format!("{who}: {e}")))?;
            }
            paths.push(PathSpec {
                name: p.name,
                method,
                url,
                expect: p.expect,
                headers,
                body: bytes::Bytes::from(body),
                timeout,
                connection: p.connection.or(d.connection).unwrap_or_default(),
                tls,
                slo,
                predicted_as: p.predicted_as,
            });
        }
        Ok(ProbeConfig { run, paths })
    }

    fn check_run(&self, run: &RunSpec) -> Result<(), ConfigError> {
        if !(run.rate > 0.0 && run.rate <= MAX_RATE) {
            return Err(self.at(
                "probe.rate",
                format!("rate must be above 0 and at most {MAX_RATE}/s (the whole run's total), got {}/s", run.rate),
            ));
        }
        if run.interval < MIN_INTERVAL {
            return Err(self.at(
                "probe.interval",
                format!(
                    "interval must be at least {}",
                    units::format_duration(MIN_INTERVAL)
                ),
            ));
        }
        if run.duration < run.interval || run.duration > MAX_DURATION {
            return Err(self.at(
                "probe.duration",
                format!(
                    "duration must be at least one interval ({}) and at most {}",
                    units::format_duration(run.interval),
                    units::format_duration(MAX_DURATION)
                ),
            ));
        }
        if !run
            .duration
            .as_nanos()
            .is_multiple_of(run.interval.as_nanos())
        {
            return Err(self.at(
                "probe.duration",
                format!(
                    "duration must be a whole number of intervals ({}), got {}",
                    units::format_duration(run.interval),
                    units::format_duration(run.duration)
                ),
            ));
        }
        if run.duration / run.interval > MAX_INTERVALS {
            return Err(self.at(
                "probe.interval",
                format!("at most {MAX_INTERVALS} intervals in a run: lengthen the interval or shorten the run"),
            ));
        }
        if run.max_in_flight == 0 || run.max_in_flight > MAX_IN_FLIGHT {
            return Err(self.at(
                "probe.max_in_flight",
                format!(
                    "max_in_flight must be 1 to {MAX_IN_FLIGHT}, got {}",
                    run.max_in_flight
                ),
            ));
        }
        if run.max_pause.is_zero() || run.max_pause > run.duration.max(Nanos::from_secs(3600)) {
            return Err(self.at(
                "probe.max_pause",
                "max_pause must be above 0 and at most the run's duration (or an hour)",
            ));
        }
        if run.overload_pause > run.max_pause {
            return Err(self.at(
                "probe.overload_pause",
                "overload_pause must be at most max_pause",
            ));
        }
        if !(1..=100).contains(&run.hysteresis) {
            return Err(self.at("probe.hysteresis", "hysteresis must be 1 to 100 windows"));
        }
        if let Some(r) = &run.retry {
            RetryPolicy::new(r)
                .map_err(|e| self.at(&format!("probe.retry.{}", e.field()), e.to_string()))?;
        }
        if let Some(b) = &run.budget {
            if run.retry.is_none() {
                return Err(self.at("probe.budget", "a budget needs a retry table"));
            }
            b.validate().map_err(|e| {
                self.at(
                    &format!("probe.budget.{}", e.field()),
                    format!("budget: {e}"),
                )
            })?;
        }
        Ok(())
    }

    fn check_timeout(&self, at: &str, t: Nanos) -> Result<(), ConfigError> {
        if t.is_zero() || t > MAX_TIMEOUT {
            return Err(self.at(
                at,
                format!(
                    "timeout must be above 0 and at most {}",
                    units::format_duration(MAX_TIMEOUT)
                ),
            ));
        }
        Ok(())
    }

    fn check_slo(&self, at: &str, slo: &Slo, run: &RunSpec) -> Result<(), ConfigError> {
        if !(0.0..1.0).contains(&slo.error_rate) {
            return Err(self.at(
                &format!("{at}.error_rate"),
                format!(
                    "error_rate must be at least 0 and below 1 (0.01 for 99 %), got {}",
                    slo.error_rate
                ),
            ));
        }
        let iv = run.interval.as_nanos();
        if slo.window.is_zero() || !slo.window.as_nanos().is_multiple_of(iv) {
            return Err(self.at(
                &format!("{at}.window"),
                format!(
                    "window must be a whole number of intervals ({}), got {}",
                    units::format_duration(run.interval),
                    units::format_duration(slo.window)
                ),
            ));
        }
        if slo.window > run.duration {
            return Err(self.at(
                &format!("{at}.window"),
                format!(
                    "a window of at most the run's duration ({}): a longer one is never whole, so never judged",
                    units::format_duration(run.duration)
                ),
            ));
        }
        if run.rate * slo.window.as_secs_f64() > MAX_WINDOW_PROBES {
            return Err(self.at(
                &format!("{at}.window"),
                format!(
                    "rate × window must be at most {MAX_WINDOW_PROBES} probes (the durations a window keeps): lower the rate or shorten the window"
                ),
            ));
        }
        if slo.window.as_nanos() / iv > MAX_WINDOW_INTERVALS {
            return Err(self.at(
                &format!("{at}.window"),
                format!("a window of at most {MAX_WINDOW_INTERVALS} intervals"),
            ));
        }
        if let Some(l) = slo.latency {
            if !(l.quantile > 0.0 && l.quantile < 1.0) {
                return Err(self.at(
                    &format!("{at}.latency.quantile"),
                    format!(
                        "quantile must be between 0 and 1 (0.99 for p99), got {}",
                        l.quantile
                    ),
                ));
            }
            if l.under.is_zero() || l.under > MAX_TIMEOUT {
                return Err(self.at(
                    &format!("{at}.latency.under"),
                    format!(
                        "under must be above 0 and at most {}",
                        units::format_duration(MAX_TIMEOUT)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_url(&self, at: &str, who: &str, url: &str) -> Result<http::Uri, ConfigError> {
        let expected = || {
            self.at(
                at,
                format!("{who}: expected an absolute http:// or https:// URL such as \"https://example.com/healthz\""),
            )
        };
        let uri: http::Uri = url.parse().map_err(|_| expected())?;
        match (uri.scheme_str(), uri.authority()) {
            (Some("http" | "https"), Some(a)) if !a.host().is_empty() => {}
            _ => return Err(expected()),
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(self.at(
                at,
                format!("{who}: credentials in a URL would be logged; put them in a header read from the environment"),
            ));
        }
        Ok(uri)
    }

    fn check_headers(
        &self,
        i: usize,
        who: &str,
        headers: &BTreeMap<String, EnvHeader>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<http::HeaderMap, ConfigError> {
        let mut map = http::HeaderMap::new();
        for (name, h) in headers {
            let at = format!("path.{i}.headers.{name}");
            let key = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| self.at(&at, format!("{who}: {name:?} is not a header name")))?;
            if key == http::header::HOST {
                return Err(self.at(
                    &at,
                    format!("{who}: Host comes from the URL (use tls.server_name for SNI)"),
                ));
            }
            if map.contains_key(&key) {
                return Err(self.at(
                    &at,
                    format!("{who}: header {name} is given twice (names are case-insensitive)"),
                ));
            }
            let Some(value) = env(&h.env) else {
                return Err(self.at(
                    &format!("{at}.env"),
                    format!(
                        "{who}: header {name}: environment variable {:?} is not set",
                        h.env
                    ),
                ));
            };
            // The value is a credential: the error says where, never what.
            let mut v =
                http::HeaderValue::try_from(format!("{}{value}", h.prefix)).map_err(|_| {
                    self.at(
                        &format!("{at}.env"),
                        format!(
                            "{who}: header {name}: the value of {:?} is not a valid header value",
                            h.env
                        ),
                    )
                })?;
            v.set_sensitive(true);
            map.append(key, v);
        }
        Ok(map)
    }
}

//! The guard's config file: listeners, clusters, routes and their policies.
//!
//! The policy sections are the policy crate's own config types, the same a
//! scenario file uses, so a block copied from `scenarios/*.toml` configures
//! the guard unchanged:
//!
//! | key | type | in a scenario |
//! |---|---|---|
//! | `route.retry` | [`RetryConfig`] | `gateway.retry`, `client.retry` |
//! | `route.budget` | [`BudgetConfig`] | `gateway.budget`, `client.budget` |
//! | `route.limit`, `cluster.limit` | [`LimitConfig`] | — |
//! | `route.rate_limit` | [`RateLimitConfig`] | — |
//! | `saturation` | [`SaturationConfig`] | — |
//! | `cluster.balance` | [`BalanceConfig`] | — |
//! | `cluster.outlier` | [`OutlierConfig`] | — |
//! | `cluster.health_check` | [`HealthCheckConfig`] | — |
//! | `cluster.breaker` | [`BreakerConfig`] | — |
//! | `route.failover_policy` | [`FailoverConfig`] | — |
//! | `route.restore` | [`StagedRestoreConfig`] | the `do = "ramp"` action's ramp |
//! | `route.dependency` | [`DependencyConfig`] | `gateway.dependency` (a route there, a cluster here) |
//!
//! Every error names `file:line:column`; see [`GuardConfig::parse`] and
//! `docs/guard.md` for the whole schema.

mod error;

pub use error::ConfigError;

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;
use stormbreak_policy::balance::{BalanceConfig, HealthCheckConfig, OutlierConfig};
use stormbreak_policy::breaker::BreakerConfig;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::failover::FailoverConfig;
use stormbreak_policy::limit::LimitConfig;
use stormbreak_policy::ramp::StagedRestoreConfig;
use stormbreak_policy::ratelimit::RateLimitConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::{Criticality, SaturationConfig, ShedConfig, ShedRule};
use stormbreak_policy::{FieldError, Nanos};
use toml::de::DeTable;

use error::Doc;

/// Largest config file read: a guard config is a few kilobytes; anything
/// near this is not one.
pub const MAX_CONFIG_BYTES: usize = 4 << 20;

/// Most endpoints in one cluster (the P2C pick scans them).
pub const MAX_ENDPOINTS: usize = 1024;

/// Most routes, clusters or listeners of each kind.
pub const MAX_ITEMS: usize = 4096;

/// The whole guard config, as parsed from TOML.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// `[[listener]]`: where the guard accepts connections.
    #[serde(rename = "listener")]
    pub listeners: Vec<ListenerConfig>,
    /// `[[cluster]]`: upstreams, each a set of static endpoints.
    #[serde(rename = "cluster", default)]
    pub clusters: Vec<ClusterConfig>,
    /// `[[route]]`: which requests go to which cluster, under which policies.
    #[serde(rename = "route", default)]
    pub routes: Vec<RouteConfig>,
    /// `[saturation]`: class thresholds for shedding when a route's limiter
    /// is saturated, and the answer given.
    #[serde(default)]
    pub saturation: SaturationConfig,
    /// `[[shed]]`: operator shed rules in force from the start.
    #[serde(rename = "shed", default)]
    pub shed: Vec<ShedRuleConfig>,
    /// `[admin]`: the admin listener (`/metrics`, `/state`, mutations); none when absent.
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// `[access_log]`: one JSON line per request; off when absent.
    #[serde(default)]
    pub access_log: AccessLogConfig,
    /// Where each `[[listener]]` and `[admin]` table is in the file, for
    /// reload errors (empty for a config not made by [`GuardConfig::parse`]).
    #[serde(skip)]
    pub(crate) spans: Spans,
}

/// Positions of the `[[listener]]` and `[admin]` tables, for reload errors
/// (a listener that cannot bind, a changed `[admin]`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Spans {
    /// The file name as given.
    pub(crate) file: String,
    /// 1-based line and column of each `[[listener]]`'s first key.
    pub(crate) listeners: Vec<(usize, usize)>,
    /// Of `[admin]`'s first key, when present.
    pub(crate) admin: Option<(usize, usize)>,
}

impl Spans {
    fn of(doc: &Doc<'_>, listeners: usize, admin: bool) -> Self {
        let at = |path: &str| error::line_col(doc.text, doc.nearest(path).start);
        Spans {
            file: doc.file.to_owned(),
            listeners: (0..listeners)
                .map(|i| at(&format!("listener.{i}")))
                .collect(),
            admin: admin.then(|| at("admin")),
        }
    }

    /// `file:line:column: message` (`file: message` when the line is
    /// unknown, `message` alone for a config not parsed from a file).
    pub(crate) fn error(&self, line_col: Option<(usize, usize)>, message: String) -> String {
        if self.file.is_empty() {
            return message;
        }
        ConfigError {
            file: self.file.clone(),
            line_col,
            message,
        }
        .to_string()
    }
}

impl ListenerConfig {
    /// The first field that differs from `other`, with both values; `None`
    /// when they are equal.
    pub(crate) fn difference(
        &self,
        other: &ListenerConfig,
    ) -> Option<(&'static str, String, String)> {
        // Spelled out so that a new field fails to compile here until listed.
        let ListenerConfig {
            name: _,
            bind: _,
            protocol: _,
            max_connections: _,
            trusted_proxies: _,
            criticality_header: _,
            header_read_timeout: _,
            idle_timeout: _,
            request_timeout: _,
            max_header_bytes: _,
            max_headers: _,
            max_body_bytes: _,
            tls: _,
            drain_timeout: _,
            forward_path: _,
            max_connections_per_client: _,
            at_connection_cap: _,
            backlog: _,
        } = self;
        let d = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let fields: [(&'static str, String, String); 18] = [
            ("name", d(&self.name), d(&other.name)),
            ("bind", d(&self.bind), d(&other.bind)),
            ("protocol", d(&self.protocol), d(&other.protocol)),
            (
                "max_connections",
                d(&self.max_connections),
                d(&other.max_connections),
            ),
            (
                "trusted_proxies",
                d(&self.trusted_proxies),
                d(&other.trusted_proxies),
            ),
            (
                "criticality_header",
                d(&self.criticality_header),
                d(&other.criticality_header),
            ),
            (
                "header_read_timeout",
                d(&self.header_read_timeout),
                d(&other.header_read_timeout),
            ),
            (
                "idle_timeout",
                d(&self.idle_timeout),
                d(&other.idle_timeout),
            ),
            (
                "request_timeout",
                d(&self.request_timeout),
                d(&other.request_timeout),
            ),
            (
                "max_header_bytes",
                d(&self.max_header_bytes),
                d(&other.max_header_bytes),
            ),
            ("max_headers", d(&self.max_headers), d(&other.max_headers)),
            (
                "max_body_bytes",
                d(&self.max_body_bytes),
                d(&other.max_body_bytes),
            ),
            ("tls", d(&self.tls), d(&other.tls)),
            (
                "drain_timeout",
                d(&self.drain_timeout),
                d(&other.drain_timeout),
            ),
            (
                "forward_path",
                d(&self.forward_path),
                d(&other.forward_path),
            ),
            (
                "max_connections_per_client",
                d(&self.max_connections_per_client),
                d(&other.max_connections_per_client),
            ),
            (
                "at_connection_cap",
                d(&self.at_connection_cap),
                d(&other.at_connection_cap),
            ),
            ("backlog", d(&self.backlog), d(&other.backlog)),
        ];
        fields.into_iter().find(|(_, a, b)| a != b)
    }
}

/// `[access_log]`: where the JSON-lines access log goes, and its rate bound.
///
/// Lines beyond `rate` (after a `burst`) are dropped and counted in
/// `stormbreak_guard_access_log_dropped{reason="rate"}`: a flood of
/// requests must not become a flood of disk writes. A reload that changes
/// it opens the new sink; requests still on the old config finish into the
/// old one.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogConfig {
    /// `off` (default), `stdout` or `file`.
    pub to: AccessLogTo,
    /// File to append to, with `to = "file"` (relative to the working directory).
    pub path: Option<String>,
    /// Most lines per second, sustained (`"1k/s"`, `"600/min"` or a number).
    #[serde(with = "stormbreak_policy::units::rate")]
    pub rate: f64,
    /// Lines that may be written at once after a quiet spell (≥ 1).
    pub burst: u32,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            to: AccessLogTo::Off,
            path: None,
            rate: 1000.0,
            burst: 1000,
        }
    }
}

/// `access_log.to`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AccessLogTo {
    /// No access log.
    #[default]
    Off,
    /// Standard output, one line each.
    Stdout,
    /// Appended to `access_log.path`.
    File,
}

/// `[admin]`: the admin API's own listener.
///
/// Reads (`GET /state`) need no token from a loopback peer; every mutation
/// needs `Authorization: Bearer TOKEN`, so without a token source the API
/// is read-only. A bind address that is not loopback needs a token source.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// `ip:port` to bind (default `127.0.0.1:9901`; port 0 picks one).
    #[serde(default = "defaults::admin_bind")]
    pub bind: String,
    /// File holding the bearer token (surrounding whitespace ignored).
    #[serde(default)]
    pub token_file: Option<String>,
    /// Environment variable holding the bearer token.
    #[serde(default)]
    pub token_env: Option<String>,
}

/// Wire protocol a listener accepts or a cluster speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.1 or cleartext HTTP/2 (h2c, prior knowledge), told apart by the preface.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// Cleartext HTTP/2 with prior knowledge only.
    H2c,
}

/// `[[listener]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Unique name.
    pub name: String,
    /// `ip:port` to bind; port 0 picks a free port.
    pub bind: String,
    /// Protocols accepted (default `auto`).
    #[serde(default)]
    pub protocol: Protocol,
    /// Connection cap (HAProxy's `maxconn`): what happens to connections
    /// beyond it is `at_connection_cap`'s.
    #[serde(default = "defaults::max_connections")]
    pub max_connections: u32,
    /// Beyond `max_connections`: `queue` (default: stop accepting, so new
    /// connections wait in the kernel's backlog) or `refuse` (accept and
    /// reset each at once, as an L4 balancer refuses flows beyond its cap).
    #[serde(default)]
    pub at_connection_cap: AtConnectionCap,
    /// The listen backlog asked of the kernel (`listen(2)`), 1 to 65535,
    /// default 1024. Linux clamps it to `net.core.somaxconn`. A reload
    /// cannot change it on a socket it keeps (same `bind`).
    #[serde(default = "defaults::backlog")]
    pub backlog: u32,
    /// Peers (IP or CIDR) whose `X-Forwarded-For` and criticality header are believed.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Request header carrying the criticality class, believed only from trusted proxies.
    #[serde(default = "defaults::criticality_header")]
    pub criticality_header: String,
    /// Time allowed to receive a request's headers (slowloris guard).
    #[serde(default = "defaults::header_read_timeout")]
    pub header_read_timeout: Nanos,
    /// A connection with no request in flight and no bytes moving is closed after this.
    #[serde(default = "defaults::idle_timeout")]
    pub idle_timeout: Nanos,
    /// Time allowed for a whole request, body upload and upstream answer included.
    #[serde(default = "defaults::request_timeout")]
    pub request_timeout: Nanos,
    /// Largest request head (start line and headers) in bytes; larger gets 431.
    #[serde(default = "defaults::max_header_bytes")]
    pub max_header_bytes: u32,
    /// Most request headers; more gets 431.
    #[serde(default = "defaults::max_headers")]
    pub max_headers: u32,
    /// Largest request body in bytes; larger gets 413.
    #[serde(default = "defaults::max_body_bytes")]
    pub max_body_bytes: u64,
    /// Serve TLS with these PEM files (ALPN `h2`, `http/1.1`); cleartext when absent.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Which path goes upstream: `raw` (default: the bytes received, and a
    /// request whose readings would route differently is refused with
    /// 400) or `normalized` (the path the rules matched).
    #[serde(default)]
    pub forward_path: ForwardPath,
    /// Most connections one client address may hold at once; 0 (default)
    /// for no cap. Peers in `trusted_proxies` are exempt: behind them every
    /// client shares their address.
    #[serde(default)]
    pub max_connections_per_client: u32,
    /// When a reload removes this listener (or moves it to another
    /// `bind`), how long its open connections may take to finish their
    /// requests before they are closed (default 30s).
    #[serde(default = "defaults::drain_timeout")]
    pub drain_timeout: Nanos,
}

/// `listener.at_connection_cap`: what a listener does with a connection
/// beyond its `max_connections`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtConnectionCap {
    /// Stop accepting: the connection waits in the kernel's accept backlog
    /// (and, once that is full, the kernel drops its handshake), as
    /// HAProxy's `maxconn` does.
    #[default]
    Queue,
    /// Accept it and close it at once with a reset (`SO_LINGER` 0),
    /// counted in `connections_closed_total{reason="at_cap"}`.
    Refuse,
}

/// `cluster.tls`: connect to the endpoints over TLS.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// PEM file of the CA certificates the endpoints' certificates must chain to.
    pub ca: String,
    /// Name the endpoints' certificates must be valid for (SNI too).
    pub server_name: String,
}

/// `listener.forward_path`: the path sent upstream.
///
/// Rules always match the normalised path. `raw` is the default because
/// some backends need the bytes as sent (signed URLs, encoded slashes in
/// object keys), which is why Envoy makes `normalize_path` opt-in; the
/// guard stays safe with it because a request any of whose readings would
/// route differently is refused, so a rule and the backend never disagree
/// about which route a request is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardPath {
    /// The path as received (the query always is).
    #[default]
    Raw,
    /// The normalised path the rules matched.
    Normalized,
}

/// `listener.tls`: PEM files, paths as given (relative to the working directory).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Certificate chain, leaf first.
    pub cert: String,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
}

/// `[[cluster]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Unique name.
    pub name: String,
    /// Static endpoints, `ip:port`.
    pub endpoints: Vec<String>,
    /// Protocol spoken to the endpoints: `http1` (default) or `h2c`.
    #[serde(default = "defaults::cluster_protocol")]
    pub protocol: Protocol,
    /// Endpoint choice (power of two choices, least request).
    #[serde(default)]
    pub balance: BalanceConfig,
    /// Passive outlier ejection; none when absent.
    #[serde(default)]
    pub outlier: Option<OutlierConfig>,
    /// Concurrency limit on the whole cluster; none when absent.
    #[serde(default)]
    pub limit: Option<LimitConfig>,
    /// Circuit breaker over the whole cluster; none when absent.
    #[serde(default)]
    pub breaker: Option<BreakerConfig>,
    /// Connect over TLS (ALPN `http/1.1`, or `h2` with `protocol = "h2c"`); cleartext when absent.
    #[serde(default)]
    pub tls: Option<UpstreamTlsConfig>,
    /// Requests per second one endpoint can serve (`"500/s"`, `"9k/s"` or a
    /// number); needed by routes that spill to or from this cluster by
    /// `failover_policy`.
    #[serde(default, with = "opt_rate")]
    pub endpoint_capacity: Option<f64>,
    /// Active HTTP health checks; none when absent.
    #[serde(default)]
    pub health_check: Option<HealthCheckConfig>,
    /// Time allowed to open a connection to an endpoint.
    #[serde(default = "defaults::connect_timeout")]
    pub connect_timeout: Nanos,
    /// Idle pooled connections are closed after this.
    #[serde(default = "defaults::pool_idle_timeout")]
    pub pool_idle_timeout: Nanos,
    /// Most idle pooled connections kept per endpoint.
    #[serde(default = "defaults::pool_max_idle")]
    pub pool_max_idle_per_endpoint: u32,
}

/// `route.match`: which requests a route takes. Every field set must match.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchConfig {
    /// Exact host (case-insensitive, port ignored), from `:authority` or `Host`.
    #[serde(default)]
    pub host: Option<String>,
    /// Path prefix, matched on whole segments (`/api` matches `/api` and
    /// `/api/x`, not `/apix`); default `/`.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Methods, any of which matches; all when empty.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Headers that must be present with exactly these values.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// Where a rate-limit key comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RateLimitKey {
    /// The client address (after trusted-proxy resolution).
    #[default]
    ClientIp,
    /// The value of this request header; requests without it share one key.
    Header(String),
    /// The bearer token of `Authorization`; requests without one share one key.
    Token,
}

/// Admission queue in front of a route's concurrency limiter: the policy
/// crate's table, the one a simulated gateway's `queue` uses.
pub use stormbreak_policy::limit::QueueConfig;

/// `[[route]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Unique name (shed rules refer to it).
    pub name: String,
    /// Which requests; everything when absent.
    #[serde(default, rename = "match")]
    pub matches: MatchConfig,
    /// Cluster the requests go to.
    pub cluster: String,
    /// Cluster to spill to when `cluster` has no endpoint left (all ejected).
    #[serde(default)]
    pub failover: Option<String>,
    /// Spill to `failover` by the capacity-aware law (excess only, within the
    /// failover cluster's headroom) even while the primary has endpoints;
    /// without it the route fails over only when no primary endpoint is left.
    #[serde(default)]
    pub failover_policy: Option<FailoverConfig>,
    /// Staged restore of this route, site by site, from the moment the guard
    /// starts: the sites are `restore_sites` (listener names) in order.
    /// Requests a site's ramp does not admit get `restore_answer`, else the
    /// `[saturation]` answer.
    #[serde(default)]
    pub restore: Option<StagedRestoreConfig>,
    /// The answer to a request a staged restore has not admitted yet (a
    /// scenario ramp's `status`); the `[saturation]` answer when absent.
    #[serde(default)]
    pub restore_answer: Option<RestoreAnswer>,
    /// Listener names restored in this order; every listener, in file order, when empty.
    #[serde(default)]
    pub restore_sites: Vec<String>,
    /// A call each request must pass before it is forwarded (an auth or
    /// token check: the simulator's gateway `dependency`); none when absent.
    #[serde(default)]
    pub dependency: Option<DependencyConfig>,
    /// Retry policy; no retries when absent. It covers the `dependency`
    /// call too, with one attempt count and one budget per request.
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// Retry budget shared by the route's requests; the ratio budget's
    /// defaults when `retry` is set and this is absent.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
    /// Retry non-idempotent methods too (POST, PATCH); default false.
    #[serde(default)]
    pub retry_non_idempotent: bool,
    /// Largest request body buffered so it can be retried; larger or
    /// streaming bodies are sent once.
    #[serde(default = "defaults::retry_buffer_bytes")]
    pub retry_buffer_bytes: u64,
    /// Concurrency limiter for the route; none when absent.
    #[serde(default)]
    pub limit: Option<LimitConfig>,
    /// Admission queue in front of `limit`; none (shed at once) when absent.
    #[serde(default)]
    pub queue: Option<QueueConfig>,
    /// Class of the route's requests unless a trusted header says otherwise.
    #[serde(default)]
    pub criticality: Criticality,
    /// Keyed GCRA rate limit; none when absent.
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
    /// What the rate limit is keyed by (default the client address).
    #[serde(default)]
    pub rate_limit_key: RateLimitKey,
}

/// Most request headers a `dependency` call may copy from the request.
pub const MAX_DEPENDENCY_HEADERS: usize = 32;

/// `route.dependency`: a request to another cluster that must answer 2xx
/// before the request is forwarded, as a simulated `[[gateway]]` calls its
/// `dependency` route first (the incident's shared auth path).
///
/// The call goes through the dependency cluster's own policies (breaker,
/// concurrency limit, outlier ejection, endpoint choice) and, when the
/// route retries, through the route's retry loop and budget: a failed call
/// is retried as a whole check, and the attempts it used count against
/// the request's `max_attempts`. A request whose check fails for good is
/// answered 502 and never forwarded.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyConfig {
    /// The `[[cluster]]` called.
    pub cluster: String,
    /// Path (and query) requested, starting with `/`.
    pub path: String,
    /// Method (default `GET`).
    #[serde(default = "defaults::dependency_method")]
    pub method: String,
    /// Time allowed for one call (the simulator's gateway `timeout`);
    /// never past the route's retry deadline.
    pub timeout: Nanos,
    /// Request headers copied onto the call when present (default
    /// `["authorization"]`; at most [`MAX_DEPENDENCY_HEADERS`]). The
    /// criticality header always goes, with the request's class.
    #[serde(default = "defaults::dependency_headers")]
    pub pass_headers: Vec<String>,
}

/// `route.restore_answer`: what a staged restore answers a request it has
/// not admitted yet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreAnswer {
    /// 403, 429 or 503 (a scenario ramp's default is 403: do not retry).
    pub status: u16,
    /// `Retry-After` sent with a 429 or 503; none when absent or `"0"`.
    #[serde(default)]
    pub retry_after: Option<Nanos>,
}

impl RestoreAnswer {
    /// Status and `Retry-After` (a zero one is none).
    pub fn answer(&self) -> (u16, Option<Nanos>) {
        (self.status, self.retry_after.filter(|d| !d.is_zero()))
    }
}

/// `[[shed]]`: an operator rule, as a scenario's `do = "shed"` action spells it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShedRuleConfig {
    /// Route name.
    pub route: String,
    /// Only this class; every class when absent.
    #[serde(default)]
    pub class: Option<Criticality>,
    /// 403, 429 or 503.
    pub status: u16,
    /// `Retry-After` to send (not with 403); none when absent or `"0"`.
    #[serde(default)]
    pub retry_after: Option<Nanos>,
}

/// `#[serde(with = "opt_rate")]`: an optional rate in the policy crate's units.
mod opt_rate {
    use serde::Deserializer;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        stormbreak_policy::units::rate::deserialize(d).map(Some)
    }
}

mod defaults {
    use super::{Nanos, Protocol};
    pub fn max_connections() -> u32 {
        10_000
    }
    pub fn criticality_header() -> String {
        "x-stormbreak-criticality".to_owned()
    }
    pub fn header_read_timeout() -> Nanos {
        Nanos::from_secs(10)
    }
    pub fn idle_timeout() -> Nanos {
        Nanos::from_secs(60)
    }
    pub fn request_timeout() -> Nanos {
        Nanos::from_secs(60)
    }
    pub fn drain_timeout() -> Nanos {
        Nanos::from_secs(30)
    }
    pub fn max_header_bytes() -> u32 {
        16 * 1024
    }
    pub fn max_headers() -> u32 {
        100
    }
    pub fn max_body_bytes() -> u64 {
        10 << 20
    }
    pub fn cluster_protocol() -> Protocol {
        Protocol::Http1
    }
    pub fn connect_timeout() -> Nanos {
        Nanos::from_secs(1)
    }
    pub fn pool_idle_timeout() -> Nanos {
        Nanos::from_secs(90)
    }
    pub fn pool_max_idle() -> u32 {
        32
    }
    pub fn admin_bind() -> String {
        "127.0.0.1:9901".to_owned()
    }
    pub fn retry_buffer_bytes() -> u64 {
        64 * 1024
    }
    pub fn backlog() -> u32 {
        1024
    }
    pub fn dependency_method() -> String {
        "GET".to_owned()
    }
    pub fn dependency_headers() -> Vec<String> {
        vec!["authorization".to_owned()]
    }
}

/// A trusted-proxy entry: an address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `10.0.0.0/8`, `::1/128` or a bare address.
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().ok()?, Some(p.parse::<u8>().ok()?)),
            None => (s.parse::<IpAddr>().ok()?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(Cidr { addr, prefix })
    }

    /// Does `ip` fall in this range? (IPv4-mapped IPv6 addresses count as IPv4.)
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl DependencyConfig {
    /// Checks the call can be made: a known cluster, a method, an
    /// origin-form path, a timeout, header names; errors at `p.field`.
    fn validate(
        &self,
        doc: &Doc<'_>,
        p: &str,
        who: &str,
        clusters: &HashSet<&str>,
    ) -> Result<(), ConfigError> {
        if !clusters.contains(self.cluster.as_str()) {
            return Err(doc.at(
                &format!("{p}.cluster"),
                format!("{who}: no [[cluster]] named {:?}", self.cluster),
            ));
        }
        if http::Method::from_bytes(self.method.as_bytes()).is_err() {
            return Err(doc.at(
                &format!("{p}.method"),
                format!("{who}: expected an HTTP method, got {:?}", self.method),
            ));
        }
        if !self.path.starts_with('/') || self.path.parse::<http::uri::PathAndQuery>().is_err() {
            return Err(doc.at(
                &format!("{p}.path"),
                format!(
                    "{who}: expected a path starting with '/' such as \"/check\", got {:?}",
                    self.path
                ),
            ));
        }
        if self.timeout.is_zero() {
            return Err(doc.at(
                &format!("{p}.timeout"),
                format!("{who}: expected a duration > 0, got 0"),
            ));
        }
        if self.pass_headers.len() > MAX_DEPENDENCY_HEADERS {
            return Err(doc.at(
                &format!("{p}.pass_headers"),
                format!(
                    "{who}: at most {MAX_DEPENDENCY_HEADERS} headers, got {}",
                    self.pass_headers.len()
                ),
            ));
        }
        for (j, h) in self.pass_headers.iter().enumerate() {
            if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(doc.at(
                    &format!("{p}.pass_headers.{j}"),
                    format!("{who}: expected a header name, got {h:?}"),
                ));
            }
        }
        Ok(())
    }
}

impl GuardConfig {
    /// Reads `[admin]`'s token source as the guard will at start, and
    /// refuses a missing or empty one: `stormbreak guard --check` runs it
    /// where the guard will run, so a broken secret is found before a
    /// deploy, not after. No `[admin]` or no token source passes. The
    /// error is `file:line:column: message`, at the `[admin]` table.
    pub fn check_admin_token(&self) -> Result<(), String> {
        let Some(admin) = &self.admin else {
            return Ok(());
        };
        match crate::admin::load_token(admin) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.spans.error(self.spans.admin, e)),
        }
    }

    /// Reads and validates the config file at `path`.
    pub fn load(path: &std::path::Path) -> Result<GuardConfig, ConfigError> {
        let (file, text) = stormbreak_spans::read_config(path, MAX_CONFIG_BYTES, "a guard config")?;
        GuardConfig::parse(&file, &text)
    }

    /// Parses and validates `text`; errors name `file:line:column`.
    ///
    /// ```
    /// use stormbreak_guard::GuardConfig;
    /// let text = r#"
    /// [[listener]]
    /// name = "edge"
    /// bind = "127.0.0.1:0"
    ///
    /// [[cluster]]
    /// name = "api"
    /// endpoints = ["127.0.0.1:9000"]
    ///
    /// [[route]]
    /// name = "all"
    /// cluster = "api"
    /// retry = { max_attempts = 9 }
    /// "#;
    /// let e = GuardConfig::parse("guard.toml", text).unwrap_err();
    /// assert!(e.to_string().starts_with("guard.toml:13:26: route \"all\": retry: max_attempts must be"), "{e}");
    /// ```
    pub fn parse(file: &str, text: &str) -> Result<GuardConfig, ConfigError> {
        if text.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::whole(
                file,
                stormbreak_spans::too_large(MAX_CONFIG_BYTES, "a guard config"),
            ));
        }
        let serde_error = |e: toml::de::Error| ConfigError::from_toml(file, text, &e);
        let root = DeTable::parse(text).map_err(serde_error)?;
        let config = GuardConfig::deserialize(toml::de::Deserializer::from(root.clone()))
            .map_err(serde_error)?;
        let doc = Doc {
            file,
            text,
            spans: stormbreak_spans::Spans::new(root),
        };
        config.validate(&doc)?;
        let mut config = config;
        config.spans = Spans::of(&doc, config.listeners.len(), config.admin.is_some());
        Ok(config)
    }

    fn validate(&self, doc: &Doc<'_>) -> Result<(), ConfigError> {
        let policy = |path: String, who: String, e: FieldError| {
            let at = format!("{path}.{}", e.field());
            doc.at(&at, format!("{who}: {e}"))
        };
        if self.listeners.is_empty() {
            return Err(doc.at("", "at least one [[listener]] is needed"));
        }
        for (kind, n) in [
            ("listener", self.listeners.len()),
            ("cluster", self.clusters.len()),
            ("route", self.routes.len()),
            ("shed", self.shed.len()),
        ] {
            if n > MAX_ITEMS {
                return Err(doc.at(
                    kind,
                    format!("at most {MAX_ITEMS} [[{kind}]] tables, got {n}"),
                ));
            }
        }
        let mut names = HashSet::new();
        for (i, l) in self.listeners.iter().enumerate() {
            let p = format!("listener.{i}");
            if !names.insert(l.name.as_str()) {
                return Err(doc.at(
                    &format!("{p}.name"),
                    format!("listener {:?} is defined twice", l.name),
                ));
            }
            if l.bind.parse::<SocketAddr>().is_err() {
                return Err(doc.at(
                    &format!("{p}.bind"),
                    format!(
                        "expected an ip:port such as \"127.0.0.1:8080\", got {:?}",
                        l.bind
                    ),
                ));
            }
            for (j, t) in l.trusted_proxies.iter().enumerate() {
                if Cidr::parse(t).is_none() {
                    return Err(doc.at(
                        &format!("{p}.trusted_proxies.{j}"),
                        format!("expected an IP address or CIDR such as \"10.0.0.0/8\", got {t:?}"),
                    ));
                }
            }
            if http::HeaderName::from_bytes(l.criticality_header.as_bytes()).is_err() {
                return Err(doc.at(&format!("{p}.criticality_header"), "expected a header name"));
            }
            if let Some(tls) = &l.tls {
                crate::tls::server_config(tls, l.protocol).map_err(|e| {
                    doc.at(&format!("{p}.tls"), format!("listener {:?}: {e}", l.name))
                })?;
            }
            if l.max_connections == 0 {
                return Err(doc.at(&format!("{p}.max_connections"), "expected ≥ 1, got 0"));
            }
            if !(1..=65535).contains(&l.backlog) {
                return Err(doc.at(
                    &format!("{p}.backlog"),
                    format!("expected between 1 and 65535, got {}", l.backlog),
                ));
            }
            if !(8192..=1 << 20).contains(&l.max_header_bytes) {
                return Err(doc.at(
                    &format!("{p}.max_header_bytes"),
                    format!(
                        "expected between 8192 and 1048576, got {}",
                        l.max_header_bytes
                    ),
                ));
            }
            if !(1..=1000).contains(&l.max_headers) {
                return Err(doc.at(
                    &format!("{p}.max_headers"),
                    format!("expected between 1 and 1000, got {}", l.max_headers),
                ));
            }
            for (key, t) in [
                ("header_read_timeout", l.header_read_timeout),
                ("idle_timeout", l.idle_timeout),
                ("request_timeout", l.request_timeout),
            ] {
                if t.is_zero() {
                    return Err(doc.at(&format!("{p}.{key}"), "expected a duration > 0, got 0"));
                }
            }
        }
        let mut clusters = HashSet::new();
        for (i, c) in self.clusters.iter().enumerate() {
            let p = format!("cluster.{i}");
            let who = format!("cluster {:?}", c.name);
            if !clusters.insert(c.name.as_str()) {
                return Err(doc.at(&format!("{p}.name"), format!("{who} is defined twice")));
            }
            if c.endpoints.is_empty() || c.endpoints.len() > MAX_ENDPOINTS {
                return Err(doc.at(
                    &format!("{p}.endpoints"),
                    format!(
                        "{who}: expected 1 to {MAX_ENDPOINTS} endpoints, got {}",
                        c.endpoints.len()
                    ),
                ));
            }
            for (j, e) in c.endpoints.iter().enumerate() {
                if e.parse::<SocketAddr>().is_err() {
                    return Err(doc.at(
                        &format!("{p}.endpoints.{j}"),
                        format!("{who}: expected an ip:port endpoint such as \"10.0.0.7:8080\", got {e:?}"),
                    ));
                }
            }
            if c.protocol == Protocol::Auto {
                return Err(doc.at(
                    &format!("{p}.protocol"),
                    format!("{who}: expected \"http1\" or \"h2c\""),
                ));
            }
            c.balance
                .validate()
                .map_err(|e| policy(format!("{p}.balance"), who.clone(), e))?;
            if let Some(o) = &c.outlier {
                o.validate()
                    .map_err(|e| policy(format!("{p}.outlier"), who.clone(), e))?;
            }
            if let Some(l) = &c.limit {
                l.validate()
                    .map_err(|e| policy(format!("{p}.limit"), who.clone(), e))?;
            }
            if c.connect_timeout.is_zero() {
                return Err(doc.at(
                    &format!("{p}.connect_timeout"),
                    format!("{who}: expected > 0"),
                ));
            }
        }
        let mut routes = HashSet::new();
        for (i, r) in self.routes.iter().enumerate() {
            let p = format!("route.{i}");
            let who = format!("route {:?}", r.name);
            if !routes.insert(r.name.as_str()) {
                return Err(doc.at(&format!("{p}.name"), format!("{who} is defined twice")));
            }
            for (key, name) in [
                ("cluster", Some(&r.cluster)),
                ("failover", r.failover.as_ref()),
            ] {
                if let Some(name) = name
                    && !clusters.contains(name.as_str())
                {
                    return Err(doc.at(
                        &format!("{p}.{key}"),
                        format!("{who}: no [[cluster]] named {name:?}"),
                    ));
                }
            }
            if let Some(f) = &r.failover_policy {
                f.validate()
                    .map_err(|e| policy(format!("{p}.failover_policy"), who.clone(), e))?;
                let Some(secondary) = &r.failover else {
                    return Err(doc.at(
                        &format!("{p}.failover_policy"),
                        format!(
                            "{who}: a failover_policy needs `failover` (the cluster to spill to)"
                        ),
                    ));
                };
                for name in [&r.cluster, secondary] {
                    let c = self.clusters.iter().find(|c| &c.name == name);
                    if c.is_some_and(|c| {
                        c.endpoint_capacity
                            .is_none_or(|r| !(r.is_finite() && r > 0.0))
                    }) {
                        return Err(doc.at(
                            &format!("{p}.failover_policy"),
                            format!("{who}: the spill law needs cluster {name:?} to set endpoint_capacity (> 0)"),
                        ));
                    }
                }
            }
            if let Some(c) = &r.restore {
                c.validate()
                    .map_err(|e| policy(format!("{p}.restore"), who.clone(), e))?;
            }
            if let Some(a) = &r.restore_answer {
                // The same answers a shed rule may give.
                let (status, retry_after) = a.answer();
                ShedRule {
                    route: 0,
                    class: None,
                    status,
                    retry_after,
                }
                .validate()
                .map_err(|e| policy(format!("{p}.restore_answer"), who.clone(), e))?;
            }
            for (j, site) in r.restore_sites.iter().enumerate() {
                if !names.contains(site.as_str()) {
                    return Err(doc.at(
                        &format!("{p}.restore_sites.{j}"),
                        format!("{who}: no [[listener]] named {site:?}"),
                    ));
                }
                if r.restore_sites[..j].contains(site) {
                    return Err(doc.at(
                        &format!("{p}.restore_sites.{j}"),
                        format!("{who}: site {site:?} is listed twice"),
                    ));
                }
            }
            if let Some(prefix) = &r.matches.path_prefix {
                if !prefix.starts_with('/') {
                    return Err(doc.at(
                        &format!("{p}.match.path_prefix"),
                        format!("{who}: expected a path starting with '/', got {prefix:?}"),
                    ));
                }
                // Requests are matched in their normalised form, so a prefix
                // that is not normal could never match (docs/guard.md, "Hardening").
                match crate::normalize::path(prefix) {
                    Ok(normal) if normal == prefix.as_str() => {}
                    Ok(normal) => {
                        return Err(doc.at(
                            &format!("{p}.match.path_prefix"),
                            format!(
                                "{who}: requests are matched normalised, so {prefix:?} would never match: write {normal:?}"
                            ),
                        ));
                    }
                    Err(e) => {
                        return Err(doc.at(
                            &format!("{p}.match.path_prefix"),
                            format!("{who}: {prefix:?}: {e}"),
                        ));
                    }
                }
            }
            if let Some(host) = &r.matches.host {
                match crate::normalize::host(host) {
                    Ok(normal) if normal == host.as_str() => {}
                    Ok(normal) => {
                        return Err(doc.at(
                            &format!("{p}.match.host"),
                            format!(
                                "{who}: hosts are matched normalised (lower case, no port, no trailing dot), so {host:?} would never match: write {normal:?}"
                            ),
                        ));
                    }
                    Err(e) => {
                        return Err(
                            doc.at(&format!("{p}.match.host"), format!("{who}: {host:?}: {e}"))
                        );
                    }
                }
            }
            for (j, m) in r.matches.methods.iter().enumerate() {
                if http::Method::from_bytes(m.as_bytes()).is_err() {
                    return Err(doc.at(
                        &format!("{p}.match.methods.{j}"),
                        format!("{who}: expected an HTTP method, got {m:?}"),
                    ));
                }
            }
            for (name, value) in &r.matches.headers {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                    || http::HeaderValue::from_str(value).is_err()
                {
                    return Err(doc.at(
                        &format!("{p}.match.headers"),
                        format!("{who}: {name:?} = {value:?} is not a valid header"),
                    ));
                }
            }
            if let Some(d) = &r.dependency {
                d.validate(doc, &format!("{p}.dependency"), &who, &clusters)?;
            }
            if let Some(c) = &r.retry {
                c.validate()
                    .map_err(|e| policy(format!("{p}.retry"), who.clone(), e))?;
            }
            if let Some(c) = &r.budget {
                c.validate()
                    .map_err(|e| policy(format!("{p}.budget"), who.clone(), e))?;
            }
            if let Some(c) = &r.limit {
                c.validate()
                    .map_err(|e| policy(format!("{p}.limit"), who.clone(), e))?;
            }
            if let Some(c) = &r.rate_limit {
                c.validate()
                    .map_err(|e| policy(format!("{p}.rate_limit"), who.clone(), e))?;
            }
            if let RateLimitKey::Header(h) = &r.rate_limit_key
                && http::HeaderName::from_bytes(h.as_bytes()).is_err()
            {
                return Err(doc.at(
                    &format!("{p}.rate_limit_key"),
                    format!("{who}: expected a header name, got {h:?}"),
                ));
            }
            if let Some(q) = &r.queue {
                if r.limit.is_none() {
                    return Err(doc.at(
                        &format!("{p}.queue"),
                        format!("{who}: a queue needs a `limit` to wait for"),
                    ));
                }
                if q.size > 1 << 20 || q.timeout.is_zero() {
                    return Err(doc.at(
                        &format!("{p}.queue"),
                        format!("{who}: expected size ≤ 1048576 and timeout > 0"),
                    ));
                }
            }
        }
        self.shed_config()
            .validate()
            .map_err(|e| match e.field().split_once('.') {
                Some((rule, _)) if rule.starts_with("rules[") => {
                    let i = &rule["rules[".len()..rule.len() - 1];
                    let field = e.field().split_once('.').map_or("", |(_, f)| f);
                    doc.at(&format!("shed.{i}.{field}"), e.to_string())
                }
                _ => doc.at(
                    &format!("saturation.{}", e.field().trim_start_matches("saturation.")),
                    e.to_string(),
                ),
            })?;
        if let Some(a) = &self.admin {
            let Ok(addr) = a.bind.parse::<SocketAddr>() else {
                return Err(doc.at(
                    "admin.bind",
                    format!(
                        "expected an ip:port such as \"127.0.0.1:9901\", got {:?}",
                        a.bind
                    ),
                ));
            };
            if a.token_file.is_some() && a.token_env.is_some() {
                return Err(doc.at("admin.token_env", "give token_file or token_env, not both"));
            }
            if !addr.ip().is_loopback() && a.token_file.is_none() && a.token_env.is_none() {
                return Err(doc.at(
                    "admin.bind",
                    format!(
                        "{} is not a loopback address: an admin listener reachable from the network needs token_file or token_env",
                        a.bind
                    ),
                ));
            }
        }
        let log = &self.access_log;
        if log.to == AccessLogTo::File && log.path.as_deref().is_none_or(str::is_empty) {
            return Err(doc.at("access_log.to", "to = \"file\" needs access_log.path"));
        }
        if log.to != AccessLogTo::File && log.path.is_some() {
            return Err(doc.at("access_log.path", "path is only read with to = \"file\""));
        }
        crate::access_log::gate_of(log).map_err(|e| {
            doc.at(
                &format!("access_log.{}", e.field()),
                format!("access_log: {e}"),
            )
        })?;
        for (i, s) in self.shed.iter().enumerate() {
            if !routes.contains(s.route.as_str()) {
                return Err(doc.at(
                    &format!("shed.{i}.route"),
                    format!("no [[route]] named {:?}", s.route),
                ));
            }
        }
        Ok(())
    }

    /// The policy crate's shed config these sections make: route names become route indices.
    pub fn shed_config(&self) -> ShedConfig {
        let rules = self
            .shed
            .iter()
            .map(|s| ShedRule {
                route: self
                    .routes
                    .iter()
                    .position(|r| r.name == s.route)
                    .map_or(u32::MAX, |i| i as u32),
                class: s.class,
                status: s.status,
                retry_after: s.retry_after.filter(|n| !n.is_zero()),
            })
            .collect::<Vec<_>>();
        ShedConfig {
            saturation: self.saturation.clone(),
            max_rules: ShedConfig::default().max_rules.max(rules.len()),
            rules,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_matches_by_prefix_and_maps_ipv4_in_ipv6() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
        let one = Cidr::parse("::1").unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("::2".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        for bad in ["10.0.0.0/33", "x", "10.0.0.0/", "::/129"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }
}

//! `stormbreak guard`: a reverse proxy that enforces `stormbreak-policy`'s
//! overload policies on real traffic.
//!
//! The request path, one module per layer (in the order a request meets them):
//!
//! | module | job | policy from `stormbreak-policy` |
//! |---|---|---|
//! | `listener` | accept under a connection cap (queue in the backlog, or refuse with a reset) and a per-client cap (`peers`); TLS with ALPN (`tls`); header-read, idle timeouts (`conn_watch`); header limits | — |
//! | `listen_set` | the listeners in force: bound, swapped, drained on reload | — |
//! | `target`, `normalize` | one host and one normalised path per request (RFC 9112 §3.2, RFC 3986 §6.2.2); a request a backend could read as another route is refused | — |
//! | `route` | most specific match of host, path prefix, method, headers, on the normalised view | — |
//! | `shed` | operator rules, then shedding by class under saturation | `shed::Shedder` |
//! | `ratelimit` | keyed GCRA, bounded memory | `ratelimit::KeyedRateLimiter` |
//! | `limit` | concurrency limit per route and per cluster, bounded queue | `limit::Limiter` (fixed, AIMD, Vegas, Gradient2, Envoy gradient) |
//! | `restore` | a staged restore of a route, site by site (listener by listener) | `ramp::StagedRestore` |
//! | `attempts` | a request's attempts (a route's dependency call, `dependency`, first), driven by `stormbreak-client`'s retry loop: backoff, jitter, timeouts and a budget in one retry state; the guard's errors read by the client's classification | `retry::RetryState` and the budgets, through `stormbreak_client::RetryLayer::drive` |
//! | `upstream` | an attempt's call as tower layers: failover choice → breaker → cluster limit → balancer → per-try timeout → endpoint | the policies below, each judged by the answer |
//! | `balance` | endpoint choice, outlier ejection, active health checks | `balance::{LeastRequest, OutlierDetector, HealthTable}` |
//! | `failover` | spill to a second cluster: only the excess, within its headroom | `failover::Failover` (capacity-aware spill law) |
//! | `endpoint`, `connector` | pooled keep-alive connections, HTTP/1.1 or HTTP/2, optional upstream TLS | — |
//! | `blame` | a failure is the client's (body cut, malformed, too large, too slow) or the upstream's; only the upstream's feed the policies | — |
//! | `headers` | hop-by-hop removal, `X-Forwarded-For` / `Forwarded`, trusted proxies | — |
//!
//! Beside the request path: `access_log` (one JSON line per request with
//! the decision that shaped its answer, rate-bounded by the policy crate's
//! GCRA), `metrics` (the OpenMetrics exposition, label
//! sets bounded by the config), `admin` (its own listener: `/metrics`,
//! `/state`, token-guarded runtime overrides of shed rules, retry policies
//! and staged restores) and `trace` (the retry loop without sockets, for
//! the trace-equivalence test against the simulator; behind the `testing`
//! feature, a test seam).
//!
//! Every decision is the policy crate's, driven with tokio's clock (so a
//! test can pause it) and a seeded RNG; nothing here re-implements one.
//! `docs/guard.md` documents the config file.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = stormbreak_guard::GuardConfig::load("guard.toml".as_ref())?;
//! let guard = stormbreak_guard::Guard::start(&config).await?;
//! println!("listening on {:?}", guard.local_addr("edge"));
//! guard.wait().await;
//! # Ok(()) }
//! ```

// One `unsafe` block, allowed where it stands: `trim::release`'s call of
// glibc's `malloc_trim` (no pointers cross it).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod accept;
mod access_log;
mod admin;
mod attempts;
mod balance;
mod blame;
pub mod body;
mod changes;
mod clock;
pub mod config;
mod conn_watch;
mod connector;
mod dependency;
mod endpoint;
mod failover;
mod headers;
mod limit;
mod listen_set;
mod listener;
pub mod live;
pub mod metrics;
mod normalize;
mod peers;
mod proxy;
mod ratelimit;
mod restore;
mod route;
mod serving;
mod shed;
mod stats;
mod target;
mod tls;
mod trim;
mod upstream;
// Test seam for `crates/equivalence` (feature `testing`).
#[cfg(feature = "testing")]
pub mod trace;

pub use config::{ConfigError, GuardConfig};
pub use limit::{REFUSED_HEADER, Refusal};
pub use stats::Stats;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// Why the guard could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A policy refused its config (only reachable when the config was not
    /// parsed by [`GuardConfig::parse`], which checks the same).
    #[error("{0}")]
    Policy(#[from] stormbreak_policy::FieldError),
    /// The admin listener's token could not be read, or it could not bind.
    #[error("{0}")]
    Admin(String),
    /// A listener's certificate or key could not be read (the files changed
    /// since the config was checked).
    #[error("{0}")]
    Tls(String),
    /// The access log's file could not be opened.
    #[error("{0}")]
    AccessLog(String),
    /// A listener could not bind.
    #[error("listener {name:?}: cannot bind {bind}: {source}")]
    Bind {
        /// Listener name.
        name: String,
        /// Address it asked for.
        bind: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A running guard: its listeners are accepting until it is dropped or
/// [`shutdown`](Guard::shutdown).
pub struct Guard {
    live: Arc<live::Live>,
    admin: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Guard {
    /// Builds every policy, binds every listener and starts serving on the
    /// current tokio runtime.
    pub async fn start(config: &GuardConfig) -> Result<Guard, StartError> {
        Guard::start_inner(config, None).await
    }

    /// As [`Guard::start`] with the config read from `path`, which
    /// [`Guard::reload_file`] (SIGHUP, `POST /reload`) reads again.
    pub async fn start_file(path: &std::path::Path) -> Result<Guard, StartError> {
        let config = GuardConfig::load(path).map_err(|e| StartError::Admin(e.to_string()))?;
        Guard::start_inner(&config, Some(path.to_owned())).await
    }

    async fn start_inner(
        config: &GuardConfig,
        path: Option<std::path::PathBuf>,
    ) -> Result<Guard, StartError> {
        let (stop, stopped) = watch::channel(false);
        // Binds every listener and starts serving on it.
        let live = live::Live::new(config, path, stopped.clone())?;
        let mut tasks = JoinSet::new();
        {
            // One task feeds every spill law of the config in force.
            let live = live.clone();
            let mut stopped = stopped.clone();
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(failover::OBSERVE_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            let proxy = live.get();
                            for route in proxy.spill_routes() {
                                let _ = proxy.observe_spill(route);
                            }
                        }
                        _ = stopped.changed() => return,
                    }
                }
            });
        }
        let admin = match &config.admin {
            Some(a) => {
                let token = admin::load_token(a).map_err(StartError::Admin)?;
                let bind_err = |e: std::io::Error| {
                    StartError::Admin(format!("admin: cannot bind {}: {e}", a.bind))
                };
                let addr: SocketAddr = a.bind.parse().map_err(|_| {
                    StartError::Admin(format!("admin.bind {:?}: not an ip:port", a.bind))
                })?;
                // Checked again here for configs not made by `GuardConfig::parse`.
                if token.is_none() && !addr.ip().is_loopback() {
                    return Err(StartError::Admin(format!(
                        "admin: refusing to bind {addr} (not loopback) without a token"
                    )));
                }
                let socket = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(bind_err)?;
                let local = socket.local_addr().map_err(bind_err)?;
                let state = Arc::new(admin::Admin::new(live.clone(), token));
                tasks.spawn(admin::serve(socket, state, stopped.clone()));
                Some(local)
            }
            None => None,
        };
        Ok(Guard {
            live,
            admin,
            stop,
            tasks,
        })
    }

    /// Replaces the config without dropping a request or connection,
    /// keeping the policy state of unchanged routes and clusters and the
    /// admin overrides. Listeners may be added, removed (they drain) and
    /// changed; refused whole, with the old config and listeners kept,
    /// when a new listener cannot bind, a certificate cannot be read, or
    /// `config` changes `[admin]`. Call it on the guard's tokio runtime.
    pub fn reload(&self, config: &GuardConfig) -> Result<live::Reloaded, String> {
        self.live.reload(config)
    }

    /// [`Guard::reload`] with the file given to [`Guard::start_file`] read
    /// again; a file that fails validation is refused with its error.
    pub fn reload_file(&self) -> Result<live::Reloaded, String> {
        self.live.reload_file()
    }

    /// The address listener `name` is bound to (its port, when it asked
    /// for 0); `None` for a name not in the config in force.
    pub fn local_addr(&self, name: &str) -> Option<SocketAddr> {
        self.live.local_addr(name)
    }

    /// The admin listener's address, when `[admin]` is configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// The OpenMetrics text `/metrics` serves.
    pub fn metrics_text(&self) -> String {
        self.live.get().metrics_text()
    }

    /// What the guard has done so far.
    pub fn stats(&self) -> &Stats {
        self.live.stats()
    }

    /// Keys held by route `route`'s rate limiter, and its capacity.
    pub fn rate_limit_keys(&self, route: &str) -> Option<(usize, usize)> {
        self.live.get().rate_limit_keys(route)
    }

    /// Starts (or restarts) a staged restore of route `route` at its first
    /// site now, with `restore` or the route's own `restore` config: what
    /// `POST /restore/start` does, listed in `/state`'s overrides as made
    /// in process. For a program that embeds the guard (the lab).
    pub fn start_restore(
        &self,
        route: &str,
        restore: Option<&stormbreak_policy::ramp::StagedRestoreConfig>,
    ) -> Result<(), String> {
        let detail = serde_json::json!({ "route": route, "restore": restore });
        let change = changes::Change::restore_start(route, restore.cloned());
        admin::apply_in_process(&self.live, change, detail)
    }

    /// Route `route`'s current concurrency limit, if it has a limiter.
    pub fn route_limit(&self, route: &str) -> Option<u32> {
        self.live.get().route_limit(route)
    }

    /// Resolves once a drain was asked for (`POST /drain` or
    /// [`Guard::drain`]).
    pub async fn drain_requested(&self) {
        let mut d = self.live.draining();
        let _ = d.wait_for(|d| *d).await;
    }

    /// Graceful drain: stops accepting, lets every open connection finish
    /// the requests in flight (HTTP/1.1 closes after its current response,
    /// HTTP/2 sends GOAWAY) for up to `deadline`, then stops everything.
    /// Returns how many connections were still open at the deadline (0 for
    /// a clean drain).
    pub async fn drain(self, deadline: std::time::Duration) -> u64 {
        self.live.start_drain();
        let end = tokio::time::Instant::now() + deadline;
        // Connections hold their listener's cap permit until they end.
        while self.live.open_connections() > 0 && tokio::time::Instant::now() < end {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let left = self.live.open_connections();
        self.shutdown().await;
        left
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.live.join().await;
    }

    /// Serves until the guard's own tasks end: forever, as nothing stops
    /// a guard that is waited on (a listener that fails to accept backs
    /// off and retries).
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

//! The config in force, and its replacement on reload without loss.
//!
//! Requests take the current proxy (`Proxy`) when they start and finish on it,
//! so a reload never cuts one. The new proxy keeps, by identity, every
//! cluster whose config is unchanged (pool, outlier ejection, health,
//! breaker, cluster limit) and every route whose config, position and
//! clusters are unchanged (retry budget, adaptive limit, rate-limit table,
//! restore ramp): resetting a budget mid-storm would hand out a fresh
//! allowance of retries. Two changes are made in place rather than by a
//! rebuild, because they are what an operator or a controller changes
//! mid-incident: a cluster's endpoint list (pods scaled, as Envoy takes an
//! EDS update: the cluster's state kept, each kept address's too) and a
//! route's `limit` or `retry` (the limiter's algorithm swapped, requests
//! in flight kept, so cutting a limit never admits a burst; the retry
//! budget's state kept). Shed rules and retry policies set through the
//! admin API are replayed onto the new proxy before it takes traffic. A
//! changed `[access_log]` opens its new sink (requests on the old config
//! finish into the old one).
//!
//! Listeners may be added, removed and changed (`crate::listen_set`): every
//! new socket is bound and every certificate read before anything is
//! swapped, so a reload that cannot bind is refused whole, naming the
//! table's file:line, with the old listeners and config in force. `[admin]`
//! cannot change: the admin listener is the lever a reload is pulled
//! through (`POST /reload`), and its token guards every other lever; a
//! reload that changes it is refused, naming the table.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::access_log::AccessLog;
use crate::balance::Cluster;
use crate::changes::Override;
use crate::config::{AdminConfig, GuardConfig};
use crate::listen_set::{ListenSet, PlanError};
use crate::proxy::{Proxy, Shared};
use crate::serving::Serving;

pub use crate::listen_set::ListenerChanges;

/// Overrides kept (and replayed on reload), oldest dropped first.
pub const MAX_OVERRIDES: usize = 256;

/// What a reload kept and rebuilt.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Reloaded {
    /// Routes whose policy state was kept.
    pub kept: Vec<String>,
    /// Routes built anew (new or changed).
    pub rebuilt: Vec<String>,
    /// Kept routes whose only changes were their `limit` or `retry`
    /// tables: the limiter took the new algorithm in place, its requests
    /// in flight and queue kept (so a cut never over-admits while the old
    /// ones finish); the retry took the new policy, its budget's state
    /// kept.
    pub policies: Vec<String>,
    /// Clusters whose only change was their endpoint list: breaker,
    /// limit, pool and counters kept, and each kept address's in-flight
    /// count, ejection and health; the routes on them kept.
    pub endpoints: Vec<String>,
    /// TLS listeners whose certificate and key were read again (new
    /// connections get them; open ones keep theirs).
    pub certificates: Vec<String>,
    /// Listeners added, removed, moved to another `bind`, or updated.
    pub listeners: ListenerChanges,
}

/// The proxy in force, what outlives it, and the admin overrides.
pub(crate) struct Live {
    /// The proxy in force; the listeners watch it ([`Serving`]).
    current: watch::Sender<Arc<Proxy>>,
    shared: Shared,
    /// `[admin]` as started: a reload may not change it.
    admin: Option<AdminConfig>,
    path: Option<PathBuf>,
    pub(crate) overrides: Mutex<VecDeque<Override>>,
    /// Serialises reloads (and override changes against them).
    reloading: Mutex<()>,
    stopped: watch::Receiver<bool>,
    /// Turned true once to drain: listeners stop accepting, connections
    /// finish what is in flight.
    draining: watch::Sender<bool>,
    /// Listener accept loops, removed listeners' drains and health
    /// probes; finished ones are reaped on every
    /// spawn, so the set holds only running tasks.
    tasks: Arc<Mutex<JoinSet<()>>>,
    /// The listeners in force and draining.
    listen: ListenSet,
    /// What the listeners see of all this.
    serving: Serving,
}

/// Refuses `new` when its `[admin]` differs from `admin`, the one the
/// guard started with: the admin listener is what `POST /reload` comes in
/// on and its token guards every mutation, so changing it takes a
/// restart. The error names the table's file:line.
fn admin_unchanged(admin: &Option<AdminConfig>, new: &GuardConfig) -> Result<(), String> {
    let key = |a: &Option<AdminConfig>| format!("{a:?}");
    if key(admin) == key(&new.admin) {
        return Ok(());
    }
    let what = match (admin, &new.admin) {
        (None, _) => "added",
        (_, None) => "removed",
        _ => "changed",
    };
    Err(new.spans.error(
        new.spans.admin,
        format!(
            "[admin] {what}: a reload cannot change [admin] (the listener reloads come through); restart the guard for that; the old config stays"
        ),
    ))
}

/// The message of a listener plan that failed, with the table's position.
fn plan_error(config: &GuardConfig, e: PlanError) -> String {
    match e {
        PlanError::Tls(e) => format!("{e}; the old listeners, certificates and config stay"),
        PlanError::Backlog {
            index,
            name,
            was,
            asked,
        } => config.spans.error(
            config.spans.listeners.get(index).copied(),
            format!(
                "listener {name:?}: backlog {asked} asked, but its socket (same bind) keeps its backlog of {was}: a reload cannot change it; restart the guard or move the listener to another bind; the old listeners and config stay"
            ),
        ),
        PlanError::Bind {
            index,
            name,
            bind,
            source,
        } => config.spans.error(
            config.spans.listeners.get(index).copied(),
            format!(
                "listener {name:?}: cannot bind {bind}: {source}; the old listeners and config stay"
            ),
        ),
    }
}

/// Every listener name of `config`, in order (the implicit restore sites).
fn listener_names(config: &GuardConfig) -> Vec<String> {
    config.listeners.iter().map(|l| l.name.clone()).collect()
}

/// The access log `config` asks for: the one `previous` writes when its
/// `[access_log]` is the same, else a new one (a reload that changes the
/// section opens the new sink; the old one writes out its queued lines and
/// closes once the last request on the old config is done).
fn access_log_for(
    config: &GuardConfig,
    shared: &Shared,
    previous: Option<&Proxy>,
) -> Result<Option<Arc<AccessLog>>, String> {
    let key = format!("{:?}", config.access_log);
    if let Some(p) = previous
        && p.access_log_key == key
    {
        return Ok(p.access_log.clone());
    }
    let (rate, full) = shared.metrics.access_log_drops();
    Ok(AccessLog::open(&config.access_log, rate, full)?.map(Arc::new))
}

impl Live {
    /// Builds the proxy and binds every listener; must run inside a tokio
    /// runtime.
    pub(crate) fn new(
        config: &GuardConfig,
        path: Option<PathBuf>,
        stopped: watch::Receiver<bool>,
    ) -> Result<Arc<Live>, crate::StartError> {
        let listen = ListenSet::default();
        let plan = listen.plan(config).map_err(|e| match e {
            PlanError::Tls(e) => crate::StartError::Tls(e),
            // Only a kept socket refuses a new backlog, and none is kept at start.
            PlanError::Backlog { name, asked, .. } => crate::StartError::Bind {
                name,
                bind: format!("backlog {asked}"),
                source: std::io::Error::other("a kept socket's backlog cannot change"),
            },
            PlanError::Bind {
                name, bind, source, ..
            } => crate::StartError::Bind { name, bind, source },
        })?;
        let shared = Shared::new();
        let log = access_log_for(config, &shared, None).map_err(crate::StartError::AccessLog)?;
        let proxy = Arc::new(Proxy::new(config, &shared, None, log, plan.caps())?);
        let current = watch::Sender::new(proxy.clone());
        let draining = watch::Sender::new(false);
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let serving = Serving::new(
            current.subscribe(),
            draining.subscribe(),
            stopped.clone(),
            tasks.clone(),
        );
        let live = Arc::new(Live {
            current,
            shared,
            admin: config.admin.clone(),
            path,
            overrides: Mutex::new(VecDeque::new()),
            reloading: Mutex::new(()),
            stopped,
            draining,
            tasks,
            listen,
            serving,
        });
        live.listen.apply(plan, &live.serving);
        live.probe(&proxy, None);
        live.spawn(crate::trim::run(live.stopped.clone()));
        Ok(live)
    }

    /// The address listener `name` (in force) is bound to.
    pub(crate) fn local_addr(&self, name: &str) -> Option<std::net::SocketAddr> {
        self.listen
            .listeners()
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.addr)
    }

    /// Runs `task` until the guard stops (it must watch [`Live::stopped`]);
    /// [`Live::join`] waits for it.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.serving.spawn(task);
    }

    /// Watches the drain flag.
    pub(crate) fn draining(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Starts draining (idempotent); `false` when already draining.
    pub(crate) fn start_drain(&self) -> bool {
        !self.draining.send_replace(true)
    }

    /// Client connections open on every listener, removed ones still
    /// draining included.
    pub(crate) fn open_connections(&self) -> u64 {
        self.listen.open_connections()
    }

    /// The proxy new requests go to.
    pub(crate) fn get(&self) -> Arc<Proxy> {
        self.current.borrow().clone()
    }

    pub(crate) fn stats(&self) -> &crate::Stats {
        &self.shared.stats
    }

    /// Starts health probes for `proxy`'s clusters that `previous` did not have.
    fn probe(&self, proxy: &Proxy, previous: Option<&Proxy>) {
        for cluster in &proxy.clusters {
            if cluster.probe_interval().is_none()
                || previous.is_some_and(|p| p.clusters.iter().any(|c| Arc::ptr_eq(c, cluster)))
            {
                continue;
            }
            for e in 0..cluster.endpoints.len() {
                self.spawn(probe(Arc::downgrade(cluster), e, self.stopped.clone()));
            }
        }
    }

    /// Records an admin change (bounded), to list and replay.
    pub(crate) fn record(&self, o: Override) {
        let mut list = self
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if list.len() == MAX_OVERRIDES {
            list.pop_front();
        }
        list.push_back(o);
    }

    /// Replaces the config; refused (and the old one kept whole) when
    /// `config` changes `[admin]`, a new listener cannot bind, a
    /// certificate cannot be read, a policy refuses it, or a changed
    /// `[access_log]`'s file cannot be opened. Must run inside the guard's
    /// tokio runtime.
    pub(crate) fn reload(self: &Arc<Self>, config: &GuardConfig) -> Result<Reloaded, String> {
        let _one = self
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if tokio::runtime::Handle::try_current().is_err() {
            return Err("a reload must run inside the guard's tokio runtime".to_owned());
        }
        admin_unchanged(&self.admin, config)?;
        // Certificates read and new sockets bound before anything is
        // swapped: a failure refuses the whole reload, and the sockets it
        // bound close.
        let plan = self
            .listen
            .plan(config)
            .map_err(|e| plan_error(config, e))?;
        let previous = self.get();
        let log = access_log_for(config, &self.shared, Some(&previous))
            .map_err(|e| format!("{e}; the old config stays"))?;
        let mut proxy = Proxy::new(config, &self.shared, Some(&previous), log, plan.caps())
            .map_err(|e| e.to_string())?;
        // Nothing fails from here on.
        let (policies, endpoints) = proxy.commit();
        // Admin shed rules and retry policies outlive the config (restores
        // are kept with their route, or start afresh with a changed one).
        let replay: Vec<Override> = self
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|o| o.change.replayed())
            .cloned()
            .collect();
        for o in replay {
            if let Err((_, e)) = o.change.apply(&proxy) {
                tracing::warn!(target: "stormbreak_guard::admin", what = o.what, detail = %o.detail, error = %e, "override not replayed on reload");
            }
        }
        let names = listener_names(config);
        for route in &proxy.routes {
            route.restore.relisten(&names);
        }
        let proxy = Arc::new(proxy);
        let kept = proxy.kept_routes(&previous);
        let rebuilt = proxy
            .routes
            .iter()
            .map(|r| r.name.clone())
            .filter(|n| !kept.contains(n))
            .collect();
        self.probe(&proxy, Some(&previous));
        self.current.send_replace(proxy);
        let certificates = config
            .listeners
            .iter()
            .filter(|l| l.tls.is_some())
            .map(|l| l.name.clone())
            .collect();
        let listeners = plan.changes.clone();
        self.listen.apply(plan, &self.serving);
        let ListenerChanges {
            added,
            removed,
            moved,
            updated,
        } = &listeners;
        if !(added.is_empty() && removed.is_empty() && moved.is_empty() && updated.is_empty()) {
            tracing::info!(
                ?added,
                ?removed,
                ?moved,
                ?updated,
                "listeners changed on reload"
            );
        }
        Ok(Reloaded {
            kept,
            rebuilt,
            policies,
            endpoints,
            certificates,
            listeners,
        })
    }

    /// Reloads the file the guard was started from.
    pub(crate) fn reload_file(self: &Arc<Self>) -> Result<Reloaded, String> {
        let path = self
            .path
            .as_ref()
            .ok_or("the guard was not started from a file: nothing to reload")?;
        let config = GuardConfig::load(path).map_err(|e| e.to_string())?;
        self.reload(&config)
    }

    /// Waits for the probe tasks, after `stopped` has turned, then writes
    /// out the access log's queued lines.
    pub(crate) async fn join(&self) {
        let mut tasks =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        while tasks.join_next().await.is_some() {}
        if let Some(log) = &self.get().access_log {
            log.close().await;
        }
    }
}

/// Probes one endpoint every interval while its cluster is in use (held by
/// a proxy), until the guard stops.
async fn probe(cluster: Weak<Cluster>, endpoint: usize, mut stopped: watch::Receiver<bool>) {
    let Some(every) = cluster.upgrade().and_then(|c| c.probe_interval()) else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let Some(c) = cluster.upgrade() else { return };
        tokio::select! {
            () = c.probe_once(endpoint) => {}
            _ = stopped.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(admin: &str) -> GuardConfig {
        let text = format!("[[listener]]\nname = \"a\"\nbind = \"127.0.0.1:0\"\n\n{admin}");
        GuardConfig::parse("g.toml", &text).unwrap()
    }

    #[test]
    fn admin_changes_are_refused_with_where_and_what() {
        let none = config("");
        assert_eq!(admin_unchanged(&None, &none), Ok(()));
        let with_admin = config("[admin]\nbind = \"127.0.0.1:0\"\n");
        let e = admin_unchanged(&None, &with_admin).unwrap_err();
        assert!(
            e.starts_with("g.toml:5:1: [admin] added: a reload cannot change [admin]"),
            "{e}"
        );
        let e = admin_unchanged(&with_admin.admin, &none).unwrap_err();
        assert!(e.starts_with("g.toml: [admin] removed"), "{e}");
        let moved = config("[admin]\nbind = \"127.0.0.1:1\"\n");
        let e = admin_unchanged(&with_admin.admin, &moved).unwrap_err();
        assert!(e.starts_with("g.toml:5:1: [admin] changed"), "{e}");
        // A config not parsed from a file: the message without a position.
        let mut bare = with_admin.clone();
        bare.spans = Default::default();
        let e = admin_unchanged(&None, &bare).unwrap_err();
        assert!(e.starts_with("[admin] added"), "{e}");
    }
}

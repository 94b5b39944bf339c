//! The config in force, and its replacement on reload without loss.
//!
//! Requests take the current proxy (`Proxy`) when they start and finish on it,
//! so a reload never cuts one; connections and listeners are untouched.
//! The new proxy keeps, by identity, every cluster whose config is
//! unchanged (pool, outlier ejection, health, breaker, cluster limit) and
//! every route whose config, position and clusters are unchanged (retry
//! budget, adaptive limit, rate-limit table, restore ramp): resetting a
//! budget mid-storm would hand out a fresh allowance of retries. Shed rules
//! and retry policies set through the admin API are replayed onto the new
//! proxy before it takes traffic. Every TLS listener's certificate and key
//! are read again: new connections get them, open ones keep theirs, and a
//! file that does not load refuses the whole reload. A changed
//! `[access_log]` opens its new sink (requests on the old config finish
//! into the old one); `[[listener]]` and `[admin]` own sockets and cannot
//! change: such a reload is refused, naming the table's file:line.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::access_log::AccessLog;
use crate::balance::Cluster;
use crate::config::{AdminConfig, GuardConfig, ListenerConfig};
use crate::proxy::{Proxy, Shared};

/// Overrides kept (and replayed on reload), oldest dropped first.
pub const MAX_OVERRIDES: usize = 256;

/// One change made through the admin API.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Override {
    /// Seconds since the Unix epoch.
    pub(crate) at_unix: u64,
    /// Peer address, and the operator header when sent.
    pub(crate) who: String,
    /// `shed.add`, `shed.remove`, `retry.set`, `restore.start`, `restore.step`, `restore.stop`.
    pub(crate) what: &'static str,
    /// The admin call's path, to replay it.
    #[serde(skip)]
    pub(crate) path: String,
    /// The request body as given.
    pub(crate) detail: serde_json::Value,
}

/// What a reload kept and rebuilt.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Reloaded {
    /// Routes whose policy state was kept.
    pub kept: Vec<String>,
    /// Routes built anew (new or changed).
    pub rebuilt: Vec<String>,
    /// TLS listeners whose certificate and key were read again (new
    /// connections get them; open ones keep theirs).
    pub certificates: Vec<String>,
}

/// Each listener's TLS server config (`None`: cleartext), swapped whole on
/// reload; read once per accepted connection.
type Certs = Vec<Option<RwLock<Arc<rustls::ServerConfig>>>>;

/// Reads every TLS listener's certificate and key; the error names the
/// listener and the file.
fn read_certs(config: &GuardConfig) -> Result<Vec<Option<Arc<rustls::ServerConfig>>>, String> {
    config
        .listeners
        .iter()
        .map(|l| {
            l.tls
                .as_ref()
                .map(|t| {
                    crate::tls::server_config(t, l.protocol)
                        .map_err(|e| format!("listener {:?}: {e}", l.name))
                })
                .transpose()
        })
        .collect()
}

/// The proxy in force, what outlives it, and the admin overrides.
pub(crate) struct Live {
    current: RwLock<Arc<Proxy>>,
    shared: Shared,
    /// `[[listener]]` and `[admin]` as started: a reload may not change them.
    fixed: (Vec<ListenerConfig>, Option<AdminConfig>),
    path: Option<PathBuf>,
    pub(crate) overrides: Mutex<VecDeque<Override>>,
    /// Serialises reloads (and override changes against them).
    reloading: Mutex<()>,
    stopped: watch::Receiver<bool>,
    /// Turned true once to drain: listeners stop accepting, connections
    /// finish what is in flight.
    draining: watch::Sender<bool>,
    /// Health probes of clusters built since start.
    tasks: Mutex<JoinSet<()>>,
    /// Listeners' TLS configs, re-read from their files on every reload.
    certs: Certs,
}

/// Refuses `new` when its `[[listener]]` tables or `[admin]` differ from
/// `listeners` and `admin`, the ones the guard started with: they own
/// sockets (and listener positions name restore sites), so changing them
/// takes a restart. The error names the file:line of the table and the
/// first field that differs.
fn unchangeable(
    (listeners, admin): &(Vec<ListenerConfig>, Option<AdminConfig>),
    new: &GuardConfig,
) -> Result<(), String> {
    const RESTART: &str = "restart the guard for that; the old config stays";
    let spans = &new.spans;
    for (i, l) in new.listeners.iter().enumerate() {
        let at = spans.listeners.get(i).copied();
        let message = match listeners.get(i) {
            None => format!(
                "listener {:?} is new: a reload cannot add a [[listener]]; {RESTART}",
                l.name
            ),
            Some(old) => match old.difference(l) {
                Some((field, was, now)) => format!(
                    "listener {:?}: {field} changed from {was} to {now}: a reload cannot change a [[listener]]; {RESTART}",
                    old.name
                ),
                None => continue,
            },
        };
        return Err(spans.error(at, message));
    }
    if let Some(gone) = listeners.get(new.listeners.len()) {
        return Err(spans.error(
            None,
            format!(
                "listener {:?} is gone: a reload cannot remove a [[listener]]; {RESTART}",
                gone.name
            ),
        ));
    }
    let key = |a: &Option<AdminConfig>| format!("{a:?}");
    if key(admin) != key(&new.admin) {
        let what = match (admin, &new.admin) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        return Err(spans.error(
            spans.admin,
            format!("[admin] {what}: a reload cannot change [admin]; {RESTART}"),
        ));
    }
    Ok(())
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
    pub(crate) fn new(
        config: &GuardConfig,
        path: Option<PathBuf>,
        stopped: watch::Receiver<bool>,
    ) -> Result<Arc<Live>, crate::StartError> {
        let certs = read_certs(config)
            .map_err(crate::StartError::Tls)?
            .into_iter()
            .map(|c| c.map(RwLock::new))
            .collect();
        let shared = Shared::new(config);
        let log = access_log_for(config, &shared, None).map_err(crate::StartError::AccessLog)?;
        let proxy = Arc::new(Proxy::new(config, &shared, None, log)?);
        let live = Arc::new(Live {
            current: RwLock::new(proxy.clone()),
            shared,
            fixed: (config.listeners.clone(), config.admin.clone()),
            path,
            overrides: Mutex::new(VecDeque::new()),
            reloading: Mutex::new(()),
            stopped,
            draining: watch::Sender::new(false),
            tasks: Mutex::new(JoinSet::new()),
            certs,
        });
        live.probe(&proxy, None);
        Ok(live)
    }

    /// The TLS acceptor for a new connection on listener `index`, with the
    /// certificate in force now; `None` for a cleartext listener.
    pub(crate) fn tls_acceptor(&self, index: usize) -> Option<tokio_rustls::TlsAcceptor> {
        let config = self.certs.get(index)?.as_ref()?;
        let config = config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Some(tokio_rustls::TlsAcceptor::from(config))
    }

    /// Watches the drain flag.
    pub(crate) fn draining(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Starts draining (idempotent); `false` when already draining.
    pub(crate) fn start_drain(&self) -> bool {
        !self.draining.send_replace(true)
    }

    /// Client connections open on every listener.
    pub(crate) fn open_connections(&self) -> u64 {
        self.shared
            .connection_caps
            .iter()
            .map(|(_, sem, cap)| u64::from(*cap).saturating_sub(sem.available_permits() as u64))
            .sum()
    }

    /// The proxy new requests go to.
    pub(crate) fn get(&self) -> Arc<Proxy> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn stats(&self) -> &crate::Stats {
        &self.shared.stats
    }

    /// Starts health probes for `proxy`'s clusters that `previous` did not have.
    fn probe(&self, proxy: &Proxy, previous: Option<&Proxy>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        for cluster in &proxy.clusters {
            if cluster.probe_interval().is_none()
                || previous.is_some_and(|p| p.clusters.iter().any(|c| Arc::ptr_eq(c, cluster)))
            {
                continue;
            }
            for e in 0..cluster.endpoints.len() {
                tasks.spawn(probe(Arc::downgrade(cluster), e, self.stopped.clone()));
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

    /// Replaces the config; refused (and the old one kept) when `config`
    /// changes listeners or `[admin]`, a policy refuses it, or a changed
    /// `[access_log]`'s file cannot be opened.
    pub(crate) fn reload(&self, config: &GuardConfig) -> Result<Reloaded, String> {
        let _one = self
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unchangeable(&self.fixed, config)?;
        let previous = self.get();
        // Certificates are read before anything is swapped: a bad file
        // refuses the whole reload, old certificates and config kept.
        let certs =
            read_certs(config).map_err(|e| format!("{e}; the old certificates and config stay"))?;
        let log = access_log_for(config, &self.shared, Some(&previous))
            .map_err(|e| format!("{e}; the old config stays"))?;
        let proxy =
            Proxy::new(config, &self.shared, Some(&previous), log).map_err(|e| e.to_string())?;
        // Admin shed rules and retry policies outlive the config (restores
        // are kept with their route, or start afresh with a changed one).
        let replay: Vec<Override> = self
            .overrides
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|o| matches!(o.what, "shed.add" | "shed.remove" | "retry.set"))
            .cloned()
            .collect();
        for o in replay {
            if let Err((_, e)) = crate::admin::apply(&proxy, &o.path, o.detail.clone()) {
                tracing::warn!(target: "stormbreak_guard::admin", what = o.what, detail = %o.detail, error = %e, "override not replayed on reload");
            }
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
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = proxy;
        let mut certificates = Vec::new();
        for ((slot, new), l) in self.certs.iter().zip(certs).zip(&config.listeners) {
            if let (Some(slot), Some(new)) = (slot, new) {
                *slot.write().unwrap_or_else(PoisonError::into_inner) = new;
                certificates.push(l.name.clone());
            }
        }
        Ok(Reloaded {
            kept,
            rebuilt,
            certificates,
        })
    }

    /// Reloads the file the guard was started from.
    pub(crate) fn reload_file(&self) -> Result<Reloaded, String> {
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

    fn config(listeners: &[&str], admin: &str) -> GuardConfig {
        let mut text: String = listeners
            .iter()
            .map(|l| format!("[[listener]]\nname = {l:?}\nbind = \"127.0.0.1:0\"\n\n"))
            .collect();
        text.push_str(admin);
        GuardConfig::parse("g.toml", &text).unwrap()
    }

    fn started(c: &GuardConfig) -> (Vec<ListenerConfig>, Option<AdminConfig>) {
        (c.listeners.clone(), c.admin.clone())
    }

    #[test]
    fn listener_and_admin_changes_are_refused_with_where_and_what() {
        let two = config(&["a", "b"], "");
        assert_eq!(unchangeable(&started(&two), &two), Ok(()));
        let e = unchangeable(&started(&two), &config(&["a"], "")).unwrap_err();
        assert_eq!(
            e,
            "g.toml: listener \"b\" is gone: a reload cannot remove a [[listener]]; restart the guard for that; the old config stays"
        );
        let mut moved = two.clone();
        moved.listeners[1].max_connections = 7;
        let e = unchangeable(&started(&two), &moved).unwrap_err();
        assert!(
            e.starts_with("g.toml:5:1: listener \"b\": max_connections changed from 10000 to 7:"),
            "{e}"
        );
        let with_admin = config(&["a", "b"], "[admin]\nbind = \"127.0.0.1:0\"\n");
        let e = unchangeable(&started(&two), &with_admin).unwrap_err();
        assert!(
            e.starts_with("g.toml:9:1: [admin] added: a reload cannot change [admin]"),
            "{e}"
        );
        // A config not parsed from a file: the message without a position.
        let mut bare = with_admin.clone();
        bare.spans = Default::default();
        let e = unchangeable(&started(&two), &bare).unwrap_err();
        assert!(e.starts_with("[admin] added"), "{e}");
    }
}

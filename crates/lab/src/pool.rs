//! A pool of guard instances in front of a route's next hop: an LB's
//! nodes or a gateway's instances. Each instance is a `stormbreak guard`
//! started in process from its [`GuardDoc`] (as a sidecar is,
//! `sidecar.rs`), with one route named [`ROUTE`]; the pool spreads
//! attempts over its running instances in turn, as the simulator's LB
//! does (`engine/lb.rs`, `Lb::pick`) and its gateway admits them
//! (`engine/admission.rs`). Levers (endpoints, limits, retries, shed
//! rules) edit each instance's document and reload its guard in place.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use stormbreak_guard::Guard;
use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::StagedRestoreConfig;
use stormbreak_policy::retry::RetryConfig;

use crate::guard_doc::{GuardDoc, site_listener};

/// The listener's name in every generated pool config.
pub const LISTENER: &str = "node";
/// The route's name in every generated pool config (its metrics label).
pub const ROUTE: &str = "hop";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One instance: its guard, where it listens, and its config as of now
/// (a restart starts it again from that, on a fresh port).
pub struct Instance {
    guard: Mutex<Option<Guard>>,
    addr: Mutex<SocketAddr>,
    /// Its site listeners' addresses, by site label (an LB with a `ramp`).
    sites: Mutex<Vec<(String, SocketAddr)>>,
    paused: AtomicBool,
    doc: Mutex<GuardDoc>,
}

impl Instance {
    /// Where attempts to it go now.
    pub fn addr(&self) -> SocketAddr {
        *lock(&self.addr)
    }

    /// Where an attempt from a client of site `site` goes now: that
    /// site's listener when the instance has one, else the default one.
    pub fn addr_for(&self, site: Option<&str>) -> SocketAddr {
        site.and_then(|s| {
            lock(&self.sites)
                .iter()
                .find(|(label, _)| label == s)
                .map(|(_, a)| *a)
        })
        .unwrap_or_else(|| self.addr())
    }

    /// Whether the pool may pick it.
    pub fn is_running(&self) -> bool {
        !self.paused.load(Ordering::Relaxed)
    }

    /// The guard's OpenMetrics text (empty once closed).
    pub fn metrics_text(&self) -> String {
        lock(&self.guard)
            .as_ref()
            .map_or_else(String::new, Guard::metrics_text)
    }

    /// Changes its config with `edit` (which says whether it changed
    /// anything) and, when running, reloads its guard in place.
    fn edit(&self, edit: impl FnOnce(&mut GuardDoc) -> bool) -> Result<(), String> {
        let mut doc = lock(&self.doc);
        if !edit(&mut doc) {
            return Ok(());
        }
        match lock(&self.guard).as_ref() {
            Some(g) => doc.reload(g).map_err(|e| format!("reload: {e}")),
            None => Ok(()),
        }
    }

    async fn shut_down(&self) {
        let guard = lock(&self.guard).take();
        if let Some(g) = guard {
            let _ = tokio::time::timeout(crate::runner::TEARDOWN, g.shutdown()).await;
        }
    }
}

/// A pool's instances and its round-robin position.
pub struct Pool {
    name: String,
    instances: Vec<Instance>,
    next: Mutex<usize>,
}

impl Pool {
    /// Starts one guard per document (each with listener [`LISTENER`]);
    /// on an error the instances already started are shut down.
    ///
    /// `sites` are the client site labels its instances listen for (an LB
    /// with a `ramp`; empty otherwise).
    pub async fn start(name: &str, docs: Vec<GuardDoc>, sites: &[String]) -> Result<Pool, String> {
        let mut pool = Pool {
            name: name.to_owned(),
            instances: Vec::with_capacity(docs.len()),
            next: Mutex::new(0),
        };
        for doc in docs {
            match doc.start().await {
                Ok((guard, addr)) => pool.instances.push(Instance {
                    sites: Mutex::new(site_addrs(&guard, sites)),
                    guard: Mutex::new(Some(guard)),
                    addr: Mutex::new(addr),
                    paused: AtomicBool::new(false),
                    doc: Mutex::new(doc),
                }),
                Err(e) => {
                    pool.close().await;
                    return Err(format!("{name:?}: {e}"));
                }
            }
        }
        Ok(pool)
    }

    /// Component name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every instance, running or not.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Every instance's address (the previous hop's cluster endpoints).
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.instances.iter().map(Instance::addr).collect()
    }

    /// The next running instance in turn (the simulator's `Lb::pick`),
    /// at its listener for client site `site`; `None` when none runs.
    pub fn pick(&self, site: Option<&str>) -> Option<SocketAddr> {
        let n = self.instances.len();
        let mut next = lock(&self.next);
        let j = (0..n)
            .map(|i| (*next + i) % n)
            .find(|&j| self.instances[j].is_running())?;
        *next = (j + 1) % n;
        Some(self.instances[j].addr_for(site))
    }

    /// Running instances.
    pub fn running(&self) -> u32 {
        self.instances.iter().filter(|i| i.is_running()).count() as u32
    }

    /// Requests in flight through the instances' route (their
    /// `stormbreak_guard_inflight` gauges), and waiting in its queue.
    pub fn reading(&self) -> (f64, f64) {
        self.instances.iter().fold((0.0, 0.0), |acc, i| {
            let text = i.metrics_text();
            (
                acc.0 + crate::sidecar::metric(&text, "stormbreak_guard_inflight{", ROUTE),
                acc.1 + crate::sidecar::metric(&text, "stormbreak_guard_queue_depth{", ROUTE),
            )
        })
    }

    /// The sum over the instances of metric `name` (with its opening
    /// brace) on their route, over the samples carrying `label` too (a
    /// reason or an outcome, `key="value"`) when given.
    pub fn sum(&self, name: &str, label: Option<&str>) -> f64 {
        self.instances
            .iter()
            .map(|i| {
                let text = i.metrics_text();
                match label {
                    None => crate::sidecar::metric(&text, name, ROUTE),
                    Some(l) => {
                        let only: String = text
                            .lines()
                            .filter(|line| line.contains(l))
                            .collect::<Vec<_>>()
                            .join("\n");
                        crate::sidecar::metric(&only, name, ROUTE)
                    }
                }
            })
            .sum()
    }

    /// `pause_nodes`: the first `n` instances leave the rotation and
    /// their guards close at once, so every flow they hold is answered by
    /// a reset (the simulator's `reset_flows`); the work they forwarded
    /// goes on at the next hop, as the simulator's orphaned child does.
    pub async fn pause(&self, n: u32) {
        for i in self.instances.iter().take(n as usize) {
            i.paused.store(true, Ordering::Relaxed);
        }
        for i in self.instances.iter().take(n as usize) {
            i.shut_down().await;
        }
    }

    /// `restart_nodes` (or the end of a timed `pause_nodes`): each of the
    /// first `n` instances that is paused starts again from its config, on
    /// a fresh `127.0.0.1` port, and rejoins the rotation. Returns the new
    /// addresses.
    pub async fn restart(&self, n: usize) -> Result<Vec<SocketAddr>, String> {
        let mut started = Vec::new();
        for i in self.instances.iter().take(n) {
            if i.is_running() {
                continue;
            }
            let doc = lock(&i.doc).clone();
            let (guard, addr) = doc
                .start()
                .await
                .map_err(|e| format!("{:?}: restarting a node: {e}", self.name))?;
            let labels: Vec<String> = lock(&i.sites).iter().map(|(l, _)| l.clone()).collect();
            *lock(&i.sites) = site_addrs(&guard, &labels);
            *lock(&i.guard) = Some(guard);
            *lock(&i.addr) = addr;
            i.paused.store(false, Ordering::Relaxed);
            started.push(addr);
        }
        Ok(started)
    }

    /// Applies `edit` to every instance's config (running or paused, so
    /// a restart keeps it) and reloads the running ones in place
    /// (`Guard::reload`): each listener keeps its socket, and the route
    /// keeps its limiter, retry budget and the requests holding them.
    fn edit_all(&self, edit: impl Fn(&mut GuardDoc) -> bool) -> Result<(), String> {
        for i in &self.instances {
            i.edit(&edit).map_err(|e| format!("{:?}: {e}", self.name))?;
        }
        Ok(())
    }

    /// An operator's shed rule on every instance's route (`None`: removed).
    pub fn set_shed(&self, rule: Option<(u16, Option<Nanos>)>) -> Result<(), String> {
        self.edit_all(|d| {
            d.set_shed(rule);
            true
        })
    }

    /// Cluster `cluster` of every instance forwards to `to` from now on
    /// (the next hop's pods after a scale or a kill); an empty `to` keeps
    /// the last list ([`GuardDoc::set_endpoints`]).
    pub fn set_endpoints(&self, cluster: &str, to: &[SocketAddr]) -> Result<(), String> {
        self.edit_all(|d| d.set_endpoints(cluster, to))
    }

    /// Every instance's route limit (its fixed limit), in order.
    pub fn limits(&self) -> Vec<Option<u32>> {
        self.instances
            .iter()
            .map(|i| lock(&i.doc).fixed())
            .collect()
    }

    /// Instance `node`'s (every instance's when `None`) fixed route limit
    /// becomes `limit`, changed in place: requests in flight keep their
    /// slots, so a cut admits nothing new until they fall under it.
    pub fn set_limit(&self, node: Option<u32>, limit: u32) -> Result<(), String> {
        for (j, i) in self.instances.iter().enumerate() {
            if node.is_none_or(|n| n as usize == j) {
                i.edit(|d| {
                    let changed = d.fixed() != Some(limit);
                    d.set_fixed(limit);
                    changed
                })
                .map_err(|e| format!("{:?}: {e}", self.name))?;
            }
        }
        Ok(())
    }

    /// Every instance's limits back to `limits` (from [`Pool::limits`]).
    pub fn restore_limits(&self, limits: &[Option<u32>]) -> Result<(), String> {
        for (j, l) in limits.iter().enumerate() {
            if let Some(l) = l {
                self.set_limit(Some(j as u32), *l)?;
            }
        }
        Ok(())
    }

    /// The route's retry policy (the first instance's; all share it).
    pub fn retry(&self) -> Option<RetryConfig> {
        self.instances
            .first()
            .and_then(|i| lock(&i.doc).retry_policy().cloned())
    }

    /// Every instance's route retries by `retry` from now on, its
    /// budget's state kept.
    pub fn set_retry(&self, retry: &RetryConfig) -> Result<(), String> {
        self.edit_all(|d| {
            let changed = d.retry_policy() != Some(retry);
            d.set_retry(retry.clone());
            changed
        })
    }

    /// Starts a staged restore of the route on every running instance
    /// (`Guard::start_restore`), over its site listeners in the ramp's
    /// order. A node restarted later starts without it.
    pub fn start_restore(&self, restore: &StagedRestoreConfig) -> Result<(), String> {
        for i in &self.instances {
            if let Some(g) = lock(&i.guard).as_ref() {
                g.start_restore(ROUTE, Some(restore))
                    .map_err(|e| format!("{:?}: {e}", self.name))?;
            }
        }
        Ok(())
    }

    /// Closes every instance: listeners and connections.
    pub async fn close(&self) {
        for i in &self.instances {
            i.shut_down().await;
        }
    }
}

/// The addresses of `guard`'s site listeners, by site label.
fn site_addrs(guard: &Guard, sites: &[String]) -> Vec<(String, SocketAddr)> {
    sites
        .iter()
        .filter_map(|s| Some((s.clone(), guard.local_addr(&site_listener(s))?)))
        .collect()
}

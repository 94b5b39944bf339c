//! A pool of guard instances in front of a route's next hop: an LB's
//! nodes or a gateway's instances. Each instance is a `stormbreak guard` started in process from
//! generated TOML (as a sidecar is, `sidecar.rs`), with one route named
//! [`ROUTE`]; the pool spreads attempts over its running instances in
//! turn, as the simulator's LB does (`engine/lb.rs`, `Lb::pick`) and its
//! gateway admits them (`engine/admission.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use stormbreak_guard::{Guard, GuardConfig};

/// The listener's name in every generated pool config.
pub const LISTENER: &str = "node";
/// The route's name in every generated pool config (its metrics label).
pub const ROUTE: &str = "hop";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One instance: its guard, where it listens, and the config it was
/// started from (a restart starts it again, on a fresh port).
pub struct Instance {
    guard: Mutex<Option<Guard>>,
    addr: Mutex<SocketAddr>,
    paused: AtomicBool,
    config: String,
}

impl Instance {
    /// Where attempts to it go now.
    pub fn addr(&self) -> SocketAddr {
        *lock(&self.addr)
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
    /// Guard tables added to every instance's config by a timeline
    /// action (an LB's `[[shed]]` rule), kept for a restart.
    extra: Mutex<String>,
}

impl Pool {
    /// Starts one guard per config text (each with listener [`LISTENER`]);
    /// on an error the instances already started are shut down.
    pub async fn start(name: &str, configs: Vec<String>) -> Result<Pool, String> {
        let mut pool = Pool {
            name: name.to_owned(),
            instances: Vec::with_capacity(configs.len()),
            next: Mutex::new(0),
            extra: Mutex::new(String::new()),
        };
        for text in configs {
            match start_guard(&text).await {
                Ok((guard, addr)) => pool.instances.push(Instance {
                    guard: Mutex::new(Some(guard)),
                    addr: Mutex::new(addr),
                    paused: AtomicBool::new(false),
                    config: text,
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
    /// `None` when none runs.
    pub fn pick(&self) -> Option<SocketAddr> {
        let n = self.instances.len();
        let mut next = lock(&self.next);
        let j = (0..n)
            .map(|i| (*next + i) % n)
            .find(|&j| self.instances[j].is_running())?;
        *next = (j + 1) % n;
        Some(self.instances[j].addr())
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
            let text = format!("{}\n{}", i.config, lock(&self.extra));
            let (guard, addr) = start_guard(&text)
                .await
                .map_err(|e| format!("{:?}: restarting a node: {e}", self.name))?;
            *lock(&i.guard) = Some(guard);
            *lock(&i.addr) = addr;
            i.paused.store(false, Ordering::Relaxed);
            started.push(addr);
        }
        Ok(started)
    }

    /// Replaces the tables added to every instance's config (`""`: none)
    /// and reloads the running instances in place (`Guard::reload`): the
    /// listener keeps its socket and the route, unchanged, keeps its
    /// limiter and the requests holding it.
    pub fn set_extra(&self, tables: &str) -> Result<(), String> {
        *lock(&self.extra) = tables.to_owned();
        for i in &self.instances {
            let text = format!("{}\n{tables}", i.config);
            let config = GuardConfig::parse("<lab pool>", &text)
                .map_err(|e| format!("{:?}: {e}", self.name))?;
            if let Some(g) = lock(&i.guard).as_ref() {
                g.reload(&config)
                    .map_err(|e| format!("{:?}: reload: {e}", self.name))?;
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

async fn start_guard(text: &str) -> Result<(Guard, SocketAddr), String> {
    let config = GuardConfig::parse("<lab pool>", text).map_err(|e| e.to_string())?;
    let guard = Guard::start(&config).await.map_err(|e| e.to_string())?;
    let addr = guard
        .local_addr(LISTENER)
        .ok_or("the guard has no listener")?;
    Ok((guard, addr))
}

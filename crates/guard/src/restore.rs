//! A route's staged restore: the policy crate's `StagedRestore` while one
//! runs, which listener each site is, and what a reload or the admin API
//! does to it. The proxy asks [`Restore::admit`] at admission and feeds
//! [`Restore::observe`] each answer; nothing here decides a fraction.

use std::sync::{Mutex, PoisonError};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::FieldError;
use stormbreak_policy::ramp::{StagedRestore, StagedRestoreConfig};

use crate::clock::Clock;
use crate::config::{ListenerConfig, RouteConfig};

/// A route's staged restore: the policy's coordinator while one runs, and
/// which listener each site is. The config's `restore` runs from start;
/// the admin API can start, step and stop one at any time.
pub(crate) struct Restore {
    state: Mutex<RestoreState>,
    /// The sites are the listeners (no `restore_sites`): a reload that
    /// changes the listeners changes them (see [`Restore::relisten`]).
    implicit: bool,
}

struct RestoreState {
    running: Option<StagedRestore>,
    /// Site (listener) names in restore order: of the running restore, or
    /// for the next one. A listener not among them admits nothing while a
    /// restore runs.
    sites: Vec<String>,
    /// Listener names a reload brought while a restore ran: the sites of
    /// the next restore (a running one keeps the sites it started with).
    next_sites: Option<Vec<String>>,
    /// The route's `restore`, or the one an admin start gave.
    config: Option<StagedRestoreConfig>,
    rng: Pcg64Mcg,
}

/// A restore's state, for the admin API.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct RestoreView {
    /// A restore is running (requests are admitted by its ramps).
    pub(crate) running: bool,
    /// Each site's admitted fraction now, in restore order.
    pub(crate) fractions: Vec<(String, f64)>,
}

impl Restore {
    /// A restore over `sites` (in restore order), running from `now` when
    /// `config` is given; `implicit` when the sites are the listeners. Its
    /// admission draws come from `rng`.
    pub(crate) fn new(
        config: Option<&StagedRestoreConfig>,
        sites: Vec<String>,
        implicit: bool,
        now: stormbreak_policy::Nanos,
        rng: Pcg64Mcg,
    ) -> Result<Restore, FieldError> {
        let running = match config {
            Some(c) => {
                let mut restore = StagedRestore::new(c, sites.len())?;
                restore.start(now);
                Some(restore)
            }
            None => None,
        };
        Ok(Restore {
            state: Mutex::new(RestoreState {
                running,
                sites,
                next_sites: None,
                config: config.cloned(),
                rng,
            }),
            implicit,
        })
    }

    /// `(running, fractions)`: with no restore running every site admits all.
    pub(crate) fn view(&self, now: stormbreak_policy::Nanos) -> RestoreView {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let RestoreState { running, sites, .. } = &mut *s;
        retire_if_complete(running, now);
        let fractions = sites
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let f = running.as_mut().map_or(1.0, |r| r.fraction(now, i));
                (name.clone(), f)
            })
            .collect();
        RestoreView {
            running: running.is_some(),
            fractions,
        }
    }

    /// Starts (or restarts) a restore at site 0 now, with `config` or the
    /// last one used.
    pub(crate) fn start(
        &self,
        now: stormbreak_policy::Nanos,
        config: Option<StagedRestoreConfig>,
    ) -> Result<(), String> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let config = config
            .or_else(|| s.config.clone())
            .ok_or("the route has no `restore` config: give one")?;
        let sites = s.next_sites.as_ref().unwrap_or(&s.sites).len();
        let mut restore = StagedRestore::new(&config, sites).map_err(|e| e.to_string())?;
        restore.start(now);
        if let Some(next) = s.next_sites.take() {
            s.sites = next;
        }
        s.running = Some(restore);
        s.config = Some(config);
        Ok(())
    }

    /// Steps the latest started site now (`StagedRestore::step`).
    pub(crate) fn step(&self, now: stormbreak_policy::Nanos) -> Result<(), String> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        retire_if_complete(&mut s.running, now);
        let r = s
            .running
            .as_mut()
            .ok_or("no restore is running (it may have completed)")?;
        r.step(now);
        Ok(())
    }

    /// Ends the restore: every site admits all. `false` when none ran.
    pub(crate) fn stop(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let ran = s.running.take().is_some();
        if let Some(next) = s.next_sites.take() {
            s.sites = next;
        }
        ran
    }

    /// A reload changed the listeners to `names`: a route whose sites are
    /// its listeners takes them as its sites now, or, while a restore
    /// runs, for the next restore (the running one keeps its sites, so its
    /// ramps do not jump). A route with `restore_sites` keeps its own.
    pub(crate) fn relisten(&self, names: &[String]) {
        if !self.implicit {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.running.is_some() {
            s.next_sites = (s.sites != names).then(|| names.to_vec());
        } else {
            s.sites = names.to_vec();
        }
    }

    /// Admits a request at listener `listener` (all when no restore runs).
    pub(crate) fn admit(&self, now: stormbreak_policy::Nanos, listener: &str) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let RestoreState {
            running,
            rng,
            sites,
            ..
        } = &mut *s;
        retire_if_complete(running, now);
        let Some(r) = running else { return true };
        site_of(sites, listener).is_some_and(|site| r.admit(now, site, rng))
    }

    /// Feeds the site's error guard, when a restore runs.
    pub(crate) fn observe(&self, now: stormbreak_policy::Nanos, listener: &str, ok: bool) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let RestoreState { running, sites, .. } = &mut *s;
        if let (Some(r), Some(site)) = (running.as_mut(), site_of(sites, listener)) {
            r.observe(now, site, ok);
        }
    }
}

/// A restore that has completed (every site whole at some instant up to
/// `now`) is over: it stops running, and every listener admits all again,
/// as with no restore; `POST /restore/stop` then finds none to stop.
fn retire_if_complete(running: &mut Option<StagedRestore>, now: stormbreak_policy::Nanos) {
    if let Some(r) = running {
        r.advance(now);
        if r.is_complete() {
            *running = None;
        }
    }
}

/// Whether an answer with `status` counts as a success for a staged
/// restore's error guard: anything but a server error (a 403 or 429 shed
/// downstream is not the site failing). The simulator's rule is the same
/// (`Res::is_server_error`).
pub(crate) fn restore_ok(status: u16) -> bool {
    !(500..600).contains(&status)
}

/// Position of listener `name` among `sites` (at most the listener count,
/// scanned only while a restore runs).
fn site_of(sites: &[String], name: &str) -> Option<usize> {
    sites.iter().position(|s| s == name)
}

/// A route's restore as its config says: over `restore_sites`, else over
/// the listeners (in config order), running from now when the route has a
/// `restore`.
pub(crate) fn of(
    config: &RouteConfig,
    listeners: &[ListenerConfig],
    clock: Clock,
) -> Result<Restore, FieldError> {
    let sites: Vec<String> = if config.restore_sites.is_empty() {
        listeners.iter().map(|l| l.name.clone()).collect()
    } else {
        config.restore_sites.clone()
    };
    Restore::new(
        config.restore.as_ref(),
        sites,
        config.restore_sites.is_empty(),
        clock.now(),
        Pcg64Mcg::from_os_rng(),
    )
}

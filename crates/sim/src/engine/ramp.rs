//! A staged restore of one route at one LB, as the engine runs it: the
//! policy crate's [`StagedRestore`] plus the glue that maps the scenario's
//! sites onto the ramp's and decides when the ramp's own clock must be
//! woken.
//!
//! Public so the workspace's trace-equivalence test
//! (`crates/equivalence/tests/it/restore.rs`) can drive this glue, not a copy
//! of it, beside the guard's restore.
//!
//! The engine calls [`RampGate::admit`] for each attempt reaching the LB,
//! [`RampGate::observe`] when an admitted attempt leaves (ok: not a server
//! error, `Res::is_server_error`, the guard's rule), and
//! [`RampGate::wake`] at the instants [`RampGate::start`] and
//! [`RampGate::observe`] ask for; a wake that finds the ramp complete
//! retires it, and from then on every site admits all.

use rand::Rng;
use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::StagedRestore;

/// What a wake-up found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a ramp that wants another wake-up must get one"]
pub enum Wake {
    /// Not this ramp's current wake-up (superseded by an earlier one, or
    /// from a restore since replaced): nothing happened.
    Stale,
    /// The ramp advanced and wants to be woken again at this instant.
    Again(Nanos),
    /// The ramp advanced, wants no further wake-up, and is not complete.
    Idle,
    /// Every site is fully restored: retire the ramp.
    Complete,
}

/// A staged restore at one LB, with its site map and wake-up bookkeeping.
#[derive(Debug)]
pub struct RampGate {
    restore: StagedRestore,
    /// Scenario site → the ramp's site number (`None`: not ramped).
    site_map: Vec<Option<usize>>,
    /// The status a refused request is answered with.
    pub status: u16,
    /// Tells this ramp's wake-ups from a replaced ramp's.
    epoch: u32,
    /// The wake-up scheduled now, if any; an outcome that makes the ramp
    /// want an earlier one schedules it, and wake-ups at other instants
    /// are stale.
    armed: Option<Nanos>,
}

impl RampGate {
    /// `restore` over the scenario's sites as `site_map` maps them,
    /// answering refusals with `status`; wake-ups carry `epoch`.
    pub fn new(
        restore: StagedRestore,
        site_map: Vec<Option<usize>>,
        status: u16,
        epoch: u32,
    ) -> Self {
        RampGate {
            restore,
            site_map,
            status,
            epoch,
            armed: None,
        }
    }

    /// The epoch its wake-ups carry.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Starts the restore at `now`; returns the wake-up to schedule.
    pub fn start(&mut self, now: Nanos) -> Option<Nanos> {
        self.restore.start(now);
        self.armed = None;
        self.rearm(now)
    }

    /// May a request from scenario site `site` pass now? A site the ramp
    /// does not cover always passes.
    pub fn admit<R: Rng + ?Sized>(&mut self, now: Nanos, site: usize, rng: &mut R) -> bool {
        match self.site_map.get(site).copied().flatten() {
            Some(s) => self.restore.admit(now, s, rng),
            None => true,
        }
    }

    /// A request from scenario site `site` that it admitted ended with
    /// `ok`: feeds the site's error guard. Returns an earlier wake-up to
    /// schedule, if the outcome made the ramp want one (a breach's
    /// clearing or step back may be due before the one armed).
    pub fn observe(&mut self, now: Nanos, site: usize, ok: bool) -> Option<Nanos> {
        let s = self.site_map.get(site).copied().flatten()?;
        self.restore.observe(now, s, ok);
        self.rearm(now)
    }

    /// The wake-up of `epoch` scheduled for `now` fires.
    pub fn wake(&mut self, now: Nanos, epoch: u32) -> Wake {
        if epoch != self.epoch || self.armed != Some(now) {
            return Wake::Stale;
        }
        self.restore.advance(now);
        if self.restore.is_complete() {
            self.armed = None;
            return Wake::Complete;
        }
        self.armed = None;
        match self.rearm(now) {
            Some(t) => Wake::Again(t),
            None => Wake::Idle,
        }
    }

    #[cfg(feature = "testing")] // only the equivalence test reads it
    /// The restore's state, for inspection.
    pub fn restore(&self) -> &StagedRestore {
        &self.restore
    }

    /// An earlier wake-up, if the ramp now wants one before the armed one
    /// (a restore that completed at an outcome wants one at once, to be
    /// retired).
    fn rearm(&mut self, now: Nanos) -> Option<Nanos> {
        let due = if self.restore.is_complete() {
            now
        } else {
            self.restore.poll_timeout()?
        };
        let want = due.max(now + Nanos::NANOSECOND);
        if self.armed.is_none_or(|t| want < t) {
            self.armed = Some(want);
            Some(want)
        } else {
            None
        }
    }
}

//! Several sites restored one after another.

use super::FAMILY;
use super::{Ramp, RampConfig, admit_with};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Largest accepted number of sites.
pub const MAX_SITES: usize = 10_000;

/// Parameters of a multi-site restore.
///
/// Missing fields in a config file take the [`Default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StagedRestoreConfig {
    /// The ramp every site follows.
    pub ramp: RampConfig,
    /// A site starts its ramp when the previous site first enters a step at or
    /// above this fraction. Default 1.0: strictly one site at a time, as
    /// GitHub's operators did, so at most one site is ever half-restored and
    /// the guard's errors can be blamed on it.
    pub next_site_at_fraction: f64,
}

impl Default for StagedRestoreConfig {
    fn default() -> Self {
        StagedRestoreConfig {
            ramp: RampConfig::default(),
            next_site_at_fraction: 1.0,
        }
    }
}

impl StagedRestoreConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.ramp.validate()?;
        let f = self.next_site_at_fraction;
        if !(f > 0.0 && f <= 1.0) {
            return Err(super::FieldError::new(
                FAMILY,
                "next_site_at_fraction",
                "in (0, 1]",
                f.to_string(),
            ));
        }
        Ok(())
    }
}

/// Sites restored in order, each with its own [`Ramp`] and error guard.
///
/// Site `i + 1` starts at the instant site `i` first entered the step whose
/// fraction is at least `next_site_at_fraction` (an exact, catch-up time, not
/// the time of the call that noticed it), so the schedule is the same however
/// often the coordinator is called. Sites not yet started admit nothing: during
/// a restore, traffic not admitted is shed. Per call, only the frontier site and
/// the queried site are advanced, so a decision is O(1) in the number of sites
/// (plus one pass per site start) and never allocates.
///
/// Defaults: those of [`RampConfig`], one site at a time.
///
/// ```
/// use stormbreak_policy::ramp::{StagedRestore, StagedRestoreConfig};
/// use stormbreak_policy::Nanos;
///
/// let mut restore = StagedRestore::new(&StagedRestoreConfig::default(), 2).unwrap();
/// restore.start(Nanos::ZERO);
/// assert_eq!(restore.fraction(19 * Nanos::MINUTE, 1), 0.0); // site 0 not at 1.0 yet
/// assert_eq!(restore.fraction(20 * Nanos::MINUTE, 1), 0.05); // site 0 full at 20 min
/// assert_eq!(restore.fraction(40 * Nanos::MINUTE, 1), 1.0);
/// assert!(restore.is_complete());
/// ```
#[derive(Clone, Debug)]
pub struct StagedRestore {
    sites: Box<[Ramp]>,
    /// Highest started site.
    frontier: usize,
    /// Step index whose entry starts the next site.
    trigger_step: usize,
    /// Every site was complete at once at some instant: the restore is
    /// over, every site admits all and outcomes are ignored from then on.
    done: bool,
}

impl StagedRestore {
    /// `sites` idle ramps (1 ..= 10 000); the whole table is allocated here.
    pub fn new(config: &StagedRestoreConfig, sites: usize) -> Result<Self, FieldError> {
        config.validate()?;
        if !(1..=MAX_SITES).contains(&sites) {
            return Err(super::FieldError::new(
                FAMILY,
                "sites",
                "between 1 and 10000",
                sites.to_string(),
            ));
        }
        let ramp = Ramp::new(&config.ramp)?;
        let trigger_step = config
            .ramp
            .steps
            .iter()
            .position(|&f| f >= config.next_site_at_fraction)
            .unwrap_or(config.ramp.steps.len() - 1);
        Ok(StagedRestore {
            sites: vec![ramp; sites].into_boxed_slice(),
            frontier: 0,
            trigger_step,
            done: false,
        })
    }

    /// Starts (or restarts) the restore with site 0 at `now`; other sites go idle.
    pub fn start(&mut self, now: Nanos) {
        for (i, site) in self.sites.iter_mut().enumerate() {
            if i == 0 {
                site.start(now);
            } else {
                site.stop();
            }
        }
        self.frontier = 0;
        self.done = false;
    }

    /// An operator's manual step ([`Ramp::step_up`]) of the latest started
    /// site; when that reaches `next_site_at_fraction` the next site starts
    /// now. Nothing happens before [`start`](Self::start).
    pub fn step(&mut self, now: Nanos) {
        self.advance(now);
        if self.done {
            return;
        }
        self.sites[self.frontier].step_up(now);
        self.advance(now);
    }

    /// Admits one request to `site` with its current fraction. An out-of-range
    /// site admits nothing.
    pub fn admit<R: Rng + ?Sized>(&mut self, now: Nanos, site: usize, rng: &mut R) -> bool {
        let f = self.fraction(now, site);
        admit_with(f, rng)
    }

    /// `site`'s admitted fraction now (0 if not started or out of range).
    pub fn fraction(&mut self, now: Nanos, site: usize) -> f64 {
        self.advance(now);
        match self.sites.get_mut(site) {
            Some(_) if self.done => 1.0,
            Some(ramp) => ramp.fraction(now),
            None => 0.0,
        }
    }

    /// Reports one outcome at `site` to its guard.
    pub fn observe(&mut self, now: Nanos, site: usize, ok: bool) {
        self.observe_counts(now, site, u64::from(ok), u64::from(!ok));
    }

    /// Reports a batch of outcomes at `site` to its guard.
    pub fn observe_counts(&mut self, now: Nanos, site: usize, ok: u64, errors: u64) {
        self.advance(now);
        if self.done {
            return;
        }
        if let Some(ramp) = self.sites.get_mut(site) {
            ramp.observe_counts(now, ok, errors);
        }
        self.advance(now);
    }

    /// Brings every started site up to `now`, and starts every site whose
    /// predecessor has reached the trigger step by then. The instants at
    /// which the restore could change on its own ([`poll_timeout`]) are
    /// taken one by one first, and the restore ends (see
    /// [`is_complete`](Self::is_complete)) at the first of them, or `now`,
    /// at which every site is complete: a caller that brings it up to date
    /// only when requests come sees what one woken at every `poll_timeout`
    /// sees.
    ///
    /// [`poll_timeout`]: Self::poll_timeout
    pub fn advance(&mut self, now: Nanos) {
        if self.done {
            return;
        }
        // Due instants strictly increase (see `Ramp::advance`).
        for _ in 0..super::MAX_CATCH_UP {
            match self.poll_timeout() {
                Some(due) if due < now => {
                    self.advance_sites(due);
                    if self.all_complete() {
                        self.done = true;
                        return;
                    }
                }
                _ => break,
            }
        }
        self.advance_sites(now);
        self.done = self.all_complete();
    }

    fn advance_sites(&mut self, now: Nanos) {
        for site in &mut self.sites[..self.frontier] {
            site.advance(now);
        }
        loop {
            let last = self.frontier + 1 == self.sites.len();
            let current = &mut self.sites[self.frontier];
            current.advance(now);
            if last {
                break;
            }
            match current.entered_step_at(self.trigger_step) {
                Some(at) => {
                    self.frontier += 1;
                    self.sites[self.frontier].start(at);
                }
                None => break,
            }
        }
    }

    /// The earliest instant at which [`advance`](Self::advance) could change
    /// the restore without new outcomes (the soonest of the started sites'
    /// [`Ramp::poll_timeout`]), or `None` when nothing will change on its own.
    ///
    /// ```
    /// use stormbreak_policy::ramp::{StagedRestore, StagedRestoreConfig};
    /// use stormbreak_policy::Nanos;
    /// let mut restore = StagedRestore::new(&StagedRestoreConfig::default(), 2).unwrap();
    /// assert_eq!(restore.poll_timeout(), None);
    /// restore.start(Nanos::ZERO);
    /// assert_eq!(restore.poll_timeout(), Some(5 * Nanos::MINUTE));
    /// ```
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.done {
            return None;
        }
        self.sites
            .iter()
            .take(self.frontier + 1)
            .filter_map(Ramp::poll_timeout)
            .min()
    }

    /// One site's ramp, for metrics.
    pub fn site(&self, site: usize) -> Option<&Ramp> {
        self.sites.get(site)
    }

    /// Number of sites.
    pub fn site_count(&self) -> usize {
        self.sites.len()
    }

    /// Number of sites whose ramp has started.
    pub fn started_sites(&self) -> usize {
        self.sites.iter().take_while(|s| s.is_started()).count()
    }

    /// Whether the restore is over: at some instant it was brought up to,
    /// every site was at its last step with its guard clear. It stays over
    /// until the next [`start`](Self::start): every site then admits all,
    /// and later errors no longer step a site back (the restore ended;
    /// new trouble is for the operator, or a new restore).
    pub fn is_complete(&self) -> bool {
        self.done
    }

    fn all_complete(&self) -> bool {
        self.sites
            .iter()
            .all(|s| s.phase() == super::RampPhase::Complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;

    /// Two sites, 1 s holds, a 1 s guard window that steps back after 2 s.
    fn quick() -> StagedRestore {
        let config: StagedRestoreConfig = serde_json::from_str(
            r#"{"ramp": {"steps": [0.5, 1.0], "hold": "1s", "step_back_after": "2s",
                "guard": {"window": "1s", "buckets": 4, "error_rate_threshold": 0.2, "min_requests": 2}}}"#,
        )
        .unwrap();
        StagedRestore::new(&config, 2).unwrap()
    }

    #[test]
    fn a_lazy_caller_gets_the_schedule_of_one_woken_at_every_poll_timeout() {
        // Site 0 errs at 0.3 s and 0.4 s, then nothing is heard until 9 s.
        // Eager: advanced at every poll_timeout; lazy: only at the outcomes
        // and at the end. The breach clears when the errors leave the
        // window, the holds run from then, and both end at the same state.
        let outcomes = [(300, false), (400, false), (9_000, true)];
        let mut eager = quick();
        let mut lazy = quick();
        eager.start(Nanos::ZERO);
        lazy.start(Nanos::ZERO);
        for (ms, ok) in outcomes {
            let at = Nanos::from_millis(ms);
            while let Some(due) = eager.poll_timeout().filter(|&d| d < at) {
                eager.advance(due);
            }
            eager.observe(at, 0, ok);
            lazy.observe(at, 0, ok);
        }
        let end = Nanos::from_secs(10);
        assert_eq!(eager.fraction(end, 1), lazy.fraction(end, 1));
        for site in 0..2 {
            let (e, l) = (eager.site(site).unwrap(), lazy.site(site).unwrap());
            assert_eq!(
                (e.entered_step_at(1), e.steps_back()),
                (l.entered_step_at(1), l.steps_back()),
                "site {site}"
            );
        }
        // The breach cleared at 1.25 s (the 0.3–0.4 s slice left the
        // window): site 0 full at 2.25 s, not at the next outcome (9 s).
        assert_eq!(
            lazy.site(0).unwrap().entered_step_at(1),
            Some(Nanos::from_millis(2_250))
        );
        assert!(lazy.is_complete());
    }

    #[test]
    fn a_completed_restore_stays_over_until_restarted() {
        let mut r = quick();
        r.start(Nanos::ZERO);
        assert!(!r.is_complete());
        assert_eq!(r.fraction(Nanos::from_secs(4), 1), 1.0);
        assert!(r.is_complete());
        assert_eq!(r.poll_timeout(), None);
        // Errors after the end no longer step a site back.
        for ms in 4_000..4_100 {
            r.observe(Nanos::from_millis(ms), 0, false);
        }
        assert_eq!(r.fraction(Nanos::from_secs(10), 0), 1.0);
        r.start(Nanos::from_secs(11));
        assert!(!r.is_complete());
        assert_eq!(r.fraction(Nanos::from_secs(11), 0), 0.5);
    }

    #[test]
    fn sites_restore_one_after_another_on_the_hand_computed_schedule() {
        // Default ramp: 20 min per site (4 holds of 5 min). Three sites from t = 1 min:
        // site 0 full at 21, site 1 starts 21 and is full at 41, site 2 full at 61.
        let mut r = StagedRestore::new(&StagedRestoreConfig::default(), 3).unwrap();
        r.start(Nanos::MINUTE);
        assert_eq!(r.started_sites(), 1);
        assert_eq!(r.fraction(21 * Nanos::MINUTE - Nanos::NANOSECOND, 1), 0.0);
        assert_eq!(r.fraction(21 * Nanos::MINUTE, 1), 0.05);
        assert_eq!(r.fraction(21 * Nanos::MINUTE, 2), 0.0);
        // One late call catches every site up on exact times.
        assert_eq!(r.fraction(90 * Nanos::MINUTE, 2), 1.0);
        let start = |i: usize| r.site(i).unwrap().entered_step_at(0);
        assert_eq!(
            [start(0), start(1), start(2)],
            [
                Some(Nanos::MINUTE),
                Some(21 * Nanos::MINUTE),
                Some(41 * Nanos::MINUTE)
            ]
        );
        assert_eq!(
            r.site(2).unwrap().entered_step_at(4),
            Some(61 * Nanos::MINUTE)
        );
        assert!(r.is_complete());
    }

    #[test]
    fn a_manual_step_moves_the_latest_site_on_now_and_starts_the_next_at_the_trigger() {
        // Stepping through the default ramp's steps by hand brings site 0
        // to 1.0 and starts site 1.
        let config = StagedRestoreConfig::default();
        let steps = config.ramp.steps.clone();
        let mut r = StagedRestore::new(&config, 2).unwrap();
        r.step(Nanos::ZERO);
        assert_eq!(r.fraction(Nanos::ZERO, 0), 0.0, "not started: no-op");
        r.start(Nanos::ZERO);
        let t = Nanos::SECOND;
        r.step(t);
        assert_eq!(r.fraction(t, 0), steps[1]);
        assert_eq!(r.site(0).unwrap().entered_step_at(1), Some(t));
        // The hold of the new step starts at the manual step.
        let hold = config.ramp.hold;
        assert_eq!(r.fraction(t + hold - Nanos::NANOSECOND, 0), steps[1]);
        assert_eq!(r.fraction(t + hold, 0), steps[2]);
        for _ in 3..steps.len() {
            r.step(t + hold);
        }
        assert_eq!(r.fraction(t + hold, 0), 1.0);
        assert_eq!(r.started_sites(), 2);
        assert_eq!(r.fraction(t + hold, 1), steps[0]);
        // Stepping the last step of the last site is a no-op.
        for _ in 0..steps.len() + 1 {
            r.step(t + hold);
        }
        assert!(r.is_complete());
    }

    #[test]
    fn next_site_can_start_at_a_partial_fraction() {
        // Trigger 0.25 = step 2, entered 10 min after a site starts.
        let config = StagedRestoreConfig {
            next_site_at_fraction: 0.25,
            ..StagedRestoreConfig::default()
        };
        let mut r = StagedRestore::new(&config, 3).unwrap();
        r.start(Nanos::ZERO);
        assert_eq!(r.fraction(10 * Nanos::MINUTE, 1), 0.05);
        assert_eq!(r.fraction(20 * Nanos::MINUTE, 2), 0.05);
        assert_eq!(r.fraction(20 * Nanos::MINUTE, 0), 1.0);
    }

    #[test]
    fn a_breach_at_one_site_delays_the_next_site() {
        let config = StagedRestoreConfig {
            ramp: RampConfig {
                step_back_after: Nanos::ZERO,
                ..RampConfig::default()
            },
            ..StagedRestoreConfig::default()
        };
        let mut r = StagedRestore::new(&config, 2).unwrap();
        r.start(Nanos::ZERO);
        // Site 0 at 0.5 from 15 min; 20% errors every 10 s from 16:00 to 24:50.
        let mut t = 16 * Nanos::MINUTE;
        while t < 25 * Nanos::MINUTE {
            r.observe_counts(t, 0, 80, 20);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.fraction(25 * Nanos::MINUTE, 0), 0.5);
        assert_eq!(r.fraction(25 * Nanos::MINUTE, 1), 0.0);
        // Last bad slot 149 (1490 s) leaves the window at slot 155 = 1550 s:
        // site 0 clears at 1550 s, full at 1850 s, and only then site 1 starts.
        assert_eq!(r.fraction(1550 * Nanos::SECOND, 0), 0.5);
        assert_eq!(r.fraction(1850 * Nanos::SECOND - Nanos::NANOSECOND, 1), 0.0);
        assert_eq!(r.fraction(1850 * Nanos::SECOND, 1), 0.05);
    }

    #[test]
    fn errors_at_one_site_do_not_hold_another() {
        let config = StagedRestoreConfig {
            next_site_at_fraction: 0.05,
            ..StagedRestoreConfig::default()
        };
        let mut r = StagedRestore::new(&config, 2).unwrap();
        r.start(Nanos::ZERO);
        let mut t = Nanos::ZERO;
        while t < 5 * Nanos::MINUTE {
            r.observe_counts(t, 0, 0, 100);
            t += 10 * Nanos::SECOND;
        }
        assert_eq!(r.fraction(5 * Nanos::MINUTE, 1), 0.1);
        assert_eq!(r.fraction(5 * Nanos::MINUTE, 0), 0.05);
    }

    #[test]
    fn out_of_range_sites_and_bad_counts_are_rejected_gracefully() {
        let mut r = StagedRestore::new(&StagedRestoreConfig::default(), 1).unwrap();
        r.start(Nanos::ZERO);
        assert_eq!(r.fraction(Nanos::ZERO, 5), 0.0);
        r.observe(Nanos::ZERO, 5, false);
        assert_eq!(
            StagedRestore::new(&StagedRestoreConfig::default(), 0)
                .unwrap_err()
                .field(),
            "sites"
        );
        let bad = StagedRestoreConfig {
            next_site_at_fraction: 0.0,
            ..StagedRestoreConfig::default()
        };
        assert_eq!(
            StagedRestore::new(&bad, 2).unwrap_err().to_string(),
            "ramp: next_site_at_fraction must be in (0, 1], got 0"
        );
    }

    #[test]
    fn restart_idles_later_sites() {
        let mut r = StagedRestore::new(&StagedRestoreConfig::default(), 2).unwrap();
        r.start(Nanos::ZERO);
        assert_eq!(r.fraction(25 * Nanos::MINUTE, 1), 0.1);
        r.start(30 * Nanos::MINUTE);
        assert_eq!(r.fraction(30 * Nanos::MINUTE, 1), 0.0);
        assert_eq!(r.fraction(30 * Nanos::MINUTE, 0), 0.05);
    }
}

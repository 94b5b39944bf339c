//! Capacity-aware failover: the policy crate's `Failover` fed, on its own
//! period, with rates measured at two LB pools, setting the spill share of
//! the listed client populations.

use stormbreak_policy::Nanos;
use stormbreak_policy::failover::{Failover, RegionRates};

use super::ids::{LbId, PopId};
use super::{Engine, Ev};

/// Whole-run counters at the last plan, so each plan sees one period's rates.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    primary_arrivals: u64,
    secondary_arrivals: u64,
    secondary_refused: u64,
    primary_refused: u64,
    spilled: u64,
    started: u64,
    at: Nanos,
}

#[derive(Debug)]
pub(crate) struct FailoverCtl {
    pops: Vec<PopId>,
    primary: LbId,
    secondary: LbId,
    policy: Failover,
    period: Nanos,
    seen: Seen,
}

impl FailoverCtl {
    /// Its first plan is due one period into the run.
    pub(crate) fn first_plan(&self) -> Nanos {
        self.period
    }

    pub(crate) fn new(
        pops: Vec<PopId>,
        primary: LbId,
        secondary: LbId,
        policy: Failover,
        period: Nanos,
    ) -> Self {
        FailoverCtl {
            pops,
            primary,
            secondary,
            policy,
            period,
            seen: Seen::default(),
        }
    }
}

impl Engine {
    /// Re-plans one failover from the last period's measurements. An LB's
    /// capacity is estimated by Little's law from its flows: admitted rate ×
    /// flow limit / flows in use (at saturation, simply what it admits).
    pub(crate) fn on_failover(&mut self, i: usize) {
        let now = self.now;
        let f = &self.failovers[i];
        let secs = (now - f.seen.at).as_nanos() as f64 / 1e9;
        let (p, s) = (&self.lbs[f.primary], &self.lbs[f.secondary]);
        let spilled_total: u64 = f
            .pops
            .iter()
            .map(|&p| self.pops[p.ix()].spill_totals().0)
            .sum();
        let started_total: u64 = f
            .pops
            .iter()
            .map(|&p| self.pops[p.ix()].spill_totals().1)
            .sum();
        let now_seen = Seen {
            primary_arrivals: p.totals().0,
            primary_refused: p.totals().1,
            secondary_arrivals: s.totals().0,
            secondary_refused: s.totals().1,
            spilled: spilled_total,
            started: started_total,
            at: now,
        };
        let old = f.seen;
        let rate = |a: u64, b: u64| (a - b) as f64 / secs;
        let capacity = |lb: &super::lb::Lb, admitted: f64| {
            let in_use = lb.flows_in_use();
            let limit = lb.capacity() as f64;
            if in_use == 0 {
                f64::INFINITY
            } else {
                admitted * limit / in_use as f64
            }
        };
        let p_arrivals = rate(now_seen.primary_arrivals, old.primary_arrivals);
        let p_admitted = p_arrivals - rate(now_seen.primary_refused, old.primary_refused);
        let s_admitted = rate(now_seen.secondary_arrivals, old.secondary_arrivals)
            - rate(now_seen.secondary_refused, old.secondary_refused);
        let spilled = rate(now_seen.spilled, old.spilled);
        let started = rate(now_seen.started, old.started);
        let rates = RegionRates {
            primary_demand: p_arrivals + spilled,
            primary_capacity: capacity(p, p_admitted),
            secondary_capacity: capacity(s, s_admitted),
            secondary_base_load: (s_admitted - spilled).max(0.0),
        };
        let f = &mut self.failovers[i];
        f.seen = now_seen;
        let fraction_of_primary = f.policy.observe(now, rates);
        let spill_rate = fraction_of_primary * rates.primary_demand;
        let share = if started > 0.0 {
            (spill_rate / started).clamp(0.0, 1.0)
        } else {
            0.0
        };
        for &p in &f.pops {
            self.pops[p.ix()].set_spill(share);
        }
        let next = now.saturating_add(f.period);
        if next <= self.end {
            self.queue
                .schedule(next, Ev::FailoverPlan { idx: i as u16 });
        }
    }
}

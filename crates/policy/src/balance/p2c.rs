//! Power-of-two-choices least-request balancing.

use super::FAMILY;
use crate::FieldError;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Parameters of [`LeastRequest`].
///
/// Defaults are Envoy's `LeastRequestLbConfig`: `choice_count` 2.
///
/// ```
/// use stormbreak_policy::balance::BalanceConfig;
/// let c: BalanceConfig = toml::from_str("choice_count = 3").unwrap();
/// assert_eq!(c.choice_count, 3);
/// assert!(toml::from_str::<BalanceConfig>("choices = 3").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BalanceConfig {
    /// Endpoints drawn per pick, in `2..=16`; the least loaded of them wins.
    pub choice_count: u32,
}

impl Default for BalanceConfig {
    fn default() -> Self {
        BalanceConfig { choice_count: 2 }
    }
}

impl BalanceConfig {
    /// Largest accepted `choice_count`: beyond it the draw is close to a
    /// full scan and herds onto one endpoint, which P2C exists to avoid.
    pub const MAX_CHOICES: u32 = 16;

    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(2..=Self::MAX_CHOICES).contains(&self.choice_count) {
            return Err(FieldError::new(
                FAMILY,
                "choice_count",
                "between 2 and 16",
                self.choice_count,
            ));
        }
        Ok(())
    }
}

/// Least-request balancing by the power of `choice_count` choices.
///
/// Envoy's law: draw `choice_count` eligible endpoints uniformly at random
/// (with replacement, as Envoy does) and send to the one with the fewest
/// requests in flight; ties go to the first drawn. With one eligible
/// endpoint it is chosen; with none, `None`. Drawing only a few instead of
/// scanning for the global minimum keeps many balancers with stale load
/// views from all herding onto the same idle endpoint (Mitzenmacher, "The
/// Power of Two Choices in Randomized Load Balancing", 2001).
///
/// A pick costs one pass over the endpoints to count the eligible ones plus
/// one pass per draw to find it: O(`choice_count` × n), no allocation. The
/// caller bounds n (the guard allows 1 024 endpoints per cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeastRequest {
    choice_count: u32,
}

impl LeastRequest {
    /// Validates `config`.
    pub fn new(config: &BalanceConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(LeastRequest {
            choice_count: config.choice_count,
        })
    }

    /// Endpoints drawn per pick.
    pub fn choice_count(&self) -> u32 {
        self.choice_count
    }

    /// Picks one of endpoints `0..len`. `load(i)` is endpoint `i`'s requests
    /// in flight, or `None` when it may not be picked (unhealthy, ejected).
    #[must_use]
    pub fn choose<R: Rng + ?Sized>(
        &self,
        len: usize,
        load: impl Fn(usize) -> Option<u32>,
        rng: &mut R,
    ) -> Option<usize> {
        let eligible = (0..len).filter(|&i| load(i).is_some()).count();
        match eligible {
            0 => return None,
            1 => return (0..len).find(|&i| load(i).is_some()),
            _ => {}
        }
        let mut best: Option<(usize, u32)> = None;
        for _ in 0..self.choice_count {
            let rank = rng.random_range(0..eligible);
            let (index, inflight) = (0..len)
                .filter_map(|i| load(i).map(|l| (i, l)))
                .nth(rank)
                .expect("rank < eligible count");
            if best.is_none_or(|(_, b)| inflight < b) {
                best = Some((index, inflight));
            }
        }
        best.map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn choice_count_out_of_range_is_named() {
        for bad in [0, 1, 17] {
            let e = LeastRequest::new(&BalanceConfig { choice_count: bad }).unwrap_err();
            assert_eq!(e.field(), "choice_count");
            assert_eq!(e.family(), "balance");
        }
    }

    #[test]
    fn no_eligible_endpoint_is_none_and_one_is_always_chosen() {
        let p = LeastRequest::new(&BalanceConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(p.choose(0, |_| Some(0), &mut rng), None);
        assert_eq!(p.choose(4, |_| None, &mut rng), None);
        for _ in 0..50 {
            let only_two = |i: usize| (i == 2).then_some(100);
            assert_eq!(p.choose(4, only_two, &mut rng), Some(2));
        }
    }

    #[test]
    fn ineligible_endpoints_are_never_chosen() {
        let p = LeastRequest::new(&BalanceConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        // Endpoint 0 is idle but ejected: the busier eligible ones get it all.
        let load = |i: usize| if i == 0 { None } else { Some(i as u32 * 10) };
        for _ in 0..500 {
            assert_ne!(p.choose(5, load, &mut rng), Some(0));
        }
    }

    #[test]
    fn the_most_loaded_endpoint_never_wins_a_two_way_draw_of_distinct_loads() {
        // With two choices, the busiest of n endpoints only wins when both
        // draws land on it: probability 1/n², against 1/n for a uniform pick.
        let p = LeastRequest::new(&BalanceConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let loads = [1, 2, 3, 4];
        let mut wins = [0u32; 4];
        let n = 16_000;
        for _ in 0..n {
            wins[p.choose(4, |i| Some(loads[i]), &mut rng).unwrap()] += 1;
        }
        // Expected shares: P(min of two draws = i) = ((4-i)² - (3-i)²)/16 → 7/16, 5/16, 3/16, 1/16.
        let expected = [7.0, 5.0, 3.0, 1.0].map(|x: f64| x / 16.0 * n as f64);
        for i in 0..4 {
            let got = f64::from(wins[i]);
            assert!(
                (got - expected[i]).abs() < 0.1 * expected[i] + 60.0,
                "endpoint {i}: {got} vs {}",
                expected[i]
            );
        }
    }

    #[test]
    fn balances_a_skewed_start_toward_equal_load() {
        // Sequential picks that each add one in-flight request: P2C fills the
        // idle endpoints first, so the spread stays within a few requests.
        let p = LeastRequest::new(&BalanceConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        let mut loads = [50u32, 0, 0, 0, 0, 0, 0, 0];
        for _ in 0..400 {
            let i = p.choose(loads.len(), |i| Some(loads[i]), &mut rng).unwrap();
            loads[i] += 1;
        }
        let others = &loads[1..];
        let (lo, hi) = (others.iter().min().unwrap(), others.iter().max().unwrap());
        assert!(hi - lo <= 8, "{loads:?}");
        assert!(
            loads[0] < 70,
            "the busy endpoint is mostly avoided: {loads:?}"
        );
    }

    #[test]
    fn same_seed_same_picks() {
        let p = LeastRequest::new(&BalanceConfig { choice_count: 3 }).unwrap();
        let run = |seed| {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            (0..64)
                .map(|k| p.choose(7, |i| Some(((i * 7 + k) % 5) as u32), &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
    }
}

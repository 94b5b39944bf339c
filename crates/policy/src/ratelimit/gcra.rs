//! The Generic Cell Rate Algorithm for one key.

use super::{FAMILY, NotUntil};
use crate::{FieldError, Nanos};

/// GCRA in its virtual-scheduling form (ITU-T I.371, as in governor and redis-cell).
///
/// State per key is one number, the theoretical arrival time `TAT`. With
/// emission interval `T = 1/rate` and tolerance `τ = (burst − 1)·T`, a request
/// at `now` conforms iff `now ≥ TAT − τ`; then `TAT ← max(TAT, now) + T`.
/// A key never seen has `TAT = now`, so after an idle period exactly `burst`
/// requests pass at once and then one every `T`. A non-conforming request
/// changes nothing and may retry after exactly `TAT − τ − now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    emission_interval: Nanos,
    tolerance: Nanos,
}

impl Gcra {
    /// From the emission interval `T` (≥ 1 ns) and burst (≥ 1); an error
    /// names the field out of range, including a burst whose `(burst − 1)·T`
    /// does not fit in 584 years.
    pub fn new(emission_interval: Nanos, burst: u32) -> Result<Self, FieldError> {
        if emission_interval.is_zero() {
            return Err(FieldError::new(FAMILY, "emission_interval", "≥ 1ns", "0"));
        }
        let Some(extra) = burst.checked_sub(1) else {
            return Err(FieldError::new(FAMILY, "burst", "≥ 1", "0"));
        };
        let Some(tolerance) = emission_interval.checked_mul(u64::from(extra)) else {
            return Err(FieldError::new(
                FAMILY,
                "burst",
                "small enough that burst × the emission interval fits in 584 years",
                format!("{burst} at an emission interval of {emission_interval}"),
            ));
        };
        Ok(Gcra {
            emission_interval,
            tolerance,
        })
    }

    /// `T`: the time one conforming request costs.
    pub fn emission_interval(&self) -> Nanos {
        self.emission_interval
    }

    /// `τ = (burst − 1)·T`: how far ahead of `now` the TAT may run.
    pub fn tolerance(&self) -> Nanos {
        self.tolerance
    }

    /// Checks a request at `now` against `tat`; on success returns the new TAT.
    #[inline]
    pub fn check(&self, tat: Nanos, now: Nanos) -> Result<Nanos, NotUntil> {
        let allowed_from = tat.saturating_sub(self.tolerance);
        if now < allowed_from {
            Err(NotUntil {
                retry_after: allowed_from - now,
            })
        } else {
            Ok(tat.max(now).saturating_add(self.emission_interval))
        }
    }

    /// The TAT of a key seen for the first time at `now` (always conforms).
    #[inline]
    pub fn fresh(&self, now: Nanos) -> Nanos {
        now.saturating_add(self.emission_interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;

    #[test]
    fn new_refuses_zero_interval_zero_burst_and_overflow() {
        assert_eq!(
            Gcra::new(Nanos::ZERO, 5).unwrap_err().field(),
            "emission_interval"
        );
        assert_eq!(
            Gcra::new(Nanos::from_millis(1), 0).unwrap_err().field(),
            "burst"
        );
        let e = Gcra::new(Nanos::MAX / 2, 4).unwrap_err();
        assert!(e.to_string().contains("fits in 584 years"), "{e}");
        let g = Gcra::new(Nanos::from_millis(100), 5).unwrap();
        assert_eq!(g.tolerance(), Nanos::from_millis(400)); // (5 − 1)·100 ms
    }

    #[test]
    fn burst_then_one_per_interval_with_exact_retry_after() {
        // rate 10/s → T = 100 ms; burst 3 → τ = 200 ms.
        let g = Gcra::new(Nanos::from_millis(100), 3).unwrap();
        let now = Nanos::from_millis(1_000);
        let tat = g.fresh(now); // 1100
        let tat = g.check(tat, now).unwrap(); // 1100 − 200 = 900 ≤ 1000: ok, TAT 1200
        let tat = g.check(tat, now).unwrap(); // 1200 − 200 = 1000 ≤ 1000: ok, TAT 1300
        // 1300 − 200 = 1100 > 1000: the 4th waits exactly 100 ms.
        assert_eq!(
            g.check(tat, now),
            Err(NotUntil {
                retry_after: Nanos::from_millis(100)
            })
        );
        assert_eq!(
            g.check(tat, Nanos::from_millis(1_100) - Nanos::NANOSECOND),
            Err(NotUntil {
                retry_after: Nanos::NANOSECOND
            })
        );
        let tat = g.check(tat, Nanos::from_millis(1_100)).unwrap(); // TAT 1400
        assert_eq!(
            g.check(tat, Nanos::from_millis(1_100)),
            Err(NotUntil {
                retry_after: Nanos::from_millis(100)
            })
        );
    }

    proptest! {
        /// retry_after is exact: one nanosecond earlier is still refused, at
        /// `now + retry_after` the request conforms.
        #[test]
        fn retry_after_is_exact(
            t in 1u64..1_000_000_000,
            burst in 1u32..50,
            tat in 0u64..1_000_000_000_000,
            now in 0u64..1_000_000_000_000,
        ) {
            let (t, tat, now) = (Nanos::from_nanos(t), Nanos::from_nanos(tat), Nanos::from_nanos(now));
            let g = Gcra::new(t, burst).unwrap();
            match g.check(tat, now) {
                Ok(new_tat) => prop_assert_eq!(new_tat, tat.max(now) + t),
                Err(NotUntil { retry_after }) => {
                    prop_assert!(retry_after > Nanos::ZERO);
                    prop_assert!(g.check(tat, now + retry_after - Nanos::NANOSECOND).is_err());
                    prop_assert!(g.check(tat, now + retry_after).is_ok());
                }
            }
        }
    }
}

//! A gateway's concurrency limits: the policy crate's [`Limiter`], one per
//! gateway instance, fed as `stormbreak guard` feeds a route's `limit`.
//!
//! Public so the workspace's trace-equivalence test
//! (`crates/equivalence/tests/limit.rs`) can drive this glue, not a copy
//! of it, beside the guard's.
//!
//! The glue's choices, each the guard's:
//! * a request is admitted while its instance's in-flight count is below
//!   the limit, and refused at once otherwise (the guard's route limit
//!   without an admission queue);
//! * the slot is held for the whole request, retries included, and the
//!   sample's round-trip time runs from admission to the final answer;
//! * an answer that is not a server error (a success, a 403 or 429 shed)
//!   is a [`Outcome::Success`] sample; every server error, timeout or
//!   refusal is [`Outcome::Dropped`];
//! * a request whose caller stopped waiting frees its slot with
//!   [`Outcome::Ignore`] (no sample), as the guard does when its client
//!   goes away. The simulator frees it when the abandoned work ends, the
//!   guard at once: the simulator does not propagate cancellation.
//!
//! Requests go to the instances in turn (round robin), as a load balancer
//! in front of gateway pods spreads them; a full instance refuses even if
//! another has room.

use rand_pcg::Pcg64Mcg;
use stormbreak_policy::limit::{AnyLimit, LimitConfig, Limiter, Outcome, Permit};
use stormbreak_policy::{FieldError, Nanos};

use super::attempt::Res;

/// An admitted request's claim on one instance's limiter; hand it back to
/// [`Admission::finish`] exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a slot that is never finished is never freed"]
pub struct Slot {
    /// The instance that admitted the request.
    pub instance: u32,
    /// In-flight count of that instance at admission, this request
    /// included (the sample's `inflight`).
    pub inflight: u32,
}

/// The concurrency limits of one gateway.
#[derive(Debug, Clone)]
pub struct Admission {
    limiters: Vec<Limiter<AnyLimit>>,
    next: usize,
    rng: Pcg64Mcg,
}

impl Admission {
    /// `instances` limiters built from `config`, their algorithms' random
    /// draws (if any) from `rng`.
    ///
    /// # Errors
    /// The policy crate's error for a config it cannot build.
    pub fn new(config: &LimitConfig, instances: u32, rng: Pcg64Mcg) -> Result<Self, FieldError> {
        let limiters = (0..instances.max(1))
            .map(|_| config.build().map(Limiter::new))
            .collect::<Result<_, _>>()?;
        Ok(Admission {
            limiters,
            next: 0,
            rng,
        })
    }

    /// Admits a request arriving at `now` on the next instance in turn, or
    /// refuses it (`None`) when that instance is at its limit.
    pub fn admit(&mut self, now: Nanos) -> Option<Slot> {
        let i = self.next;
        self.next = (i + 1) % self.limiters.len();
        let permit = self.limiters[i].try_acquire(now)?;
        Some(Slot {
            instance: i as u32,
            inflight: permit.inflight,
        })
    }

    /// The request admitted at `start` with `slot` ended at `now` with
    /// `outcome`: frees the slot and feeds the sample to the algorithm.
    pub fn finish(&mut self, now: Nanos, start: Nanos, slot: Slot, outcome: Outcome) {
        let permit = Permit {
            start,
            inflight: slot.inflight,
        };
        self.limiters[slot.instance as usize].release(now, permit, outcome, &mut self.rng);
    }

    /// How the guard's limiter counts an answer (see the module docs):
    /// `abandoned` when the caller stopped waiting first.
    pub fn outcome(res: Res, abandoned: bool) -> Outcome {
        if abandoned {
            Outcome::Ignore
        } else if res.is_server_error() {
            Outcome::Dropped
        } else {
            Outcome::Success
        }
    }

    /// Requests in flight, over every instance.
    pub fn inflight(&self) -> u32 {
        self.limiters.iter().map(Limiter::inflight).sum()
    }

    /// The current limits, summed over every instance.
    pub fn limit(&self) -> u64 {
        self.limiters.iter().map(|l| u64::from(l.limit())).sum()
    }

    /// In flight on one instance.
    pub fn inflight_of(&self, instance: u32) -> u32 {
        self.limiters[instance as usize].inflight()
    }

    /// Instances (one limiter each).
    pub fn instances(&self) -> u32 {
        self.limiters.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Cause;
    use rand::SeedableRng;
    use stormbreak_policy::limit::FixedConfig;

    fn fixed(limit: u32, instances: u32) -> Admission {
        Admission::new(
            &LimitConfig::Fixed(FixedConfig { limit }),
            instances,
            Pcg64Mcg::seed_from_u64(1),
        )
        .unwrap()
    }

    #[test]
    fn instances_take_turns_and_a_full_one_refuses() {
        let mut a = fixed(1, 2);
        let t = Nanos::ZERO;
        let first = a.admit(t).unwrap();
        let second = a.admit(t).unwrap();
        assert_eq!((first.instance, second.instance), (0, 1));
        assert_eq!(a.admit(t), None, "instance 0 is full");
        assert_eq!(a.admit(t), None, "instance 1 is full");
        a.finish(Nanos::from_millis(1), t, first, Outcome::Success);
        assert_eq!(a.inflight(), 1);
        assert_eq!(
            a.admit(t),
            Some(Slot {
                instance: 0,
                inflight: 1
            })
        );
        assert_eq!(a.limit(), 2);
    }

    #[test]
    fn answers_count_as_the_guard_counts_them() {
        assert_eq!(Admission::outcome(Res::Ok, false), Outcome::Success);
        assert_eq!(
            Admission::outcome(Res::fail(Cause::Shed403), false),
            Outcome::Success,
            "a 403 is not a server error"
        );
        for c in [
            Cause::Timeout,
            Cause::LimitRejected,
            Cause::Shed503,
            Cause::DependencyFailed,
        ] {
            assert_eq!(
                Admission::outcome(Res::fail(c), false),
                Outcome::Dropped,
                "{c:?}"
            );
        }
        assert_eq!(Admission::outcome(Res::Ok, true), Outcome::Ignore);
    }
}

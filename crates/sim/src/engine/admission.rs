//! A gateway's concurrency limits: the policy crate's [`Limiter`], one per
//! gateway instance, fed as `stormbreak guard` feeds a route's `limit`.
//!
//! Public so the workspace's trace-equivalence test
//! (`crates/equivalence/tests/it/limit.rs`) can drive this glue, not a copy
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
//! * before the limit, the saturation shedder (the guard's `[saturation]`)
//!   answers a request whose class threshold its instance's saturation
//!   has reached, saturation being the policy crate's
//!   [`saturation_of`] (in flight over the limit: there is no admission
//!   queue); a refusal by the limit itself gets the shedder's answer too
//!   (by default 503 with `Retry-After: 1s`), as the guard's does. A
//!   request reaching a full instance is reported as refused by the limit
//!   whatever its class (the guard counts a `critical` one, whose
//!   threshold is 1.0, as a saturation shed; the answer is the same).
//!
//! Requests go to the instances in turn (round robin), as a load balancer
//! in front of gateway pods spreads them; a full instance refuses even if
//! another has room.

use rand_pcg::Pcg64Mcg;
use stormbreak_policy::limit::{AnyLimit, LimitConfig, Limiter, Outcome, Permit, QueueConfig};
use stormbreak_policy::shed::{
    Criticality, Decision, SaturationConfig, SaturationShedder, saturation_of,
};
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
    /// When it was admitted (the sample's round trip starts here, after
    /// any wait in the queue, as the guard's permit does).
    pub admitted: Nanos,
}

/// Why [`Admission::admit`] turned a request away, with the answer it
/// gets: an HTTP status and, when set, `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The saturation shedder answered: the instance's saturation had
    /// reached the request's class threshold.
    Shed {
        /// HTTP status (403, 429 or 503).
        status: u16,
        /// `Retry-After` to advertise.
        retry_after: Option<Nanos>,
    },
    /// The instance was at its limit.
    Limit {
        /// HTTP status (the shedder's).
        status: u16,
        /// `Retry-After` to advertise.
        retry_after: Option<Nanos>,
    },
}

impl Refusal {
    #[cfg(feature = "testing")] // only the equivalence test reads it
    /// The answer a client gets: the HTTP status and `Retry-After`, as the
    /// guard sends them for the same refusal.
    pub fn answer(self) -> (u16, Option<Nanos>) {
        match self {
            Refusal::Shed {
                status,
                retry_after,
            }
            | Refusal::Limit {
                status,
                retry_after,
            } => (status, retry_after),
        }
    }
}

/// What [`Admission::admit`] did with a request it did not refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an admitted request holds a slot, a queued one a place in the queue"]
pub enum Admitted {
    /// It holds a slot now.
    Now(Slot),
    /// It waits in `instance`'s queue: [`Admission::wake`] may admit it
    /// when a slot comes back, [`Admission::leave_queue`] when its wait
    /// times out.
    Queued {
        /// The instance whose queue it is in.
        instance: u32,
    },
}

/// The concurrency limits of one gateway.
#[derive(Debug, Clone)]
pub struct Admission {
    limiters: Vec<Limiter<AnyLimit>>,
    /// Requests waiting, per instance (each instance's queue is its own).
    waiting: Vec<u32>,
    queue: Option<QueueConfig>,
    shedder: SaturationShedder,
    /// The shedder's answer, given to a refusal by the limit.
    full: (u16, Option<Nanos>),
    next: usize,
    rng: Pcg64Mcg,
}

impl Admission {
    /// `instances` limiters built from `config`, each with an admission
    /// queue when `queue` is given, their algorithms' random draws (if
    /// any) from `rng`, shedding by class with `saturation` (the policy
    /// crate's defaults when `None`, as in the guard).
    ///
    /// # Errors
    /// The policy crate's error for a config it cannot build.
    pub fn new(
        config: &LimitConfig,
        saturation: Option<&SaturationConfig>,
        queue: Option<&QueueConfig>,
        instances: u32,
        rng: Pcg64Mcg,
    ) -> Result<Self, FieldError> {
        let limiters: Vec<_> = (0..instances.max(1))
            .map(|_| config.build().map(Limiter::new))
            .collect::<Result<_, _>>()?;
        if let Some(q) = queue {
            q.validate()?;
        }
        let saturation = saturation.cloned().unwrap_or_default();
        let shedder = SaturationShedder::new(&saturation)?;
        Ok(Admission {
            waiting: vec![0; limiters.len()],
            limiters,
            queue: queue.cloned(),
            shedder,
            full: (saturation.status, saturation.retry_after),
            next: 0,
            rng,
        })
    }

    /// Admits a request of `class` arriving at `now` on the next instance
    /// in turn, queues it there, or refuses it: shed by that instance's
    /// saturation, or at its limit with its queue full (or absent).
    pub fn admit(&mut self, now: Nanos, class: Criticality) -> Result<Admitted, Refusal> {
        let i = self.next;
        self.next = (i + 1) % self.limiters.len();
        let limiter = &mut self.limiters[i];
        // The limit as of now, the one admission would use.
        limiter.advance(now);
        let size = self.queue.as_ref().map_or(0, |q| q.size);
        let (inflight, limit, waiting) = (limiter.inflight(), limiter.limit(), self.waiting[i]);
        // An instance whose limit and queue are both full refuses every
        // class alike, so that is reported as the limit's refusal (same
        // answer) rather than a shed of the classes whose threshold is 1.0.
        let full = inflight >= limit && waiting >= size;
        if !full
            && let Decision::Reject {
                status,
                retry_after,
            } = self
                .shedder
                .decide(class, saturation_of(inflight, waiting, limit, size))
        {
            return Err(Refusal::Shed {
                status,
                retry_after,
            });
        }
        if let Some(permit) = limiter.try_acquire(now) {
            return Ok(Admitted::Now(Slot {
                instance: i as u32,
                inflight: permit.inflight,
                admitted: now,
            }));
        }
        if waiting < size {
            self.waiting[i] += 1;
            return Ok(Admitted::Queued { instance: i as u32 });
        }
        let (status, retry_after) = self.full;
        Err(Refusal::Limit {
            status,
            retry_after,
        })
    }

    /// A slot of `instance` came back at `now` (after
    /// [`Admission::finish`]): the queue's head waiter tries for it, as the
    /// guard wakes one waiter per release. `Some` admits it (it leaves the
    /// queue); `None` leaves it waiting — the caller moves it to the back
    /// of its queue, as a woken guard waiter that finds no slot waits
    /// again behind the others.
    pub fn wake(&mut self, now: Nanos, instance: u32) -> Option<Slot> {
        let i = instance as usize;
        debug_assert!(self.waiting[i] > 0, "wake with no one waiting");
        let permit = self.limiters[i].try_acquire(now)?;
        self.waiting[i] -= 1;
        Some(Slot {
            instance,
            inflight: permit.inflight,
            admitted: now,
        })
    }

    /// A request waiting in `instance`'s queue stopped waiting (its wait
    /// timed out): its place is free.
    pub fn leave_queue(&mut self, instance: u32) {
        let w = &mut self.waiting[instance as usize];
        *w = w.saturating_sub(1);
    }

    #[cfg(feature = "testing")] // only the equivalence test reads it
    /// The queue's timeout, when there is a queue.
    pub fn queue_timeout(&self) -> Option<Nanos> {
        self.queue.as_ref().map(|q| q.timeout)
    }

    /// The answer to a refusal by the limit or a queue timeout: status and
    /// `Retry-After` (the saturation table's).
    pub fn refusal_answer(&self) -> (u16, Option<Nanos>) {
        self.full
    }

    /// Requests waiting in one instance's queue.
    pub fn waiting_of(&self, instance: u32) -> u32 {
        self.waiting[instance as usize]
    }

    /// Requests waiting, over every instance.
    pub fn waiting(&self) -> u32 {
        self.waiting.iter().sum()
    }

    /// The request holding `slot` ended at `now` with `outcome`: frees the
    /// slot and feeds the sample to the algorithm.
    pub fn finish(&mut self, now: Nanos, slot: Slot, outcome: Outcome) {
        let permit = Permit {
            start: slot.admitted,
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
            None,
            None,
            instances,
            Pcg64Mcg::seed_from_u64(1),
        )
        .unwrap()
    }

    #[test]
    fn instances_take_turns_and_a_full_one_refuses() {
        let mut a = fixed(1, 2);
        let t = Nanos::ZERO;
        // Above critical's threshold only the limit itself refuses.
        let top = Criticality::CriticalPlus;
        let now = |r: Result<Admitted, Refusal>| match r {
            Ok(Admitted::Now(slot)) => slot,
            other => panic!("admitted at once, got {other:?}"),
        };
        let first = now(a.admit(t, top));
        let second = now(a.admit(t, top));
        assert_eq!((first.instance, second.instance), (0, 1));
        let full = Err(Refusal::Limit {
            status: 503,
            retry_after: Some(Nanos::SECOND),
        });
        assert_eq!(a.admit(t, top), full, "instance 0 is full");
        assert_eq!(a.admit(t, top), full, "instance 1 is full");
        a.finish(Nanos::from_millis(1), first, Outcome::Success);
        assert_eq!(a.inflight(), 1);
        assert_eq!(
            a.admit(t, top),
            Ok(Admitted::Now(Slot {
                instance: 0,
                inflight: 1,
                admitted: t,
            }))
        );
        assert_eq!(a.limit(), 2);
    }

    #[test]
    fn classes_are_shed_at_their_thresholds_of_the_instance_they_reach() {
        // Ten slots: sheddable goes at 8 in flight (0.8), sheddable_plus
        // at 9, critical at 10 (full), critical_plus only by the limit.
        let mut a = fixed(10, 1);
        let t = Nanos::ZERO;
        let shed = Err(Refusal::Shed {
            status: 503,
            retry_after: Some(Nanos::SECOND),
        });
        for _ in 0..8 {
            let _held = a.admit(t, Criticality::Sheddable).unwrap();
        }
        assert_eq!(a.admit(t, Criticality::Sheddable), shed);
        let _held = a.admit(t, Criticality::SheddablePlus).unwrap();
        assert_eq!(a.admit(t, Criticality::SheddablePlus), shed);
        let _held = a.admit(t, Criticality::Critical).unwrap();
        // Full: every class meets the limit's refusal, with the same answer.
        let full = Err(Refusal::Limit {
            status: 503,
            retry_after: Some(Nanos::SECOND),
        });
        assert_eq!(a.admit(t, Criticality::Sheddable), full);
        assert_eq!(a.admit(t, Criticality::Critical), full);
        assert!(matches!(
            a.admit(t, Criticality::CriticalPlus),
            Err(Refusal::Limit { .. })
        ));
        assert_eq!(a.inflight(), 10);
    }

    #[test]
    fn a_configured_answer_is_given_by_the_shedder_and_the_limit() {
        let saturation = SaturationConfig {
            thresholds: stormbreak_policy::shed::ClassThresholds {
                sheddable: 0.5,
                ..Default::default()
            },
            status: 429,
            retry_after: Some(Nanos::from_secs(5)),
        };
        let mut a = Admission::new(
            &LimitConfig::Fixed(FixedConfig { limit: 2 }),
            Some(&saturation),
            None,
            1,
            Pcg64Mcg::seed_from_u64(1),
        )
        .unwrap();
        let t = Nanos::ZERO;
        let answer = (429, Some(Nanos::from_secs(5)));
        // Limit 2: one in flight is 0.5, past sheddable's 0.5 threshold.
        let _held = a.admit(t, Criticality::CriticalPlus).unwrap();
        assert_eq!(
            a.admit(t, Criticality::Sheddable),
            Err(Refusal::Shed {
                status: answer.0,
                retry_after: answer.1
            })
        );
        let _held = a.admit(t, Criticality::Critical).unwrap();
        assert_eq!(
            a.admit(t, Criticality::CriticalPlus),
            Err(Refusal::Limit {
                status: answer.0,
                retry_after: answer.1
            })
        );
    }

    fn queued(limit: u32, size: u32) -> Admission {
        Admission::new(
            &LimitConfig::Fixed(FixedConfig { limit }),
            None,
            Some(&QueueConfig {
                size,
                timeout: Nanos::SECOND,
            }),
            1,
            Pcg64Mcg::seed_from_u64(1),
        )
        .unwrap()
    }

    #[test]
    fn a_full_limit_queues_up_to_the_size_and_a_release_admits_one_waiter() {
        let mut a = queued(2, 2);
        let (t, c) = (Nanos::ZERO, Criticality::Critical);
        let Ok(Admitted::Now(first)) = a.admit(t, c) else {
            panic!()
        };
        let _second = a.admit(t, c).unwrap();
        assert_eq!(a.admit(t, c), Ok(Admitted::Queued { instance: 0 }));
        assert_eq!(a.admit(t, c), Ok(Admitted::Queued { instance: 0 }));
        assert!(matches!(a.admit(t, c), Err(Refusal::Limit { .. })));
        assert_eq!(a.waiting(), 2);
        // Nothing free: a waiter woken early stays in the queue.
        assert_eq!(a.wake(t, 0), None);
        a.finish(Nanos::from_millis(5), first, Outcome::Success);
        let woken = a.wake(Nanos::from_millis(5), 0).expect("the freed slot");
        assert_eq!((woken.inflight, a.waiting(), a.inflight()), (2, 1, 2));
        a.leave_queue(0);
        assert_eq!(a.waiting(), 0);
    }

    #[test]
    fn saturation_counts_the_queue_as_room() {
        // Limit 4 + queue 6 = 10 places: sheddable goes at 8 of them, so
        // with the limit full it still queues until 4 wait.
        let mut a = queued(4, 6);
        let t = Nanos::ZERO;
        for _ in 0..4 {
            let _held = a.admit(t, Criticality::CriticalPlus).unwrap();
        }
        for _ in 0..4 {
            assert_eq!(
                a.admit(t, Criticality::Sheddable),
                Ok(Admitted::Queued { instance: 0 })
            );
        }
        assert!(matches!(
            a.admit(t, Criticality::Sheddable),
            Err(Refusal::Shed { .. })
        ));
        for _ in 0..2 {
            assert_eq!(
                a.admit(t, Criticality::Critical),
                Ok(Admitted::Queued { instance: 0 })
            );
        }
        // Limit and queue full: the limit's refusal, for every class.
        assert!(matches!(
            a.admit(t, Criticality::CriticalPlus),
            Err(Refusal::Limit { .. })
        ));
    }

    #[test]
    fn a_bad_queue_table_is_refused() {
        let e = Admission::new(
            &LimitConfig::Fixed(FixedConfig { limit: 1 }),
            None,
            Some(&QueueConfig {
                size: 0,
                timeout: Nanos::SECOND,
            }),
            1,
            Pcg64Mcg::seed_from_u64(1),
        )
        .unwrap_err();
        assert_eq!(e.field(), "size");
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

//! Runs one hot policy decision exactly N times, so `valgrind
//! --tool=callgrind` counts the same work for two builds of the policy
//! crate; `benches/icount.sh` builds it against BASE and the work tree.
//! Instruction counts do not move with the machine's load, which the
//! criterion timings on this shared VM do (docs/BENCHMARKS.md).
use policy as p;
use p::Nanos;
use p::breaker::{Breaker, BreakerConfig};
use p::budget::{RatioBudget, RatioBudgetConfig, RetryBudget, RetryCause};
use p::limit::{AimdConfig, LimitConfig, Limiter, Outcome};
use p::ramp::{Ramp, RampConfig};
use p::ratelimit::{KeyedRateLimiter, RateLimitConfig};
use p::shed::{AdaptiveThrottle, ThrottleConfig};
use p::retry::{AttemptOutcome, Backoff, BackoffConfig, Jitter, RetryConfig, RetryPolicy, RetryState};
use rand::SeedableRng;
use std::hint::black_box;

/// A time for either API: `Nanos` was a `u64` alias before the newtype.
#[cfg(not(nanos_alias))]
fn t(n: u64) -> Nanos {
    Nanos::from_nanos(n)
}
#[cfg(nanos_alias)]
fn t(n: u64) -> Nanos {
    n
}

const N: u64 = 1_000_000;

fn main() {
    let which = std::env::args().nth(1).unwrap();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
    match which.as_str() {
        "retry" => {
            let policy = RetryPolicy::new(&RetryConfig::default()).unwrap();
            for i in 0..N {
                let mut s = RetryState::new(&policy, t(i * 1000));
                black_box(s.on_outcome(&policy, t(i * 1000 + 500), AttemptOutcome::status(503), &mut rng));
            }
        }
        "backoff" => {
            let b = Backoff::new(&BackoffConfig { jitter: Jitter::Full, ..BackoffConfig::default() }).unwrap();
            for i in 0..N {
                black_box(b.pause((i % 8) as u32, t(0), &mut rng));
            }
        }
        "budget" => {
            let mut b = RatioBudget::new(&RatioBudgetConfig::default()).unwrap();
            for i in 0..N {
                b.on_request(t(i * 1000));
                black_box(b.try_withdraw(t(i * 1000), RetryCause::Error));
            }
        }
        "ratelimit" => {
            let mut l = KeyedRateLimiter::new(&RateLimitConfig::default()).unwrap();
            for i in 0..N {
                black_box(l.check(t(i * 1000), i % 1000).is_ok());
            }
        }
        "breaker" => {
            let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
            for i in 0..N {
                if let Some(ticket) = b.allow(t(i * 1000)).ticket() {
                    let _ = black_box(b.on_success(t(i * 1000 + 1), ticket));
                }
            }
        }
        "limit" => {
            let algorithm = LimitConfig::Aimd(AimdConfig::default()).build().unwrap();
            let mut l = Limiter::new(algorithm);
            for i in 0..N {
                if let Some(permit) = l.try_acquire(t(i * 1000)) {
                    l.release(t(i * 1000 + 700), permit, Outcome::Success, &mut rng);
                }
            }
        }
        "throttle" => {
            let mut th = AdaptiveThrottle::new(&ThrottleConfig::default()).unwrap();
            for i in 0..N {
                if th.should_send(t(i * 1000), &mut rng) {
                    th.on_response(t(i * 1000 + 1), i % 3 != 0);
                }
            }
        }
        "ramp" => {
            let mut r = Ramp::new(&RampConfig::default()).unwrap();
            r.start(t(0));
            for i in 0..N {
                black_box(r.fraction(t(i * 1000)));
                r.observe(t(i * 1000), i % 50 != 0);
            }
        }
        _ => panic!("unknown decision {which}"),
    }
}

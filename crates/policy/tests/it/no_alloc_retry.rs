//! Per-request retry and budget decisions must not allocate: a simulator runs
//! millions of them, and the guard runs them on every proxied request.
//!
//! A counting global allocator records allocations made by the current thread
//! while counting is switched on, so tests running in parallel do not see each
//! other's allocations.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{
    AwsRetryQuota, AwsRetryQuotaConfig, GrpcThrottle, GrpcThrottleConfig, RatioBudget,
    RatioBudgetConfig, RetryBudget, RetryCause, Unlimited,
};
use stormbreak_policy::retry::{
    AttemptOutcome, BackoffConfig, Jitter, Pushback, RetryConfig, RetryPolicy, RetryState,
    retry_after_from_delta_seconds, retry_after_from_header, retry_after_from_http_date,
    retry_after_from_reset_epoch,
};

use crate::common::allocations_during;

const DECISIONS: u64 = 10_000;

fn policy(jitter: Jitter) -> RetryPolicy {
    RetryPolicy::new(&RetryConfig {
        per_try_timeout: Some(250 * Nanos::MILLISECOND),
        backoff: BackoffConfig {
            jitter,
            ..BackoffConfig::default()
        },
        ..RetryConfig::default()
    })
    .unwrap()
}

/// One logical request: a 503, a timeout, then a 200.
fn one_request<B: RetryBudget + ?Sized>(
    policy: &RetryPolicy,
    now: Nanos,
    budget: &mut B,
    rng: &mut Pcg64Mcg,
) {
    let mut state = RetryState::begin(policy, now, budget);
    black_box(state.attempt_deadline(policy));
    let d = state.on_outcome_budgeted(
        policy,
        now + Nanos::MILLISECOND,
        AttemptOutcome::status(503),
        budget,
        rng,
    );
    let next = d.retry_at().unwrap_or(now + Nanos::MILLISECOND);
    let d = state.on_outcome_budgeted(
        policy,
        next + 250 * Nanos::MILLISECOND,
        AttemptOutcome::Timeout,
        budget,
        rng,
    );
    let next = d.retry_at().unwrap_or(next);
    let _ = black_box(state.on_outcome_budgeted(
        policy,
        next + Nanos::MILLISECOND,
        AttemptOutcome::status(200),
        budget,
        rng,
    ));
}

#[test]
fn the_counter_sees_allocations() {
    // Without this the zero-allocation assertions below could never fail.
    assert!(
        allocations_during(|| {
            black_box(vec![1u8; 16]);
        }) >= 1
    );
}

#[test]
fn retry_state_decisions_do_not_allocate() {
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Proportional,
    ] {
        let policy = policy(jitter);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let throttled = AttemptOutcome::Response {
            status: 429,
            retry_after: Some(2 * Nanos::SECOND),
            pushback: Pushback::None,
        };
        let pushed = AttemptOutcome::Response {
            status: 503,
            retry_after: None,
            pushback: Pushback::RetryAfter(300 * Nanos::MILLISECOND),
        };
        let n = allocations_during(|| {
            for i in 0..DECISIONS {
                let now = Nanos::SECOND * i;
                let mut state = RetryState::new(&policy, now);
                let _ = black_box(state.on_outcome(
                    &policy,
                    now + Nanos::NANOSECOND,
                    throttled,
                    &mut rng,
                ));
                let _ =
                    black_box(state.on_outcome(&policy, now + 3 * Nanos::SECOND, pushed, &mut rng));
                let _ = black_box(state.on_outcome(
                    &policy,
                    now + 4 * Nanos::SECOND,
                    AttemptOutcome::Reset,
                    &mut rng,
                ));
                black_box(policy.classifier().classify(&AttemptOutcome::status(403)));
            }
        });
        assert_eq!(n, 0, "{jitter:?}");
    }
}

#[test]
fn header_parsing_does_not_allocate() {
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            black_box(retry_after_from_delta_seconds(black_box("120")));
            black_box(retry_after_from_http_date(
                black_box("Sun, 06 Nov 1994 08:49:37 GMT"),
                784_111_000 + i,
            ));
            black_box(retry_after_from_header(
                black_box("Sun Nov  6 08:49:37 1994"),
                i,
            ));
            black_box(retry_after_from_header(
                black_box("Sunday, 06-Nov-94 08:49:37 GMT"),
                i,
            ));
            black_box(retry_after_from_reset_epoch(black_box("1786973400"), i));
            black_box(Pushback::from_grpc_header(black_box("250")));
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn ratio_budget_decisions_do_not_allocate() {
    let policy = policy(Jitter::Full);
    let mut budget = RatioBudget::new(&RatioBudgetConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            // 10 ms apart: the ring rotates through every bucket many times.
            let now = i * 10 * Nanos::MILLISECOND;
            budget.on_request(now);
            black_box(budget.try_withdraw(now, RetryCause::Error));
            black_box(budget.balance(now));
            one_request(&policy, now, &mut budget, &mut rng);
        }
        // A jump far ahead clears the whole ring.
        black_box(budget.try_withdraw(DECISIONS * Nanos::SECOND * 100, RetryCause::Timeout));
    });
    assert_eq!(n, 0);
}

#[test]
fn grpc_throttle_decisions_do_not_allocate() {
    let policy = policy(Jitter::Full);
    let mut budget = GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            budget.on_failure(Nanos::from_nanos(i));
            black_box(budget.try_withdraw(Nanos::from_nanos(i), RetryCause::Error));
            budget.on_success(Nanos::from_nanos(i), None);
            one_request(&policy, Nanos::SECOND * i, &mut budget, &mut rng);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn aws_quota_decisions_do_not_allocate() {
    let policy = policy(Jitter::Full);
    let mut budget = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(4);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            black_box(budget.try_withdraw(Nanos::from_nanos(i), RetryCause::Timeout));
            budget.on_success(Nanos::from_nanos(i), Some(RetryCause::Timeout));
            one_request(&policy, Nanos::SECOND * i, &mut budget, &mut rng);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn unlimited_and_dyn_budgets_do_not_allocate() {
    let policy = policy(Jitter::Decorrelated);
    let mut unlimited = Unlimited;
    let mut quota = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            one_request(&policy, Nanos::SECOND * i, &mut unlimited, &mut rng);
            let dynamic: &mut dyn RetryBudget = &mut quota;
            one_request(&policy, Nanos::SECOND * i, dynamic, &mut rng);
        }
    });
    assert_eq!(n, 0);
}

//! Cost of each per-request retry and budget decision (target: < 100 ns each).
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::{
    AwsRetryQuota, AwsRetryQuotaConfig, GrpcThrottle, GrpcThrottleConfig, RatioBudget,
    RatioBudgetConfig, RetryBudget, RetryCause,
};
use stormbreak_policy::retry::{
    AttemptOutcome, Backoff, BackoffConfig, Jitter, Pushback, RetryConfig, RetryPolicy, RetryState,
    retry_after_from_delta_seconds, retry_after_from_http_date,
};

fn retry_state(c: &mut Criterion) {
    let policy = RetryPolicy::new(&RetryConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let fresh = RetryState::new(&policy, Nanos::ZERO);
    c.bench_function("retry/retry_state/on_outcome_503", |b| {
        b.iter(|| {
            let mut s = fresh;
            black_box(s.on_outcome(
                &policy,
                black_box(Nanos::MILLISECOND),
                AttemptOutcome::status(503),
                &mut rng,
            ))
        })
    });
    let throttled = AttemptOutcome::Response {
        status: 429,
        retry_after: Some(2 * Nanos::SECOND),
        pushback: Pushback::None,
    };
    c.bench_function("retry/retry_state/on_outcome_429_retry_after", |b| {
        b.iter(|| {
            let mut s = fresh;
            black_box(s.on_outcome(
                &policy,
                black_box(Nanos::MILLISECOND),
                black_box(throttled),
                &mut rng,
            ))
        })
    });
    c.bench_function("retry/retry_state/on_outcome_success", |b| {
        b.iter(|| {
            let mut s = fresh;
            black_box(s.on_outcome(
                &policy,
                black_box(Nanos::MILLISECOND),
                AttemptOutcome::status(200),
                &mut rng,
            ))
        })
    });
    let mut ratio = RatioBudget::new(&RatioBudgetConfig::default()).unwrap();
    let mut now = Nanos::ZERO;
    c.bench_function(
        "retry/retry_state/begin_and_on_outcome_budgeted_ratio",
        |b| {
            b.iter(|| {
                now += Nanos::MILLISECOND;
                let mut s = RetryState::begin(&policy, now, &mut ratio);
                black_box(s.on_outcome_budgeted(
                    &policy,
                    now + Nanos::NANOSECOND,
                    AttemptOutcome::Reset,
                    &mut ratio,
                    &mut rng,
                ))
            })
        },
    );
    c.bench_function("retry/retry_state/attempt_deadline", |b| {
        b.iter(|| black_box(black_box(&fresh).attempt_deadline(&policy)))
    });
}

fn classify(c: &mut Criterion) {
    let policy = RetryPolicy::new(&RetryConfig::default()).unwrap();
    let outcome = AttemptOutcome::Response {
        status: 503,
        retry_after: Some(Nanos::SECOND),
        pushback: Pushback::None,
    };
    c.bench_function("retry/classify/response", |b| {
        b.iter(|| black_box(policy.classifier().classify(black_box(&outcome))))
    });
}

fn backoff(c: &mut Criterion) {
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    for (name, jitter) in [
        ("none", Jitter::None),
        ("full", Jitter::Full),
        ("equal", Jitter::Equal),
        ("decorrelated", Jitter::Decorrelated),
        ("proportional", Jitter::Proportional),
    ] {
        let b = Backoff::new(&BackoffConfig {
            jitter,
            ..BackoffConfig::default()
        })
        .unwrap();
        c.bench_function(&format!("retry/backoff/pause_{name}"), |bench| {
            bench.iter(|| {
                black_box(b.pause(black_box(3), black_box(40 * Nanos::MILLISECOND), &mut rng))
            })
        });
    }
}

fn headers(c: &mut Criterion) {
    c.bench_function("retry/retry_after/delta_seconds", |b| {
        b.iter(|| black_box(retry_after_from_delta_seconds(black_box("120"))))
    });
    c.bench_function("retry/retry_after/http_date", |b| {
        b.iter(|| {
            black_box(retry_after_from_http_date(
                black_box("Sun, 06 Nov 1994 08:49:37 GMT"),
                black_box(784_111_000),
            ))
        })
    });
    c.bench_function("retry/pushback/grpc_header", |b| {
        b.iter(|| black_box(Pushback::from_grpc_header(black_box("250"))))
    });
}

fn budgets(c: &mut Criterion) {
    let mut ratio = RatioBudget::new(&RatioBudgetConfig::default()).unwrap();
    let mut now = Nanos::ZERO;
    c.bench_function("retry/ratio_budget/on_request", |b| {
        b.iter(|| {
            now += Nanos::from_micros(100); // 10 k requests/s: the ring rotates every 10 k calls
            ratio.on_request(black_box(now))
        })
    });
    c.bench_function("retry/ratio_budget/try_withdraw", |b| {
        b.iter(|| {
            now += Nanos::from_micros(100);
            black_box(ratio.try_withdraw(black_box(now), RetryCause::Error))
        })
    });

    let mut grpc = GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap();
    c.bench_function(
        "retry/grpc_throttle/on_failure_try_withdraw_on_success",
        |b| {
            b.iter(|| {
                grpc.on_failure(Nanos::ZERO);
                let ok = grpc.try_withdraw(Nanos::ZERO, RetryCause::Error);
                grpc.on_success(Nanos::ZERO, None);
                black_box(ok)
            })
        },
    );

    let mut aws = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
    c.bench_function("retry/aws_quota/try_withdraw_on_success", |b| {
        b.iter(|| {
            let ok = aws.try_withdraw(Nanos::ZERO, black_box(RetryCause::Timeout));
            aws.on_success(Nanos::ZERO, Some(RetryCause::Timeout));
            black_box(ok)
        })
    });
}

criterion_group!(benches, retry_state, classify, backoff, headers, budgets);
criterion_main!(benches);

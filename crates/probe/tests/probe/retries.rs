//! Retries, when asked for: through `stormbreak-client`'s retry layer
//! under one budget; a success after a retry is its own state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use stormbreak_probe::RunOptions;
use stormbreak_probe::timeline::Verdict;

use crate::scripted::{Reply, Scripted, config};

#[tokio::test]
async fn a_success_after_a_retry_is_counted_apart_from_a_plain_one() {
    // Every other request fails: a probe's first attempt and its retry
    // (1 ms later) almost always straddle one failure.
    let n = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&n);
    let server = Scripted::start(move |_, _| {
        if seen.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
            Reply::Status(500, None)
        } else {
            Reply::Status(200, None)
        }
    })
    .await;
    let c = config(
        "rate = \"40/s\"\nduration = \"1s\"\ninterval = \"100ms\"\nseed = 8\n\
         retry = { max_attempts = 2, backoff = { kind = \"constant\", base = \"1ms\" } }\n\
         budget = { kind = \"ratio\", retry_ratio = 1.0, min_retries_per_sec = 0 }",
        &[(
            "p",
            format!("http://{}/p", server.addr),
            "error_rate = 0.5, window = \"500ms\"",
        )],
    );
    let run = stormbreak_probe::run(&c, RunOptions::default())
        .await
        .unwrap();
    let p = &run.paths[0];
    assert!(p.totals.probes >= 20, "{p:?}");
    // Probes that overlap shift the alternation (one gets a plain success,
    // the other fails after its retry): most still need their retry.
    assert!(
        p.totals.ok_after_retry * 10 >= p.totals.probes * 6,
        "most probes needed their retry: {p:?}"
    );
    assert!(p.totals.failed * 5 <= p.totals.probes, "{p:?}");
    // Every failed probe was retried once (the budget allows all).
    assert_eq!(
        run.retries,
        p.totals.ok_after_retry + p.totals.failed,
        "{run:?}"
    );
    let arrivals = server.count("/p", Duration::ZERO, Duration::from_secs(60)) as u64;
    assert_eq!(arrivals, p.totals.probes + run.retries);
}

#[tokio::test]
async fn the_default_budget_keeps_attempts_within_a_tenth_over_the_probe_rate() {
    let server = Scripted::start(|_, _| Reply::Status(500, None)).await;
    let c = config(
        "rate = \"100/s\"\nduration = \"1500ms\"\ninterval = \"100ms\"\nseed = 3\n\
         retry = { max_attempts = 3, backoff = { kind = \"constant\", base = \"1ms\" } }",
        &[(
            "p",
            format!("http://{}/p", server.addr),
            "error_rate = 0.5, window = \"500ms\"",
        )],
    );
    let run = stormbreak_probe::run(&c, RunOptions::default())
        .await
        .unwrap();
    let probes = run.paths[0].totals.probes;
    let arrivals = server.count("/p", Duration::ZERO, Duration::from_secs(60)) as u64;
    assert!(run.retries > 0 && run.retry_budget_denied > 0, "{run:?}");
    // Without the budget: 3 attempts a probe. With it: about 1.1.
    assert!(
        arrivals * 100 <= probes * 115 + 200,
        "{arrivals} attempts for {probes} probes"
    );
    assert_eq!(run.paths[0].totals.failed, probes);
    assert_eq!(run.verdict, Verdict::Breached);
}

#[tokio::test]
async fn a_429_or_503_is_never_retried_it_pauses_the_path() {
    let server = Scripted::start(|p, _| {
        if p == "/busy" {
            Reply::Status(503, Some(1))
        } else {
            Reply::Status(429, None)
        }
    })
    .await;
    let slo = "error_rate = 0.5, window = \"500ms\"";
    let c = config(
        "rate = \"40/s\"\nduration = \"1500ms\"\ninterval = \"100ms\"\nseed = 5\noverload_pause = \"1s\"\n\
         retry = { max_attempts = 3, backoff = { kind = \"constant\", base = \"1ms\" } }\n\
         budget = { kind = \"ratio\", retry_ratio = 1.0, min_retries_per_sec = 0 }",
        &[
            ("busy", format!("http://{}/busy", server.addr), slo),
            (
                "throttled",
                format!("http://{}/throttled", server.addr),
                slo,
            ),
        ],
    );
    let run = stormbreak_probe::run(&c, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(run.retries, 0, "{run:?}");
    for (p, path) in run.paths.iter().zip(["/busy", "/throttled"]) {
        let arrivals = server.count(path, Duration::ZERO, Duration::from_secs(60));
        // A probe, a 1 s pause, another: a few in 1.5 s, never 3 attempts each.
        assert!((1..=6).contains(&arrivals), "{path}: {arrivals}");
        assert!(p.totals.paused > 5, "{p:?}");
        assert_eq!(
            p.reasons.keys().copied().collect::<Vec<_>>(),
            ["status"],
            "{p:?}"
        );
    }
}

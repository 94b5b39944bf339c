//! `poll_timeout()` tells a driver every instant a staged restore may
//! change on its own: a driver that wakes only then (and when it has
//! outcomes to report) sees the same schedule as one that polls every
//! 100 ms — steps entered, sites started, steps back — while waking far
//! less often.

use proptest::prelude::*;
use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::{ErrorGuardConfig, RampConfig, StagedRestore, StagedRestoreConfig};

fn config(hold_s: u64, step_back_s: u64) -> StagedRestoreConfig {
    StagedRestoreConfig {
        ramp: RampConfig {
            steps: vec![0.1, 0.3, 0.6, 1.0],
            hold: hold_s * Nanos::SECOND,
            step_back_after: step_back_s * Nanos::SECOND,
            guard: ErrorGuardConfig {
                window: 10 * Nanos::SECOND,
                buckets: 5,
                error_rate_threshold: 0.2,
                min_requests: 5,
            },
        },
        next_site_at_fraction: 1.0,
    }
}

/// Every site's entry time of every step, and its steps back.
fn schedule(r: &StagedRestore, steps: usize) -> Vec<(Vec<Option<Nanos>>, u64)> {
    (0..r.site_count())
        .map(|i| {
            let site = r.site(i).unwrap();
            (
                (0..steps).map(|k| site.entered_step_at(k)).collect(),
                site.steps_back(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn waking_at_poll_timeout_sees_what_polling_sees(
        hold_s in 2u64..30,
        step_back_s in prop_oneof![Just(0u64), 10u64..40],
        sites in 1usize..4,
        // (at in 100 ms units, site, ok): a burst of outcomes.
        outcomes in proptest::collection::vec((0u64..3000, 0usize..4, any::<bool>()), 0..300),
    ) {
        let cfg = config(hold_s, step_back_s);
        let mut outcomes = outcomes;
        outcomes.sort_by_key(|o| o.0);
        let end = 300 * Nanos::SECOND;

        // Polling every 100 ms (outcomes land on the grid too).
        let mut polled = StagedRestore::new(&cfg, sites).unwrap();
        polled.start(Nanos::ZERO);
        let mut next = 0;
        for tick in 0..=end / (100 * Nanos::MILLISECOND) {
            let now = tick * 100 * Nanos::MILLISECOND;
            while next < outcomes.len() && outcomes[next].0 == tick {
                let (_, site, ok) = outcomes[next];
                polled.observe(now, site % sites, ok);
                next += 1;
            }
            polled.advance(now);
        }

        // Waking only at outcomes and at poll_timeout().
        let mut woken = StagedRestore::new(&cfg, sites).unwrap();
        woken.start(Nanos::ZERO);
        let mut wakes = 0u64;
        let mut next = 0;
        loop {
            let due = woken.poll_timeout();
            let outcome_at = outcomes.get(next).map(|o| o.0 * 100 * Nanos::MILLISECOND);
            let now = match (due, outcome_at) {
                (Some(d), Some(o)) => d.min(o),
                (Some(d), None) => d,
                (None, Some(o)) => o,
                (None, None) => break,
            };
            if now > end {
                break;
            }
            while next < outcomes.len() && outcomes[next].0 * 100 * Nanos::MILLISECOND == now {
                let (_, site, ok) = outcomes[next];
                woken.observe(now, site % sites, ok);
                next += 1;
            }
            woken.advance(now);
            wakes += 1;
            prop_assert!(woken.poll_timeout().is_none_or(|t| t > now), "a wake-up not in the future");
            prop_assert!(wakes < 100_000, "poll_timeout never settles");
        }
        woken.advance(end);
        polled.advance(end);
        prop_assert_eq!(schedule(&woken, 4), schedule(&polled, 4));
        prop_assert_eq!(woken.is_complete(), polled.is_complete());
        prop_assert!(wakes < 3001 + outcomes.len() as u64);
    }
}

#[test]
fn an_idle_or_finished_restore_asks_for_no_wake_up() {
    let mut r = StagedRestore::new(&config(5, 0), 2).unwrap();
    assert_eq!(r.poll_timeout(), None, "not started");
    r.start(Nanos::ZERO);
    assert_eq!(
        r.poll_timeout(),
        Some(5 * Nanos::SECOND),
        "the first hold ends"
    );
    r.advance(60 * Nanos::SECOND);
    assert!(r.is_complete());
    assert_eq!(r.poll_timeout(), None, "complete with a clear guard");
}

//! The token-refresh example's scenario, checked: against an endpoint that
//! fails every request, the fixed client sends at most 1.1 attempts per
//! logical refresh (the buggy fan-out client thirteen), and once the
//! endpoint heals it has a token within a refresh or two. The variants
//! show what each layer contributes.

#[allow(dead_code)]
// Relative to this file's directory, tests/it/.
#[path = "../../examples/token_refresh.rs"]
mod example;

use std::time::Duration;

use example::{Layers, Scenario, StackRun, run_buggy, run_stack};

fn within_goal(f: &StackRun, logical: u64) -> bool {
    f.attempts * 10 <= logical * 11
}

#[tokio::test(start_paused = true)]
async fn the_fixed_client_stays_within_1_1_attempts_per_refresh_and_recovers() {
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    assert_eq!(logical, 12_000);
    let refreshes_asked = 2 * logical; // 60 s failing + 60 s healed

    let fixed = run_stack(scenario, Layers::FIXED).await;
    eprintln!("fixed: {fixed:?} for {logical} logical refreshes");
    assert!(within_goal(&fixed, logical), "{fixed:?}");
    // Every refresh started a flight, joined one or was answered from the
    // cache.
    assert_eq!(
        fixed.flights + fixed.coalesced + fixed.cache_hits,
        refreshes_asked
    );
    // The capped throttle keeps probing: the first refresh after the heal
    // that passes it gets the token (refreshes come every 5 ms), and the
    // success cache answers everyone after that.
    let first = fixed
        .first_token_after_heal
        .expect("a token after the heal");
    assert!(
        first <= Duration::from_secs(1),
        "first token {first:?} after the heal"
    );
    assert!(fixed.attempts_healed <= 3, "{fixed:?}");
    assert!(fixed.successes >= logical - 300, "{fixed:?}");

    let buggy = run_buggy(scenario).await;
    eprintln!("buggy: {buggy} attempts for {logical} logical refreshes");
    // 1 + 3 + 9 attempts per refresh: the incident's order of magnitude.
    assert_eq!(buggy, 13 * logical);
}

#[tokio::test(start_paused = true)]
async fn single_flight_and_the_budget_meet_the_goal_without_the_throttle() {
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    let f = run_stack(scenario, Layers::NO_THROTTLE).await;
    eprintln!("no throttle: {f:?}");
    assert!(within_goal(&f, logical), "{f:?}");
    assert_eq!(f.throttled, 0);
    // Refreshes coalesce while a failing flight (20 ms, then its retries)
    // is in the air.
    assert!(f.coalesced > f.flights, "{f:?}");
    assert!(f.first_token_after_heal.expect("a token") <= Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn the_budget_alone_cannot_meet_the_goal() {
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    let f = run_stack(scenario, Layers::RETRY_ONLY).await;
    eprintln!("retry alone: {f:?}");
    // Each caller's own refresh, plus retries up to the 20 % budget.
    assert!(!within_goal(&f, logical), "{f:?}");
    assert!(
        f.attempts <= logical * 13 / 10,
        "the budget still bounds it: {f:?}"
    );
    // No cache: after the heal every refresh goes to the endpoint.
    assert!(f.attempts_healed >= logical, "{f:?}");
}

#[tokio::test(start_paused = true)]
async fn the_uncapped_throttle_starves_recovery() {
    let scenario = Scenario::default();
    let f = run_stack(scenario, Layers::BOOK_THROTTLE).await;
    eprintln!("uncapped throttle: {f:?}");
    // The law's p tends to 24 000/24 001 with the window full of refusals:
    // a dead endpoint sees almost nothing, and so does a healed one.
    assert!(f.attempts < 100, "{f:?}");
    assert!(
        f.first_token_after_heal
            .is_none_or(|d| d > Duration::from_secs(10)),
        "{f:?}"
    );
    assert!(f.successes < f.flights / 10, "{f:?}");
}

//! The token-refresh example's scenario, checked: against an endpoint that
//! fails every request, the fixed client sends at most 1.1 attempts per
//! logical refresh, and the buggy fan-out client about thirteen.

#[allow(dead_code)]
#[path = "../examples/token_refresh.rs"]
mod example;

use example::{Scenario, run_buggy, run_fixed};

#[tokio::test(start_paused = true)]
async fn the_fixed_client_stays_within_1_1_attempts_per_refresh_and_the_buggy_one_multiplies() {
    let scenario = Scenario::default();
    let logical = scenario.logical_refreshes();
    assert_eq!(logical, 12_000);

    let fixed = run_fixed(scenario).await;
    eprintln!("fixed: {fixed:?} for {logical} logical refreshes");
    assert!(
        fixed.attempts * 10 <= logical * 11,
        "fixed client sent {} attempts for {logical} refreshes",
        fixed.attempts
    );
    // Every refresh either started a flight or joined one.
    assert_eq!(fixed.flights + fixed.coalesced, logical);

    let buggy = run_buggy(scenario).await;
    eprintln!("buggy: {buggy} attempts for {logical} logical refreshes");
    // 1 + 3 + 9 attempts per refresh: the incident's order of magnitude.
    assert_eq!(buggy, 13 * logical);
}

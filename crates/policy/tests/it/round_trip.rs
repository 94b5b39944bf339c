//! Every family's config survives config → TOML → config unchanged, for its
//! defaults and for a config a person wrote with every kind of field set
//! (durations, optional values, lists, nested tables, tagged enums), and an
//! unknown key is refused rather than ignored.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use stormbreak_policy::autoscale::HpaConfig;
use stormbreak_policy::breaker::BreakerConfig;
use stormbreak_policy::budget::{
    AwsRetryQuotaConfig, GrpcThrottleConfig, RatioBudgetConfig, TokenBucketConfig,
};
use stormbreak_policy::failover::FailoverConfig;
use stormbreak_policy::limit::LimitConfig;
use stormbreak_policy::ramp::{RampConfig, StagedRestoreConfig};
use stormbreak_policy::ratelimit::RateLimitConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::{ShedConfig, ThrottleConfig};

/// `text` parses, writes back out, and parses again to the same config; the
/// written form is returned for spot checks.
fn round_trip<C>(text: &str) -> (C, String)
where
    C: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let first: C = toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let written = toml::to_string(&first).unwrap_or_else(|e| panic!("{first:?}\n{e}"));
    let second: C = toml::from_str(&written).unwrap_or_else(|e| panic!("{written}\n{e}"));
    assert_eq!(first, second, "written as:\n{written}");
    (first, written)
}

/// The defaults survive the trip, and a stray key is an error naming it.
fn defaults_round_trip<C>(config: C)
where
    C: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let written = toml::to_string(&config).unwrap();
    let back: C = toml::from_str(&written).unwrap_or_else(|e| panic!("{written}\n{e}"));
    assert_eq!(back, config, "written as:\n{written}");
    let stray = format!("no_such_field = 1\n{written}");
    let e = toml::from_str::<C>(&stray).unwrap_err();
    assert!(e.to_string().contains("no_such_field"), "{e}");
}

#[test]
fn retry() {
    defaults_round_trip(RetryConfig::default());
    let (c, written) = round_trip::<RetryConfig>(
        r#"
        max_attempts = 4
        max_attempts_cap = 6
        per_try_timeout = "250ms"
        overall_timeout = "7h47m"
        retry_on = ["5xx", "reset"]
        retriable_status_codes = [409]
        non_retriable_status_codes = [501]
        [backoff]
        kind = "exponential"
        base = "50ms"
        max = "2s"
        multiplier = 1.6
        jitter = "proportional"
        jitter_spread = 0.2
        "#,
    );
    assert_eq!(c.max_attempts, 4);
    assert!(
        written.contains(r#"overall_timeout = "7h47m""#),
        "{written}"
    );
}

#[test]
fn budgets() {
    defaults_round_trip(RatioBudgetConfig::default());
    defaults_round_trip(GrpcThrottleConfig::default());
    defaults_round_trip(AwsRetryQuotaConfig::default());
    defaults_round_trip(TokenBucketConfig::default());
    round_trip::<RatioBudgetConfig>(
        "retry_ratio = 0.1\nmin_retries_per_sec = 5.0\nttl = \"30s\"\nbuckets = 15\n",
    );
    round_trip::<GrpcThrottleConfig>("max_tokens = 20\ntoken_ratio = 0.5\n");
    round_trip::<AwsRetryQuotaConfig>(
        "initial_tokens = 100\nretry_cost = 2\ntimeout_retry_cost = 4\nno_retry_increment = 1\n",
    );
    round_trip::<TokenBucketConfig>("capacity = 20.0\ncost = 1.0\nreward = 0.05\n");
}

#[test]
fn limits() {
    for text in [
        "kind = \"fixed\"\nlimit = 40\n",
        "kind = \"aimd\"\ninitial_limit = 10\nmin_limit = 2\nmax_limit = 90\nbackoff_ratio = 0.8\ntimeout = \"3s\"\n",
        "kind = \"vegas\"\ninitial_limit = 10\nmax_concurrency = 500\nsmoothing = 0.5\nprobe_multiplier = 20\n",
        "kind = \"envoy_gradient\"\nconcurrency_update_interval = \"200ms\"\nmin_rtt_fixed_value = \"12ms\"\nmin_rtt_jitter = 5.0\n",
        "kind = \"windowed\"\n[window]\nmin_window = \"1s\"\nmax_window = \"2s\"\n[inner]\nkind = \"aimd\"\nmax_limit = 64\n",
    ] {
        round_trip::<LimitConfig>(text);
    }
}

#[test]
fn shedding() {
    defaults_round_trip(ShedConfig::default());
    defaults_round_trip(ThrottleConfig::default());
    let (c, _) = round_trip::<ShedConfig>(
        r#"
        max_rules = 8
        [saturation]
        status = 429
        retry_after = "2s"
        [saturation.thresholds]
        sheddable = 0.5
        [[rules]]
        route = 3
        status = 503
        retry_after = "30s"
        [[rules]]
        route = 4
        class = "sheddable"
        status = 403
        "#,
    );
    assert_eq!(c.rules.len(), 2);
    round_trip::<ThrottleConfig>("k = 1.5\nwindow = \"1m\"\nbuckets = 60\n");
}

#[test]
fn rate_limit() {
    defaults_round_trip(RateLimitConfig::default());
    let (c, _) = round_trip::<RateLimitConfig>("rate = \"600/min\"\nburst = 5\nmax_keys = 1024\n");
    assert_eq!(c.rate, 10.0);
}

#[test]
fn breaker() {
    defaults_round_trip(BreakerConfig::default());
    round_trip::<BreakerConfig>(
        "failure_rate_threshold = 0.3\nsliding_window_size = 50\nwait_duration_in_open_state = \"45s\"\n",
    );
}

#[test]
fn autoscale() {
    defaults_round_trip(HpaConfig::default());
    let (c, _) = round_trip::<HpaConfig>(
        r#"
        min_replicas = 2
        max_replicas = 40
        pod_containers = ["app", "istio-proxy"]
        sync_period = "15s"
        [[metrics]]
        type = "ContainerResource"
        name = "cpu"
        container = "app"
        target = { type = "Utilization", average_utilization = 60 }
        [[metrics]]
        type = "Pods"
        metric = "requests_per_second"
        target = { type = "AverageValue", average_value = 100.0 }
        [behavior.scale_down]
        stabilization_window = "10m"
        select_policy = "Min"
        policies = [{ type = "Pods", value = 1, period = "1m" }]
        "#,
    );
    assert_eq!(c.metrics.len(), 2);
}

#[test]
fn ramps() {
    defaults_round_trip(RampConfig::default());
    defaults_round_trip(StagedRestoreConfig::default());
    round_trip::<StagedRestoreConfig>(
        r#"
        next_site_at_fraction = 0.5
        [ramp]
        steps = [0.1, 0.5, 1.0]
        hold = "2m"
        step_back_after = "30s"
        [ramp.guard]
        window = "20s"
        buckets = 4
        error_rate_threshold = 0.02
        min_requests = 50
        "#,
    );
}

#[test]
fn failover() {
    defaults_round_trip(FailoverConfig::default());
    round_trip::<FailoverConfig>(
        "half_life = \"30s\"\ndeadband = 0.05\nstale_after = \"2m\"\n[law]\nkind = \"fixed_fraction\"\nfraction = 0.25\n",
    );
}

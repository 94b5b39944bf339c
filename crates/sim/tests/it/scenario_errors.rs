//! A broken scenario gets an error naming file:line:column and what was
//! expected — never a panic.

use stormbreak_sim::Scenario;
use stormbreak_sim::scenario::MAX_SCENARIO_BYTES;

const GOOD: &str = r#"[scenario]
name = "ok"
duration = "1m"

[[lb]]
name = "edge"
nodes = 2
flows_per_node = 100

[[service]]
name = "svc"
replicas = 1
app = { workers = 2, service_time = { dist = "exponential", mean = "1ms" } }

[[route]]
name = "r"
path = ["edge", "svc"]

[[client]]
name = "users"
route = "r"
rate = "100/s"
timeout = "1s"
"#;

fn err(text: &str) -> String {
    Scenario::parse("broken.toml", text)
        .expect_err("should be rejected")
        .to_string()
}

#[test]
fn the_reference_scenario_parses() {
    Scenario::parse("ok.toml", GOOD).unwrap();
}

#[test]
fn unknown_field_names_its_line_and_the_expected_fields() {
    let text = GOOD.replace(
        "flows_per_node = 100",
        "flows_per_node = 100\nflow_limit = 3",
    );
    let e = err(&text);
    assert!(e.starts_with("broken.toml:9:1:"), "{e}");
    assert!(e.contains("unknown field `flow_limit`"), "{e}");
    assert!(e.contains("flows_per_node"), "lists what is expected: {e}");
}

#[test]
fn bad_duration_says_what_a_duration_looks_like() {
    let e = err(&GOOD.replace(r#"timeout = "1s""#, r#"timeout = "1 sec""#));
    assert!(e.starts_with("broken.toml:23:11:"), "{e}");
    assert!(e.contains("expected a duration"), "{e}");
}

#[test]
fn bad_rate_says_what_a_rate_looks_like() {
    let e = err(&GOOD.replace(r#"rate = "100/s""#, r#"rate = "lots""#));
    assert!(e.starts_with("broken.toml:22:8:"), "{e}");
    assert!(e.contains("expected a rate"), "{e}");
}

#[test]
fn unknown_component_in_a_route_points_at_it_and_lists_the_known_ones() {
    let e = err(&GOOD.replace(r#"path = ["edge", "svc"]"#, r#"path = ["edge", "svcc"]"#));
    assert!(e.starts_with("broken.toml:17:17:"), "{e}");
    assert!(e.contains(r#"unknown component "svcc""#), "{e}");
    assert!(e.contains("edge, svc"), "{e}");
}

#[test]
fn a_route_must_end_in_a_service() {
    let e = err(&GOOD.replace(r#"path = ["edge", "svc"]"#, r#"path = ["edge"]"#));
    assert!(e.starts_with("broken.toml:17:9:"), "{e}");
    assert!(e.contains("last hop of a route must be a service"), "{e}");
}

#[test]
fn unknown_route_for_a_client() {
    let e = err(&GOOD.replace(r#"route = "r""#, r#"route = "nope""#));
    assert!(e.starts_with("broken.toml:21:9:"), "{e}");
    assert!(
        e.contains(r#"unknown route "nope": expected one of r"#),
        "{e}"
    );
}

#[test]
fn invalid_retry_policy_names_the_field() {
    let text = format!("{GOOD}retry = {{ max_attempts = 0 }}\n");
    let e = err(&text);
    // Points at the offending field inside the retry table.
    assert!(e.starts_with("broken.toml:24:26:"), "{e}");
    assert!(e.contains("max_attempts"), "{e}");
}

#[test]
fn a_shed_action_with_403_and_retry_after_is_rejected() {
    let text = format!(
        "{GOOD}\n[[action]]\nat = \"30s\"\ndo = \"shed\"\nlb = \"edge\"\nroute = \"r\"\nstatus = 403\nretry_after = \"5s\"\n"
    );
    let e = err(&text);
    assert!(e.starts_with("broken.toml:25:1:"), "{e}");
    assert!(e.contains("retry_after"), "{e}");
}

#[test]
fn an_action_after_the_end_is_rejected() {
    let text = format!("{GOOD}\n[[action]]\nat = \"2m\"\ndo = \"restart_nodes\"\nlb = \"edge\"\n");
    let e = err(&text);
    assert!(e.contains("after the end of the run"), "{e}");
}

#[test]
fn an_unknown_field_in_an_action_is_rejected() {
    let text = format!(
        "{GOOD}\n[[action]]\nat = \"30s\"\ndo = \"restart_nodes\"\nlb = \"edge\"\nnode = 1\n"
    );
    let e = err(&text);
    assert!(e.contains("unknown field `node`"), "{e}");
}

#[test]
fn an_unknown_action_lists_the_known_ones() {
    let text = format!("{GOOD}\n[[action]]\nat = \"30s\"\ndo = \"reboot\"\n");
    let e = err(&text);
    assert!(e.contains("unknown value `reboot`"), "{e}");
    assert!(e.contains("pause_nodes"), "{e}");
}

#[test]
fn garbage_never_panics() {
    for text in [
        "",
        "[[",
        "[scenario]\nname = 1",
        "x = 1",
        "\u{0}",
        "[scenario]\nduration = \"-1s\"",
    ] {
        let e = err(text);
        assert!(e.starts_with("broken.toml"), "{e}");
    }
}

#[test]
fn a_job_queue_needs_a_worker_and_no_fan_out() {
    let e = err(&GOOD.replace(r#"timeout = "1s""#, "timeout = \"1s\"\nworkers = 0"));
    assert!(e.starts_with("broken.toml:"), "{e}");
    assert!(e.contains("workers must be ≥ 1"), "{e}");
    let e = err(&GOOD.replace(
        r#"timeout = "1s""#,
        "timeout = \"1s\"\nworkers = 4\nfanout = 2\ngive_up_after = \"5s\"",
    ));
    assert!(e.contains("cannot be combined with fanout"), "{e}");
}

/// The message of a scenario that is accepted, with its warnings.
fn warnings(text: &str) -> Vec<String> {
    Scenario::parse("warn.toml", text)
        .unwrap_or_else(|e| panic!("should be accepted: {e}"))
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect()
}

/// Asserts the exact position and a part of the message.
fn rejected_at(text: &str, pos: &str, part: &str) {
    let e = err(text);
    assert!(e.starts_with(&format!("broken.toml:{pos}: ")), "{e}");
    assert!(e.contains(part), "{e}");
}

#[test]
fn the_reference_and_incident_scenarios_parse_without_warnings() {
    assert!(warnings(GOOD).is_empty());
    let incident = stormbreak_sim::replay::scenario().expect("the incident scenario parses");
    assert!(incident.warnings.is_empty(), "{:?}", incident.warnings);
}

#[test]
fn counts_over_their_caps_point_at_the_value() {
    rejected_at(
        &GOOD.replace("nodes = 2", "nodes = 10001"),
        "7:9",
        r#"lb "edge": nodes must be at most 10000, got 10001"#,
    );
    rejected_at(
        &GOOD.replace("flows_per_node = 100", "flows_per_node = 10000001"),
        "8:18",
        "flows_per_node must be at most 10000000",
    );
    rejected_at(
        &GOOD.replace("replicas = 1", "replicas = 100001"),
        "12:12",
        r#"service "svc": replicas must be at most 100000, got 100001"#,
    );
    rejected_at(
        &GOOD.replace("workers = 2", "workers = 10000001"),
        "13:19",
        "app.workers must be at most 10000000",
    );
    rejected_at(
        &GOOD.replace(
            "replicas = 1",
            "replicas = 1\nautoscaler = { metric = \"app_cpu\", target = 0.6, min = 1, max = 100001, pod_start = \"0\" }",
        ),
        "13:65",
        "autoscaler.max must be at most 100000",
    );
    let client =
        |extra: &str| GOOD.replace(r#"timeout = "1s""#, &format!("timeout = \"1s\"\n{extra}"));
    rejected_at(
        &client("fanout = 101\ngive_up_after = \"5s\""),
        "24:10",
        r#"client "users": fanout must be at most 100, got 101"#,
    );
    rejected_at(
        &client("fanout = 2\ngive_up_after = \"5s\"\nfanout_max_in_flight = 10001"),
        "26:24",
        "fanout_max_in_flight must be at most 10000",
    );
    rejected_at(
        &client("workers = 10000001"),
        "24:11",
        "workers must be at most 10000000",
    );
    rejected_at(
        &client("retry = { max_attempts = 101, max_attempts_cap = 200 }"),
        "24:26",
        "max_attempts must be at most 100",
    );
}

#[test]
fn zero_durations_that_make_no_sense_are_named() {
    rejected_at(
        &GOOD.replace(r#"timeout = "1s""#, r#"timeout = "0""#),
        "23:11",
        r#"client "users": timeout must be > 0"#,
    );
    rejected_at(
        &GOOD.replace(
            r#"timeout = "1s""#,
            "timeout = \"1s\"\nfanout = 2\ngive_up_after = \"5s\"\nfanout_delay = \"100ns\"",
        ),
        "26:16",
        "fanout_delay must be at least 1us, got 100ns",
    );
    rejected_at(
        &GOOD.replace(
            "replicas = 1",
            "replicas = 1\nsidecar = { limit = 10, queue = 5, queue_timeout = \"0\" }",
        ),
        "13:52",
        "sidecar.queue_timeout must be > 0",
    );
    // pod_start = "0" is allowed: a pod may be ready at once.
    assert!(warnings(&GOOD.replace(
        "replicas = 1",
        "replicas = 1\nautoscaler = { metric = \"app_cpu\", target = 0.6, min = 1, max = 3, pod_start = \"0\" }",
    ))
    .is_empty());
}

#[test]
fn run_length_and_interval_errors_have_a_position() {
    rejected_at(
        &GOOD.replace(r#"duration = "1m""#, r#"duration = "0""#),
        "3:12",
        "[scenario] duration must be > 0",
    );
    // Only the duration is written: the error points at it and says the
    // interval took its default.
    rejected_at(
        &GOOD.replace(r#"duration = "1m""#, r#"duration = "1s""#),
        "3:12",
        "[scenario] interval (default 10s) must be ≤ duration (1s)",
    );
    rejected_at(
        &GOOD.replace(r#"duration = "1m""#, "duration = \"1m\"\ninterval = \"2m\""),
        "4:12",
        "interval (2m) must be ≤ duration (1m)",
    );
    rejected_at(
        &GOOD.replace(r#"duration = "1m""#, r#"duration = "31d""#),
        "3:12",
        "duration must be at most 720h (30 days), got 744h",
    );
    rejected_at(
        &GOOD.replace(
            r#"duration = "1m""#,
            "duration = \"30d\"\ninterval = \"1s\"",
        ),
        "4:12",
        "makes 2592000 recording intervals, at most 200000: use an interval of at least \"13s\"",
    );
    rejected_at(
        &GOOD.replace(
            r#"duration = "1m""#,
            "duration = \"1m\"\nclock_origin = \"25:61\"",
        ),
        "4:16",
        r#"clock_origin: expected "HH:MM" (00:00 to 23:59), got "25:61""#,
    );
}

#[test]
fn rates_beyond_a_nanosecond_are_rejected_and_tiny_rates_warned() {
    rejected_at(
        &GOOD.replace(r#"rate = "100/s""#, r#"rate = "1001M/s""#),
        "22:8",
        r#"client "users": rate 1001000000/s is above 1e9/s (one arrival per nanosecond)"#,
    );
    rejected_at(
        &GOOD.replace(r#"rate = "100/s""#, "rate = nan"),
        "22:8",
        "expected a rate such as",
    );
    let step = |rate: &str| {
        GOOD.replace(
            r#"timeout = "1s""#,
            &format!("timeout = \"1s\"\nstep = [{{ at = \"10s\", rate = {rate} }}]"),
        )
    };
    rejected_at(&step("\"2G/s\""), "24:30", "expected a rate");
    rejected_at(
        &step("\"2000M/s\""),
        "24:30",
        "step 1: rate 2000000000/s is above 1e9/s",
    );
    let action = |rate: &str| {
        format!(
            "{GOOD}\n[[action]]\nat = \"30s\"\ndo = \"set_rate\"\nclient = \"users\"\nrate = {rate}\n"
        )
    };
    rejected_at(
        &action("\"5000M/s\""),
        "29:8",
        "action: set_rate: rate 5000000000/s is above 1e9/s",
    );
    // Flattened action fields lose their own span in serde: the action header.
    rejected_at(&action("-1.0"), "25:1", "expected a rate");
    // 0.001/s over one minute: 0.06 expected arrivals. Legal, but warned.
    let w = warnings(&GOOD.replace(r#"rate = "100/s""#, r#"rate = "0.001/s""#));
    assert_eq!(
        w,
        [
            "warn.toml:22:8: client \"users\": rate 0.001/s expects 0.060 arrivals in the whole run (1m): it will most likely send nothing"
        ]
    );
    assert_eq!(warnings(&step("\"0.001/s\"")).len(), 1);
    assert_eq!(warnings(&action("0.001")).len(), 1);
    // A rate of zero is a deliberate pause, not a warning.
    assert!(warnings(&action("0")).is_empty());
}

#[test]
fn non_finite_floats_are_rejected_with_the_field_named() {
    rejected_at(
        &GOOD.replace(
            "replicas = 1",
            "replicas = 1\nautoscaler = { metric = \"app_cpu\", target = nan, min = 1, max = 3, pod_start = \"0\" }",
        ),
        "13:45",
        "autoscaler.target must be a finite number > 0, got NaN",
    );
    rejected_at(
        &GOOD.replace(
            r#"timeout = "1s""#,
            "timeout = \"1s\"\ndiurnal = { amplitude = inf }",
        ),
        "24:25",
        "diurnal.amplitude must be a number in [0, 1), got inf",
    );
    rejected_at(
        &GOOD.replace(
            r#"{ dist = "exponential", mean = "1ms" }"#,
            r#"{ dist = "lognormal", median = "1ms", sigma = -0.5 }"#,
        ),
        "13:37",
        "app.service_time: sigma must be a finite number from 0 to 4, got -0.5",
    );
    rejected_at(
        &GOOD.replace(
            r#"timeout = "1s""#,
            "timeout = \"1s\"\nbudget = { kind = \"ratio\", retry_ratio = nan }",
        ),
        "24:42",
        "budget: retry_ratio must be between 0 and 1000, got NaN",
    );
    rejected_at(
        &format!(
            "{GOOD}\n[[action]]\nat = \"30s\"\ndo = \"admit\"\nlb = \"edge\"\nroute = \"r\"\nfraction = nan\n"
        ),
        "30:12",
        "admit: fraction must be a number in [0, 1], got NaN",
    );
}

#[test]
fn too_many_sites_points_at_the_first_one_over() {
    let mut text = GOOD.to_owned();
    for i in 0..256 {
        text.push_str(&format!(
            "\n[[client]]\nname = \"c{i}\"\nroute = \"r\"\nrate = \"1/s\"\ntimeout = \"1s\"\nsite = \"s{i}\"\n"
        ));
    }
    // The 256th extra client brings the 256th site: its `site` line.
    let line = 23 + 255 * 7 + 7;
    rejected_at(
        &text,
        &format!("{line}:8"),
        "at most 255 distinct client sites",
    );
}

#[test]
fn serde_messages_never_name_rust_types() {
    let client = |extra: &str| format!("{GOOD}{extra}\n");
    let broken = [
        client("step = 5"),
        client("step = [5]"),
        client("step = [{ at = 5, rate = \"1/s\" }]"),
        client("retry = 5"),
        client("retry = { backoff = 5 }"),
        client("retry = { backoff = { kind = 5 } }"),
        client("retry = { backoff = { jitter = [1] } }"),
        client("retry = { retry_on = [5] }"),
        client("budget = 5"),
        client("budget = { kind = \"ratio\", ttl = 5 }"),
        client("diurnal = 5"),
        client("workers = -1"),
        client("honour_retry_after = 3"),
        GOOD.replace(r#"{ dist = "exponential", mean = "1ms" }"#, "5"),
        GOOD.replace(r#"{ dist = "exponential", mean = "1ms" }"#, "{ dist = 5 }"),
        GOOD.replace("app = {", "sidecar = 5\napp = {"),
        GOOD.replace("app = {", "autoscaler = { metric = 5 }\napp = {"),
        GOOD.replace("nodes = 2", "nodes = 1.5"),
        GOOD.replace(r#"path = ["edge", "svc"]"#, "path = 5"),
        format!("{GOOD}\n[[action]]\nat = \"1s\"\ndo = 5\n"),
        format!(
            "{GOOD}\n[[action]]\nat = \"1s\"\ndo = \"ramp\"\nlb = \"edge\"\nroute = \"r\"\nsites = []\nrestore = 5\n"
        ),
        format!(
            "{GOOD}\n[[failover]]\nclients = []\nprimary = \"edge\"\nsecondary = \"edge\"\npolicy = 5\n"
        ),
        format!(
            "{GOOD}\n[[failover]]\nclients = []\nprimary = \"edge\"\nsecondary = \"edge\"\npolicy = {{ law = 5 }}\n"
        ),
        "scenario = 5".to_owned(),
        "[[scenario]]".to_owned(),
        "lb = 5".to_owned(),
    ];
    let rust_words = ["struct ", "enum ", "variant "];
    let types = [
        "RateStep",
        "ServiceTimeSpec",
        "ActionKind",
        "ActionSpec",
        "RetryConfig",
        "BackoffConfig",
        "BackoffKind",
        "Jitter",
        "RetryOn",
        "BudgetConfig",
        "DiurnalSpec",
        "SidecarSpec",
        "AutoscalerSpec",
        "ScaleMetric",
        "FailoverConfig",
        "SpillLaw",
        "StagedRestoreConfig",
        "Meta",
        "LbSpec",
        "RouteSpec",
        "u32",
        "u16",
        "f64",
    ];
    for text in &broken {
        let e = err(text);
        assert!(e.starts_with("broken.toml:"), "{e}");
        for w in rust_words {
            if let Some(i) = e.find(w) {
                let next = e[i + w.len()..].chars().next();
                assert!(
                    !next.is_some_and(|c| c.is_ascii_uppercase()),
                    "a Rust type name in: {e}"
                );
            }
        }
        for t in types {
            assert!(!e.contains(t), "{t} in: {e}");
        }
    }
}

#[test]
fn a_scenario_over_the_size_limit_is_refused() {
    let mut text = GOOD.to_owned();
    text.push_str(&"#".repeat(MAX_SCENARIO_BYTES));
    let e = err(&text);
    assert_eq!(
        e,
        "broken.toml: scenario file is larger than 4 MiB, the limit for one scenario \
         (a scenario describes a system, not data)"
    );
    // Just under the limit is still read.
    let mut text = GOOD.to_owned();
    text.push_str(&"#".repeat(MAX_SCENARIO_BYTES - GOOD.len()));
    assert_eq!(text.len(), MAX_SCENARIO_BYTES);
    assert!(Scenario::parse("big.toml", &text).is_ok());
}

#[test]
fn too_many_routes_points_at_the_first_one_over() {
    let mut text = GOOD.to_owned();
    // GOOD has one route; 10 000 more make 10 001, one over the limit.
    for i in 0..10_000 {
        text.push_str(&format!("\n[[route]]\nname = \"r{i}\"\npath = [\"svc\"]\n"));
    }
    let e = err(&text);
    assert!(e.contains("at most 10000 routes, got 10001"), "{e}");
    // Route index 10 000 is the 10 000th appended block: 4 lines each after
    // GOOD's 23, its `[[route]]` header on the block's second line.
    let line = 23 + 9_999 * 4 + 2;
    assert!(e.starts_with(&format!("broken.toml:{line}:")), "{e}");
}

/// `[service.autoscaler] behavior`: the policy crate's `Behavior`, its
/// errors at the offending value with the field path and what was expected.
mod autoscaler_behavior {
    use super::{GOOD, err, rejected_at};
    use stormbreak_policy::Nanos;
    use stormbreak_policy::autoscale::{ScalingPolicy, SelectPolicy};

    const UP: &str = r#"scale_up = { select_policy = "Max", policies = [{ type = "Pods", value = 1, period = "60s" }] }"#;

    /// GOOD with an autoscaler whose behavior is `behavior` (line 13).
    fn with(behavior: &str) -> String {
        GOOD.replace(
            "replicas = 1",
            &format!(
                "replicas = 2\nautoscaler = {{ metric = \"app_cpu\", target = 0.6, min = 2, max = 40, pod_start = \"30s\", behavior = {{ {behavior} }} }}"
            ),
        )
    }

    /// `line:column` of the first `needle` in `text`.
    fn pos(text: &str, needle: &str) -> String {
        let at = text.find(needle).expect("needle in text");
        let line = text[..at].matches('\n').count() + 1;
        let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("{line}:{col}")
    }

    /// The example of docs/scenarios.md, an inline table over several lines.
    #[test]
    fn the_documented_example_parses() {
        let example = r#"autoscaler = { metric = "app_cpu", target = 0.6, min = 2, max = 40, pod_start = "30s",
  behavior = { scale_up = { stabilization_window = "0s", select_policy = "Max",
                            policies = [{ type = "Pods", value = 1, period = "60s" }] },
               scale_down = { stabilization_window = "300s" } } }"#;
        let text = GOOD.replace("replicas = 1", &format!("replicas = 2\n{example}"));
        let sc = stormbreak_sim::Scenario::parse("ok.toml", &text).unwrap();
        let b = sc.services[0].autoscaler.as_ref().unwrap().behavior.clone();
        let b = b.unwrap();
        assert_eq!(
            b.scale_up.policies.as_deref(),
            Some(&[ScalingPolicy::pods(1, Nanos::from_secs(60))][..])
        );
        assert_eq!(b.scale_up.select_policy, Some(SelectPolicy::Max));
        assert_eq!(
            b.scale_down.stabilization_window,
            Some(Nanos::from_secs(300))
        );
        // Left out: taken from Kubernetes' defaults when the HPA is built.
        assert_eq!(b.scale_down.policies, None);
    }

    #[test]
    fn a_policy_period_outside_0_to_30m_is_named_with_its_path() {
        for (period, got) in [("0s", "got 0"), ("31m", "got 31m")] {
            let text = with(&UP.replace(r#""60s""#, &format!("{period:?}")));
            rejected_at(
                &text,
                &pos(&text, &format!("{period:?}")),
                &format!(
                    r#"service "svc": autoscaler.behavior.scale_up.policies[0].period must be in (0s, 30m], {got}"#
                ),
            );
        }
    }

    #[test]
    fn a_policy_value_of_zero_is_named_with_its_path() {
        let text = with(&UP.replace("value = 1", "value = 0"));
        rejected_at(
            &text,
            &pos(&text, "0, period"),
            r#"service "svc": autoscaler.behavior.scale_up.policies[0].value must be ≥ 1, got 0"#,
        );
    }

    #[test]
    fn unknown_fields_inside_behavior_are_refused_with_the_known_ones() {
        let text = with(&format!("{UP}, scale_dwn = {{}}"));
        rejected_at(
            &text,
            &pos(&text, "scale_dwn"),
            "unknown field `scale_dwn`, expected `scale_up` or `scale_down`",
        );
        // Kubernetes' own spelling is not the format's.
        let text = with("scale_down = { stabilizationWindowSeconds = 300 }");
        rejected_at(
            &text,
            &pos(&text, "stabilizationWindowSeconds"),
            "unknown field `stabilizationWindowSeconds`, expected one of `stabilization_window`, `select_policy`, `policies`, `tolerance`",
        );
        let text = with(
            r#"scale_up = { policies = [{ type = "Pods", value = 1, period = "60s", every = "1m" }] }"#,
        );
        rejected_at(
            &text,
            &pos(&text, "every"),
            "unknown field `every`, expected one of `type`, `value`, `period`",
        );
    }

    #[test]
    fn a_bad_select_policy_or_type_lists_kubernetes_values() {
        let text = with(&UP.replace(r#""Max""#, r#""Fastest""#));
        rejected_at(
            &text,
            &pos(&text, r#""Fastest""#),
            "unknown value `Fastest`, expected one of `Max`, `Min`, `Disabled`",
        );
        let text = with(&UP.replace(r#""Pods""#, r#""pods""#));
        rejected_at(
            &text,
            &pos(&text, r#""pods""#),
            "unknown value `pods`, expected `Pods` or `Percent`",
        );
    }

    #[test]
    fn windows_and_policy_counts_have_bounds() {
        let text = with(r#"scale_down = { stabilization_window = "61m" }"#);
        rejected_at(
            &text,
            &pos(&text, r#""61m""#),
            r#"service "svc": autoscaler.behavior.scale_down.stabilization_window must be ≤ 1h, got 1h1m"#,
        );
        let one = r#"{ type = "Percent", value = 10, period = "15s" }"#;
        let eleven = [one; 11].join(", ");
        let text = with(&format!("scale_down = {{ policies = [{eleven}] }}"));
        rejected_at(
            &text,
            &pos(&text, "[{"),
            r#"service "svc": autoscaler.behavior.scale_down.policies must be a list of at most 10 policies, got 11 policies"#,
        );
        let text = with("scale_down = { policies = [] }");
        rejected_at(
            &text,
            &pos(&text, "[]"),
            "scale_down.policies must be a list of at least one policy when given",
        );
    }

    /// The history the HPA allocates is one entry per sync over its longest
    /// window: a 1 ns sync period once asked for 4.8 TB and aborted.
    #[test]
    fn a_sync_period_too_short_for_the_history_is_refused() {
        let text = GOOD.replace(
            "replicas = 1",
            "replicas = 2\nautoscaler = { metric = \"app_cpu\", target = 0.6, min = 2, max = 4, pod_start = \"0\", sync_period = \"1ns\" }",
        );
        rejected_at(
            &text,
            &pos(&text, r#""1ns""#),
            r#"service "svc": autoscaler.sync_period must be at least 3ms"#,
        );
    }

    #[test]
    fn the_sub_table_form_reads_alike_and_errors_point_into_it() {
        let text = GOOD.replace(
            "\n[[route]]",
            "\n[service.autoscaler]\nmetric = \"app_cpu\"\ntarget = 0.6\nmin = 1\nmax = 4\npod_start = \"30s\"\n\n[service.autoscaler.behavior.scale_up]\nselect_policy = \"Min\"\npolicies = [{ type = \"Pods\", value = 1, period = \"30m1s\" }]\n\n[[route]]",
        );
        rejected_at(
            &text,
            &pos(&text, r#""30m1s""#),
            r#"service "svc": autoscaler.behavior.scale_up.policies[0].period must be in (0s, 30m], got 30m1s"#,
        );
        let ok = text.replace("30m1s", "30m");
        let sc = stormbreak_sim::Scenario::parse("ok.toml", &ok).unwrap();
        let up = sc.services[0]
            .autoscaler
            .as_ref()
            .unwrap()
            .behavior
            .clone()
            .unwrap()
            .scale_up;
        assert_eq!(up.select_policy, Some(SelectPolicy::Min));
    }

    #[test]
    fn behavior_type_errors_never_name_rust_types() {
        for b in [
            "scale_up = 5",
            "scale_up = { policies = 5 }",
            "scale_up = { policies = [5] }",
            "scale_up = { select_policy = 5 }",
            r#"scale_up = { policies = [{ type = 5, value = 1, period = "1m" }] }"#,
        ] {
            let e = err(&with(b));
            for t in [
                "Behavior",
                "ScalingRules",
                "ScalingPolicy",
                "PolicyKind",
                "SelectPolicy",
                "struct ",
                "enum ",
            ] {
                assert!(!e.contains(t), "{t} in: {e}");
            }
        }
        let e = err(&GOOD.replace(
            "replicas = 1",
            "replicas = 2\nautoscaler = { metric = \"app_cpu\", target = 0.6, min = 2, max = 4, pod_start = \"0\", behavior = 5 }",
        ));
        assert!(
            e.contains("expected a behavior table like { scale_up = {"),
            "{e}"
        );
    }
}

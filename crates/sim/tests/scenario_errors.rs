//! A broken scenario gets an error naming file:line:column and what was
//! expected — never a panic.

use stormbreak_sim::Scenario;

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
    assert!(e.starts_with("broken.toml:20:8:"), "{e}");
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
    assert!(e.contains("unknown variant `reboot`"), "{e}");
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

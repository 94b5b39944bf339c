//! The config file: errors name file:line:column, and policy blocks copied
//! from the simulator's scenarios configure the guard unchanged.

use stormbreak_guard::GuardConfig;

const BASE: &str = r#"[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["127.0.0.1:9"]

[[route]]
name = "app"
cluster = "app"
"#;

fn err(text: &str) -> String {
    GuardConfig::parse("g.toml", text).unwrap_err().to_string()
}

#[test]
fn the_base_config_is_valid() {
    let c = GuardConfig::parse("g.toml", BASE).unwrap();
    assert_eq!(
        (c.listeners.len(), c.clusters.len(), c.routes.len()),
        (1, 1, 1)
    );
}

#[test]
fn syntax_and_type_errors_name_line_and_column() {
    let e = err(&BASE.replace("bind = \"127.0.0.1:0\"", "bind = 80"));
    assert!(e.starts_with("g.toml:3:8: "), "{e}");
    let e = err(&format!("{BASE}surprise = 1\n"));
    assert!(
        e.starts_with("g.toml:12:1: ") && e.contains("unknown field `surprise`"),
        "{e}"
    );
    let e = err("[[listener]\n");
    assert!(e.starts_with("g.toml:1:"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_offending_value() {
    let e = err(&BASE.replace("bind = \"127.0.0.1:0\"", "bind = \"localhost\""));
    assert!(e.starts_with("g.toml:3:8: expected an ip:port"), "{e}");
    let e = err(&BASE.replace("cluster = \"app\"\n", "cluster = \"nope\"\n"));
    assert!(
        e.starts_with("g.toml:11:11: route \"app\": no [[cluster]] named \"nope\""),
        "{e}"
    );
    let e = err(&BASE.replace("\"127.0.0.1:9\"", "\"127.0.0.1:9\", \"example.com:80\""));
    assert!(
        e.starts_with("g.toml:7:29: cluster \"app\": expected an ip:port endpoint"),
        "{e}"
    );
    // A policy's FieldError lands on the field inside the block.
    let e = err(&format!(
        "{BASE}retry = {{ max_attempts = 2, backoff = {{ base = \"1s\", max = \"10ms\" }} }}\n"
    ));
    assert!(e.starts_with("g.toml:12:"), "{e}");
    assert!(e.contains("route \"app\": retry: backoff.max"), "{e}");
    let e = err(&format!(
        "{BASE}budget = {{ kind = \"ratio\", retry_ratio = -1 }}\n"
    ));
    assert!(
        e.starts_with("g.toml:12:42: route \"app\": budget: retry_ratio must be"),
        "{e}"
    );
    let e = err(&format!(
        "{BASE}\n[[shed]]\nroute = \"app\"\nstatus = 403\nretry_after = \"5s\"\n"
    ));
    assert!(
        e.starts_with("g.toml:16:15: ") && e.contains("403 tells clients not to retry"),
        "{e}"
    );
    let e = err(&format!(
        "{BASE}\n[[shed]]\nroute = \"ghost\"\nstatus = 503\n"
    ));
    assert!(
        e.starts_with("g.toml:14:9: no [[route]] named \"ghost\""),
        "{e}"
    );
    let e = err(&format!(
        "{BASE}limit = {{ kind = \"aimd\", min_limit = 0 }}\n"
    ));
    assert!(
        e.starts_with("g.toml:12:") && e.contains("route \"app\": limit:"),
        "{e}"
    );
}

#[test]
fn a_spill_law_needs_a_failover_cluster_and_capacities() {
    let e = err(&format!("{BASE}failover_policy = {{}}\n"));
    assert!(
        e.starts_with("g.toml:12:19: route \"app\": a failover_policy needs `failover`"),
        "{e}"
    );
    let text = BASE.replace("[[route]]", "[[cluster]]\nname = \"west\"\nendpoints = [\"127.0.0.1:10\"]\nendpoint_capacity = \"1k/s\"\n\n[[route]]");
    let e = err(&format!(
        "{text}failover = \"west\"\nfailover_policy = {{}}\n"
    ));
    assert!(
        e.contains("the spill law needs cluster \"app\" to set endpoint_capacity"),
        "{e}"
    );
    let ok = text.replace(
        "endpoints = [\"127.0.0.1:9\"]",
        "endpoints = [\"127.0.0.1:9\"]\nendpoint_capacity = 500",
    );
    GuardConfig::parse("g.toml", &format!("{ok}failover = \"west\"\nfailover_policy = {{ law = {{ kind = \"capacity_aware\", target_utilisation = 0.7 }} }}\n"))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Every trimmed line of every shipped scenario, with its file.
fn scenario_lines() -> Vec<(std::path::PathBuf, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        out.extend(text.lines().map(|l| (path.clone(), l.trim().to_owned())));
    }
    out
}

/// Every `retry = { ... }` line of every scenario, pasted into a route.
#[test]
fn retry_blocks_copied_from_the_scenarios_configure_the_guard_unchanged() {
    let mut blocks = 0;
    for (path, line) in scenario_lines() {
        if line.starts_with("retry = {") || line.starts_with("budget = {") {
            let config = format!("{BASE}{line}\n");
            if let Err(e) = GuardConfig::parse("g.toml", &config) {
                panic!("{}: {line}\n{e}", path.display());
            }
            blocks += 1;
        }
    }
    assert!(
        blocks >= 5,
        "only {blocks} policy blocks found in scenarios/"
    );
}

/// A simulated gateway's `limit`, `queue` and `saturation` lines: the
/// first two pasted into a route, the last as the guard's `[saturation]`.
#[test]
fn gateway_admission_blocks_copied_from_the_scenarios_configure_the_guard_unchanged() {
    let mut blocks = 0;
    for (path, line) in scenario_lines() {
        let config = if line.starts_with("limit = {") {
            format!("{BASE}{line}\n")
        } else if line.starts_with("queue = {") {
            // As in the scenario, a queue waits for a limit.
            format!("{BASE}limit = {{ kind = \"fixed\", limit = 4 }}\n{line}\n")
        } else if line.starts_with("saturation = {") {
            // A top-level key must come before the first table.
            format!("{line}\n{BASE}")
        } else {
            continue;
        };
        if let Err(e) = GuardConfig::parse("g.toml", &config) {
            panic!("{}: {line}\n{e}", path.display());
        }
        blocks += 1;
    }
    assert!(
        blocks >= 3,
        "only {blocks} admission blocks found in scenarios/"
    );
}

#[test]
fn a_block_means_the_same_to_the_guard_as_to_the_policy_crate() {
    let line = r#"retry = { max_attempts = 3, overall_timeout = "10s", backoff = { kind = "constant", base = "0" } }"#;
    let config = GuardConfig::parse("g.toml", &format!("{BASE}{line}\n")).unwrap();
    let direct: toml::Table = toml::from_str(line).unwrap();
    let direct: stormbreak_policy::retry::RetryConfig = direct["retry"].clone().try_into().unwrap();
    assert_eq!(config.routes[0].retry.as_ref(), Some(&direct));
}

#[test]
fn a_dependency_names_a_cluster_a_path_and_a_timeout() {
    let route = |dependency: &str| {
        BASE.replace(
            "cluster = \"app\"\n",
            &format!("cluster = \"app\"\ndependency = {{ {dependency} }}\n"),
        )
    };
    let c = GuardConfig::parse(
        "g.toml",
        &route(r#"cluster = "app", path = "/check", timeout = "200ms""#),
    )
    .unwrap();
    let d = c.routes[0].dependency.as_ref().unwrap();
    assert_eq!(
        (d.method.as_str(), d.pass_headers.as_slice()),
        ("GET", &["authorization".to_owned()][..])
    );
    for (dependency, want) in [
        (
            r#"cluster = "auth", path = "/check", timeout = "1s""#,
            "g.toml:12:26: route \"app\": no [[cluster]] named \"auth\"",
        ),
        (
            r#"cluster = "app", path = "check", timeout = "1s""#,
            "g.toml:12:40: route \"app\": expected a path starting with '/'",
        ),
        (
            r#"cluster = "app", path = "/check", timeout = "0""#,
            "g.toml:12:60: route \"app\": expected a duration > 0",
        ),
        (
            r#"cluster = "app", path = "/check", timeout = "1s", method = "G T""#,
            "g.toml:12:75: route \"app\": expected an HTTP method",
        ),
        (
            r#"cluster = "app", path = "/check", timeout = "1s", pass_headers = ["bad header"]"#,
            "g.toml:12:82: route \"app\": expected a header name",
        ),
        (
            r#"cluster = "app", path = "/check""#,
            "g.toml:12:14: missing field `timeout`",
        ),
    ] {
        let e = err(&route(dependency));
        assert!(e.starts_with(want), "{dependency}: {e}");
    }
}

#[test]
fn a_listener_takes_a_backlog_and_what_to_do_at_its_cap() {
    let listener = |extra: &str| {
        BASE.replace(
            "bind = \"127.0.0.1:0\"\n",
            &format!("bind = \"127.0.0.1:0\"\n{extra}\n"),
        )
    };
    let c = GuardConfig::parse("g.toml", BASE).unwrap();
    assert_eq!(c.listeners[0].backlog, 1024);
    assert_eq!(
        c.listeners[0].at_connection_cap,
        stormbreak_guard::config::AtConnectionCap::Queue
    );
    let c = GuardConfig::parse(
        "g.toml",
        &listener("backlog = 64\nat_connection_cap = \"refuse\""),
    )
    .unwrap();
    assert_eq!(c.listeners[0].backlog, 64);
    assert_eq!(
        c.listeners[0].at_connection_cap,
        stormbreak_guard::config::AtConnectionCap::Refuse
    );
    let e = err(&listener("backlog = 0"));
    assert!(
        e.starts_with("g.toml:4:11: expected between 1 and 65535, got 0"),
        "{e}"
    );
    let e = err(&listener("at_connection_cap = \"drop\""));
    assert!(e.starts_with("g.toml:4:21: unknown variant `drop`"), "{e}");
}

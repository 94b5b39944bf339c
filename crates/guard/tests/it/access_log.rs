//! The JSON-lines access log: one line per request naming the decision
//! that shaped its answer, with the fields docs/guard.md lists; bounded by
//! its rate (the excess dropped and counted); config errors with positions.
//! (The gate's timing in virtual time is a unit test in src/access_log.rs.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::files::TempDir;
use crate::common::*;
use serde_json::Value;
use stormbreak_guard::GuardConfig;

/// A guard whose routes each end in one decision kind, logging to `log`.
fn config(backend: &Backend, log: &std::path::Path, rate: &str, burst: u32) -> String {
    format!(
        r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"
# The tests' own criticality header is believed.
trusted_proxies = ["127.0.0.1"]

[[cluster]]
name = "app"
endpoints = ["{addr}"]

[[route]]
name = "ok"
match = {{ path_prefix = "/ok" }}
cluster = "app"

[[route]]
name = "shed"
match = {{ path_prefix = "/shed" }}
cluster = "app"

[[route]]
name = "rate"
match = {{ path_prefix = "/rate" }}
cluster = "app"
rate_limit = {{ rate = "1/h", burst = 1 }}

[[route]]
name = "limited"
match = {{ path_prefix = "/limited" }}
cluster = "app"
limit = {{ kind = "fixed", limit = 1 }}

[[route]]
name = "budget"
match = {{ path_prefix = "/budget" }}
cluster = "app"
retry = {{ max_attempts = 3, backoff = {{ kind = "constant", base = "0" }} }}
budget = {{ kind = "ratio", retry_ratio = 0.0, min_retries_per_sec = 0 }}

[[shed]]
route = "shed"
status = 403

[access_log]
to = "file"
path = "{log}"
rate = "{rate}"
burst = {burst}
"#,
        addr = backend.addr,
        log = log.display(),
    )
}

/// `/budget` fails, `/limited/hold` waits for `release`, the rest answer 200.
async fn app(release: Arc<tokio::sync::Notify>) -> Backend {
    backend_async(move |seen| {
        let release = release.clone();
        async move {
            match seen.head.uri.path() {
                "/budget" => status(503),
                "/limited/hold" => {
                    release.notified().await;
                    status(200)
                }
                _ => status(200),
            }
        }
    })
    .await
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decision_kind_is_logged_with_route_upstream_status_attempts_and_latency() {
    let dir = TempDir::new("guard-access-log-kinds");
    let log = dir.path().join("access.log");
    let release = Arc::new(tokio::sync::Notify::new());
    let b = app(release.clone()).await;
    let g = guard(&config(&b, &log, "1k/s", 1000)).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();

    assert_eq!(send(&client, get(edge, "/ok")).await.0.status, 200);
    assert_eq!(send(&client, get(edge, "/shed")).await.0.status, 403);
    assert_eq!(send(&client, get(edge, "/rate")).await.0.status, 200);
    assert_eq!(send(&client, get(edge, "/rate")).await.0.status, 429);
    assert_eq!(send(&client, get(edge, "/budget")).await.0.status, 503);
    assert_eq!(send(&client, get(edge, "/nothing")).await.0.status, 404);
    // Hold the limit's one slot, then be refused by it.
    let hold =
        tokio::spawn(async move { send(&http1_client(), get(edge, "/limited/hold")).await.0 });
    for _ in 0..500 {
        if b.hits.load(Ordering::SeqCst) == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b.hits(), 4, "ok, rate, budget, hold reached the backend");
    // At saturation 1.0 a sheddable request is shed by class; a
    // critical_plus one (threshold 1.2) reaches the full limiter.
    let class = |path: &str, class: &str| {
        let mut r = get(edge, path);
        r.headers_mut()
            .insert("x-stormbreak-criticality", class.parse().unwrap());
        r
    };
    let sheddable = send(&client, class("/limited/x", "sheddable")).await.0;
    assert_eq!(sheddable.status, 503);
    let critical = send(&client, class("/limited/y", "critical_plus")).await.0;
    assert_eq!(critical.status, 503);
    release.notify_one();
    assert_eq!(hold.await.unwrap().status, 200);
    g.shutdown().await;

    let all = lines(&log);
    assert_eq!(all.len(), 9, "one line per request: {all:#?}");
    let find = |path: &str, status: u64| {
        all.iter()
            .find(|l| l["path"] == path && l["status"] == status)
            .unwrap_or_else(|| panic!("no line for {path} {status}: {all:#?}"))
    };
    // The documented fields, in order, on every line (shed_reason only on sheds).
    for l in &all {
        let keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "time_unix_ms",
            "listener",
            "method",
            "path",
            "route",
            "upstream",
            "status",
            "attempts",
            "decision",
            "latency_ms",
        ];
        if l["decision"] == "shed" {
            want.insert(9, "shed_reason");
        }
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(sorted, want, "{l}");
        assert!(
            l["time_unix_ms"].as_u64().unwrap() > 1_600_000_000_000,
            "{l}"
        );
        assert!(l["latency_ms"].as_f64().unwrap() >= 0.0, "{l}");
        assert_eq!(
            (&l["listener"], &l["method"]),
            (&"edge".into(), &"GET".into())
        );
    }
    let expect = |l: &Value, route: Value, upstream: Value, attempts: u64, decision: &str| {
        assert_eq!(l["route"], route, "{l}");
        assert_eq!(l["upstream"], upstream, "{l}");
        assert_eq!(l["attempts"], attempts, "{l}");
        assert_eq!(l["decision"], decision, "{l}");
    };
    expect(find("/ok", 200), "ok".into(), "app".into(), 1, "proxied");
    let shed = find("/shed", 403);
    expect(shed, "shed".into(), Value::Null, 0, "shed");
    assert_eq!(shed["shed_reason"], "rule");
    expect(
        find("/rate", 200),
        "rate".into(),
        "app".into(),
        1,
        "proxied",
    );
    expect(
        find("/rate", 429),
        "rate".into(),
        Value::Null,
        0,
        "rate_limited",
    );
    // The first attempt failed and the zero budget refused the retry.
    expect(
        find("/budget", 503),
        "budget".into(),
        "app".into(),
        1,
        "budget_denied",
    );
    expect(
        find("/nothing", 404),
        Value::Null,
        Value::Null,
        0,
        "no_route",
    );
    let saturated = find("/limited/x", 503);
    expect(saturated, "limited".into(), Value::Null, 0, "shed");
    assert_eq!(saturated["shed_reason"], "saturation");
    expect(
        find("/limited/y", 503),
        "limited".into(),
        Value::Null,
        0,
        "limited",
    );
    expect(
        find("/limited/hold", 200),
        "limited".into(),
        "app".into(),
        1,
        "proxied",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_beyond_the_rate_are_dropped_and_counted_in_a_metric() {
    let dir = TempDir::new("guard-access-log-bound");
    let log = dir.path().join("access.log");
    let b = app(Arc::new(tokio::sync::Notify::new())).await;
    // 1/h: no line is earned back while the test runs, whatever the
    // machine's speed, so exactly the burst is written.
    let g = guard(&config(&b, &log, "1/h", 3)).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..10 {
        assert_eq!(send(&client, get(edge, "/ok")).await.0.status, 200);
    }
    let text = g.metrics_text();
    let dropped = |reason: &str| {
        let prefix = format!("stormbreak_guard_access_log_dropped_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}in\n{text}"))
            .to_owned()
    };
    assert_eq!(dropped("rate"), "7");
    assert_eq!(dropped("queue_full"), "0");
    assert_eq!(g.stats().requests(), 10, "every request was served");
    g.shutdown().await;
    let all = lines(&log);
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(all.iter().all(|l| l["decision"] == "proxied"));
}

#[test]
fn config_errors_name_the_access_log_field() {
    let dir = TempDir::new("guard-access-log-config");
    let base = "[[listener]]\nname = \"edge\"\nbind = \"127.0.0.1:0\"\n\n[access_log]\n";
    for (body, want) in [
        (
            "to = \"file\"\n",
            "test.toml:6:6: to = \"file\" needs access_log.path",
        ),
        (
            "to = \"stdout\"\npath = \"x.log\"\n",
            "test.toml:7:8: path is only read with to = \"file\"",
        ),
        (
            "to = \"stdout\"\nrate = \"0/s\"\n",
            "test.toml:7:8: access_log: ratelimit: rate must be",
        ),
        (
            "to = \"stdout\"\nburst = 0\n",
            "test.toml:7:9: access_log: ratelimit: burst must be ≥ 1, got 0",
        ),
        (
            "to = \"syslog\"\n",
            "test.toml:6:6: unknown variant `syslog`",
        ),
    ] {
        let e = GuardConfig::parse("test.toml", &format!("{base}{body}")).unwrap_err();
        assert!(e.to_string().starts_with(want), "{e}\nwanted {want}");
    }
    // A file that cannot be opened refuses to start, naming it.
    let missing = dir.path().join("no-such-dir").join("access.log");
    let text = format!("{base}to = \"file\"\npath = \"{}\"\n", missing.display());
    let config = GuardConfig::parse("test.toml", &text).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(stormbreak_guard::Guard::start(&config))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("cannot open"), "{e}");
}

// A reload may change `[access_log]`: tests/reload.rs,
// `a_reload_switches_the_access_log_and_refuses_one_it_cannot_open`.

//! `/metrics` and the admin API over loopback: the exposition parses and
//! counts what was sent under bounded labels; mutations need the token, take
//! effect on the next request and are listed with who made them; an admin
//! listener off loopback without a token is refused.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::Full;
use prometheus_parse::{LineInfo, Scrape, Value};
use stormbreak_guard::{Guard, GuardConfig};

fn config(b: &Backend, admin: &str) -> String {
    format!(
        r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["{}"]

[[route]]
name = "ok"
match = {{ path_prefix = "/ok" }}
cluster = "app"
limit = {{ kind = "fixed", limit = 10 }}

[[route]]
name = "fail"
match = {{ path_prefix = "/fail" }}
cluster = "app"
retry = {{ max_attempts = 3, backoff = {{ kind = "constant", base = "1ms" }} }}
budget = {{ kind = "ratio", retry_ratio = 0.2, min_retries_per_sec = 100 }}

[admin]
{admin}
"#,
        b.addr
    )
}

async fn app() -> Backend {
    backend(|seen| {
        if seen.head.uri.path().starts_with("/fail") {
            status(503)
        } else {
            status(200)
        }
    })
    .await
}

fn admin_request(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    body: serde_json::Value,
) -> Request<Full<Bytes>> {
    let mut r = Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .header("x-stormbreak-operator", "alice");
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    r.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

async fn state(client: &HttpClient, admin: SocketAddr) -> serde_json::Value {
    let (parts, body) = send(client, get(admin, "/state")).await;
    assert_eq!(parts.status, 200, "{body:?}");
    serde_json::from_slice(&body).unwrap()
}

/// Sample value by metric name and labels.
fn sample(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.iter().map(|c| c.count).fold(0.0, f64::max),
            Value::Summary(_) => f64::NAN,
        })
}

#[tokio::test]
async fn metrics_parse_count_what_was_sent_and_keep_labels_to_config_names() {
    let b = app().await;
    let g = guard(&config(&b, r#"bind = "127.0.0.1:0""#)).await;
    let (edge, admin) = (g.local_addr("edge").unwrap(), g.admin_addr().unwrap());
    let client = http1_client();
    // Distinct paths and client keys: none of them may become a label.
    for i in 0..20 {
        let (p, _) = send(&client, get(edge, &format!("/ok/{i}"))).await;
        assert_eq!(p.status, 200);
    }
    for i in 0..5 {
        let (p, _) = send(&client, get(edge, &format!("/fail/{i}"))).await;
        assert_eq!(p.status, 503);
    }
    for i in 0..3 {
        let (p, _) = send(&client, get(edge, &format!("/nowhere/{i}"))).await;
        assert_eq!(p.status, 404);
    }
    let (parts, body) = send(&client, get(admin, "/metrics")).await;
    assert_eq!(parts.status, 200);
    assert!(
        parts.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert_eq!(
        text.lines().last(),
        Some("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    // Every line is a comment the format defines or a sample the parser reads.
    for line in text.lines() {
        match LineInfo::parse(line) {
            LineInfo::Doc { .. } | LineInfo::Type { .. } | LineInfo::Sample { .. } => {}
            LineInfo::Empty => panic!("empty line in the exposition"),
            LineInfo::Ignored => assert!(
                line == "# EOF" || line.starts_with("# UNIT "),
                "unparsed line {line:?}"
            ),
        }
    }
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let get = |name: &str, labels: &[(&str, &str)]| {
        sample(&scrape, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing"))
    };
    assert_eq!(
        get("stormbreak_guard_requests_total", &[("route", "ok")]),
        20.0
    );
    assert_eq!(
        get(
            "stormbreak_guard_responses_total",
            &[("route", "ok"), ("class", "2xx")]
        ),
        20.0
    );
    assert_eq!(
        get(
            "stormbreak_guard_responses_total",
            &[("route", "fail"), ("class", "5xx")]
        ),
        5.0
    );
    // Three attempts each, within the budget's 100/s floor.
    assert_eq!(
        get("stormbreak_guard_attempts_total", &[("route", "fail")]),
        15.0
    );
    assert_eq!(
        get("stormbreak_guard_retries_total", &[("route", "fail")]),
        10.0
    );
    assert_eq!(get("stormbreak_guard_no_route_total", &[]), 3.0);
    assert_eq!(get("stormbreak_guard_limit", &[("route", "ok")]), 10.0);
    assert_eq!(get("stormbreak_guard_saturation", &[("route", "ok")]), 0.0);
    assert_eq!(get("stormbreak_guard_inflight", &[("route", "ok")]), 0.0);
    assert_eq!(
        get(
            "stormbreak_guard_upstream_endpoints_available",
            &[("cluster", "app")]
        ),
        1.0
    );
    assert_eq!(
        get("stormbreak_guard_connection_cap", &[("listener", "edge")]),
        10000.0
    );
    // The latency histogram: every answer counted, with the fixed buckets.
    let histogram = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "stormbreak_guard_request_duration_seconds"
                && s.labels.get("route") == Some("ok")
        })
        .expect("latency histogram");
    let Value::Histogram(buckets) = &histogram.value else {
        panic!("{:?}", histogram.value)
    };
    let bounds: Vec<f64> = buckets.iter().map(|c| c.less_than).collect();
    let mut want = stormbreak_guard::metrics::LATENCY_BUCKETS.to_vec();
    want.push(f64::INFINITY);
    assert_eq!(bounds, want);
    assert_eq!(buckets.last().unwrap().count, 20.0);
    // Labels come from config names only, never from paths or clients.
    let mut values = BTreeSet::new();
    for s in &scrape.samples {
        for (k, v) in s.labels.iter() {
            if k != "le" {
                values.insert(format!("{k}={v}"));
            }
        }
    }
    let allowed: BTreeSet<String> = [
        "route=ok",
        "route=fail",
        "cluster=app",
        "listener=edge",
        "class=1xx",
        "class=2xx",
        "class=3xx",
        "class=4xx",
        "class=5xx",
        "reason=rule",
        "reason=saturation",
        "reason=restore",
        "reason=limit",
        "reason=rate",
        "reason=queue_full",
        &format!("version={}", env!("CARGO_PKG_VERSION")),
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert!(
        values.is_subset(&allowed),
        "{:?}",
        values.difference(&allowed)
    );
    g.shutdown().await;
}

#[tokio::test]
async fn mutations_need_the_token_take_effect_and_are_listed_with_who_made_them() {
    let b = app().await;
    let dir = common::files::TempDir::new("guard-admin-mutations");
    let token = dir.write("admin.token", "s3cret-token\n");
    let admin_cfg = format!(
        "bind = \"127.0.0.1:0\"\ntoken_file = {:?}",
        token.display().to_string()
    );
    let g = guard(&config(&b, &admin_cfg)).await;
    let (edge, admin) = (g.local_addr("edge").unwrap(), g.admin_addr().unwrap());
    let client = http1_client();
    let shed = serde_json::json!({ "route": "ok", "status": 403 });

    // Without the token, or with a wrong one (same length, and not): refused, no effect.
    for t in [None, Some("s3cret-tokeN"), Some("s3cret"), Some("")] {
        let (p, _) = send(&client, admin_request(admin, "/shed/add", t, shed.clone())).await;
        assert_eq!(p.status, 401, "token {t:?}");
    }
    assert_eq!(send(&client, get(edge, "/ok")).await.0.status, 200);

    let (p, body) = send(
        &client,
        admin_request(admin, "/shed/add", Some("s3cret-token"), shed.clone()),
    )
    .await;
    assert_eq!(p.status, 200, "{body:?}");
    let (p, _) = send(&client, get(edge, "/ok")).await;
    assert_eq!(p.status, 403);
    assert!(
        !p.headers.contains_key("retry-after"),
        "403 carries no Retry-After"
    );
    let s = state(&client, admin).await;
    assert_eq!(s["shed_rules"][0]["route"], "ok");
    assert_eq!(s["shed_rules"][0]["status"], 403);
    let o = &s["overrides"][0];
    assert_eq!(o["what"], "shed.add");
    assert!(
        o["who"].as_str().unwrap().starts_with("alice (127.0.0.1:"),
        "{o}"
    );
    assert_eq!(o["detail"], shed);

    let key = serde_json::json!({ "route": "ok" });
    let (p, _) = send(
        &client,
        admin_request(admin, "/shed/remove", Some("s3cret-token"), key.clone()),
    )
    .await;
    assert_eq!(p.status, 200);
    assert_eq!(send(&client, get(edge, "/ok")).await.0.status, 200);
    // Removing it again: nothing to remove.
    let (p, _) = send(
        &client,
        admin_request(admin, "/shed/remove", Some("s3cret-token"), key),
    )
    .await;
    assert_eq!(p.status, 404);

    // A route's retry policy: three attempts, then one.
    let before = g.stats().attempts();
    assert_eq!(send(&client, get(edge, "/fail")).await.0.status, 503);
    assert_eq!(g.stats().attempts() - before, 3);
    let one = serde_json::json!({ "route": "fail", "retry": { "max_attempts": 1 } });
    let (p, body) = send(
        &client,
        admin_request(admin, "/retry", Some("s3cret-token"), one),
    )
    .await;
    assert_eq!(p.status, 200, "{body:?}");
    let before = g.stats().attempts();
    assert_eq!(send(&client, get(edge, "/fail")).await.0.status, 503);
    assert_eq!(g.stats().attempts() - before, 1);
    let bad = serde_json::json!({ "route": "fail", "retry": { "max_attempts": 99 } });
    let (p, _) = send(
        &client,
        admin_request(admin, "/retry", Some("s3cret-token"), bad),
    )
    .await;
    assert_eq!(p.status, 400, "an invalid policy is refused");
    let (p, _) = send(
        &client,
        admin_request(
            admin,
            "/retry",
            Some("s3cret-token"),
            serde_json::json!({ "route": "ok", "retry": { "max_attempts": 2 } }),
        ),
    )
    .await;
    assert_eq!(
        p.status, 409,
        "a route without retries has no policy to change"
    );

    // A staged restore started, stepped and stopped by hand.
    let restore = serde_json::json!({
        "route": "ok",
        "restore": { "ramp": { "steps": [0.25, 0.5, 1.0], "hold": "1h" } },
    });
    let (p, _) = send(
        &client,
        admin_request(
            admin,
            "/restore/step",
            Some("s3cret-token"),
            serde_json::json!({ "route": "ok" }),
        ),
    )
    .await;
    assert_eq!(p.status, 409, "nothing to step yet");
    let (p, body) = send(
        &client,
        admin_request(admin, "/restore/start", Some("s3cret-token"), restore),
    )
    .await;
    assert_eq!(p.status, 200, "{body:?}");
    let fraction = |s: &serde_json::Value| {
        s["routes"][0]["restore"]["fractions"][0][1]
            .as_f64()
            .unwrap()
    };
    assert_eq!(fraction(&state(&client, admin).await), 0.25);
    let (p, _) = send(
        &client,
        admin_request(
            admin,
            "/restore/step",
            Some("s3cret-token"),
            serde_json::json!({ "route": "ok" }),
        ),
    )
    .await;
    assert_eq!(p.status, 200);
    let s = state(&client, admin).await;
    assert_eq!(fraction(&s), 0.5);
    assert_eq!(s["routes"][0]["restore"]["running"], true);
    let (p, _) = send(
        &client,
        admin_request(
            admin,
            "/restore/stop",
            Some("s3cret-token"),
            serde_json::json!({ "route": "ok" }),
        ),
    )
    .await;
    assert_eq!(p.status, 200);
    let s = state(&client, admin).await;
    assert_eq!(s["routes"][0]["restore"]["running"], false);
    assert_eq!(fraction(&s), 1.0);
    // Every change listed, in order.
    let whats: Vec<&str> = s["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["what"].as_str().unwrap())
        .collect();
    assert_eq!(
        whats,
        [
            "shed.add",
            "shed.remove",
            "retry.set",
            "restore.start",
            "restore.step",
            "restore.stop"
        ]
    );
    g.shutdown().await;
}

#[tokio::test]
async fn without_a_token_the_admin_api_is_read_only() {
    let b = app().await;
    let g = guard(&config(&b, r#"bind = "127.0.0.1:0""#)).await;
    let admin = g.admin_addr().unwrap();
    let client = http1_client();
    let shed = serde_json::json!({ "route": "ok", "status": 503 });
    let (p, _) = send(
        &client,
        admin_request(admin, "/shed/add", Some("anything"), shed),
    )
    .await;
    assert_eq!(p.status, 403);
    let s = state(&client, admin).await;
    assert_eq!(s["shed_rules"], serde_json::json!([]));
    let names: HashMap<_, _> = s["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r["retry"].clone()))
        .collect();
    assert_eq!(names["fail"]["max_attempts"], 3);
    g.shutdown().await;
}

#[tokio::test]
async fn an_admin_listener_off_loopback_needs_a_token() {
    let b = app().await;
    let e = GuardConfig::parse("guard.toml", &config(&b, r#"bind = "0.0.0.0:0""#)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("guard.toml:24:8: "), "{msg}");
    assert!(msg.contains("not a loopback address"), "{msg}");
    // With a token source it is accepted (this test does not bind it).
    let with_token = config(
        &b,
        "bind = \"0.0.0.0:0\"\ntoken_env = \"STORMBREAK_TEST_UNSET_TOKEN\"",
    );
    let parsed = GuardConfig::parse("guard.toml", &with_token).unwrap();
    // The token's source must yield one, or the guard does not start.
    let err = Guard::start(&parsed)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("STORMBREAK_TEST_UNSET_TOKEN is not set"),
        "{err}"
    );
    let missing = config(
        &b,
        "bind = \"127.0.0.1:0\"\ntoken_file = \"/nonexistent/stormbreak-token\"",
    );
    let parsed = GuardConfig::parse("guard.toml", &missing).unwrap();
    let err = Guard::start(&parsed)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("admin.token_file"), "{err}");
}

#[tokio::test]
async fn post_drain_needs_the_token_and_starts_a_clean_drain() {
    let b = app().await;
    let dir = common::files::TempDir::new("guard-admin-drain");
    let token = dir.write("admin.token", "s3cret-token\n");
    let admin_cfg = format!(
        "bind = \"127.0.0.1:0\"\ntoken_file = {:?}",
        token.display().to_string()
    );
    let g = guard(&config(&b, &admin_cfg)).await;
    let (edge, admin) = (g.local_addr("edge").unwrap(), g.admin_addr().unwrap());
    let client = http1_client();
    let null = serde_json::Value::Null;
    let (p, _) = send(&client, admin_request(admin, "/drain", None, null.clone())).await;
    assert_eq!(p.status, 401);
    // Not draining: the edge still serves.
    assert_eq!(send(&client, get(edge, "/ok")).await.0.status, 200);

    let (p, body) = send(
        &client,
        admin_request(admin, "/drain", Some("s3cret-token"), null.clone()),
    )
    .await;
    assert_eq!(p.status, 202, "{body:?}");
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v, serde_json::json!({ "draining": true, "already": false }));
    // What `stormbreak guard` waits on before draining (a hang guard only).
    tokio::time::timeout(std::time::Duration::from_secs(10), g.drain_requested())
        .await
        .expect("the drain was requested");
    let (_, body) = send(
        &client,
        admin_request(admin, "/drain", Some("s3cret-token"), null),
    )
    .await;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["already"], true);
    drop(client);
    assert_eq!(g.drain(std::time::Duration::from_secs(10)).await, 0);
}

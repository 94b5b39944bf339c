//! `/metrics` and the admin API over loopback: the exposition parses and
//! counts what was sent under bounded labels; mutations need the token, take
//! effect on the next request and are listed with who made them; an admin
//! listener off loopback without a token is refused.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use prometheus_parse::{LineInfo, Scrape, Value};
use stormbreak_guard::{Guard, GuardConfig};

fn config(b: &Backend, admin: &str) -> String {
    Config::edge()
        .cluster("app", &[b.addr], "")
        .route(
            "ok",
            "app",
            r#"match = { path_prefix = "/ok" }
limit = { kind = "fixed", limit = 10 }"#,
        )
        .route(
            "fail",
            "app",
            r#"match = { path_prefix = "/fail" }
retry = { max_attempts = 3, backoff = { kind = "constant", base = "1ms" } }
budget = { kind = "ratio", retry_ratio = 0.2, min_retries_per_sec = 100 }"#,
        )
        .tail(&format!("[admin]\n{admin}"))
        .toml()
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
        "reason=timeout",
        "reason=connect",
        "reason=reset",
        "reason=breaker_open",
        "reason=no_endpoint",
        "reason=body_incomplete",
        "reason=body_malformed",
        "reason=body_too_large",
        "reason=body_timeout",
        "reason=bad_target",
        "reason=client_closed",
        "reason=per_client",
        "reason=full",
        "reason=evicted",
        "reason=at_cap",
        "reason=queue_timeout",
        "outcome=ok",
        "outcome=bad_status",
        "outcome=timeout",
        "outcome=connect",
        "outcome=reset",
        "outcome=breaker_open",
        "outcome=no_endpoint",
        &format!("endpoint={}", b.addr),
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

/// Scrapes `/metrics` and parses it.
async fn scrape(client: &HttpClient, admin: SocketAddr) -> Scrape {
    let (parts, body) = send(client, get(admin, "/metrics")).await;
    assert_eq!(parts.status, 200);
    let text = String::from_utf8(body.to_vec()).unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

#[tokio::test]
async fn clusters_count_attempts_by_outcome_endpoints_show_ejection_and_health_and_unlimited_routes_show_in_flight()
 {
    let good = app().await;
    let bad = backend(|_| status(503)).await;
    // Holds every request until released: in flight, countable.
    let (release, held) = tokio::sync::watch::channel(false);
    let slow = backend_async(move |_| {
        let mut held = held.clone();
        async move {
            let _ = held.wait_for(|r| *r).await;
            status(200)
        }
    })
    .await;
    let text = Config::edge()
        .cluster(
            "pair",
            &[good.addr, bad.addr],
            r#"outlier = { consecutive_failures = 2, base_ejection_time = "5m", max_ejection_percent = 100 }"#,
        )
        .cluster(
            "probed",
            &[bad.addr],
            r#"health_check = { path = "/healthz", interval = "20ms", timeout = "10ms", healthy_threshold = 1, unhealthy_threshold = 1 }"#,
        )
        .cluster("gone", &["127.0.0.1:9"], "")
        .cluster("held", &[slow.addr], "")
        .route("pair", "pair", r#"match = { path_prefix = "/pair" }"#)
        .route("probed", "probed", r#"match = { path_prefix = "/probed" }"#)
        .route("gone", "gone", r#"match = { path_prefix = "/gone" }"#)
        .route("held", "held", r#"match = { path_prefix = "/held" }"#)
        .tail("[admin]\nbind = \"127.0.0.1:0\"")
        .toml();
    let g = guard(&text).await;
    let (edge, admin) = (g.local_addr("edge").unwrap(), g.admin_addr().unwrap());
    let client = http1_client();
    let value = |s: &Scrape, name: &str, labels: &[(&str, &str)]| {
        sample(s, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing"))
    };
    let (good_ep, bad_ep) = (good.addr.to_string(), bad.addr.to_string());

    // Until the failing endpoint is ejected (two failures in a row), then
    // ten more: every one of them on the good endpoint.
    let mut sent: u32 = 0;
    let mut failures = 0;
    while failures < 2 {
        assert!(sent < 200, "the failing endpoint was never picked twice");
        sent += 1;
        failures += u32::from(send(&client, get(edge, "/pair")).await.0.status == 503);
    }
    for _ in 0..10 {
        assert_eq!(send(&client, get(edge, "/pair")).await.0.status, 200);
    }
    sent += 10;
    let m = scrape(&client, admin).await;
    let pair = [("cluster", "pair")];
    assert_eq!(
        value(&m, "stormbreak_guard_upstream_requests_total", &pair),
        f64::from(sent)
    );
    let class = |c| [("cluster", "pair"), ("class", c)];
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_responses_total",
            &class("5xx")
        ),
        2.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_responses_total",
            &class("2xx")
        ),
        f64::from(sent - 2)
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_request_duration_seconds",
            &pair
        ),
        f64::from(sent),
        "one latency sample per attempt"
    );
    let ep = |e| [("cluster", "pair"), ("endpoint", e)];
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_endpoint_ejected",
            &ep(bad_ep.as_str())
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_endpoint_ejected",
            &ep(good_ep.as_str())
        ),
        0.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_endpoint_available",
            &ep(bad_ep.as_str())
        ),
        0.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_endpoint_available",
            &ep(good_ep.as_str())
        ),
        1.0
    );
    assert_eq!(
        value(&m, "stormbreak_guard_upstream_endpoints_available", &pair),
        1.0
    );
    assert!(
        sample(&m, "stormbreak_guard_upstream_endpoint_unhealthy", &pair).is_none(),
        "no health checks on pair: no unhealthy gauge"
    );

    // A refused connection: an error by reason, no response.
    assert_eq!(send(&client, get(edge, "/gone")).await.0.status, 502);
    let m = scrape(&client, admin).await;
    let gone = |reason| [("cluster", "gone"), ("reason", reason)];
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_errors_total",
            &gone("connect")
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_errors_total",
            &gone("timeout")
        ),
        0.0
    );

    // Health checks: the probed endpoint answers 503 to /healthz, so the
    // first probe marks it unhealthy (polled: the probes run on their
    // interval; the bound is a hang guard).
    let probed = [("cluster", "probed"), ("endpoint", bad_ep.as_str())];
    let mut unhealthy = false;
    for _ in 0..500 {
        let m = scrape(&client, admin).await;
        if value(&m, "stormbreak_guard_upstream_endpoint_unhealthy", &probed) == 1.0 {
            assert_eq!(
                value(&m, "stormbreak_guard_upstream_endpoint_available", &probed),
                0.0
            );
            unhealthy = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(unhealthy, "the probe never marked the endpoint unhealthy");
    // No endpoint left: the attempt is refused before sending.
    assert_eq!(send(&client, get(edge, "/probed")).await.0.status, 503);
    let m = scrape(&client, admin).await;
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_rejected_total",
            &[("cluster", "probed"), ("reason", "no_endpoint")]
        ),
        1.0
    );

    // Three requests held upstream on a route and cluster without a limit:
    // in flight is counted there, saturation is not (no limit to divide by).
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { send(&client, get(edge, "/held")).await.0.status })
        })
        .collect();
    for _ in 0..500 {
        if slow.hits() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(slow.hits(), 3);
    let m = scrape(&client, admin).await;
    assert_eq!(
        value(&m, "stormbreak_guard_inflight", &[("route", "held")]),
        3.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_inflight",
            &[("cluster", "held")]
        ),
        3.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_endpoint_inflight",
            &[("cluster", "held"), ("endpoint", &slow.addr.to_string())]
        ),
        3.0
    );
    for name in ["saturation", "limit", "queue_depth"] {
        let name = format!("stormbreak_guard_{name}");
        assert!(sample(&m, &name, &[("route", "held")]).is_none(), "{name}");
    }
    for name in ["upstream_saturation", "upstream_limit"] {
        let name = format!("stormbreak_guard_{name}");
        assert!(
            sample(&m, &name, &[("cluster", "held")]).is_none(),
            "{name}"
        );
    }
    release.send_replace(true);
    for w in waiting {
        assert_eq!(w.await.unwrap(), 200);
    }
    let m = scrape(&client, admin).await;
    assert_eq!(
        value(&m, "stormbreak_guard_inflight", &[("route", "held")]),
        0.0
    );
    assert_eq!(
        value(
            &m,
            "stormbreak_guard_upstream_inflight",
            &[("cluster", "held")]
        ),
        0.0
    );
    g.shutdown().await;
}

#[tokio::test]
async fn mutations_need_the_token_take_effect_and_are_listed_with_who_made_them() {
    let b = app().await;
    let dir = crate::common::files::TempDir::new("guard-admin-mutations");
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
    let text = config(&b, r#"bind = "0.0.0.0:0""#);
    let e = GuardConfig::parse("guard.toml", &text).unwrap_err();
    let msg = e.to_string();
    let line = text.lines().position(|l| l.contains("0.0.0.0")).unwrap() + 1;
    assert!(msg.starts_with(&format!("guard.toml:{line}:8: ")), "{msg}");
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
    let dir = crate::common::files::TempDir::new("guard-admin-drain");
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

#[tokio::test]
async fn the_admin_listener_speaks_http1_only() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = app().await;
    let g = guard(&config(&b, r#"bind = "127.0.0.1:0""#)).await;
    let admin = g.admin_addr().unwrap();
    // HTTP/1.1 answers.
    let s = state(&http1_client(), admin).await;
    assert!(s["routes"].is_array(), "{s}");
    // An h2c client's preface (prior knowledge) gets no HTTP/2: no
    // SETTINGS frame back, only an HTTP/1 refusal or a close.
    let mut conn = tokio::net::TcpStream::connect(admin).await.unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut got),
    )
    .await;
    assert!(
        read.is_ok(),
        "the connection was neither answered nor closed"
    );
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 "),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    g.shutdown().await;
}

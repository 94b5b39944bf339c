//! A route's dependency check on loopback: a request is forwarded only
//! after its dependency cluster answers 2xx; a failing, silent or
//! unreachable dependency gets the request a 502 and its upstream nothing;
//! every call is counted by outcome.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;

use crate::common::*;

/// The value of the metric line `name` (labels included), 0 when absent.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn calls(text: &str, outcome: &str) -> u64 {
    metric(
        text,
        &format!("stormbreak_guard_dependency_calls_total{{route=\"app\",outcome=\"{outcome}\"}}"),
    )
}

/// A config with cluster `app` of `app`, cluster `auth` of `auth`
/// (`auth_extra` in its table) and route `app` whose dependency is `auth`
/// (`route_extra` after the dependency line).
fn config(app: &Backend, auth: &str, dependency: &str, route_extra: &str) -> String {
    Config::edge()
        .cluster("app", &[app.addr], "")
        .cluster("auth", &[auth], "")
        .route(
            "app",
            "app",
            &format!("dependency = {{ cluster = \"auth\", {dependency} }}\n{route_extra}"),
        )
        .toml()
}

fn with_token(addr: std::net::SocketAddr) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}/orders?id=7"))
        .header("authorization", "Bearer t0ken")
        .header("cookie", "kept=here")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn a_request_is_forwarded_once_its_dependency_answers_2xx() {
    let app = backend(|_| status(200)).await;
    // What the dependency saw: method, path and query, and its headers.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let auth = backend(move |s| {
        let h = |n: &str| {
            s.head
                .headers
                .get(n)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        log.lock().unwrap().push((
            s.head.method.to_string(),
            s.head.uri.to_string(),
            h("authorization"),
            h("cookie"),
            h("x-stormbreak-criticality"),
        ));
        status(204)
    })
    .await;
    let g = guard(&config(
        &app,
        &auth.addr.to_string(),
        r#"path = "/check?scope=orders", timeout = "5s""#,
        r#"criticality = "sheddable""#,
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let (p, _) = send(&http1_client(), with_token(edge)).await;
    assert_eq!(p.status, 200);
    assert_eq!((auth.hits(), app.hits()), (1, 1));
    assert_eq!(
        seen.lock().unwrap()[0],
        (
            "GET".to_owned(),
            "/check?scope=orders".to_owned(),
            Some("Bearer t0ken".to_owned()),
            None,
            Some("sheddable".to_owned()),
        ),
        "only pass_headers and the class go to the dependency"
    );
    let text = g.metrics_text();
    assert_eq!(calls(&text, "ok"), 1, "{text}");
    assert_eq!(
        metric(
            &text,
            "stormbreak_guard_upstream_requests_total{cluster=\"auth\"}"
        ),
        1,
        "the call goes through the auth cluster's own path"
    );
}

#[tokio::test]
async fn a_failing_dependency_is_retried_by_the_route_then_answered_502_unforwarded() {
    let app = backend(|_| status(200)).await;
    let auth = backend(|_| status(503)).await;
    let g = guard(&config(
        &app,
        &auth.addr.to_string(),
        r#"path = "/check", timeout = "5s""#,
        r#"retry = { max_attempts = 3, backoff = { kind = "constant", base = "0" } }"#,
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let (p, body) = send(&http1_client(), with_token(edge)).await;
    assert_eq!(p.status, 502, "{body:?}");
    assert_eq!(
        (auth.hits(), app.hits()),
        (3, 0),
        "the check is retried up to max_attempts; nothing is forwarded"
    );
    let text = g.metrics_text();
    assert_eq!(calls(&text, "bad_status"), 3, "{text}");
    assert_eq!(calls(&text, "ok"), 0);
    assert_eq!(
        metric(
            &text,
            "stormbreak_guard_dependency_failed_total{route=\"app\"}"
        ),
        1
    );
    assert_eq!(
        metric(&text, "stormbreak_guard_attempts_total{route=\"app\"}"),
        0,
        "no attempt went upstream"
    );
}

#[tokio::test]
async fn a_silent_or_unreachable_dependency_is_answered_502_unforwarded() {
    let app = backend(|_| status(200)).await;
    // Holds every call until the test ends.
    let silent = backend_async(|_| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        status(200)
    })
    .await;
    let g = guard(&config(
        &app,
        &silent.addr.to_string(),
        r#"path = "/check", timeout = "100ms""#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let (p, _) = send(&http1_client(), with_token(edge)).await;
    assert_eq!(p.status, 502);
    assert_eq!((silent.hits(), app.hits()), (1, 0));
    assert_eq!(calls(&g.metrics_text(), "timeout"), 1);

    // A port nothing listens on (bound, then let go).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let g = guard(&config(
        &app,
        &closed.to_string(),
        r#"path = "/check", timeout = "5s""#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let (p, _) = send(&http1_client(), with_token(edge)).await;
    assert_eq!(p.status, 502);
    assert_eq!(app.hits(), 0);
    assert_eq!(calls(&g.metrics_text(), "connect"), 1);
}

#[tokio::test]
async fn an_open_breaker_on_the_dependency_cluster_fails_the_check_without_calling_it() {
    let app = backend(|_| status(200)).await;
    let auth = backend(|_| status(500)).await;
    let toml = Config::edge()
        .cluster("app", &[app.addr], "")
        .cluster(
            "auth",
            &[auth.addr],
            r#"breaker = { consecutive_failures = 2, sliding_window_size = 0, wait_duration_in_open_state = "60s" }"#,
        )
        .route(
            "app",
            "app",
            r#"dependency = { cluster = "auth", path = "/check", timeout = "5s" }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..3 {
        assert_eq!(send(&client, with_token(edge)).await.0.status, 502);
    }
    assert_eq!(
        (auth.hits(), app.hits()),
        (2, 0),
        "two failures open the breaker"
    );
    let text = g.metrics_text();
    assert_eq!(calls(&text, "bad_status"), 2, "{text}");
    assert_eq!(calls(&text, "breaker_open"), 1, "{text}");
}

//! Reload without loss: requests in a steady loop all succeed across
//! reloads, an unchanged route keeps its retry budget's state (a changed
//! one starts afresh), admin overrides outlive a reload, and an invalid
//! config or an `[admin]` change is refused with the old config kept.

use std::time::Duration;

use crate::common::files::TempDir;
use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use stormbreak_guard::Guard;

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

/// Route `fail` first (so its position stays), `ok` second (`extra` lines
/// after it may open further tables), then `tail` sections.
fn config(b: &Backend, fail_extra: &str, extra: &str, tail: &str) -> String {
    Config::edge()
        .cluster("app", &[b.addr], "")
        .route(
            "fail",
            "app",
            &format!(
                r#"match = {{ path_prefix = "/fail" }}
retry = {{ max_attempts = 3, backoff = {{ kind = "constant", base = "1ms" }} }}
budget = {{ kind = "bucket", capacity = 4, cost = 1, reward = 0.1 }}
{fail_extra}"#
            ),
        )
        .route("ok", "app", extra)
        .tail(tail)
        .toml()
}

/// 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {text}"))
        + 1
}

/// Attempts one failing request took.
async fn attempts_of_one_failure(
    g: &Guard,
    client: &HttpClient,
    edge: std::net::SocketAddr,
) -> u64 {
    let before = g.stats().attempts();
    assert_eq!(send(client, get(edge, "/fail")).await.0.status, 503);
    g.stats().attempts() - before
}

#[tokio::test]
async fn reloads_during_a_steady_loop_fail_nothing_and_keep_an_unchanged_routes_budget() {
    let b = app().await;
    let dir = TempDir::new("guard-reload-steady");
    let path = dir.write("guard.toml", config(&b, "", "", ""));
    let g = Guard::start_file(&path).await.unwrap();
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();

    // Empty the route's bucket: 4 tokens, one per retry.
    let mut drained = false;
    for _ in 0..10 {
        if attempts_of_one_failure(&g, &client, edge).await == 1 {
            drained = true;
            break;
        }
    }
    assert!(drained, "the bucket never ran dry");

    // A steady, bounded loop on keep-alive connections while the config
    // is reloaded five times (adding and removing an unrelated route).
    let steady = tokio::spawn({
        let client = client.clone();
        async move {
            let mut failed = 0;
            for i in 0..300 {
                let (p, _) = send(&client, get(edge, &format!("/ok/{i}"))).await;
                failed += u32::from(p.status != 200);
            }
            failed
        }
    });
    let with_extra = config(
        &b,
        "",
        "\n[[route]]\nname = \"extra\"\nmatch = { path_prefix = \"/extra\" }\ncluster = \"app\"",
        "",
    );
    for round in 0..5 {
        let text = if round % 2 == 0 {
            with_extra.clone()
        } else {
            config(&b, "", "", "")
        };
        dir.write("guard.toml", text);
        let done = g.reload_file().unwrap();
        assert!(done.kept.contains(&"fail".to_owned()), "{done:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        steady.await.unwrap(),
        0,
        "no request failed across the reloads"
    );
    // Back on the config with "extra": it serves.
    dir.write("guard.toml", with_extra);
    g.reload_file().unwrap();
    assert_eq!(send(&client, get(edge, "/extra")).await.0.status, 200);

    // The unchanged route's bucket is still dry: no retry, where a fresh
    // bucket would allow two.
    assert_eq!(attempts_of_one_failure(&g, &client, edge).await, 1);
    // A changed route starts afresh.
    dir.write(
        "guard.toml",
        config(&b, "retry_buffer_bytes = 1024", "", ""),
    );
    let done = g.reload_file().unwrap();
    assert!(done.rebuilt.contains(&"fail".to_owned()), "{done:?}");
    assert_eq!(attempts_of_one_failure(&g, &client, edge).await, 3);
    // The counters continue across reloads.
    let metrics = g.metrics_text();
    assert!(
        metrics.contains("stormbreak_guard_requests_total{route=\"ok\"} 300\n"),
        "{metrics}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn an_invalid_reload_is_refused_and_overrides_outlive_a_valid_one() {
    let b = app().await;
    let dir = TempDir::new("guard-reload-invalid");
    let token = dir.write("token", "tok\n");
    let admin = format!(
        "\n[admin]\nbind = \"127.0.0.1:0\"\ntoken_file = {:?}",
        token.display().to_string()
    );
    let good = config(&b, "", "", &admin);
    let path = dir.write("guard.toml", &good);
    let g = Guard::start_file(&path).await.unwrap();
    let (edge, admin_addr) = (g.local_addr("edge").unwrap(), g.admin_addr().unwrap());
    let client = http1_client();
    let post = |path: &str, body: &str| {
        Request::post(format!("http://{admin_addr}{path}"))
            .header("authorization", "Bearer tok")
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap()
    };

    // An operator sheds route ok with 429.
    let (p, _) = send(
        &client,
        post(
            "/shed/add",
            r#"{"route":"ok","status":429,"retry_after":"2s"}"#,
        ),
    )
    .await;
    assert_eq!(p.status, 200);
    assert_eq!(send(&client, get(edge, "/")).await.0.status, 429);

    // An invalid file: refused with file:line:column; the old config serves.
    let bad = good.replace("max_attempts = 3", "max_attempts = 0");
    dir.write("guard.toml", &bad);
    let e = g.reload_file().unwrap_err();
    let at = format!(
        "{}:{}:26: ",
        path.display(),
        line_of(&bad, "max_attempts = 0")
    );
    assert!(e.starts_with(&at), "{e}");
    let (p, body) = send(&client, post("/reload", "")).await;
    assert_eq!(p.status, 400, "{body:?}");
    assert!(String::from_utf8_lossy(&body).contains("max_attempts"));
    assert_eq!(attempts_of_one_failure(&g, &client, edge).await, 3);
    // [admin] cannot change on reload (it is the lever reloads come
    // through): refused, naming the table's file:line; the old config
    // serves on. (Listener changes are tests/listeners.rs's.)
    let moved = good.replace(
        "[admin]\nbind = \"127.0.0.1:0\"",
        "[admin]\nbind = \"127.0.0.1:1\"",
    );
    assert_ne!(moved, good);
    dir.write("guard.toml", &moved);
    let e = g.reload_file().unwrap_err();
    let at = format!("{}:{}:1: ", path.display(), line_of(&moved, "[admin]"));
    assert!(e.starts_with(&at), "{e}");
    assert!(
        e.contains("[admin] changed: a reload cannot change [admin]"),
        "{e}"
    );
    let no_admin = config(&b, "", "", "");
    dir.write("guard.toml", &no_admin);
    let e = g.reload_file().unwrap_err();
    assert!(e.contains("[admin] removed"), "{e}");
    // After all these refusals the old config still serves, override and all.
    assert_eq!(send(&client, get(edge, "/")).await.0.status, 429);

    // A valid reload (through the admin API) keeps the operator's rule.
    dir.write(
        "guard.toml",
        config(&b, "", "criticality = \"sheddable\"", &admin),
    );
    let (p, body) = send(&client, post("/reload", "")).await;
    assert_eq!(p.status, 200, "{body:?}");
    let done: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(done["rebuilt"], serde_json::json!(["ok"]));
    let (p, _) = send(&client, get(edge, "/")).await;
    assert_eq!(p.status, 429, "the admin shed rule outlived the reload");
    assert_eq!(p.headers["retry-after"], "2");
    // Until it is removed.
    let (p, _) = send(&client, post("/shed/remove", r#"{"route":"ok"}"#)).await;
    assert_eq!(p.status, 200);
    assert_eq!(send(&client, get(edge, "/")).await.0.status, 200);
    g.shutdown().await;
}

/// Waits (a hang guard, not a timing assert) until `path` holds `n` lines;
/// its lines.
async fn lines_in(path: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    for _ in 0..1000 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n {
            return text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never held {n} lines", path.display());
}

#[tokio::test]
async fn a_reload_switches_the_access_log_and_refuses_one_it_cannot_open() {
    let b = app().await;
    let dir = TempDir::new("guard-reload-access-log");
    let (a, c) = (dir.join("a.log"), dir.join("c.log"));
    let log = |p: &std::path::Path| {
        format!(
            "[access_log]\nto = \"file\"\npath = {:?}",
            p.display().to_string()
        )
    };
    let path = dir.write("guard.toml", config(&b, "", "", ""));
    let g = Guard::start_file(&path).await.unwrap();
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    assert_eq!(send(&client, get(edge, "/off")).await.0.status, 200);

    // Off → a.log: the next request is logged there.
    dir.write("guard.toml", config(&b, "", "", &log(&a)));
    let done = g.reload_file().unwrap();
    assert_eq!(done.kept, ["fail", "ok"], "policy state is kept: {done:?}");
    assert_eq!(send(&client, get(edge, "/one")).await.0.status, 200);
    assert_eq!(lines_in(&a, 1).await[0]["path"], "/one");

    // A file that cannot be opened: refused, naming it; a.log stays in force.
    let nowhere = dir.join("missing-dir").join("x.log");
    dir.write("guard.toml", config(&b, "", "", &log(&nowhere)));
    let e = g.reload_file().unwrap_err();
    assert!(e.contains("cannot open"), "{e}");
    assert!(e.contains("x.log"), "{e}");
    assert!(e.ends_with("the old config stays"), "{e}");
    assert_eq!(send(&client, get(edge, "/two")).await.0.status, 200);
    assert_eq!(lines_in(&a, 2).await[1]["path"], "/two");

    // a.log → c.log: new requests go to c.log only.
    dir.write("guard.toml", config(&b, "", "", &log(&c)));
    g.reload_file().unwrap();
    assert_eq!(send(&client, get(edge, "/three")).await.0.status, 200);
    g.shutdown().await;
    let in_c = lines_in(&c, 1).await;
    assert_eq!(in_c.len(), 1);
    assert_eq!(in_c[0]["path"], "/three");
    let in_a = lines_in(&a, 2).await;
    assert_eq!(in_a.len(), 2, "{in_a:?}");
    assert!(!nowhere.exists());
}

/// A backend that holds every `/hold` request until `gate` gets a permit
/// and answers everything else at once.
async fn holding(gate: std::sync::Arc<tokio::sync::Semaphore>) -> Backend {
    backend_async(move |seen| {
        let gate = gate.clone();
        async move {
            if seen.head.uri.path().starts_with("/hold") {
                gate.acquire().await.expect("open").forget();
            }
            status(200)
        }
    })
    .await
}

/// Sends `n` `/hold` requests to `edge` and waits (bounded) until `b` has
/// seen `seen` requests in all.
async fn hold(
    client: &HttpClient,
    edge: std::net::SocketAddr,
    b: &Backend,
    n: usize,
    seen: u64,
) -> Vec<tokio::task::JoinHandle<u16>> {
    let held = (0..n)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                send(&client, get(edge, &format!("/hold/{i}")))
                    .await
                    .0
                    .status
                    .as_u16()
            })
        })
        .collect();
    for _ in 0..2000 {
        if b.hits() >= seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.hits(), seen, "the held requests reached the backend");
    held
}

fn refused_by(parts: &http::response::Parts) -> Option<&str> {
    parts
        .headers
        .get(stormbreak_guard::REFUSED_HEADER)
        .and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn a_reload_changing_only_endpoints_keeps_the_cluster_and_its_routes() {
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let (one, two) = (holding(gate.clone()).await, holding(gate.clone()).await);
    // The cluster's limit of 1 is cluster state: kept, its one permit
    // stays held by the request in flight on `one` across the reload.
    let with = |endpoints: &[std::net::SocketAddr]| {
        Config::edge()
            .cluster("app", endpoints, "limit = { kind = \"fixed\", limit = 1 }")
            .route("app", "app", "")
            .toml()
    };
    let dir = TempDir::new("guard-reload-endpoints");
    let path = dir.write("guard.toml", with(&[one.addr]));
    let g = Guard::start_file(&path).await.unwrap();
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let held = hold(&client, edge, &one, 1, 1).await;

    dir.write("guard.toml", with(&[one.addr, two.addr]));
    let done = g.reload_file().unwrap();
    assert_eq!(done.endpoints, ["app"], "{done:?}");
    assert_eq!(done.kept, ["app"], "the route on it is kept: {done:?}");
    assert!(done.rebuilt.is_empty(), "{done:?}");
    // A new cluster would have a free permit; the kept one is still full.
    let (parts, _) = send(&client, get(edge, "/now")).await;
    assert_eq!(parts.status, 503, "the cluster limit is still held");
    assert_eq!(two.hits(), 0);

    gate.add_permits(1);
    for h in held {
        assert_eq!(h.await.unwrap(), 200, "in flight across the reload");
    }
    for i in 0..40 {
        let (parts, _) = send(&client, get(edge, &format!("/now/{i}"))).await;
        assert_eq!(parts.status, 200);
    }
    assert!(two.hits() > 0, "the added endpoint takes traffic");

    // Removing `one`: nothing more reaches it.
    dir.write("guard.toml", with(&[two.addr]));
    let done = g.reload_file().unwrap();
    assert_eq!(done.endpoints, ["app"], "{done:?}");
    let before = one.hits();
    for i in 0..20 {
        let (parts, _) = send(&client, get(edge, &format!("/after/{i}"))).await;
        assert_eq!(parts.status, 200);
    }
    assert_eq!(one.hits(), before, "a removed endpoint gets nothing");

    // Any other change to the cluster builds it anew.
    dir.write(
        "guard.toml",
        Config::edge()
            .cluster(
                "app",
                &[two.addr],
                "limit = { kind = \"fixed\", limit = 2 }",
            )
            .route("app", "app", "")
            .toml(),
    );
    let done = g.reload_file().unwrap();
    assert!(done.endpoints.is_empty(), "{done:?}");
    assert_eq!(done.rebuilt, ["app"], "{done:?}");
    g.shutdown().await;
}

#[tokio::test]
async fn a_reload_changing_only_a_limit_keeps_its_requests_in_flight() {
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let b = holding(gate.clone()).await;
    let with_retry = |limit: u32, attempts: u32, budget: &str| {
        Config::edge()
            .cluster("app", &[b.addr], "")
            .route(
                "app",
                "app",
                &format!(
                    "limit = {{ kind = \"fixed\", limit = {limit} }}\nretry = {{ max_attempts = {attempts} }}\n{budget}"
                ),
            )
            .toml()
    };
    let with = |limit: u32| with_retry(limit, 2, "");
    let dir = TempDir::new("guard-reload-limit");
    let path = dir.write("guard.toml", with(2));
    let g = Guard::start_file(&path).await.unwrap();
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let held = hold(&client, edge, &b, 2, 2).await;

    // Cut to 1 with 2 in flight: both finish, nothing new is admitted
    // until fewer than 1 are in flight.
    dir.write("guard.toml", with(1));
    let done = g.reload_file().unwrap();
    assert_eq!(done.policies, ["app"], "{done:?}");
    assert_eq!(done.kept, ["app"], "{done:?}");
    assert_eq!(g.route_limit("app"), Some(1));
    // Refused by the guard (by the limit, or first by the saturation
    // shedder, which reads the same kept in-flight count), never sent on.
    let (parts, _) = send(&client, get(edge, "/now")).await;
    assert!(refused_by(&parts).is_some(), "{parts:?}");
    assert_eq!(b.hits(), 2);
    gate.add_permits(1);
    let mut held = held.into_iter();
    let first = held.next().unwrap();
    let second = held.next().unwrap();
    // Whichever finished, one is still in flight: still at the cut limit.
    let finished = tokio::select! {
        s = first => { s.unwrap() }
        s = second => { s.unwrap() }
    };
    assert_eq!(finished, 200);
    let (parts, _) = send(&client, get(edge, "/now")).await;
    assert!(
        refused_by(&parts).is_some(),
        "one still in flight: {parts:?}"
    );
    assert_eq!(b.hits(), 2);
    gate.add_permits(1);
    for _ in 0..2000 {
        if g.metrics_text()
            .contains("stormbreak_guard_inflight{route=\"app\"} 0\n")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (parts, _) = send(&client, get(edge, "/now")).await;
    assert_eq!(parts.status, 200, "admitted once none is in flight");

    // Raised to 3: three held at once.
    dir.write("guard.toml", with(3));
    let done = g.reload_file().unwrap();
    assert_eq!(done.policies, ["app"], "{done:?}");
    let seen = b.hits();
    let held = hold(&client, edge, &b, 3, seen + 3).await;
    gate.add_permits(3);
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }

    // The retry policy changes in place too; a new budget rebuilds.
    dir.write("guard.toml", with_retry(3, 3, ""));
    let done = g.reload_file().unwrap();
    assert_eq!(
        (done.policies, done.kept),
        (vec!["app".to_owned()], vec!["app".to_owned()])
    );
    dir.write(
        "guard.toml",
        with_retry(
            3,
            3,
            "budget = { kind = \"bucket\", capacity = 4, cost = 1, reward = 0.1 }",
        ),
    );
    let done = g.reload_file().unwrap();
    assert!(done.policies.is_empty(), "{done:?}");
    assert_eq!(done.rebuilt, ["app"], "{done:?}");
    g.shutdown().await;
}

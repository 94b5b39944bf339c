//! Reload without loss: requests in a steady loop all succeed across
//! reloads, an unchanged route keeps its retry budget's state (a changed
//! one starts afresh), admin overrides outlive a reload, and an invalid
//! config or a listener change is refused with the old config kept.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::files::TempDir;
use common::*;
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

/// Route `fail` first (so its position stays), `ok` second, then `extra`.
fn config(b: &Backend, fail_extra: &str, extra: &str, admin: &str) -> String {
    format!(
        r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["{}"]

[[route]]
name = "fail"
match = {{ path_prefix = "/fail" }}
cluster = "app"
retry = {{ max_attempts = 3, backoff = {{ kind = "constant", base = "1ms" }} }}
budget = {{ kind = "bucket", capacity = 4, cost = 1, reward = 0.1 }}
{fail_extra}

[[route]]
name = "ok"
cluster = "app"
{extra}
{admin}
"#,
        b.addr
    )
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
    dir.write(
        "guard.toml",
        good.replace("max_attempts = 3", "max_attempts = 0"),
    );
    let e = g.reload_file().unwrap_err();
    assert!(e.starts_with(&format!("{}:14:26: ", path.display())), "{e}");
    let (p, body) = send(&client, post("/reload", "")).await;
    assert_eq!(p.status, 400, "{body:?}");
    assert!(String::from_utf8_lossy(&body).contains("max_attempts"));
    assert_eq!(attempts_of_one_failure(&g, &client, edge).await, 3);
    // Listeners cannot change on reload.
    dir.write(
        "guard.toml",
        good.replace("name = \"edge\"", "name = \"edge2\""),
    );
    let e = g.reload_file().unwrap_err();
    assert!(e.contains("cannot change [[listener]]"), "{e}");

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

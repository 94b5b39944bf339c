//! `examples/github-edge.toml`: valid as shipped, and on loopback ports it
//! serves with its policies in force (403 on the token route, a keyed
//! limit on archives, budgeted retries, metrics on the admin listener).

use crate::common::files::TempDir;
use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use stormbreak_guard::{Guard, GuardConfig};

const EXAMPLE: &str = include_str!("../../../../examples/github-edge.toml");

#[test]
fn the_example_is_valid_as_shipped() {
    let c =
        GuardConfig::parse("examples/github-edge.toml", EXAMPLE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.listeners.len(), 2);
    assert!(
        c.routes
            .iter()
            .any(|r| r.restore.is_some() && r.restore_sites == ["cus", "nva"])
    );
    assert!(c.routes.iter().any(|r| r.failover_policy.is_some()));
    // Failover needs every failing primary endpoint ejectable (the run is in
    // crates/cli/tests/it/guard_cmd.rs, on the real binary).
    let api = c.clusters.iter().find(|c| c.name == "api-cus").unwrap();
    assert_eq!(api.outlier.as_ref().unwrap().max_ejection_percent, 100);
    assert!(c.routes.iter().any(|r| r.rate_limit.is_some()));
    assert!(c.shed.iter().any(|s| s.status == 403));
}

#[tokio::test]
async fn the_example_serves_on_loopback_with_its_policies() {
    let dir = TempDir::new("guard-example");
    let token = dir.write("token", "t\n");
    // Ports 0 (tests run side by side) and the token from a file.
    let text = EXAMPLE
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:8081", "127.0.0.1:0")
        .replace("127.0.0.1:9901", "127.0.0.1:0")
        .replace(
            "token_env = \"STORMBREAK_ADMIN_TOKEN\"",
            &format!("token_file = {:?}", token.display().to_string()),
        );
    let config = GuardConfig::parse("example.toml", &text).unwrap();
    let g = Guard::start(&config).await.unwrap();
    let cus = g.local_addr("cus").unwrap();
    let client = http1_client();

    let (p, _) = send(&client, get(cus, "/copilot_internal/v2/token")).await;
    assert_eq!(p.status, 403, "the operators' shed rule");
    assert!(!p.headers.contains_key("retry-after"));

    // Five archives in a burst per token, then 429 with Retry-After.
    let archive = || {
        Request::get(format!("http://{cus}/archive/x.zip"))
            .header("authorization", "Bearer one-token")
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let (p, _) = send(&client, archive()).await;
        statuses.push(p.status.as_u16());
        if p.status == 429 {
            assert!(p.headers.contains_key("retry-after"));
        }
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        1,
        "{statuses:?}"
    );

    // No endpoint listens: the gateway path answers 502 after budgeted retries.
    let before = g.stats().attempts();
    assert_eq!(send(&client, get(cus, "/")).await.0.status, 502);
    assert_eq!(g.stats().attempts() - before, 3);

    let (p, body) = send(&client, get(g.admin_addr().unwrap(), "/metrics")).await;
    assert_eq!(p.status, 200);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("stormbreak_guard_shed_total{route=\"copilot-token\",reason=\"rule\"} 1"),
        "{text}"
    );
    g.shutdown().await;
}

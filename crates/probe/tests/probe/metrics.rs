//! `--listen`: the run's results scraped as Prometheus metrics.

use std::sync::Arc;

use stormbreak_probe::RunOptions;
use stormbreak_probe::metrics::{Metrics, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::scripted::{Reply, Scripted, config};

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn a_scrape_shows_blackbox_names_with_the_failure_reason() {
    let server = Scripted::start(|p, _| {
        if p == "/down" {
            Reply::Status(500, None)
        } else {
            Reply::Status(200, None)
        }
    })
    .await;
    let url = |p: &str| format!("http://{}/{p}", server.addr);
    let slo = "error_rate = 0.5, window = \"200ms\"";
    let c = config(
        "rate = \"100/s\"\nduration = \"600ms\"\ninterval = \"100ms\"\nseed = 4",
        &[("up", url("up"), slo), ("down", url("down"), slo)],
    );
    let metrics = Arc::new(Metrics::new(
        c.paths.iter().map(|p| p.name.clone()).collect(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(serve(listener, Arc::clone(&metrics)));
    let run = stormbreak_probe::run(
        &c,
        RunOptions {
            metrics: Some(Arc::clone(&metrics)),
            ..RunOptions::default()
        },
    )
    .await
    .unwrap();
    let text = get(addr, "/metrics").await;
    let missing = get(addr, "/other").await;
    task.abort();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    for want in [
        "probe_success{path=\"up\"} 1",
        "probe_success{path=\"down\"} 0",
        "probe_http_status_code{path=\"down\"} 500",
        "stormbreak_probe_window_state{path=\"up\"} 1",
        "stormbreak_probe_window_state{path=\"down\"} 0",
        "# TYPE probe_duration_seconds gauge",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    let failed = run.paths[1].totals.failed;
    assert!(
        text.contains(&format!(
            "stormbreak_probe_results_total{{path=\"down\",result=\"failed\",reason=\"status\"}} {failed}"
        )),
        "{failed} failures:\n{text}"
    );
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
}

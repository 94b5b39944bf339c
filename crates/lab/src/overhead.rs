//! What a guard hop and a fresh connection cost on this machine, measured
//! before a comparison (issue 39, item 2): the simulator's scenario says
//! nothing of them, so they are measured, printed beside the comparison
//! and written to `compare.json`, never fitted.
//!
//! At low load (one request at a time) on loopback: a server that answers
//! at once; the median round trip straight to it on a kept-alive
//! connection, through one in-process guard hop (the lab's LB node config
//! without a limit), and on a fresh connection each time. The hop's cost
//! is the second less the first; a connection's, the third less the first.
//! Bound: `samples` requests of each kind (at most [`MAX_SAMPLES`]), all
//! sequential, each bounded by [`TIMEOUT`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::guard_doc::GuardDoc;

/// Most requests of each kind.
pub const MAX_SAMPLES: u32 = 10_000;

/// Longest any one measured request may take before the measurement fails.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The measured costs, microseconds (medians).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Overhead {
    /// Requests of each kind.
    pub samples: u32,
    /// Round trip straight to the server on a kept-alive connection.
    pub direct_us: f64,
    /// What one guard hop adds to it.
    pub guard_hop_us: f64,
    /// What a fresh connection (connect, request, close) adds to it.
    pub connection_us: f64,
}

impl std::fmt::Display for Overhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "measured on this machine (median of {} each): a round trip {:.0} µs; a guard hop adds {:.0} µs, a fresh connection {:.0} µs (not in the simulator's model)",
            self.samples, self.direct_us, self.guard_hop_us, self.connection_us
        )
    }
}

/// Measures on a runtime of its own (two workers, as a lab run's).
pub fn measure(samples: u32) -> Result<Overhead, String> {
    let samples = samples.clamp(1, MAX_SAMPLES);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("the runtime: {e}"))?;
    let result = rt.block_on(measure_on(samples));
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn measure_on(samples: u32) -> Result<Overhead, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let server = listener.local_addr().map_err(|e| e.to_string())?;
    let serving = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let ok = service_fn(|_: http::Request<Incoming>| async {
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), ok)
                    .await;
            });
        }
    });
    let (guard, hop) = GuardDoc::new("node", "hop", &[server]).start().await?;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let result = async {
        // Warm both paths (connections, the guard's pool) first.
        for _ in 0..samples.min(50) {
            kept_alive(&client, server).await?;
            kept_alive(&client, hop).await?;
        }
        let (mut direct, mut through, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so a slow patch of the machine hits all three.
        for _ in 0..samples {
            direct.push(kept_alive(&client, server).await?);
            through.push(kept_alive(&client, hop).await?);
            fresh.push(new_connection(server).await?);
        }
        let (d, t, f) = (median(direct), median(through), median(fresh));
        Ok(Overhead {
            samples,
            direct_us: d,
            guard_hop_us: (t - d).max(0.0),
            connection_us: (f - d).max(0.0),
        })
    }
    .await;
    guard.shutdown().await;
    serving.abort();
    result
}

/// One GET on the client's kept-alive pool; its round trip in µs.
async fn kept_alive(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
) -> Result<f64, String> {
    let start = Instant::now();
    let request = http::Request::get(format!("http://{addr}/"))
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let answered = tokio::time::timeout(TIMEOUT, async {
        let r = client.request(request).await.map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("answered {}", r.status()));
        }
        r.into_body().collect().await.map_err(|e| e.to_string())?;
        Ok(())
    })
    .await
    .map_err(|_| format!("no answer from {addr} within {TIMEOUT:?}"))?;
    answered.map_err(|e| format!("{addr}: {e}"))?;
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

/// One GET on a connection of its own, closed after; its time in µs.
async fn new_connection(addr: SocketAddr) -> Result<f64, String> {
    let start = Instant::now();
    tokio::time::timeout(TIMEOUT, async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(b"GET / HTTP/1.1\r\nhost: lab\r\nconnection: close\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(())
    })
    .await
    .map_err(|_| format!("no answer from {addr} within {TIMEOUT:?}"))?
    .map_err(|e| format!("{addr}: {e}"))?;
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measurement_finishes_and_orders_what_it_measures() {
        let o = measure(20).unwrap();
        assert_eq!(o.samples, 20);
        // Positive and finite; their size is the machine's (no timing
        // assert: BENCHMARKS.md records what they were).
        assert!(o.direct_us > 0.0 && o.direct_us.is_finite(), "{o:?}");
        assert!(
            o.guard_hop_us.is_finite() && o.connection_us.is_finite(),
            "{o:?}"
        );
        assert!(o.to_string().contains("a guard hop adds"));
    }

    #[test]
    fn the_median_is_the_middle_sample() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![]), 0.0);
    }
}

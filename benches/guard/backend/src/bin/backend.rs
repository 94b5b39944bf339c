//! The benchmark's backend: capacity = workers × (1 / service time).
//!
//! ```text
//! guard-backend --port P [--workers N] [--sleep-ms S] [--status CODE] [--threads T]
//! ```
//!
//! * `--workers N --sleep-ms S`: at most N requests are served at once
//!   (a FIFO `tokio::sync::Semaphore`), each holds its worker for S ms of
//!   `tokio::time::sleep` — sleeping, not spinning, so the capacity (N/S a
//!   second) does not depend on the CPU the load generator also uses. More
//!   requests wait for a worker (at most one per open connection: HTTP/1.1
//!   serves one request at a time per connection).
//! * `--sleep-ms 0` (the default): no worker cap, answered at once (passthrough).
//! * `--status 503`: every answer is a 503 (the failing backend of the storm run).
//! * `GET /count` answers the number of requests served so far (itself not
//!   counted), so a script reads attempts reaching the backend.
//!
//! Prints `listening on ADDR` once bound; exits on SIGTERM or SIGINT.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

struct Args {
    port: u16,
    workers: usize,
    sleep: Duration,
    status: StatusCode,
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        port: 0,
        workers: 0,
        sleep: Duration::ZERO,
        status: StatusCode::OK,
        threads: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => a.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--workers" => a.workers = value()?.parse().map_err(|e| format!("--workers: {e}"))?,
            "--sleep-ms" => {
                let ms: u64 = value()?.parse().map_err(|e| format!("--sleep-ms: {e}"))?;
                a.sleep = Duration::from_millis(ms);
            }
            "--status" => {
                let code: u16 = value()?.parse().map_err(|e| format!("--status: {e}"))?;
                a.status = StatusCode::from_u16(code).map_err(|e| format!("--status: {e}"))?;
            }
            "--threads" => a.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !a.sleep.is_zero() && a.workers == 0 {
        return Err("--sleep-ms needs --workers N (N ≥ 1)".into());
    }
    if a.threads == 0 {
        return Err("--threads must be ≥ 1".into());
    }
    Ok(a)
}

struct State {
    served: AtomicU64,
    workers: Option<Semaphore>,
    sleep: Duration,
    status: StatusCode,
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/count" {
        let n = state.served.load(Ordering::Relaxed);
        return Ok(Response::new(Full::new(Bytes::from(format!("{n}\n")))));
    }
    // Read the request body to its end (the POST part sends 4 KiB), so
    // the connection stays reusable, as a real service would.
    let _ = req.into_body().collect().await;
    if let Some(workers) = &state.workers {
        // Never closed, so acquire cannot fail.
        let _permit = workers.acquire().await.expect("semaphore never closed");
        tokio::time::sleep(state.sleep).await;
    }
    state.served.fetch_add(1, Ordering::Relaxed);
    let mut resp = Response::new(Full::new(Bytes::from_static(b"ok\n")));
    *resp.status_mut() = state.status;
    Ok(resp)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("guard-backend: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port)))
            .await
            .unwrap_or_else(|e| {
                eprintln!("guard-backend: bind: {e}");
                std::process::exit(1)
            });
        println!(
            "listening on {}",
            listener.local_addr().expect("local addr")
        );
        let state = Arc::new(State {
            served: AtomicU64::new(0),
            workers: (args.workers > 0 && !args.sleep.is_zero())
                .then(|| Semaphore::new(args.workers)),
            sleep: args.sleep,
            status: args.status,
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| handle(state.clone(), req));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                            .await;
                    });
                }
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        eprintln!(
            "guard-backend: served {}",
            state.served.load(Ordering::Relaxed)
        );
    });
}

//! The bare forwarder: what a hyper 1 reverse proxy costs with no policy
//! at all — a hyper HTTP/1.1 server whose every request is sent through
//! hyper-util's pooled legacy client to one upstream, and the answer
//! streamed back. No routing, header rewriting, limits or retries; the
//! guard's per-request overhead is measured against this.
//!
//! ```text
//! guard-forward --port P --upstream 127.0.0.1:Q
//! ```
//!
//! Threads: tokio's default multi-thread runtime, as the guard's
//! (`TOKIO_WORKER_THREADS` or the CPUs it may run on), so the two are
//! pinned and limited the same way. Prints `listening on ADDR`.

use std::net::SocketAddr;

use http::uri::{PathAndQuery, Uri};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;

type Body = http_body_util::Either<Incoming, http_body_util::Empty<bytes::Bytes>>;

fn main() {
    let mut port = 0u16;
    let mut upstream: Option<SocketAddr> = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--port" => {
                port = value
                    .parse()
                    .unwrap_or_else(|e| die(&format!("--port: {e}")))
            }
            "--upstream" => {
                upstream = Some(
                    value
                        .parse()
                        .unwrap_or_else(|e| die(&format!("--upstream: {e}"))),
                )
            }
            other => die(&format!("unknown flag {other}")),
        }
    }
    let upstream = upstream.unwrap_or_else(|| die("give --upstream IP:PORT"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap_or_else(|e| die(&format!("bind: {e}")));
        println!(
            "listening on {}",
            listener.local_addr().expect("local addr")
        );
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .build(connector);
        let authority = upstream.to_string();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let client = client.clone();
            let authority = authority.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                    let client = client.clone();
                    let pq = req
                        .uri()
                        .path_and_query()
                        .cloned()
                        .unwrap_or_else(|| PathAndQuery::from_static("/"));
                    let uri = Uri::builder()
                        .scheme("http")
                        .authority(authority.as_str())
                        .path_and_query(pq)
                        .build();
                    async move {
                        let Ok(uri) = uri else {
                            return Ok::<_, hyper::Error>(bad_gateway());
                        };
                        *req.uri_mut() = uri;
                        match client.request(req).await {
                            Ok(resp) => Ok(resp.map(Body::Left)),
                            Err(_) => Ok(bad_gateway()),
                        }
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
}

fn bad_gateway() -> Response<Body> {
    let mut r = Response::new(Body::Right(http_body_util::Empty::new()));
    *r.status_mut() = StatusCode::BAD_GATEWAY;
    r
}

fn die(msg: &str) -> ! {
    eprintln!("guard-forward: {msg}");
    std::process::exit(2)
}

//! Loopback backends, clients, configs and temporary files for the
//! guard's tests.
#![allow(dead_code)]

pub mod config;
pub mod files;

pub use config::Config;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use stormbreak_guard::{Guard, GuardConfig};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A loopback HTTP/1.1 + h2c server; stops when dropped.
pub struct Backend {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Backend {
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a backend handler sees: the request head and its whole body.
pub struct Seen {
    pub head: http::request::Parts,
    pub body: Bytes,
}

/// A backend answering each request with `handler`'s response.
pub async fn backend<F>(handler: F) -> Backend
where
    F: Fn(Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    backend_async(move |seen| {
        let handler = handler.clone();
        async move { handler(seen) }
    })
    .await
}

/// A backend whose handler may wait (hold a request, answer late); `hits`
/// counts requests as they arrive, before the handler runs.
pub async fn backend_async<F, Fut>(handler: F) -> Backend
where
    F: Fn(Seen) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicU64::new(0));
    let handler = Arc::new(handler);
    let counter = hits.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (handler, counter) = (handler.clone(), counter.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let (handler, counter) = (handler.clone(), counter.clone());
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let (head, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|c| c.to_bytes())
                            .unwrap_or_default();
                        Ok::<_, Infallible>(handler(Seen { head, body }).await)
                    }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Backend { addr, hits, task }
}

/// A guard config with one listener, one cluster of `b` and one route
/// `app` taking everything; `route_extra` lines go in the route,
/// `top_extra` after it.
pub fn one_route(b: &Backend, route_extra: &str, top_extra: &str) -> String {
    Config::edge()
        .cluster("app", &[b.addr], "")
        .route("app", "app", route_extra)
        .tail(top_extra)
        .toml()
}

/// `curl`, or `None` when it is missing outside CI. Under `CI=true` a
/// missing curl fails the test (.ci/run installs it).
pub fn curl() -> Option<&'static str> {
    let found = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "curl is required under CI=true (.ci/run installs it)"
        );
        eprintln!("curl not found: skipping outside CI");
        return None;
    }
    Some("curl")
}

pub fn status(code: u16) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
    r
}

pub async fn guard(toml: &str) -> Guard {
    let config = GuardConfig::parse("test.toml", toml).unwrap_or_else(|e| panic!("{e}"));
    Guard::start(&config).await.unwrap()
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn http1_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

pub fn h2c_client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// Sends `req`, reads the whole answer; panics after 10 s (a hang guard only).
pub async fn send(
    client: &HttpClient,
    req: Request<Full<Bytes>>,
) -> (http::response::Parts, Bytes) {
    tokio::time::timeout(Duration::from_secs(10), async {
        let response = client.request(req).await.expect("response");
        let (parts, body) = response.into_parts();
        (parts, body.collect().await.expect("body").to_bytes())
    })
    .await
    .expect("no hang")
}

pub fn get(addr: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

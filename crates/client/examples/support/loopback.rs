//! A scripted HTTP/1 server on 127.0.0.1, port 0, for the examples and
//! their tests. It is stopped (with every connection) when dropped.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A running server.
pub struct Loopback {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Requests it has received.
    pub received: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl Loopback {
    /// Requests received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        // The accept task owns the connection tasks: aborting it ends all.
        self.accept.abort();
    }
}

/// Serves on 127.0.0.1:0; the `n`-th request (0-based) gets status
/// `script(n)` and the body `"token-{n}"`.
pub async fn serve(
    script: impl Fn(u64) -> u16 + Send + Sync + 'static,
) -> std::io::Result<Loopback> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let script = Arc::new(script);
    let accept = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            let counter = counter.clone();
            let script = script.clone();
            let service =
                hyper::service::service_fn(move |_req: hyper::Request<hyper::body::Incoming>| {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    let status = script(n);
                    async move {
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .status(status)
                                .body(Full::new(Bytes::from(format!("token-{n}"))))
                                .expect("a valid response"),
                        )
                    }
                });
            connections.spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Loopback {
        addr,
        received,
        accept,
    })
}

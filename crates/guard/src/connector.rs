//! The upstream connector: TCP from hyper-util's `HttpConnector`, then TLS
//! (rustls, ALPN by the cluster's protocol) when the cluster has a `tls` table.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tower::Service;

use crate::body::BoxError;
use crate::config::{Protocol, UpstreamTlsConfig};

/// TCP, or TCP then TLS.
#[derive(Clone)]
pub(crate) struct Connector {
    http: HttpConnector,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// The rustls client config for `tls`; the error names the file that failed.
pub(crate) fn client_config(
    tls: &UpstreamTlsConfig,
    protocol: Protocol,
) -> Result<(TlsConnector, ServerName<'static>), String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(&tls.ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read CA certificates from {:?}: {e}", tls.ca))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("no usable CA certificate in {:?}", tls.ca));
    }
    let name = ServerName::try_from(tls.server_name.clone())
        .map_err(|_| format!("{:?} is not a DNS name or IP address", tls.server_name))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = match protocol {
        Protocol::H2c => vec![b"h2".to_vec()],
        _ => vec![b"http/1.1".to_vec()],
    };
    Ok((TlsConnector::from(Arc::new(config)), name))
}

impl Connector {
    pub(crate) fn new(
        http: HttpConnector,
        tls: Option<(TlsConnector, ServerName<'static>)>,
    ) -> Self {
        Connector { http, tls }
    }
}

impl Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tcp = self.http.call(uri);
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = tcp.await?;
            match tls {
                None => Ok(Stream::Plain(tcp)),
                Some((connector, name)) => {
                    let stream = connector.connect(name, TokioIo::new(tcp)).await?;
                    Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
                }
            }
        })
    }
}

/// A connection to an endpoint.
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    // Boxed: a TLS session is over a kilobyte, a plain stream 40 bytes.
    Tls(Box<TokioIo<TlsStream<TokioIo<TokioIo<TcpStream>>>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(s) => s.connected(),
            Stream::Tls(s) => {
                let (tcp, session) = s.inner().get_ref();
                let connected = tcp.inner().connected();
                if session.alpn_protocol() == Some(b"h2") {
                    connected.negotiated_h2()
                } else {
                    connected
                }
            }
        }
    }
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    // Forwarded so hyper sees the socket can gather: without these two it
    // copies each request's head and body into one buffer (a memmove per
    // request) and the kernel gets `sendto` where it could get `writev`.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWrite};
    use tokio::net::TcpListener;

    use super::*;

    /// A loopback pair: the client end wrapped as the connector returns it,
    /// whether the bare socket gathers writes, and the accepted end.
    async fn plain_pair() -> (Stream, bool, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let client = client.unwrap();
        let inner_vectored = AsyncWrite::is_write_vectored(&client);
        (
            Stream::Plain(TokioIo::new(client)),
            inner_vectored,
            accepted.unwrap().0,
        )
    }

    #[tokio::test]
    async fn plain_stream_reports_vectored_writes_as_its_socket_does() {
        let (stream, inner_vectored, _peer) = plain_pair().await;
        // tokio's TcpStream gathers (writev); the wrapper must not hide it,
        // or hyper flattens every request into one buffer first.
        assert!(inner_vectored);
        assert_eq!(Write::is_write_vectored(&stream), inner_vectored);
    }

    #[tokio::test]
    async fn a_vectored_write_delivers_every_slice_in_order() {
        let (mut stream, _, mut peer) = plain_pair().await;
        let parts: [&[u8]; 3] = [b"GET / HTTP/1.1\r\n", b"host: a\r\n\r\n", b"body"];
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let slices = parts.map(io::IoSlice::new);
        // A few dozen bytes on a fresh loopback socket fit its send buffer,
        // so one gathered write takes them all; a wrapper falling back to
        // the default (first non-empty slice only) would write 16.
        let n = poll_fn(|cx| Pin::new(&mut stream).poll_write_vectored(cx, &slices))
            .await
            .unwrap();
        assert_eq!(n, total);
        poll_fn(|cx| Pin::new(&mut stream).poll_shutdown(cx))
            .await
            .unwrap();
        let mut got = Vec::new();
        // Guards a hang only; the bytes are already sent.
        tokio::time::timeout(Duration::from_secs(10), peer.read_to_end(&mut got))
            .await
            .expect("peer read hung")
            .unwrap();
        assert_eq!(got, parts.concat());
    }
}

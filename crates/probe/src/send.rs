//! One probe on the wire: resolve, connect, TLS, one HTTP/1.1 exchange,
//! the body drained, all under the path's timeout; a failure sorted into
//! its [`Reason`] by the stage it happened in.
//!
//! `connection = "new"` opens a connection for every probe and closes it
//! after: a load balancer at its flow limit refuses new connections while
//! old keep-alive ones still work, and a prober that reuses one connection
//! never sees it. `"reuse"` keeps each path's idle connections (at most
//! `max_in_flight` of them) and takes one that is still open.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use stormbreak_policy::Nanos;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::{Connection, PathSpec, TlsSpec};
use crate::outcome::Reason;

/// Where the system's CA bundle usually is (Debian/Ubuntu/Alpine, Fedora/RHEL, openSUSE).
const SYSTEM_CA_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
];

/// The rustls client config for `tls`; the error names the file and why.
pub fn tls_config(tls: &TlsSpec) -> Result<Arc<rustls::ClientConfig>, String> {
    let bundle: &Path = match &tls.ca_bundle {
        Some(p) => p,
        None => SYSTEM_CA_BUNDLES
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
            .ok_or("no ca_bundle given and no system CA bundle found")?,
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(bundle)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read CA certificates from {bundle:?}: {e}"))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("no usable CA certificate in {bundle:?}"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read certificates from {cert:?}: {e}"))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cannot read a private key from {key:?}: {e}"))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                format!("client_cert and client_key do not make a TLS identity: {e}")
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What one exchange found, before it is judged against the path.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Status, if an answer came.
    pub status: Option<u16>,
    /// The transport failure, if any.
    pub failure: Option<Reason>,
    /// `Retry-After` of the answer, as a delay.
    pub retry_after: Option<Nanos>,
}

/// Sends one path's probes: its TLS config and, with
/// `connection = "reuse"`, its idle connections.
pub struct Sender {
    spec: PathSpec,
    tls: Option<tokio_rustls::TlsConnector>,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    max_idle: usize,
}

impl Sender {
    /// A sender for `spec`, keeping at most `max_idle` idle connections.
    pub fn new(spec: PathSpec, max_idle: usize) -> Result<Sender, String> {
        let tls = if spec.is_tls() {
            Some(tokio_rustls::TlsConnector::from(tls_config(&spec.tls)?))
        } else {
            None
        };
        Ok(Sender {
            spec,
            tls,
            idle: Mutex::new(Vec::new()),
            max_idle,
        })
    }

    /// The path probed.
    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// One exchange, ended by `deadline` at the latest.
    pub async fn send(&self, deadline: Instant) -> Answer {
        let fail = |r: Reason| Answer {
            status: None,
            failure: Some(r),
            retry_after: None,
        };
        let reused = match self.spec.connection {
            Connection::Reuse => self.take_idle(),
            Connection::New => None,
        };
        let mut sender = match reused {
            Some(s) => s,
            None => match self.connect(deadline).await {
                Ok(s) => s,
                Err(r) => return fail(r),
            },
        };
        let request = self.request();
        let response = match tokio::time::timeout_at(deadline, sender.send_request(request)).await {
            Err(_) => return fail(Reason::Timeout),
            Ok(Err(_)) => return fail(Reason::Reset),
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                stormbreak_policy::retry::retry_after_from_header(v, now)
            });
        // Drain the body (never held: frames are dropped as they come).
        let mut body = response.into_body();
        let drained = tokio::time::timeout_at(deadline, async {
            while let Some(frame) = body.frame().await {
                frame?;
            }
            Ok::<(), hyper::Error>(())
        })
        .await;
        let failure = match drained {
            Err(_) => Some(Reason::Timeout),
            Ok(Err(_)) => Some(Reason::Body),
            Ok(Ok(())) => {
                if self.spec.connection == Connection::Reuse {
                    self.put_idle(sender);
                }
                None
            }
        };
        Answer {
            status: Some(status),
            failure,
            retry_after,
        }
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(s) = idle.pop() {
            if s.is_ready() {
                return Some(s);
            }
        }
        None
    }

    fn put_idle(&self, s: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(s);
        }
    }

    fn request(&self) -> http::Request<Full<Bytes>> {
        let s = &self.spec;
        let target = s
            .url
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut req = http::Request::new(Full::new(s.body.clone()));
        *req.method_mut() = s.method.clone();
        *req.uri_mut() = target
            .parse()
            .unwrap_or_else(|_| http::Uri::from_static("/"));
        let h = req.headers_mut();
        if let Some(v) = s
            .url
            .authority()
            .and_then(|a| http::HeaderValue::from_str(a.as_str()).ok())
        {
            h.insert(http::header::HOST, v);
        }
        h.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("stormbreak-probe/", env!("CARGO_PKG_VERSION"))),
        );
        for (k, v) in &s.headers {
            h.append(k, v.clone());
        }
        req
    }

    async fn connect(&self, deadline: Instant) -> Result<SendRequest<Full<Bytes>>, Reason> {
        let auth = self.spec.url.authority().ok_or(Reason::Resolve)?;
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let port = auth
            .port_u16()
            .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
        let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => {
                match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await
                {
                    // Not resolved in time: a resolver problem, not the server's.
                    Err(_) => return Err(Reason::Resolve),
                    Ok(Err(_)) => return Err(Reason::Resolve),
                    Ok(Ok(a)) => a.take(8).collect(),
                }
            }
        };
        let mut last = Reason::Resolve;
        let mut tcp = None;
        for addr in addrs {
            match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
                Err(_) => return Err(Reason::ConnectTimeout),
                Ok(Ok(s)) => {
                    tcp = Some(s);
                    break;
                }
                Ok(Err(e)) => {
                    last = match e.kind() {
                        std::io::ErrorKind::TimedOut => Reason::ConnectTimeout,
                        _ => Reason::ConnectRefused,
                    }
                }
            }
        }
        let tcp = tcp.ok_or(last)?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(tcp, deadline).await,
            Some(connector) => {
                let name = self.spec.tls.server_name.as_deref().unwrap_or(host);
                let name = ServerName::try_from(name.to_owned()).map_err(|_| Reason::Tls)?;
                let stream =
                    match tokio::time::timeout_at(deadline, connector.connect(name, tcp)).await {
                        Err(_) => return Err(Reason::Timeout),
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            return Err(match e.kind() {
                                std::io::ErrorKind::ConnectionReset
                                | std::io::ErrorKind::ConnectionAborted
                                | std::io::ErrorKind::UnexpectedEof
                                | std::io::ErrorKind::BrokenPipe => Reason::Reset,
                                _ => Reason::Tls,
                            });
                        }
                    };
                handshake(stream, deadline).await
            }
        }
    }
}

async fn handshake<IO>(io: IO, deadline: Instant) -> Result<SendRequest<Full<Bytes>>, Reason>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = match tokio::time::timeout_at(
        deadline,
        hyper::client::conn::http1::handshake(TokioIo::new(io)),
    )
    .await
    {
        Err(_) => return Err(Reason::Timeout),
        Ok(Err(_)) => return Err(Reason::Reset),
        Ok(Ok(x)) => x,
    };
    // The connection runs until its sender is dropped (or the peer closes).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

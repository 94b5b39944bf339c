//! TLS listeners: certificates from files (generated here with rcgen),
//! ALPN choosing h2 or HTTP/1.1, with a hyper client and with curl.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

/// A self-signed `localhost` certificate and its key, in a directory
/// removed when dropped.
struct Certs {
    dir: crate::common::files::TempDir,
    cert_pem: String,
}

fn certs(tag: &str) -> Certs {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = crate::common::files::TempDir::new(&format!("guard-tls-{tag}"));
    let cert_pem = key.cert.pem();
    dir.write("cert.pem", &cert_pem);
    dir.write("key.pem", key.signing_key.serialize_pem());
    Certs { dir, cert_pem }
}

fn config(b: &Backend, certs: &Certs) -> String {
    format!(
        r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"
tls = {{ cert = "{}", key = "{}" }}

[[cluster]]
name = "app"
endpoints = ["{}"]

[[route]]
name = "app"
cluster = "app"
"#,
        certs.dir.path().join("cert.pem").display(),
        certs.dir.path().join("key.pem").display(),
        b.addr
    )
}

async fn echo_proto() -> Backend {
    backend(|seen| {
        let mut r = status(200);
        let fwd = seen
            .head
            .headers
            .get("forwarded")
            .cloned()
            .unwrap_or(http::HeaderValue::from_static("-"));
        r.headers_mut().insert("seen-forwarded", fwd);
        r
    })
    .await
}

/// One GET over TLS offering `alpn`; returns the negotiated protocol and the response.
async fn tls_get(
    edge: std::net::SocketAddr,
    cert_pem: &str,
    alpn: &[&[u8]],
) -> (Vec<u8>, http::response::Parts) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(rcgen_pem_to_der(cert_pem)))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = TcpStream::connect(edge).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let negotiated = tls.get_ref().1.alpn_protocol().unwrap_or_default().to_vec();
    let io = TokioIo::new(tls);
    // HTTP/1.1 needs a Host (RFC 9112 §3.2); under HTTP/2 it agrees with :authority.
    let request = Request::get("https://localhost/tls")
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), async {
        if negotiated == b"h2" {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            send.send_request(request).await.unwrap()
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            send.send_request(request).await.unwrap()
        }
    })
    .await
    .expect("no hang");
    let (parts, body) = response.into_parts();
    let _ = body.collect().await;
    (negotiated, parts)
}

fn rcgen_pem_to_der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn tls_with_alpn_serves_h2_and_http1_to_a_hyper_client() {
    let b = echo_proto().await;
    let c = certs("hyper");
    let g = guard(&config(&b, &c)).await;
    let edge = g.local_addr("edge").unwrap();
    for (offer, expect) in [
        (&[&b"h2"[..], b"http/1.1"][..], &b"h2"[..]),
        (&[&b"http/1.1"[..]][..], &b"http/1.1"[..]),
    ] {
        let (negotiated, parts) = tls_get(edge, &c.cert_pem, offer).await;
        assert_eq!(negotiated, expect);
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers["seen-forwarded"], "for=127.0.0.1;proto=https");
    }
    assert_eq!(b.hits(), 2);
}

#[test]
fn a_missing_or_bad_certificate_is_a_config_error_at_the_tls_table() {
    let c = certs("bad");
    let text = format!(
        "[[listener]]\nname = \"edge\"\nbind = \"127.0.0.1:0\"\ntls = {{ cert = \"{}\", key = \"{}\" }}\n",
        c.dir.path().join("missing.pem").display(),
        c.dir.path().join("key.pem").display()
    );
    let e = stormbreak_guard::GuardConfig::parse("g.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("g.toml:4:7: listener \"edge\": cannot read certificates"),
        "{e}"
    );
    // A key file given as the certificate: no certificate in it.
    let text = text.replace("missing.pem", "key.pem");
    let e = stormbreak_guard::GuardConfig::parse("g.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no PEM certificate"), "{e}");
}

#[tokio::test]
async fn curl_over_tls_http1_and_h2() {
    let Some(curl) = curl() else { return };
    let b = echo_proto().await;
    let c = certs("curl");
    let g = guard(&config(&b, &c)).await;
    let edge = g.local_addr("edge").unwrap();
    for (flag, status_line) in [("--http1.1", "http/1.1 200"), ("--http2", "http/2 200")] {
        let out = tokio::process::Command::new(curl)
            .args(["-sS", "-i", "--max-time", "10", flag, "--cacert"])
            .arg(c.dir.path().join("cert.pem"))
            .arg("--resolve")
            .arg(format!("localhost:{}:127.0.0.1", edge.port()))
            .arg(format!("https://localhost:{}/", edge.port()))
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
        assert!(
            out.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.starts_with(status_line), "{flag}: {text}");
        assert!(text.contains("proto=https"), "{flag}: {text}");
    }
}

/// A TLS backend (ALPN h2 and http/1.1) that reports the HTTP version it saw.
async fn tls_backend(c: &Certs) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;
    let certs = vec![CertificateDer::from(rcgen_pem_to_der(&c.cert_pem))];
    let key = PrivateKeyDer::from_pem_file(c.dir.path().join("key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let mut r = status(200);
                        r.headers_mut().insert(
                            "seen-version",
                            format!("{:?}", req.version()).parse().unwrap(),
                        );
                        Ok::<_, std::convert::Infallible>(r)
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, task)
}

#[tokio::test]
async fn upstream_tls_over_http1_and_h2_with_the_configured_ca() {
    let c = certs("upstream");
    let (addr, server) = tls_backend(&c).await;
    for (protocol, version) in [("http1", "HTTP/1.1"), ("h2c", "HTTP/2.0")] {
        let toml = format!(
            r#"
[[listener]]
name = "edge"
bind = "127.0.0.1:0"

[[cluster]]
name = "app"
endpoints = ["{addr}"]
protocol = "{protocol}"
tls = {{ ca = "{}", server_name = "localhost" }}

[[route]]
name = "app"
cluster = "app"
"#,
            c.dir.path().join("cert.pem").display()
        );
        let g = guard(&toml).await;
        let edge = g.local_addr("edge").unwrap();
        let (parts, _) = send(&http1_client(), get(edge, "/")).await;
        assert_eq!(parts.status, 200, "{protocol}");
        assert_eq!(parts.headers["seen-version"], version, "{protocol}");
    }
    // A server name the certificate does not cover: the handshake fails, 502.
    let toml = format!(
        "[[listener]]\nname = \"edge\"\nbind = \"127.0.0.1:0\"\n\n[[cluster]]\nname = \"app\"\nendpoints = [\"{addr}\"]\ntls = {{ ca = \"{}\", server_name = \"other.example\" }}\n\n[[route]]\nname = \"app\"\ncluster = \"app\"\n",
        c.dir.path().join("cert.pem").display()
    );
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    assert_eq!(send(&http1_client(), get(edge, "/")).await.0.status, 502);
    server.abort();
}

/// A TLS handshake with `edge` trusting only `cert_pem`.
async fn handshake(
    edge: std::net::SocketAddr,
    cert_pem: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(rcgen_pem_to_der(cert_pem)))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = TcpStream::connect(edge).await?;
    tokio::time::timeout(
        Duration::from_secs(10),
        connector.connect(ServerName::try_from("localhost").unwrap(), tcp),
    )
    .await
    .expect("no hang")
}

/// An HTTP/1.1 keep-alive sender over a TLS connection trusting `cert_pem`.
async fn h1_over_tls(
    edge: std::net::SocketAddr,
    cert_pem: &str,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let tls = handshake(edge, cert_pem).await.expect("handshake");
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

async fn get_status(send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>) -> u16 {
    let request = Request::get("https://localhost/tls")
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), send.send_request(request))
        .await
        .expect("no hang")
        .unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn a_reload_serves_new_certificates_to_new_connections_and_refuses_bad_files() {
    let b = echo_proto().await;
    let old = certs("reload");
    let path = old.dir.write("guard.toml", config(&b, &old));
    let g = stormbreak_guard::Guard::start_file(&path).await.unwrap();
    let edge = g.local_addr("edge").unwrap();
    let mut before = h1_over_tls(edge, &old.cert_pem).await;
    assert_eq!(get_status(&mut before).await, 200);

    // New files at the same paths, then a reload.
    let new = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let new_pem = new.cert.pem();
    old.dir.write("cert.pem", &new_pem);
    old.dir.write("key.pem", new.signing_key.serialize_pem());
    let done = g.reload_file().unwrap();
    assert_eq!(done.certificates, ["edge"]);
    // New connections get the new certificate: a client trusting only the
    // old one is refused, one trusting the new one is served.
    assert!(handshake(edge, &old.cert_pem).await.is_err());
    let mut after = h1_over_tls(edge, &new_pem).await;
    assert_eq!(get_status(&mut after).await, 200);
    // The connection opened before the reload goes on serving.
    assert_eq!(get_status(&mut before).await, 200);

    // A certificate file that does not parse is refused, naming the file
    // with the config's position; the certificate in force stays.
    old.dir.write("cert.pem", "not a certificate");
    let e = g.reload_file().unwrap_err();
    assert!(e.contains("guard.toml:5:") && e.contains("cert.pem"), "{e}");
    let mut still = h1_over_tls(edge, &new_pem).await;
    assert_eq!(get_status(&mut still).await, 200);
    assert_eq!(b.hits(), 4);
    g.shutdown().await;
}

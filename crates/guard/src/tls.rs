//! TLS on a listener: rustls with certificates from PEM files, ALPN
//! offering `h2` and `http/1.1` as the listener's protocol allows.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{Protocol, TlsConfig};

/// The rustls server config for `tls`; the error says which file failed and why.
pub(crate) fn server_config(
    tls: &TlsConfig,
    protocol: Protocol,
) -> Result<Arc<ServerConfig>, String> {
    let certs = CertificateDer::pem_file_iter(&tls.cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {:?}: {e}", tls.cert))?;
    if certs.is_empty() {
        return Err(format!("no PEM certificate in {:?}", tls.cert));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| format!("cannot read a private key from {:?}: {e}", tls.key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "certificate {:?} and key {:?} do not make a TLS identity: {e}",
                tls.cert, tls.key
            )
        })?;
    config.alpn_protocols = match protocol {
        Protocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Protocol::Http1 => vec![b"http/1.1".to_vec()],
        Protocol::H2c => vec![b"h2".to_vec()],
    };
    Ok(Arc::new(config))
}

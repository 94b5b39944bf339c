//! The accept step both serving loops share (data-plane listeners and the
//! admin API).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// How long an accept loop waits after a failed accept before it tries
/// again.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The next connection on `listener`. A failed accept (out of file
/// descriptors, out of buffers: errors about the process, not the
/// listener) waits [`ACCEPT_BACKOFF`] and tries again, so the loop neither
/// spins on the error nor ends while the condition passes.
///
/// Cancel-safe, as `TcpListener::accept` is: callers race it against their
/// shutdown signals in `tokio::select!`.
pub(crate) async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

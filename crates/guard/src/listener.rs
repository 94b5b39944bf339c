//! Accepting connections: the connection cap, protocol detection, and the
//! per-connection limits and timeouts that keep a slow or malformed client
//! from costing more than its share.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::config::{AtConnectionCap, ListenerConfig, Protocol};
use crate::conn_watch::{Activity, Ended};
use crate::listen_set::{Bound, Phase, Settings};
use crate::serving::Serving;

/// Serves `bound` on `listener` until `shutdown` turns true, the guard
/// drains, or a reload removes it.
///
/// The connection cap works as HAProxy's `maxconn` by default
/// (`at_connection_cap = "queue"`): with `max_connections` connections
/// open the loop stops accepting, so further connections wait in the
/// kernel's accept backlog (`backlog`, bounded by the OS) instead of
/// costing the guard memory. With `"refuse"` the loop always accepts and
/// resets a connection it has no room for at once, as an L4 balancer
/// refuses flows beyond its cap.
pub(crate) async fn serve(
    bound: Arc<Bound>,
    listener: TcpListener,
    serving: Serving,
    mut shutdown: watch::Receiver<bool>,
) {
    // Draining (the guard's, or this listener's on reload): stop
    // accepting (the socket closes with this task), let open connections
    // finish what is in flight.
    let mut draining = serving.draining();
    let mut phase = bound.phase();
    loop {
        // Read each time round: a reload may switch it (a loop already
        // waiting for room keeps waiting until some comes back).
        let refuse = bound.settings().config.at_connection_cap == AtConnectionCap::Refuse;
        let reserved = if refuse {
            None
        } else {
            tokio::select! {
                p = bound.acquire() => match p { Ok(p) => Some(p), Err(_) => return },
                _ = shutdown.changed() => return,
                () = drained(&mut draining) => return,
                () = leaving(&mut phase) => return,
            }
        };
        let (stream, peer) = tokio::select! {
            accepted = crate::accept::accept(&listener) => accepted,
            _ = shutdown.changed() => return,
            () = drained(&mut draining) => return,
            () = leaving(&mut phase) => return,
        };
        let Some(mut slot) = reserved.or_else(|| bound.try_acquire()) else {
            refuse_at_cap(stream, &bound.name, &serving);
            continue;
        };
        // The settings (and certificate) in force now: a reload changes
        // them for new connections only.
        let settings = bound.settings();
        // One peer may hold at most `max_connections_per_client`; a
        // trusted proxy speaks for many clients and is exempt.
        let per_client = match settings.config.max_connections_per_client {
            0 => 0,
            _ if crate::headers::is_trusted(
                &settings.request.trusted,
                peer.ip().to_canonical(),
            ) =>
            {
                0
            }
            n => n,
        };
        // Counted only under a cap: without one, nothing to look up.
        let peer_slot = match per_client {
            0 => None,
            cap => match bound.peers().enter(peer.ip(), cap) {
                Some(slot) => Some(slot),
                None => {
                    // Closed at once: the slot under `max_connections` goes back.
                    serving
                        .proxy()
                        .metrics
                        .connection_closed(&bound.name, "per_client");
                    continue;
                }
            },
        };
        // The header-read deadline runs from here: a TLS handshake counts.
        let activity = Activity::new();
        slot.occupy();
        let _ = stream.set_nodelay(true);
        let open = bound.opened();
        let serving = serving.clone();
        let mut stop = shutdown.clone();
        let (mut phase, conn_phase) = (bound.phase(), bound.phase());
        tokio::spawn(async move {
            let _slot = slot;
            let _peer = peer_slot;
            let _open = open;
            let serve = async {
                let config = &settings.config;
                match settings.tls.clone() {
                    None => {
                        connection(stream, peer, &settings, serving, conn_phase, activity).await;
                    }
                    Some(acceptor) => {
                        // The handshake counts against the header-read
                        // timeout: a slow handshake is slowloris too.
                        let limit = Duration::from(config.header_read_timeout);
                        // Boxed: a TLS stream (rustls' state and buffers)
                        // and its handshake would otherwise size every
                        // connection's task, cleartext ones too.
                        Box::pin(async move {
                            if let Ok(Ok(stream)) =
                                tokio::time::timeout(limit, acceptor.accept(stream)).await
                            {
                                connection(stream, peer, &settings, serving, conn_phase, activity)
                                    .await;
                            }
                        })
                        .await;
                    }
                }
            };
            tokio::select! {
                () = serve => {}
                _ = stop.changed() => {}
                // A removed listener's drain deadline passed.
                () = closed(&mut phase) => {}
            }
        });
    }
}

/// Closes a connection the listener has no room for, with a reset
/// (`SO_LINGER` 0) rather than a FIN: the client learns at once, whether
/// or not it has sent its request, and the guard's side keeps no
/// `TIME_WAIT` entry for it (a storm of refused connects must not pile
/// them up on the guard). Counted as `at_cap`.
fn refuse_at_cap(stream: tokio::net::TcpStream, listener: &str, serving: &Serving) {
    // Without the option the close is a plain FIN: still refused.
    let _ = stream.set_zero_linger();
    drop(stream);
    serving
        .proxy()
        .metrics
        .connection_closed(listener, "at_cap");
}

async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    settings: &Settings,
    serving: Serving,
    mut phase: watch::Receiver<Phase>,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = &settings.config;
    let io = TokioIo::new(IdleIo::new(
        stream,
        config.idle_timeout.into(),
        activity.clone(),
    ));
    let mut draining = serving.draining();
    let request = settings.request.clone();
    let watched = activity.clone();
    let service = service_fn(move |req| {
        let (serving, request, activity) = (serving.clone(), request.clone(), activity.clone());
        async move {
            let inflight = activity.begin();
            // The config in force when the request arrived answers it,
            // even if a reload replaces it meanwhile.
            let proxy = serving.proxy();
            // Boxed: hyper keeps a slot the size of this future in every
            // connection, idle or not; the request path's future is
            // about 4.4 KiB, a box per request is one allocation.
            let response = Box::pin(proxy.handle(&request, peer, req)).await;
            // In flight until its body is sent: a long download keeps its
            // connection from the idle timeout while it moves.
            Ok::<_, Infallible>(response.map(|body| inflight.answered(body)))
        }
    });
    // A malformed request gets hyper's 400 and the connection ends; the
    // error is the client's, not ours, so it is not propagated.
    let conn = settings.http.serve_connection(io, service);
    tokio::pin!(conn);
    // The watch runs from the accept: the TLS handshake counts against the
    // first request's header-read time.
    let first = Duration::from(config.header_read_timeout);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = drained(&mut draining) => {}
        () = leaving(&mut phase) => {}
        ended = watched.watch(first, config.idle_timeout.into()) => {
            if ended == Ended::NoRequest {
                // Nothing in flight to finish: close now.
                return;
            }
            // Idle: what is in flight gets the request timeout to finish,
            // then the connection closes whatever it is doing (an HTTP/2
            // client that never reads, and pings, must not hold it).
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from(config.request_timeout), conn).await;
            return;
        }
    }
    // Draining: finish the requests in flight (HTTP/2: GOAWAY; HTTP/1.1:
    // close after the current response), then end.
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The listener's HTTP server settings, made once per listener config and
/// shared by its connections (a connection borrows them for its life:
/// built per connection they sat in every connection's task, and cost a
/// build per accept).
pub(crate) fn http_builder(config: &ListenerConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from(config.header_read_timeout))
        // A client that shuts its sending side after the request still
        // reads the answer (RFC 9112 §9.6 lets either side half-close);
        // as HAProxy without `option abortonclose`, the request runs on.
        .half_close(true)
        .max_headers(config.max_headers as usize)
        .max_buf_size((config.max_header_bytes as usize).max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(config.max_header_bytes)
        .max_concurrent_streams(256);
    match config.protocol {
        Protocol::Auto => builder,
        Protocol::Http1 => builder.http1_only(),
        Protocol::H2c => builder.http2_only(),
    }
}

/// Resolves once a reload has removed the listener (or its `Bound` is gone).
async fn leaving(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p != Phase::Serving).await;
}

/// Resolves once a removed listener's drain deadline has passed.
async fn closed(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p == Phase::Closed).await;
}

/// Resolves once the drain flag is up (or its sender is gone).
async fn drained(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|d| *d).await;
}

/// A socket that fails with `TimedOut` once no byte has moved for `idle`
/// while no request is in flight on it (a request in flight is bounded by
/// the request timeout instead).
///
/// The timer is lazy: a read or write only records the time, and the
/// `Sleep` is re-armed (to the last activity + `idle`) when it fires
/// early. Resetting the `Sleep` on every IO call instead cost a timer-wheel
/// update per read and per write (docs/BENCHMARKS.md, section 12); the
/// connection still times out exactly `idle` after its last byte.
struct IdleIo<S> {
    inner: S,
    idle: Duration,
    /// When a byte last moved either way.
    last: Instant,
    /// Fires at or before `last + idle`, never after.
    deadline: Pin<Box<Sleep>>,
    activity: Arc<Activity>,
}

impl<S> IdleIo<S> {
    fn new(inner: S, idle: Duration, activity: Arc<Activity>) -> Self {
        let last = Instant::now();
        IdleIo {
            inner,
            idle,
            last,
            deadline: Box::pin(tokio::time::sleep_until(last + idle)),
            activity,
        }
    }

    fn touch(&mut self) {
        self.last = Instant::now();
    }

    /// `Err` once the connection has been idle too long.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        // Bounded: each pass re-arms the timer to a deadline in the future
        // (`last + idle` after activity, `now + idle` while a request is in
        // flight), so the next poll is pending.
        while self.deadline.as_mut().poll(cx).is_ready() {
            let due = self.last + self.idle;
            if due > Instant::now() {
                // Fired early: bytes moved since it was armed.
                self.deadline.as_mut().reset(due);
                continue;
            }
            if self.activity.pending() == 0 {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "connection idle"));
            }
            self.touch();
            self.deadline.as_mut().reset(self.last + self.idle);
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.touch();
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                self.check(cx)?;
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.touch();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, bufs))?;
        self.touch();
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    const IDLE: Duration = Duration::from_secs(1);

    fn idle_io() -> (IdleIo<DuplexStream>, DuplexStream, Arc<Activity>) {
        let (ours, peer) = tokio::io::duplex(64);
        let activity = Activity::new();
        (IdleIo::new(ours, IDLE, activity.clone()), peer, activity)
    }

    /// Virtual time: `got` is `want`, give or take the timer wheel's
    /// millisecond (rounded up); a timer off by a whole period fails.
    fn assert_close(got: Duration, want: Duration) {
        assert!(
            got >= want && got <= want + Duration::from_millis(2),
            "timed out after {got:?}, expected {want:?}"
        );
    }

    /// Reads until the idle error; returns it and when it came (virtual time).
    async fn read_until_error(io: &mut IdleIo<DuplexStream>) -> (io::Error, Instant) {
        let mut buf = [0u8; 16];
        loop {
            match io.read(&mut buf).await {
                Ok(0) => panic!("peer closed before the idle timeout"),
                Ok(_) => {}
                Err(e) => return (e, Instant::now()),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_times_out_after_idle() {
        let (mut io, _peer, _) = idle_io();
        let start = Instant::now();
        let (err, at) = read_until_error(&mut io).await;
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_close(at - start, IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn activity_moves_the_deadline_to_idle_after_the_last_byte() {
        let (mut io, mut peer, _) = idle_io();
        let start = Instant::now();
        let mut buf = [0u8; 16];
        // A byte read at 0.6 s and one written at 0.9 s: the timer armed
        // for 1 s fires early and must re-arm to 1.9 s, not time out.
        tokio::time::sleep(Duration::from_millis(600)).await;
        peer.write_all(b"x").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        io.write_all(b"y").await.unwrap();
        let (err, at) = read_until_error(&mut io).await;
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_close(at - start, Duration::from_millis(1900));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_holds_the_connection_open() {
        let (mut io, _peer, activity) = idle_io();
        let request = activity.begin();
        let mut buf = [0u8; 16];
        // Ten idle periods with a request in flight: no timeout.
        let held = tokio::time::timeout(10 * IDLE, io.read(&mut buf)).await;
        assert!(held.is_err(), "timed out with a request in flight");
        // The request ends: the next idle period closes it.
        drop(request);
        let start = Instant::now();
        let (err, at) = read_until_error(&mut io).await;
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(at - start <= IDLE, "took {:?}", at - start);
    }
}

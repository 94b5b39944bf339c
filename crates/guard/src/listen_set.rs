//! The listeners in force, and how a reload changes them.
//!
//! A listener is known by its name. On reload each `[[listener]]` of the
//! new config is, against the listeners in force:
//!
//! * **kept** (same name, same `bind`): the socket stays open, so nothing
//!   queued in its backlog is lost; new connections get the new settings
//!   (timeouts, limits, protocol, TLS certificate), open ones keep theirs;
//! * **added** (a new name), or **moved** (same name, another `bind`): a
//!   new socket is bound, and a moved listener's old socket drains as a
//!   removed one does;
//! * and a listener in force that the new config lacks is **removed**: its
//!   socket closes at once (new connects are refused), its open
//!   connections finish their requests in flight (HTTP/1.1 closes after
//!   the current response, HTTP/2 sends GOAWAY; an idle keep-alive
//!   connection closes at once) for up to its `drain_timeout`, then close.
//!
//! Every new socket is bound before anything changes ([`ListenSet::plan`]):
//! one that cannot bind refuses the whole reload, and the sockets already
//! bound for it close, with the listeners and config in force untouched.
//! Only then does [`ListenSet::apply`] swap.
//!
//! A listener's connection cap (`max_connections`, HAProxy's `maxconn`)
//! lives across reloads with its name: a kept or moved listener keeps the
//! semaphore its open connections hold permits of, so a reload never
//! hands out a second allowance. A raised cap adds permits; a lowered one
//! takes back the free permits at once and the rest as open connections
//! close, so new connections wait until fewer than the new cap are open.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::config::{GuardConfig, ListenerConfig};
use crate::peers::Peers;
use crate::proxy::{ConnectionCaps, ListenerSettings};
use crate::serving::Serving;

/// Where a listener is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Accepting.
    Serving,
    /// Removed by a reload: not accepting; open connections finish what
    /// is in flight.
    Draining,
    /// Its drain deadline passed: open connections are closed.
    Closed,
}

/// What a new connection on a listener is served with: read when it is
/// accepted, so a reload changes it for new connections only.
pub(crate) struct Settings {
    pub(crate) config: ListenerConfig,
    pub(crate) request: Arc<ListenerSettings>,
    /// `None` for a cleartext listener.
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The HTTP/1.1 and HTTP/2 server settings its connections borrow.
    pub(crate) http: hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
}

impl Settings {
    /// Reads the listener's certificate and key, when it has TLS; the
    /// error names the listener and the file.
    fn new(l: &ListenerConfig) -> Result<Self, String> {
        let tls = match &l.tls {
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(
                crate::tls::server_config(t, l.protocol)
                    .map_err(|e| format!("listener {:?}: {e}", l.name))?,
            )),
            None => None,
        };
        Ok(Settings {
            config: l.clone(),
            request: Arc::new(ListenerSettings::new(l)),
            tls,
            http: crate::listener::http_builder(l),
        })
    }
}

/// A listener's connection cap: `max` permits, shared by every socket the
/// listener has had while their connections are open.
pub(crate) struct Cap {
    permits: Arc<Semaphore>,
    /// Connections open under it (a permit the accept loop holds while it
    /// waits for a connection is not one).
    open: AtomicU64,
    /// The cap's size now, and the permits still owed by open connections
    /// since it was lowered below them: each is kept (forgotten) when its
    /// connection closes instead of going back to the semaphore.
    size: Mutex<(u32, u32)>,
    /// Connections open under it by client address, for
    /// `max_connections_per_client` (bounded by the open connections).
    peers: Arc<Peers>,
}

impl Cap {
    fn new(max: u32) -> Arc<Self> {
        Arc::new(Cap {
            permits: Arc::new(Semaphore::new(max as usize)),
            open: AtomicU64::new(0),
            size: Mutex::new((max, 0)),
            peers: Peers::new(),
        })
    }

    /// Sets the cap to `max`: a raise cancels what is owed, then adds
    /// permits; a lowering takes the free permits at once and owes the rest.
    fn resize(&self, max: u32) {
        let mut size = self.size.lock().unwrap_or_else(PoisonError::into_inner);
        let (was, mut owed) = *size;
        if max >= was {
            let more = max - was;
            let cancelled = more.min(owed);
            owed -= cancelled;
            self.permits.add_permits((more - cancelled) as usize);
        } else {
            let less = was - max;
            let taken = self.permits.forget_permits(less as usize) as u32;
            owed += less - taken;
        }
        *size = (max, owed);
    }

    /// A closed connection's permit: back to the semaphore, or kept when
    /// the cap is owed one.
    fn release(&self, permit: OwnedSemaphorePermit) {
        let mut size = self.size.lock().unwrap_or_else(PoisonError::into_inner);
        if size.1 > 0 {
            size.1 -= 1;
            permit.forget();
        }
    }

    /// `(open connections, cap size)`, for the gauges.
    pub(crate) fn gauge(&self) -> (u64, u64) {
        let size = self.size.lock().unwrap_or_else(PoisonError::into_inner).0;
        (self.open.load(Ordering::Acquire), u64::from(size))
    }

    /// Waits for room under the cap (the semaphore is fair: first come,
    /// first served).
    async fn acquire(self: &Arc<Self>) -> Result<Slot, tokio::sync::AcquireError> {
        let permit = self.permits.clone().acquire_owned().await?;
        Ok(self.slot(permit))
    }

    /// Room under the cap now, if there is any.
    fn try_acquire(self: &Arc<Self>) -> Option<Slot> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(self.slot(permit))
    }

    fn slot(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            permit: Some(permit),
            cap: self.clone(),
            occupied: false,
        }
    }
}

/// Room under a listener's cap, until dropped: reserved by the accept
/// loop, then one connection's.
pub(crate) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    cap: Arc<Cap>,
    /// A connection holds it (counted in the gauge).
    occupied: bool,
}

impl Slot {
    /// A connection was accepted into it.
    pub(crate) fn occupy(&mut self) {
        if !std::mem::replace(&mut self.occupied, true) {
            self.cap.open.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.occupied {
            self.cap.open.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(p) = self.permit.take() {
            self.cap.release(p);
        }
    }
}

/// One listener's socket in force (or draining), with what its
/// connections share.
pub(crate) struct Bound {
    pub(crate) name: String,
    /// `bind` as configured: a reload with another one moves the listener.
    bind: String,
    /// The address it is bound to (its port, when `bind` asked for 0).
    pub(crate) addr: SocketAddr,
    settings: RwLock<Arc<Settings>>,
    cap: Arc<Cap>,
    /// Connections open on this socket.
    open: watch::Sender<u64>,
    phase: watch::Sender<Phase>,
}

impl Bound {
    /// Waits for room under the listener's cap.
    pub(crate) async fn acquire(&self) -> Result<Slot, tokio::sync::AcquireError> {
        self.cap.acquire().await
    }

    /// Room under the listener's cap now, if there is any.
    pub(crate) fn try_acquire(&self) -> Option<Slot> {
        self.cap.try_acquire()
    }

    /// Connections open on the listener by client address (every socket
    /// it has had, as its cap).
    pub(crate) fn peers(&self) -> &Arc<Peers> {
        &self.cap.peers
    }

    /// What a connection accepted now is served with.
    pub(crate) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Watches the listener's phase.
    pub(crate) fn phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Counts a connection open until the returned guard is dropped.
    pub(crate) fn opened(self: &Arc<Self>) -> Open {
        self.open.send_modify(|n| *n += 1);
        Open {
            bound: self.clone(),
            _process: crate::trim::opened(),
        }
    }

    /// Connections open on this socket.
    pub(crate) fn open_connections(&self) -> u64 {
        *self.open.borrow()
    }
}

/// One open connection, counted on its listener (and in the process's
/// count the heap trim watches) until dropped.
pub(crate) struct Open {
    bound: Arc<Bound>,
    _process: crate::trim::Opened<'static>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.bound.open.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What a reload did to the listeners, by name.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ListenerChanges {
    /// New listeners, bound and accepting.
    pub added: Vec<String>,
    /// Listeners gone from the config: not accepting, draining.
    pub removed: Vec<String>,
    /// Listeners with a new `bind`: the new socket accepts, the old one drains.
    pub moved: Vec<String>,
    /// Listeners whose socket stayed and whose other settings changed
    /// (for new connections).
    pub updated: Vec<String>,
}

/// Why a plan could not be made: nothing was changed.
#[derive(Debug)]
pub(crate) enum PlanError {
    /// A certificate or key could not be read.
    Tls(String),
    /// Listener `index` kept its socket (same `bind`) but asked for
    /// another `backlog`, which only a new socket can have.
    Backlog {
        index: usize,
        name: String,
        was: u32,
        asked: u32,
    },
    /// Listener `index` of the config could not bind.
    Bind {
        index: usize,
        name: String,
        bind: String,
        source: io::Error,
    },
}

/// A new config's listeners, checked and bound but not yet in force.
pub(crate) struct Plan {
    /// The listeners to be in force, in config order, with their settings
    /// and cap size.
    next: Vec<(Arc<Bound>, Arc<Settings>, u32)>,
    /// New sockets, to serve once the plan is applied.
    sockets: Vec<(Arc<Bound>, TcpListener)>,
    pub(crate) changes: ListenerChanges,
}

impl Plan {
    /// The caps of the listeners to be in force, for the new proxy's gauges.
    pub(crate) fn caps(&self) -> ConnectionCaps {
        Arc::new(
            self.next
                .iter()
                .map(|(b, _, _)| (b.name.clone(), b.cap.clone()))
                .collect(),
        )
    }
}

/// Binds `bind` (an `ip:port`, checked by the config) as tokio's
/// `TcpListener::bind` does (`SO_REUSEADDR` on Unix), listening with
/// `backlog` (tokio's own is 1024, the config's default).
/// Needs a tokio runtime (checked by the caller).
fn bind(bind: &str, backlog: u32) -> io::Result<TcpListener> {
    let addr: SocketAddr = bind
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not an ip:port"))?;
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The listeners in force and those still draining.
#[derive(Default)]
pub(crate) struct ListenSet {
    current: Mutex<Vec<Arc<Bound>>>,
    /// Removed or moved away, until their connections are gone (shared
    /// with each drain's task, which takes its listener out).
    draining: Arc<Mutex<Vec<Arc<Bound>>>>,
}

impl ListenSet {
    /// Reads the certificates and binds the new sockets `config` needs,
    /// changing nothing in force; on an error every socket it bound closes.
    /// Must run inside a tokio runtime.
    pub(crate) fn plan(&self, config: &GuardConfig) -> Result<Plan, PlanError> {
        let current = self.listeners();
        let mut plan = Plan {
            next: Vec::with_capacity(config.listeners.len()),
            sockets: Vec::new(),
            changes: ListenerChanges::default(),
        };
        for (index, l) in config.listeners.iter().enumerate() {
            let settings = Arc::new(Settings::new(l).map_err(PlanError::Tls)?);
            let old = current.iter().find(|b| b.name == l.name);
            if let Some(b) = old.filter(|b| b.bind == l.bind) {
                let was = b.settings().config.backlog;
                if was != l.backlog {
                    return Err(PlanError::Backlog {
                        index,
                        name: l.name.clone(),
                        was,
                        asked: l.backlog,
                    });
                }
                if b.settings().config.difference(l).is_some() {
                    plan.changes.updated.push(l.name.clone());
                }
                plan.next.push((b.clone(), settings, l.max_connections));
                continue;
            }
            let bind_err = |source| PlanError::Bind {
                index,
                name: l.name.clone(),
                bind: l.bind.clone(),
                source,
            };
            let socket = bind(&l.bind, l.backlog).map_err(bind_err)?;
            let addr = socket.local_addr().map_err(bind_err)?;
            let bound = Arc::new(Bound {
                name: l.name.clone(),
                bind: l.bind.clone(),
                addr,
                settings: RwLock::new(settings.clone()),
                // A moved listener's cap counts its old socket's
                // connections too, until they are gone.
                cap: old.map_or_else(|| Cap::new(l.max_connections), |b| b.cap.clone()),
                open: watch::Sender::new(0),
                phase: watch::Sender::new(Phase::Serving),
            });
            match old {
                Some(_) => plan.changes.moved.push(l.name.clone()),
                None => plan.changes.added.push(l.name.clone()),
            }
            plan.sockets.push((bound.clone(), socket));
            plan.next.push((bound, settings, l.max_connections));
        }
        plan.changes.removed = current
            .iter()
            .filter(|b| !config.listeners.iter().any(|l| l.name == b.name))
            .map(|b| b.name.clone())
            .collect();
        Ok(plan)
    }

    /// Puts `plan` in force: kept listeners take their new settings and
    /// cap, new sockets start accepting, and listeners not in the plan
    /// drain. Cannot fail.
    pub(crate) fn apply(&self, plan: Plan, serving: &Serving) {
        let mut next = Vec::with_capacity(plan.next.len());
        for (bound, settings, max) in plan.next {
            *bound
                .settings
                .write()
                .unwrap_or_else(PoisonError::into_inner) = settings;
            bound.cap.resize(max);
            next.push(bound);
        }
        let gone: Vec<Arc<Bound>> = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            let old = std::mem::replace(&mut *current, next);
            old.into_iter()
                .filter(|b| !current.iter().any(|n| Arc::ptr_eq(n, b)))
                .collect()
        };
        for (bound, socket) in plan.sockets {
            serving.spawn(crate::listener::serve(
                bound,
                socket,
                serving.clone(),
                serving.stopped(),
            ));
        }
        for bound in gone {
            // Stops the accept loop, which closes the socket.
            bound.phase.send_replace(Phase::Draining);
            self.draining
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(bound.clone());
            let (draining, stopped) = (self.draining.clone(), serving.stopped());
            serving.spawn(async move {
                drain(&bound, stopped).await;
                tracing::info!(listener = %bound.name, addr = %bound.addr, "removed listener drained");
                draining
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|b| !Arc::ptr_eq(b, &bound));
            });
        }
    }

    /// The listeners in force, in config order.
    pub(crate) fn listeners(&self) -> Vec<Arc<Bound>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Client connections open on every listener, draining ones included.
    pub(crate) fn open_connections(&self) -> u64 {
        let draining = self
            .draining
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.listeners()
            .iter()
            .chain(&draining)
            .map(|b| b.open_connections())
            .sum()
    }
}

/// A removed listener's drain: its connections have up to its
/// `drain_timeout` to finish (or until the guard stops), then close;
/// returns once none is open.
async fn drain(bound: &Bound, mut stopped: watch::Receiver<bool>) {
    let deadline = Duration::from(bound.settings().config.drain_timeout);
    let mut open = bound.open.subscribe();
    tokio::select! {
        _ = tokio::time::timeout(deadline, open.wait_for(|n| *n == 0)) => {}
        _ = stopped.wait_for(|s| *s) => {}
    }
    bound.phase.send_replace(Phase::Closed);
    // Closed connections end at their next poll; the listener is counted
    // until they have.
    tokio::select! {
        _ = open.wait_for(|n| *n == 0) => {}
        _ = stopped.wait_for(|s| *s) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener with `extra` lines in its table, as if bound.
    fn bound(extra: &str) -> Arc<Bound> {
        let text = format!("[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:0\"\n{extra}\n");
        let config = GuardConfig::parse("g.toml", &text).unwrap();
        let l = &config.listeners[0];
        Arc::new(Bound {
            name: l.name.clone(),
            bind: l.bind.clone(),
            addr: "127.0.0.1:1".parse().unwrap(),
            settings: RwLock::new(Arc::new(Settings::new(l).unwrap())),
            cap: Cap::new(l.max_connections),
            open: watch::Sender::new(0),
            phase: watch::Sender::new(Phase::Draining),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_closes_connections_still_open_at_its_deadline() {
        let b = bound("drain_timeout = \"5s\"");
        let open = b.opened();
        let (_keep, stopped) = watch::channel(false);
        let start = tokio::time::Instant::now();
        let task = tokio::spawn({
            let b = b.clone();
            async move { drain(&b, stopped).await }
        });
        tokio::time::sleep(Duration::from_millis(4_999)).await;
        assert_eq!(
            *b.phase.borrow(),
            Phase::Draining,
            "closed before its deadline"
        );
        let mut phase = b.phase();
        let _ = phase.wait_for(|p| *p == Phase::Closed).await;
        // Virtual time: the deadline, give or take the timer wheel's millisecond.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(5) && took <= Duration::from_millis(5_002),
            "{took:?}"
        );
        // The closed connection ends; the drain with it.
        drop(open);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_ends_when_the_last_connection_does() {
        let b = bound("drain_timeout = \"5s\"");
        let open = b.opened();
        let (_keep, stopped) = watch::channel(false);
        let task = tokio::spawn({
            let b = b.clone();
            async move { drain(&b, stopped).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        let start = tokio::time::Instant::now();
        drop(open);
        task.await.unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "waited past its last connection"
        );
        assert_eq!(*b.phase.borrow(), Phase::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopping_guard_ends_a_drain_at_once() {
        let b = bound("drain_timeout = \"3600s\"");
        let _open = b.opened();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn({
            let b = b.clone();
            async move { drain(&b, stopped).await }
        });
        tokio::task::yield_now().await;
        let start = tokio::time::Instant::now();
        stop.send_replace(true);
        task.await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(*b.phase.borrow(), Phase::Closed);
    }

    #[tokio::test]
    async fn a_lowered_cap_takes_back_free_permits_now_and_held_ones_as_they_return() {
        let cap = Cap::new(4);
        let held = [
            cap.acquire().await.unwrap(),
            cap.acquire().await.unwrap(),
            cap.acquire().await.unwrap(),
        ];
        // 1 free: taken at once; 2 owed.
        cap.resize(1);
        assert_eq!(cap.permits.available_permits(), 0);
        assert_eq!(*cap.size.lock().unwrap(), (1, 2));
        drop(held);
        // 3 returned, 2 of them kept: the cap of 1 is free.
        assert_eq!(cap.permits.available_permits(), 1);
        assert_eq!(*cap.size.lock().unwrap(), (1, 0));
        // Raised again: 1 + 4 more.
        cap.resize(5);
        assert_eq!(cap.permits.available_permits(), 5);
    }

    #[tokio::test]
    async fn a_connection_waiting_for_room_waits_until_fewer_than_the_new_cap_are_open() {
        let cap = Cap::new(2);
        let a = cap.acquire().await.unwrap();
        let b = cap.acquire().await.unwrap();
        // The accept loop already waits for room when the cap is lowered.
        let waiting = tokio::spawn({
            let cap = cap.clone();
            async move { cap.acquire().await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        cap.resize(1);
        // One closes: two were open under a cap of one, so no room yet.
        drop(a);
        tokio::task::yield_now().await;
        assert_eq!(cap.permits.available_permits(), 0);
        assert!(
            !waiting.is_finished(),
            "admitted a second connection under a cap of one"
        );
        // The other closes: room for one.
        drop(b);
        waiting.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_raise_cancels_what_a_lowering_still_owes() {
        let cap = Cap::new(2);
        let held = [cap.acquire().await.unwrap(), cap.acquire().await.unwrap()];
        cap.resize(1);
        assert_eq!(*cap.size.lock().unwrap(), (1, 1));
        cap.resize(3);
        // Two open under a cap of three: one free, nothing owed.
        assert_eq!(*cap.size.lock().unwrap(), (3, 0));
        assert_eq!(cap.permits.available_permits(), 1);
        drop(held);
        assert_eq!(cap.permits.available_permits(), 3);
    }
}

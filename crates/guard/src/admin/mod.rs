//! The admin API on its own listener: `/metrics` for Prometheus, `/state`
//! for operators, and the runtime levers an incident needs (shed rules,
//! staged restores, a route's retry policy).
//!
//! Who may do what:
//!
//! * `GET /metrics`: anyone who can reach the listener (it carries config
//!   names and counts only, and Prometheus scrapes it);
//! * `GET /state`: a loopback peer, or anyone with the token;
//! * every `POST`: only with `Authorization: Bearer TOKEN`, compared in
//!   constant time; without a configured token the API is read-only.
//!
//! Every change is an *override*: listed in `/state` with who made it
//! (peer address and the optional `X-Stormbreak-Operator` header) and what
//! it was, and logged through `tracing` (target `stormbreak_guard::admin`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::ratelimit::Gcra;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::Criticality;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::changes::Override;
use crate::config::AdminConfig;
use crate::conn_watch::Ended;
use crate::live::Live;
use crate::restore::RestoreView;

/// Largest mutation body read: a shed rule or retry block is a few hundred bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

mod roster;

use crate::changes::Change;
use roster::{Member, Refusal, Roster};

/// Admin connections open at once. At the cap, a new connection evicts
/// the oldest one that is idle and has never shown the token (see
/// `roster`), and is closed when there is none.
pub const MAX_CONNECTIONS: usize = 64;

/// Admin connections one client address may hold; past it, a new one
/// evicts that address's oldest evictable connection.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 16;

/// Time allowed from accept to a complete first request head, and for
/// every later head (hyper's header-read timer).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection with no request in flight is closed after this.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Failed-authentication log lines: one a second sustained, ten at once;
/// the rest are only counted (`stormbreak_guard_admin_auth_failures_total`).
const AUTH_LOG_EVERY: Nanos = Nanos::SECOND;
const AUTH_LOG_BURST: u32 = 10;

/// The admin API's shared state.
pub(crate) struct Admin {
    live: Arc<Live>,
    token: Option<Vec<u8>>,
    /// Bounds the failed-authentication log (the policy crate's GCRA).
    auth_log: Gcra,
    /// The GCRA's theoretical arrival time.
    auth_log_tat: std::sync::Mutex<Nanos>,
}

/// The bearer token from `token_file` or `token_env`, if either is set.
pub(crate) fn load_token(config: &AdminConfig) -> Result<Option<Vec<u8>>, String> {
    let token = match (&config.token_file, &config.token_env) {
        (Some(path), _) => {
            std::fs::read_to_string(path).map_err(|e| format!("admin.token_file {path:?}: {e}"))?
        }
        (None, Some(var)) => std::env::var(var)
            .map_err(|_| format!("admin.token_env: environment variable {var} is not set"))?,
        (None, None) => return Ok(None),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err("admin: the token is empty".to_owned());
    }
    Ok(Some(token.as_bytes().to_vec()))
}

impl Admin {
    pub(crate) fn new(live: Arc<Live>, token: Option<Vec<u8>>) -> Self {
        // Valid by construction: a positive interval and a burst ≥ 1.
        let auth_log = Gcra::new(AUTH_LOG_EVERY, AUTH_LOG_BURST)
            .unwrap_or_else(|_| unreachable!("1 s and 10 are valid GCRA parameters"));
        Admin {
            live,
            token,
            auth_log,
            auth_log_tat: std::sync::Mutex::new(Nanos::ZERO),
        }
    }

    /// A request was refused for its token: counted, and logged within
    /// the log's rate (a flood of bad tokens must not flood the log).
    fn auth_failed(&self, peer: SocketAddr, path: &str) {
        let p = self.live.get();
        p.metrics.admin_auth_failure();
        let now = p.clock.now();
        let mut tat = self
            .auth_log_tat
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Ok(next) = self
            .auth_log
            .check((*tat).max(self.auth_log.fresh(now)), now)
        {
            *tat = next;
            tracing::warn!(target: "stormbreak_guard::admin", peer = %peer, path, "admin authentication failed");
        }
    }

    fn authorized(&self, request: &Request<Incoming>) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or(b"");
        // `ct_eq` on slices of different lengths is false without looking at
        // the bytes; the length of a token is not the secret.
        given.ct_eq(token).into()
    }

    async fn handle(
        &self,
        peer: SocketAddr,
        member: &Member,
        request: Request<Incoming>,
    ) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        // A connection that has shown the token is an operator's: no
        // unauthenticated newcomer may evict it.
        if self.token.is_some() && self.authorized(&request) {
            member
                .trusted
                .store(true, std::sync::atomic::Ordering::Release);
        }
        match (&method, path.as_str()) {
            (&Method::GET, "/metrics") => {
                let mut r = Response::new(Full::new(Bytes::from(self.live.get().metrics_text())));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                );
                r
            }
            (&Method::GET, "/state") => {
                if !peer.ip().to_canonical().is_loopback() && !self.authorized(&request) {
                    self.auth_failed(peer, &path);
                    return answer(401, "reading state from off this host needs the token");
                }
                json(200, &self.state())
            }
            (&Method::POST, _) => {
                if self.token.is_none() {
                    return answer(
                        403,
                        "no admin token is configured: the admin API is read-only",
                    );
                }
                if !self.authorized(&request) {
                    self.auth_failed(peer, &path);
                    return answer(401, "a mutation needs Authorization: Bearer TOKEN");
                }
                let who = who(peer, &request);
                let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
                    .collect()
                    .await
                {
                    Ok(b) => b.to_bytes(),
                    Err(_) => return answer(413, "body larger than 64 KiB"),
                };
                let detail: serde_json::Value = if body.is_empty() {
                    serde_json::Value::Null
                } else {
                    match serde_json::from_slice(&body) {
                        Ok(v) => v,
                        Err(e) => return answer(400, &format!("body: {e}")),
                    }
                };
                if path == "/drain" {
                    let first = self.live.start_drain();
                    tracing::info!(target: "stormbreak_guard::admin", who = %who, what = "drain", "admin change");
                    return json(
                        202,
                        &serde_json::json!({ "draining": true, "already": !first }),
                    );
                }
                if path == "/reload" {
                    return match self.live.reload_file() {
                        Ok(done) => {
                            tracing::info!(target: "stormbreak_guard::admin", who = %who, what = "reload", kept = ?done.kept, rebuilt = ?done.rebuilt, policies = ?done.policies, endpoints = ?done.endpoints, certificates = ?done.certificates, listeners = ?done.listeners, "admin change");
                            json(200, &done)
                        }
                        Err(e) => {
                            tracing::warn!(target: "stormbreak_guard::admin", who = %who, what = "reload", error = %e, "reload refused");
                            answer(400, &e)
                        }
                    };
                }
                let change = match Change::parse(&path, detail.clone()) {
                    Ok(c) => c,
                    Err((status, message)) => return answer(status, &message),
                };
                match change.apply(&self.live.get()) {
                    Ok(()) => {
                        let what = change.what();
                        tracing::info!(target: "stormbreak_guard::admin", who = %who, what, detail = %detail, "admin change");
                        self.live.record(Override::new(who, change, detail));
                        json(200, &self.state())
                    }
                    Err((status, message)) => answer(status, &message),
                }
            }
            _ => answer(404, "no such admin call (docs/guard.md lists them)"),
        }
    }

    fn state(&self) -> State {
        state(&self.live)
    }
}

/// Applies `change` for a program embedding the guard, recorded as an
/// override made "in process" (`detail` is what `/state` shows of it).
pub(crate) fn apply_in_process(
    live: &Live,
    change: Change,
    detail: serde_json::Value,
) -> Result<(), String> {
    change.apply(&live.get()).map_err(|(_, e)| e)?;
    let what = change.what();
    tracing::info!(target: "stormbreak_guard::admin", who = "in process", what, detail = %detail, "admin change");
    live.record(Override::new("in process".to_owned(), change, detail));
    Ok(())
}

fn state(live: &Live) -> State {
    let p = &live.get();
    {
        let now = p.clock.now();
        let shedder = p.shedder.lock().unwrap_or_else(PoisonError::into_inner);
        State {
            routes: p
                .routes
                .iter()
                .map(|r| RouteState {
                    name: r.name.clone(),
                    retry: r.retry.as_ref().map(|x| x.config()),
                    restore: r.restore.view(now),
                })
                .collect(),
            shed_rules: shedder
                .rules()
                .iter()
                .map(|rule| ShedView {
                    route: p
                        .routes
                        .get(rule.route as usize)
                        .map_or_else(String::new, |r| r.name.clone()),
                    class: rule.class,
                    status: rule.status,
                    retry_after_secs: rule.retry_after.map(|n| n.as_secs_f64()),
                })
                .collect(),
            overrides: live
                .overrides
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned()
                .collect(),
        }
    }
}

fn who(peer: SocketAddr, request: &Request<Incoming>) -> String {
    let operator = request
        .headers()
        .get("x-stormbreak-operator")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect::<String>()
        });
    match operator {
        Some(name) if !name.is_empty() => format!("{name} ({peer})"),
        _ => peer.to_string(),
    }
}

#[derive(Serialize)]
struct State {
    routes: Vec<RouteState>,
    shed_rules: Vec<ShedView>,
    overrides: Vec<Override>,
}

#[derive(Serialize)]
struct RouteState {
    name: String,
    retry: Option<RetryConfig>,
    restore: RestoreView,
}

#[derive(Serialize)]
struct ShedView {
    route: String,
    class: Option<Criticality>,
    status: u16,
    retry_after_secs: Option<f64>,
}

fn answer(status: u16, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

fn json<T: Serialize>(status: u16, value: &T) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Serves the admin API on `listener` until `shutdown` turns true.
///
/// Bounded like the data plane, with fixed bounds: [`MAX_CONNECTIONS`]
/// open, [`MAX_CONNECTIONS_PER_CLIENT`] per address, a complete request
/// head within [`HEADER_READ_TIMEOUT`] of accept, closed after
/// [`IDLE_TIMEOUT`] with no request in flight. Silent or unauthenticated
/// connections are evicted to make room, so they can never lock an
/// operator out.
pub(crate) async fn serve(
    listener: TcpListener,
    admin: Arc<Admin>,
    mut shutdown: watch::Receiver<bool>,
) {
    let roster = Roster::new(MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = crate::accept::accept(&listener) => accepted,
            _ = shutdown.changed() => return,
        };
        let metrics = admin.live.get().metrics.clone();
        let seat = match roster.admit(peer.ip()) {
            Ok((seat, evicted)) => {
                for _ in 0..evicted {
                    metrics.connection_closed("admin", "evicted");
                }
                seat
            }
            Err(full) => {
                let reason = match full {
                    Refusal::Peer => "per_client",
                    Refusal::Cap => "full",
                };
                metrics.connection_closed("admin", reason);
                continue;
            }
        };
        let admin = admin.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let member = seat.member.clone();
            let served = member.clone();
            let service = service_fn(move |request| {
                let (admin, member) = (admin.clone(), served.clone());
                async move {
                    let _inflight = member.activity.begin();
                    Ok::<_, Infallible>(admin.handle(peer, &member, request).await)
                }
            });
            // HTTP/1.1 only, as documented: no protocol detection (and
            // its preface read and `Rewind` wrapper) for curl and scrapers.
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => {}
                // Made room for a newer connection: closed at once.
                () = member.evicted.notified() => {}
                ended = member.activity.watch(HEADER_READ_TIMEOUT, IDLE_TIMEOUT) => {
                    if ended == Ended::Idle {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, conn).await;
                    }
                }
            }
            drop(seat);
        });
    }
}

//! A chain's retry layers as scenario `retry = { … }` tables: each layer
//! ([`RetryLayer`]: attempts, the failure classes it retries, per-try
//! timeout) becomes a [`RetryConfig`], is validated by the policy crate,
//! and is serialised by its serde derive (`inline.rs`) — never
//! written by hand.
//!
//! Classes: a connection failure → `connect-failure`, a 503 →
//! `retriable_status_codes = [503]`, a timeout → `timeout` (the audit
//! reduces `5xx`, `gateway-error`, `reset`… to these three). What the
//! layers do not say is an ASSUMPTION in the comment beside the table:
//! Envoy's default back-off for a mesh layer, the policy's default
//! deadline where no route timeout bounds the attempts.

use std::time::Duration;

use stormbreak_policy::Nanos;
use stormbreak_policy::retry::{BackoffConfig, BackoffKind, Jitter, RetryConfig, RetryOn};

use super::edge::backend_of;
use super::names::one_line;
use super::{MAX_ATTEMPTS, NO_TIMEOUT, inline, timeout};
use crate::chain::Chain;
use crate::model::{Inventory, RetryLayer};
use crate::units::show;

/// HAProxy's turn-around timer before a retry on the same server is
/// min(`timeout connect`, 1 s) (HAProxy 3.0 configuration manual,
/// `retries`, <https://docs.haproxy.org/3.0/configuration.html#4-retries>).
const HAPROXY_TURNAROUND: Duration = Duration::from_secs(1);

/// Where a layer retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Where {
    /// The clients before the edge (`--client-attempts`).
    Clients,
    /// An HAProxy backend.
    Haproxy,
    /// A mesh proxy's route (Istio, Gateway API).
    Mesh,
}

/// Where `layer` retries.
pub(crate) fn place(layer: &RetryLayer) -> Where {
    if layer.what.starts_with("clients") {
        Where::Clients
    } else if layer.redispatch.is_some() {
        Where::Haproxy
    } else {
        Where::Mesh
    }
}

/// A layer's retry table and the notes written beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The table, validated.
    pub config: RetryConfig,
    /// What the layer did not give, and where the format stops short.
    pub notes: Vec<String>,
}

/// The retry table that models `layer` of `chain`, validated by
/// [`RetryConfig::validate`].
pub fn retry_of(inv: &Inventory, chain: &Chain, layer: &RetryLayer) -> Result<Mapped, String> {
    let mut notes = Vec::new();
    let attempts = layer.retries.saturating_add(1);
    let max_attempts = attempts.min(MAX_ATTEMPTS);
    if attempts > MAX_ATTEMPTS {
        notes.push(format!(
            "NOT CARRIED: {attempts} attempts; the format's largest is {MAX_ATTEMPTS}"
        ));
    }
    let mut retry_on = Vec::new();
    if layer.on[0] {
        retry_on.push(RetryOn::ConnectFailure);
    }
    if layer.on[2] {
        retry_on.push(RetryOn::Timeout);
    }
    let where_ = place(layer);
    let backoff = match where_ {
        Where::Haproxy => {
            let connect = backend_of(inv, chain).and_then(|p| timeout(p.timeout("connect")));
            let base = connect.map_or(HAPROXY_TURNAROUND, |c| c.min(HAPROXY_TURNAROUND));
            notes.push(format!(
                "backoff: HAProxy's turn-around timer before a retry, min(timeout connect, 1s) = {} (a redispatched retry goes at once)",
                show(base)
            ));
            BackoffConfig {
                kind: BackoffKind::Constant,
                base: Nanos::from(base),
                jitter: Jitter::None,
                ..BackoffConfig::default()
            }
        }
        Where::Mesh => {
            notes.push(
                "backoff: ASSUMPTION, Envoy's default (25ms doubling to 250ms, full jitter): the audit reads no back-off from the route".into(),
            );
            BackoffConfig::default()
        }
        Where::Clients => {
            notes.push(
                "backoff: ASSUMPTION, the policy's default (the clients' is in no config)".into(),
            );
            BackoffConfig::default()
        }
    };
    let route_timeout = timeout(chain.timeout).filter(|_| where_ == Where::Mesh);
    let overall = match route_timeout {
        Some(t) => {
            notes.push("overall_timeout: the route timeout".into());
            t
        }
        None => {
            notes.push(format!(
                "overall_timeout: none bounds this layer's attempts (no route timeout), the format's largest, {}",
                show(NO_TIMEOUT)
            ));
            NO_TIMEOUT
        }
    };
    let config = RetryConfig {
        max_attempts,
        max_attempts_cap: max_attempts,
        per_try_timeout: timeout(layer.per_try).map(Nanos::from),
        overall_timeout: Some(Nanos::from(overall)),
        retry_on,
        retriable_status_codes: if layer.on[1] { vec![503] } else { Vec::new() },
        backoff,
        ..RetryConfig::default()
    };
    config.validate().map_err(|e| {
        format!(
            "the retry layer {:?} maps to a retry table the format refuses ({e}); this is a bug in the export",
            layer.what
        )
    })?;
    Ok(Mapped { config, notes })
}

/// The `retry = { … }` line: the table on one line, the notes beside it.
pub(crate) fn retry_line(m: &Mapped) -> Result<String, String> {
    Ok(format!(
        "retry = {}   # {}",
        inline(&m.config)?,
        one_line(&m.notes.join("; "))
    ))
}

/// The per-try timeout of the gateway modelling `layer`: the layer's
/// own, an HAProxy backend's `timeout server`, else the route timeout,
/// else an ASSUMPTION. Returns the duration and its comment.
pub(crate) fn per_try(inv: &Inventory, chain: &Chain, layer: &RetryLayer) -> (Duration, String) {
    if let Some(t) = timeout(layer.per_try) {
        return (t, "per-try timeout".into());
    }
    if place(layer) == Where::Haproxy
        && let Some(t) = backend_of(inv, chain).and_then(|p| timeout(p.timeout("server")))
    {
        return (t, "the backend's timeout server".into());
    }
    match timeout(chain.timeout) {
        Some(t) => (t, "the route timeout (no per-try timeout)".into()),
        None => (
            NO_TIMEOUT,
            "no per-try or route timeout: the proxy waits without end; the format's largest".into(),
        ),
    }
}

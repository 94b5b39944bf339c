//! Istio connection pools read so that "unset" and "tiny" are never
//! confused: in Istio, 0 or an absent field means the default, 2³²−1
//! (Istio 1.27 "Destination Rule", ConnectionPoolSettings), so it is read
//! as [`Limit::Unlimited`]; only a positive value is a limit.

use super::istio::ConnectionPool;

/// A limit as a number of concurrent things, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// No limit (unset, or a value that means unset).
    Unlimited,
    /// At most this many.
    Count(u64),
}

impl Limit {
    /// From an Istio field: absent, 0 → unlimited; negative → error.
    pub fn istio(v: Option<i64>, field: &str) -> Result<Limit, String> {
        match v {
            None | Some(0) => Ok(Limit::Unlimited),
            Some(n) if n < 0 => Err(format!("{field}: expected a count ≥ 0, got {n}")),
            // Istio's default, 2³²−1, written out: unlimited too.
            Some(n) if n >= u32::MAX as i64 => Ok(Limit::Unlimited),
            Some(n) => Ok(Limit::Count(n as u64)),
        }
    }

    /// The count, if limited.
    pub fn count(self) -> Option<u64> {
        match self {
            Limit::Unlimited => None,
            Limit::Count(n) => Some(n),
        }
    }
}

/// A per-caller connection pool, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolLimits {
    /// `tcp.maxConnections`.
    pub max_connections: Limit,
    /// `http.http1MaxPendingRequests`.
    pub pending: Limit,
    /// `http.http2MaxRequests`.
    pub max_requests: Limit,
    /// `http.maxRetries`.
    pub max_retries: Limit,
    /// Fields written as 0, which Istio reads as "default, unlimited".
    pub zeros: Vec<&'static str>,
}

impl Default for PoolLimits {
    fn default() -> Self {
        PoolLimits {
            max_connections: Limit::Unlimited,
            pending: Limit::Unlimited,
            max_requests: Limit::Unlimited,
            max_retries: Limit::Unlimited,
            zeros: Vec::new(),
        }
    }
}

impl PoolLimits {
    /// Reads a pool; `None` is the default (no limits).
    pub fn read(pool: Option<&ConnectionPool>) -> Result<PoolLimits, String> {
        let mut out = PoolLimits::default();
        let Some(pool) = pool else { return Ok(out) };
        let tcp = pool.tcp.clone().unwrap_or_default();
        let http = pool.http.clone().unwrap_or_default();
        let fields: [(&'static str, Option<i64>); 4] = [
            ("maxConnections", tcp.max_connections),
            ("http1MaxPendingRequests", http.http1_max_pending_requests),
            ("http2MaxRequests", http.http2_max_requests),
            ("maxRetries", http.max_retries),
        ];
        for (name, v) in fields {
            if v == Some(0) {
                out.zeros.push(name);
            }
        }
        out.max_connections = Limit::istio(tcp.max_connections, "maxConnections")?;
        out.pending = Limit::istio(http.http1_max_pending_requests, "http1MaxPendingRequests")?;
        out.max_requests = Limit::istio(http.http2_max_requests, "http2MaxRequests")?;
        out.max_retries = Limit::istio(http.max_retries, "maxRetries")?;
        Ok(out)
    }

    /// Requests one caller can have in flight: the smaller of
    /// `http2MaxRequests` and `maxConnections` (HTTP/1.1: one request per
    /// connection at a time), with the conversion stated.
    pub fn in_flight(&self) -> Option<(u64, String)> {
        match (self.max_requests.count(), self.max_connections.count()) {
            (None, None) => None,
            (Some(r), None) => Some((r, format!("http2MaxRequests {r}"))),
            (None, Some(c)) => Some((
                c,
                format!("maxConnections {c} × 1 request per connection (HTTP/1.1)"),
            )),
            (Some(r), Some(c)) if r <= c => {
                Some((r, format!("http2MaxRequests {r} (≤ maxConnections {c})")))
            }
            (Some(r), Some(c)) => Some((
                c,
                format!(
                    "maxConnections {c} × 1 request per connection (HTTP/1.1; below http2MaxRequests {r})"
                ),
            )),
        }
    }
}

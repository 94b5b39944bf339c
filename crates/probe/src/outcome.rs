//! What one probe found.

use serde::Serialize;
use stormbreak_policy::Nanos;

/// Why a probe failed, as an operator would sort it: the first thing to
/// know in an outage is whether the load balancer refused the connection,
/// the server timed out, or it answered with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The host name did not resolve.
    Resolve,
    /// The TCP connection was refused (nothing listening, or a flow limit).
    ConnectRefused,
    /// The TCP connection was not set up within the timeout.
    ConnectTimeout,
    /// The connection was reset or closed before an answer.
    Reset,
    /// No complete answer within the timeout.
    Timeout,
    /// An answer with a status the path does not expect.
    Status,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The answer's body could not be read.
    Body,
}

impl Reason {
    /// Every reason, in table order.
    pub const ALL: [Reason; 8] = [
        Reason::Resolve,
        Reason::ConnectRefused,
        Reason::ConnectTimeout,
        Reason::Reset,
        Reason::Timeout,
        Reason::Status,
        Reason::Tls,
        Reason::Body,
    ];

    /// The label in tables, JSON and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Reason::Resolve => "resolve",
            Reason::ConnectRefused => "connect_refused",
            Reason::ConnectTimeout => "connect_timeout",
            Reason::Reset => "reset",
            Reason::Timeout => "timeout",
            Reason::Status => "status",
            Reason::Tls => "tls",
            Reason::Body => "body",
        }
    }

    pub(crate) fn index(self) -> usize {
        Reason::ALL.iter().position(|&r| r == self).expect("listed")
    }
}

/// The result of one probe (one logical request, retries included).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Index of the path.
    pub path: usize,
    /// When the probe was due (run time).
    pub due: Nanos,
    /// When its first attempt went out.
    pub sent: Nanos,
    /// When it ended.
    pub done: Nanos,
    /// The last answer's status, if any.
    pub status: Option<u16>,
    /// Why it failed (`None`: it succeeded).
    pub reason: Option<Reason>,
    /// The pause the target asked for: `Retry-After` on a 429 or 503.
    pub retry_after: Option<Nanos>,
    /// Attempts made (1 without retries).
    pub attempts: u32,
}

impl Outcome {
    /// Whether the probe succeeded.
    pub fn ok(&self) -> bool {
        self.reason.is_none()
    }

    /// Whether it succeeded only after a retry: its own state, never a
    /// plain success (a retry hides a failure the user may have seen).
    pub fn ok_after_retry(&self) -> bool {
        self.ok() && self.attempts > 1
    }

    /// From the first attempt's send to the end.
    pub fn latency(&self) -> Nanos {
        self.done.saturating_sub(self.sent)
    }

    /// Whether the answer asks the prober to back off (429 or 503).
    pub fn overloaded(&self) -> bool {
        matches!(self.status, Some(429 | 503))
    }
}

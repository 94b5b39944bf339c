//! The one clock the policies see: tokio's (so tests can pause it), as [`Nanos`].

use stormbreak_policy::Nanos;
use tokio::time::Instant;

/// Nanoseconds since the guard started, on tokio's clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            origin: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        Nanos::from(Instant::now().saturating_duration_since(self.origin))
    }

    #[cfg(feature = "testing")] // only `trace` uses it
    /// `at` as time on this clock (zero before its origin).
    pub(crate) fn since(&self, at: Instant) -> Nanos {
        Nanos::from(at.saturating_duration_since(self.origin))
    }
}

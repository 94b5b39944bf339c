//! The admission queue in front of a concurrency limit: its config.

use super::FAMILY;
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// An admission queue in front of a concurrency limit: a request that finds
/// the limit reached waits, at most `size` at once and each at most
/// `timeout`, and is admitted in arrival order as slots come back (one
/// waiter per slot released). `stormbreak guard`'s route `queue` and a
/// simulated gateway's `queue` are this table.
///
/// ```
/// use stormbreak_policy::limit::QueueConfig;
/// let q: QueueConfig = serde_json::from_str(r#"{"size": 100, "timeout": "250ms"}"#).unwrap();
/// assert_eq!(q.timeout, stormbreak_policy::Nanos::from_millis(250));
/// assert!(q.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Most requests waiting; a request arriving to a full queue is shed.
    pub size: u32,
    /// Longest wait before a queued request is shed.
    pub timeout: Nanos,
}

impl QueueConfig {
    /// Largest accepted `size`: a queue is memory, and one this long
    /// already holds minutes of work at any realistic rate.
    pub const MAX_SIZE: u32 = 10_000_000;

    /// `size` in 1..=[`Self::MAX_SIZE`], `timeout` above zero.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.size == 0 || self.size > Self::MAX_SIZE {
            return Err(FieldError::new(
                FAMILY,
                "size",
                format!("between 1 and {}", Self::MAX_SIZE),
                self.size,
            ));
        }
        if self.timeout == Nanos::ZERO {
            return Err(FieldError::new(
                FAMILY,
                "timeout",
                "a duration above zero",
                "0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_endless_queue_and_a_zero_wait_are_refused() {
        let q = |size, ms| QueueConfig {
            size,
            timeout: Nanos::from_millis(ms),
        };
        assert!(q(1, 1).validate().is_ok());
        assert_eq!(q(0, 1).validate().unwrap_err().field(), "size");
        assert_eq!(
            q(QueueConfig::MAX_SIZE + 1, 1)
                .validate()
                .unwrap_err()
                .field(),
            "size"
        );
        assert_eq!(q(5, 0).validate().unwrap_err().field(), "timeout");
    }
}

//! Keyed GCRA rate limits: the policy crate's [`KeyedRateLimiter`] (bounded,
//! preallocated key table) keyed by a secret-seeded hash of the client
//! address, a header or a bearer token.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use http::HeaderMap;
use stormbreak_policy::ratelimit::{KeyedRateLimiter, NotUntil, RateLimitConfig};
use stormbreak_policy::{FieldError, Nanos};

use crate::config::RateLimitKey;

/// One route's rate limit.
pub(crate) struct RateLimit {
    limiter: Mutex<KeyedRateLimiter>,
    key: RateLimitKey,
    // Keyed hash: clients choose their keys, so they must not be able to
    // choose collisions in the table.
    hasher: std::collections::hash_map::RandomState,
}

impl RateLimit {
    pub(crate) fn new(config: &RateLimitConfig, key: RateLimitKey) -> Result<Self, FieldError> {
        Ok(RateLimit {
            limiter: Mutex::new(KeyedRateLimiter::new(config)?),
            key,
            hasher: std::collections::hash_map::RandomState::new(),
        })
    }

    fn key(&self, client: IpAddr, headers: &HeaderMap) -> u64 {
        match &self.key {
            RateLimitKey::ClientIp => self.hasher.hash_one(client.to_canonical()),
            RateLimitKey::Header(name) => self
                .hasher
                .hash_one(headers.get(name).map(|v| v.as_bytes())),
            RateLimitKey::Token => {
                let token = headers
                    .get(http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim);
                self.hasher.hash_one(token)
            }
        }
    }

    /// Conforming requests pass; others learn how long to wait.
    pub(crate) fn check(
        &self,
        now: Nanos,
        client: IpAddr,
        headers: &HeaderMap,
    ) -> Result<(), NotUntil> {
        let key = self.key(client, headers);
        self.limiter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(now, key)
    }

    /// Keys held now, and the most ever held.
    pub(crate) fn keys(&self) -> (usize, usize) {
        let l = self.limiter.lock().unwrap_or_else(PoisonError::into_inner);
        (l.len(), l.max_keys())
    }
}

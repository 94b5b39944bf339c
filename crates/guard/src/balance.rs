//! A cluster of static endpoints: P2C least-request choice, outlier
//! ejection and an optional cluster-wide concurrency limit, all decided by
//! the policy crate.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::FieldError;
use stormbreak_policy::balance::{LeastRequest, OutlierDetector};

use crate::clock::Clock;
use crate::config::ClusterConfig;
use crate::endpoint::Upstream;
use crate::limit::ConcurrencyLimit;

/// One static endpoint and its requests in flight.
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    inflight: AtomicU32,
}

/// A configured upstream cluster.
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) endpoints: Vec<Endpoint>,
    p2c: LeastRequest,
    outlier: Option<Mutex<OutlierDetector>>,
    pub(crate) limit: Option<Arc<ConcurrencyLimit>>,
    pub(crate) upstream: Upstream,
    rng: Mutex<Pcg64Mcg>,
    clock: Clock,
}

/// An endpoint picked for one attempt; its in-flight count drops when this does.
pub(crate) struct Picked<'a> {
    cluster: &'a Cluster,
    pub(crate) index: usize,
}

impl Drop for Picked<'_> {
    fn drop(&mut self) {
        self.cluster.endpoints[self.index]
            .inflight
            .fetch_sub(1, Ordering::AcqRel);
    }
}

impl Picked<'_> {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.cluster.endpoints[self.index].addr
    }
}

impl Cluster {
    pub(crate) fn new(config: &ClusterConfig, clock: Clock) -> Result<Self, FieldError> {
        let endpoints = config
            .endpoints
            .iter()
            .filter_map(|e| e.parse().ok())
            .map(|addr| Endpoint {
                addr,
                inflight: AtomicU32::new(0),
            })
            .collect::<Vec<_>>();
        let outlier = match &config.outlier {
            Some(o) => Some(Mutex::new(OutlierDetector::new(o, endpoints.len())?)),
            None => None,
        };
        let limit = match &config.limit {
            Some(l) => Some(ConcurrencyLimit::new(l, None, clock)?),
            None => None,
        };
        Ok(Cluster {
            name: config.name.clone(),
            endpoints,
            p2c: LeastRequest::new(&config.balance)?,
            outlier,
            limit,
            upstream: Upstream::new(config),
            rng: Mutex::new(Pcg64Mcg::from_os_rng()),
            clock,
        })
    }

    /// Picks an endpoint that is not ejected, least loaded of the draw.
    pub(crate) fn pick(&self) -> Option<Picked<'_>> {
        let now = self.clock.now();
        let outlier = self
            .outlier
            .as_ref()
            .map(|o| o.lock().unwrap_or_else(PoisonError::into_inner));
        let index = {
            let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
            self.p2c.choose(
                self.endpoints.len(),
                |i| {
                    let ejected = outlier.as_ref().is_some_and(|o| o.is_ejected(i, now));
                    (!ejected).then(|| self.endpoints[i].inflight.load(Ordering::Acquire))
                },
                &mut *rng,
            )?
        };
        self.endpoints[index]
            .inflight
            .fetch_add(1, Ordering::AcqRel);
        Some(Picked {
            cluster: self,
            index,
        })
    }

    /// Feeds an attempt's result to outlier ejection.
    pub(crate) fn report(&self, index: usize, failed: bool) {
        let Some(outlier) = &self.outlier else { return };
        let now = self.clock.now();
        let mut o = outlier.lock().unwrap_or_else(PoisonError::into_inner);
        if failed {
            let _ejected_until = o.on_failure(index, now);
        } else {
            o.on_success(index, now);
        }
    }

    /// Endpoints not ejected now.
    pub(crate) fn available(&self) -> usize {
        let now = self.clock.now();
        match &self.outlier {
            Some(o) => {
                self.endpoints.len()
                    - o.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .ejected_count(now)
            }
            None => self.endpoints.len(),
        }
    }
}

//! A cluster of endpoints: P2C least-request choice, outlier ejection and
//! an optional cluster-wide concurrency limit, all decided by the policy
//! crate.
//!
//! A cluster's endpoint list is fixed for the life of one [`Cluster`]; a
//! reload that changes only the list builds the next one with
//! [`Cluster::with_endpoints`], which shares everything that is not per
//! endpoint (breaker, limit, connection pool, counters) and carries each
//! kept endpoint's in-flight count, ejection and health, so new endpoints
//! take traffic without the cluster's policy state starting over.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::balance::{HealthCheckConfig, HealthTable, LeastRequest, OutlierDetector};
use stormbreak_policy::breaker::{Admission, Breaker, Ticket};
use stormbreak_policy::{FieldError, Nanos};

use crate::clock::Clock;
use crate::config::ClusterConfig;
use crate::endpoint::Upstream;
use crate::limit::ConcurrencyLimit;
use crate::metrics::{ClusterMetrics, EndpointGauge};

/// One endpoint and its requests in flight.
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    /// `addr` as a URI authority, made once: every attempt's URI takes a
    /// reference-counted copy instead of formatting the address again.
    authority: http::uri::Authority,
    /// Shared with the same address in the next endpoint list (a reload),
    /// so attempts picked before the change still count against it.
    inflight: Arc<AtomicU32>,
}

/// A configured upstream cluster.
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) endpoints: Vec<Endpoint>,
    p2c: LeastRequest,
    outlier: Option<Mutex<OutlierDetector>>,
    health: Option<(HealthCheckConfig, Mutex<HealthTable>)>,
    breaker: Option<Arc<Mutex<Breaker>>>,
    pub(crate) limit: Option<Arc<ConcurrencyLimit>>,
    pub(crate) upstream: Upstream,
    rng: Mutex<Pcg64Mcg>,
    clock: Clock,
    /// Requests per second one endpoint serves, when configured.
    pub(crate) endpoint_capacity: Option<f64>,
    /// Attempts sent to this cluster so far (endpoints picked; carried
    /// to the next endpoint list).
    pub(crate) served: Arc<std::sync::atomic::AtomicU64>,
    /// Its counters (by name: they continue across reloads).
    pub(crate) m: Arc<ClusterMetrics>,
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

impl<'a> Picked<'a> {
    /// The endpoint's address as a URI authority (a reference-counted copy).
    pub(crate) fn authority(&self) -> http::uri::Authority {
        self.cluster.endpoints[self.index].authority.clone()
    }

    /// The cluster it was picked from.
    pub(crate) fn cluster(&self) -> &'a Cluster {
        self.cluster
    }
}

impl Cluster {
    pub(crate) fn new(
        config: &ClusterConfig,
        clock: Clock,
        m: Arc<ClusterMetrics>,
    ) -> Result<Self, FieldError> {
        let endpoints = config
            .endpoints
            .iter()
            .filter_map(|e| e.parse().ok())
            .map(|addr| Endpoint {
                addr,
                authority: crate::endpoint::authority_of(addr),
                inflight: Arc::new(AtomicU32::new(0)),
            })
            .collect::<Vec<_>>();
        let outlier = match &config.outlier {
            Some(o) => Some(Mutex::new(OutlierDetector::new(o, endpoints.len())?)),
            None => None,
        };
        let health = match &config.health_check {
            Some(h) => Some((h.clone(), Mutex::new(HealthTable::new(h, endpoints.len())?))),
            None => None,
        };
        let breaker = match &config.breaker {
            Some(b) => Some(Arc::new(Mutex::new(Breaker::new(b)?))),
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
            health,
            breaker,
            limit,
            upstream: Upstream::new(config),
            rng: Mutex::new(Pcg64Mcg::from_os_rng()),
            clock,
            endpoint_capacity: config.endpoint_capacity,
            served: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            m,
        })
    }

    /// This cluster with `config`'s endpoint list, everything else of
    /// `config` being what this cluster was built from (the caller checks:
    /// [`same_but_endpoints`]). Shared with this cluster: breaker, cluster
    /// limit, connection pool, balance, counters. Per endpoint, an address
    /// this cluster has keeps its in-flight count, outlier state and health
    /// (Envoy keeps a host's state across an EDS update the same way); a
    /// new address starts with none in flight, not ejected, healthy.
    /// Attempts still running on this cluster report their outlier result
    /// here, not to the next one.
    pub(crate) fn with_endpoints(&self, config: &ClusterConfig) -> Result<Self, FieldError> {
        let endpoints: Vec<Endpoint> = config
            .endpoints
            .iter()
            .filter_map(|e| e.parse().ok())
            .map(|addr| {
                let kept = self.endpoints.iter().find(|e| e.addr == addr);
                Endpoint {
                    addr,
                    authority: crate::endpoint::authority_of(addr),
                    inflight: kept
                        .map_or_else(|| Arc::new(AtomicU32::new(0)), |e| e.inflight.clone()),
                }
            })
            .collect();
        let from: Vec<Option<usize>> = endpoints
            .iter()
            .map(|e| self.endpoints.iter().position(|o| o.addr == e.addr))
            .collect();
        let (outlier, health) = self.endpoint_state();
        let outlier = match outlier {
            Some(o) => Some(Mutex::new(o.carried(&from)?)),
            None => None,
        };
        let health = match (&self.health, health) {
            (Some((c, _)), Some(h)) => Some((c.clone(), Mutex::new(h.carried(&from)?))),
            _ => None,
        };
        Ok(Cluster {
            name: self.name.clone(),
            endpoints,
            p2c: self.p2c.clone(),
            outlier,
            health,
            breaker: self.breaker.clone(),
            limit: self.limit.clone(),
            upstream: self.upstream.clone(),
            rng: Mutex::new(Pcg64Mcg::from_os_rng()),
            clock: self.clock,
            endpoint_capacity: self.endpoint_capacity,
            served: self.served.clone(),
            m: self.m.clone(),
        })
    }

    /// Attempts out to any endpoint now (picked, not yet answered).
    pub(crate) fn inflight(&self) -> u64 {
        self.endpoints
            .iter()
            .map(|e| u64::from(e.inflight.load(Ordering::Acquire)))
            .sum()
    }

    /// The outlier detector and health table, locked (each absent when the
    /// cluster has none).
    fn endpoint_state(
        &self,
    ) -> (
        Option<MutexGuard<'_, OutlierDetector>>,
        Option<MutexGuard<'_, HealthTable>>,
    ) {
        let outlier = self
            .outlier
            .as_ref()
            .map(|o| o.lock().unwrap_or_else(PoisonError::into_inner));
        let health = self
            .health
            .as_ref()
            .map(|(_, h)| h.lock().unwrap_or_else(PoisonError::into_inner));
        (outlier, health)
    }

    /// Each endpoint's in-flight count, ejection and health now, for metrics.
    pub(crate) fn endpoint_gauges(&self) -> Vec<EndpointGauge> {
        let now = self.clock.now();
        let (outlier, health) = self.endpoint_state();
        self.endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| EndpointGauge {
                addr: e.addr.to_string(),
                inflight: u64::from(e.inflight.load(Ordering::Acquire)),
                ejected: outlier.as_ref().map(|o| o.is_ejected(i, now)),
                unhealthy: health.as_ref().map(|h| !h.is_healthy(i)),
            })
            .collect()
    }

    /// Picks an endpoint that is not ejected, least loaded of the draw.
    pub(crate) fn pick(&self) -> Option<Picked<'_>> {
        let now = self.clock.now();
        let (outlier, health) = self.endpoint_state();
        let index = {
            let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
            self.p2c.choose(
                self.endpoints.len(),
                |i| {
                    let ejected = outlier.as_ref().is_some_and(|o| o.is_ejected(i, now));
                    let sick = health.as_ref().is_some_and(|h| !h.is_healthy(i));
                    (!ejected && !sick).then(|| self.endpoints[i].inflight.load(Ordering::Acquire))
                },
                &mut *rng,
            )?
        };
        self.endpoints[index]
            .inflight
            .fetch_add(1, Ordering::AcqRel);
        self.served
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

    /// Asks the breaker for a call: `Ok(None)` without a breaker,
    /// `Err(retry_after)` while it is open.
    pub(crate) fn admit(&self) -> Result<Option<BreakerCall<'_>>, Option<Nanos>> {
        let Some(breaker) = &self.breaker else {
            return Ok(None);
        };
        let now = self.clock.now();
        let mut b = breaker.lock().unwrap_or_else(PoisonError::into_inner);
        match b.allow(now) {
            Admission::Allowed(ticket) => Ok(Some(BreakerCall {
                cluster: self,
                ticket: Some(ticket),
            })),
            Admission::Rejected => Err(b.retry_after(now)),
        }
    }

    /// Endpoints neither ejected nor failing their health checks now.
    pub(crate) fn available(&self) -> usize {
        let now = self.clock.now();
        let (outlier, health) = self.endpoint_state();
        (0..self.endpoints.len())
            .filter(|&i| {
                !outlier.as_ref().is_some_and(|o| o.is_ejected(i, now))
                    && health.as_ref().is_none_or(|h| h.is_healthy(i))
            })
            .count()
    }

    /// How often endpoints are probed, when the cluster has health checks.
    pub(crate) fn probe_interval(&self) -> Option<std::time::Duration> {
        self.health
            .as_ref()
            .map(|(c, _)| std::time::Duration::from(c.interval))
    }

    /// Probes endpoint `index` once: `GET path`, a 2xx within `timeout` is
    /// a success.
    pub(crate) async fn probe_once(&self, index: usize) {
        let Some((config, table)) = &self.health else {
            return;
        };
        let addr = self.endpoints[index].addr;
        let request = http::Request::get(config.path.as_str())
            .header(http::header::HOST, addr.to_string())
            .header(http::header::USER_AGENT, "stormbreak-guard-health-check")
            .body(crate::body::empty());
        let Ok(request) = request else { return };
        let Ok(probe) = self.upstream.send(addr, request) else {
            return;
        };
        let ok = matches!(
            tokio::time::timeout(std::time::Duration::from(config.timeout), probe).await,
            Ok(Ok(r)) if r.status().is_success()
        );
        let _changed = table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_probe(index, ok);
    }
}

/// A call the breaker admitted; report it with [`finish`](Self::finish).
/// Dropped unreported (the client went away), it is cancelled.
pub(crate) struct BreakerCall<'a> {
    cluster: &'a Cluster,
    ticket: Option<Ticket>,
}

impl BreakerCall<'_> {
    pub(crate) fn finish(mut self, failed: bool) {
        let (Some(ticket), Some(breaker)) = (self.ticket.take(), &self.cluster.breaker) else {
            return;
        };
        let now = self.cluster.clock.now();
        let mut b = breaker.lock().unwrap_or_else(PoisonError::into_inner);
        let _transition = if failed {
            b.on_failure(now, ticket)
        } else {
            b.on_success(now, ticket)
        };
    }
}

impl Drop for BreakerCall<'_> {
    fn drop(&mut self) {
        if let (Some(ticket), Some(breaker)) = (self.ticket.take(), &self.cluster.breaker) {
            breaker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .on_cancel(ticket);
        }
    }
}

/// Whether `a` and `b` differ in nothing but their endpoint lists: then a
/// reload updates the cluster in place ([`Cluster::with_endpoints`])
/// instead of building it anew.
pub(crate) fn same_but_endpoints(a: &ClusterConfig, b: &ClusterConfig) -> bool {
    let strip = |c: &ClusterConfig| {
        let mut c = c.clone();
        c.endpoints.clear();
        format!("{c:?}")
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GuardConfig;
    use crate::metrics::Metrics;

    fn cluster_config(endpoints: &[&str]) -> ClusterConfig {
        let list = endpoints
            .iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:0\"\n\n[[cluster]]\nname = \"c\"\nendpoints = [{list}]\noutlier = {{ consecutive_failures = 1, max_ejection_percent = 100 }}\n\n[[route]]\nname = \"r\"\ncluster = \"c\"\n"
        );
        GuardConfig::parse("t.toml", &text)
            .unwrap_or_else(|e| panic!("{e}"))
            .clusters
            .remove(0)
    }

    #[test]
    fn a_new_endpoint_list_carries_each_kept_address_and_counts_every_pick() {
        let metrics = Metrics::new();
        let a = "127.0.0.1:1";
        let old = Cluster::new(
            &cluster_config(&[a, "127.0.0.1:2"]),
            Clock::new(),
            metrics.cluster("c"),
        )
        .unwrap();
        // Two picks held on whatever they landed on; eject :1.
        let held = [old.pick().unwrap(), old.pick().unwrap()];
        old.report(0, true);
        let on_a = held.iter().filter(|p| p.index == 0).count() as u64;
        assert_eq!(old.served.load(Ordering::Relaxed), 2, "every pick counts");

        let config = cluster_config(&["127.0.0.1:3", a]);
        assert!(same_but_endpoints(
            &cluster_config(&[a, "127.0.0.1:2"]),
            &config
        ));
        let new = old.with_endpoints(&config).unwrap();
        let gauges = new.endpoint_gauges();
        assert_eq!(gauges[1].addr, a);
        assert_eq!(gauges[1].inflight, on_a, "in flight on :1 carried");
        assert_eq!(gauges[1].ejected, Some(true), "its ejection carried");
        assert_eq!((gauges[0].inflight, gauges[0].ejected), (0, Some(false)));
        // With :1 ejected, every pick goes to the added :3.
        for _ in 0..8 {
            assert_eq!(new.pick().unwrap().authority().port_u16(), Some(3));
        }
        assert_eq!(new.served.load(Ordering::Relaxed), 10, "counter shared");
        drop(held);
        assert_eq!(
            new.endpoint_gauges()[1].inflight,
            0,
            "finished on the old list"
        );
    }
}

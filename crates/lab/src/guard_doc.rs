//! The guard config the lab writes for every guard it starts (a pod's
//! sidecar, an LB node, a gateway instance): one loopback listener, its
//! clusters, one route taking every path, and the answer of a full limit,
//! as one typed document serialised to TOML and parsed by the guard's own
//! parser (whatever the guard refuses is refused here with its message).
//!
//! The document is kept after start: a lever that changes a running guard
//! (a service's pods coming and going, a limit or a retry policy changed,
//! an operator's shed rule) edits it and reloads the guard, which changes
//! endpoints, limits and retries in place (docs/guard.md, "What a reload
//! keeps"), so no request in flight and no policy state is lost.

use std::net::SocketAddr;

use serde::Serialize;
use stormbreak_guard::{Guard, GuardConfig};
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::limit::{FixedConfig, LimitConfig, QueueConfig};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::{ClassThresholds, SaturationConfig};

/// A guard config as the lab writes it.
#[derive(Clone, Debug, Serialize)]
pub struct GuardDoc {
    listener: Vec<Listener>,
    cluster: Vec<Cluster>,
    route: [Route; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    saturation: Option<SaturationConfig>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shed: Vec<Shed>,
}

#[derive(Clone, Debug, Serialize)]
struct Listener {
    name: String,
    bind: &'static str,
    protocol: &'static str,
    max_connections: u32,
    backlog: u32,
    request_timeout: &'static str,
    idle_timeout: &'static str,
}

#[derive(Clone, Debug, Serialize)]
struct Cluster {
    name: &'static str,
    endpoints: Vec<String>,
    protocol: &'static str,
    pool_max_idle_per_endpoint: u32,
}

#[derive(Clone, Debug, Serialize)]
struct Match {
    path_prefix: &'static str,
}

#[derive(Clone, Debug, Serialize)]
struct Route {
    name: &'static str,
    #[serde(rename = "match")]
    matches: Match,
    cluster: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<LimitConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<QueueConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry: Option<RetryConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<BudgetConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dependency: Option<Dependency>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    restore_sites: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restore_answer: Option<RestoreAnswer>,
}

#[derive(Clone, Debug, Serialize)]
struct RestoreAnswer {
    status: u16,
}

#[derive(Clone, Debug, Serialize)]
struct Dependency {
    cluster: &'static str,
    path: &'static str,
    timeout: Nanos,
}

#[derive(Clone, Debug, Serialize)]
struct Shed {
    route: &'static str,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<Nanos>,
}

/// The name of the cluster the route forwards to.
pub const NEXT: &str = "next";
/// The name of the cluster a dependency check calls.
pub const DEPENDENCY: &str = "dependency";

/// `[saturation]` thresholds that never shed by class: a fixed limit's
/// saturation never passes 1. Finite, not `"never"`: the guard answers a
/// full limit with the answer its table gives the least important class
/// at infinite saturation, which a `"never"` table does not give (it then
/// falls back to 503 with `Retry-After: 1`, which the simulator's sidecar
/// and LB do not send).
pub const NO_SHEDDING: ClassThresholds = ClassThresholds {
    sheddable: 1e9,
    sheddable_plus: 1e9,
    critical: 1e9,
    critical_plus: 1e9,
};

/// The listener of client site `site` at a guard with sites (its own
/// namespace, so a site label never collides with the default listener).
pub fn site_listener(site: &str) -> String {
    format!("site:{site}")
}

fn endpoints(addrs: &[SocketAddr]) -> Vec<String> {
    addrs.iter().map(SocketAddr::to_string).collect()
}

impl GuardDoc {
    /// A guard listening on `listener` (a free `127.0.0.1` port), whose
    /// route `route` forwards every request to `next`. No limit, retry or
    /// shedding until set.
    pub fn new(listener: &'static str, route: &'static str, next: &[SocketAddr]) -> GuardDoc {
        GuardDoc {
            listener: vec![Listener {
                name: listener.to_owned(),
                bind: "127.0.0.1:0",
                protocol: "http1",
                // The lab's own bounds (in-flight caps) decide; the
                // connection cap only guards against a runaway.
                max_connections: 10_000,
                backlog: crate::backend::BACKEND_BACKLOG,
                // A lab request's deadlines are its caller's.
                request_timeout: "1h",
                idle_timeout: "1h",
            }],
            cluster: vec![Cluster {
                name: NEXT,
                endpoints: endpoints(next),
                protocol: "http1",
                pool_max_idle_per_endpoint: 4096,
            }],
            route: [Route {
                name: route,
                matches: Match { path_prefix: "/" },
                cluster: NEXT,
                limit: None,
                queue: None,
                retry: None,
                budget: None,
                dependency: None,
                restore_sites: Vec::new(),
                restore_answer: None,
            }],
            saturation: None,
            shed: Vec::new(),
        }
    }

    /// A fixed concurrency limit of `limit` on the route, answered when
    /// full (limit and `queue`) with `status` and no `Retry-After`, never
    /// shedding by class ([`NO_SHEDDING`]): an Istio sidecar's
    /// `http2MaxRequests` and an LB node's flow cap.
    pub fn fixed_limit(mut self, limit: u32, queue: Option<QueueConfig>, status: u16) -> Self {
        self.route[0].limit = Some(LimitConfig::Fixed(FixedConfig { limit }));
        self.route[0].queue = queue;
        self.saturation = Some(SaturationConfig {
            thresholds: NO_SHEDDING,
            status,
            retry_after: None,
        });
        self
    }

    /// The route's limit, queue and `[saturation]` table as given (a
    /// gateway's own); the table only with a limit, which it sheds by.
    pub fn limits(
        mut self,
        limit: Option<LimitConfig>,
        queue: Option<QueueConfig>,
        saturation: Option<SaturationConfig>,
    ) -> Self {
        self.saturation = saturation.filter(|_| limit.is_some());
        self.route[0].limit = limit;
        self.route[0].queue = queue;
        self
    }

    /// The route's retry policy and budget.
    pub fn retry(mut self, retry: RetryConfig, budget: Option<BudgetConfig>) -> Self {
        self.route[0].retry = Some(retry);
        self.route[0].budget = budget;
        self
    }

    /// A dependency check before forwarding: `GET /` to `at` within
    /// `timeout` (the guard's `route.dependency`).
    pub fn dependency(mut self, at: &[SocketAddr], timeout: Nanos) -> Self {
        self.cluster.retain(|c| c.name != DEPENDENCY);
        self.cluster.push(Cluster {
            name: DEPENDENCY,
            endpoints: endpoints(at),
            protocol: "http1",
            pool_max_idle_per_endpoint: 4096,
        });
        self.route[0].dependency = Some(Dependency {
            cluster: DEPENDENCY,
            path: "/",
            timeout,
        });
        self
    }

    /// A listener per site (named [`site_listener`]), restored in the
    /// order given by a staged restore of the route, which answers
    /// `status` to a request it has not admitted yet (a scenario ramp's
    /// sites and status).
    pub fn sites(mut self, sites: &[String], status: u16) -> Self {
        let first = self.listener[0].clone();
        for site in sites {
            self.listener.push(Listener {
                name: site_listener(site),
                ..first.clone()
            });
        }
        self.route[0].restore_sites = sites.iter().map(|s| site_listener(s)).collect();
        self.route[0].restore_answer = Some(RestoreAnswer { status });
        self
    }

    /// Every listener's name, the default one first.
    pub fn listener_names(&self) -> Vec<String> {
        self.listener.iter().map(|l| l.name.clone()).collect()
    }

    /// Cluster `cluster`'s endpoints become `to`; `false` (nothing
    /// changed) when they already are, or when `to` is empty: a guard
    /// cluster cannot be empty, so a hop with no pod left keeps forwarding
    /// to the last ones, whose closed ports refuse the connection.
    pub fn set_endpoints(&mut self, cluster: &str, to: &[SocketAddr]) -> bool {
        let to = endpoints(to);
        match self.cluster.iter_mut().find(|c| c.name == cluster) {
            Some(c) if !to.is_empty() && c.endpoints != to => {
                c.endpoints = to;
                true
            }
            _ => false,
        }
    }

    /// The route's fixed limit, when it has one.
    pub fn fixed(&self) -> Option<u32> {
        match &self.route[0].limit {
            Some(LimitConfig::Fixed(f)) => Some(f.limit),
            _ => None,
        }
    }

    /// Sets the route's fixed limit (it must have one, [`GuardDoc::fixed_limit`]).
    pub fn set_fixed(&mut self, limit: u32) {
        if let Some(LimitConfig::Fixed(f)) = &mut self.route[0].limit {
            f.limit = limit;
        }
    }

    /// The route's retry policy.
    pub fn retry_policy(&self) -> Option<&RetryConfig> {
        self.route[0].retry.as_ref()
    }

    /// Replaces the route's retry policy (a route with one keeps its
    /// budget's state on reload).
    pub fn set_retry(&mut self, retry: RetryConfig) {
        self.route[0].retry = Some(retry);
    }

    /// An operator's shed rule on the route (`None`: removed): every
    /// request answered `status`, with `Retry-After` when set.
    pub fn set_shed(&mut self, rule: Option<(u16, Option<Nanos>)>) {
        let route = self.route[0].name;
        self.shed = rule
            .into_iter()
            .map(|(status, retry_after)| Shed {
                route,
                status,
                retry_after: retry_after.filter(|d| !d.is_zero()),
            })
            .collect();
    }

    /// The TOML text.
    pub fn text(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| format!("writing the guard config: {e}"))
    }

    /// Parsed by the guard's own parser.
    pub fn config(&self) -> Result<GuardConfig, String> {
        GuardConfig::parse("<lab guard>", &self.text()?).map_err(|e| e.to_string())
    }

    /// Starts a guard from this document; returns it and the address its
    /// listener was given.
    pub async fn start(&self) -> Result<(Guard, SocketAddr), String> {
        let guard = Guard::start(&self.config()?)
            .await
            .map_err(|e| e.to_string())?;
        let addr = guard
            .local_addr(&self.listener[0].name)
            .ok_or("the guard has no listener")?;
        Ok((guard, addr))
    }

    /// Reloads `guard` with this document (its listener kept, endpoints,
    /// limits and retries changed in place).
    pub fn reload(&self, guard: &Guard) -> Result<(), String> {
        guard.reload(&self.config()?).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::budget::RatioBudgetConfig;

    #[test]
    fn the_guard_parses_every_shape_the_lab_writes() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let queue = QueueConfig {
            size: 3,
            timeout: Nanos::from_millis(50),
        };
        let mut docs = vec![
            GuardDoc::new("pod", "app", &[a]).fixed_limit(4, Some(queue.clone()), 503),
            GuardDoc::new("node", "hop", &[a, b]).fixed_limit(9, None, 429),
            GuardDoc::new("node", "hop", &[a])
                .limits(
                    Some(LimitConfig::Fixed(FixedConfig { limit: 7 })),
                    Some(queue),
                    Some(SaturationConfig::default()),
                )
                .retry(
                    RetryConfig::default(),
                    Some(BudgetConfig::Ratio(RatioBudgetConfig::default())),
                )
                .dependency(&[b], Nanos::from_millis(250)),
            GuardDoc::new("node", "hop", &[a]),
        ];
        docs[1].set_shed(Some((503, Some(Nanos::from_secs(2)))));
        docs.push(GuardDoc::new("node", "hop", &[a]).sites(&["a".into(), "node".into()], 403));
        for doc in &docs {
            let text = doc.text().unwrap();
            let parsed = GuardConfig::parse("lab.toml", &text);
            assert!(parsed.is_ok(), "{text}\n{}", parsed.err().unwrap());
        }
        let sidecar = docs[0].text().unwrap();
        assert!(!sidecar.contains("retry_after = \"1"), "{sidecar}");
        assert_eq!(docs[1].fixed(), Some(9));
        docs[1].set_fixed(5);
        assert_eq!(docs[1].fixed(), Some(5));
        assert!(docs[1].set_endpoints(NEXT, &[b]));
        assert!(!docs[1].set_endpoints(NEXT, &[b]), "unchanged");
        assert!(!docs[1].set_endpoints(NEXT, &[]), "never empty");
        assert!(docs[1].text().unwrap().contains("\"127.0.0.1:2\"]"));
    }
}

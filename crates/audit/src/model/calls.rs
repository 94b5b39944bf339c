//! Calls between services: which sidecar workloads call which Service, and
//! through which host — the host names the cluster in the caller's proxy,
//! so it decides which DestinationRule (and connection pool) applies.
//!
//! A workload with a sidecar calls:
//! - the hosts of [`Workload::calls`] (env values that are plainly
//!   addresses, the `stormbreak.io/calls` annotation);
//! - the explicit hosts of the Sidecar resource that applies to it:
//!   `egress[].hosts` entries `namespace/dnsName` whose dnsName has no
//!   wildcard (`prod/reviews.prod.svc.cluster.local`). A wildcard (`./*`,
//!   `*/*.example.com`) says what the proxy *may* reach, never that it
//!   calls anything, so it adds no call.
//!
//! A called host lands on a registry host ([`Inventory::registry_host`]:
//! the FQDN of the Service the caller's DNS names, else the host as
//! written) and resolves, in this order, to:
//! 1. the route destinations of a mesh VirtualService (no gateway, or the
//!    `mesh` gateway) one of whose `hosts` is that registry host, that is
//!    exported to the caller's namespace (`exportTo`) and, under a Sidecar
//!    listing egress hosts, imported by one of them from the
//!    VirtualService's namespace: the caller's proxy sends the call where
//!    the VirtualService routes it (Istio 1.27 "Virtual Service", `hosts`,
//!    `gateways`, `exportTo`). Its hosts and destinations are read as Istio
//!    reads its config ([`super::config_host`]: a short name in the
//!    VirtualService's namespace, a dotted host as written) and matched
//!    exactly, so `reviews.prod` routes no call to Service reviews in prod;
//! 2. else a Service, by the caller's DNS ([`super::fqdn`]), when it is
//!    exported to the caller's namespace (its `networking.istio.io/exportTo`
//!    annotation): a hidden Service has no cluster in the caller's proxy,
//!    and neither a route destination naming it;
//! 3. else a ServiceEntry host (Istio 1.27 "Service Entry",
//!    <https://istio.io/v1.27/docs/reference/config/networking/service-entry/>):
//!    the Services whose pods serve it — a `MESH_INTERNAL` entry's
//!    `workloadSelector`, or an `endpoints[].address` that names a Service.
//!    The caller's cluster is then named by the entry's host, so the
//!    DestinationRule is looked up by that host, not the Service's. An
//!    entry for an external API (no audited workload behind it) is not a
//!    call between services, and an entry whose `exportTo` hides it from
//!    the caller's namespace is not in the caller's registry.
//!
//! Which Sidecar applies (Istio 1.27 "Sidecar",
//! <https://istio.io/v1.27/docs/reference/config/networking/sidecar/>): one
//! in the workload's namespace whose `workloadSelector` selects it, else
//! that namespace's Sidecar without a selector, else the root namespace's
//! Sidecar without a selector. When it lists egress hosts (each dnsName
//! taken as written, never completed by a namespace), the proxy is
//! configured only for the hosts they import; a call to any other host
//! leaves through the PassthroughCluster (or the BlackHoleCluster under
//! `REGISTRY_ONLY`), where no DestinationRule pool applies, so it is not
//! counted as a pool caller.

use std::collections::HashMap;

use super::{Inventory, SidecarEgress, Workload, fqdn, selects};

/// The host a call goes through when it is not the Service's own: a
/// ServiceEntry host (its DestinationRule is looked up by that host).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Via {
    /// The host's FQDN, as the caller's cluster is named.
    pub host: String,
    /// The namespace that defines it (the ServiceEntry's).
    pub namespace: String,
    /// `ServiceEntry ns/name`, for the chain's `how`.
    pub what: String,
}

/// One caller of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Call {
    /// The calling workload (index into [`Inventory::workloads`]).
    pub workload: usize,
    /// Through a ServiceEntry host (None: the Service's own host).
    pub via: Option<Via>,
    /// How the call is known (`env`, `Sidecar egress`, `VirtualService`…).
    pub how: String,
}

/// Every Service's callers, keyed by (namespace, name).
pub type CallerMap = HashMap<(String, String), Vec<Call>>;

/// A resolved target: the Service (namespace, name) and the host it is
/// reached through, with how the resolution went.
type Target = ((String, String), Option<Via>, Option<String>);

impl SidecarEgress {
    /// Does an egress host of this Sidecar import `host` (an FQDN defined
    /// in namespace `home`)? `*`: any namespace; `.`: the Sidecar's own;
    /// `~`: none; a dnsName `*`, `*.suffix` or the host itself.
    pub fn imports(&self, host: &str, home: &str) -> bool {
        self.hosts.iter().any(|(ns, dns)| {
            let ns_ok = match ns.as_str() {
                "*" => true,
                "." => home == self.namespace,
                "~" => false,
                n => n == home,
            };
            // The dnsName is taken as written, never completed by a
            // namespace: istio/istio reads it as `host.Name(dnsName)`
            // (pilot/pkg/model/sidecar.go), so `./cart` imports no
            // `cart.shop.svc.cluster.local`.
            let dns_ok = dns == "*"
                || dns
                    .strip_prefix("*.")
                    .is_some_and(|suffix| host.ends_with(&format!(".{suffix}")))
                || dns == host;
            ns_ok && dns_ok
        })
    }
}

impl Inventory {
    /// The Sidecar resource with egress hosts that applies to a workload
    /// (see the module docs for the order), if any.
    pub fn sidecar_for(&self, w: &Workload) -> Option<&SidecarEgress> {
        let own = || self.sidecars_in(&w.namespace);
        own()
            .find(|s| {
                s.selector
                    .as_ref()
                    .is_some_and(|l| selects(l, &w.pod_labels))
            })
            .or_else(|| own().find(|s| s.selector.is_none()))
            .or_else(|| {
                self.sidecars_in(super::ROOT_NAMESPACE)
                    .find(|s| s.selector.is_none())
            })
    }

    /// Every Service's callers: the workloads with a sidecar that call it
    /// (see the module docs), each caller once per host it calls through.
    /// One pass over the workloads; each resolves at most
    /// 2 × [`super::workload::MAX_CALLS`] hosts.
    pub fn callers(&self) -> CallerMap {
        // Mesh VirtualServices (their indices) by each host they route, as
        // resolved at load ([`super::RouteObject::hosts`]); a call finds
        // them by the registry host it lands on.
        let mut vs: HashMap<&str, Vec<usize>> = HashMap::new();
        for (ri, ro) in self.routes.iter().enumerate() {
            if ro.kind != "VirtualService" || ro.at_gateway {
                continue;
            }
            for h in ro.hosts.iter().filter(|h| !h.contains('*')) {
                let e = vs.entry(h.as_str()).or_default();
                // A host written twice in one VirtualService routes once.
                if e.last() != Some(&ri) {
                    e.push(ri);
                }
            }
        }
        // ServiceEntry hosts → the Services serving them. The Services
        // selecting each workload are found once (not per entry), each
        // through the pod-label index, never by a scan of its namespace.
        let mut services_of: HashMap<usize, Vec<(String, String)>> = HashMap::new();
        if self
            .service_entries
            .iter()
            .any(|se| se.internal && se.selector.is_some())
        {
            for svc in &self.services {
                for wi in self.selected(&svc.namespace, &svc.selector) {
                    services_of
                        .entry(wi)
                        .or_default()
                        .push((svc.namespace.clone(), svc.name.clone()));
                }
            }
        }
        // Each host's targets, with the entry's index (for its `exportTo`).
        let mut entries: HashMap<String, Vec<(usize, Target)>> = HashMap::new();
        for (ei, se) in self.service_entries.iter().enumerate() {
            let mut backing: Vec<(String, String)> = Vec::new();
            if let Some(sel) = se.selector.as_ref().filter(|_| se.internal) {
                for wi in self.selected(&se.namespace, sel) {
                    backing.extend(services_of.get(&wi).into_iter().flatten().cloned());
                }
            }
            for a in &se.endpoints {
                if let Some(svc) = self.service_for_host(a, &se.namespace) {
                    backing.push((svc.namespace.clone(), svc.name.clone()));
                }
            }
            backing.sort();
            backing.dedup();
            backing.truncate(super::workload::MAX_CALLS);
            for h in se.hosts.iter().filter(|h| !h.contains('*')) {
                let host = h.to_ascii_lowercase();
                let via = Via {
                    host: host.clone(),
                    namespace: se.namespace.clone(),
                    what: format!("ServiceEntry {}/{} host {host}", se.namespace, se.name),
                };
                entries.entry(host).or_default().extend(
                    backing
                        .iter()
                        .map(|b| (ei, (b.clone(), Some(via.clone()), None))),
                );
            }
        }
        // The entries for an exact host that a proxy in `viewer` sees.
        let entry_targets = |host: &str, viewer: &str| -> Vec<Target> {
            entries
                .get(host)
                .into_iter()
                .flatten()
                .filter(|(ei, _)| self.service_entries[*ei].visible_to(viewer))
                .map(|(_, t)| t.clone())
                .collect()
        };
        // A host an application calls: DNS rules (a short name in the
        // caller's namespace, `name.ns`…), then a ServiceEntry host. A
        // Service not exported to the caller's namespace has no cluster in
        // its proxy: the call leaves through the PassthroughCluster, where
        // no pool applies.
        let resolve_direct = |h: &str, ns: &str, viewer: &str| -> Vec<Target> {
            if let Some(s) = self.service_for_host(h, ns) {
                if !s.visible_to(viewer) {
                    return Vec::new();
                }
                return vec![((s.namespace.clone(), s.name.clone()), None, None)];
            }
            let key = h.to_ascii_lowercase();
            let t = entry_targets(&key, viewer);
            if t.is_empty() {
                entry_targets(&fqdn(&key, ns), viewer)
            } else {
                t
            }
        };
        // A VirtualService destination, already resolved: exact matches
        // only; a Service hidden from the caller (`exportTo`) is no
        // cluster of its proxy, so the route reaches no pool.
        let resolve_destination = |d: &str, viewer: &str| -> Vec<Target> {
            match self.service_for_fqdn(d) {
                Some(s) if s.visible_to(viewer) => {
                    vec![((s.namespace.clone(), s.name.clone()), None, None)]
                }
                Some(_) => Vec::new(),
                None => entry_targets(d, viewer),
            }
        };
        // A mesh VirtualService is in the caller's proxy when it is
        // exported to the caller's namespace and, under a Sidecar that
        // lists egress hosts, one of those imports one of its hosts from
        // the VirtualService's namespace (Istio's `SelectVirtualServices`).
        let resolve = |h: &str, ns: &str, viewer: &str, sc: Option<&SidecarEgress>| {
            let landed = self.registry_host(h, ns);
            let visible: Vec<usize> = vs
                .get(landed.as_str())
                .into_iter()
                .flatten()
                .copied()
                .filter(|ri| {
                    let ro = &self.routes[*ri];
                    ro.visible_to(viewer)
                        && sc.is_none_or(|s| ro.hosts.iter().any(|vh| s.imports(vh, &ro.namespace)))
                })
                .collect();
            if visible.is_empty() {
                return resolve_direct(h, ns, viewer);
            }
            visible
                .into_iter()
                .flat_map(|ri| self.routes[ri].routes.iter())
                .flat_map(|r| r.destinations.iter())
                .flat_map(|d| resolve_destination(d, viewer))
                .map(|(t, via, _)| {
                    (
                        t,
                        via,
                        Some(format!("routed by a mesh VirtualService for {h}")),
                    )
                })
                .collect()
        };
        let mut out: CallerMap = HashMap::new();
        for (i, w) in self.workloads.iter().enumerate() {
            if w.sidecar.is_none() {
                continue;
            }
            let sc = self.sidecar_for(w);
            let mut hosts: Vec<(String, String, &str)> = w
                .calls
                .iter()
                .map(|h| (h.clone(), w.namespace.clone(), "env or stormbreak.io/calls"))
                .collect();
            if let Some(sc) = sc {
                for (ns, dns) in &sc.hosts {
                    if dns.contains('*') || ns == "~" {
                        continue;
                    }
                    let from = if ns == "." || ns == "*" {
                        sc.namespace.clone()
                    } else {
                        ns.clone()
                    };
                    hosts.push((dns.clone(), from, "Sidecar egress host"));
                }
            }
            hosts.truncate(2 * super::workload::MAX_CALLS);
            for (h, ns, source) in hosts {
                for (target, via, routed) in resolve(&h, &ns, &w.namespace, sc) {
                    // The host the caller's proxy names the cluster by.
                    let (cluster, home) = match &via {
                        Some(v) => (v.host.clone(), v.namespace.clone()),
                        None => (
                            format!("{}.{}.svc.{}", target.1, target.0, super::CLUSTER_DOMAIN),
                            target.0.clone(),
                        ),
                    };
                    if sc.is_some_and(|s| !s.imports(&cluster, &home)) {
                        continue;
                    }
                    let how = match routed {
                        Some(r) => format!("{source} {h}, {r}"),
                        None => format!("{source} {h}"),
                    };
                    let v = out.entry(target).or_default();
                    if !v.iter().any(|c| c.workload == i && c.via == via) {
                        v.push(Call {
                            workload: i,
                            via,
                            how,
                        });
                    }
                }
            }
        }
        out
    }
}

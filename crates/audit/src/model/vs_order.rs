//! Several VirtualServices for one host, resolved as Istio resolves them.
//!
//! Istio orders VirtualServices by `creationTimestamp`, then name, then
//! namespace (istio/istio `pilot/pkg/model/config.go`,
//! `configCompareByCreationTime`), a proxy taking those private to its
//! namespace first, then those exported to it, then public ones
//! (`pilot/pkg/model/virtualservice.go`, `SelectVirtualServices`).
//! - For sidecars (`mesh`), the first VirtualService that names a host
//!   builds its virtual host; a later one for the same host is dropped for
//!   that host (`pilot/pkg/networking/core/httproute.go`: "duplicate domain
//!   from virtual service"; Istio 1.27 "Traffic Management Best
//!   Practices", "Split large virtual services and destination rules into
//!   multiple resources": merging is supported only for gateways).
//! - For a gateway, the routes of every VirtualService bound to it for the
//!   host are merged in that order; the first route that matches wins, so
//!   a route without `match` in an earlier one takes every request and
//!   the later one's routes are never used.
//!
//! Objects without `creationTimestamp` (manifests, not a live export) tie
//! on it and fall back to name and namespace, as Istio does within one
//! second.

use std::collections::BTreeMap;

use super::{Inventory, RouteObject};

/// A VirtualService that loses a host to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// Index of the losing VirtualService in `inv.routes`.
    pub loser: usize,
    /// Index of the one that wins.
    pub winner: usize,
    /// The host they share.
    pub host: String,
    /// True for gateway-bound VirtualServices (merged, lost to a
    /// catch-all route); false for the mesh (dropped).
    pub gateway: bool,
    /// Client namespaces where it loses (mesh; empty for gateways).
    pub namespaces: Vec<String>,
    /// True when the loser wins no host anywhere: none of its routes is
    /// ever used.
    pub everywhere: bool,
}

/// One host a VirtualService loses: (winner, host, at a gateway, the
/// client namespaces where it loses).
type Loss = (usize, String, bool, Vec<String>);

/// Istio's order of two VirtualServices (creation time, name, namespace).
fn istio_order(a: &RouteObject, b: &RouteObject) -> std::cmp::Ordering {
    a.created
        .cmp(&b.created)
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.namespace.cmp(&b.namespace))
}

/// How a proxy in `ns` ranks a VirtualService it sees: private to `ns`,
/// exported to `ns` by name, public.
fn visibility_rank(r: &RouteObject, ns: &str) -> u8 {
    let private = r.namespace == ns
        && !r.export_to.is_empty()
        && r.export_to.iter().all(|e| e == "." || e == ns);
    if private {
        0
    } else if r.export_to.iter().any(|e| e == ns) {
        1
    } else {
        2
    }
}

/// Every VirtualService that loses a host, in `inv.routes` order. Work is
/// linear in the VirtualServices plus, for hosts named by more than one,
/// their count × the client namespaces among the inputs.
pub fn shadowed(inv: &Inventory) -> Vec<Shadowed> {
    let mut by_host: BTreeMap<(&str, bool), Vec<usize>> = BTreeMap::new();
    for (i, r) in inv.routes.iter().enumerate() {
        if r.kind != "VirtualService" {
            continue;
        }
        for h in &r.hosts {
            by_host
                .entry((h.as_str(), r.at_gateway))
                .or_default()
                .push(i);
        }
    }
    let mut namespaces: Vec<&str> = inv
        .workloads
        .iter()
        .map(|w| w.namespace.as_str())
        .chain(inv.routes.iter().map(|r| r.namespace.as_str()))
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut lost: BTreeMap<usize, Vec<Loss>> = BTreeMap::new();
    for ((host, gateway), list) in &by_host {
        if list.len() < 2 {
            continue;
        }
        if *gateway {
            let mut sorted = list.clone();
            sorted.sort_by(|a, b| istio_order(&inv.routes[*a], &inv.routes[*b]));
            for (k, &later) in sorted.iter().enumerate() {
                let earlier = sorted[..k].iter().copied().find(|&e| {
                    shares_gateway(&inv.routes[e], &inv.routes[later])
                        && inv.routes[e].routes.iter().any(|r| r.catch_all)
                });
                if let Some(e) = earlier {
                    lost.entry(later)
                        .or_default()
                        .push((e, host.to_string(), true, Vec::new()));
                }
            }
            continue;
        }
        let mut losses: BTreeMap<usize, (usize, Vec<String>)> = BTreeMap::new();
        for ns in &namespaces {
            let winner = list
                .iter()
                .copied()
                .filter(|&i| inv.routes[i].visible_to(ns))
                .min_by(|&a, &b| {
                    let (ra, rb) = (&inv.routes[a], &inv.routes[b]);
                    visibility_rank(ra, ns)
                        .cmp(&visibility_rank(rb, ns))
                        .then_with(|| istio_order(ra, rb))
                });
            let Some(w) = winner else { continue };
            for &i in list {
                if i != w && inv.routes[i].visible_to(ns) {
                    losses
                        .entry(i)
                        .or_insert_with(|| (w, Vec::new()))
                        .1
                        .push(ns.to_string());
                }
            }
        }
        for (loser, (winner, nss)) in losses {
            lost.entry(loser)
                .or_default()
                .push((winner, host.to_string(), false, nss));
        }
    }
    let mut out = Vec::new();
    for (loser, entries) in lost {
        let r = &inv.routes[loser];
        // It loses everywhere when every host it names is lost in every
        // namespace that sees it (or, at a gateway, lost outright).
        let everywhere = r.hosts.iter().all(|h| {
            entries.iter().any(|(_, eh, gw, nss)| {
                eh == h
                    && (*gw
                        || namespaces
                            .iter()
                            .filter(|ns| r.visible_to(ns))
                            .all(|ns| nss.iter().any(|n| n == ns)))
            })
        });
        for (winner, host, gateway, namespaces) in entries {
            out.push(Shadowed {
                loser,
                winner,
                host,
                gateway,
                namespaces,
                everywhere,
            });
        }
    }
    out
}

/// Two gateway-bound VirtualServices merge only on a gateway both name
/// (names compared as written; a short name is in the object's namespace).
fn shares_gateway(a: &RouteObject, b: &RouteObject) -> bool {
    let full = |r: &RouteObject, g: &String| {
        if g.contains('/') {
            g.clone()
        } else {
            format!("{}/{g}", r.namespace)
        }
    };
    a.gateways
        .iter()
        .any(|ga| b.gateways.iter().any(|gb| full(a, ga) == full(b, gb)))
}

//! HAProxy hops: a frontend's `maxconn` as an `[[lb]]`, a backend's
//! servers as a limited `[[gateway]]` with HAProxy's queue.

use std::fmt::Write;

use super::limit::{self, Limited};
use super::names::one_line;
use super::{MAX_QUEUE, MAX_SLOTS, NO_TIMEOUT, Out, Placed, timeout};
use crate::chain::{Chain, Hop, HopKind, haproxy_key};
use crate::inputs::haproxy::Proxy;
use crate::model::Inventory;
use crate::units::trim;

/// Flows written for a frontend whose `maxconn` the audit cannot know.
pub const UNKNOWN_FLOWS: u64 = 10_000;

/// The HAProxy section a hop was read from.
pub(crate) fn proxy_of<'a>(inv: &'a Inventory, hop: &Hop) -> Option<&'a Proxy> {
    inv.haproxy
        .iter()
        .flat_map(|cfg| cfg.proxies.iter().map(move |p| (cfg, p)))
        .find(|(cfg, p)| haproxy_key(cfg, p) == hop.object)
        .map(|(_, p)| p)
}

/// The backend a chain passes, if it passes HAProxy.
pub(crate) fn backend_of<'a>(inv: &'a Inventory, chain: &Chain) -> Option<&'a Proxy> {
    let hop = chain.hops.iter().find(|h| h.kind == HopKind::Backend)?;
    proxy_of(inv, hop)
}

/// Active servers of a backend (`backup` and `disabled` ones wait).
pub(crate) fn active_servers(p: &Proxy) -> usize {
    p.servers
        .iter()
        .filter(|s| !s.backup && !s.disabled)
        .count()
}

/// A frontend as an `[[lb]]` of one node holding `maxconn` flows: HAProxy
/// holds a connection, one request at a time (the chain's conversion),
/// for the request's whole downstream life, as an LB node holds a flow.
pub(crate) fn frontend(h: &Hop, out: &mut Out, blocks: &mut String) -> Placed {
    let (name, new) = out.names.of(&format!("lb {}", h.object), &h.name);
    let mut ledger = Vec::new();
    let flows = match h.limit {
        Some(l) => {
            let f = (l.round() as u64).clamp(1, MAX_SLOTS as u64);
            if f as f64 != l {
                ledger.push(format!(
                    "# NOT CARRIED: {}: maxconn {} is written as {f} flows (the format's flows_per_node is a whole number from 1 to {MAX_SLOTS})",
                    one_line(&h.name),
                    trim(l)
                ));
            }
            ledger.push(format!(
                "#   {} ({}) → [[lb]] {name}: 1 node × flows_per_node {f}",
                one_line(&h.name),
                trim(l)
            ));
            f
        }
        None => {
            ledger.push(format!(
                "#   {} (limit unknown) → [[lb]] {name}: ASSUMPTION {UNKNOWN_FLOWS} flows",
                one_line(&h.name)
            ));
            UNKNOWN_FLOWS
        }
    };
    if new {
        let note = match h.limit {
            Some(_) => one_line(&h.how),
            None => format!("ASSUMPTION: {UNKNOWN_FLOWS} flows; {}", one_line(&h.how)),
        };
        let _ = writeln!(
            blocks,
            "# {} ({})\n# GAP: past maxconn HAProxy stops accepting and new connections wait in the listen backlog; the simulated LB refuses them at once (flows_exhausted, a connection failure to the caller)\n[[lb]]\nname = \"{name}\"\nnodes = 1\nflows_per_node = {flows}   # {note}\n",
            one_line(&h.name),
            one_line(&h.pos.to_string())
        );
    }
    Placed {
        name: Some(name),
        ledger,
    }
}

/// A backend's servers as one limited gateway: the sum of their `maxconn`
/// (the chain's hop, dynamic or not), HAProxy's queue in front, the 503 of
/// `timeout queue` past it.
pub(crate) fn backend(
    inv: &Inventory,
    h: &Hop,
    out: &mut Out,
    blocks: &mut String,
) -> Result<Placed, String> {
    let Some(total) = h.limit else {
        let line = if h.unknown {
            format!(
                "# NOT CARRIED: {}: its limit is unknown to the audit ({})",
                one_line(&h.name),
                one_line(&h.how)
            )
        } else {
            format!(
                "#   {}: no limit ({}) → nothing to carry",
                one_line(&h.name),
                one_line(&h.how)
            )
        };
        return Ok(Placed {
            name: None,
            ledger: vec![line],
        });
    };
    let (name, new) = out.names.of(&format!("backend {}", h.object), &h.name);
    let limit = (total.round() as u64).clamp(1, MAX_SLOTS as u64) as u32;
    let mut ledger = Vec::new();
    if limit as f64 != total {
        ledger.push(format!(
            "# NOT CARRIED: {}: {} is written as a limit of {limit} (a whole number from 1 to {MAX_SLOTS})",
            one_line(&h.name),
            trim(total)
        ));
    }
    ledger.push(format!(
        "#   {} ({}) → [[gateway]] {name}: fixed limit {limit} × 1 instance, HAProxy's queue",
        one_line(&h.name),
        trim(total)
    ));
    if new {
        let p = proxy_of(inv, h);
        let active = p.map(|p| {
            p.servers
                .iter()
                .filter(|s| !s.backup && !s.disabled)
                .collect::<Vec<_>>()
        });
        let bounded: Option<u64> = active
            .as_ref()
            .and_then(|a| a.iter().map(|s| s.maxqueue.filter(|m| *m > 0)).sum());
        let size = match bounded {
            Some(q) => (
                q.clamp(1, MAX_QUEUE as u64) as u32,
                format!("Σ maxqueue {q}"),
            ),
            None => (
                MAX_QUEUE,
                format!(
                    "no maxqueue: HAProxy's queue is unbounded; the format's largest, {MAX_QUEUE}"
                ),
            ),
        };
        let (wait, why) = match p.and_then(|p| {
            timeout(p.timeout("queue"))
                .map(|t| (t, "timeout queue"))
                .or_else(|| {
                    timeout(p.timeout("connect")).map(|t| (t, "timeout connect (no timeout queue)"))
                })
        }) {
            Some((t, why)) => (t, why.to_string()),
            None => (
                NO_TIMEOUT,
                "no timeout queue or connect: HAProxy waits without end; the format's largest"
                    .to_string(),
            ),
        };
        let server = p.and_then(|p| timeout(p.timeout("server")));
        let mut comments = vec![
            format!("{} ({}): {}", h.name, h.pos, h.how),
            "HAProxy queues a request while every server is at maxconn and answers 503 once it has waited the queue timeout".into(),
            "GAP: the servers' slots are one shared limit and queue here, where HAProxy keeps them per server and its balance algorithm picks one; the slot is held through the HAProxy layer's retries (the retry gateway follows this one), and this 503 is not retried, as HAProxy does not retry its own queue timeout".into(),
        ];
        if h.how.starts_with("dynamic maxconn") {
            comments.push(format!(
                "GAP: a dynamic maxconn (minconn with fullconn) is written as the fixed point the chain computes, {}",
                trim(total)
            ));
        }
        let g = Limited {
            name: name.clone(),
            comments,
            timeout: match server {
                Some(t) => (t, "timeout server".into()),
                None => (
                    NO_TIMEOUT,
                    "no timeout server: HAProxy waits without end; the format's largest".into(),
                ),
            },
            limit,
            instances: 1,
            queue: Some((size.0, wait, format!("size: {}; timeout: {why}", size.1))),
        };
        blocks.push_str(&limit::block(&g)?);
    }
    Ok(Placed {
        name: Some(name),
        ledger,
    })
}

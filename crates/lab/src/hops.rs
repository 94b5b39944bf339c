//! The hops in front of a route's service: each LB pool's nodes (`lb.rs`)
//! and each gateway's instances (`gateway.rs`) started as guards
//! (`pool.rs`) forwarding to the next hop of their route, and a gateway
//! calling its dependency route's first hop. A pool starts once the hops
//! it sends to listen, so the pools nearest the services start first.
//! `support.rs` has checked that each pool forwards to one next hop and
//! that a service ends every route; the simulator refuses dependency
//! cycles, so every pass starts at least one pool.
//!
//! A pool whose next hop (or dependency) is a service follows that
//! service's balancer set ([`Fleet::members`]): as pods start, are taken
//! out or killed, every instance's cluster is reloaded with the new list
//! (in place: the guard keeps its limiter, retry budget and the requests
//! in flight), as Envoy follows EDS. The simulator's LB and gateway see a
//! pod change at once; here it takes one reload, well under a
//! millisecond.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::fleet::{Fleet, RunShared};
use crate::guard_doc::{DEPENDENCY, NEXT};
use crate::plan::{Hop, LabPlan};
use crate::pool::Pool;
use crate::{gateway, lb};

/// The run's pools, indexed as in the plan.
pub struct Pools {
    /// Per LB pool: its nodes.
    pub lbs: Vec<Arc<Pool>>,
    /// Per gateway: its instances.
    pub gateways: Vec<Arc<Pool>>,
    /// The tasks keeping pools' clusters on their services' pods (one
    /// per pool and cluster that forwards to a service); ended when the
    /// pools are dropped.
    followers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Pools {
    fn drop(&mut self) {
        for f in &self.followers {
            f.abort();
        }
    }
}

/// Keeps `pool`'s `cluster` on `fleet`'s balancer set until the run ends;
/// a reload that fails ends the run.
fn follow(
    pool: Arc<Pool>,
    cluster: &'static str,
    fleet: &Fleet,
    shared: Arc<RunShared>,
) -> tokio::task::JoinHandle<()> {
    let mut members = fleet.members();
    tokio::spawn(async move {
        loop {
            let to = members.borrow_and_update().clone();
            if let Err(e) = pool.set_endpoints(cluster, &to) {
                shared.fail(format!("following the pods of a service: {e}"));
                return;
            }
            if members.changed().await.is_err() {
                return;
            }
        }
    })
}

impl Pools {
    /// Every pool (the order to close them in: LBs, then gateways).
    pub fn all(&self) -> Vec<Arc<Pool>> {
        self.lbs.iter().chain(&self.gateways).cloned().collect()
    }
}

/// The pools while they start.
struct Starting<'a> {
    fleets: &'a [Arc<Fleet>],
    lbs: Vec<Option<Arc<Pool>>>,
    gateways: Vec<Option<Arc<Pool>>>,
}

impl Starting<'_> {
    /// Where an attempt to `hop` may go, once it listens.
    fn addrs(&self, hop: Hop) -> Option<Vec<SocketAddr>> {
        match hop {
            Hop::Service(s) => Some(self.fleets[s].pods().iter().map(|p| p.target).collect()),
            Hop::Lb(l) => self.lbs[l].as_ref().map(|p| p.addrs()),
            Hop::Gateway(g) => self.gateways[g].as_ref().map(|p| p.addrs()),
        }
    }

    async fn close(&self) {
        for p in self.lbs.iter().chain(&self.gateways).flatten() {
            p.close().await;
        }
    }
}

/// The hop after `hop` on the routes it is on (one, `support.rs`).
fn next_hop(plan: &LabPlan, hop: Hop) -> Hop {
    plan.paths
        .iter()
        .find_map(|p| p.windows(2).find(|w| w[0] == hop).map(|w| w[1]))
        .expect("support.rs: every pool is on a route, before a service")
}

/// Starts every pool of `plan` in front of `fleets`' pods (started
/// already); on an error those started are closed again.
pub async fn start(
    plan: &LabPlan,
    fleets: &[Arc<Fleet>],
    shared: &Arc<RunShared>,
) -> Result<Pools, String> {
    let mut st = Starting {
        fleets,
        lbs: vec![None; plan.lbs.len()],
        gateways: vec![None; plan.gateways.len()],
    };
    let pools: Vec<Hop> = (0..plan.lbs.len())
        .map(Hop::Lb)
        .chain((0..plan.gateways.len()).map(Hop::Gateway))
        .collect();
    // Each pass starts every pool whose upstreams listen; at most one
    // pass per pool.
    for _ in 0..=pools.len() {
        let mut started_any = false;
        for &hop in &pools {
            let started = match hop {
                Hop::Lb(l) => st.lbs[l].is_some(),
                Hop::Gateway(g) => st.gateways[g].is_some(),
                Hop::Service(_) => true,
            };
            if started {
                continue;
            }
            let Some(next) = st.addrs(next_hop(plan, hop)) else {
                continue;
            };
            let result = match hop {
                Hop::Lb(l) => {
                    let spec = &plan.lbs[l];
                    let docs = (0..spec.nodes).map(|_| lb::doc(spec, &next)).collect();
                    let sites = spec.ramp.as_ref().map_or(&[][..], |r| &r.sites[..]);
                    Pool::start(&spec.name, docs, sites)
                        .await
                        .map_err(|e| format!("[[lb]] {e}"))
                }
                Hop::Gateway(g) => {
                    let spec = &plan.gateways[g];
                    let dependency = match spec.dependency {
                        Some(r) => match st.addrs(plan.paths[r][0]) {
                            Some(a) => Some(a),
                            None => continue,
                        },
                        None => None,
                    };
                    let doc = gateway::doc(spec, &next, dependency.as_deref());
                    Pool::start(&spec.name, vec![doc; spec.instances as usize], &[])
                        .await
                        .map_err(|e| format!("[[gateway]] {e}"))
                }
                Hop::Service(_) => unreachable!("services are fleets"),
            };
            let pool = match result {
                Ok(p) => Arc::new(p),
                Err(e) => {
                    st.close().await;
                    return Err(e);
                }
            };
            for a in pool.addrs() {
                shared.listen(a);
            }
            match hop {
                Hop::Lb(l) => st.lbs[l] = Some(pool),
                Hop::Gateway(g) => st.gateways[g] = Some(pool),
                Hop::Service(_) => {}
            }
            started_any = true;
        }
        if !started_any {
            break;
        }
    }
    let all_started = st.lbs.iter().chain(&st.gateways).all(Option::is_some);
    if !all_started {
        st.close().await;
        return Err("a pool's next hop or dependency never started (a cycle)".to_owned());
    }
    let lbs: Vec<Arc<Pool>> = st.lbs.into_iter().flatten().collect();
    let gateways: Vec<Arc<Pool>> = st.gateways.into_iter().flatten().collect();
    let mut followers = Vec::new();
    let service = |hop: Hop| match hop {
        Hop::Service(s) => Some(s),
        _ => None,
    };
    for (hop, pool) in (0..lbs.len())
        .map(Hop::Lb)
        .zip(&lbs)
        .chain((0..gateways.len()).map(Hop::Gateway).zip(&gateways))
    {
        if let Some(s) = service(next_hop(plan, hop)) {
            followers.push(follow(pool.clone(), NEXT, &fleets[s], shared.clone()));
        }
        if let Hop::Gateway(g) = hop
            && let Some(r) = plan.gateways[g].dependency
            && let Some(s) = service(plan.paths[r][0])
        {
            followers.push(follow(pool.clone(), DEPENDENCY, &fleets[s], shared.clone()));
        }
    }
    Ok(Pools {
        lbs,
        gateways,
        followers,
    })
}

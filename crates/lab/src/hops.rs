//! The hops in front of a route's service: each LB pool's nodes (`lb.rs`)
//! and each gateway's instances (`gateway.rs`) started as guards
//! (`pool.rs`) forwarding to the next hop of their route, and a gateway
//! calling its dependency route's first hop. A pool starts once the hops
//! it sends to listen, so the pools nearest the services start first.
//! `support.rs` has checked that each pool forwards to one next hop and
//! that a service ends every route; the simulator refuses dependency
//! cycles, so every pass starts at least one pool.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::fleet::{Fleet, RunShared};
use crate::plan::{Hop, LabPlan};
use crate::pool::Pool;
use crate::{gateway, lb};

/// The run's pools, indexed as in the plan.
pub struct Pools {
    /// Per LB pool: its nodes.
    pub lbs: Vec<Arc<Pool>>,
    /// Per gateway: its instances.
    pub gateways: Vec<Arc<Pool>>,
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
    shared: &RunShared,
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
                    let configs = (0..spec.nodes)
                        .map(|_| lb::config_text(spec, &next))
                        .collect();
                    Pool::start(&spec.name, configs)
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
                    let text = gateway::config_text(spec, &next, dependency.as_deref());
                    match text {
                        Ok(text) => Pool::start(&spec.name, vec![text; spec.instances as usize])
                            .await
                            .map_err(|e| format!("[[gateway]] {e}")),
                        Err(e) => Err(e),
                    }
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
    Ok(Pools {
        lbs: st.lbs.into_iter().flatten().collect(),
        gateways: st.gateways.into_iter().flatten().collect(),
    })
}

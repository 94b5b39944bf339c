//! The hops in front of a route's service: each LB pool's nodes started
//! as guards (`lb.rs`, `pool.rs`) forwarding to the next hop of its route,
//! the hops nearest the service first so each knows where it forwards.
//! `support.rs` has checked that each pool is on exactly one route and
//! that a service ends every route.

use std::sync::Arc;

use crate::fleet::{Fleet, RunShared};
use crate::lb;
use crate::plan::{Hop, LabPlan};
use crate::pool::Pool;

/// The run's pools, indexed as in the plan.
pub struct Pools {
    /// Per LB pool: its nodes.
    pub lbs: Vec<Arc<Pool>>,
}

impl Pools {
    /// Every pool, edge first (the order to close them in).
    pub fn all(&self) -> Vec<Arc<Pool>> {
        self.lbs.clone()
    }
}

/// Starts every pool of `plan` in front of `fleets`' pods (started
/// already); on an error those started are closed again.
pub async fn start(
    plan: &LabPlan,
    fleets: &[Arc<Fleet>],
    shared: &RunShared,
) -> Result<Pools, String> {
    let mut lbs: Vec<Option<Arc<Pool>>> = vec![None; plan.lbs.len()];
    for path in &plan.paths {
        for (k, hop) in path.iter().enumerate().rev() {
            let Hop::Lb(l) = *hop else { continue };
            if lbs[l].is_some() {
                continue;
            }
            let next = match path.get(k + 1) {
                Some(Hop::Service(s)) => fleets[*s].pods().iter().map(|p| p.target).collect(),
                Some(Hop::Lb(m)) => lbs[*m].as_ref().expect("started first").addrs(),
                None => unreachable!("support.rs: a service ends every route"),
            };
            let spec = &plan.lbs[l];
            let configs = (0..spec.nodes)
                .map(|_| lb::config_text(spec, &next))
                .collect();
            match Pool::start(&spec.name, configs).await {
                Ok(pool) => {
                    for a in pool.addrs() {
                        shared.listen(a);
                    }
                    lbs[l] = Some(Arc::new(pool));
                }
                Err(e) => {
                    for p in lbs.iter().flatten() {
                        p.close().await;
                    }
                    return Err(format!("[[lb]] {e}"));
                }
            }
        }
    }
    Ok(Pools {
        lbs: lbs
            .into_iter()
            .map(|p| p.expect("support.rs: every LB pool is on a route"))
            .collect(),
    })
}

//! Which cluster an attempt goes to: the route's own, or its `failover`
//! cluster when none of the route's endpoints is left, or when the
//! route's spill law (`failover_policy`, the policy crate's capacity-aware
//! law) sends this attempt to the secondary. The chosen cluster's stack
//! ([`super::stack`]) makes the call.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use stormbreak_policy::failover::Region;
use tower::Service;

use super::{Call, Stack, Verdict};
use crate::balance::Cluster;
use crate::failover::Spill;

/// Chooses the cluster of each call and sends it there.
pub(crate) struct Failover<'a> {
    /// The proxy's clusters, by index.
    pub(crate) clusters: &'a [Arc<Cluster>],
    /// The route's cluster.
    pub(crate) primary: usize,
    /// The route's failover cluster, if any.
    pub(crate) failover: Option<usize>,
    /// The route's spill law, if any.
    pub(crate) spill: Option<&'a Spill>,
    /// The cluster of the latest call, for the access log.
    pub(crate) chosen: &'a AtomicUsize,
}

impl Failover<'_> {
    fn choose(&self) -> usize {
        match (self.failover, self.spill) {
            (Some(f), _) if self.clusters[self.primary].available() == 0 => f,
            (Some(f), Some(spill)) if spill.route() == Region::Secondary => f,
            _ => self.primary,
        }
    }
}

impl<'a, 'b> Service<Call<'b>> for Failover<'a> {
    type Response = Verdict;
    type Error = Infallible;
    type Future = <Stack<'a> as Service<Call<'b>>>::Future;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call<'b>) -> Self::Future {
        let chosen = self.choose();
        self.chosen.store(chosen, Ordering::Relaxed);
        super::ready_call(super::stack(&self.clusters[chosen]), call)
    }
}

//! Typed handles. Names in a scenario are resolved to these once, when the
//! engine is built; the hot path never looks a name up.
//!
//! Invariant: a handle held by an attempt or an event stays valid. Tables
//! that never shrink (routes, LBs, LB nodes, gateways, services, client
//! populations, sites) use plain indices; what can come and go (pods,
//! attempts, requests) lives in a generational [`Slab`](crate::slab::Slab),
//! whose stale keys are recognised instead of pointing at a neighbour.

use crate::slab::Key;

macro_rules! index_id {
    ($(#[$m:meta])* $name:ident($t:ty)) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) struct $name(pub(crate) $t);

        impl $name {
            #[inline]
            pub(crate) fn new(i: usize) -> Self {
                $name(<$t>::try_from(i).expect("table sizes are checked when the scenario is validated"))
            }
            #[inline]
            pub(crate) fn ix(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_id!(
    /// A route (fixed at build).
    RouteId(u16)
);
index_id!(
    /// A load-balancer pool (fixed at build).
    LbId(u16)
);
index_id!(
    /// A node of one LB pool. Invariant: an LB's node table never shrinks
    /// (pause and restart flip a flag), so a node index held by a flow
    /// stays valid.
    NodeId(u32)
);
index_id!(
    /// A gateway (fixed at build).
    GatewayId(u16)
);
index_id!(
    /// A service (fixed at build).
    ServiceId(u16)
);
index_id!(
    /// A client population (fixed at build).
    PopId(u16)
);
index_id!(
    /// A client site label, in order of first appearance (0 when none).
    SiteId(u8)
);
index_id!(
    /// A component's series in the recording.
    SeriesId(u32)
);

/// A pod of one service: a generational key, since the autoscaler removes
/// pods while attempts of other pods are in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PodKey(pub(crate) Key);

/// The component at one hop of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comp {
    Lb(LbId),
    Gateway(GatewayId),
    Service(ServiceId),
}

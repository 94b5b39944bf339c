//! The upstream half of the request path: one attempt's call to a
//! cluster, as tower layers, one file each, in the order a call meets
//! them:
//!
//! | layer | file | job |
//! |---|---|---|
//! | [`Failover`] | `failover.rs` | which cluster: the route's, or its failover when none of the route's endpoints is left or the spill law sends this one over |
//! | [`Breaker`] | `breaker.rs` | the cluster's circuit breaker: refuses while open, is told each judged answer |
//! | [`ClusterLimit`] | `cluster_limit.rs` | the cluster's concurrency limit: a permit per call, a sample per judged answer |
//! | [`Balance`] | `balance.rs` | P2C least-request over the endpoints neither ejected nor unhealthy; outlier ejection and the cluster's answer metrics told each judged answer |
//! | [`PerTryTimeout`] | `per_try_timeout.rs` | the attempt's deadline, and whose failure it was when a streamed body was on the way (`blame`) |
//! | [`Endpoint`] | `endpoint.rs` | the call itself, over the cluster's pooled connections |
//!
//! The per-try timeout sits below the breaker, the limit and outlier
//! detection, so they see a timeout as the attempt's failure, as linkerd
//! places it; it sits below the balancer too (the order put it
//! above), because the balancer is where outlier detection learns each
//! answer, and a timeout above it would drop the balancer's future, and
//! the report with it.
//!
//! Every layer answers a [`Verdict`]: the attempt's result and whether it
//! is the upstream's to be judged by. A refusal by a layer (open breaker,
//! full limit, no endpoint), a failure the client caused, or one that is
//! nobody's for sure is not judged: the layers above it drop their breaker
//! call or limit permit unfinished, which cancels it, and feed nothing.
//!
//! The services hold references to the proxy's clusters and are built per
//! attempt (a few words each); every future is a named state machine, so
//! a call allocates nothing here but the cluster limit's wait, when its
//! limit is full.

use std::convert::Infallible;

use http::Request;
use tower::ServiceBuilder;

use crate::attempts::Attempt;
use crate::balance::Cluster;
use crate::blame::Progress;
use crate::body::Body;

mod balance;
mod breaker;
mod cluster_limit;
mod endpoint;
mod failover;
mod per_try_timeout;

pub(crate) use balance::{Balance, BalanceLayer};
pub(crate) use breaker::{Breaker, BreakerLayer};
pub(crate) use cluster_limit::{ClusterLimit, ClusterLimitLayer};
pub(crate) use endpoint::Endpoint;
pub(crate) use failover::Failover;
pub(crate) use per_try_timeout::{PerTryTimeout, PerTryTimeoutLayer};

/// One call of an attempt on its way through the layers.
pub(crate) struct Call<'b> {
    /// The request, with its origin-form URI.
    pub(crate) request: Request<Body>,
    /// When the attempt is abandoned (per-try timeout, overall deadline).
    pub(crate) deadline: Option<tokio::time::Instant>,
    /// How far the client got with a streamed body, to blame it.
    pub(crate) streamed: Option<&'b Progress>,
    /// The endpoint the balancer picked.
    pub(crate) endpoint: Option<http::uri::Authority>,
}

/// What a call came to: its result, and whether it is the upstream's to
/// be judged by the breaker, the limits and outlier detection.
pub(crate) struct Verdict {
    /// The attempt's result.
    pub(crate) result: Attempt,
    /// The upstream's answer (or failure), to feed the policies.
    pub(crate) judged: bool,
}

impl Verdict {
    /// A result every layer above judges.
    pub(crate) fn judged(result: Attempt) -> Verdict {
        Verdict {
            result,
            judged: true,
        }
    }

    /// A result no layer above judges: a refusal, or not the upstream's.
    pub(crate) fn unjudged(result: Attempt) -> Verdict {
        Verdict {
            result,
            judged: false,
        }
    }

    /// Whether the call failed, as the breaker, the limit and ejection
    /// count it: a server error, or no response.
    pub(crate) fn failed(&self) -> bool {
        match &self.result {
            Ok(r) => r.status().is_server_error(),
            Err(_) => true,
        }
    }
}

/// One cluster's stack, breaker to endpoint.
pub(crate) type Stack<'a> = Breaker<'a, ClusterLimit<'a, Balance<'a, PerTryTimeout<Endpoint<'a>>>>>;

/// `cluster`'s stack, built for one call.
pub(crate) fn stack(cluster: &Cluster) -> Stack<'_> {
    ServiceBuilder::new()
        .layer(BreakerLayer(cluster))
        .layer(ClusterLimitLayer(cluster))
        .layer(BalanceLayer(cluster))
        .layer(PerTryTimeoutLayer)
        .service(Endpoint(&cluster.upstream))
}

/// Sends `call` through `cluster`'s stack.
pub(crate) async fn call(cluster: &Cluster, call: Call<'_>) -> Attempt {
    match ready_call(stack(cluster), call).await {
        Ok(v) => v.result,
        Err(never) => match never {},
    }
}

/// Calls `service`, which is always ready: no layer of the stack applies
/// backpressure through `poll_ready` (the cluster limit waits inside its
/// future instead), so tower's contract is kept by one poll with a no-op
/// waker, without `Oneshot`'s state carried through the call.
pub(crate) fn ready_call<'b, S>(mut service: S, call: Call<'b>) -> S::Future
where
    S: tower::Service<Call<'b>, Response = Verdict, Error = Infallible>,
{
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let ready = service.poll_ready(&mut cx);
    debug_assert!(ready.is_ready(), "every upstream layer is always ready");
    service.call(call)
}

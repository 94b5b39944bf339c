//! Sending one attempt to one endpoint over a pooled, kept-alive connection.

use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Uri, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::Body;
use crate::config::{ClusterConfig, Protocol};
use crate::connector::Connector;

/// Why an attempt produced no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttemptError {
    /// No connection could be opened (refused, unreachable, connect timeout).
    Connect,
    /// The connection or stream failed before a response head arrived.
    Reset,
    /// The attempt's deadline passed first.
    Timeout,
    /// Every endpoint of the cluster is ejected or unhealthy, or the
    /// cluster's concurrency limit is reached.
    NoEndpoint,
    /// The cluster's circuit breaker is open; probes resume after this long.
    CircuitOpen(Option<stormbreak_policy::Nanos>),
    /// The client failed its own request (its body broke, grew too large
    /// or was too slow): nothing the upstream did, so no layer above the
    /// endpoint counts it against the upstream.
    Client(crate::blame::ClientFault),
}

/// The connection pool of one cluster.
#[derive(Clone)]
pub(crate) struct Upstream {
    client: Client<Connector, Body>,
    version: Version,
}

impl Upstream {
    pub(crate) fn new(config: &ClusterConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from(config.connect_timeout)));
        connector.set_nodelay(true);
        let h2 = config.protocol == Protocol::H2c;
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from(config.pool_idle_timeout))
            .pool_max_idle_per_host(config.pool_max_idle_per_endpoint as usize)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .http2_only(h2)
            .build(Connector::new(
                connector,
                config
                    .tls
                    .as_ref()
                    // Checked when the config was parsed.
                    .and_then(|t| crate::connector::client_config(t, config.protocol).ok()),
            ));
        Upstream {
            client,
            version: if h2 {
                Version::HTTP_2
            } else {
                Version::HTTP_11
            },
        }
    }

    /// Sends `request` (origin-form URI) to `addr`: the response's
    /// future, or at once the error of a URI that cannot be built.
    pub(crate) fn send(
        &self,
        addr: SocketAddr,
        request: Request<Body>,
    ) -> Result<ResponseFuture, AttemptError> {
        self.send_to(authority_of(addr), request)
    }

    /// [`Upstream::send`] to an endpoint whose authority is already made
    /// (the request path's: the URI then costs no allocation).
    pub(crate) fn send_to(
        &self,
        authority: http::uri::Authority,
        mut request: Request<Body>,
    ) -> Result<ResponseFuture, AttemptError> {
        // Only the configured endpoint is ever dialled: the client's URI
        // contributes its path and nothing else (a shared copy of it).
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(http::uri::Scheme::HTTP);
        parts.authority = Some(authority);
        parts.path_and_query = Some(
            request
                .uri()
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
        );
        let uri = Uri::from_parts(parts).map_err(|_| AttemptError::Connect)?;
        *request.uri_mut() = uri;
        *request.version_mut() = self.version;
        Ok(self.client.request(request))
    }
}

/// `addr` as a URI authority (`127.0.0.1:8080`, `[::1]:8080`).
pub(crate) fn authority_of(addr: SocketAddr) -> http::uri::Authority {
    http::uri::Authority::try_from(addr.to_string()).expect("a socket address is an authority")
}

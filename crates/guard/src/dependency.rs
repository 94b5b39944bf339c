//! A route's dependency call (`route.dependency`): the request each
//! request's check sends, and how its answer is read. The call itself goes
//! through the dependency cluster's policies like any attempt
//! (`Proxy::call`), inside the route's retry loop (`attempts::run_checked`).

use std::time::Duration;

use http::uri::PathAndQuery;
use http::{HeaderName, HeaderValue, Method, Request, header};

use crate::attempts::AttemptOf;
use crate::body::{self, Body};
use crate::config::DependencyConfig;
use crate::endpoint::AttemptError;
use crate::metrics::DependencyOutcome;

/// Largest dependency answer body read (and thrown away) so its
/// connection can be reused; a larger one is dropped with its connection.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A route's dependency, built from its validated config.
pub(crate) struct Dependency {
    /// Index of the dependency cluster.
    pub(crate) cluster: usize,
    method: Method,
    path: PathAndQuery,
    /// Time allowed for one call.
    pub(crate) timeout: Duration,
    pass: Vec<HeaderName>,
}

impl Dependency {
    /// The dependency of `config`, calling cluster `cluster`.
    pub(crate) fn new(config: &DependencyConfig, cluster: usize) -> Self {
        Dependency {
            cluster,
            // Checked when the config was parsed.
            method: Method::from_bytes(config.method.as_bytes()).unwrap_or(Method::GET),
            path: config
                .path
                .parse()
                .unwrap_or_else(|_| PathAndQuery::from_static("/")),
            timeout: config.timeout.into(),
            pass: config
                .pass_headers
                .iter()
                .filter_map(|h| HeaderName::from_bytes(h.as_bytes()).ok())
                .collect(),
        }
    }

    /// The call made for a request with head `request` (as it will be
    /// forwarded: hop-by-hop headers gone, the criticality header set to
    /// its class): the configured method and path, no body, and of the
    /// request's headers only `pass_headers` and `criticality` (the class
    /// is inherited, as a simulated dependency call inherits it).
    pub(crate) fn request(
        &self,
        request: &http::request::Parts,
        criticality: &HeaderName,
    ) -> Request<Body> {
        let mut call = Request::new(body::empty());
        *call.method_mut() = self.method.clone();
        *call.uri_mut() = http::Uri::from(self.path.clone());
        let headers = call.headers_mut();
        for name in self.pass.iter().chain(std::iter::once(criticality)) {
            for value in request.headers.get_all(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        // An empty body, said so (a GET needs none; a POST check does).
        if self.method != Method::GET && self.method != Method::HEAD {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        }
        call
    }
}

/// How a call ended, for `dependency_calls_total{outcome}`.
pub(crate) fn outcome_of<B>(result: &AttemptOf<B>) -> DependencyOutcome {
    match result {
        Ok(r) if r.status().is_success() => DependencyOutcome::Ok,
        Ok(_) => DependencyOutcome::Status,
        Err(AttemptError::Timeout) => DependencyOutcome::Timeout,
        Err(AttemptError::Connect) => DependencyOutcome::Connect,
        // A call has no client body to fail: only the connection can.
        Err(AttemptError::Reset | AttemptError::Client(_)) => DependencyOutcome::Reset,
        Err(AttemptError::CircuitOpen(_)) => DependencyOutcome::BreakerOpen,
        Err(AttemptError::NoEndpoint) => DependencyOutcome::NoEndpoint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dependency(extra: &str) -> Dependency {
        let config: DependencyConfig = toml::from_str(&format!(
            "cluster = \"auth\"\npath = \"/check?x=1\"\ntimeout = \"1s\"\n{extra}"
        ))
        .unwrap();
        Dependency::new(&config, 3)
    }

    fn head(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut r = Request::post("/upload/file").body(()).unwrap();
        for (k, v) in headers {
            r.headers_mut().append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        r.into_parts().0
    }

    #[test]
    fn the_call_carries_only_the_passed_headers_and_the_class() {
        let d = dependency("");
        let class = HeaderName::from_static("x-stormbreak-criticality");
        let parts = head(&[
            ("authorization", "Bearer t"),
            ("cookie", "s=1"),
            ("x-stormbreak-criticality", "sheddable"),
            ("content-length", "12"),
        ]);
        let call = d.request(&parts, &class);
        assert_eq!(call.method(), Method::GET);
        assert_eq!(call.uri(), "/check?x=1");
        assert_eq!(call.headers()["authorization"], "Bearer t");
        assert_eq!(call.headers()["x-stormbreak-criticality"], "sheddable");
        assert!(call.headers().get("cookie").is_none());
        assert!(
            call.headers().get("content-length").is_none(),
            "the request's body is not the call's"
        );
        let post = dependency("method = \"POST\"\npass_headers = [\"cookie\"]");
        let call = post.request(&parts, &class);
        assert_eq!(call.method(), Method::POST);
        assert_eq!(call.headers()["cookie"], "s=1");
        assert_eq!(call.headers()["content-length"], "0");
        assert!(call.headers().get("authorization").is_none());
    }
}

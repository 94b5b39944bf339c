//! Route matching: host, path prefix, method and headers; the most specific
//! matching route wins, ties by order in the file.
//!
//! Specificity compares, in order: an exact host beats any host; a longer
//! path prefix beats a shorter one; a method list beats none; more header
//! matchers beat fewer. Routes equal on all four are taken in file order.

use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::config::MatchConfig;

/// A compiled `route.match`.
#[derive(Clone, Debug)]
pub(crate) struct Matcher {
    host: Option<String>,
    prefix: String,
    methods: Vec<Method>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// Sort key of a matcher: larger is more specific.
pub(crate) type Specificity = (bool, usize, bool, usize);

impl Matcher {
    /// Compiles a validated match block.
    pub(crate) fn new(m: &MatchConfig) -> Matcher {
        Matcher {
            host: m.host.as_ref().map(|h| h.to_ascii_lowercase()),
            prefix: m.path_prefix.clone().unwrap_or_else(|| "/".to_owned()),
            methods: m
                .methods
                .iter()
                .filter_map(|s| Method::from_bytes(s.as_bytes()).ok())
                .collect(),
            headers: m
                .headers
                .iter()
                .filter_map(|(k, v)| {
                    Some((
                        HeaderName::from_bytes(k.as_bytes()).ok()?,
                        HeaderValue::from_str(v).ok()?,
                    ))
                })
                .collect(),
        }
    }

    pub(crate) fn specificity(&self) -> Specificity {
        (
            self.host.is_some(),
            self.prefix.len(),
            !self.methods.is_empty(),
            self.headers.len(),
        )
    }

    /// Does a request with this host (port stripped, lowercase), path,
    /// method and headers match?
    pub(crate) fn matches(
        &self,
        host: Option<&str>,
        path: &str,
        method: &Method,
        headers: &HeaderMap,
    ) -> bool {
        if let Some(want) = &self.host
            && host != Some(want.as_str())
        {
            return false;
        }
        if !prefix_matches(&self.prefix, path) {
            return false;
        }
        if !self.methods.is_empty() && !self.methods.contains(method) {
            return false;
        }
        self.headers
            .iter()
            .all(|(name, value)| headers.get_all(name).iter().any(|v| v == value))
    }
}

/// `/api` matches `/api`, `/api/`, `/api/x` and `/api;v=1` (a path
/// parameter ends a segment, as in `/login;jsessionid=…`), not `/apix`;
/// `/` matches all.
fn prefix_matches(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['/', ';']),
        None => false,
    }
}

/// Index of the route that takes the request: the most specific match,
/// first in file order among equals. `order` lists route indices sorted by
/// descending specificity, stable in file order.
pub(crate) fn select(
    matchers: &[Matcher],
    order: &[usize],
    host: Option<&str>,
    path: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Option<usize> {
    order
        .iter()
        .copied()
        .find(|&i| matchers[i].matches(host, path, method, headers))
}

/// Route indices by descending specificity, file order among equals.
pub(crate) fn order(matchers: &[Matcher]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..matchers.len()).collect();
    // A stable sort keeps file order among equals.
    order.sort_by_key(|&i| std::cmp::Reverse(matchers[i].specificity()));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn m(
        host: Option<&str>,
        prefix: Option<&str>,
        methods: &[&str],
        headers: &[(&str, &str)],
    ) -> Matcher {
        Matcher::new(&MatchConfig {
            host: host.map(str::to_owned),
            path_prefix: prefix.map(str::to_owned),
            methods: methods.iter().map(|s| s.to_string()).collect(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        })
    }

    #[test]
    fn path_prefix_matches_whole_segments() {
        assert!(prefix_matches("/api", "/api"));
        assert!(prefix_matches("/api", "/api/v1"));
        assert!(!prefix_matches("/api", "/apix"));
        assert!(prefix_matches("/login", "/login;jsessionid=1"));
        assert!(prefix_matches("/", "/anything"));
        assert!(prefix_matches("/api/", "/api/x"));
        assert!(!prefix_matches("/api", "/"));
    }

    #[test]
    fn most_specific_wins_and_ties_go_by_file_order() {
        let routes = vec![
            m(None, None, &[], &[]),                          // 0: catch-all
            m(None, Some("/api"), &[], &[]),                  // 1
            m(None, Some("/api"), &["GET"], &[]),             // 2
            m(Some("a.example"), None, &[], &[]),             // 3: host beats any path
            m(None, Some("/api"), &["GET"], &[]),             // 4: same as 2, later
            m(None, Some("/api"), &["GET"], &[("x-v", "2")]), // 5
        ];
        let order = order(&routes);
        let none = HeaderMap::new();
        let mut v2 = HeaderMap::new();
        v2.insert("x-v", "2".parse().unwrap());
        let pick = |host, path, method: Method, h: &HeaderMap| {
            select(&routes, &order, host, path, &method, h)
        };
        assert_eq!(pick(None, "/other", Method::GET, &none), Some(0));
        assert_eq!(pick(None, "/api/x", Method::POST, &none), Some(1));
        assert_eq!(
            pick(None, "/api/x", Method::GET, &none),
            Some(2),
            "2 and 4 tie: file order"
        );
        assert_eq!(pick(None, "/api/x", Method::GET, &v2), Some(5));
        assert_eq!(pick(Some("a.example"), "/api/x", Method::GET, &v2), Some(3));
        assert_eq!(
            select(&routes[1..2], &[0], None, "/x", &Method::GET, &none),
            None
        );
    }
}

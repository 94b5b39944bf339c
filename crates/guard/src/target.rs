//! The request as routing rules see it: one authority and one normalised
//! path, and the refusal of any request that a backend could read as
//! another route.
//!
//! A rule must not be walked past by spelling its target another way
//! (`/public/../admin`, `//admin`, `/%61dmin`, `Host: internal.example.`),
//! so every route and shed rule matches the view [`Target::of`] builds
//! with [`crate::normalize`]. And because a backend may read a path in
//! its own way (dots before slashes, encoded slashes, `;` parameters) or
//! receive the raw bytes, [`Target::route`] refuses a request when any of
//! those readings would pick a different route than the normalised view.
//!
//! The authority follows RFC 9112 §3.2 and RFC 9113 §8.3.1: an HTTP/1.1
//! request without a `Host`, any request with several, or a `Host` that
//! names another host than the absolute-form target or `:authority`, is
//! refused with 400.

use std::borrow::Cow;

use http::{HeaderMap, Method, Uri, Version, header};

use crate::normalize::{self, Malformed};
use crate::route::{self, Matcher};

/// Why a request's target is refused (400): it is malformed, or it has
/// no single reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The path or a host does not parse as one.
    Malformed(Malformed),
    /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2).
    NoHost,
    /// More than one `Host` field line (RFC 9112 §3.2).
    SeveralHosts,
    /// `Host` names another host than the absolute-form target or
    /// `:authority` (RFC 9112 §3.2.2, RFC 9113 §8.3.1).
    HostDisagrees,
    /// A backend could read the path as another route than the rules do.
    Ambiguous,
}

impl Refused {
    /// The one-line answer.
    pub(crate) fn message(self) -> Cow<'static, str> {
        match self {
            Refused::Malformed(m) => Cow::Owned(m.to_string()),
            Refused::NoHost => "an HTTP/1.1 request needs a Host header".into(),
            Refused::SeveralHosts => "more than one Host header".into(),
            Refused::HostDisagrees => "Host disagrees with the request target".into(),
            Refused::Ambiguous => {
                "the path reads as another route once normalised or decoded".into()
            }
        }
    }
}

impl From<Malformed> for Refused {
    fn from(m: Malformed) -> Self {
        Refused::Malformed(m)
    }
}

/// The normalised host and path of one request.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    /// Lower case, no port, no trailing dot; `None` for a request that
    /// names no host (HTTP/1.0 without `Host`).
    pub(crate) host: Option<Cow<'a, str>>,
    /// RFC 3986 §6.2.2-normal, slashes merged.
    pub(crate) path: Cow<'a, str>,
    /// The path as received.
    raw_path: &'a str,
}

impl<'a> Target<'a> {
    /// The view of a request with this URI, headers and version; `Err`
    /// when it has no single host or its path is malformed.
    pub(crate) fn of(
        uri: &'a Uri,
        headers: &'a HeaderMap,
        version: Version,
    ) -> Result<Target<'a>, Refused> {
        let mut hosts = headers.get_all(header::HOST).iter();
        let field = hosts.next();
        if hosts.next().is_some() {
            return Err(Refused::SeveralHosts);
        }
        let field = match field {
            Some(v) => {
                let text = v
                    .to_str()
                    .map_err(|_| Refused::Malformed(Malformed::HostCharacter))?;
                Some(normalize::host(text)?)
            }
            None => None,
        };
        let authority = match uri.authority() {
            Some(a) => Some(normalize::host(a.as_str())?),
            None => None,
        };
        let host = match (authority, field) {
            (Some(a), Some(f)) if a != f => return Err(Refused::HostDisagrees),
            (Some(_), None) | (None, None) if version == Version::HTTP_11 => {
                return Err(Refused::NoHost);
            }
            (Some(a), _) => Some(a),
            (None, f) => f,
        };
        let raw_path = uri.path();
        Ok(Target {
            host,
            path: normalize::path(raw_path)?,
            raw_path,
        })
    }

    /// The route the rules give this request (see [`route::select`]),
    /// refused as [`Refused::Ambiguous`] when a backend's reading of the
    /// path, or the raw path when `raw_forwarded`, would route elsewhere.
    pub(crate) fn route(
        &self,
        matchers: &[Matcher],
        order: &[usize],
        method: &Method,
        headers: &HeaderMap,
        raw_forwarded: bool,
    ) -> Result<Option<usize>, Refused> {
        let host = self.host.as_deref();
        let pick = |path: &str| route::select(matchers, order, host, path, method, headers);
        let chosen = pick(&self.path);
        let raw = (raw_forwarded && self.raw_path != self.path).then_some(self.raw_path);
        // The readings of what the backend may get: the raw path's, and
        // the normalised one's (which can differ: `/admin;/.;/..` is
        // `/admin;/`, which a Servlet container reads as `/admin/`).
        // Each is empty, without allocating, for a path with nothing to
        // read twice.
        let readings = normalize::readings(self.raw_path);
        let forwarded = if self.rewritten() {
            normalize::readings(&self.path)
        } else {
            Vec::new()
        };
        let others = raw
            .into_iter()
            .chain(readings.iter().map(String::as_str))
            .chain(forwarded.iter().map(String::as_str));
        for other in others {
            if pick(other) != chosen {
                return Err(Refused::Ambiguous);
            }
        }
        Ok(chosen)
    }

    /// The path differs from the one received.
    pub(crate) fn rewritten(&self) -> bool {
        matches!(self.path, Cow::Owned(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MatchConfig;

    fn req(uri: &str, hosts: &[&str], version: Version) -> (Uri, HeaderMap, Version) {
        let mut h = HeaderMap::new();
        for v in hosts {
            h.append(header::HOST, v.parse().unwrap());
        }
        (uri.parse().unwrap(), h, version)
    }

    fn target(r: &(Uri, HeaderMap, Version)) -> Result<Target<'_>, Refused> {
        Target::of(&r.0, &r.1, r.2)
    }

    #[test]
    fn one_host_per_request_as_rfc_9112_section_3_2_asks() {
        let ok = req("/x", &["Internal.Example.:8080"], Version::HTTP_11);
        assert_eq!(
            target(&ok).unwrap().host.as_deref(),
            Some("internal.example")
        );
        let none = req("/x", &[], Version::HTTP_11);
        assert_eq!(target(&none).unwrap_err(), Refused::NoHost);
        let old = req("/x", &[], Version::HTTP_10);
        assert_eq!(target(&old).unwrap().host, None);
        let two = req("/x", &["a.example", "a.example"], Version::HTTP_11);
        assert_eq!(target(&two).unwrap_err(), Refused::SeveralHosts);
        let absolute = req("http://a.example/x", &["A.example:80"], Version::HTTP_11);
        assert_eq!(
            target(&absolute).unwrap().host.as_deref(),
            Some("a.example")
        );
        let other = req("http://a.example/x", &["b.example"], Version::HTTP_11);
        assert_eq!(target(&other).unwrap_err(), Refused::HostDisagrees);
        let bare = req("http://a.example/x", &[], Version::HTTP_11);
        assert_eq!(target(&bare).unwrap_err(), Refused::NoHost);
        // HTTP/2: `:authority` alone is enough.
        let h2 = req("http://a.example/x", &[], Version::HTTP_2);
        assert_eq!(target(&h2).unwrap().host.as_deref(), Some("a.example"));
        let user = req("/x", &["u@a.example"], Version::HTTP_11);
        assert!(matches!(target(&user), Err(Refused::Malformed(_))));
    }

    fn matchers(prefixes: &[&str]) -> (Vec<Matcher>, Vec<usize>) {
        let m: Vec<Matcher> = prefixes
            .iter()
            .map(|p| {
                Matcher::new(&MatchConfig {
                    path_prefix: Some((*p).to_owned()),
                    ..MatchConfig::default()
                })
            })
            .collect();
        let order = route::order(&m);
        (m, order)
    }

    fn routed(path: &str, raw_forwarded: bool) -> Result<Option<usize>, Refused> {
        let (m, order) = matchers(&["/", "/admin", "/public"]);
        let r = req(path, &["a.example"], Version::HTTP_11);
        let t = target(&r)?;
        t.route(&m, &order, &Method::GET, &r.1, raw_forwarded)
    }

    #[test]
    fn every_spelling_of_the_admin_path_routes_to_admin_or_is_refused() {
        for path in [
            "/public/../admin/x",
            "//admin/x",
            "/%61dmin/x",
            "/%2e%2e/admin/x",
            "/./admin/x",
            "/public/..;/admin/x",
            "/public%2F..%2Fadmin/x",
            "/public\\..\\admin/x",
        ] {
            for raw in [false, true] {
                let got = routed(path, raw);
                assert!(
                    matches!(got, Ok(Some(1)) | Err(Refused::Ambiguous)),
                    "{path} (raw {raw}): {got:?}"
                );
            }
        }
        assert_eq!(routed("/admin/x", true), Ok(Some(1)));
        assert_eq!(routed("/public/x", true), Ok(Some(2)));
        // The normalised path sent upstream has readings of its own.
        for path in ["/admin;/.;/..", "/%2Fadmin/%2F../.."] {
            for raw in [false, true] {
                let got = routed(path, raw);
                assert!(
                    matches!(got, Ok(Some(1)) | Err(Refused::Ambiguous)),
                    "{path} (raw {raw}): {got:?}"
                );
            }
        }
        // Forwarding the normalised path, only other readings can disagree.
        assert_eq!(routed("/public/../admin/x", false), Ok(Some(1)));
        assert_eq!(routed("/public/../admin/x", true), Err(Refused::Ambiguous));
        // A harmless oddity that routes the same either way passes.
        assert_eq!(routed("/public//x", true), Ok(Some(2)));
    }

    use crate::normalize::tests::{Dice, canonical_host, canonical_segments, spell, spell_host};
    use proptest::prelude::*;

    /// Routes: a catch-all, `/admin` (the guarded one), decoys, and a
    /// host route; the guarded ones are 1 and 4.
    fn guarded() -> (Vec<Matcher>, Vec<usize>) {
        let mut m: Vec<Matcher> = ["/", "/admin", "/public", "/a"]
            .iter()
            .map(|p| {
                Matcher::new(&MatchConfig {
                    path_prefix: Some((*p).to_owned()),
                    ..MatchConfig::default()
                })
            })
            .collect();
        m.push(Matcher::new(&MatchConfig {
            host: Some("internal.example".to_owned()),
            ..MatchConfig::default()
        }));
        let order = route::order(&m);
        (m, order)
    }

    proptest! {
        /// A request the rules send to a guarded route is sent there, or
        /// refused, under every equivalent spelling of its path and host
        /// (equivalent as `normalize` defines it), whichever path is
        /// forwarded.
        #[test]
        fn every_equivalent_spelling_is_routed_alike_or_refused(
            segments in canonical_segments(),
            host in canonical_host(),
            seed in any::<u64>(),
            raw_forwarded in any::<bool>(),
        ) {
            let (m, order) = guarded();
            let mut dice = Dice(seed);
            let mut admin = vec!["admin".to_owned()];
            admin.extend(segments);
            for (segments, host, want) in [
                (admin, "a.example".to_owned(), 1),
                (vec![String::new()], "internal.example".to_owned(), 4),
                (vec![String::new()], host.clone(), 0),
            ] {
                let path = spell(&segments, &mut dice);
                let host = spell_host(&host, &mut dice);
                // A spelling `http::Uri` cannot hold never reaches the rules
                // (hyper answers 400 itself).
                let Ok(uri) = path.parse::<Uri>() else { continue };
                let mut headers = HeaderMap::new();
                let Ok(value) = host.parse() else { continue };
                headers.insert(header::HOST, value);
                let routed = Target::of(&uri, &headers, Version::HTTP_11)
                    .and_then(|t| t.route(&m, &order, &Method::GET, &headers, raw_forwarded));
                if let (Ok(Some(_)), Ok(t)) = (&routed, Target::of(&uri, &headers, Version::HTTP_11)) {
                    // Whatever goes upstream reads, every way, as the same route.
                    let sent: &str = if raw_forwarded { &path } else { &t.path };
                    let host = t.host.as_deref();
                    for other in normalize::readings(sent) {
                        let again = route::select(&m, &order, host, &other, &Method::GET, &headers);
                        prop_assert_eq!(again, routed.unwrap(), "{} reads as {}", sent, other);
                    }
                }
                match routed {
                    Ok(Some(got)) => prop_assert_eq!(got, want, "{} {}", path, host),
                    Err(_) => {}
                    Ok(None) => prop_assert!(false, "{} {}: no route", path, host),
                }
            }
        }
    }
}

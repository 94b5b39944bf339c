//! Header hygiene: hop-by-hop removal, `X-Forwarded-For` / `Forwarded`,
//! and which client address to believe.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::config::Cidr;

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// plus `proxy-connection` and `keep-alive`, which old clients still send.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop headers, including every header `Connection` names.
/// `Upgrade` goes too: the guard does not tunnel upgrades.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .take(64)
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

/// Whether `ip` is one of the trusted proxies.
pub(crate) fn is_trusted(trusted: &[Cidr], ip: IpAddr) -> bool {
    trusted.iter().any(|c| c.contains(ip))
}

/// The client's address: the peer, unless the peer is a trusted proxy, in
/// which case the right-most `X-Forwarded-For` entry that is not itself a
/// trusted proxy (entries to the left of it could be forged by the client).
pub(crate) fn client_ip(trusted: &[Cidr], peer: IpAddr, headers: &HeaderMap) -> IpAddr {
    if !is_trusted(trusted, peer) {
        return peer;
    }
    let mut client = peer;
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .take(64)
        .collect();
    for entry in entries.iter().rev() {
        match entry.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = ip;
                if !is_trusted(trusted, ip) {
                    break;
                }
            }
            // A garbled entry ends the chain we can believe.
            Err(_) => break,
        }
    }
    client
}

/// Appends the peer to `X-Forwarded-For` and a `for=` element to `Forwarded`
/// (RFC 7239). From an untrusted peer, what it sent is dropped first, so a
/// client cannot plant addresses for the upstream to believe.
pub(crate) fn append_forwarded(
    headers: &mut HeaderMap,
    peer: SocketAddr,
    trusted_peer: bool,
    proto: &str,
) {
    let xff = HeaderName::from_static("x-forwarded-for");
    let prior_xff = if trusted_peer {
        joined(headers, &xff)
    } else {
        None
    };
    let prior_fwd = if trusted_peer {
        joined(headers, &header::FORWARDED)
    } else {
        None
    };
    headers.remove(&xff);
    headers.remove(header::FORWARDED);
    let ip = peer.ip().to_canonical();
    // Each value is written on the stack and copied once into its header
    // (an exact-size copy: one allocation a header, none for the pieces);
    // a long chain of prior proxies goes through a `String` instead.
    let mut xff_value = Written::new();
    if let Some(prior) = &prior_xff {
        let _ = write!(xff_value, "{prior}, ");
    }
    let _ = write!(xff_value, "{ip}");
    let mut fwd_value = Written::new();
    if let Some(prior) = &prior_fwd {
        let _ = write!(fwd_value, "{prior}, ");
    }
    let _ = match ip {
        IpAddr::V4(v4) => write!(fwd_value, "for={v4};proto={proto}"),
        IpAddr::V6(v6) => write!(fwd_value, "for=\"[{v6}]\";proto={proto}"),
    };
    if let Ok(v) = HeaderValue::from_bytes(xff_value.as_bytes()) {
        headers.insert(xff, v);
    }
    if let Ok(v) = HeaderValue::from_bytes(fwd_value.as_bytes()) {
        headers.insert(header::FORWARDED, v);
    }
}

/// Text written into a stack buffer, spilling into a `String` when it
/// outgrows it.
struct Written {
    buf: [u8; 128],
    len: usize,
    spilled: Option<String>,
}

impl Written {
    fn new() -> Self {
        Written {
            buf: [0; 128],
            len: 0,
            spilled: None,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match &self.spilled {
            Some(s) => s.as_bytes(),
            None => &self.buf[..self.len],
        }
    }
}

impl std::fmt::Write for Written {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if let Some(spilled) = &mut self.spilled {
            spilled.push_str(s);
        } else if self.len + s.len() <= self.buf.len() {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            let mut spilled = String::with_capacity(self.len + s.len() + 64);
            // Only whole `str`s were copied in, so the prefix is UTF-8.
            spilled
                .push_str(std::str::from_utf8(&self.buf[..self.len]).map_err(|_| std::fmt::Error)?);
            spilled.push_str(s);
            self.spilled = Some(spilled);
        }
        Ok(())
    }
}

fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let parts: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_go() {
        let mut h = map(&[
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-kept", "yes"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h["x-kept"], "yes");
    }

    #[test]
    fn forwarded_headers_are_appended_from_trusted_and_replaced_from_untrusted() {
        let peer: SocketAddr = "10.0.0.5:4000".parse().unwrap();
        let mut h = map(&[("x-forwarded-for", "1.2.3.4"), ("forwarded", "for=1.2.3.4")]);
        append_forwarded(&mut h, peer, true, "http");
        assert_eq!(h["x-forwarded-for"], "1.2.3.4, 10.0.0.5");
        assert_eq!(h["forwarded"], "for=1.2.3.4, for=10.0.0.5;proto=http");
        let mut h = map(&[("x-forwarded-for", "6.6.6.6")]);
        append_forwarded(&mut h, "[::1]:80".parse().unwrap(), false, "http");
        assert_eq!(h["x-forwarded-for"], "::1");
        assert_eq!(h["forwarded"], "for=\"[::1]\";proto=http");
    }

    #[test]
    fn a_long_chain_of_proxies_spills_off_the_stack_intact() {
        let prior: Vec<String> = (0..40).map(|i| format!("10.0.{i}.1")).collect();
        let prior = prior.join(", ");
        let mut h = map(&[("x-forwarded-for", &prior)]);
        append_forwarded(&mut h, "192.168.1.1:1".parse().unwrap(), true, "https");
        assert!(prior.len() > 128);
        assert_eq!(
            h["x-forwarded-for"],
            format!("{prior}, 192.168.1.1").as_str()
        );
        assert_eq!(h["forwarded"], "for=192.168.1.1;proto=https");
    }

    #[test]
    fn client_ip_believes_xff_only_through_trusted_hops() {
        let trusted = [Cidr::parse("10.0.0.0/8").unwrap()];
        let h = map(&[("x-forwarded-for", "6.6.6.6, 1.2.3.4, 10.0.0.9")]);
        let untrusted_peer: IpAddr = "8.8.8.8".parse().unwrap();
        assert_eq!(client_ip(&trusted, untrusted_peer, &h), untrusted_peer);
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            client_ip(&trusted, proxy, &h),
            "1.2.3.4".parse::<IpAddr>().unwrap(),
            "6.6.6.6 could be forged"
        );
        let garbled = map(&[("x-forwarded-for", "1.2.3.4, nonsense")]);
        assert_eq!(client_ip(&trusted, proxy, &garbled), proxy);
    }
}

//! Connections per client address: the count behind a per-client cap, so
//! one peer cannot take every slot of a listener (or of the admin API).
//!
//! Invariant: an address has an entry only while it holds at least one
//! connection, so the table never has more entries than the listener has
//! open connections (bounded by its `max_connections`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::net::Ipv6Addr;
use std::sync::{Arc, Mutex, PoisonError};

/// The client an address stands for: an IPv4 address (or an IPv4-mapped
/// IPv6 one) itself, an IPv6 address its /64, since one host is commonly
/// given a whole /64 (RFC 6177 §2) and could otherwise dodge a
/// per-client cap by changing its interface identifier.
pub(crate) fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !(u128::from(u64::MAX));
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

/// Open connections by client ([`client_of`]).
#[derive(Debug, Default)]
pub(crate) struct Peers {
    open: Mutex<HashMap<IpAddr, u32>>,
}

impl Peers {
    /// An empty table.
    pub(crate) fn new() -> Arc<Peers> {
        Arc::new(Peers::default())
    }

    /// Counts one more connection from `ip`, unless it already holds
    /// `cap` (0: no cap); the count drops with the returned guard.
    #[must_use = "the connection is counted while the guard lives"]
    pub(crate) fn enter(self: &Arc<Self>, ip: IpAddr, cap: u32) -> Option<PeerSlot> {
        let ip = client_of(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        // `*n` is at least 1 here (cap ≥ 1), so no empty entry stays.
        if cap != 0 && *n >= cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }

    /// Connections `ip` holds now.
    #[cfg(test)]
    pub(crate) fn holding(&self, ip: IpAddr) -> u32 {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&client_of(ip)).copied().unwrap_or(0)
    }

    /// Addresses holding a connection now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One connection counted against its peer address, until dropped.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl PeerSlot {
    /// The peer's address.
    #[cfg(test)]
    pub(crate) fn ip(&self) -> IpAddr {
        self.ip
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self
            .peers
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_cap_and_entries_leave_with_their_last_connection() {
        let peers = Peers::new();
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "::ffff:127.0.0.3".parse().unwrap();
        let held: Vec<PeerSlot> = (0..3).map(|_| peers.enter(a, 3).unwrap()).collect();
        assert!(peers.enter(a, 3).is_none(), "a fourth is over the cap");
        // Another peer is not affected, and a v4-mapped address is its v4 self.
        let other = peers.enter(b, 3).unwrap();
        assert_eq!(other.ip(), "127.0.0.3".parse::<IpAddr>().unwrap());
        assert_eq!(peers.holding("127.0.0.3".parse().unwrap()), 1);
        assert_eq!(peers.len(), 2);
        drop(held);
        assert_eq!(peers.holding(a), 0);
        assert_eq!(peers.len(), 1, "an address with no connection has no entry");
        drop(other);
        assert_eq!(peers.len(), 0);
        // One IPv6 /64 is one client.
        let v6a: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8:0:1:ffff::2".parse().unwrap();
        let v6c: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        let first = peers.enter(v6a, 1).unwrap();
        assert!(peers.enter(v6b, 1).is_none(), "same /64");
        let other64 = peers.enter(v6c, 1).unwrap();
        drop((first, other64));
        // No cap: any number.
        let many: Vec<PeerSlot> = (0..100).map(|_| peers.enter(a, 0).unwrap()).collect();
        assert_eq!(peers.holding(a), 100);
        drop(many);
        assert_eq!(peers.len(), 0);
    }
}

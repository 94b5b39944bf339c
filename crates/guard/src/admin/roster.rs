//! The admin listener's open connections, so that unauthenticated ones
//! can never starve an operator: at the connection cap, or at a peer's
//! share of it, a new connection evicts the oldest one that is idle and
//! has never shown the token, and is refused only when none is.
//!
//! Invariant: at most `capacity` entries, one per open admin
//! connection; an entry leaves with its connection.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::conn_watch::Activity;

/// One admin connection, as the roster and its own task share it.
#[derive(Debug)]
pub(crate) struct Member {
    id: u64,
    ip: IpAddr,
    /// Requests in flight, and the connection's deadlines.
    pub(crate) activity: Arc<Activity>,
    /// A request on it carried the right token: never evicted.
    pub(crate) trusted: AtomicBool,
    /// Notified when the roster evicts it.
    pub(crate) evicted: Notify,
}

impl Member {
    /// Evictable: idle, and has never shown the token.
    fn evictable(&self) -> bool {
        !self.trusted.load(Ordering::Acquire) && self.activity.pending() == 0
    }
}

/// Why a new connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its peer holds its share and none of those connections is evictable.
    Peer,
    /// The cap is reached and no connection is evictable.
    Cap,
}

/// The open admin connections, oldest first.
#[derive(Debug)]
pub(crate) struct Roster {
    capacity: usize,
    per_peer: usize,
    members: Mutex<(u64, Vec<Arc<Member>>)>,
}

impl Roster {
    /// At most `capacity` connections, `per_peer` of them from one address.
    pub(crate) fn new(capacity: usize, per_peer: usize) -> Arc<Roster> {
        Arc::new(Roster {
            capacity,
            per_peer,
            members: Mutex::new((0, Vec::with_capacity(capacity))),
        })
    }

    /// Most connections held at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Admits a connection from `ip`, evicting (notifying) the oldest
    /// evictable one of its peer when the peer is at its share, else the
    /// oldest evictable one overall when the roster is full. Returns the
    /// new member and how many were evicted.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<(Seat, usize), Refusal> {
        let ip = crate::peers::client_of(ip);
        let mut guard = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        let (next, members) = &mut *guard;
        let mut evicted = 0;
        let of_peer = members.iter().filter(|m| m.ip == ip).count();
        if of_peer >= self.per_peer {
            let i = members
                .iter()
                .position(|m| m.ip == ip && m.evictable())
                .ok_or(Refusal::Peer)?;
            members.remove(i).evicted.notify_one();
            evicted += 1;
        }
        if members.len() >= self.capacity {
            // From the client holding the most connections, its oldest
            // evictable one: many addresses opening connections fast take
            // room from each other before they take an operator's newest.
            let held = |ip: IpAddr| members.iter().filter(|m| m.ip == ip).count();
            let i = members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.evictable())
                .max_by_key(|(i, m)| (held(m.ip), std::cmp::Reverse(*i)))
                .map(|(i, _)| i)
                .ok_or(Refusal::Cap)?;
            members.remove(i).evicted.notify_one();
            evicted += 1;
        }
        *next += 1;
        let member = Arc::new(Member {
            id: *next,
            ip,
            activity: Activity::new(),
            trusted: AtomicBool::new(false),
            evicted: Notify::new(),
        });
        members.push(member.clone());
        Ok((
            Seat {
                roster: self.clone(),
                member,
            },
            evicted,
        ))
    }

    /// Connections held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .len()
    }
}

/// A connection's place in the roster, until dropped.
#[derive(Debug)]
pub(crate) struct Seat {
    roster: Arc<Roster>,
    /// The connection's shared state.
    pub(crate) member: Arc<Member>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut guard = self
            .roster
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let id = self.member.id;
        guard.1.retain(|m| m.id != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn at_the_cap_the_client_holding_most_loses_its_oldest_idle_connection() {
        let roster = Roster::new(4, 4);
        let (_a, _) = roster.admit(ip("127.0.0.2")).unwrap();
        let (b1, _) = roster.admit(ip("127.0.0.3")).unwrap();
        let (b2, _) = roster.admit(ip("127.0.0.3")).unwrap();
        let (_c, _) = roster.admit(ip("127.0.0.4")).unwrap();
        let (_d, evicted) = roster.admit(ip("127.0.0.5")).unwrap();
        assert_eq!(evicted, 1);
        // .3 held two: its oldest went, not .2's older one.
        let left: Vec<u64> = roster
            .members
            .lock()
            .unwrap()
            .1
            .iter()
            .map(|m| m.id)
            .collect();
        assert!(!left.contains(&b1.member.id) && left.contains(&b2.member.id));
    }

    #[tokio::test]
    async fn a_full_roster_evicts_the_oldest_idle_untrusted_connection() {
        let roster = Roster::new(3, 3);
        let (a, _) = roster.admit(ip("127.0.0.2")).unwrap();
        let (b, _) = roster.admit(ip("127.0.0.3")).unwrap();
        let (c, _) = roster.admit(ip("127.0.0.4")).unwrap();
        // `a` showed the token, `b` has a request in flight: `c` goes.
        a.member.trusted.store(true, Ordering::Release);
        let busy = b.member.activity.begin();
        let (d, evicted) = roster.admit(ip("127.0.0.5")).unwrap();
        assert_eq!(evicted, 1);
        assert!(
            tokio::time::timeout(
                std::time::Duration::from_secs(1),
                c.member.evicted.notified()
            )
            .await
            .is_ok(),
            "c was told"
        );
        drop(c);
        assert_eq!(roster.len(), 3);
        // Now `a` is trusted, `b` busy, `d` idle and untrusted: `d` goes.
        let (e, evicted) = roster.admit(ip("127.0.0.6")).unwrap();
        assert_eq!(evicted, 1);
        drop(d);
        // Trusted or busy, all of them: the newcomer is refused.
        e.member.trusted.store(true, Ordering::Release);
        assert_eq!(roster.admit(ip("127.0.0.7")).unwrap_err(), Refusal::Cap);
        // The request ends: `b` is evictable again.
        drop(busy);
        assert!(roster.admit(ip("127.0.0.7")).is_ok());
    }

    #[test]
    fn a_peer_at_its_share_evicts_its_own_oldest_or_is_refused() {
        let roster = Roster::new(8, 2);
        let (a1, _) = roster.admit(ip("127.0.0.2")).unwrap();
        let (a2, _) = roster.admit(ip("127.0.0.2")).unwrap();
        let (b1, _) = roster.admit(ip("127.0.0.3")).unwrap();
        // A third from .2 evicts .2's oldest, never .3's.
        let (a3, evicted) = roster.admit(ip("127.0.0.2")).unwrap();
        assert_eq!(evicted, 1);
        drop(a1);
        a2.member.trusted.store(true, Ordering::Release);
        a3.member.trusted.store(true, Ordering::Release);
        assert_eq!(roster.admit(ip("127.0.0.2")).unwrap_err(), Refusal::Peer);
        assert_eq!(roster.len(), 3);
        drop(b1);
    }

    #[test]
    fn nothing_evictable_refuses_and_the_roster_never_grows_past_its_capacity() {
        let roster = Roster::new(2, 2);
        let seats: Vec<Seat> = ["127.0.0.2", "127.0.0.3"]
            .iter()
            .map(|a| roster.admit(ip(a)).unwrap().0)
            .collect();
        for s in &seats {
            s.member.trusted.store(true, Ordering::Release);
        }
        assert_eq!(roster.admit(ip("127.0.0.4")).unwrap_err(), Refusal::Cap);
        assert_eq!(roster.len(), roster.capacity());
        drop(seats);
        assert_eq!(roster.len(), 0);
    }
}

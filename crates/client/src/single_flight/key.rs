//! Which requests are the same: the [`FlightKey`] trait, the [`DefaultKey`]
//! (method, URI, hashed credentials), the [`RequestKey`] it makes, and the
//! `Tee` that feeds a key's bytes to its two hashers.
//!
//! Invariant: `RequestKey`'s `Hash` agrees with its `Eq` (both go through
//! the key's seeded hashes), and a credential is compared only through
//! those hashes: a key neither stores nor prints it.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use http::{HeaderName, Method, Uri};
use http_body::Body;

/// Which requests are the same: a key, or `None` for a request that must
/// never be coalesced.
///
/// Implemented by [`DefaultKey`] and by any `Fn(&Req) -> Option<K>`.
pub trait FlightKey<Req> {
    /// The key; equal keys share a flight.
    type Key: Hash + Eq + Clone + Send + Sync + 'static;

    /// The key of `request`, or `None` to send it on its own.
    fn key(&self, request: &Req) -> Option<Self::Key>;
}

impl<Req, K, F> FlightKey<Req> for F
where
    F: Fn(&Req) -> Option<K>,
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    type Key = K;

    fn key(&self, request: &Req) -> Option<K> {
        self(request)
    }
}

/// The default key: method, URI and two seeded 64-bit hashes of them and of
/// the credential headers (`Authorization`, `Proxy-Authorization` and `Cookie` unless
/// [`with_credential_headers`](Self::with_credential_headers) says
/// otherwise), so two users never share a response.
///
/// Only requests whose body is known to be empty are keyed: the body is not
/// part of the key, so two `POST`s with different bodies must not be
/// merged. A token refresh that sends a body names its own key with a
/// closure (see [`SingleFlightLayer`]).
///
/// The credential never leaves the hash: the key's `Debug` prints
/// `<redacted>`, and the hash is keyed per layer, so it means nothing
/// outside the process.
///
/// Two credentials are told apart by a keyed SipHash-1-3 of the
/// credentials alone (std's `DefaultHasher`, a pseudo-random function of
/// a per-layer secret key: a collision cannot be crafted without it) and
/// by a seeded foldhash of everything the key covers, which is also the
/// key table's hash. foldhash is not cryptographic and is much cheaper
/// than a second SipHash pass; the table it indexes holds at most
/// `max_keys` entries, so even crafted collisions in it cost a bounded
/// scan.
///
/// [`SingleFlightLayer`]: super::SingleFlightLayer
#[derive(Clone)]
pub struct DefaultKey {
    headers: Arc<[HeaderName]>,
    hashers: (foldhash::fast::RandomState, RandomState),
}

impl Default for DefaultKey {
    fn default() -> Self {
        Self::with_credential_headers([
            http::header::AUTHORIZATION,
            http::header::PROXY_AUTHORIZATION,
            http::header::COOKIE,
        ])
    }
}

impl DefaultKey {
    /// Keys on method, URI and the values of `headers` (hashed).
    pub fn with_credential_headers(headers: impl IntoIterator<Item = HeaderName>) -> Self {
        DefaultKey {
            headers: headers.into_iter().collect(),
            hashers: (foldhash::fast::RandomState::default(), RandomState::new()),
        }
    }
}

impl fmt::Debug for DefaultKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultKey")
            .field("credential_headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// A [`DefaultKey`]: method, URI, credential hash.
///
/// URIs compare byte for byte (`http`'s own `Uri` equality ignores the
/// host's case, and hashes it a byte at a time): two spellings of one host
/// only miss a chance to share.
#[derive(Clone)]
pub struct RequestKey {
    method: Method,
    uri: Uri,
    /// Two seeded hashes: a foldhash of the method, the URI and the
    /// credentials, and a keyed SipHash of the credentials. The credentials
    /// are compared only through them, and the first is the key's `Hash`,
    /// so the table never rehashes the URI.
    pub(super) hash: (u64, u64),
}

impl RequestKey {
    fn parts(&self) -> (&str, Option<&str>, Option<&str>, Option<&str>) {
        (
            self.method.as_str(),
            self.uri.scheme_str(),
            self.uri.authority().map(|a| a.as_str()),
            self.uri.path_and_query().map(|p| p.as_str()),
        )
    }
}

impl PartialEq for RequestKey {
    fn eq(&self, other: &Self) -> bool {
        // A key found again in the table is usually a clone of the same
        // request's, whose parts share their bytes: equal without a compare.
        fn same(a: Option<&str>, b: Option<&str>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
                (a, b) => a == b,
            }
        }
        let (a, b) = (self.parts(), other.parts());
        self.hash == other.hash
            && self.method == other.method
            && same(a.1, b.1)
            && same(a.2, b.2)
            && same(a.3, b.3)
    }
}

impl Eq for RequestKey {}

impl Hash for RequestKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Equal keys have equal `hash`es; its first half is already a
        // keyed hash of everything the key compares.
        state.write_u64(self.hash.0);
    }
}

impl fmt::Debug for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URI is not secret; the credential hash is left out so that a
        // logged key cannot be used to confirm a guessed token.
        f.debug_struct("RequestKey")
            .field("method", &self.method)
            .field("uri", &self.uri)
            .field("credential", &"<redacted>")
            .finish()
    }
}

impl<B: Body> FlightKey<http::Request<B>> for DefaultKey {
    type Key = RequestKey;

    fn key(&self, request: &http::Request<B>) -> Option<RequestKey> {
        if request.body().size_hint().exact() != Some(0) {
            return None;
        }
        use std::hash::Hasher;
        let method = request.method();
        let uri = request.uri();
        // The first half of the hash covers the method, the URI and the
        // credentials; the second only the credentials (the key compares
        // the method and URI byte for byte, and the credentials only
        // through the two halves). Each URI part is its bytes and a byte
        // UTF-8 never holds (0xff), or 0xfe if absent; a credential value,
        // which may hold any byte, is tagged with its header's position in
        // the list and prefixed by its length: no two keys feed the same
        // bytes.
        let mut h = Tee::new(&self.hashers);
        h.first_only(true);
        for part in [
            Some(method.as_str()),
            uri.scheme_str(),
            uri.authority().map(|a| a.as_str()),
            uri.path_and_query().map(|p| p.as_str()),
        ] {
            match part {
                Some(part) => {
                    h.write(part.as_bytes());
                    h.write_u8(0xff);
                }
                None => h.write_u8(0xfe),
            }
        }
        h.first_only(false);
        let mut credential = |i: usize, value: &http::HeaderValue| {
            let value = value.as_bytes();
            h.write_u32(i as u32);
            h.write_u64(value.len() as u64);
            h.write(value);
        };
        let headers = request.headers();
        // A few headers are cheaper to walk than to look up one name at a
        // time; both visit a name's values in the same order.
        if headers.len() <= 8 {
            for (i, name) in self.headers.iter().enumerate() {
                for (n, value) in headers {
                    if n == name {
                        credential(i, value);
                    }
                }
            }
        } else {
            for (i, name) in self.headers.iter().enumerate() {
                for value in headers.get_all(name) {
                    credential(i, value);
                }
            }
        }
        Some(RequestKey {
            method: method.clone(),
            uri: uri.clone(),
            hash: h.finish_both(),
        })
    }
}

/// Feeds the same bytes to a foldhasher and a SipHasher through a small
/// buffer, so a key's many short strings and integers reach each hasher as
/// a few long writes. SipHash hashes the concatenation of its writes, so
/// its hash is that of writing to it directly; foldhash's depends on where
/// the writes split, which the buffer makes a function of the bytes alone
/// (it flushes when full and at each [`first_only`](Self::first_only)),
/// so equal keys still hash alike.
struct Tee {
    hashers: (
        foldhash::fast::FoldHasher<'static>,
        std::hash::DefaultHasher,
    ),
    buf: [u8; 128],
    len: usize,
    /// Writes go to the first hasher only.
    first_only: bool,
}

impl Tee {
    fn new(states: &(foldhash::fast::RandomState, RandomState)) -> Self {
        Tee {
            hashers: (states.0.build_hasher(), states.1.build_hasher()),
            buf: [0; 128],
            len: 0,
            first_only: false,
        }
    }

    /// From now on, writes go to the first hasher only, or to both again.
    fn first_only(&mut self, on: bool) {
        self.flush();
        self.first_only = on;
    }

    fn flush(&mut self) {
        use std::hash::Hasher;
        let pending = &self.buf[..self.len];
        self.hashers.0.write(pending);
        if !self.first_only {
            self.hashers.1.write(pending);
        }
        self.len = 0;
    }

    fn finish_both(mut self) -> (u64, u64) {
        use std::hash::Hasher;
        self.flush();
        (self.hashers.0.finish(), self.hashers.1.finish())
    }
}

impl std::hash::Hasher for Tee {
    fn write(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > self.buf.len() {
            self.flush();
            if bytes.len() > self.buf.len() {
                self.hashers.0.write(bytes);
                if !self.first_only {
                    self.hashers.1.write(bytes);
                }
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Only [`Tee::finish_both`] is used; this is the first hash.
    fn finish(&self) -> u64 {
        let mut h = self.hashers.0.clone();
        h.write(&self.buf[..self.len]);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::hash::Hasher;

    /// The buffer must not change the credential hash: it is what writing
    /// the same pieces to a SipHasher directly gives, for short pieces, a
    /// piece that crosses the buffer's end and one longer than the buffer.
    /// The first hash depends only on the bytes written, and on every one.
    #[test]
    fn the_tee_hashes_as_writing_to_each_hasher_directly() {
        let states = (foldhash::fast::RandomState::default(), RandomState::new());
        let long = vec![0xa5u8; 300];
        let pieces: [&[u8]; 6] = [b"GET", &[0xff], &[7; 100], &[1; 60], &long, b"tail"];
        let feed = |pieces: &[&[u8]]| {
            let mut tee = Tee::new(&states);
            for piece in pieces {
                tee.write(piece);
                tee.write_usize(piece.len());
            }
            tee
        };
        let mut b = states.1.build_hasher();
        for piece in pieces {
            b.write(piece);
            b.write_usize(piece.len());
        }
        let (first, second) = feed(&pieces).finish_both();
        assert_eq!(second, b.finish());
        assert_eq!(feed(&pieces).finish(), first);
        assert_eq!(feed(&pieces).finish_both(), (first, second));
        // One byte changed, early or late: both hashes move.
        let (mut early, mut late) = (long.clone(), long.clone());
        early[0] ^= 1;
        late[299] ^= 1;
        for changed in [&early, &late] {
            let other: [&[u8]; 6] = [b"GET", &[0xff], &[7; 100], &[1; 60], changed, b"tail"];
            let (f, s) = feed(&other).finish_both();
            assert!(f != first && s != second);
        }
    }

    #[test]
    fn keys_differ_by_credential_and_match_without_one() {
        let key = DefaultKey::default();
        let req = |auth: Option<&str>| {
            let mut r = http::Request::get("http://token.internal/token");
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r.body(http_body_util::Empty::<Bytes>::new()).unwrap()
        };
        let ada = key.key(&req(Some("Bearer ada"))).unwrap();
        let bob = key.key(&req(Some("Bearer bob"))).unwrap();
        let none = key.key(&req(None)).unwrap();
        assert!(ada != bob && ada != none);
        assert!(ada == key.key(&req(Some("Bearer ada"))).unwrap());
        assert!(none == key.key(&req(None)).unwrap());
        // The table's hash agrees with equality.
        let h = RandomState::new();
        assert_eq!(
            h.hash_one(&ada),
            h.hash_one(key.key(&req(Some("Bearer ada"))).unwrap())
        );
    }
}

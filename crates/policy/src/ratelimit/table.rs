//! Bounded, preallocated storage of one TAT per key, evicting the smallest TAT.
//!
//! Arrays allocated at construction and never resized:
//!
//! * an open-addressing hash index (linear probing, load ≤ ½, deletion by
//!   backward shift so no tombstones pile up under churn) from key to a dense
//!   entry id, stable for as long as the key is stored. A slot is 8 bytes,
//!   the low 32 bits of the key's hash and the id, so a 65 536-key index is
//!   1 MiB; the key itself is compared only when those 32 bits match;
//! * per entry id: its key and where its TAT lives;
//! * a **first-timer list**: keys seen once, in arrival order. A first
//!   request sets `TAT = now + T`, so with a non-decreasing clock this list is
//!   already sorted by TAT, and inserting at its tail or evicting its head is
//!   O(1). This is what keeps a flood of one-off keys cheap;
//! * an 8-ary **min-heap** of the keys that have conformed more than once,
//!   ordered by TAT. Its TATs are laid out so that the eight children of a
//!   node fill one 64-byte cache line: a sift costs one line per level, and
//!   65 536 keys are six levels deep.
//!
//! The smallest TAT overall is the smaller of the list head and the heap
//! root, so eviction is exact. A key moves from the list to the heap on its
//! second conforming request (O(1) unlink, then a sift-up that usually stops
//! at once, since its TAT is among the newest). A first request that arrives
//! with a clock earlier than the list's tail goes straight to the heap, which
//! keeps the list sorted. Every operation is worst-case O(log₈ n).

use crate::Nanos;

/// Marks an empty index slot, a missing list neighbour, or "not in the heap".
const NIL: u32 = u32::MAX;
const ARITY: usize = 8;

#[derive(Clone, Copy, Debug)]
struct IndexSlot {
    /// Low 32 bits of the key's [`mix`]; its home slot is `hash & mask`.
    hash: u32,
    /// Entry id of the key, or [`NIL`] for an empty slot.
    id: u32,
}

/// Eight TATs on one cache line: the children of heap node `k` are line `k + 1`.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct TatLine([Nanos; ARITY]);

/// Keys → TAT, at most `capacity` of them.
#[derive(Clone, Debug)]
pub(crate) struct KeyTable {
    index: Box<[IndexSlot]>,
    mask: usize,
    /// Key of each entry id.
    keys: Box<[u64]>,
    /// Heap node of each entry id, or [`NIL`] while it is on the first-timer list.
    node: Box<[u32]>,
    /// First-timer list, by entry id: TAT and neighbours.
    list_tat: Box<[Nanos]>,
    prev: Box<[u32]>,
    next: Box<[u32]>,
    head: u32,
    tail: u32,
    /// TAT of heap node `k`, stored at flat offset `k + ARITY − 1` (see [`TatLine`]).
    tats: Box<[TatLine]>,
    /// Entry id of heap node `k`.
    ids: Box<[u32]>,
    heap_len: usize,
    /// Keys stored: heap plus list. Entry ids in use are exactly `0..len`.
    len: usize,
}

/// The splitmix64 finalizer: spreads sequential or low-entropy keys (IPv4
/// addresses as integers) over the index. It is not keyed, so keys an attacker
/// picks must already be hashed with a secret (see the module docs).
#[inline]
fn mix(mut x: u64) -> u32 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) as u32
}

impl KeyTable {
    /// Room for `capacity` keys (1 ≤ capacity ≤ 2²⁴, checked by the caller).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let index_len = (capacity * 2).next_power_of_two();
        let empty = IndexSlot { hash: 0, id: NIL };
        let ids = || vec![NIL; capacity].into_boxed_slice();
        KeyTable {
            index: vec![empty; index_len].into_boxed_slice(),
            mask: index_len - 1,
            keys: vec![0; capacity].into_boxed_slice(),
            node: ids(),
            list_tat: vec![Nanos::ZERO; capacity].into_boxed_slice(),
            prev: ids(),
            next: ids(),
            head: NIL,
            tail: NIL,
            tats: vec![TatLine([Nanos::ZERO; ARITY]); capacity.div_ceil(ARITY) + 1]
                .into_boxed_slice(),
            ids: ids(),
            heap_len: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// Entry id of `key`, if stored.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        let hash = mix(key);
        let mut i = hash as usize & self.mask;
        loop {
            let slot = self.index[i];
            if slot.id == NIL {
                return None;
            }
            if slot.hash == hash && self.keys[slot.id as usize] == key {
                return Some(slot.id);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// TAT of entry `id`.
    #[inline]
    pub(crate) fn tat(&self, id: u32) -> Nanos {
        match self.node[id as usize] {
            NIL => self.list_tat[id as usize],
            node => self.node_tat(node as usize),
        }
    }

    /// Raises the TAT of entry `id` (TATs only grow on a conforming request).
    #[inline]
    pub(crate) fn raise(&mut self, id: u32, tat: Nanos) {
        debug_assert!(tat >= self.tat(id));
        match self.node[id as usize] {
            NIL => {
                self.unlink(id);
                self.heap_push(id, tat);
            }
            node => self.sift_down(node as usize, id, tat),
        }
    }

    /// The smallest stored TAT, if any key is stored.
    #[cfg(test)]
    pub(crate) fn min_tat(&self) -> Option<Nanos> {
        self.victim().map(|id| self.tat(id))
    }

    /// Stores a key that is not present; when full, first evicts the key with
    /// the smallest TAT and returns it with its TAT.
    pub(crate) fn insert(&mut self, key: u64, tat: Nanos) -> Option<(u64, Nanos)> {
        debug_assert!(self.find(key).is_none());
        let (id, evicted) = match self.victim() {
            Some(id) if self.len == self.capacity() => {
                // The victim's entry id passes to the new key.
                let victim = (self.keys[id as usize], self.tat(id));
                self.unindex(id);
                match self.node[id as usize] {
                    NIL => self.unlink(id),
                    node => self.heap_remove(node as usize),
                }
                (id, Some(victim))
            }
            _ => {
                self.len += 1;
                ((self.len - 1) as u32, None)
            }
        };
        self.index_at_free_slot(key, id);
        self.keys[id as usize] = key;
        if self.tail == NIL || self.list_tat[self.tail as usize] <= tat {
            self.push_back(id, tat);
        } else {
            self.heap_push(id, tat);
        }
        evicted
    }

    /// Entry id with the smallest TAT: the list head or the heap root.
    fn victim(&self) -> Option<u32> {
        match (self.head, self.heap_len) {
            (NIL, 0) => None,
            (NIL, _) => Some(self.ids[0]),
            (head, 0) => Some(head),
            (head, _) if self.list_tat[head as usize] <= self.node_tat(0) => Some(head),
            _ => Some(self.ids[0]),
        }
    }

    /// Puts `key → id` in the first empty slot on `key`'s probe path.
    fn index_at_free_slot(&mut self, key: u64, id: u32) {
        let hash = mix(key);
        let mut i = hash as usize & self.mask;
        while self.index[i].id != NIL {
            i = (i + 1) & self.mask;
        }
        self.index[i] = IndexSlot { hash, id };
    }

    /// Removes entry `id` (present) from the index, shifting later entries of
    /// the probe run back so every key stays reachable from its home slot.
    fn unindex(&mut self, id: u32) {
        let mut hole = mix(self.keys[id as usize]) as usize & self.mask;
        while self.index[hole].id != id {
            hole = (hole + 1) & self.mask;
        }
        let mut i = hole;
        loop {
            i = (i + 1) & self.mask;
            let slot = self.index[i];
            if slot.id == NIL {
                break;
            }
            let home = slot.hash as usize & self.mask;
            // `slot` may move into the hole iff the hole lies on its probe path [home, i).
            if (i.wrapping_sub(home) & self.mask) >= (i.wrapping_sub(hole) & self.mask) {
                self.index[hole] = slot;
                hole = i;
            }
        }
        self.index[hole].id = NIL;
    }

    fn push_back(&mut self, id: u32, tat: Nanos) {
        let i = id as usize;
        self.node[i] = NIL;
        self.list_tat[i] = tat;
        self.prev[i] = self.tail;
        self.next[i] = NIL;
        match self.tail {
            NIL => self.head = id,
            tail => self.next[tail as usize] = id,
        }
        self.tail = id;
    }

    fn unlink(&mut self, id: u32) {
        let (prev, next) = (self.prev[id as usize], self.next[id as usize]);
        match prev {
            NIL => self.head = next,
            p => self.next[p as usize] = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.prev[n as usize] = prev,
        }
    }

    #[inline]
    fn node_tat(&self, node: usize) -> Nanos {
        let flat = node + ARITY - 1;
        self.tats[flat / ARITY].0[flat % ARITY]
    }

    /// Writes entry `id` with `tat` at heap node `node`.
    #[inline]
    fn place(&mut self, node: usize, id: u32, tat: Nanos) {
        let flat = node + ARITY - 1;
        self.tats[flat / ARITY].0[flat % ARITY] = tat;
        self.ids[node] = id;
        self.node[id as usize] = node as u32;
    }

    fn heap_push(&mut self, id: u32, tat: Nanos) {
        self.heap_len += 1;
        self.sift_up(self.heap_len - 1, id, tat);
    }

    /// Removes heap node `node`, refilling it with the last node.
    fn heap_remove(&mut self, node: usize) {
        self.heap_len -= 1;
        let last = self.heap_len;
        if node < last {
            let (id, tat) = (self.ids[last], self.node_tat(last));
            if node > 0 && self.node_tat((node - 1) / ARITY) > tat {
                self.sift_up(node, id, tat);
            } else {
                self.sift_down(node, id, tat);
            }
        }
    }

    /// Places `(id, tat)` at `node` or above, moving larger ancestors down.
    fn sift_up(&mut self, mut node: usize, id: u32, tat: Nanos) {
        while node > 0 {
            let parent = (node - 1) / ARITY;
            let parent_tat = self.node_tat(parent);
            if parent_tat <= tat {
                break;
            }
            self.place(node, self.ids[parent], parent_tat);
            node = parent;
        }
        self.place(node, id, tat);
    }

    /// Places `(id, tat)` at `node` or below, moving smaller descendants up.
    fn sift_down(&mut self, mut node: usize, id: u32, tat: Nanos) {
        loop {
            let first = node * ARITY + 1;
            if first >= self.heap_len {
                break;
            }
            let count = (self.heap_len - first).min(ARITY);
            // The children of `node` are exactly the first `count` TATs of line `node + 1`.
            let line = &self.tats[node + 1].0[..count];
            let mut best = 0;
            for c in 1..count {
                if line[c] < line[best] {
                    best = c;
                }
            }
            let (child, child_tat) = (first + best, line[best]);
            if child_tat >= tat {
                break;
            }
            self.place(node, self.ids[child], child_tat);
            node = child;
        }
        self.place(node, id, tat);
    }

    /// Checks every structural invariant; for tests.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut indexed = 0;
        for slot in self.index.iter().filter(|s| s.id != NIL) {
            indexed += 1;
            assert!((slot.id as usize) < self.len);
            let key = self.keys[slot.id as usize];
            assert_eq!(mix(key), slot.hash);
            assert_eq!(self.find(key), Some(slot.id));
        }
        assert_eq!(indexed, self.len);
        for node in 0..self.heap_len {
            assert_eq!(self.node[self.ids[node] as usize] as usize, node);
            if node > 0 {
                assert!(self.node_tat((node - 1) / ARITY) <= self.node_tat(node));
            }
        }
        let (mut listed, mut id, mut prev, mut last_tat) = (0, self.head, NIL, Nanos::ZERO);
        while id != NIL {
            listed += 1;
            assert_eq!(self.node[id as usize], NIL);
            assert_eq!(self.prev[id as usize], prev);
            assert!(self.list_tat[id as usize] >= last_tat, "list sorted by TAT");
            last_tat = self.list_tat[id as usize];
            (prev, id) = (id, self.next[id as usize]);
        }
        assert_eq!(self.tail, prev);
        assert_eq!(listed + self.heap_len, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn full_table_evicts_the_smallest_tat() {
        let mut t = KeyTable::with_capacity(3);
        assert_eq!(t.insert(10, Nanos::from_nanos(300)), None); // list
        assert_eq!(t.insert(11, Nanos::from_nanos(100)), None); // earlier than the list tail: heap
        assert_eq!(t.insert(12, Nanos::from_nanos(200)), None); // heap
        assert_eq!(t.min_tat(), Some(Nanos::from_nanos(100)));
        assert_eq!(
            t.insert(13, Nanos::from_nanos(50)),
            Some((11, Nanos::from_nanos(100)))
        );
        assert_eq!(t.len(), 3);
        assert_eq!(t.find(11), None);
        // The new key may itself be the smallest now.
        assert_eq!(
            t.insert(14, Nanos::from_nanos(400)),
            Some((13, Nanos::from_nanos(50)))
        );
        t.check_invariants();
        // A list key is evicted when its TAT is smallest: 200 (heap) < 300 (list)
        // < 400 (list), then 300, then 400.
        assert_eq!(
            t.insert(15, Nanos::from_nanos(500)),
            Some((12, Nanos::from_nanos(200)))
        );
        assert_eq!(
            t.insert(16, Nanos::from_nanos(600)),
            Some((10, Nanos::from_nanos(300)))
        );
        assert_eq!(
            t.insert(17, Nanos::from_nanos(700)),
            Some((14, Nanos::from_nanos(400)))
        );
        t.check_invariants();
    }

    #[test]
    fn raise_reorders_the_heap() {
        let mut t = KeyTable::with_capacity(4);
        for (k, tat) in [(1, 10), (2, 20), (3, 30)] {
            t.insert(k, Nanos::from_nanos(tat));
        }
        t.check_invariants();
        let id = t.find(1).unwrap();
        t.raise(id, Nanos::from_nanos(35));
        t.check_invariants();
        assert_eq!(t.min_tat(), Some(Nanos::from_nanos(20)));
        assert_eq!(t.tat(t.find(1).unwrap()), Nanos::from_nanos(35));
    }

    #[test]
    fn keys_with_the_same_32_bit_hash_are_told_apart() {
        // Birthday search for two keys whose mixed hashes share the low 32 bits.
        let mut seen = HashMap::new();
        let (a, b) = (0u64..)
            .find_map(|k| seen.insert(mix(k), k).map(|other| (other, k)))
            .unwrap();
        let mut t = KeyTable::with_capacity(2);
        t.insert(a, Nanos::from_nanos(10));
        assert_eq!(t.find(b), None);
        t.insert(b, Nanos::from_nanos(20));
        let (ia, ib) = (t.find(a).unwrap(), t.find(b).unwrap());
        assert_ne!(ia, ib);
        assert_eq!(
            (t.tat(ia), t.tat(ib)),
            (Nanos::from_nanos(10), Nanos::from_nanos(20))
        );
        // Evicting `a` (smallest TAT) must leave `b` reachable.
        assert_eq!(
            t.insert(a ^ (1 << 63), Nanos::from_nanos(30)),
            Some((a, Nanos::from_nanos(10)))
        );
        assert_eq!(t.find(a), None);
        assert_eq!(t.find(b).map(|id| t.tat(id)), Some(Nanos::from_nanos(20)));
        t.check_invariants();
    }

    proptest! {
        /// Against a HashMap model: same contents, same victims (smallest TAT,
        /// ties allowed either way), invariants intact, never above capacity.
        #[test]
        fn matches_a_model_under_churn(
            ops in proptest::collection::vec((0u64..120, 0u64..1_000), 1..400),
            capacity in 1usize..80,
        ) {
            let mut t = KeyTable::with_capacity(capacity);
            let mut model: HashMap<u64, Nanos> = HashMap::new();
            for (key, tat) in ops {
                let tat = Nanos::from_nanos(tat);
                match t.find(key) {
                    Some(id) => {
                        let new = t.tat(id).max(tat);
                        t.raise(id, new);
                        model.insert(key, new);
                    }
                    None => {
                        prop_assert!(!model.contains_key(&key));
                        let min = model.values().copied().min();
                        if let Some((victim, victim_tat)) = t.insert(key, tat) {
                            prop_assert_eq!(Some(victim_tat), min);
                            prop_assert_eq!(model.remove(&victim), Some(victim_tat));
                        }
                        model.insert(key, tat);
                    }
                }
                prop_assert!(t.len() <= capacity);
                prop_assert_eq!(t.len(), model.len());
                t.check_invariants();
                for (k, v) in &model {
                    prop_assert_eq!(t.find(*k).map(|id| t.tat(id)), Some(*v));
                }
            }
        }
    }
}

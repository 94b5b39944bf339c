//! A generational slab: stable `u32` ids for in-flight attempts and
//! requests, recycled through a free list so the hot path never allocates
//! once the slab has grown to the run's peak population.
//!
//! Ids are paired with a generation so that a stale reference — a timeout
//! armed for an attempt that has since finished and whose slot was reused —
//! is recognised and ignored (lazy cancellation).

/// A reference to a slab entry that detects reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// Slot index.
    pub index: u32,
    /// Generation of the slot when the key was made.
    pub generation: u32,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Generational slab.
///
/// ```
/// use stormbreak_sim::slab::Slab;
/// let mut s = Slab::new();
/// let a = s.insert("a");
/// assert_eq!(s.remove(a), Some("a"));
/// let b = s.insert("b"); // reuses the slot with a new generation
/// assert_eq!(s.get(a), None);
/// assert_eq!(s.get(b), Some(&"b"));
/// ```
#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Slab<T> {
    /// An empty slab.
    pub fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Stores `value` and returns its key.
    pub fn insert(&mut self, value: T) -> Key {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            Key {
                index,
                generation: slot.generation,
            }
        } else {
            let index = u32::try_from(self.slots.len()).expect("more than 2^32 live entries");
            self.slots.push(Slot {
                generation: 0,
                value: Some(value),
            });
            Key {
                index,
                generation: 0,
            }
        }
    }

    /// The entry for `key`, unless it was removed since.
    #[inline]
    pub fn get(&self, key: Key) -> Option<&T> {
        let slot = self.slots.get(key.index as usize)?;
        if slot.generation == key.generation {
            slot.value.as_ref()
        } else {
            None
        }
    }

    /// Mutable access to the entry for `key`, unless it was removed since.
    #[inline]
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation == key.generation {
            slot.value.as_mut()
        } else {
            None
        }
    }

    /// The key of the live entry in slot `index`, if the slot holds one.
    #[inline]
    pub fn key_at(&self, index: u32) -> Option<Key> {
        let slot = self.slots.get(index as usize)?;
        slot.value.as_ref().map(|_| Key {
            index,
            generation: slot.generation,
        })
    }

    /// Mutable access to the live entry in slot `index`, whatever its
    /// generation: for links between live entries, which are unlinked
    /// before their entry leaves.
    #[inline]
    pub fn at_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots.get_mut(index as usize)?.value.as_mut()
    }

    /// Removes the entry; its key (and every copy of it) goes stale.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(key.index);
        self.len -= 1;
        Some(value)
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f` on every live entry, in slot order (deterministic).
    pub fn for_each(&self, mut f: impl FnMut(Key, &T)) {
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(v) = &slot.value {
                f(
                    Key {
                        index: i as u32,
                        generation: slot.generation,
                    },
                    v,
                );
            }
        }
    }

    /// Slots ever allocated: the run's peak population.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_never_reach_a_reused_slot() {
        let mut s = Slab::new();
        let keys: Vec<_> = (0..100).map(|i| s.insert(i)).collect();
        for k in &keys[..50] {
            s.remove(*k);
        }
        let fresh: Vec<_> = (0..50).map(|i| s.insert(1000 + i)).collect();
        assert_eq!(s.capacity(), 100, "removed slots are reused before growing");
        for k in &keys[..50] {
            assert_eq!(s.get(*k), None);
            assert_eq!(s.remove(*k), None);
        }
        for (i, k) in fresh.iter().enumerate() {
            assert_eq!(s.get(*k), Some(&(1000 + i)));
        }
        assert_eq!(s.len(), 100);
    }
}

//! Things open at once, counted per key (a user's connections to the socket, a client's
//! to `/metrics`), each given back when its [`Held`] is dropped: the one counter behind
//! every cap on open connections.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many are open, per key; clones share the counts.
#[derive(Debug)]
pub struct Counts<K>(Arc<Mutex<HashMap<K, u64>>>);

impl<K> Default for Counts<K> {
    fn default() -> Self {
        Counts(Arc::default())
    }
}

impl<K> Clone for Counts<K> {
    fn clone(&self) -> Self {
        Counts(self.0.clone())
    }
}

/// Why a [`Counts::take_within`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// All keys together have the most open.
    Total,
    /// This key has the most open.
    Key,
}

/// One counted against its key; given back when dropped.
#[derive(Debug)]
pub struct Held<K: Eq + Hash> {
    of: Counts<K>,
    key: K,
}

impl<K: Eq + Hash + Clone> Counts<K> {
    /// Count one more for `key`, if it has fewer than `most` open.
    pub fn take(&self, key: K, most: u64) -> Option<Held<K>> {
        self.take_within(key, most, u64::MAX).ok()
    }

    /// Count one more for `key`, if it has fewer than `most` open and all keys together
    /// fewer than `total`.
    pub fn take_within(&self, key: K, most: u64, total: u64) -> Result<Held<K>, Over> {
        let mut m = self.lock();
        if m.values().sum::<u64>() >= total {
            return Err(Over::Total);
        }
        let n = m.entry(key.clone()).or_default();
        if *n >= most {
            return Err(Over::Key);
        }
        *n += 1;
        Ok(Held {
            of: self.clone(),
            key,
        })
    }

    /// Held only for in-memory counting; a panic while holding it leaves plain numbers.
    fn lock(&self) -> MutexGuard<'_, HashMap<K, u64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Eq + Hash> Drop for Held<K> {
    fn drop(&mut self) {
        let mut m = self.of.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_at_most_its_count_and_gets_them_back() {
        let p = Counts::default();
        let a: Vec<Held<u32>> = (0..3).filter_map(|_| p.take(7, 3)).collect();
        assert_eq!(a.len(), 3);
        assert!(p.take(7, 3).is_none());
        assert!(p.take(8, 3).is_some(), "another key is not held back");
        drop(a);
        assert!(p.take(7, 3).is_some());
    }

    #[test]
    fn the_total_caps_all_keys_together() {
        let p = Counts::default();
        let a = p.take_within(1, 4, 2).unwrap();
        let _b = p.take_within(2, 4, 2).unwrap();
        assert_eq!(p.take_within(3, 4, 2).err(), Some(Over::Total));
        drop(a);
        let _c = p.take_within(3, 4, 2).unwrap();
        assert_eq!(p.take_within(3, 1, 9).err(), Some(Over::Key));
    }
}

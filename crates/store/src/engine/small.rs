//! A DRAM cache of small values (`Tx::get_cached`): a read of a key (at most
//! [`SMALL_KEY_MAX`] bytes) whose value is at most [`SMALL_VALUE_MAX`] bytes is answered from
//! DRAM once it was read, so a caller that keeps a
//! small descriptor in a key (the server's collections name their tree there) finds it without
//! the index's bucket and the record's page. Every change of a key's index entry (`link`,
//! `unlink`: puts, deletes, compaction moves, recovery's redo) drops its cached value, under
//! the key's lock; a value is cached only by a transaction holding the key's lock that read it
//! from the store (not from its own uncommitted writes), so a cached value is always the
//! committed one.
//!
//! Bounded: [`SMALL_SHARDS`] shards of at most [`SMALL_ENTRIES_PER_SHARD`] entries of at most
//! 128 + 64 bytes (32,768 entries, ≈ 9 MiB with the maps' overhead at most); a full shard
//! drops an arbitrary entry for a new one.

use std::collections::HashMap;
use std::sync::Mutex;

/// Largest value cached, bytes.
pub const SMALL_VALUE_MAX: usize = 64;
/// Longest key whose value is cached, bytes.
pub const SMALL_KEY_MAX: usize = 128;
const SMALL_SHARDS: usize = 16;
const SMALL_ENTRIES_PER_SHARD: usize = 2_048;

#[derive(Default)]
pub(crate) struct SmallValues {
    shards: [Mutex<HashMap<Vec<u8>, Vec<u8>>>; SMALL_SHARDS],
}

impl SmallValues {
    fn shard(&self, hash: u64) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Vec<u8>>> {
        self.shards[(hash >> 56) as usize % SMALL_SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<Vec<u8>> {
        self.shard(hash).get(key).cloned()
    }

    pub fn insert(&self, hash: u64, key: &[u8], value: &[u8]) {
        debug_assert!(value.len() <= SMALL_VALUE_MAX && key.len() <= SMALL_KEY_MAX);
        let mut shard = self.shard(hash);
        if shard.len() >= SMALL_ENTRIES_PER_SHARD && !shard.contains_key(key) {
            if let Some(victim) = shard.keys().next().cloned() {
                shard.remove(&victim);
            }
        }
        shard.insert(key.to_vec(), value.to_vec());
    }

    /// Drops `key`'s cached value (its entry changes).
    pub fn invalidate(&self, hash: u64, key: &[u8]) {
        let mut shard = self.shard(hash);
        if !shard.is_empty() {
            shard.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a shard that grows past its bound, an invalidation that misses.
    #[test]
    fn bounded_and_invalidated() {
        let c = SmallValues::default();
        for i in 0..10_000u64 {
            c.insert(i << 56, &i.to_le_bytes(), b"v");
        }
        let total: usize = c.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(total <= SMALL_SHARDS * SMALL_ENTRIES_PER_SHARD);
        c.insert(7 << 56, b"k", b"x");
        assert_eq!(c.get(7 << 56, b"k").as_deref(), Some(&b"x"[..]));
        c.invalidate(7 << 56, b"k");
        assert_eq!(c.get(7 << 56, b"k"), None);
    }
}

//! The keys some connection `WATCH`es (`[database u32 BE][key]`: by database, as Redis's, so
//! a watch follows its database through `SWAPDB` and `FLUSHDB`), each with a version that
//! every write to it bumps (as
//! Redis's `touchWatchedKey`): `EXEC` aborts when a watched key's version moved, whatever the
//! write was (the same value again, a delete). Only watched keys are tracked: while none is, a
//! write costs one atomic load; else one hash lookup under the lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most keys tracked at once (every connection's watches together).
pub const MAX_TRACKED: usize = 1 << 20;

/// Watched store keys: (watchers, version); and the clients blocked on keys, told of the
/// same writes.
#[derive(Debug, Default)]
pub struct Watches {
    keys: Mutex<HashMap<Vec<u8>, (u32, u64)>>,
    /// `keys.len()`, readable without the lock.
    tracked: AtomicUsize,
    /// Clients blocked on keys (`BLPOP` ...): a write readies the first in line.
    pub blocks: crate::keyspace::blocked::BlockTable,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, (u32, u64)>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more watcher of `key`; its version now. `None` past [`MAX_TRACKED`] keys.
    pub fn watch(&self, key: &[u8]) -> Option<u64> {
        let mut keys = self.lock();
        if !keys.contains_key(key) && keys.len() >= MAX_TRACKED {
            return None;
        }
        let entry = keys.entry(key.to_vec()).or_insert((0, 0));
        entry.0 += 1;
        let version = entry.1;
        self.tracked.store(keys.len(), Ordering::SeqCst);
        Some(version)
    }

    /// One watcher of `key` fewer.
    pub fn unwatch(&self, key: &[u8]) {
        let mut keys = self.lock();
        if let Some(entry) = keys.get_mut(key) {
            assert!(entry.0 > 0, "unwatched more often than watched");
            entry.0 -= 1;
            if entry.0 == 0 {
                keys.remove(key);
                self.tracked.store(keys.len(), Ordering::SeqCst);
            }
        }
    }

    /// `key`'s version (0 when nobody watches it).
    pub fn version(&self, key: &[u8]) -> u64 {
        self.lock().get(key).map_or(0, |e| e.1)
    }

    /// A write to `key` (called while the writer holds the key's lock, before it commits).
    pub fn touch(&self, key: &[u8]) {
        self.blocks.touched(key);
        // A watch registered after this load misses this write's bump, exactly as one
        // registered after the map lookup below would: `WATCH` reads the key (its
        // fingerprint) before it registers, so a changed value is still caught at `EXEC`.
        if self.tracked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut keys = self.lock();
        if let Some(entry) = keys.get_mut(key) {
            entry.1 += 1;
        }
    }

    /// The watched keys of database `db` (at most [`MAX_TRACKED`]).
    pub fn watched_in(&self, db: u32) -> Vec<Vec<u8>> {
        if self.tracked.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let prefix = db.to_be_bytes();
        self.lock()
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect()
    }
}

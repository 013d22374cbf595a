//! Key locks: a fixed table of lock words, a key's by its hash. Every change holds its keys'
//! locks from before its records are written until its deltas are staged, so that changes of
//! one key are applied and staged in one order (their commit timestamps'), and a transaction's
//! keys change for nobody else while it runs (two-phase locking: serializable).
//!
//! Single-key operations and write batches wait for a lock (a batch takes its locks in stripe
//! order, so batches cannot deadlock); a transaction never waits long for one (it takes them in
//! the order it touches keys): past a few yields it fails with a conflict and is retried from
//! the start. Two keys of one stripe share a lock (a false conflict costs a retry).

use std::sync::atomic::{AtomicU64, Ordering};

use tamer_runtime::thread;

use crate::DbError;

/// Lock words: 16,384 × 8 bytes = 128 KiB.
pub const LOCK_STRIPES: usize = 1 << 14;
/// Yields a transaction waits for a held lock before it reports a conflict.
pub const TX_LOCK_YIELDS: u32 = 16;
/// How long a single-key operation or a batch waits for a lock (a transaction holds its locks
/// while its closure runs, which the store does not bound) before it fails.
const LOCK_WAIT_NS: u64 = 10_000_000_000;

const FREE: u64 = 0;

pub(crate) struct KeyLocks {
    words: Box<[AtomicU64]>,
    next_owner: AtomicU64,
}

impl KeyLocks {
    pub fn new() -> Self {
        Self {
            words: (0..LOCK_STRIPES).map(|_| AtomicU64::new(FREE)).collect(),
            next_owner: AtomicU64::new(1),
        }
    }

    /// A new owner id (never [`FREE`]).
    pub fn owner(&self) -> u64 {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// The stripe of a key hash (its high bits: the low ones choose buckets).
    pub fn stripe(hash: u64) -> usize {
        (hash >> 48) as usize % LOCK_STRIPES
    }

    pub fn try_lock(&self, stripe: usize, owner: u64) -> bool {
        debug_assert_ne!(owner, FREE);
        self.words[stripe]
            .compare_exchange(FREE, owner, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock, yielding while another owner holds it, for at most `LOCK_WAIT_NS`.
    pub fn lock(&self, stripe: usize, owner: u64) -> Result<(), DbError> {
        let deadline = tamer_device::now_ns() + LOCK_WAIT_NS;
        while !self.try_lock(stripe, owner) {
            if tamer_device::now_ns() > deadline {
                return Err(DbError::Runtime(format!(
                    "a key lock stayed held for {} s (a transaction that does not finish?)",
                    LOCK_WAIT_NS / 1_000_000_000
                )));
            }
            thread::yield_now();
        }
        Ok(())
    }

    /// Takes the lock as a transaction does: a few yields, then `false` (a conflict).
    pub fn lock_briefly(&self, stripe: usize, owner: u64) -> bool {
        for _ in 0..TX_LOCK_YIELDS {
            if self.try_lock(stripe, owner) {
                return true;
            }
            thread::yield_now();
        }
        self.try_lock(stripe, owner)
    }

    pub fn unlock(&self, stripe: usize, owner: u64) {
        let was = self.words[stripe].swap(FREE, Ordering::Release);
        assert_eq!(
            was, owner,
            "key lock {stripe} released by a thread not holding it"
        );
    }
}

/// One held key lock, released on drop.
pub(crate) struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    stripe: usize,
    owner: u64,
}

impl<'a> KeyGuard<'a> {
    pub fn lock(locks: &'a KeyLocks, hash: u64) -> Result<Self, DbError> {
        let owner = locks.owner();
        let stripe = KeyLocks::stripe(hash);
        locks.lock(stripe, owner)?;
        Ok(Self {
            locks,
            stripe,
            owner,
        })
    }

    pub fn try_lock(locks: &'a KeyLocks, hash: u64) -> Option<Self> {
        let owner = locks.owner();
        let stripe = KeyLocks::stripe(hash);
        // `then`, not `then_some`: a guard built eagerly would unlock the holder's lock as it
        // drops.
        locks.try_lock(stripe, owner).then(|| Self {
            locks,
            stripe,
            owner,
        })
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        self.locks.unlock(self.stripe, self.owner);
    }
}

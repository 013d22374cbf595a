//! Key locks: a fixed table of lock words, a key's by its hash. Every change holds its keys'
//! locks from before its records are written until its deltas are staged, so that changes of
//! one key are applied and staged in one order (their commit timestamps'), and a transaction's
//! keys change for nobody else while it runs (two-phase locking: serializable).
//!
//! Owners are numbered in start order (a smaller id is older). A single-key operation holds one
//! lock and waits for nothing while it holds it, so it simply waits. Transactions and write
//! batches hold several and take them in any order, so they follow wait-die ([`on_held`]): an
//! older owner waits for a younger holder; a younger one gives up (a conflict: it releases
//! everything, waits for that holder to let the lock go, and retries under the same id). Every
//! wait while holding locks is for a younger owner, so no cycle of waits can form; an owner
//! keeps its id across retries, so it becomes the oldest in time and then never gives up again
//! (no starvation). Every wait ends at the operation's deadline (`DbOptions::lock_timeout`).
//! Two keys of one stripe share a lock (a false conflict costs a retry).

use std::sync::atomic::{AtomicU64, Ordering};

use tamer_runtime::thread;

use crate::DbError;

/// Lock words: 16,384 × 8 bytes = 128 KiB.
pub const LOCK_STRIPES: usize = 1 << 14;

const FREE: u64 = 0;

/// What a transaction does about a lock `holder` holds (wait-die).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHeld {
    /// The holder is younger: wait for it.
    Wait,
    /// The holder is older: give up and retry once it lets go.
    Die,
    /// The operation's deadline passed: fail.
    TimedOut,
}

/// The wait-die rule, a pure function of the two owners and the clock.
pub fn on_held(holder: u64, owner: u64, now_ns: u64, deadline_ns: u64) -> OnHeld {
    assert!(holder != FREE && owner != FREE && holder != owner);
    if now_ns > deadline_ns {
        OnHeld::TimedOut
    } else if holder < owner {
        OnHeld::Die
    } else {
        OnHeld::Wait
    }
}

/// Why a lock was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotLocked {
    /// An older owner holds it.
    Died {
        stripe: usize,
        holder: u64,
    },
    TimedOut,
}

pub(crate) struct KeyLocks {
    words: Box<[AtomicU64]>,
    next_owner: AtomicU64,
    /// How long one operation waits for locks in all, ns.
    timeout_ns: u64,
}

impl KeyLocks {
    pub fn new(timeout_ns: u64) -> Self {
        Self {
            words: (0..LOCK_STRIPES).map(|_| AtomicU64::new(FREE)).collect(),
            next_owner: AtomicU64::new(1),
            timeout_ns,
        }
    }

    /// A new owner id (never [`FREE`]; larger than every earlier one).
    pub fn owner(&self) -> u64 {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// The deadline of an operation starting now.
    pub fn deadline_ns(&self) -> u64 {
        tamer_device::now_ns().saturating_add(self.timeout_ns)
    }

    /// The stripe of a key hash (its high bits: the low ones choose buckets).
    pub fn stripe(hash: u64) -> usize {
        (hash >> 48) as usize % LOCK_STRIPES
    }

    /// Takes the lock if it is free; else its holder.
    fn acquire(&self, stripe: usize, owner: u64) -> Result<(), u64> {
        debug_assert_ne!(owner, FREE);
        self.words[stripe]
            .compare_exchange(FREE, owner, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| ())
    }

    pub fn try_lock(&self, stripe: usize, owner: u64) -> bool {
        self.acquire(stripe, owner).is_ok()
    }

    /// Takes the lock, yielding while another owner holds it, until the timeout.
    pub fn lock(&self, stripe: usize, owner: u64) -> Result<(), DbError> {
        let deadline_ns = self.deadline_ns();
        while !self.try_lock(stripe, owner) {
            if tamer_device::now_ns() > deadline_ns {
                return Err(DbError::Runtime(format!(
                    "a key lock stayed held for {} ms (a transaction that does not finish?)",
                    self.timeout_ns / 1_000_000
                )));
            }
            thread::yield_now();
        }
        Ok(())
    }

    /// Takes the lock as a transaction or batch does ([`on_held`]).
    pub fn lock_or_die(
        &self,
        stripe: usize,
        owner: u64,
        deadline_ns: u64,
    ) -> Result<(), NotLocked> {
        loop {
            match self.acquire(stripe, owner) {
                Ok(()) => return Ok(()),
                Err(FREE) => {}
                Err(holder) => match on_held(holder, owner, tamer_device::now_ns(), deadline_ns) {
                    OnHeld::Wait => {}
                    OnHeld::Die => return Err(NotLocked::Died { stripe, holder }),
                    OnHeld::TimedOut => return Err(NotLocked::TimedOut),
                },
            }
            thread::yield_now();
        }
    }

    /// Takes the lock if it is free, else gives up at once whoever holds it: for a transaction
    /// that must not wait (it holds the checkpoint latch: a checkpoint waiting for it would
    /// stop the holder it waits for).
    pub fn lock_or_die_now(&self, stripe: usize, owner: u64) -> Result<(), NotLocked> {
        // Bounded: a free word is taken, or its holder named, in at most two reads.
        for _ in 0..2 {
            match self.acquire(stripe, owner) {
                Ok(()) => return Ok(()),
                Err(FREE) => continue,
                Err(holder) => return Err(NotLocked::Died { stripe, holder }),
            }
        }
        Err(NotLocked::TimedOut)
    }

    /// Waits (holding no lock) until `holder` no longer holds `stripe`; false at the deadline.
    pub fn wait_released(&self, stripe: usize, holder: u64, deadline_ns: u64) -> bool {
        while self.words[stripe].load(Ordering::Acquire) == holder {
            if tamer_device::now_ns() > deadline_ns {
                return false;
            }
            thread::yield_now();
        }
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    // Mutation caught: a younger owner that waits (a cycle of waits can form: deadlock), or an
    // older one that dies (it can starve).
    #[test]
    fn older_owners_wait_and_younger_ones_die() {
        assert_eq!(on_held(5, 9, 0, 100), OnHeld::Die);
        assert_eq!(on_held(9, 5, 0, 100), OnHeld::Wait);
        assert_eq!(on_held(9, 5, 100, 100), OnHeld::Wait);
    }

    // Mutation caught: a wait without a bound.
    #[test]
    fn a_wait_ends_at_its_deadline() {
        assert_eq!(on_held(9, 5, 101, 100), OnHeld::TimedOut);
        assert_eq!(on_held(5, 9, 101, 100), OnHeld::TimedOut);
    }

    // Mutation caught: `lock_or_die` ignoring the holder's age, or `wait_released` returning
    // while the holder still holds the lock.
    #[test]
    fn a_younger_transaction_gives_up_on_an_older_holder() {
        // A 1 s bound: a preemption past a 1 ms one would turn `Died` into `TimedOut`.
        let locks = KeyLocks::new(1_000_000_000);
        let (old, young) = (locks.owner(), locks.owner());
        let deadline_ns = locks.deadline_ns();
        assert_eq!(locks.lock_or_die(7, old, deadline_ns), Ok(()));
        assert_eq!(
            locks.lock_or_die(7, young, deadline_ns),
            Err(NotLocked::Died {
                stripe: 7,
                holder: old
            })
        );
        assert!(!locks.wait_released(7, old, 0));
        locks.unlock(7, old);
        assert!(locks.wait_released(7, old, deadline_ns));
        assert_eq!(locks.lock_or_die(7, young, deadline_ns), Ok(()));
        locks.unlock(7, young);
    }
}

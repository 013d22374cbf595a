//! Transactions and write batches: several keys changed atomically, as one commit record.
//!
//! A transaction takes each key's lock when it first touches it (read or write) and holds every
//! lock to the end (two-phase locking: serializable); its writes are buffered in DRAM. Commit
//! writes the new records out of place, applies every change under the checkpoint latch, stages
//! one commit record with all of them, then releases the locks and, in `Durability::Commit`,
//! waits for its group commit. A lock another transaction holds is waited for only briefly (no
//! deadlock can form): then the attempt fails with a conflict, everything is undone (nothing was
//! applied) and the closure runs again, at most [`MAX_TX_ATTEMPTS`] times.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use tamer_runtime::thread;

use super::commit::{Delta, DeltaOp, Durability, Staged};
use super::locks::KeyLocks;
use super::{check_sizes, Engine, Linked};
use crate::DbError;

/// Attempts of a transaction that keeps conflicting before it fails with
/// [`DbError::Conflict`].
pub const MAX_TX_ATTEMPTS: u32 = 64;
/// Bytes of keys and values one transaction or batch may buffer (its writes wait in DRAM until
/// commit).
pub const MAX_TX_BYTES: usize = 64 << 20;
/// Keys one transaction or batch may lock (its lock table entries).
const MAX_TX_KEYS: usize = 1 << 16;

/// A write of a transaction or batch: a value, or a delete.
type Write = (Vec<u8>, Option<Vec<u8>>);

/// Blind writes to several keys, applied atomically by `Db::write` (`MSET`'s shape). Later
/// writes to a key replace earlier ones in the batch.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    writes: Vec<Write>,
    bytes: usize,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.bytes += key.len() + value.len();
        self.writes.push((key.to_vec(), Some(value.to_vec())));
        self
    }

    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.bytes += key.len();
        self.writes.push((key.to_vec(), None));
        self
    }

    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// An open transaction (see the module docs): reads and writes through it are isolated from
/// every other change until it commits.
pub struct Tx<'a> {
    engine: &'a Engine,
    owner: u64,
    /// Lock stripes held.
    held: Vec<usize>,
    /// Buffered writes, and the index of each key's in `writes`.
    writes: Vec<Write>,
    index: HashMap<Vec<u8>, usize>,
    bytes: usize,
    /// A lock could not be taken: the attempt must be retried, whatever the closure returns.
    conflicted: bool,
}

impl<'a> Tx<'a> {
    fn new(engine: &'a Engine) -> Self {
        Self {
            engine,
            owner: engine.locks.owner(),
            held: Vec::new(),
            writes: Vec::new(),
            index: HashMap::new(),
            bytes: 0,
            conflicted: false,
        }
    }

    /// Takes `key`'s lock for this transaction (no-op if held).
    fn lock(&mut self, key: &[u8]) -> Result<(), DbError> {
        let stripe = KeyLocks::stripe(self.engine.hash(key));
        if self.held.contains(&stripe) {
            return Ok(());
        }
        if self.held.len() >= MAX_TX_KEYS {
            return Err(DbError::TooLarge(format!(
                "a transaction locks at most {MAX_TX_KEYS} keys"
            )));
        }
        if !self.engine.locks.lock_briefly(stripe, self.owner) {
            self.conflicted = true;
            return Err(DbError::Conflict { attempts: 0 });
        }
        self.held.push(stripe);
        Ok(())
    }

    /// The value of `key` as this transaction sees it (its own writes included).
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        self.lock(key)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i].1.clone());
        }
        self.engine.get(key)
    }

    pub fn contains(&mut self, key: &[u8]) -> Result<bool, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        self.lock(key)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i].1.is_some());
        }
        self.engine.contains(key)
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        check_sizes(key, Some(value), self.engine.max_value)?;
        self.lock(key)?;
        self.buffer(key, Some(value.to_vec()))
    }

    /// Deletes `key`; true when it was there (as this transaction sees it).
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, DbError> {
        let was = self.contains(key)?;
        self.buffer(key, None)?;
        Ok(was)
    }

    fn buffer(&mut self, key: &[u8], value: Option<Vec<u8>>) -> Result<(), DbError> {
        let add = key.len() + value.as_ref().map_or(0, Vec::len);
        if self.bytes + add > MAX_TX_BYTES {
            return Err(DbError::TooLarge(format!(
                "a transaction buffers at most {MAX_TX_BYTES} bytes of keys and values"
            )));
        }
        self.bytes += add;
        match self.index.get(key) {
            Some(&i) => self.writes[i].1 = value,
            None => {
                self.index.insert(key.to_vec(), self.writes.len());
                self.writes.push((key.to_vec(), value));
            }
        }
        Ok(())
    }

    fn unlock_all(&mut self) {
        for stripe in self.held.drain(..) {
            self.engine.locks.unlock(stripe, self.owner);
        }
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        self.unlock_all();
    }
}

impl Engine {
    /// Runs `f` as a transaction (see the module docs); retried on conflict.
    pub fn transaction<T>(
        &self,
        mut f: impl FnMut(&mut Tx<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let _op = self.check_open()?;
        for attempt in 0..MAX_TX_ATTEMPTS {
            let mut tx = Tx::new(self);
            let result = f(&mut tx);
            if tx.conflicted {
                drop(tx);
                backoff(attempt);
                continue;
            }
            let value = result?;
            let writes = std::mem::take(&mut tx.writes);
            let staged = self.commit_locked(writes)?;
            drop(tx); // the locks
            self.acknowledge_or_settle(staged)?;
            return Ok(value);
        }
        Err(DbError::Conflict {
            attempts: MAX_TX_ATTEMPTS,
        })
    }

    /// Applies a batch atomically: its keys' locks in stripe order (waiting), then one commit.
    pub fn write_batch(&self, batch: WriteBatch) -> Result<(), DbError> {
        let _op = self.check_open()?;
        if batch.bytes > MAX_TX_BYTES {
            return Err(DbError::TooLarge(format!(
                "a batch holds at most {MAX_TX_BYTES} bytes of keys and values"
            )));
        }
        // The last write of each key wins.
        let mut last: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        for (key, value) in batch.writes {
            check_sizes(&key, value.as_deref(), self.max_value)?;
            last.insert(key, value);
        }
        let writes: Vec<Write> = last.into_iter().collect();
        let mut stripes: Vec<usize> = writes
            .iter()
            .map(|(k, _)| KeyLocks::stripe(self.hash(k)))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        if stripes.len() > MAX_TX_KEYS {
            return Err(DbError::TooLarge(format!(
                "a batch locks at most {MAX_TX_KEYS} keys"
            )));
        }
        let owner = self.locks.owner();
        let mut held = Vec::with_capacity(stripes.len());
        let result = (|| {
            for &s in &stripes {
                self.locks.lock(s, owner)?;
                held.push(s);
            }
            self.commit_locked(writes)
        })();
        for s in held {
            self.locks.unlock(s, owner);
        }
        self.acknowledge_or_settle(result?)
    }

    /// Waits for a commit as the mode says; a transaction that changed nothing (`None`) waits,
    /// in `Commit` mode, for every change it may have read to be durable.
    fn acknowledge_or_settle(&self, staged: Option<Staged>) -> Result<(), DbError> {
        match staged {
            Some(staged) => self.acknowledge(staged),
            None if self.commit.mode == Durability::Commit => {
                let last = self.commit.next_ts.load(Ordering::SeqCst) - 1;
                self.wait_durable(last)
            }
            None => Ok(()),
        }
    }

    /// Commits writes whose keys' locks the caller holds; `None` when nothing changed.
    fn commit_locked(&self, writes: Vec<Write>) -> Result<Option<Staged>, DbError> {
        if writes.is_empty() {
            return Ok(None);
        }
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        match self.commit_once(&writes) {
            // Space freed since the last checkpoint is reusable only after the next one.
            Err(DbError::NoSpace { .. }) if self.frees_pending() => {
                self.checkpoint(false)?;
                self.commit_once(&writes)
            }
            other => other,
        }
    }

    /// Writes the new records (speculative: nothing names them yet), then, under the
    /// checkpoint latch, applies every change and stages them as one commit record. An error
    /// before the first change is applied undoes the records; one after it (a device error
    /// in the middle) fails the store, whose last durable state stays what recovery returns to.
    fn commit_once(&self, writes: &[Write]) -> Result<Option<Staged>, DbError> {
        let _s = self.begin_change()?;
        let mut puts = Vec::new();
        let mut data_pages = Vec::new();
        let mut deletes = Vec::new();
        let written: Result<(), DbError> = (|| {
            for (key, value) in writes {
                let hash = self.hash(key);
                match value {
                    Some(value) => {
                        let (mut e, pages) = self.write_record(key, value)?;
                        e.hash = hash as u32;
                        puts.push((hash, key, e));
                        data_pages.extend(pages);
                    }
                    None => {
                        if self.entry_of(hash, key)?.is_some() {
                            deletes.push((hash, key));
                        }
                    }
                }
            }
            Ok(())
        })();
        if let Err(err) = written {
            for (_, _, e) in &puts {
                self.release(e);
            }
            return Err(err);
        }
        let mut deltas = Vec::with_capacity(puts.len() + deletes.len());
        for (i, &(hash, key, e)) in puts.iter().enumerate() {
            match self.link(hash, key, e, None) {
                Ok(Linked::Replaced(old)) => self.release(&old),
                Ok(Linked::Inserted) => {
                    self.key_count.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Linked::Unchanged) => unreachable!("an unconditional link always links"),
                Err(err) if i == 0 => {
                    for (_, _, e) in &puts {
                        self.release(e);
                    }
                    return Err(err);
                }
                Err(err) => return Err(self.half_applied(err)),
            }
            deltas.push(Delta {
                op: DeltaOp::Put,
                hash,
                entry: e,
            });
        }
        for &(hash, key) in &deletes {
            match self.unlink(hash, key) {
                Ok(Some(old)) => deltas.push(Delta {
                    op: DeltaOp::Delete,
                    hash,
                    entry: old,
                }),
                Ok(None) => {}
                Err(err) => return Err(self.half_applied(err)),
            }
        }
        if deltas.is_empty() {
            return Ok(None);
        }
        data_pages.sort_unstable();
        data_pages.dedup();
        Ok(Some(self.stage(&deltas, &data_pages)))
    }

    /// A transaction failed with some of its changes applied in DRAM: the store stops taking
    /// writes (no checkpoint may make half a transaction durable); reopening recovers the
    /// last durable state.
    fn half_applied(&self, err: DbError) -> DbError {
        self.fail(format!("a transaction failed half applied: {err}"));
        err
    }
}

/// Waits before a conflicted transaction's next attempt: 2^attempt yields, at most 1,024.
fn backoff(attempt: u32) {
    for _ in 0..1u32 << attempt.min(10) {
        thread::yield_now();
    }
}

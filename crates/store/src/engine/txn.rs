//! Transactions and write batches: several keys changed atomically, as one commit record.
//!
//! A transaction takes each key's lock when it first touches it (read or write) and holds every
//! lock to the end (two-phase locking: serializable); its writes are buffered in DRAM. Commit
//! writes the new records out of place, applies every change under the checkpoint latch, stages
//! one commit record with all of them, then releases the locks and, in `Durability::Commit`,
//! waits for its group commit. A lock another transaction holds is waited for when the holder
//! is younger and given up on when it is older (wait-die, see `locks`: no deadlock can form):
//! then the attempt is a conflict, everything is undone (nothing was applied), and once the
//! older holder lets the lock go the closure runs again under the same owner id. Past the
//! store's lock timeout, or [`MAX_TX_ATTEMPTS`] attempts, it fails with [`DbError::Conflict`].

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::buckets::Linked;
use super::commit::{Delta, DeltaOp, Durability, Staged};
use super::locks::{KeyLocks, NotLocked};
use super::{check_sizes, Engine};
use crate::layout::Entry;
use crate::DbError;

mod trees;

pub(crate) use trees::TreeChanges;

/// Attempts of a transaction that keeps conflicting before it fails with
/// [`DbError::Conflict`]. A backstop: each retry follows an older transaction's release, and
/// the lock timeout (`DbOptions::lock_timeout`) is the bound that usually ends a wait.
pub const MAX_TX_ATTEMPTS: u32 = 4096;
/// Bytes of keys and values one transaction or batch may buffer (its writes wait in DRAM until
/// commit).
pub const MAX_TX_BYTES: usize = 64 << 20;
/// Keys one transaction or batch may lock (its lock table entries).
const MAX_TX_KEYS: usize = 1 << 16;

/// A write of a transaction or batch: a value, or a delete.
type Write = (Vec<u8>, Option<Vec<u8>>);

/// A transaction's writes after [`Engine::prepare`]: (hash, key, new record) of each put,
/// the data pages the records went to, (hash, key) of each delete whose key exists.
struct Prepared<'w> {
    puts: Vec<(u64, &'w Vec<u8>, Entry)>,
    data_pages: Vec<u64>,
    deletes: Vec<(u64, &'w Vec<u8>)>,
}

/// Blind writes to several keys, applied atomically by `Db::write` (`MSET`'s shape). Later
/// writes to a key replace earlier ones in the batch.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    writes: Vec<Write>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `value` under `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.bytes += key.len() + value.len();
        self.writes.push((key.to_vec(), Some(value.to_vec())));
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.bytes += key.len();
        self.writes.push((key.to_vec(), None));
        self
    }

    /// Writes in the batch.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether the batch holds no write.
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
    /// A lock could not be taken: the attempt must be retried (or fail, on a timeout),
    /// whatever the closure returns.
    conflicted: Option<NotLocked>,
    /// When the whole transaction stops waiting for locks.
    deadline_ns: u64,
    /// Tree changes applied so far, to stage at commit or undo (see `trees`).
    trees: TreeChanges<'a>,
    /// A drop found no catalog while the latch was held: made (by a checkpoint) between
    /// attempts.
    need_catalog: bool,
    /// A cache set filled with dirty index pages while the latch was held: a checkpoint
    /// runs between attempts.
    need_checkpoint: bool,
    /// Whether that may abort this attempt: only the first time in a transaction (a
    /// transaction whose own changes fill a set would otherwise fill it on every attempt).
    pressure_abort: bool,
    /// The last committed value read under its key's lock (key, value): a read-then-write
    /// command (`SET`, `INCR`, `APPEND`) reads it again at no page access. Valid until the
    /// transaction ends: the lock keeps others from changing it, and this transaction's own
    /// writes are in `index`, which every read checks first.
    read_memo: Option<(Vec<u8>, Option<Vec<u8>>)>,
}

impl<'a> Tx<'a> {
    fn new(engine: &'a Engine, owner: u64, deadline_ns: u64) -> Self {
        Self {
            engine,
            owner,
            held: Vec::new(),
            writes: Vec::new(),
            index: HashMap::new(),
            bytes: 0,
            conflicted: None,
            deadline_ns,
            trees: TreeChanges::default(),
            need_catalog: false,
            need_checkpoint: false,
            pressure_abort: true,
            read_memo: None,
        }
    }

    /// `key`'s committed value if the last read under its lock was of it.
    fn memo(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.read_memo
            .as_ref()
            .filter(|(k, _)| k.as_slice() == key)
            .map(|(_, v)| v)
    }

    /// Remembers `key`'s committed `value`, read under its lock.
    fn remember(&mut self, key: &[u8], value: &Option<Vec<u8>>) {
        let mut memo_key = self.read_memo.take().map(|(k, _)| k).unwrap_or_default();
        memo_key.clear();
        memo_key.extend_from_slice(key);
        self.read_memo = Some((memo_key, value.clone()));
    }

    /// Takes `key`'s lock for this transaction (no-op if held).
    fn lock(&mut self, key: &[u8]) -> Result<(), DbError> {
        self.lock_hash(self.engine.hash(key))
    }

    /// Takes the lock of the key hashing to `hash`. Once the transaction changed a tree (it
    /// holds the checkpoint latch) it never waits: a lock held by anyone is a conflict.
    fn lock_hash(&mut self, hash: u64) -> Result<(), DbError> {
        let stripe = KeyLocks::stripe(hash);
        if self.held.contains(&stripe) {
            return Ok(());
        }
        if self.held.len() >= MAX_TX_KEYS {
            return Err(DbError::TooLarge(format!(
                "a transaction locks at most {MAX_TX_KEYS} keys"
            )));
        }
        let locks = &self.engine.locks;
        let taken = if self.trees.holds_latch() {
            locks.lock_or_die_now(stripe, self.owner)
        } else {
            locks.lock_or_die(stripe, self.owner, self.deadline_ns)
        };
        if let Err(why) = taken {
            self.conflicted = Some(why);
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
        if let Some(value) = self.memo(key) {
            return Ok(value.clone());
        }
        let value = self.engine.get(key)?;
        self.remember(key, &value);
        Ok(value)
    }

    /// The first `n` bytes of `key`'s value as this transaction sees it (locks the key); a
    /// large value is not read past them.
    pub fn get_head(&mut self, key: &[u8], n: usize) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        self.lock(key)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i]
                .1
                .as_ref()
                .map(|v| v[..n.min(v.len())].to_vec()));
        }
        if let Some(value) = self.memo(key) {
            return Ok(value.as_ref().map(|v| v[..n.min(v.len())].to_vec()));
        }
        self.engine.get_head(key, n)
    }

    /// As [`Tx::get`], through a DRAM cache of small values: a committed value of at most
    /// [`crate::SMALL_VALUE_MAX`] bytes under a key of at most [`crate::SMALL_KEY_MAX`] is kept
    /// once read and dropped by any change of the key, so a key holding a small descriptor
    /// costs no index or record access after its first read.
    pub fn get_cached(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        self.lock(key)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i].1.clone());
        }
        if key.len() > super::small::SMALL_KEY_MAX {
            return self.engine.get(key);
        }
        let hash = self.engine.hash(key);
        if let Some(v) = self.engine.small.get(hash, key) {
            return Ok(Some(v));
        }
        let value = self.engine.get(key)?;
        if let Some(v) = value
            .as_ref()
            .filter(|v| v.len() <= super::small::SMALL_VALUE_MAX)
        {
            // Read from the store under the key's lock: the committed value.
            self.engine.small.insert(hash, key, v);
        }
        Ok(value)
    }

    /// True when `key` is stored, as this transaction sees it (its own writes included);
    /// locks the key.
    pub fn contains(&mut self, key: &[u8]) -> Result<bool, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        self.lock(key)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i].1.is_some());
        }
        if let Some(value) = self.memo(key) {
            return Ok(value.is_some());
        }
        self.engine.contains(key)
    }

    /// Buffers a put of `value` under `key` (applied at commit); locks the key.
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

    /// `key`'s committed value, read without taking its lock (not isolated: another
    /// transaction may change it at once; this transaction's own writes are seen). For scans
    /// that read more keys than a transaction may lock.
    pub fn get_unlocked(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        if let Some(&i) = self.index.get(key) {
            return Ok(self.writes[i].1.clone());
        }
        self.engine.get(key)
    }

    /// The store's keys of the buckets at `max_slots` directory slots from `start`, and the
    /// slot to continue from; not locked (see `Engine::scan_slots` for what a scan sees).
    pub fn scan_slots(
        &self,
        start: u64,
        max_slots: u64,
    ) -> Result<(Vec<Vec<u8>>, Option<u64>), DbError> {
        self.engine.scan_slots(start, max_slots)
    }

    /// The keys this transaction writes (buffered, not yet committed) that the store does
    /// not hold yet: a scan (`scan_slots`) cannot see them, so a scan inside the transaction
    /// adds them. At most the transaction's writes.
    pub fn buffered_new_keys(&self) -> Result<Vec<Vec<u8>>, DbError> {
        let mut out = Vec::new();
        for (key, value) in &self.writes {
            if value.is_some() && !self.engine.contains(key)? {
                out.push(key.clone());
            }
        }
        Ok(out)
    }

    /// The store's keyed hash of `bytes` (SipHash-1-3 under the store's random key: what the
    /// hash index uses; clients cannot compute it).
    pub fn hash_of(&self, bytes: &[u8]) -> u64 {
        self.engine.hash(bytes)
    }

    /// Slots of the store's directory now.
    pub fn directory_slots(&self) -> u64 {
        self.engine.directory_slots()
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
        // One id for every attempt: a retried transaction grows older until it wins.
        let owner = self.locks.owner();
        let deadline_ns = self.locks.deadline_ns();
        let mut pressure_retried = false;
        for attempt in 1..=MAX_TX_ATTEMPTS {
            let mut tx = Tx::new(self, owner, deadline_ns);
            tx.pressure_abort = !pressure_retried;
            let result = f(&mut tx);
            let trees = std::mem::take(&mut tx.trees);
            if tx.need_catalog || tx.need_checkpoint {
                self.undo_tree_changes(trees)?;
                let catalog = tx.need_catalog;
                drop(tx);
                if catalog {
                    self.catalog()?;
                } else {
                    pressure_retried = true;
                    self.checkpoint_if(false, Self::over_bounds)?;
                }
                continue;
            }
            if let Some(why) = tx.conflicted {
                self.undo_tree_changes(trees)?;
                drop(tx); // the locks, before waiting
                self.after_conflict(why, deadline_ns, attempt)?;
                continue;
            }
            let value = match result {
                Ok(value) => value,
                Err(err) => {
                    self.undo_tree_changes(trees)?;
                    return Err(err);
                }
            };
            let writes = std::mem::take(&mut tx.writes);
            let tree_changes = trees.changed();
            match self.commit_locked(writes, trees) {
                Ok(staged) => {
                    drop(tx); // the locks
                    self.acknowledge_or_settle(staged)?;
                    return Ok(value);
                }
                // Its tree changes were undone; space freed since the last checkpoint is
                // reusable after the next one: run it (holding nothing) and run again.
                Err(DbError::NoSpace { .. }) if tree_changes && self.frees_pending() => {
                    drop(tx);
                    self.checkpoint_if(false, Self::frees_pending)?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(DbError::Conflict {
            attempts: MAX_TX_ATTEMPTS,
        })
    }

    /// Applies a batch atomically: its keys' locks (wait-die, as a transaction), then one
    /// commit.
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
        let deadline_ns = self.locks.deadline_ns();
        for attempt in 1..=MAX_TX_ATTEMPTS {
            let held = match self.lock_all_or_die(&stripes, owner, deadline_ns) {
                Ok(held) => held,
                Err(why) => {
                    self.after_conflict(why, deadline_ns, attempt)?;
                    continue;
                }
            };
            let result = self.commit_locked(writes, TreeChanges::default());
            for s in held {
                self.locks.unlock(s, owner);
            }
            return self.acknowledge_or_settle(result?);
        }
        Err(DbError::Conflict {
            attempts: MAX_TX_ATTEMPTS,
        })
    }

    /// Takes every stripe's lock (wait-die); on a conflict releases those taken.
    fn lock_all_or_die(
        &self,
        stripes: &[usize],
        owner: u64,
        deadline_ns: u64,
    ) -> Result<Vec<usize>, NotLocked> {
        let mut held = Vec::with_capacity(stripes.len());
        for &s in stripes {
            if let Err(why) = self.locks.lock_or_die(s, owner, deadline_ns) {
                for s in held {
                    self.locks.unlock(s, owner);
                }
                return Err(why);
            }
            held.push(s);
        }
        Ok(held)
    }

    /// After a conflicted attempt (holding no lock): waits for the older holder to let go,
    /// or fails with [`DbError::Conflict`] at the deadline.
    fn after_conflict(
        &self,
        why: NotLocked,
        deadline_ns: u64,
        attempt: u32,
    ) -> Result<(), DbError> {
        let released = match why {
            NotLocked::Died { stripe, holder } => {
                self.locks.wait_released(stripe, holder, deadline_ns)
            }
            NotLocked::TimedOut => false,
        };
        if released {
            Ok(())
        } else {
            Err(DbError::Conflict { attempts: attempt })
        }
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

    /// Commits writes whose keys' locks the caller holds, with the tree changes already
    /// applied (staged in the same commit record); `None` when nothing changed. An error
    /// leaves nothing applied: the tree changes are undone (or the store failed).
    fn commit_locked(
        &self,
        writes: Vec<Write>,
        trees: TreeChanges<'_>,
    ) -> Result<Option<Staged>, DbError> {
        if writes.is_empty() && !trees.changed() {
            return Ok(None);
        }
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        if trees.changed() {
            // The checkpoint latch is held: no checkpoint can free space meanwhile.
            return match self.commit_once(&writes, Some(&trees)) {
                Ok(staged) => {
                    trees.release_replaced(self);
                    Ok(staged)
                }
                Err(err) if self.check_failed().is_ok() => {
                    self.undo_tree_changes(trees)?;
                    Err(err)
                }
                Err(err) => Err(err),
            };
        }
        match self.commit_once(&writes, None) {
            // Space freed since the last checkpoint is reusable only after the next one.
            Err(DbError::NoSpace { .. }) if self.frees_pending() => {
                self.checkpoint_if(false, Self::frees_pending)?;
                self.commit_once(&writes, None)
            }
            other => other,
        }
    }

    /// Writes the new records (speculative: nothing names them yet), then, under the
    /// checkpoint latch, applies every change and stages them as one commit record. An error
    /// before the first change is applied undoes the records; one after it (a device error
    /// in the middle) fails the store, whose last durable state stays what recovery returns to.
    fn commit_once(
        &self,
        writes: &[Write],
        trees: Option<&TreeChanges<'_>>,
    ) -> Result<Option<Staged>, DbError> {
        // A transaction that changed trees holds the latch already (taking it again could
        // wait for a checkpoint that waits for this holder).
        let _s = match trees {
            Some(_) => None,
            None => Some(self.begin_change()?),
        };
        let Prepared {
            puts,
            mut data_pages,
            deletes,
        } = self.prepare(writes)?;
        let mut deltas = trees.map_or_else(Vec::new, |t| t.deltas().to_vec());
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
        if let Some(t) = trees {
            data_pages.extend_from_slice(t.pages());
        }
        data_pages.sort_unstable();
        data_pages.dedup();
        Ok(Some(self.stage(&deltas, &data_pages)))
    }

    /// A transaction's first phase: each put's new record written (speculative: nothing names
    /// it yet), each delete's key looked up. An error releases the records written.
    #[inline]
    fn prepare<'w>(&self, writes: &'w [Write]) -> Result<Prepared<'w>, DbError> {
        let mut prepared = Prepared {
            puts: Vec::new(),
            data_pages: Vec::new(),
            deletes: Vec::new(),
        };
        let written: Result<(), DbError> = (|| {
            for (key, value) in writes {
                let hash = self.hash(key);
                match value {
                    Some(value) => {
                        let (mut e, pages) = self.write_record(key, value)?;
                        e.hash = crate::layout::tag(hash);
                        prepared.puts.push((hash, key, e));
                        prepared.data_pages.extend(pages);
                    }
                    None => {
                        if self.entry_of(hash, key)?.is_some() {
                            prepared.deletes.push((hash, key));
                        }
                    }
                }
            }
            Ok(())
        })();
        if let Err(err) = written {
            for (_, _, e) in &prepared.puts {
                self.release(e);
            }
            return Err(err);
        }
        Ok(prepared)
    }

    /// A transaction failed with some of its changes applied in DRAM: the store stops taking
    /// writes (no checkpoint may make half a transaction durable); reopening recovers the
    /// last durable state.
    fn half_applied(&self, err: DbError) -> DbError {
        self.fail(format!("a transaction failed half applied: {err}"));
        err
    }
}

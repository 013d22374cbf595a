//! The key-value operations: `get`, `contains`, `put`, `delete` and the key scan, each
//! admitted by `check_open`; a change under its key's lock and the checkpoint latch (shared),
//! staging its delta and then acknowledging as the durability mode says.
//!
//! Invariants: a put writes its record before it switches the entry, and releases the old
//! record after; a change's delta is staged while its key lock and the latch are held, and
//! its acknowledgement waits with neither held; a large value read outside the bucket's latch
//! is returned only when no checkpoint completed meanwhile (freed pages are reused only after
//! one), and it is read under the latch after `LARGE_READ_ATTEMPTS` tries.

use std::sync::atomic::Ordering;

use super::buckets::Linked;
use super::commit::{Delta, DeltaOp, Durability, Staged};
use super::locks::KeyGuard;
use super::{check_sizes, corrupt, Engine};
use crate::layout::*;
use crate::DbError;

/// What a point lookup found under the bucket's latch.
enum Lookup {
    /// The value (a small record's), or absent.
    Done(Option<Vec<u8>>),
    /// The key's record is an extent, to be read after the latch is released; the checkpoint
    /// epoch when it was live.
    Extent(Entry, u64),
}

/// Times a large read is tried outside the bucket's latch before it is done under it.
const LARGE_READ_ATTEMPTS: usize = 4;

impl Engine {
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let _op = self.check_key(key)?;
        for _ in 0..LARGE_READ_ATTEMPTS {
            let (e, epoch) = match self.lookup_value(key)? {
                Lookup::Done(value) => return Ok(value),
                Lookup::Extent(e, epoch) => (e, epoch),
            };
            // Read outside the bucket's latch: a writer of the bucket need not wait for a large
            // read. The record may be released meanwhile, but its pages are reused only after
            // a checkpoint completes: the same epoch after the read means nothing was reused.
            let read = self.read_record(&e, key, true);
            if self.epoch.load(Ordering::Acquire) == epoch {
                return read.map(Option::flatten);
            }
        }
        // A checkpoint at every attempt: read under the latch.
        self.lookup(key, true).map(Option::flatten)
    }

    /// A point lookup that reads a small record's value under the bucket's latch but, for a
    /// record in an extent, only checks its key there and returns its entry with the
    /// checkpoint epoch seen while the record was certainly live.
    fn lookup_value(&self, key: &[u8]) -> Result<Lookup, DbError> {
        let hash = self.hash(key);
        self.read_bucket_of(hash, |bytes, count| {
            let mut from = 0;
            while let Some(i) = next_hash_match(bytes, count, hash, from) {
                let e = Entry::read(bytes, i);
                if e.is_extent() {
                    if self.read_record(&e, key, false)?.is_some() {
                        return Ok(Lookup::Extent(e, self.epoch.load(Ordering::Acquire)));
                    }
                } else if let Some(value) = self.read_record(&e, key, true)? {
                    return Ok(Lookup::Done(value));
                }
                from = i + 1;
            }
            Ok(Lookup::Done(None))
        })
    }

    /// The first `n` bytes of `key`'s value (all of it when shorter), reading no more of a
    /// large value than that: for a caller that needs a header (a value's kind).
    pub fn get_head(&self, key: &[u8], n: usize) -> Result<Option<Vec<u8>>, DbError> {
        let _op = self.check_key(key)?;
        let hash = self.hash(key);
        self.read_bucket_of(hash, |bytes, count| {
            let mut from = 0;
            while let Some(i) = next_hash_match(bytes, count, hash, from) {
                let e = Entry::read(bytes, i);
                let (record, _) = self.record_bytes(&e, RECORD_HEADER + key.len() + n)?;
                let klen = get_u32(&record, 0) as usize;
                if klen == key.len() && record.get(RECORD_HEADER..RECORD_HEADER + klen) == Some(key)
                {
                    return Ok(Some(record[RECORD_HEADER + klen..].to_vec()));
                }
                from = i + 1;
            }
            Ok(None)
        })
    }

    pub fn contains(&self, key: &[u8]) -> Result<bool, DbError> {
        let _op = self.check_key(key)?;
        self.lookup(key, false).map(|found| found.is_some())
    }

    /// `None`: absent; `Some(value)` (the value only when `want_value`).
    fn lookup(&self, key: &[u8], want_value: bool) -> Result<Option<Option<Vec<u8>>>, DbError> {
        let hash = self.hash(key);
        self.read_bucket_of(hash, |bytes, count| {
            let mut from = 0;
            while let Some(i) = next_hash_match(bytes, count, hash, from) {
                let e = Entry::read(bytes, i);
                if let Some(value) = self.read_record(&e, key, want_value)? {
                    return Ok(Some(value));
                }
                from = i + 1;
            }
            Ok(None)
        })
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let _op = self.check_key(key)?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        check_sizes(key, Some(value), self.max_value)?;
        let hash = self.hash(key);
        let staged = {
            let _key = KeyGuard::lock(&self.locks, hash)?;
            match self.put_once(hash, key, value) {
                // Space freed since the last checkpoint is reusable only after the next one.
                Err(DbError::NoSpace { .. }) if self.frees_pending() => {
                    self.checkpoint_if(false, Self::frees_pending)?;
                    self.put_once(hash, key, value)
                }
                other => other,
            }?
        };
        self.acknowledge(staged)
    }

    /// Waits, as the durability mode says, for a staged change to be durable (called with no
    /// latch or key lock held).
    pub(super) fn acknowledge(&self, staged: Staged) -> Result<(), DbError> {
        if self.commit.mode == Durability::Commit || staged.sync_now {
            self.wait_durable(staged.ts)?;
        }
        Ok(())
    }

    /// The put under its key's lock: the record out of place, the entry switched, the delta
    /// staged.
    fn put_once(&self, hash: u64, key: &[u8], value: &[u8]) -> Result<Staged, DbError> {
        let _s = self.begin_change()?;
        let (mut e, pages) = self.write_record(key, value)?;
        e.hash = tag(hash);
        match self.link(hash, key, e, None) {
            Ok(Linked::Replaced(old)) => {
                self.release(&old);
            }
            Ok(Linked::Inserted) => {
                self.key_count.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Linked::Unchanged) => unreachable!("an unconditional link always links"),
            Err(err) => {
                self.release(&e);
                return Err(err);
            }
        }
        let delta = Delta {
            op: DeltaOp::Put,
            hash,
            entry: e,
        };
        Ok(self.stage(&[delta], &pages))
    }

    pub fn delete(&self, key: &[u8]) -> Result<bool, DbError> {
        let _op = self.check_key(key)?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        let hash = self.hash(key);
        let staged = {
            let _key = KeyGuard::lock(&self.locks, hash)?;
            let _s = self.begin_change()?;
            let Some(old) = self.unlink(hash, key)? else {
                return Ok(false);
            };
            let delta = Delta {
                op: DeltaOp::Delete,
                hash,
                entry: old,
            };
            self.stage(&[delta], &[])
        };
        self.acknowledge(staged)?;
        Ok(true)
    }

    /// The keys of the next bucket at or after directory slot `start` that holds any (each
    /// bucket is visited at its lowest slot), and the slot to continue from (`None`: done).
    pub fn scan_keys_from(&self, start: u64) -> Result<(Vec<Vec<u8>>, Option<u64>), DbError> {
        let mut index = start;
        loop {
            let (keys, next) = self.scan_slots(index, 1)?;
            match next {
                Some(n) if keys.is_empty() => index = n,
                _ => return Ok((keys, next)),
            }
        }
    }

    /// The keys of every bucket whose lowest slot is among the `max_slots` directory slots
    /// from `start` (at most `max_slots` buckets, each at most `BUCKET_CAP` keys), and the slot
    /// to continue from (`None`: past the directory's end).
    ///
    /// A key present for a whole scan (calls from 0, each continuing where the last stopped)
    /// is returned at least once, whatever splits happen meanwhile: buckets never merge and
    /// are never freed; a split keeps the old bucket's page and pattern and moves keys only to
    /// the new bucket, whose pattern (`pattern | 2^depth`) is higher; so the pattern of the
    /// bucket holding a key never decreases while the scan's slot only increases by one, and
    /// the scan reaches the slot equal to the key's pattern at a moment its bucket holds it
    /// (mid-split a moved key is in both buckets until the old one is rewritten).
    pub fn scan_slots(
        &self,
        start: u64,
        max_slots: u64,
    ) -> Result<(Vec<Vec<u8>>, Option<u64>), DbError> {
        let _op = self.check_open()?;
        let mut keys = Vec::new();
        let end = start.saturating_add(max_slots.max(1));
        let mut index = start;
        // Bounded: `max_slots` passes at most.
        loop {
            let global = self.global_depth.load(Ordering::Acquire);
            if index >= 1u64 << global {
                return Ok((keys, None));
            }
            if index >= end {
                return Ok((keys, Some(index)));
            }
            self.keys_at_slot(index, global, &mut keys)?;
            index += 1;
        }
    }

    /// Appends the keys of the bucket at directory slot `index` if `index` is its lowest slot
    /// (its pattern).
    fn keys_at_slot(
        &self,
        index: u64,
        global: u32,
        keys: &mut Vec<Vec<u8>>,
    ) -> Result<(), DbError> {
        let (bucket, depth) = self.dir_get(index)?;
        if index >= 1u64 << depth.min(global) {
            return Ok(()); // visited at its lowest slot, its pattern
        }
        let b = self.bucket(bucket, index)?;
        b.read(|bytes| -> Result<(), DbError> {
            if get_u32(bytes, 0) != KIND_BUCKET {
                return Err(corrupt(
                    bucket,
                    "directory points to a page that is no bucket",
                ));
            }
            if bucket_pattern(bytes) != index {
                return Ok(()); // visited at its lowest slot
            }
            for i in 0..bucket_count(bytes).min(BUCKET_CAP) {
                keys.push(self.record_key(&Entry::read(bytes, i))?);
            }
            Ok(())
        })
    }

    /// Slots of the directory now (2^global depth).
    pub fn directory_slots(&self) -> u64 {
        1u64 << self.global_depth.load(Ordering::Acquire)
    }
}

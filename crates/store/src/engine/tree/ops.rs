//! A tree's durable operations: create, put, delete (each its own transaction, staged and
//! acknowledged as a put is), point reads and scans with their values, and recovery's redo
//! of a tree delta.
//!
//! A tree entry's value lives in a record whose key is `[tree u64 big-endian][key]`, flagged
//! [`RECORD_TREE`]; the leaf names the record and keeps small values inline, so a point read
//! of a small value costs the leaf only. A delta names the record as a put's does, so
//! recovery redoes a tree change from the record.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::{Direction, Found};
use crate::engine::commit::{Delta, DeltaOp};
use crate::engine::locks::KeyGuard;
use crate::engine::{corrupt, Engine};
use crate::layout::*;
use crate::DbError;

/// A tree's name: its root's page (which never moves while the tree exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeId(pub u64);

/// Times a value read outside its leaf's latch is tried before an error.
const VALUE_READ_ATTEMPTS: usize = 16;

/// The key of the record holding `tree`'s entry `key`.
pub(crate) fn record_key(tree: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&tree.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The tree and key a tree record's key names.
pub(crate) fn split_record_key(record_key: &[u8]) -> Option<(u64, &[u8])> {
    let (tree, key) = record_key.split_first_chunk::<8>()?;
    Some((u64::from_be_bytes(*tree), key))
}

/// The value a leaf keeps inline: the whole value when it is small.
fn inline_of(value: &[u8]) -> Option<&[u8]> {
    (value.len() <= INLINE_MAX).then_some(value)
}

impl Engine {
    fn check_tree_key(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), DbError> {
        crate::engine::check_sizes_tree(key, value, self.max_value)
    }

    /// Creates an empty tree.
    pub fn tree_create(&self) -> Result<TreeId, DbError> {
        let _op = self.check_open()?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        let (tree, staged) = {
            let _s = self.begin_change()?;
            let root = self.tree_new_root()?;
            let delta = Delta {
                op: DeltaOp::TreeCreate,
                hash: 0,
                entry: Entry {
                    hash: 0,
                    page: root,
                    slot: 0,
                },
            };
            (root, self.stage(&[delta], &[]))
        };
        self.acknowledge(staged)?;
        Ok(TreeId(tree))
    }

    /// The catalog tree's root, made by the first named tree: an empty root, then a
    /// checkpoint whose superblock names it, and only then published (a staged change into a
    /// catalog no checkpoint names could not be redone).
    pub(crate) fn catalog(&self) -> Result<u64, DbError> {
        let catalog = self.catalog.load(Ordering::Acquire);
        if catalog != 0 {
            return Ok(catalog);
        }
        let _made = self.catalog_lock.lock();
        let catalog = self.catalog.load(Ordering::Acquire);
        if catalog != 0 {
            return Ok(catalog);
        }
        let root = {
            let _s = self.begin_change()?;
            self.tree_new_root()?
        };
        self.catalog_durable.store(root, Ordering::Release);
        self.checkpoint(false)?;
        self.catalog.store(root, Ordering::Release);
        Ok(root)
    }

    /// The tree named `name` in the store's catalog, if there is one.
    pub fn tree_lookup(&self, name: &[u8]) -> Result<Option<TreeId>, DbError> {
        let _op = self.check_open()?;
        self.check_tree_key(name, None)?;
        if name.first() == Some(&0) {
            return Err(DbError::Config(
                "tree names starting with a zero byte are the store's own".into(),
            ));
        }
        let catalog = self.catalog.load(Ordering::Acquire);
        if catalog == 0 {
            return Ok(None);
        }
        self.tree_get(TreeId(catalog), name)?
            .map(|v| {
                let id: [u8; 8] = v
                    .try_into()
                    .map_err(|_| corrupt(catalog, "a catalog entry is not a tree's page"))?;
                Ok(TreeId(u64::from_le_bytes(id)))
            })
            .transpose()
    }

    /// The tree named `name` in the store's catalog, created (empty) if there is none.
    pub fn tree_named(&self, name: &[u8]) -> Result<TreeId, DbError> {
        if let Some(tree) = self.tree_lookup(name)? {
            return Ok(tree);
        }
        let _op = self.check_open()?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        let catalog = self.catalog()?;
        // Two creators of one name: the second finds the first's under the lock.
        let hash = self.hash(&record_key(catalog, name));
        let (tree, staged) = {
            let _key = KeyGuard::lock(&self.locks, hash)?;
            if let Some(tree) = self.tree_lookup(name)? {
                return Ok(tree);
            }
            let _s = self.begin_change()?;
            let root = self.tree_new_root()?;
            let create = Delta {
                op: DeltaOp::TreeCreate,
                hash: 0,
                entry: Entry {
                    hash: 0,
                    page: root,
                    slot: 0,
                },
            };
            let (named, pages) = self.tree_put_applied(catalog, name, &root.to_le_bytes())?;
            (root, self.stage(&[create, named], &pages))
        };
        self.acknowledge(staged)?;
        Ok(TreeId(tree))
    }

    /// Sets `key` of `tree` to `value`.
    pub fn tree_put(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let _op = self.check_open()?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        self.check_tree_key(key, Some(value))?;
        let staged = {
            let _s = self.begin_change()?;
            let (delta, pages) = self.tree_put_applied(tree.0, key, value)?;
            self.stage(&[delta], &pages)
        };
        self.acknowledge(staged)
    }

    /// The put applied (under the checkpoint latch): the record written, the leaf switched,
    /// the old record released. Returns the delta to stage and the pages of the record.
    pub(crate) fn tree_put_applied(
        &self,
        tree: u64,
        key: &[u8],
        value: &[u8],
    ) -> Result<(Delta, Vec<u64>), DbError> {
        let rk = record_key(tree, key);
        let (e, pages) = self.write_record_flagged(&rk, value, RECORD_TREE)?;
        let linked = {
            let _t = self.tree_lock(tree);
            self.tree_link(tree, key, e.page, e.slot, inline_of(value))
        };
        match linked {
            Ok(Some(old)) => self.release(&old),
            Ok(None) => {}
            Err(err) => {
                self.release(&e);
                return Err(err);
            }
        }
        let delta = Delta {
            op: DeltaOp::TreePut,
            hash: self.hash(&rk),
            entry: e,
        };
        Ok((delta, pages))
    }

    /// Deletes `key` of `tree`; true when it was there.
    pub fn tree_delete(&self, tree: TreeId, key: &[u8]) -> Result<bool, DbError> {
        let _op = self.check_open()?;
        if self.read_only {
            return Err(DbError::ReadOnly);
        }
        self.check_tree_key(key, None)?;
        let staged = {
            let _s = self.begin_change()?;
            let Some(delta) = self.tree_delete_applied(tree.0, key)? else {
                return Ok(false);
            };
            self.stage(&[delta], &[])
        };
        self.acknowledge(staged)?;
        Ok(true)
    }

    /// The delete applied (under the checkpoint latch): the entry removed, its record
    /// released. Returns the delta to stage, naming the removed record.
    pub(crate) fn tree_delete_applied(
        &self,
        tree: u64,
        key: &[u8],
    ) -> Result<Option<Delta>, DbError> {
        let old = {
            let _t = self.tree_lock(tree);
            self.tree_unlink(tree, key)?
        };
        let Some(old) = old else {
            return Ok(None);
        };
        self.release(&old);
        Ok(Some(Delta {
            op: DeltaOp::TreeDelete,
            hash: self.hash(&record_key(tree, key)),
            entry: old,
        }))
    }

    /// The value of `key` in `tree`.
    pub fn tree_get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let _op = self.check_open()?;
        self.check_tree_key(key, None)?;
        for _ in 0..VALUE_READ_ATTEMPTS {
            let epoch = self.epoch.load(Ordering::Acquire);
            let Some(found) = self.tree_find(tree.0, key)? else {
                return Ok(None);
            };
            if let Some(v) = found.inline {
                return Ok(Some(v));
            }
            if let Some(v) = self.value_of(tree.0, &found, epoch)? {
                return Ok(Some(v));
            }
        }
        Err(corrupt(tree.0, "a tree value kept moving while read"))
    }

    /// The value of an entry read from a leaf (outside its latch) whose record is not inline:
    /// `None` when the record may have been released and its page reused meanwhile (a
    /// checkpoint completed since `epoch`, or the record no longer holds the key): look again.
    fn value_of(&self, tree: u64, found: &Found, epoch: u64) -> Result<Option<Vec<u8>>, DbError> {
        let rk = record_key(tree, &found.key);
        let read = self.read_record(&found.entry(), &rk, true);
        if self.epoch.load(Ordering::Acquire) != epoch {
            return Ok(None);
        }
        match read? {
            Some(Some(v)) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Entries of `tree` with their values: up to `limit` from `from` in `direction` while
    /// `within` holds; true when the scan reached its end.
    #[allow(clippy::type_complexity)]
    pub fn tree_entries(
        &self,
        tree: TreeId,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool), DbError> {
        let _op = self.check_open()?;
        let epoch = self.epoch.load(Ordering::Acquire);
        let (found, ended) = self.tree_scan(tree.0, from, direction, limit, within)?;
        let mut out = Vec::with_capacity(found.len());
        for f in found {
            let value = match f.inline {
                Some(v) => v,
                None => match self.value_of(tree.0, &f, epoch)? {
                    Some(v) => v,
                    // Moved since the leaf was read: read it alone.
                    None => match self.tree_get(tree, &f.key)? {
                        Some(v) => v,
                        None => continue, // deleted meanwhile
                    },
                },
            };
            out.push((f.key, value));
        }
        Ok((out, ended))
    }

    /// Entries in `tree`.
    pub fn tree_len(&self, tree: TreeId) -> Result<u64, DbError> {
        let _op = self.check_open()?;
        self.tree_count(tree.0)
    }

    /// Entries of `tree` whose keys are below `key`.
    pub fn tree_position(&self, tree: TreeId, key: &[u8]) -> Result<u64, DbError> {
        let _op = self.check_open()?;
        self.check_tree_key(key, None)?;
        self.tree_rank(tree.0, key)
    }

    /// The key at position `rank` of `tree` (0: the first), if it has that many entries.
    pub fn tree_key_at(&self, tree: TreeId, rank: u64) -> Result<Option<Vec<u8>>, DbError> {
        let _op = self.check_open()?;
        Ok(self.tree_select(tree.0, rank)?.map(|f| f.key))
    }

    /// Recovery's redo of a tree delta (the record it names was checked whole by pass 1).
    pub(crate) fn redo_tree(&self, d: &Delta, ts: u64) -> Result<(), DbError> {
        match d.op {
            DeltaOp::TreeCreate => return self.tree_reset_root(d.entry.page),
            DeltaOp::TreeFree => return self.tree_free_root(d.entry.page),
            _ => {}
        }
        let rk = self.record_key(&d.entry)?;
        let (tree, key) = split_record_key(&rk)
            .ok_or_else(|| corrupt(d.entry.page, "a tree record's key is too short"))?;
        let _t = self.tree_lock(tree);
        match d.op {
            DeltaOp::TreePut => {
                let value = self
                    .read_record(&d.entry, &rk, true)?
                    .flatten()
                    .ok_or_else(|| corrupt(d.entry.page, "a redone tree record is gone"))?;
                let inline = inline_of(&value);
                if let Some(old) = self.tree_link(tree, key, d.entry.page, d.entry.slot, inline)? {
                    self.release(&old);
                }
            }
            DeltaOp::TreeDelete => match self.tree_unlink(tree, key)? {
                Some(old) => self.release(&old),
                None => {
                    return Err(corrupt(
                        d.entry.page,
                        format!("commit record {ts} deletes a tree entry that is absent"),
                    ))
                }
            },
            DeltaOp::Put | DeltaOp::Delete | DeltaOp::TreeCreate | DeltaOp::TreeFree => {
                unreachable!("not a tree delta")
            }
        }
        Ok(())
    }
}

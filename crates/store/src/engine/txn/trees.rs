//! Tree changes inside a transaction.
//!
//! A tree changes in place (its nodes are index pages, and a transaction's later reads of the
//! tree, scans included, must see its own changes), so a transaction applies each tree
//! change at once, under the checkpoint latch (shared) taken at its first one and held to its
//! end: no checkpoint can capture a change that may still be undone. Its deltas are staged
//! with the hash index's at commit, in one commit record; the records its changes replaced
//! are released only then. An abort (a conflict, an error, the closure's own `Err`) undoes
//! the changes in reverse order before the latch is let go. While it holds the latch a
//! transaction never waits for a key lock (a checkpoint waiting for the latch would stop the
//! lock's holder if it needed the latch too): a lock held by another is a conflict, the
//! transaction undoes its changes, and it runs again once that lock is free.
//!
//! Reads of a tree take the lock of the key read (`tree_get`); scans, counts and positions
//! lock nothing: lock a key that guards the tree (as the server locks a collection's key)
//! for them to be isolated.

use std::ops::Bound;

use super::Tx;
use crate::engine::checkpoint::SharedGuard;
use crate::engine::commit::{Delta, DeltaOp};
use crate::engine::tree::{record_key, Direction, TreeId};
use crate::engine::{check_sizes_tree, Engine};
use crate::layout::*;
use crate::DbError;

/// What undoes one tree change.
enum Undo {
    /// `key` was set to record `new`; it named `old` before (`None`: it was absent).
    Put {
        tree: u64,
        key: Vec<u8>,
        old: Option<Entry>,
        new: Entry,
    },
    /// `key`, naming `old`, was deleted.
    Delete { tree: u64, key: Vec<u8>, old: Entry },
    /// The tree rooted at `root` was created.
    Create { root: u64 },
}

/// A transaction's tree changes so far.
#[derive(Default)]
pub(crate) struct TreeChanges<'a> {
    latch: Option<SharedGuard<'a>>,
    deltas: Vec<Delta>,
    /// Data pages of the new records.
    pages: Vec<u64>,
    undo: Vec<Undo>,
    /// Records replaced or deleted: released once the transaction commits.
    replaced: Vec<Entry>,
}

impl TreeChanges<'_> {
    pub fn holds_latch(&self) -> bool {
        self.latch.is_some()
    }

    pub fn changed(&self) -> bool {
        !self.deltas.is_empty()
    }

    pub fn deltas(&self) -> &[Delta] {
        &self.deltas
    }

    pub fn pages(&self) -> &[u64] {
        &self.pages
    }

    /// After the commit is staged (the latch still held): the replaced records go.
    pub fn release_replaced(self, engine: &Engine) {
        for e in &self.replaced {
            engine.release(e);
        }
    }
}

impl<'a> Tx<'a> {
    /// Takes the checkpoint latch for the rest of the transaction (its first tree change),
    /// and bounds what the transaction changes: index pages changed while it holds the latch
    /// cannot be written or evicted before it ends (no checkpoint can run), so past twice the
    /// store's checkpoint bound it fails with `TooLarge` (and is undone).
    fn latch(&mut self) -> Result<(), DbError> {
        if self.trees.latch.is_none() {
            self.trees.latch = Some(self.engine.begin_change()?);
        }
        if self.pressure_abort && self.engine.set_pressure() {
            // Its changes are undone, a checkpoint writes the dirty index pages, it runs
            // again.
            self.need_checkpoint = true;
            return Err(DbError::Conflict { attempts: 0 });
        }
        if self.engine.index_pages_changed_over(2) {
            return Err(DbError::TooLarge(
                "a transaction's tree changes outgrow the cache's room for changed index pages"
                    .into(),
            ));
        }
        Ok(())
    }

    fn lock_tree_key(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        check_sizes_tree(key, None, self.engine.max_value)?;
        self.lock_hash(self.engine.hash(&record_key(tree.0, key)))
    }

    /// Creates an empty tree (undone with the transaction).
    pub fn create_tree(&mut self) -> Result<TreeId, DbError> {
        if self.engine.read_only {
            return Err(DbError::ReadOnly);
        }
        self.latch()?;
        let root = self.engine.tree_new_root()?;
        self.trees.undo.push(Undo::Create { root });
        self.trees.deltas.push(Delta {
            op: DeltaOp::TreeCreate,
            hash: 0,
            entry: Entry {
                hash: 0,
                page: root,
                slot: 0,
            },
        });
        Ok(TreeId(root))
    }

    /// The value of `key` in `tree`, this transaction's changes included (locks the key).
    pub fn tree_get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.lock_tree_key(tree, key)?;
        self.engine.tree_get(tree, key)
    }

    /// Sets `key` of `tree` (locks the key; applied now, undone if the transaction aborts);
    /// true when the key was there.
    pub fn tree_put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool, DbError> {
        check_sizes_tree(key, Some(value), self.engine.max_value)?;
        self.lock_tree_key(tree, key)?;
        self.tree_put_unlocked(tree, key, value)
    }

    /// [`Tx::tree_put`] without the key's lock: for a caller holding a lock that guards the
    /// whole tree (the server locks a collection's key), so a large change does not take a
    /// lock per entry.
    pub fn tree_put_unlocked(
        &mut self,
        tree: TreeId,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool, DbError> {
        check_sizes_tree(key, Some(value), self.engine.max_value)?;
        if self.engine.read_only {
            return Err(DbError::ReadOnly);
        }
        self.latch()?;
        let e = self.engine;
        let rk = record_key(tree.0, key);
        let (new, pages) = e.write_record_flagged(&rk, value, RECORD_TREE)?;
        let inline = (value.len() <= INLINE_MAX).then_some(value);
        let linked = {
            let _t = e.tree_lock(tree.0);
            e.tree_link(tree.0, key, new.page, new.slot, inline)
        };
        let old = match linked {
            Ok(old) => old,
            Err(err) => {
                e.release(&new);
                return Err(err);
            }
        };
        self.trees.replaced.extend(old);
        self.trees.undo.push(Undo::Put {
            tree: tree.0,
            key: key.to_vec(),
            old,
            new,
        });
        self.trees.deltas.push(Delta {
            op: DeltaOp::TreePut,
            hash: e.hash(&rk),
            entry: new,
        });
        self.trees.pages.extend(pages);
        Ok(old.is_some())
    }

    /// [`Tx::tree_get`] without the key's lock (see [`Tx::tree_put_unlocked`]).
    pub fn tree_get_unlocked(
        &mut self,
        tree: TreeId,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes_tree(key, None, self.engine.max_value)?;
        self.engine.tree_get(tree, key)
    }

    /// The entry at position `rank` of `tree` (0: the first) with its value; locks nothing.
    #[allow(clippy::type_complexity)]
    pub fn tree_entry_at(
        &mut self,
        tree: TreeId,
        rank: u64,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>, DbError> {
        let Some(key) = self.engine.tree_key_at(tree, rank)? else {
            return Ok(None);
        };
        Ok(self.engine.tree_get(tree, &key)?.map(|v| (key, v)))
    }

    /// Deletes `key` of `tree`; true when it was there (locks the key).
    pub fn tree_delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool, DbError> {
        self.lock_tree_key(tree, key)?;
        self.tree_delete_unlocked(tree, key)
    }

    /// [`Tx::tree_delete`] without the key's lock (see [`Tx::tree_put_unlocked`]).
    pub fn tree_delete_unlocked(&mut self, tree: TreeId, key: &[u8]) -> Result<bool, DbError> {
        check_sizes_tree(key, None, self.engine.max_value)?;
        if self.engine.read_only {
            return Err(DbError::ReadOnly);
        }
        self.latch()?;
        let e = self.engine;
        let old = {
            let _t = e.tree_lock(tree.0);
            e.tree_unlink(tree.0, key)?
        };
        let Some(old) = old else {
            return Ok(false);
        };
        self.trees.replaced.push(old);
        self.trees.undo.push(Undo::Delete {
            tree: tree.0,
            key: key.to_vec(),
            old,
        });
        self.trees.deltas.push(Delta {
            op: DeltaOp::TreeDelete,
            hash: e.hash(&record_key(tree.0, key)),
            entry: old,
        });
        Ok(true)
    }

    /// Drops `tree`: listed for the background reclaimer in this transaction (its entries
    /// and pages are reclaimed after it commits, a batch at a time); use it no more.
    pub fn drop_tree(&mut self, tree: TreeId) -> Result<(), DbError> {
        if self.engine.read_only {
            return Err(DbError::ReadOnly);
        }
        if self
            .engine
            .catalog
            .load(std::sync::atomic::Ordering::Acquire)
            == 0
        {
            if self.trees.holds_latch() {
                // Made by a checkpoint, which this transaction's latch would hold up.
                self.need_catalog = true;
                return Err(DbError::Conflict { attempts: 0 });
            }
            self.engine.catalog()?;
        }
        let (name, catalog) = self.engine.drop_listing(tree)?;
        self.tree_put(TreeId(catalog), &name, &[]).map(|_| ())
    }

    /// See [`crate::DbHandle::tree_entries`]; locks nothing (see the module docs).
    #[allow(clippy::type_complexity)]
    pub fn tree_entries(
        &mut self,
        tree: TreeId,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool), DbError> {
        self.engine
            .tree_entries(tree, from, direction, limit, within)
    }

    /// Entries in `tree`; locks nothing.
    pub fn tree_len(&mut self, tree: TreeId) -> Result<u64, DbError> {
        self.engine.tree_len(tree)
    }

    /// Entries of `tree` below `key`; locks nothing.
    pub fn tree_position(&mut self, tree: TreeId, key: &[u8]) -> Result<u64, DbError> {
        self.engine.tree_position(tree, key)
    }

    /// The key at position `rank` of `tree`; locks nothing.
    pub fn tree_key_at(&mut self, tree: TreeId, rank: u64) -> Result<Option<Vec<u8>>, DbError> {
        self.engine.tree_key_at(tree, rank)
    }
}

impl Engine {
    /// Undoes a transaction's tree changes, last first (under its latch, released after).
    /// An undo that fails leaves half a transaction in DRAM: the store fails (reopening
    /// recovers the last durable state).
    pub(crate) fn undo_tree_changes(&self, changes: TreeChanges<'_>) -> Result<(), DbError> {
        let TreeChanges { latch, undo, .. } = changes;
        for u in undo.into_iter().rev() {
            if let Err(err) = self.undo_one(u) {
                self.fail(format!(
                    "undoing an aborted transaction's tree change: {err}"
                ));
                return Err(err);
            }
        }
        drop(latch);
        Ok(())
    }

    fn undo_one(&self, u: Undo) -> Result<(), DbError> {
        match u {
            Undo::Put {
                tree,
                key,
                old,
                new,
            } => {
                let _t = self.tree_lock(tree);
                let now = match old {
                    None => self.tree_unlink(tree, &key)?,
                    Some(old) => {
                        let inline = self.inline_value(tree, &key, &old)?;
                        self.tree_link(tree, &key, old.page, old.slot, inline.as_deref())?
                    }
                };
                if now.is_none_or(|e| (e.page, e.slot) != (new.page, new.slot)) {
                    return Err(crate::engine::corrupt(tree, "an undone tree entry moved"));
                }
                self.release(&new);
            }
            Undo::Delete { tree, key, old } => {
                let _t = self.tree_lock(tree);
                let inline = self.inline_value(tree, &key, &old)?;
                if self
                    .tree_link(tree, &key, old.page, old.slot, inline.as_deref())?
                    .is_some()
                {
                    return Err(crate::engine::corrupt(
                        tree,
                        "an undone delete found its key",
                    ));
                }
            }
            Undo::Create { root } => self.tree_free_root(root)?,
        }
        Ok(())
    }

    /// The value a leaf keeps inline for `key`'s record `e` (read back from the record).
    fn inline_value(&self, tree: u64, key: &[u8], e: &Entry) -> Result<Option<Vec<u8>>, DbError> {
        let value = self
            .read_record(e, &record_key(tree, key), true)?
            .flatten()
            .ok_or_else(|| crate::engine::corrupt(e.page, "an undone entry's record is gone"))?;
        Ok((value.len() <= INLINE_MAX).then_some(value))
    }
}

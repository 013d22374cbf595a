//! The embedded API of ordered trees (`engine/tree.rs`): create, point operations, positions,
//! and range and prefix scans in both directions.

use std::collections::VecDeque;
use std::ops::Bound;

use super::{Db, DbHandle};
use crate::engine::{Direction, TreeId};
use crate::DbError;

/// Entries a [`TreeRange`] fetches per job.
const RANGE_BATCH: usize = 256;

/// The smallest key above every key starting with `prefix` (`None`: no such key, every key
/// from `prefix` on starts with it).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Whether `key` lies within `bound` as a range's upper (`upper`) or lower end.
fn within(bound: &Bound<Vec<u8>>, key: &[u8], upper: bool) -> bool {
    match (bound, upper) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(b), true) => key <= b.as_slice(),
        (Bound::Excluded(b), true) => key < b.as_slice(),
        (Bound::Included(b), false) => key >= b.as_slice(),
        (Bound::Excluded(b), false) => key > b.as_slice(),
    }
}

impl Db {
    /// Creates an empty ordered tree; its [`TreeId`] names it from now on (keep it, e.g. as a
    /// key's value).
    ///
    /// ```no_run
    /// use std::ops::Bound;
    /// use tamer_store::{Db, DbOptions, Direction};
    /// let db = Db::open("/var/tmp/ordered.store", DbOptions::new(32 << 20)).unwrap();
    /// let tree = db.tree(b"users").unwrap(); // or `db.create_tree()`, unnamed
    /// db.tree_put(tree, b"user:2", b"bob").unwrap();
    /// db.tree_put(tree, b"user:1", b"ann").unwrap();
    /// let users: Vec<_> = db.prefix(tree, b"user:", Direction::Forward).collect();
    /// assert_eq!(users[0].as_ref().unwrap().0, b"user:1");
    /// let last = db.range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Reverse).next();
    /// assert_eq!(last.unwrap().unwrap().1, b"bob");
    /// ```
    pub fn create_tree(&self) -> Result<TreeId, DbError> {
        self.run(|h| h.create_tree())?
    }

    /// The tree named `name` (up to [`crate::MAX_TREE_KEY`] bytes) in the store's catalog,
    /// created empty if there is none (the same id every time, across reopens).
    pub fn tree(&self, name: &[u8]) -> Result<TreeId, DbError> {
        let name = name.to_vec();
        self.run(move |h| h.tree(&name))?
    }

    /// The tree named `name`, if the catalog has one (creates nothing).
    pub fn find_tree(&self, name: &[u8]) -> Result<Option<TreeId>, DbError> {
        let name = name.to_vec();
        self.run(move |h| h.find_tree(&name))?
    }

    /// Sets `key` of `tree` (keys up to [`crate::MAX_TREE_KEY`] bytes, values up to
    /// `max_value_bytes`).
    pub fn tree_put(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let (key, value) = (key.to_vec(), value.to_vec());
        self.run(move |h| h.tree_put(tree, &key, &value))?
    }

    /// The value of `key` in `tree`.
    pub fn tree_get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let key = key.to_vec();
        self.run(move |h| h.tree_get(tree, &key))?
    }

    /// Deletes `key` of `tree`; true when it was there.
    pub fn tree_delete(&self, tree: TreeId, key: &[u8]) -> Result<bool, DbError> {
        let key = key.to_vec();
        self.run(move |h| h.tree_delete(tree, &key))?
    }

    /// Drops `tree` (its id must not be used again): its entries and pages are reclaimed in
    /// the background, [`crate::RECLAIM_BATCH`] entries per step of core 0's cleaner
    /// (`DbHandle::reclaim_trees` runs a step).
    pub fn drop_tree(&self, tree: TreeId) -> Result<(), DbError> {
        self.run(move |h| h.transaction(|tx| tx.drop_tree(tree)))?
    }

    /// Entries in `tree` (O(1): the root's counts).
    pub fn tree_len(&self, tree: TreeId) -> Result<u64, DbError> {
        self.run(move |h| h.tree_len(tree))?
    }

    /// Entries of `tree` whose keys are below `key` (O(log n)).
    pub fn tree_position(&self, tree: TreeId, key: &[u8]) -> Result<u64, DbError> {
        let key = key.to_vec();
        self.run(move |h| h.tree_position(tree, &key))?
    }

    /// The entries of `tree` between `start` and `end` (ascending key bounds), in
    /// `direction`, fetched [`RANGE_BATCH`] at a time: each batch is read at one moment, and
    /// an entry written between batches is seen if the scan has not passed its key.
    pub fn range(
        &self,
        tree: TreeId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
    ) -> TreeRange<'_> {
        let (start, end) = (start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec));
        let (next, stop) = match direction {
            Direction::Forward => (start, end),
            Direction::Reverse => (end, start),
        };
        TreeRange {
            db: self,
            tree,
            direction,
            next: Some(next),
            stop,
            buffered: VecDeque::new(),
        }
    }

    /// The entries of `tree` whose keys start with `prefix`, in `direction`.
    pub fn prefix(&self, tree: TreeId, prefix: &[u8], direction: Direction) -> TreeRange<'_> {
        let end = prefix_end(prefix);
        let end = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.range(tree, Bound::Included(prefix), end, direction)
    }
}

/// The iterator of [`Db::range`] and [`Db::prefix`]: `(key, value)` in order.
pub struct TreeRange<'a> {
    db: &'a Db,
    tree: TreeId,
    direction: Direction,
    /// Where the next batch starts; `None` once the range is done.
    next: Option<Bound<Vec<u8>>>,
    /// The range's far end in `direction`.
    stop: Bound<Vec<u8>>,
    buffered: VecDeque<(Vec<u8>, Vec<u8>)>,
}

impl Iterator for TreeRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), DbError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.buffered.pop_front() {
            return Some(Ok(entry));
        }
        let from = self.next.take()?;
        let (tree, direction, stop) = (self.tree, self.direction, self.stop.clone());
        let batch = self.db.run(move |h| {
            let upper = direction == Direction::Forward;
            let keep = |k: &[u8]| within(&stop, k, upper);
            h.tree_entries(
                tree,
                from.as_ref().map(Vec::as_slice),
                direction,
                RANGE_BATCH,
                &keep,
            )
        });
        match batch {
            Ok(Ok((entries, ended))) => {
                if !ended {
                    self.next = entries.last().map(|(k, _)| Bound::Excluded(k.clone()));
                }
                self.buffered = entries.into();
                self.buffered.pop_front().map(Ok)
            }
            Ok(Err(err)) | Err(err) => Some(Err(err)),
        }
    }
}

impl DbHandle {
    /// See [`Db::create_tree`].
    pub fn create_tree(&self) -> Result<TreeId, DbError> {
        self.engine.tree_create()
    }
    /// See [`Db::tree`].
    pub fn tree(&self, name: &[u8]) -> Result<TreeId, DbError> {
        self.engine.tree_named(name)
    }
    /// See [`Db::find_tree`].
    pub fn find_tree(&self, name: &[u8]) -> Result<Option<TreeId>, DbError> {
        self.engine.tree_lookup(name)
    }
    /// See [`Db::tree_put`].
    pub fn tree_put(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.engine.tree_put(tree, key, value)
    }
    /// See [`Db::tree_get`].
    pub fn tree_get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.engine.tree_get(tree, key)
    }
    /// See [`Db::tree_delete`].
    pub fn tree_delete(&self, tree: TreeId, key: &[u8]) -> Result<bool, DbError> {
        self.engine.tree_delete(tree, key)
    }
    /// One step of the reclaimer of dropped trees (see [`Db::drop_tree`]): the entries it
    /// deleted (0: none left, or a tree freed).
    pub fn reclaim_trees(&self) -> Result<u64, DbError> {
        self.engine.reclaim_trees()
    }
    /// See [`Db::tree_len`].
    pub fn tree_len(&self, tree: TreeId) -> Result<u64, DbError> {
        self.engine.tree_len(tree)
    }
    /// See [`Db::tree_position`].
    pub fn tree_position(&self, tree: TreeId, key: &[u8]) -> Result<u64, DbError> {
        self.engine.tree_position(tree, key)
    }
    /// The key at position `rank` of `tree` (0: the first; O(log n)).
    pub fn tree_key_at(&self, tree: TreeId, rank: u64) -> Result<Option<Vec<u8>>, DbError> {
        self.engine.tree_key_at(tree, rank)
    }
    /// Up to `limit` entries of `tree` from `from` in `direction` while `within` holds of the
    /// key, and whether the scan reached its end: one batch of [`Db::range`].
    #[allow(clippy::type_complexity)]
    pub fn tree_entries(
        &self,
        tree: TreeId,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool), DbError> {
        self.engine
            .tree_entries(tree, from, direction, limit, within)
    }
}

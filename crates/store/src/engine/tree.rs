//! Ordered trees: B+-trees whose nodes are index pages in the page cache (`layout`, "ordered
//! trees"), the structure under the embedded API's range scans and the server's hashes,
//! lists, sets and sorted sets.
//!
//! - Every node access goes through the cache, so a miss parks the user-level thread
//!   (switch-on-miss) and the core runs another.
//! - Readers take no lock: they descend reading inner nodes optimistically (the frame latch's
//!   version, checked again after the child is pinned: optimistic lock coupling) and read a
//!   leaf under its shared latch, checking that its parent did not change meanwhile; anything
//!   changed sends them back to the root (at most [`READ_RETRIES`] times).
//! - Writers of one tree are serialized by the tree's writer lock (a stripe of
//!   [`TREE_LOCKS`], held across misses): every insert or delete changes the entry counts
//!   along its path (which give `rank` and `select` in O(log n)), so two writers of one tree
//!   would meet at the root anyway. Writers of different trees run in parallel. A writer
//!   changes a node under its exclusive latch, and a split or merge holds the parent's and the
//!   children's latches together, so a reader sees a node before or after, never between.
//! - Changes run under the checkpoint latch (shared), like every index change: a node is
//!   marked changed before it is written, and the checkpoint writes it to its other copy.
//!   Freed nodes (merged away) are dropped from the cache and freed as any page is (reusable
//!   after the next checkpoint).
//! - A split of the root moves its entries into two new children, so the root's page, the
//!   tree's name, never changes; a root with one child takes its child's entries.

use std::ops::Bound;
use std::sync::atomic::AtomicBool;

use tamer_cache::{PageClass, PageRef, Prefetch};
use tamer_runtime::thread;

use super::{corrupt, Engine, YieldGuard, YieldLock};
use crate::layout::*;
use crate::DbError;

pub(crate) mod node;
mod ops;
mod reclaim;

pub use ops::TreeId;
pub(crate) use ops::{record_key, split_record_key};
pub use reclaim::RECLAIM_BATCH;

/// Writer locks, a tree's by its root page.
pub(crate) const TREE_LOCKS: usize = 1024;
/// Times a reader goes back to the root because a writer changed its path.
const READ_RETRIES: usize = 100_000;
/// Leaves a scan reads ahead (beside the one it reads).
const SCAN_PREFETCH: usize = 8;
/// Splits one insert may cause before it fits (one per level, and the root's).
const SPLITS_MAX: usize = 2 * TREE_LEVELS_MAX;

/// The tree writer locks.
pub(crate) fn tree_locks() -> Box<[YieldLock]> {
    (0..TREE_LOCKS)
        .map(|_| YieldLock(AtomicBool::new(false)))
        .collect()
}

/// One node on a writer's path: its page and the entry it went down through (inner nodes).
#[derive(Clone, Copy, Debug)]
struct Step {
    page: u64,
    index: usize,
}

/// What a reader's descent decides at an inner node (its bytes, and the tree's entries
/// before it): the entry to go down through and the entries below the entries before it.
type Choose<'a> = &'a dyn Fn(&[u8], u64) -> Option<(usize, u64)>;

/// What a reader does with the leaf it reached (under the leaf's shared latch; it may run
/// again on a retry).
type AtLeaf<'a, T> = &'a mut dyn FnMut(&[u8], &LeafCtx) -> Result<T, DbError>;

/// A leaf as a reader reached it: how many entries lie before it in the tree, its fences (the
/// separators its keys lie between: `lower` at most its first key, `upper` above its last;
/// `None` at the tree's ends), and the leaves beside it (the next ones in the direction
/// asked, for read-ahead).
#[derive(Default)]
pub(crate) struct LeafCtx {
    pub before: u64,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    pub beside: Vec<u64>,
}

/// What a reader saw at an inner node.
struct Seen {
    child: u64,
    skipped: u64,
    level: u8,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    beside: Vec<u64>,
}

/// An entry read from a leaf: key, record place, inline value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub key: Vec<u8>,
    pub page: u64,
    pub slot: u8,
    pub inline: Option<Vec<u8>>,
}

impl Found {
    fn of(key: &[u8], v: node::LeafValue<'_>) -> Self {
        Self {
            key: key.to_vec(),
            page: v.page,
            slot: v.slot,
            inline: v.inline.map(<[u8]>::to_vec),
        }
    }

    /// The record this entry names.
    pub fn entry(&self) -> Entry {
        Entry {
            hash: 0,
            page: self.page,
            slot: self.slot,
        }
    }
}

/// Which way a scan goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

impl Engine {
    /// A node page as the cache holds it, for `check`.
    pub(super) fn node_page(&self, page: u64) -> Result<PageRef<'_>, DbError> {
        self.node(page)
    }

    /// A node page as the cache holds it (an index page placed by its own number).
    fn node(&self, page: u64) -> Result<PageRef<'_>, DbError> {
        Ok(self.cache.get_as(page, node_class(page))?)
    }

    pub(super) fn tree_lock(&self, tree: u64) -> YieldGuard<'_> {
        self.tree_locks[tree_lock_index(tree)].lock()
    }

    /// The tree's writer lock if it is free now.
    pub(super) fn tree_try_lock(&self, tree: u64) -> Option<YieldGuard<'_>> {
        self.tree_locks[tree_lock_index(tree)].try_lock()
    }

    /// Marks node `page` changed since the last checkpoint (before it is written).
    fn dirty_node(&self, page: u64) -> Result<(), DbError> {
        // Only a page not yet changed adds a dirty frame to its set.
        if self.copies.mark_tree_changed(self.logical_of(page)?) {
            self.watch_set(page, node_class(page));
        }
        Ok(())
    }

    // --- readers ---

    /// Descends `tree` choosing with `choose` at each inner node, then runs `at_leaf` on the
    /// leaf under its shared latch (see the module docs); retried from the root whenever a
    /// writer changed the path. A scan (`scan`: its direction) gets the leaf's fences and the
    /// leaves beside it in `LeafCtx`; a point read (`None`) skips them (no copies).
    fn read_leaf<T>(
        &self,
        tree: u64,
        choose: Choose<'_>,
        scan: Option<Direction>,
        at_leaf: AtLeaf<'_, T>,
    ) -> Result<T, DbError> {
        for _ in 0..READ_RETRIES {
            if let Some(found) = self.try_read_leaf(tree, choose, scan, at_leaf)? {
                return Ok(found);
            }
            thread::yield_now();
        }
        Err(corrupt(tree, "a tree read kept meeting changes"))
    }

    /// One descent; `None` when a change was seen (go back to the root).
    fn try_read_leaf<T>(
        &self,
        tree: u64,
        choose: Choose<'_>,
        scan: Option<Direction>,
        at_leaf: AtLeaf<'_, T>,
    ) -> Result<Option<T>, DbError> {
        let mut node = self.node(tree)?;
        let mut parent: Option<(PageRef<'_>, u64)> = None;
        let mut ctx = LeafCtx::default();
        let mut level: Option<u8> = None;
        for _ in 0..TREE_LEVELS_MAX {
            let version = node.version();
            if version & 1 == 1 {
                return Ok(None); // a writer holds it
            }
            let seen = node.read_optimistic(|b| {
                if !node::is_node(b) || node::tree(b) != tree {
                    return None;
                }
                if level.is_some_and(|l| node::level(b) + 1 != l) {
                    return None;
                }
                if node::is_leaf(b) {
                    return Some(None);
                }
                let (i, skipped) = choose(b, ctx.before)?;
                let mut seen = Seen {
                    child: node::child(b, i)?.0,
                    skipped,
                    level: node::level(b),
                    lower: None,
                    upper: None,
                    beside: Vec::new(),
                };
                if let Some(direction) = scan {
                    if i > 0 {
                        seen.lower = Some(node::key(b, i)?.to_vec());
                    }
                    seen.upper = match node::key(b, i + 1) {
                        Some(k) => Some(k.to_vec()),
                        None if i + 1 < node::count(b) => return None,
                        None => None,
                    };
                    if seen.level == 1 {
                        seen.beside = beside(b, i, direction)?;
                    }
                }
                Some(Some(seen))
            });
            // Outer `None`: changed while read; inner: not a node of this tree at this level.
            let seen = match seen.flatten() {
                Some(Some(seen)) => seen,
                Some(None) => {
                    return self.read_leaf_latched(tree, &node, parent.as_ref(), &ctx, at_leaf)
                }
                // Changed while read, or not (yet) what was expected.
                None => return Ok(None),
            };
            let next = self.node(seen.child);
            if node.version() != version {
                return Ok(None);
            }
            // The parent is the same: the child it named is still its child.
            let next = next?;
            ctx.before += seen.skipped;
            ctx.lower = seen.lower.or(ctx.lower);
            ctx.upper = seen.upper.or(ctx.upper);
            if seen.level == 1 {
                ctx.beside = seen.beside;
            }
            level = Some(seen.level);
            parent = Some((node, version));
            node = next;
        }
        Err(corrupt(tree, "a tree deeper than its bound"))
    }

    /// The leaf part of a descent: `at_leaf` under the leaf's shared latch, if the leaf is
    /// one of `tree` and its parent has not changed since the descent read it.
    fn read_leaf_latched<T>(
        &self,
        tree: u64,
        leaf: &PageRef<'_>,
        parent: Option<&(PageRef<'_>, u64)>,
        ctx: &LeafCtx,
        at_leaf: AtLeaf<'_, T>,
    ) -> Result<Option<T>, DbError> {
        leaf.read(|b| {
            let same_parent = parent.is_none_or(|(p, v)| p.version() == *v);
            if !same_parent || !node::is_node(b) || !node::is_leaf(b) || node::tree(b) != tree {
                return Ok(None);
            }
            if parent.is_none() && leaf.page() != tree {
                return Ok(None);
            }
            at_leaf(b, ctx).map(Some)
        })
    }

    /// The entry of `key` in `tree`.
    pub(crate) fn tree_find(&self, tree: u64, key: &[u8]) -> Result<Option<Found>, DbError> {
        // No rank wanted: the entries before are not summed.
        let choose = |b: &[u8], _| Some((node::child_for(b, key)?, 0));
        self.read_leaf(tree, &choose, None, &mut |b, _| match node::search(b, key)
            .ok_or_else(|| corrupt(tree, "a malformed leaf"))?
        {
            Ok(i) => {
                let (k, v) =
                    node::leaf_entry(b, i).ok_or_else(|| corrupt(tree, "a malformed leaf"))?;
                Ok(Some(Found::of(k, v)))
            }
            Err(_) => Ok(None),
        })
    }

    /// Entries in `tree`.
    pub(crate) fn tree_count(&self, tree: u64) -> Result<u64, DbError> {
        self.node(tree)?.read(|b| {
            if !node::is_node(b) || node::tree(b) != tree {
                return Err(corrupt(tree, "not the root of a tree"));
            }
            node::total(b).ok_or_else(|| corrupt(tree, "a malformed root"))
        })
    }

    /// Entries of `tree` whose key is below `key`.
    pub(crate) fn tree_rank(&self, tree: u64, key: &[u8]) -> Result<u64, DbError> {
        let choose = |b: &[u8], _| by_key(b, key);
        self.read_leaf(tree, &choose, None, &mut |b, ctx| {
            let at = node::search(b, key).ok_or_else(|| corrupt(tree, "a malformed leaf"))?;
            Ok(ctx.before + at.unwrap_or_else(|i| i) as u64)
        })
    }

    /// The entry at position `rank` (0: the first) of `tree`, if it has that many.
    pub(crate) fn tree_select(&self, tree: u64, rank: u64) -> Result<Option<Found>, DbError> {
        let choose = |b: &[u8], before: u64| by_rank(b, rank.checked_sub(before)?);
        self.read_leaf(tree, &choose, None, &mut |b, ctx| {
            let Some(i) = rank.checked_sub(ctx.before) else {
                return Ok(None);
            };
            Ok(usize::try_from(i)
                .ok()
                .and_then(|i| node::leaf_entry(b, i))
                .map(|(k, v)| Found::of(k, v)))
        })
    }

    /// Up to `limit` entries of `tree` from `from` on in `direction` (`Forward`: keys at or
    /// after `from`, ascending; `Reverse`: at or before, descending) while `within` holds, and
    /// whether the scan reached the end (`within` failed or the tree ended). Leaves ahead are
    /// read ahead when the scan will need them. Each leaf is read at one moment; a scan of
    /// several leaves sees each as it was when it got there.
    pub(crate) fn tree_scan(
        &self,
        tree: u64,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Vec<Found>, bool), DbError> {
        let mut out = Vec::new();
        let mut at: Bound<Vec<u8>> = from.map(<[u8]>::to_vec);
        let mut ahead: Vec<Prefetch<'_>> = Vec::new();
        // Bounded: every pass moves `at` strictly on (past an entry or a leaf's fence).
        while out.len() < limit {
            // The reads ahead complete first: a descent meeting a page this thread is still
            // loading would wait for itself. They were in flight together, so this costs one
            // read's latency for all of them.
            for p in ahead.drain(..) {
                p.wait()?;
            }
            let want = limit - out.len();
            let (batch, next) =
                self.scan_leaf(tree, at.as_ref().map(Vec::as_slice), direction, want)?;
            for f in batch {
                if !within(&f.key) {
                    return Ok((out, true));
                }
                out.push(f);
            }
            let Some((next, beside)) = next else {
                return Ok((out, true));
            };
            at = match out.last() {
                Some(f) if out.len() >= limit => Bound::Excluded(f.key.clone()),
                _ => next,
            };
            self.read_ahead(&beside, limit - out.len(), &mut ahead)?;
        }
        Ok((out, false))
    }

    /// One leaf of a scan: its entries from `at` in `direction` (at most `want`), and unless
    /// it is the tree's last leaf that way, where to go on from (past its last entry taken, or
    /// past its fence when it had no more) with the leaves beside it.
    #[allow(clippy::type_complexity)]
    fn scan_leaf(
        &self,
        tree: u64,
        at: Bound<&[u8]>,
        direction: Direction,
        want: usize,
    ) -> Result<(Vec<Found>, Option<(Bound<Vec<u8>>, Vec<u64>)>), DbError> {
        // A scan wants no ranks: the entries before are not summed.
        let choose = |b: &[u8], _| match (at, direction) {
            (Bound::Unbounded, Direction::Forward) => Some((0, 0)),
            (Bound::Unbounded, Direction::Reverse) => Some((node::count(b).checked_sub(1)?, 0)),
            (Bound::Excluded(k), Direction::Reverse) => Some((below_key(b, k)?, 0)),
            (Bound::Included(k) | Bound::Excluded(k), _) => Some((node::child_for(b, k)?, 0)),
        };
        self.read_leaf(tree, &choose, Some(direction), &mut |b, ctx| {
            let n = node::count(b).min(NODE_ENTRIES_MAX);
            let bad = || corrupt(tree, "a malformed leaf");
            let position = |k: &[u8]| node::search(b, k).ok_or_else(bad);
            let indexes: Vec<usize> = match direction {
                Direction::Forward => {
                    let start = match at {
                        Bound::Unbounded => 0,
                        Bound::Included(k) => position(k)?.unwrap_or_else(|i| i),
                        Bound::Excluded(k) => position(k)?.map_or_else(|i| i, |i| i + 1),
                    };
                    (start..n).take(want).collect()
                }
                Direction::Reverse => {
                    let end = match at {
                        Bound::Unbounded => n,
                        Bound::Included(k) => position(k)?.map_or_else(|i| i, |i| i + 1),
                        Bound::Excluded(k) => position(k)?.unwrap_or_else(|i| i),
                    };
                    (0..end).rev().take(want).collect()
                }
            };
            let mut found = Vec::with_capacity(indexes.len());
            for &i in &indexes {
                let (k, v) = node::leaf_entry(b, i).ok_or_else(bad)?;
                found.push(Found::of(k, v));
            }
            let more_here = match direction {
                Direction::Forward => indexes.last().is_some_and(|&i| i + 1 < n),
                Direction::Reverse => indexes.last().is_some_and(|&i| i > 0),
            };
            let next = match (direction, found.last()) {
                (_, Some(f)) if more_here => Some(Bound::Excluded(f.key.clone())),
                (Direction::Forward, _) => ctx.upper.clone().map(Bound::Included),
                (Direction::Reverse, _) => ctx.lower.clone().map(Bound::Excluded),
            };
            Ok((found, next.map(|n| (n, ctx.beside.clone()))))
        })
    }

    /// Starts reads of the leaves in `beside` a scan still wanting `wanted` entries will
    /// reach (about one leaf per 64 entries, at most [`SCAN_PREFETCH`]); pages already cached
    /// cost a lookup.
    fn read_ahead<'a>(
        &'a self,
        beside: &[u64],
        wanted: usize,
        ahead: &mut Vec<Prefetch<'a>>,
    ) -> Result<(), DbError> {
        let leaves = wanted.div_ceil(64).min(SCAN_PREFETCH);
        for &page in beside.iter().take(leaves) {
            if ahead.len() >= SCAN_PREFETCH {
                break;
            }
            if !ahead.iter().any(|p| p.page() == page) {
                ahead.push(self.cache.prefetch_as(page, node_class(page))?);
            }
        }
        Ok(())
    }

    // --- writers (holding the tree's writer lock and the checkpoint latch, shared) ---

    /// The path from `tree`'s root to the leaf for `key`.
    fn write_path(&self, tree: u64, key: &[u8]) -> Result<Vec<Step>, DbError> {
        let mut page = tree;
        let mut path = Vec::new();
        let mut level: Option<u8> = None;
        for _ in 0..TREE_LEVELS_MAX {
            let r = self.node(page)?;
            let next = r.read(|b| -> Result<Option<(usize, u64, u8)>, DbError> {
                if !node::is_node(b) || node::tree(b) != tree {
                    return Err(corrupt(page, "a tree names a page that is not its node"));
                }
                if level.is_some_and(|l| node::level(b) + 1 != l) {
                    return Err(corrupt(page, "a tree node at the wrong level"));
                }
                if node::is_leaf(b) {
                    return Ok(None);
                }
                let bad = || corrupt(page, "a malformed inner node");
                let i = node::child_for(b, key).ok_or_else(bad)?;
                let (child, _) = node::child(b, i).ok_or_else(bad)?;
                Ok(Some((i, child, node::level(b))))
            })?;
            match next {
                None => {
                    path.push(Step { page, index: 0 });
                    return Ok(path);
                }
                Some((index, child, l)) => {
                    path.push(Step { page, index });
                    level = Some(l);
                    page = child;
                }
            }
        }
        Err(corrupt(tree, "a tree deeper than its bound"))
    }

    /// Points `key` of `tree` at record (`page`, `slot`), its value inline when given; returns
    /// the record it named before. Caller: the tree's writer lock, the checkpoint latch.
    pub(crate) fn tree_link(
        &self,
        tree: u64,
        key: &[u8],
        page: u64,
        slot: u8,
        inline: Option<&[u8]>,
    ) -> Result<Option<Entry>, DbError> {
        assert!(key.len() <= MAX_TREE_KEY && inline.is_none_or(|v| v.len() <= INLINE_MAX));
        for _ in 0..SPLITS_MAX {
            let path = self.write_path(tree, key)?;
            let leaf_page = path.last().expect("a path ends at a leaf").page;
            let leaf = self.node(leaf_page)?;
            self.dirty_node(leaf_page)?;
            match leaf.write(|b| node::leaf_put(b, key, page, slot, inline)) {
                node::LeafPut::Inserted => {
                    drop(leaf);
                    self.changed_or_fail(tree, self.add_counts(&path, 1))?;
                    return Ok(None);
                }
                node::LeafPut::Replaced { page, slot } => {
                    return Ok(Some(Entry {
                        hash: 0,
                        page,
                        slot,
                    }))
                }
                node::LeafPut::NoRoom => self.split_node(&path, path.len() - 1)?,
            }
        }
        Err(corrupt(tree, "an insert kept splitting"))
    }

    /// Removes `key` from `tree`; returns the record it named. Merges nodes left too empty.
    pub(crate) fn tree_unlink(&self, tree: u64, key: &[u8]) -> Result<Option<Entry>, DbError> {
        let path = self.write_path(tree, key)?;
        let leaf_page = path.last().expect("a path ends at a leaf").page;
        let leaf = self.node(leaf_page)?;
        let at = leaf.read(|b| node::search(b, key));
        let Some(Ok(i)) = at else {
            return match at {
                None => Err(corrupt(leaf_page, "a malformed leaf")),
                _ => Ok(None),
            };
        };
        self.dirty_node(leaf_page)?;
        let old = leaf.write(|b| {
            let (_, v) = node::leaf_entry(b, i).expect("checked under the writer lock");
            let old = Entry {
                hash: 0,
                page: v.page,
                slot: v.slot,
            };
            node::remove_at(b, i);
            old
        });
        drop(leaf);
        let rest = self
            .add_counts(&path, -1)
            .and_then(|()| self.rebalance(&path));
        self.changed_or_fail(tree, rest)?;
        Ok(Some(old))
    }

    /// The rest of a change whose first node write is done: an error now leaves the tree
    /// half changed in DRAM (counts or a merge undone), so the store fails (reopening
    /// recovers the last durable state) rather than go on with it.
    fn changed_or_fail(&self, tree: u64, rest: Result<(), DbError>) -> Result<(), DbError> {
        if let Err(err) = &rest {
            self.fail(format!("tree {tree} left half changed: {err}"));
        }
        rest
    }

    /// Adds `delta` to the counts of the entries on `path` (every inner node's).
    fn add_counts(&self, path: &[Step], delta: i64) -> Result<(), DbError> {
        for step in &path[..path.len() - 1] {
            let r = self.node(step.page)?;
            self.dirty_node(step.page)?;
            r.write(|b| node::add_count(b, step.index, delta));
        }
        Ok(())
    }

    /// Splits the node at `path[i]` (a parent without room for the separator splits first:
    /// the caller then descends again).
    fn split_node(&self, path: &[Step], i: usize) -> Result<(), DbError> {
        let page = path[i].page;
        let n = self.node(page)?;
        if i == 0 {
            return self.split_root(&n);
        }
        let parent_step = path[i - 1];
        let parent = self.node(parent_step.page)?;
        let room = parent.read(node::free);
        if room < 2 + INNER_ENTRY_HEADER + MAX_TREE_KEY {
            return self.split_node(path, i - 1);
        }
        let tree = n.read(node::tree);
        let right_page = self.alloc_node()?;
        let right = self.new_node(right_page)?;
        self.dirty_node(parent_step.page)?;
        self.dirty_node(page)?;
        parent.write(|pb| {
            n.write(|nb| {
                right.write(|rb| {
                    node::init(rb, node::level(nb), tree);
                    let sep = node::split_off(nb, rb);
                    let (left_total, right_total) = (node::total(nb), node::total(rb));
                    let at = parent_step.index;
                    node::set_count(pb, at, left_total.expect("a node just split"));
                    let e = node::inner_entry_bytes(&sep, right_page, right_total.expect("split"));
                    assert!(node::insert_raw(pb, at + 1, &e), "room was checked");
                })
            })
        });
        Ok(())
    }

    /// Splits the root: its entries move into two new children, the root one level up.
    fn split_root(&self, root: &PageRef<'_>) -> Result<(), DbError> {
        let left_page = self.alloc_node()?;
        let right_page = match self.alloc_node() {
            Ok(page) => page,
            Err(err) => {
                let _ = self.free_node(left_page);
                return Err(err);
            }
        };
        let (left, right) = (self.new_node(left_page)?, self.new_node(right_page)?);
        self.dirty_node(root.page())?;
        root.write(|rb| {
            left.write(|lb| {
                right.write(|r| {
                    lb[..PAYLOAD].copy_from_slice(&rb[..PAYLOAD]);
                    node::init(r, node::level(rb), node::tree(rb));
                    let sep = node::split_off(lb, r);
                    let level = node::level(rb) + 1;
                    assert!(
                        (level as usize) < TREE_LEVELS_MAX,
                        "a tree within its levels"
                    );
                    let children = [
                        (Vec::new(), left_page, node::total(lb).expect("split")),
                        (sep, right_page, node::total(r).expect("split")),
                    ];
                    node::become_inner(rb, level, &children);
                })
            })
        });
        Ok(())
    }

    /// Merges nodes on `path` left less than a quarter full with a sibling when both fit one
    /// node, from the leaf up; a root left with one child takes its child's entries.
    fn rebalance(&self, path: &[Step]) -> Result<(), DbError> {
        for i in (1..path.len()).rev() {
            if !self.merge_at(path, i)? {
                break;
            }
        }
        self.collapse_root(path[0].page)
    }

    /// Merges `path[i]` with a sibling if it is under a quarter full and they fit together;
    /// true when it merged (its parent lost an entry).
    fn merge_at(&self, path: &[Step], i: usize) -> Result<bool, DbError> {
        // No pin may outlive this line: the node may be the one freed below (a page pinned by
        // its freer could never be dropped from the cache).
        if self.node(path[i].page)?.read(node::used) >= PAYLOAD / 4 {
            return Ok(false);
        }
        let parent_step = path[i - 1];
        let parent = self.node(parent_step.page)?;
        let (pair, sep) = parent
            .read(|b| {
                let n = node::count(b);
                if n < 2 {
                    return None;
                }
                let at = parent_step.index;
                let (l, r) = if at > 0 { (at - 1, at) } else { (0, 1) };
                let (lp, _) = node::child(b, l)?;
                let (rp, _) = node::child(b, r)?;
                Some(((l, lp, r, rp), node::key(b, r)?.to_vec()))
            })
            .map_or((None, Vec::new()), |(p, s)| (Some(p), s));
        let Some((l, lp, r, rp)) = pair else {
            return Ok(false);
        };
        let (left, right) = (self.node(lp)?, self.node(rp)?);
        let fits = left.read(|lb| right.read(|rb| node::merged_used(lb, rb, &sep) <= PAYLOAD));
        if !fits {
            return Ok(false);
        }
        self.dirty_node(parent_step.page)?;
        self.dirty_node(lp)?;
        parent.write(|pb| {
            left.write(|lb| {
                right.write(|rb| {
                    node::merge(lb, rb, &sep);
                    node::set_count(pb, l, node::total(lb).expect("merged"));
                    node::remove_at(pb, r);
                    // A reader still holding the page sees no node of the tree.
                    rb[..PAYLOAD].fill(0);
                })
            })
        });
        drop(right);
        self.free_node(rp)?;
        Ok(true)
    }

    /// While the root is an inner node with one child, moves the child's entries into it.
    fn collapse_root(&self, tree: u64) -> Result<(), DbError> {
        for _ in 0..TREE_LEVELS_MAX {
            let root = self.node(tree)?;
            let only = root.read(|b| {
                (!node::is_leaf(b) && node::count(b) == 1).then(|| node::child(b, 0).map(|c| c.0))
            });
            let child_page = match only {
                None => return Ok(()),
                Some(None) => return Err(corrupt(tree, "a malformed root")),
                Some(Some(c)) => c,
            };
            let child = self.node(child_page)?;
            self.dirty_node(tree)?;
            root.write(|rb| {
                child.write(|cb| {
                    rb[..PAYLOAD].copy_from_slice(&cb[..PAYLOAD]);
                    cb[..PAYLOAD].fill(0);
                })
            });
            drop(child);
            self.free_node(child_page)?;
        }
        Err(corrupt(
            tree,
            "a root collapsed more times than a tree has levels",
        ))
    }

    // --- node pages ---

    /// A new node's pages (its two copies), marked in the map; copy 0 current.
    fn alloc_node(&self) -> Result<u64, DbError> {
        let page = self.alloc_marked(2, MapKind::Tree, MapKind::TreeCopy)?;
        let l = self.logical_of(page)?;
        self.copies.set_tree(l, 0);
        let _ = self.copies.mark_tree_changed(l);
        Ok(page)
    }

    /// A newly allocated node page in the cache, zeroed (never read from the device).
    fn new_node(&self, page: u64) -> Result<PageRef<'_>, DbError> {
        let node = self.cache.get_for_overwrite_as(page, node_class(page))?;
        self.watch_set(page, node_class(page));
        Ok(node)
    }

    /// Frees a node no longer in its tree: dropped from the cache (a stale frame must never be
    /// written over the page once it is reused), no longer an index page, both copies freed.
    fn free_node(&self, page: u64) -> Result<(), DbError> {
        let l = self.logical_of(page)?;
        self.cache.discard(page, node_class(page))?;
        self.copies.forget_tree(l);
        self.free_pages(page, 2)
    }

    /// Frees an empty tree's root (a creation undone).
    pub(crate) fn tree_free_root(&self, root: u64) -> Result<(), DbError> {
        let empty = self
            .node(root)?
            .read(|b| node::is_leaf(b) && node::count(b) == 0);
        if !empty {
            return Err(corrupt(root, "freeing a tree that is not empty"));
        }
        self.free_node(root)
    }

    /// A new empty tree: its root, a leaf. Returns the root's page, the tree's name.
    pub(crate) fn tree_new_root(&self) -> Result<u64, DbError> {
        let page = self.alloc_node()?;
        let root = self.new_node(page)?;
        root.write(|b| node::init(b, 0, page));
        Ok(page)
    }

    /// Makes `page` (logical page claimed by recovery) the empty root of the tree it names,
    /// as [`Engine::tree_new_root`] did.
    pub(crate) fn tree_reset_root(&self, page: u64) -> Result<(), DbError> {
        let l = self.logical_of(page)?;
        self.copies.set_tree(l, 0);
        let _ = self.copies.mark_tree_changed(l);
        let root = self.new_node(page)?;
        root.write(|b| node::init(b, 0, page));
        Ok(())
    }
}

/// The writer lock stripe of `tree`.
fn tree_lock_index(tree: u64) -> usize {
    (tree as usize).wrapping_mul(0x9E37_79B9) % TREE_LOCKS
}

/// The cache class of node `page`: an index page placed by its own number.
pub(crate) fn node_class(page: u64) -> PageClass {
    PageClass::Index { set_key: page }
}

/// The entries below the first `i` entries of inner node `b`.
fn skipped_before(b: &[u8], i: usize) -> Option<u64> {
    (0..i).try_fold(0u64, |sum, j| sum.checked_add(node::child(b, j)?.1))
}

/// A descent by key: the entry covering `key`, and the entries before it.
fn by_key(b: &[u8], key: &[u8]) -> Option<(usize, u64)> {
    let i = node::child_for(b, key)?;
    Some((i, skipped_before(b, i)?))
}

/// The entry covering the greatest key below `key`: the last entry whose key is below `key`
/// (the first entry covers everything below the second's).
fn below_key(b: &[u8], key: &[u8]) -> Option<usize> {
    let n = node::count(b);
    if n == 0 || n > NODE_ENTRIES_MAX || node::is_leaf(b) {
        return None;
    }
    let (mut lo, mut hi) = (1, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if node::key(b, mid)? < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Some(lo - 1)
}

/// A descent by position: the entry whose subtree holds entry `rank` (the last one when the
/// tree has fewer), and the entries before it.
fn by_rank(b: &[u8], rank: u64) -> Option<(usize, u64)> {
    let n = node::count(b);
    if n == 0 || n > NODE_ENTRIES_MAX {
        return None;
    }
    let mut before = 0u64;
    for i in 0..n {
        let (_, c) = node::child(b, i)?;
        if rank < before.checked_add(c)? || i == n - 1 {
            return Some((i, before));
        }
        before += c;
    }
    None
}

/// The leaves beside entry `i` of level-1 node `b`, the next ones in `direction` first.
fn beside(b: &[u8], i: usize, direction: Direction) -> Option<Vec<u64>> {
    let n = node::count(b).min(NODE_ENTRIES_MAX);
    let pick: Vec<usize> = match direction {
        Direction::Forward => (i + 1..n).take(SCAN_PREFETCH).collect(),
        Direction::Reverse => (0..i).rev().take(SCAN_PREFETCH).collect(),
    };
    pick.into_iter()
        .map(|j| node::child(b, j).map(|c| c.0))
        .collect()
}

#[cfg(test)]
mod tests;

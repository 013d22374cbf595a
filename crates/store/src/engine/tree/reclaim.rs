//! Dropping a tree: its name goes at once (the caller's), its entries and nodes are reclaimed
//! in the background, a bounded batch per step.
//!
//! A drop lists the tree in the catalog under [`DROPPED`] ‖ its root (in the dropping
//! transaction, so a crash keeps the drop exactly when it keeps the transaction). Each step
//! (`reclaim_trees`, run by core 0's cleaner while any is listed) deletes up to
//! [`RECLAIM_BATCH`] entries of the first listed tree from its start, as one change whose
//! deltas name the released records (as deletes do, so a crash redoes the prefix of steps that
//! was durable); the step that finds the tree empty frees its root and takes it off the list
//! in one change. Nothing but the reclaimer touches a dropped tree, so its entries' records
//! are released one by one without locks beyond the tree's writer lock.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::{Direction, TreeId};
use crate::engine::commit::{Delta, DeltaOp};
use crate::engine::Engine;
use crate::layout::*;
use crate::DbError;

/// Catalog names of dropped trees start with this (user names may not start with 0).
pub(crate) const DROPPED: &[u8] = b"\0dropped:";
/// Entries one reclaim step deletes (one commit record: below [`MAX_DELTAS`]).
pub const RECLAIM_BATCH: usize = 128;
const _: () = assert!(RECLAIM_BATCH < MAX_DELTAS);

/// The catalog name listing dropped tree `root`.
pub(crate) fn dropped_name(root: u64) -> Vec<u8> {
    [DROPPED, &root.to_be_bytes()].concat()
}

impl Engine {
    /// One reclaim step (see the module docs); returns the entries it deleted (0: nothing is
    /// listed, or a tree was freed).
    pub fn reclaim_trees(&self) -> Result<u64, DbError> {
        let _op = self.check_open()?;
        if !self.trees_dropped.load(Ordering::Acquire) || self.read_only {
            return Ok(0);
        }
        let catalog = self.catalog.load(Ordering::Acquire);
        if catalog == 0 {
            self.trees_dropped.store(false, Ordering::Release);
            return Ok(0);
        }
        let (listed, _) = self.tree_scan(
            catalog,
            Bound::Included(DROPPED),
            Direction::Forward,
            1,
            &|k| k.starts_with(DROPPED),
        )?;
        let Some(first) = listed.first() else {
            self.trees_dropped.store(false, Ordering::Release);
            return Ok(0);
        };
        let root = first.key[DROPPED.len()..]
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| crate::engine::corrupt(catalog, "a malformed dropped-tree name"))?;
        let (found, _) = self.tree_scan(
            root,
            Bound::Unbounded,
            Direction::Forward,
            RECLAIM_BATCH,
            &|_| true,
        )?;
        let staged = {
            let _s = self.begin_change()?;
            let mut deltas = Vec::with_capacity(found.len().max(2));
            if found.is_empty() {
                self.tree_free_root(root)?;
                deltas.push(Delta {
                    op: DeltaOp::TreeFree,
                    hash: 0,
                    entry: Entry {
                        hash: 0,
                        page: root,
                        slot: 0,
                    },
                });
                deltas.extend(self.tree_delete_applied(catalog, &first.key)?);
            }
            for f in &found {
                deltas.extend(self.tree_delete_applied(root, &f.key)?);
            }
            self.stage(&deltas, &[])
        };
        // Nobody waits for a reclaim step: a later commit or checkpoint makes it durable.
        let _ = staged;
        Ok(found.len() as u64)
    }

    /// Lists `tree` dropped (a change of the catalog, returned for the caller's commit).
    pub(crate) fn drop_listing(&self, tree: TreeId) -> Result<(Vec<u8>, u64), DbError> {
        let catalog = self.catalog.load(Ordering::Acquire);
        debug_assert!(catalog != 0, "the catalog exists before a drop");
        self.trees_dropped.store(true, Ordering::Release);
        Ok((dropped_name(tree.0), catalog))
    }
}

//! Bucket splits and directory doubling: a full bucket splits in two (there are no overflow
//! chains), doubling the directory first when the bucket's depth equals the directory's.
//!
//! Invariants: one split at a time (`split_lock`), under the full bucket's exclusive latch and
//! within the caller's change (checkpoint latch shared), so a checkpoint never sees half of
//! one; the directory's upper half is written before the deeper global depth is published;
//! the new bucket is written before any slot points to it; the old bucket keeps its page and
//! its pattern (so its cache placement), and its slots get the deeper depth before it is
//! rewritten.

use std::sync::atomic::Ordering;

use tamer_cache::PageClass;

use super::directory::mask;
use super::Engine;
use crate::layout::*;
use crate::DbError;

impl Engine {
    /// Doubles the directory from depth `depth` (the caller holds the split lock): the upper
    /// half is written first, then the depth is published.
    fn double_directory(&self, depth: u32) -> Result<(), DbError> {
        let half = 1u64 << depth;
        let lower: Vec<u64> = (0..half)
            .map(|i| {
                let (page, d) = self.dir_get(i)?;
                let copy = self.copies.bucket_copy(self.logical_of(page)?);
                Ok(dir_slot(page, copy, d))
            })
            .collect::<Result<_, DbError>>()?;
        let mut i = 0u64;
        while i < half {
            let index = half + i;
            let page_index = index / DIR_PER_PAGE;
            let page = self.cache.get(dir_page(self.dir_pages, page_index, 0))?;
            let room = (DIR_PER_PAGE - index % DIR_PER_PAGE).min(half - i);
            self.copies.mark_dir_changed(page_index);
            page.write(|b| {
                for j in 0..room {
                    put_u64(b, dir_slot_offset(index + j), lower[(i + j) as usize]);
                }
            });
            i += room;
        }
        self.global_depth.store(depth + 1, Ordering::Release);
        Ok(())
    }

    /// Splits the full bucket at page `bucket` (hash pattern `pattern`, covering `hash`),
    /// doubling the directory first when the bucket's depth equals it. The new bucket is
    /// written before any pointer to it; the old bucket keeps its page and its pattern (so its
    /// cache placement), and its slots get the deeper depth before it is rewritten.
    pub(super) fn split(&self, bucket: u64, pattern: u64, hash: u64) -> Result<(), DbError> {
        let _split = self.split_lock.lock();
        let b = self.bucket(bucket, pattern)?;
        self.dirty_bucket(bucket);
        b.write(|bytes| {
            if !bucket_covers(bytes, hash) || bucket_count(bytes) < BUCKET_CAP {
                return Ok(()); // split (or emptied) by another thread meanwhile
            }
            let depth = bucket_depth(bytes);
            if depth >= self.max_depth {
                return Err(DbError::IndexFull {
                    max_depth: self.max_depth,
                });
            }
            let pattern = bucket_pattern(bytes);
            debug_assert_eq!(
                pattern,
                hash & mask(depth),
                "a bucket's pattern is its hashes'"
            );
            let global = self.global_depth.load(Ordering::Acquire);
            if depth == global {
                self.double_directory(global)?;
            }
            let new_page = self.alloc_bucket()?;
            let bit = 1u64 << depth;
            self.dirty_bucket(new_page);
            let entries: Vec<Entry> = (0..bucket_count(bytes))
                .map(|i| Entry::read(bytes, i))
                .collect();
            let (moved, kept): (Vec<Entry>, Vec<Entry>) = entries
                .into_iter()
                .partition(|e| u64::from(e.hash) & bit != 0);
            let class = PageClass::Index {
                set_key: pattern | bit,
            };
            let written = self.cache.get_for_overwrite_as(new_page, class).map(|r| {
                r.write(|nb| {
                    init_bucket(nb, depth + 1, pattern | bit);
                    for (i, e) in moved.iter().enumerate() {
                        e.write(nb, i);
                    }
                    set_bucket_count(nb, moved.len());
                })
            });
            if let Err(err) = written {
                self.free_or_leak(new_page, 2);
                return Err(err.into());
            }
            // The slots of the new bucket's pattern now point to it; the old bucket's keep
            // their page with the deeper depth.
            let global = self.global_depth.load(Ordering::Acquire);
            let step = 1u64 << (depth + 1);
            let mut index = pattern;
            while index < (1u64 << global) {
                self.dir_set(index | bit, new_page, depth + 1)?;
                self.dir_set(index, bucket, depth + 1)?;
                index += step;
            }
            init_bucket(bytes, depth + 1, pattern);
            for (i, e) in kept.iter().enumerate() {
                e.write(bytes, i);
            }
            set_bucket_count(bytes, kept.len());
            Ok(())
        })
    }
}

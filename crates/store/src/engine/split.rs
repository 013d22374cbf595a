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

use tamer_cache::{PageClass, PageRef};

use super::directory::mask;
use super::Engine;
use crate::layout::*;
use crate::DbError;

impl Engine {
    /// Doubles the directory from depth `depth` (the caller holds the split lock): the upper
    /// half (slots 2^depth..2^(depth+1), in the fixed region or in segment `depth -
    /// fixed_depth`, allocated the first time) is written first, then the depth is published.
    /// A failure leaves the depth as it was (an allocated segment stays for the next try).
    fn double_directory(&self, depth: u32) -> Result<(), DbError> {
        let half = 1u64 << depth;
        if depth >= self.fixed_depth {
            self.ensure_segment(depth - self.fixed_depth)?;
        }
        let mut i = 0u64;
        while i < half {
            let index = half + i;
            let (place, at) = dir_place(self.fixed_depth, index);
            let (tag, l) = self.dir_page_at(place)?;
            let room = (DIR_PER_PAGE - (at - DIR_HEADER) as u64 / 8).min(half - i);
            let slots = (i..i + room)
                .map(|j| {
                    let (page, d) = self.dir_get(j)?;
                    let copy = self.copies.bucket_copy(self.logical_of(page)?);
                    Ok(dir_slot(page, copy, d))
                })
                .collect::<Result<Vec<u64>, DbError>>()?;
            let page = match l {
                // A segment page is written whole: what its copies held is never read.
                Some(_) => self
                    .cache
                    .get_for_overwrite_as(tag, PageClass::Index { set_key: tag })?,
                None => self.cache.get(tag)?,
            };
            self.dirty_dir_page(place, tag, l);
            page.write(|b| {
                if l.is_some() {
                    b[..PAYLOAD].fill(0);
                }
                for (j, &slot) in slots.iter().enumerate() {
                    put_u64(b, at + 8 * j, slot);
                }
            });
            i += room;
        }
        self.global_depth.store(depth + 1, Ordering::Release);
        Ok(())
    }

    /// The directory page and offset of each of `slots`, every page marked changed and held
    /// in the cache (at most one page per slot; a bucket's slots span few pages).
    fn dir_pages_for(&self, slots: &[u64]) -> Result<Vec<(PageRef<'_>, usize)>, DbError> {
        let mut out: Vec<(PageRef<'_>, usize)> = Vec::with_capacity(slots.len());
        let mut last: Option<(u64, usize)> = None;
        for &index in slots {
            let (place, at) = dir_place(self.fixed_depth, index);
            let (tag, l) = self.dir_page_at(place)?;
            let page = match last {
                Some((t, n)) if t == tag => out[n].0.clone(),
                _ => {
                    let page = self.dir_page_ref(tag, l.is_some())?;
                    self.dirty_dir_page(place, tag, l);
                    last = Some((tag, out.len()));
                    page
                }
            };
            out.push((page, at));
        }
        Ok(out)
    }

    /// Allocates directory segment `s` unless it is: `segment_pages` pages, two copies each,
    /// named in DRAM at once and by the next checkpoint's superblock.
    fn ensure_segment(&self, s: u32) -> Result<(), DbError> {
        let slot = &self.dir_segments[s as usize];
        if slot.load(Ordering::Acquire) != 0 {
            return Ok(());
        }
        let pages = segment_pages(self.fixed_depth, s);
        let first = self.logical_of(self.alloc_marked(
            2 * pages,
            MapKind::Directory,
            MapKind::Directory,
        )?)?;
        assert!(first != 0, "logical page 0 is the first bucket");
        for k in 0..pages {
            self.copies
                .set_dir_segment_page(segment_page(first, k, 0), 0);
        }
        slot.store(first, Ordering::Release);
        Ok(())
    }

    /// Splits the full bucket at page `bucket` (hash pattern `pattern`, covering `hash`),
    /// doubling the directory first when the bucket's depth equals it. The new bucket is
    /// written before any pointer to it; the old bucket keeps its page and its pattern (so its
    /// cache placement), and its slots get the deeper depth before it is rewritten.
    pub(super) fn split(&self, bucket: u64, pattern: u64, hash: u64) -> Result<(), DbError> {
        let _split = self.split_lock.lock();
        let b = self.bucket(bucket, pattern)?;
        self.dirty_bucket(bucket, pattern);
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
            // Every directory page the split rewrites, in the cache before anything changes
            // (a segment page may miss): from here on the split cannot fail half done.
            let bit = 1u64 << depth;
            let global = self.global_depth.load(Ordering::Acquire);
            let slots: Vec<u64> = (pattern..1u64 << global)
                .step_by(1 << (depth + 1))
                .flat_map(|index| [index | bit, index])
                .collect();
            let pages = self.dir_pages_for(&slots)?;
            let new_page = self.alloc_bucket()?;
            let entries: Vec<Entry> = (0..bucket_count(bytes))
                .map(|i| Entry::read(bytes, i))
                .collect();
            let (moved, kept): (Vec<Entry>, Vec<Entry>) =
                entries.into_iter().partition(|e| e.hash & bit != 0);
            self.write_split_bucket(new_page, depth + 1, pattern | bit, &moved)?;
            // The slots of the new bucket's pattern now point to it; the old bucket's keep
            // their page with the deeper depth.
            let (new_copy, old_copy) = (
                self.copies.bucket_copy(self.logical_of(new_page)?),
                self.copies.bucket_copy(self.logical_of(bucket)?),
            );
            for (n, &index) in slots.iter().enumerate() {
                let (page, at) = &pages[n];
                let (target, copy) = if index & bit != 0 {
                    (new_page, new_copy)
                } else {
                    (bucket, old_copy)
                };
                page.store_u64(*at, dir_slot(target, copy, depth + 1));
            }
            init_bucket(bytes, depth + 1, pattern);
            for (i, e) in kept.iter().enumerate() {
                e.write(bytes, i);
            }
            set_bucket_count(bytes, kept.len());
            Ok(())
        })
    }
    /// Writes the bucket a split creates at `new_page` (its depth `depth`, its pattern
    /// `pattern`) holding `moved`, and marks it dirty; frees the page again if it cannot.
    fn write_split_bucket(
        &self,
        new_page: u64,
        depth: u32,
        pattern: u64,
        moved: &[Entry],
    ) -> Result<(), DbError> {
        let class = PageClass::Index { set_key: pattern };
        let written = self.cache.get_for_overwrite_as(new_page, class).map(|r| {
            r.write(|nb| {
                init_bucket(nb, depth, pattern);
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
        self.dirty_bucket(new_page, pattern);
        Ok(())
    }
}

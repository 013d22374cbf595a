//! The directory and the bucket pages it names: the index's hash of a key, the directory's
//! slots (the fixed region's pages pinned, segment pages cached as index pages), which bucket
//! covers a hash, a bucket page as an index page placed by its pattern, and the walk over
//! every bucket (`buckets`, the warm-up at open).
//!
//! Invariants: a slot is one `u64`, written with one atomic store and read optimistically with
//! one atomic load; a slot names its bucket's current copy (`CopyState`), and every slot or
//! bucket change marks its page changed for the next checkpoint; a slot at or past 2^global
//! depth is never read (a segment is named before the depth that uses it is published);
//! a bucket's pattern is the
//! lowest slot naming it (a split keeps the old bucket's pattern, so a slot read before the
//! split still leads to a bucket whose pattern matches at the depth the slot names).

use std::sync::atomic::Ordering;

use tamer_cache::{PageClass, PageRef, BATCH};

use std::sync::atomic::AtomicU64;

use super::Engine;
use crate::layout::*;
use crate::DbError;

/// The directory segments' first logical pages (0: not allocated), one per depth past the
/// fixed region; read on every lookup without a lock.
pub(super) fn no_segments() -> Box<[AtomicU64]> {
    (0..MAX_SEGMENTS).map(|_| AtomicU64::new(0)).collect()
}

pub(super) fn mask(depth: u32) -> u64 {
    if depth == 0 {
        0
    } else {
        (1u64 << depth) - 1
    }
}

impl Engine {
    /// The index's hash of `key` (keyed by this store's `hash_key`).
    pub fn hash(&self, key: &[u8]) -> u64 {
        key_hash(self.hash_key, key)
    }

    /// Marks a bucket (pattern `pattern`) changed since the last checkpoint (no lock: a bit
    /// in `CopyState`, and the first mark lists it).
    pub(super) fn dirty_bucket(&self, page: u64, pattern: u64) {
        if let Some(l) = logical(self.space_start, page) {
            if self.copies.mark_pair_changed(l, pattern) {
                self.watch_set(page, PageClass::Index { set_key: pattern });
            }
        }
    }

    /// The cache tag of the directory page at `place` and, for a segment page, its first
    /// copy's logical page.
    pub(super) fn dir_page_at(&self, place: DirPlace) -> Result<(u64, Option<u64>), DbError> {
        match place {
            DirPlace::Fixed(i) => Ok((dir_page(self.dir_pages, i, 0), None)),
            DirPlace::Segment { s, k } => {
                let first = self
                    .dir_segments
                    .get(s as usize)
                    .map_or(0, |f| f.load(Ordering::Acquire));
                if first == 0 {
                    return Err(super::corrupt(
                        0,
                        format!("directory segment {s} is not allocated"),
                    ));
                }
                let l = segment_page(first, k, 0);
                Ok((self.phys(l), Some(l)))
            }
        }
    }

    /// The directory page `tag` (a segment page when `segment`) from the cache: the fixed
    /// region's are pinned, a segment's are index pages placed by their tag.
    pub(super) fn dir_page_ref(&self, tag: u64, segment: bool) -> Result<PageRef<'_>, DbError> {
        Ok(if segment {
            self.cache.get_as(tag, PageClass::Index { set_key: tag })?
        } else {
            self.cache.get(tag)?
        })
    }

    /// Directory slot `index`: (bucket page, the bucket's local depth).
    pub(super) fn dir_get(&self, index: u64) -> Result<(u64, u32), DbError> {
        let (place, at) = dir_place(self.fixed_depth, index);
        let (tag, l) = self.dir_page_at(place)?;
        let page = self.dir_page_ref(tag, l.is_some())?;
        let slot = page
            .load_u64_optimistic(at)
            .unwrap_or_else(|| page.read(|b| get_u64(b, at)));
        Ok(dir_slot_parts(slot))
    }

    /// Marks the directory page at `place` (cache tag `tag`, segment page `l`) changed.
    pub(super) fn dirty_dir_page(&self, place: DirPlace, tag: u64, l: Option<u64>) {
        match (place, l) {
            (DirPlace::Fixed(i), _) => self.copies.mark_dir_changed(i),
            (DirPlace::Segment { .. }, Some(l)) => {
                let _ = self.copies.mark_pair_changed(l, tag);
            }
            (DirPlace::Segment { .. }, None) => unreachable!("a segment page has a logical page"),
        }
    }

    /// Points slot `index` at `bucket` (its current copy from `CopyState`) at `depth`.
    pub(super) fn dir_set(&self, index: u64, bucket: u64, depth: u32) -> Result<(), DbError> {
        let (place, at) = dir_place(self.fixed_depth, index);
        let (tag, l) = self.dir_page_at(place)?;
        let page = self.dir_page_ref(tag, l.is_some())?;
        let copy = self.copies.bucket_copy(self.logical_of(bucket)?);
        self.dirty_dir_page(place, tag, l);
        // One atomic store: `dir_get` reads the slot optimistically with one atomic load.
        page.store_u64(at, dir_slot(bucket, copy, depth));
        Ok(())
    }

    /// The bucket the directory names for `hash`: (page, its hash pattern).
    pub(super) fn bucket_for(&self, hash: u64) -> Result<(u64, u64), DbError> {
        let global = self.global_depth.load(Ordering::Acquire);
        let (page, depth) = self.dir_get(hash & mask(global))?;
        // A slot written before a split may name a smaller depth: the pattern at that depth is
        // still the bucket's own (a split keeps the old bucket's pattern).
        Ok((page, hash & mask(depth.min(global))))
    }

    /// A bucket page, as an index page placed by its pattern: buckets spread evenly over the
    /// cache's sets and stay resident ahead of data pages (`tamer_cache::PageClass::Index`).
    pub(super) fn bucket(&self, page: u64, pattern: u64) -> Result<PageRef<'_>, DbError> {
        Ok(self
            .cache
            .get_as(page, PageClass::Index { set_key: pattern })?)
    }

    /// Reads `buckets` ((page, pattern) pairs) into the cache as index pages, [`BATCH`] reads
    /// overlapped at a time. Returns how many it read.
    pub fn warm_buckets(&self, buckets: &[(u64, u64)]) -> Result<u64, DbError> {
        let _op = self.check_open()?;
        self.fetch_buckets(buckets)?;
        Ok(buckets.len() as u64)
    }

    /// Reads `buckets` ((page, pattern) pairs) into the cache as index pages, [`BATCH`] reads
    /// in flight (no admission: recovery runs it before the store opens).
    pub(super) fn fetch_buckets(&self, buckets: &[(u64, u64)]) -> Result<(), DbError> {
        for chunk in buckets.chunks(BATCH) {
            let fetches = chunk
                .iter()
                .map(|&(page, pattern)| {
                    self.cache
                        .prefetch_as(page, PageClass::Index { set_key: pattern })
                })
                .collect::<Result<Vec<_>, _>>()?;
            for fetch in fetches {
                fetch.wait()?;
            }
        }
        Ok(())
    }

    /// Every bucket once: (page, pattern), from the directory (in DRAM, pinned).
    pub fn buckets(&self) -> Result<Vec<(u64, u64)>, DbError> {
        let global = self.global_depth.load(Ordering::Acquire);
        let mut out = Vec::new();
        for index in 0..1u64 << global {
            let (page, depth) = self.dir_get(index)?;
            // A bucket's lowest slot is its pattern.
            if index < 1u64 << depth.min(global) {
                out.push((page, index));
            }
        }
        Ok(out)
    }
}

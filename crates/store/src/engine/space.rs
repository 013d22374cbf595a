//! Space: the page map (what each managed page holds, a data page's live bytes) and the
//! allocator over logical pages, growing the file on demand.
//!
//! The map is on the device at all times (one map page per group of 1018 pages, see
//! `layout`), updated in the cache as pages are allocated, filled and freed; the in-DRAM free
//! extents are rebuilt from it at open. Lock order: a data page's latch, then its map page's
//! (a live-bytes change happens under the data page's latch, so the page cannot be freed
//! between a record's write and its count); the allocator's mutex is taken with no latch
//! held by it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use tamer_cache::{PageRef, PAGE_SIZE};
use tamer_device::FileSet;

use super::{corrupt, Engine};
use crate::alloc::Alloc;
use crate::layout::*;
use crate::DbError;

/// A closed data page with this many live bytes or fewer (and some) is compacted: its live
/// records are rewritten to the open page, so that it is freed. Half a page: space
/// amplification from pages held by a few live records stays below about 2× (with a quarter,
/// the `volatile` TATP of `tamer bench durability --quick` filled a device 3× its data + 256
/// MiB: uniform overwrites leave most old pages 25-50 % live). Compaction runs only under
/// space pressure, so the threshold bounds the space a store needs, not its steady write
/// cost; a page moved copies at most half a page to free a whole one.
pub const COMPACT_LIVE_BYTES: u32 = (PAYLOAD / 2) as u32;

/// Where new pages come from.
pub(crate) enum Space {
    /// A file, or files striped as one, grown with `posix_fallocate` (all together), up to
    /// `max_bytes` in all.
    File {
        files: Arc<FileSet>,
        max_bytes: Option<u64>,
    },
    /// A device of a fixed size (the emulator).
    Fixed { capacity_bytes: u64 },
}

impl Engine {
    /// The logical page of physical page `p`, or a `Corrupt` error naming it when it is not a
    /// managed page (the index named a superblock, directory or map page).
    pub(super) fn logical_of(&self, p: u64) -> Result<u64, DbError> {
        logical(self.space_start, p).ok_or_else(|| corrupt(p, "not a managed page"))
    }

    /// Page `i` of the extent starting at physical page `first` (extents are consecutive in
    /// logical pages, so they may straddle a group's map pages).
    pub(super) fn extent_page(&self, first: u64, i: u64) -> Result<u64, DbError> {
        Ok(self.phys(self.logical_of(first)? + i))
    }

    /// The map page of logical page `l`, and the byte offset of `l`'s entry in it. A map page
    /// never written reads as all zeros: every entry free.
    pub(super) fn map_of(&self, l: u64) -> Result<(PageRef<'_>, usize), DbError> {
        let group = l / MAP_ENTRIES;
        let page = map_page(self.space_start, group, 0);
        // A data-class page: map pages are few (one per 4 MiB of store) and touched by every
        // put, so CLOCK keeps them; the index share stays the buckets'.
        let r = self.cache.get(page)?;
        let (kind, stored_group) = r.read(|b| (get_u32(b, 0), get_u32(b, 4)));
        if (kind != KIND_MAP && kind != 0) || (kind == KIND_MAP && u64::from(stored_group) != group)
        {
            return Err(corrupt(page, "not the map page of its group"));
        }
        Ok((r, MAP_HEADER + (l % MAP_ENTRIES) as usize * 4))
    }

    /// Logical page `l`'s map entry.
    pub(super) fn map_get(&self, l: u64) -> Result<u32, DbError> {
        let (r, at) = self.map_of(l)?;
        Ok(r.read(|b| get_u32(b, at)))
    }

    /// Replaces logical page `l`'s map entry with `f(entry)`; returns the new entry.
    pub(super) fn map_update(
        &self,
        l: u64,
        f: impl FnOnce(u32) -> Result<u32, DbError>,
    ) -> Result<u32, DbError> {
        let (r, at) = self.map_of(l)?;
        let group = (l / MAP_ENTRIES) as u32;
        self.copies.mark_map_changed(u64::from(group));
        r.write(|b| {
            let new = f(get_u32(b, at))?;
            if get_u32(b, 0) == 0 {
                put_u32(b, 0, KIND_MAP);
                put_u32(b, 4, group);
            }
            put_u32(b, at, new);
            Ok(new)
        })
    }

    /// Sets the entries of logical pages `l..l + n`: `first` for `l`, `rest` for the others.
    fn map_set(&self, l: u64, n: u64, first: u32, rest: u32) -> Result<(), DbError> {
        for i in 0..n {
            self.map_update(l + i, |_| Ok(if i == 0 { first } else { rest }))?;
        }
        Ok(())
    }

    /// Adds `delta` (a record's span, or minus it) to data page `page`'s live bytes; returns
    /// the new count. Called under the data page's latch.
    pub(super) fn add_live(&self, page: u64, delta: i64) -> Result<u32, DbError> {
        let l = self.logical_of(page)?;
        let entry = self.map_update(l, |entry| {
            if MapKind::of(entry) != Some(MapKind::Data) {
                return Err(corrupt(
                    page,
                    "live bytes of a page the map says is not data",
                ));
            }
            let live = i64::from(map_live(entry)) + delta;
            if !(0..=PAYLOAD as i64).contains(&live) {
                return Err(corrupt(page, "live bytes out of range"));
            }
            Ok(map_entry(MapKind::Data, live as u32))
        })?;
        Ok(map_live(entry))
    }

    /// Data page `page`'s live bytes.
    pub(super) fn live_bytes(&self, page: u64) -> Result<u32, DbError> {
        Ok(map_live(self.map_get(self.logical_of(page)?)?))
    }

    /// Rebuilds the free extents below the high-water mark `next_page` from the map (a clean
    /// open): every free entry, coalesced.
    pub(super) fn load_free_extents(&self, next_page: u64) -> Result<(), DbError> {
        let mut free = Vec::new();
        for group in 0..next_page.div_ceil(MAP_ENTRIES) {
            let first = group * MAP_ENTRIES;
            let (r, _) = self.map_of(first)?;
            let end = next_page.min(first + MAP_ENTRIES);
            r.read(|b| -> Result<(), DbError> {
                for l in first..end {
                    let entry = get_u32(b, MAP_HEADER + (l - first) as usize * 4);
                    match MapKind::of(entry) {
                        Some(MapKind::Free) => free.push(l),
                        Some(_) => {}
                        None => return Err(corrupt(self.phys(l), "map entry of no kind")),
                    }
                }
                Ok(())
            })?;
        }
        let mut alloc = self.lock_alloc();
        for l in free {
            alloc.free.give(l, 1);
        }
        Ok(())
    }

    /// Makes logical pages `..end` addressable, growing the file if needed.
    pub(super) fn ensure_capacity(&self, end: u64, asked: u64) -> Result<(), DbError> {
        let end_physical = if end == 0 { 0 } else { self.phys(end - 1) + 1 };
        if end_physical > MAX_PAGES {
            return Err(DbError::NoSpace {
                pages: asked,
                detail: format!(
                    "a store file holds at most {MAX_PAGES} pages (16 TiB): index entries name \
                     pages in 32 bits"
                ),
            });
        }
        let bytes = end_physical * PAGE_SIZE as u64;
        match &self.space {
            Space::Fixed { capacity_bytes } => {
                if bytes > *capacity_bytes {
                    return Err(DbError::NoSpace {
                        pages: asked,
                        detail: format!("the device holds {capacity_bytes} bytes"),
                    });
                }
                Ok(())
            }
            Space::File {
                files: file,
                max_bytes,
            } => {
                let current = file.capacity_bytes();
                if bytes <= current {
                    return Ok(());
                }
                let limit = max_bytes.unwrap_or(u64::MAX);
                if bytes > limit {
                    return Err(DbError::NoSpace {
                        pages: asked,
                        detail: format!("DbOptions::max_file_bytes is {limit}"),
                    });
                }
                // Grow geometrically (by a quarter, at least 16 MiB) to amortize the syscall.
                let target = bytes.max(current + (current / 4).max(16 << 20)).min(limit);
                let grown = file.grow_to(target).or_else(|err| {
                    if err.is_no_space() && target > bytes {
                        file.grow_to(bytes)
                    } else {
                        Err(err)
                    }
                });
                match grown {
                    Ok(_) => Ok(()),
                    Err(err) if err.is_no_space() => Err(DbError::NoSpace {
                        pages: asked,
                        detail: err.to_string(),
                    }),
                    Err(err) => Err(err.into()),
                }
            }
        }
    }

    /// `n` consecutive logical pages for `kind` (data, bucket or an extent), marked in the map:
    /// returns the physical page of the first. Best fit among free extents, else past the
    /// high-water mark. Growing the file (a `posix_fallocate`) happens outside the allocator's
    /// lock, so other cores' allocations do not wait for the syscall; the space is then
    /// claimed under the lock (another thread may have used the growth first: retried, at
    /// most `ALLOC_GROW_ATTEMPTS` times, then grown under the lock to guarantee progress).
    pub(super) fn alloc_pages(&self, n: u64, kind: MapKind) -> Result<u64, DbError> {
        debug_assert!(n > 0 && matches!(kind, MapKind::Data | MapKind::ExtentHead));
        self.alloc_marked(n, kind, MapKind::ExtentTail)
    }

    /// A new bucket: two pages (its two copies; the first is its name, the current copy is
    /// the first until a checkpoint writes the second).
    pub(super) fn alloc_bucket(&self) -> Result<u64, DbError> {
        let page = self.alloc_marked(2, MapKind::Bucket, MapKind::BucketCopy)?;
        self.copies.set_bucket(self.logical_of(page)?, 0);
        Ok(page)
    }

    pub(super) fn alloc_marked(
        &self,
        n: u64,
        kind: MapKind,
        rest: MapKind,
    ) -> Result<u64, DbError> {
        let l = self.alloc_logical(n)?;
        let rest = map_entry(rest, 0);
        if let Err(err) = self.map_set(l, n, map_entry(kind, 0), rest) {
            // The map could not say they are used: they stay unused (and unmarked) in DRAM.
            self.lock_alloc().free.give(l, n);
            return Err(err);
        }
        Ok(self.phys(l))
    }

    fn alloc_logical(&self, n: u64) -> Result<u64, DbError> {
        const ALLOC_GROW_ATTEMPTS: usize = 8;
        for attempt in 0..=ALLOC_GROW_ATTEMPTS {
            let mut alloc = self.lock_alloc();
            if let Some(start) = alloc.free.take(n) {
                return Ok(start);
            }
            // A free extent at the end of the used range is extended rather than left behind.
            let high = alloc.next_page;
            let tail = alloc.free.take_tail(high);
            let start = tail.unwrap_or(high);
            let end = start + n;
            if self.capacity_covers(end) || attempt == ALLOC_GROW_ATTEMPTS {
                if let Err(err) = self.ensure_capacity(end, n) {
                    if let Some(tail) = tail {
                        let len = alloc.next_page - tail;
                        alloc.free.give(tail, len);
                    }
                    return Err(err);
                }
                alloc.next_page = end;
                return Ok(start);
            }
            if let Some(tail) = tail {
                let len = alloc.next_page - tail;
                alloc.free.give(tail, len);
            }
            drop(alloc);
            self.ensure_capacity(end, n)?;
        }
        unreachable!("the last attempt grows under the lock or fails")
    }

    /// True when logical pages `..end` are addressable without growing anything.
    fn capacity_covers(&self, end: u64) -> bool {
        let end_physical = if end == 0 { 0 } else { self.phys(end - 1) + 1 };
        let bytes = end_physical.saturating_mul(PAGE_SIZE as u64);
        match &self.space {
            Space::Fixed { capacity_bytes } => bytes <= *capacity_bytes,
            Space::File { files, .. } => bytes <= files.capacity_bytes(),
        }
    }

    /// Frees `n` pages from physical page `start` (consecutive in logical pages): marked free
    /// in the map now, handed to the allocator once the next checkpoint is durable (until
    /// then the last checkpoint may still name them).
    pub(super) fn free_pages(&self, start: u64, n: u64) -> Result<(), DbError> {
        let l = self.logical_of(start)?;
        let free = map_entry(MapKind::Free, 0);
        self.map_set(l, n, free, free)?;
        let mut dirty = self.lock_dirty();
        dirty.freed.push((l, n));
        dirty.freed_pages += n;
        self.freed_pages.store(dirty.freed_pages, Ordering::Relaxed);
        Ok(())
    }

    /// Logical pages the file (or device) can hold now.
    pub(super) fn capacity_pages(&self) -> u64 {
        logical_below(self.space_start, self.capacity_bytes() / PAGE_SIZE as u64)
    }

    pub(super) fn lock_alloc(&self) -> MutexGuard<'_, Alloc> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The physical page of logical page `l`.
    pub(super) fn phys(&self, l: u64) -> u64 {
        physical(self.space_start, l)
    }

    fn capacity_bytes(&self) -> u64 {
        match &self.space {
            Space::File { files, .. } => files.capacity_bytes(),
            Space::Fixed { capacity_bytes } => *capacity_bytes,
        }
    }

    pub fn leaked_pages(&self) -> u64 {
        self.leaked_pages.load(Ordering::Relaxed)
    }

    /// (high-water mark, free pages, free extents).
    pub fn space_stats(&self) -> (u64, u64, usize) {
        let alloc = self.lock_alloc();
        (alloc.next_page, alloc.free.pages(), alloc.free.extents())
    }
}

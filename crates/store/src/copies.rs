//! Which copy of each index page holds its last checkpointed image, and the cache's
//! [`PageAddresses`] built on it (issue 9's checkpoints, `docs/durability.md`).
//!
//! Index pages (buckets, directory pages, map pages) have two copies on the device. Between
//! checkpoints they change only in DRAM: the cache never writes them back nor evicts them while
//! dirty (`write_to` is `None` for them), so the copy named here is both the last checkpoint's
//! image and, for a clean page, its current content, which a miss reads. A checkpoint writes a
//! dirty index page to the other copy (`PageCache::write_back_to`) after switching the copy
//! named here, while the page is still dirty (so not evictable: no miss can read the other
//! copy before it is written).
//!
//! Pages are named by their first copy's physical page, the cache's tag for them. It also
//! records which index pages changed since the last checkpoint, without a lock (a bit each,
//! set by the change, cleared by the checkpoint that writes the page). DRAM: one byte per
//! directory page and per group, four bits per managed page (a bucket's first page, which
//! copy, changed).

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::RwLock;

use tamer_cache::PageAddresses;

use crate::layout::*;

/// In a directory page's or a map page's byte: its current copy.
const COPY: u8 = 1;
/// In the same byte: changed since the last checkpoint.
const CHANGED: u8 = 2;
/// A managed page's four bits: a bucket's first page, its current copy is the second, changed.
const BUCKET: u64 = 1;
const BUCKET_COPY: u64 = 2;
const BUCKET_CHANGED: u64 = 4;

pub(crate) struct CopyState {
    space_start: u64,
    dir_pages: u64,
    /// Per directory page: [`COPY`] | [`CHANGED`].
    dir_copy: Vec<AtomicU8>,
    /// Per group, its map page: [`COPY`] | [`CHANGED`]; grows with the store.
    map_copy: RwLock<Vec<AtomicU8>>,
    /// Four bits per logical page ([`BUCKET`], [`BUCKET_COPY`], [`BUCKET_CHANGED`]), 16 pages
    /// per word; grows with the store.
    buckets: RwLock<Vec<AtomicU64>>,
    /// Index pages whose changed bit is set.
    changed: AtomicUsize,
}

impl CopyState {
    /// State of a store whose directory has `dir_pages` pages, with the directory copies
    /// chosen at open (`dir_copy`, all 0 for a new store) and the map copies of its groups.
    pub fn new(max_depth: u32, dir_copy: Vec<u8>, map_copy: Vec<u8>) -> Self {
        let dir_pages = dir_pages(max_depth);
        assert_eq!(
            dir_copy.len() as u64,
            dir_pages,
            "a copy per directory page"
        );
        Self {
            space_start: space_start(dir_pages),
            dir_pages,
            dir_copy: dir_copy.into_iter().map(AtomicU8::new).collect(),
            map_copy: RwLock::new(map_copy.into_iter().map(AtomicU8::new).collect()),
            buckets: RwLock::new(Vec::new()),
            changed: AtomicUsize::new(0),
        }
    }

    /// Index pages changed since the last checkpoint.
    pub fn changed(&self) -> usize {
        self.changed.load(Ordering::Relaxed)
    }

    /// Sets `flag` in `byte`; counts it when it was clear.
    fn mark(&self, byte: &AtomicU8, flag: u8) {
        if byte.load(Ordering::Relaxed) & flag == 0
            && byte.fetch_or(flag, Ordering::AcqRel) & flag == 0
        {
            self.changed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears `flag` in `byte`; true (and uncounted) when it was set.
    fn take(&self, byte: &AtomicU8, flag: u8) -> bool {
        let was = byte.fetch_and(!flag, Ordering::AcqRel) & flag != 0;
        if was {
            self.changed.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    pub fn mark_dir_changed(&self, i: u64) {
        self.mark(&self.dir_copy[i as usize], CHANGED);
    }

    /// The directory pages changed since the last checkpoint (their marks cleared).
    pub fn take_changed_dir_pages(&self) -> Vec<u64> {
        (0..self.dir_pages)
            .filter(|&i| self.take(&self.dir_copy[i as usize], CHANGED))
            .collect()
    }

    pub fn mark_map_changed(&self, group: u64) {
        self.with_map_byte(group, |byte| self.mark(byte, CHANGED));
    }

    /// The groups whose map page changed since the last checkpoint (their marks cleared).
    pub fn take_changed_groups(&self) -> Vec<u64> {
        let copies = self.map_copy.read().unwrap_or_else(|p| p.into_inner());
        (0..copies.len() as u64)
            .filter(|&g| self.take(&copies[g as usize], CHANGED))
            .collect()
    }

    /// Runs `f` on group `group`'s byte, growing the table to it.
    fn with_map_byte<T>(&self, group: u64, f: impl FnOnce(&AtomicU8) -> T) -> T {
        let index = group as usize;
        {
            let copies = self.map_copy.read().unwrap_or_else(|p| p.into_inner());
            if let Some(byte) = copies.get(index) {
                return f(byte);
            }
        }
        let mut copies = self.map_copy.write().unwrap_or_else(|p| p.into_inner());
        while copies.len() <= index {
            copies.push(AtomicU8::new(0));
        }
        f(&copies[index])
    }

    /// Marks the bucket whose first page is logical page `l` changed.
    pub fn mark_bucket_changed(&self, l: u64) {
        let shift = 4 * (l % 16);
        let flag = BUCKET_CHANGED << shift;
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let Some(w) = words.get((l / 16) as usize) else {
            debug_assert!(false, "a changed bucket is known");
            return;
        };
        if w.load(Ordering::Relaxed) & flag == 0 && w.fetch_or(flag, Ordering::AcqRel) & flag == 0 {
            self.changed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears bucket `l`'s changed mark; true when it was set.
    pub fn take_bucket_changed(&self, l: u64) -> bool {
        let flag = BUCKET_CHANGED << (4 * (l % 16));
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let was = words
            .get((l / 16) as usize)
            .is_some_and(|w| w.fetch_and(!flag, Ordering::AcqRel) & flag != 0);
        if was {
            self.changed.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    #[cfg(test)]
    pub fn space_start(&self) -> u64 {
        self.space_start
    }

    pub fn dir_copy(&self, i: u64) -> u64 {
        u64::from(self.dir_copy[i as usize].load(Ordering::Acquire) & COPY)
    }

    pub fn set_dir_copy(&self, i: u64, copy: u64) {
        let byte = &self.dir_copy[i as usize];
        let _ = byte.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
            Some(old & !COPY | copy as u8)
        });
    }

    pub fn map_copy(&self, group: u64) -> u64 {
        let copies = self.map_copy.read().unwrap_or_else(|p| p.into_inner());
        copies
            .get(group as usize)
            .map_or(0, |c| u64::from(c.load(Ordering::Acquire) & COPY))
    }

    pub fn set_map_copy(&self, group: u64, copy: u64) {
        self.with_map_byte(group, |byte| {
            let _ = byte.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old & !COPY | copy as u8)
            });
        });
    }

    /// Logical page `l`'s [`BUCKET`] and [`BUCKET_COPY`] bits.
    fn bucket_bits(&self, l: u64) -> u64 {
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        words
            .get((l / 16) as usize)
            .map_or(0, |w| w.load(Ordering::Acquire) >> (4 * (l % 16)) & 3)
    }

    /// Marks logical page `l` a bucket's first page whose current copy is `copy` (its changed
    /// mark is kept).
    pub fn set_bucket(&self, l: u64, copy: u64) {
        debug_assert!(copy < 2);
        let index = (l / 16) as usize;
        let shift = 4 * (l % 16);
        let bits = (BUCKET | (copy * BUCKET_COPY)) << shift;
        let set = |w: &AtomicU64| {
            // Other pages' bits share the word: one atomic read-modify-write.
            let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old & !((BUCKET | BUCKET_COPY) << shift) | bits)
            });
        };
        {
            let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
            if let Some(w) = words.get(index) {
                set(w);
                return;
            }
        }
        let mut words = self.buckets.write().unwrap_or_else(|p| p.into_inner());
        while words.len() <= index {
            words.push(AtomicU64::new(0));
        }
        set(&words[index]);
    }

    /// The current copy of the bucket whose first page is logical page `l`.
    pub fn bucket_copy(&self, l: u64) -> u64 {
        self.bucket_bits(l) >> 1
    }

    /// The directory page (index, copy) a physical page is, if it is one.
    fn dir_page_of(&self, page: u64) -> Option<(u64, u64)> {
        let offset = page.checked_sub(DIR_START)?;
        (offset < 2 * self.dir_pages).then(|| (offset % self.dir_pages, offset / self.dir_pages))
    }

    /// The group whose map page (copy 0) `page` is, if it is one.
    fn map_group_of(&self, page: u64) -> Option<u64> {
        let offset = page.checked_sub(self.space_start)?;
        offset
            .is_multiple_of(GROUP_PAGES)
            .then_some(offset / GROUP_PAGES)
    }
}

impl PageAddresses for CopyState {
    fn read_from(&self, page: u64) -> u64 {
        if let Some((i, 0)) = self.dir_page_of(page) {
            return dir_page(self.dir_pages, i, self.dir_copy(i));
        }
        if let Some(group) = self.map_group_of(page) {
            return map_page(self.space_start, group, self.map_copy(group));
        }
        match logical(self.space_start, page) {
            Some(l) if self.bucket_bits(l) == 3 => physical(self.space_start, l + 1),
            _ => page,
        }
    }

    fn write_to(&self, page: u64) -> Option<u64> {
        let index_page = self.dir_page_of(page).is_some()
            || self.map_group_of(page).is_some()
            || logical(self.space_start, page).is_some_and(|l| self.bucket_bits(l) & 1 == 1);
        (!index_page).then_some(page)
    }
}

/// One copy of an index page as found on the device: `None` when its checksum fails (a torn
/// or never-finished write), else its epoch (0 for a page never written).
fn copy_epoch(page: u64, bytes: &[u8], epoch_at: usize) -> Option<u64> {
    if bytes[..PAYLOAD].iter().all(|&b| b == 0) {
        return Some(0);
    }
    tamer_cache::checksum::verify_page(page, bytes).then(|| get_u64(bytes, epoch_at))
}

/// Of two copies' epochs, the current copy: the valid one with the highest epoch not above
/// `epoch` (copy 0 on a tie). `None` when neither qualifies.
fn choose(epochs: [Option<u64>; 2], epoch: u64) -> Option<u64> {
    let ok = |c: usize| epochs[c].filter(|&e| e <= epoch);
    match (ok(0), ok(1)) {
        (Some(a), Some(b)) => Some(u64::from(b > a)),
        (Some(_), None) => Some(0),
        (None, Some(_)) => Some(1),
        (None, None) => None,
    }
}

/// Whether a copy is valid with an epoch above `epoch`: written by a checkpoint that never
/// completed. It is ignored now, but a later superblock's epoch would reach it.
fn stale(epochs: [Option<u64>; 2], epoch: u64) -> bool {
    epochs.iter().flatten().any(|&e| e > epoch)
}

/// The highest epoch any valid directory or map page copy on the device holds, for a store
/// created anew after its first checkpoint was torn: its checkpoints must number above what the
/// torn attempt left (else a stale copy could pass for a new one). Groups are scanned from 0
/// until both copies of one are empty (a new store allocates from the start).
pub(crate) fn max_epoch_written(
    max_depth: u32,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
) -> Result<u64, crate::DbError> {
    let dirs = dir_pages(max_depth);
    let start = space_start(dirs);
    let mut max = 0;
    for i in 0..dirs {
        for copy in 0..2 {
            let page = dir_page(dirs, i, copy);
            max = max.max(copy_epoch(page, &read(page)?, 0).unwrap_or(0));
        }
    }
    for group in 0.. {
        let mut any = false;
        for copy in 0..2 {
            let page = map_page(start, group, copy);
            let bytes = read(page)?;
            any |= bytes.iter().any(|&b| b != 0);
            max = max.max(copy_epoch(page, &bytes, 8).unwrap_or(0));
        }
        if !any {
            break;
        }
    }
    Ok(max)
}

/// Recovery's first step: for a store whose current superblock is `sb`, each directory page's
/// and each map page's current copy, then each bucket's from the chosen directory. `read`
/// returns a device page (zeros past the end). Returns the state and the next checkpoint's
/// epoch, above every epoch found (a checkpoint that crashed left higher ones: they must never
/// be taken for a later checkpoint's). Reads 2 × (directory pages + groups) pages.
pub(crate) fn recover(
    sb: &Superblock,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
) -> Result<(CopyState, u64), crate::DbError> {
    let corrupt = |page: u64, detail: String| crate::DbError::Corrupt { page, detail };
    let dirs = dir_pages(sb.max_depth);
    let start = space_start(dirs);
    let mut max_seen = sb.epoch;
    let mut dir_copy = Vec::with_capacity(dirs as usize);
    let (mut stale_dirs, mut stale_groups) = (Vec::new(), Vec::new());
    let mut dir_bytes = Vec::with_capacity(dirs as usize);
    for i in 0..dirs {
        let pages = [dir_page(dirs, i, 0), dir_page(dirs, i, 1)];
        let bytes = [read(pages[0])?, read(pages[1])?];
        let epochs = [0, 1].map(|c| copy_epoch(pages[c], &bytes[c], 0));
        max_seen = max_seen.max(epochs.iter().flatten().copied().max().unwrap_or(0));
        let copy = choose(epochs, sb.epoch).ok_or_else(|| {
            corrupt(
                pages[0],
                format!(
                    "no valid copy of directory page {i} at or before epoch {}",
                    sb.epoch
                ),
            )
        })?;
        dir_copy.push(copy as u8);
        if stale(epochs, sb.epoch) {
            stale_dirs.push(i);
        }
        let [b0, b1] = bytes;
        dir_bytes.push(if copy == 0 { b0 } else { b1 });
    }
    let groups = sb.next_page.div_ceil(MAP_ENTRIES);
    let mut map_copy = Vec::with_capacity(groups as usize);
    for group in 0..groups {
        let pages = [map_page(start, group, 0), map_page(start, group, 1)];
        let epochs = [read(pages[0])?, read(pages[1])?]
            .iter()
            .enumerate()
            .map(|(c, b)| copy_epoch(pages[c], b, 8))
            .collect::<Vec<_>>();
        let epochs = [epochs[0], epochs[1]];
        max_seen = max_seen.max(epochs.iter().flatten().copied().max().unwrap_or(0));
        let copy = choose(epochs, sb.epoch).ok_or_else(|| {
            corrupt(
                pages[0],
                format!(
                    "no valid copy of group {group}'s map at or before epoch {}",
                    sb.epoch
                ),
            )
        })?;
        map_copy.push(copy as u8);
        if stale(epochs, sb.epoch) {
            stale_groups.push(group);
        }
    }
    let state = CopyState::new(sb.max_depth, dir_copy, map_copy);
    // A copy a crashed checkpoint wrote (its epoch above the superblock's) would be taken for
    // current once a later superblock's epoch passes its own, unless the page is written
    // again first: the next checkpoint (the one ending this open) overwrites it.
    for i in stale_dirs {
        state.mark_dir_changed(i);
    }
    for group in stale_groups {
        state.mark_map_changed(group);
    }
    for index in 0..1u64 << sb.global_depth {
        let b = &dir_bytes[(index / DIR_PER_PAGE) as usize];
        let slot = get_u64(b, dir_slot_offset(index));
        let (page, depth) = dir_slot_parts(slot);
        if index >= 1u64 << depth.min(sb.global_depth) {
            continue; // the bucket's lowest slot names it
        }
        let l = logical(start, page)
            .filter(|&l| l + 1 < sb.next_page)
            .ok_or_else(|| {
                corrupt(
                    DIR_START + index / DIR_PER_PAGE,
                    format!("slot {index} names page {page}, not a bucket"),
                )
            })?;
        state.set_bucket(l, dir_slot_copy(slot));
    }
    Ok((state, max_seen + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a bucket's copy bit read from the wrong bit pair, a map copy applied to a data
    /// page, directory copies mixed up, index pages written back.
    #[test]
    fn addresses_follow_the_copies() {
        let state = CopyState::new(12, vec![0; 9], vec![1]);
        let start = state.space_start();
        assert_eq!(start, 2 + 18);
        // Directory page 3: copy 0 now, then copy 1.
        assert_eq!(state.read_from(DIR_START + 3), DIR_START + 3);
        state.set_dir_copy(3, 1);
        assert_eq!(state.read_from(DIR_START + 3), DIR_START + 9 + 3);
        assert_eq!(state.write_to(DIR_START + 3), None);
        // Group 0's map page is at copy 1; group 5's (not seen yet) at copy 0.
        assert_eq!(state.read_from(start), start + 1);
        assert_eq!(
            state.read_from(start + 5 * GROUP_PAGES),
            start + 5 * GROUP_PAGES
        );
        assert_eq!(state.write_to(start), None);
        // A bucket at logical 40 (and 41), current copy 1; logical 39 and 42 are data.
        state.set_bucket(40, 1);
        let p = physical(start, 40);
        assert_eq!(state.read_from(p), physical(start, 41));
        assert_eq!(state.write_to(p), None);
        for l in [39, 42, 41] {
            let q = physical(start, l);
            assert_eq!(
                (state.read_from(q), state.write_to(q)),
                (q, Some(q)),
                "logical {l}"
            );
        }
        state.set_bucket(40, 0);
        assert_eq!(state.read_from(p), p);
        assert_eq!(state.bucket_copy(40), 0);
    }
}

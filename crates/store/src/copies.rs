//! Which copy of each index page holds its last checkpointed image, and the cache's
//! [`PageAddresses`] built on it (the checkpoints of `docs/durability.md`).
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
//! records which index pages changed since the last checkpoint (a bit each, set by the
//! change, cleared by the checkpoint that writes the page; a changed bucket or directory
//! segment page is also listed once, so a checkpoint finds them without walking the
//! directory). DRAM: one byte per fixed directory page and per group, four bits per managed
//! page (the first page of a two-copy index page, which copy, changed, a directory page),
//! 16 bytes per listed change.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use tamer_cache::PageAddresses;

use crate::layout::*;

/// In a directory page's or a map page's byte: its current copy.
const COPY: u8 = 1;
/// In the same byte: changed since the last checkpoint.
const CHANGED: u8 = 2;
/// A managed page's four bits: the first page of a two-copy index page (a bucket or a
/// directory segment page), its current copy is the second, changed, a directory page.
const BUCKET: u64 = 1;
const BUCKET_COPY: u64 = 2;
const BUCKET_CHANGED: u64 = 4;
const DIR_PAGE: u64 = 8;

pub(crate) struct CopyState {
    space_start: u64,
    dir_pages: u64,
    /// Per directory page: [`COPY`] | [`CHANGED`].
    dir_copy: Vec<AtomicU8>,
    /// Per group, its map page: [`COPY`] | [`CHANGED`]; grows with the store.
    map_copy: RwLock<Vec<AtomicU8>>,
    /// Four bits per logical page ([`BUCKET`], [`BUCKET_COPY`], [`BUCKET_CHANGED`],
    /// [`DIR_PAGE`]), 16 pages per word; grows with the store.
    buckets: RwLock<Vec<AtomicU64>>,
    /// The two-copy index pages whose changed bit was set, once each: (first logical page,
    /// the cache's set key for it). At most one entry per such page.
    changed_pairs: Mutex<Vec<(u64, u64)>>,
    /// The tree nodes whose changed bit was set (first logical page), once each; a node freed
    /// since stays listed with its bits cleared, and is skipped.
    changed_trees: Mutex<Vec<u64>>,
    /// Index pages whose changed bit is set.
    changed: AtomicUsize,
}

impl CopyState {
    /// State of a store whose fixed directory region holds 2^`fixed_depth` slots, with the
    /// fixed directory pages' copies chosen at open (`dir_copy`, all 0 for a new store) and
    /// the map copies of its groups.
    pub fn new(fixed_depth: u32, dir_copy: Vec<u8>, map_copy: Vec<u8>) -> Self {
        let dir_pages = dir_pages(fixed_depth);
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
            changed_pairs: Mutex::new(Vec::new()),
            changed_trees: Mutex::new(Vec::new()),
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

    /// Marks the two-copy index page (a bucket or a directory segment page) whose first page
    /// is logical page `l` changed; `set_key` places it in the cache. True when it was not
    /// marked yet.
    pub fn mark_pair_changed(&self, l: u64, set_key: u64) -> bool {
        let shift = 4 * (l % 16);
        let flag = BUCKET_CHANGED << shift;
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let Some(w) = words.get((l / 16) as usize) else {
            debug_assert!(false, "a changed bucket is known");
            return false;
        };
        if w.load(Ordering::Relaxed) & flag == 0 && w.fetch_or(flag, Ordering::AcqRel) & flag == 0 {
            self.changed.fetch_add(1, Ordering::Relaxed);
            // Only the change that set the bit lists the page: once per page.
            self.changed_pairs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((l, set_key));
            return true;
        }
        false
    }

    /// Marks the tree node whose first page is logical page `l` changed; true when it was
    /// not marked yet.
    pub fn mark_tree_changed(&self, l: u64) -> bool {
        let shift = 4 * (l % 16);
        let flag = BUCKET_CHANGED << shift;
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let Some(w) = words.get((l / 16) as usize) else {
            debug_assert!(false, "a changed tree node is known");
            return false;
        };
        debug_assert!(
            w.load(Ordering::Relaxed) >> shift & BUCKET != 0,
            "a tree node"
        );
        if w.load(Ordering::Relaxed) & flag == 0 && w.fetch_or(flag, Ordering::AcqRel) & flag == 0 {
            self.changed.fetch_add(1, Ordering::Relaxed);
            self.changed_trees
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(l);
            return true;
        }
        false
    }

    /// The tree nodes changed since the last call, their marks cleared (first logical page
    /// each); nodes freed meanwhile are left out.
    pub fn take_changed_trees(&self) -> Vec<u64> {
        let listed =
            std::mem::take(&mut *self.changed_trees.lock().unwrap_or_else(|p| p.into_inner()));
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        listed
            .into_iter()
            .filter(|&l| {
                let shift = 4 * (l % 16);
                let w = &words[(l / 16) as usize];
                let was = w.fetch_and(!(BUCKET_CHANGED << shift), Ordering::AcqRel) >> shift;
                if was & BUCKET_CHANGED == 0 {
                    debug_assert!(was & BUCKET == 0, "a listed live node is marked changed");
                    return false;
                }
                self.changed.fetch_sub(1, Ordering::Relaxed);
                true
            })
            .collect()
    }

    /// Marks logical page `l` a tree node's first page whose current copy is `copy`.
    pub fn set_tree(&self, l: u64, copy: u64) {
        self.set_pair(l, copy, 0);
    }

    /// Forgets the tree node at logical page `l` (freed): no longer an index page, its
    /// changed mark dropped.
    pub fn forget_tree(&self, l: u64) {
        let shift = 4 * (l % 16);
        let bits = (BUCKET | BUCKET_COPY | BUCKET_CHANGED | DIR_PAGE) << shift;
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        let Some(w) = words.get((l / 16) as usize) else {
            return;
        };
        let was = w.fetch_and(!bits, Ordering::AcqRel) >> shift;
        if was & BUCKET_CHANGED != 0 {
            self.changed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The two-copy index pages changed since the last call, their marks cleared: (first
    /// logical page, set key, whether it is a directory page).
    pub fn take_changed_pairs(&self) -> Vec<(u64, u64, bool)> {
        let listed =
            std::mem::take(&mut *self.changed_pairs.lock().unwrap_or_else(|p| p.into_inner()));
        let words = self.buckets.read().unwrap_or_else(|p| p.into_inner());
        listed
            .into_iter()
            .map(|(l, set_key)| {
                let shift = 4 * (l % 16);
                let w = &words[(l / 16) as usize];
                let was = w.fetch_and(!(BUCKET_CHANGED << shift), Ordering::AcqRel) >> shift;
                assert!(was & BUCKET_CHANGED != 0, "a listed page is marked changed");
                self.changed.fetch_sub(1, Ordering::Relaxed);
                (l, set_key, was & DIR_PAGE != 0)
            })
            .collect()
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
        self.set_pair(l, copy, 0);
    }

    /// Marks logical page `l` the first copy of a directory segment page whose current copy
    /// is `copy` (its changed mark is kept).
    pub fn set_dir_segment_page(&self, l: u64, copy: u64) {
        self.set_pair(l, copy, DIR_PAGE);
    }

    fn set_pair(&self, l: u64, copy: u64, dir: u64) {
        debug_assert!(copy < 2);
        let index = (l / 16) as usize;
        let shift = 4 * (l % 16);
        let bits = (BUCKET | (copy * BUCKET_COPY) | dir) << shift;
        let kept = !((BUCKET | BUCKET_COPY | DIR_PAGE) << shift);
        let set = |w: &AtomicU64| {
            // Other pages' bits share the word: one atomic read-modify-write.
            let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old & kept | bits)
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
    fixed_depth: u32,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
) -> Result<u64, crate::DbError> {
    let dirs = dir_pages(fixed_depth);
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
/// (fixed region and segments in use) and each map page's current copy, then each bucket's
/// from the chosen directory. `read` returns a device page (zeros past the end). Returns the
/// state and the next checkpoint's epoch, above every epoch found and above `sb.epoch + 1`:
/// a checkpoint that crashed left copies with epoch `sb.epoch + 1` at most (the next one
/// starts only once its superblock is durable), some in pages not read here (a segment not
/// in use yet), and they must never be taken for a later checkpoint's. Reads 2 × (directory
/// pages in use + groups) pages.
pub(crate) fn recover(
    sb: &Superblock,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
) -> Result<(CopyState, u64), crate::DbError> {
    let start = space_start(dir_pages(sb.fixed_depth));
    let mut max_seen = sb.epoch + 1;
    let (directory, dir_bytes) = recover_fixed_directory(sb, &mut read, &mut max_seen)?;
    let segments = recover_segments(sb, start, &mut read, &mut max_seen)?;
    let (maps, trees) = recover_maps(sb, start, &mut read, &mut max_seen)?;
    let state = CopyState::new(sb.fixed_depth, directory.copies, maps.copies);
    for (l, copy) in trees {
        state.set_tree(l, copy);
    }
    // A copy a crashed checkpoint wrote (its epoch above the superblock's) would be taken for
    // current once a later superblock's epoch passes its own, unless the page is written
    // again first: the next checkpoint (the one ending this open) overwrites it.
    for i in directory.stale {
        state.mark_dir_changed(i);
    }
    for group in maps.stale {
        state.mark_map_changed(group);
    }
    for page in segments.iter().flatten() {
        state.set_dir_segment_page(page.l, page.chosen.copy);
        if page.chosen.stale {
            state.mark_pair_changed(page.l, physical(start, page.l));
        }
    }
    recover_buckets(sb, &state, &dir_bytes, &segments)?;
    Ok((state, max_seen + 1))
}

/// The current copies of a run of index pages (the fixed directory region's, or the maps').
struct RunCopies {
    /// Each page's current copy, 0 or 1.
    copies: Vec<u8>,
    /// The pages (directory page index, or group) whose other copy is stale.
    stale: Vec<u64>,
}

/// The fixed directory region's current copies, and each page's current bytes.
fn recover_fixed_directory(
    sb: &Superblock,
    read: &mut impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
    max_seen: &mut u64,
) -> Result<(RunCopies, Vec<Vec<u8>>), crate::DbError> {
    let dirs = dir_pages(sb.fixed_depth);
    let mut run = RunCopies {
        copies: Vec::with_capacity(dirs as usize),
        stale: Vec::new(),
    };
    let mut bytes = Vec::with_capacity(dirs as usize);
    for i in 0..dirs {
        let pages = [dir_page(dirs, i, 0), dir_page(dirs, i, 1)];
        let chosen = choose_page(pages, 0, sb.epoch, read, max_seen)?
            .ok_or_else(|| no_copy(pages[0], format!("directory page {i}"), sb.epoch))?;
        run.copies.push(chosen.copy as u8);
        if chosen.stale {
            run.stale.push(i);
        }
        bytes.push(chosen.bytes);
    }
    Ok((run, bytes))
}

/// The map pages' current copies (one pair per group below `sb.next_page`), and the tree
/// nodes they name: (first logical page, current copy).
fn recover_maps(
    sb: &Superblock,
    start: u64,
    read: &mut impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
    max_seen: &mut u64,
) -> Result<(RunCopies, Vec<(u64, u64)>), crate::DbError> {
    let groups = sb.next_page.div_ceil(MAP_ENTRIES);
    let mut run = RunCopies {
        copies: Vec::with_capacity(groups as usize),
        stale: Vec::new(),
    };
    let mut trees = Vec::new();
    for group in 0..groups {
        let pages = [map_page(start, group, 0), map_page(start, group, 1)];
        let chosen = choose_page(pages, 8, sb.epoch, read, max_seen)?
            .ok_or_else(|| no_copy(pages[0], format!("group {group}'s map"), sb.epoch))?;
        run.copies.push(chosen.copy as u8);
        if chosen.stale {
            run.stale.push(group);
        }
        map_trees(&chosen.bytes, group, sb.next_page, &mut trees);
    }
    Ok((run, trees))
}

/// Sets each bucket's current copy in `state` from the directory as recovered (the fixed
/// region's pages `dir_bytes`, then `segments`): the bucket's lowest slot names it.
fn recover_buckets(
    sb: &Superblock,
    state: &CopyState,
    dir_bytes: &[Vec<u8>],
    segments: &[Vec<SegmentPage>],
) -> Result<(), crate::DbError> {
    let corrupt = |page: u64, detail: String| crate::DbError::Corrupt { page, detail };
    let dirs = dir_pages(sb.fixed_depth);
    let start = space_start(dirs);
    for index in 0..1u64 << sb.global_depth {
        let (place, at) = dir_place(sb.fixed_depth, index);
        let (b, slot_page) = match place {
            DirPlace::Fixed(i) => (&dir_bytes[i as usize], dir_page(dirs, i, 0)),
            DirPlace::Segment { s, k } => {
                let seg = &segments[s as usize][k as usize];
                (&seg.chosen.bytes, physical(start, seg.l))
            }
        };
        let slot = get_u64(b, at);
        let (page, depth) = dir_slot_parts(slot);
        if index >= 1u64 << depth.min(sb.global_depth) {
            continue; // the bucket's lowest slot names it
        }
        let l = logical(start, page)
            .filter(|&l| l + 1 < sb.next_page)
            .ok_or_else(|| {
                corrupt(
                    slot_page,
                    format!("slot {index} names page {page}, not a bucket"),
                )
            })?;
        state.set_bucket(l, dir_slot_copy(slot));
    }
    Ok(())
}

/// Appends the tree nodes group `group`'s map (its bytes `map`) names below logical page
/// `next_page`: (first logical page, current copy).
fn map_trees(map: &[u8], group: u64, next_page: u64, out: &mut Vec<(u64, u64)>) {
    if map.len() < PAYLOAD || get_u32(map, 0) != KIND_MAP {
        return;
    }
    let first = group * MAP_ENTRIES;
    for l in first..next_page.min(first + MAP_ENTRIES) {
        let entry = get_u32(map, MAP_HEADER + (l - first) as usize * 4);
        if MapKind::of(entry) == Some(MapKind::Tree) {
            out.push((l, u64::from(entry & 1)));
        }
    }
}

/// One directory segment page as recovery found it: its first copy's logical page and its
/// chosen copy (bytes empty for a segment not in use).
struct SegmentPage {
    l: u64,
    chosen: Chosen,
}

/// Every allocated directory segment's pages: those in use (below the global depth) read and
/// chosen as the fixed region's are, the others named with copy 0 and not read (a doubling
/// writes them whole before they are used).
fn recover_segments(
    sb: &Superblock,
    start: u64,
    read: &mut impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
    max_seen: &mut u64,
) -> Result<Vec<Vec<SegmentPage>>, crate::DbError> {
    let in_use = sb.global_depth.saturating_sub(sb.fixed_depth) as usize;
    let mut out = Vec::with_capacity(sb.dir_segments.len());
    for (s, &first) in sb.dir_segments.iter().enumerate() {
        let pages = segment_pages(sb.fixed_depth, s as u32);
        if first == 0 || first + 2 * pages > sb.next_page {
            return Err(crate::DbError::Corrupt {
                page: 0,
                detail: format!("directory segment {s} at logical page {first}: out of range"),
            });
        }
        let mut seg = Vec::with_capacity(pages as usize);
        for k in 0..pages {
            let l = segment_page(first, k, 0);
            if s >= in_use {
                let chosen = Chosen {
                    copy: 0,
                    stale: false,
                    bytes: Vec::new(),
                };
                seg.push(SegmentPage { l, chosen });
                continue;
            }
            let copies = [physical(start, l), physical(start, l + 1)];
            let chosen = choose_page(copies, 0, sb.epoch, read, max_seen)?.ok_or_else(|| {
                no_copy(
                    copies[0],
                    format!("directory segment {s}'s page {k}"),
                    sb.epoch,
                )
            })?;
            seg.push(SegmentPage { l, chosen });
        }
        out.push(seg);
    }
    Ok(out)
}

/// The error for an index page (`what`, its first copy at `page`) with no valid copy at or
/// before `epoch`.
fn no_copy(page: u64, what: String, epoch: u64) -> crate::DbError {
    crate::DbError::Corrupt {
        page,
        detail: format!("no valid copy of {what} at or before epoch {epoch}"),
    }
}

/// An index page's current copy as chosen at open: which, whether the other is stale, and
/// the current copy's bytes.
struct Chosen {
    copy: u64,
    stale: bool,
    bytes: Vec<u8>,
}

/// Reads both copies of an index page (`pages`, the epoch at `epoch_at`) and chooses the
/// current one (`None` when neither qualifies); raises `max_seen` to every epoch found.
fn choose_page(
    pages: [u64; 2],
    epoch_at: usize,
    epoch: u64,
    read: &mut impl FnMut(u64) -> Result<Vec<u8>, crate::DbError>,
    max_seen: &mut u64,
) -> Result<Option<Chosen>, crate::DbError> {
    let bytes = [read(pages[0])?, read(pages[1])?];
    let epochs = [0, 1].map(|c| copy_epoch(pages[c], &bytes[c], epoch_at));
    *max_seen = (*max_seen).max(epochs.iter().flatten().copied().max().unwrap_or(0));
    let Some(copy) = choose(epochs, epoch) else {
        return Ok(None);
    };
    let [b0, b1] = bytes;
    Ok(Some(Chosen {
        copy,
        stale: stale(epochs, epoch),
        bytes: if copy == 0 { b0 } else { b1 },
    }))
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

    /// A sealed page with `epoch` at `epoch_at` and `slots` from `DIR_HEADER`.
    fn sealed(page: u64, epoch: u64, slots: &[u64]) -> Vec<u8> {
        let mut b = vec![0u8; tamer_cache::PAGE_SIZE];
        put_u64(&mut b, 0, epoch);
        for (j, &slot) in slots.iter().enumerate() {
            put_u64(&mut b, DIR_HEADER + 8 * j, slot);
        }
        tamer_cache::checksum::seal_page(page, &mut b);
        b
    }

    /// Recovery over a fixed region of one slot and two segments, the second allocated but
    /// not in use (holding a crashed checkpoint's copy): segment 0's copy with the highest
    /// epoch not above the superblock's is taken, a copy above it is marked for rewriting,
    /// the unused segment is not read, and the next epoch is at least the superblock's + 2
    /// (a crashed checkpoint's copies, epoch + 1, may sit in pages not read). Catches the
    /// next epoch taken as the highest seen + 1, an unused segment read (its copy's epoch
    /// would raise the next epoch: the test reads no page of it), a segment page's copy bit
    /// not set from its chosen copy, a stale segment copy left unmarked.
    #[test]
    fn recovery_chooses_segment_copies_and_skips_a_crashed_epoch() {
        let start = space_start(dir_pages(0));
        let bucket = physical(start, 0);
        // Segment 0 (slot 1) at logical 2 (copies at 2, 3); segment 1 (slots 2, 3) at 4, 5.
        let mut sb = Superblock {
            sequence: 9,
            epoch: 7,
            hash_key: [1, 2],
            max_depth: 8,
            global_depth: 1,
            fixed_depth: 0,
            dir_segments: vec![2, 4],
            clean: false,
            next_page: 8,
            key_count: 0,
            max_value_bytes: 1 << 20,
            commit_ts: 0,
            queue_first: 0,
            queues: 1,
            queue_pages: 16,
            stripe_parts: 1,
            stripe_unit: 1,
            catalog: 0,
        };
        let mut pages = std::collections::HashMap::new();
        let fixed = dir_page(1, 0, 0);
        pages.insert(fixed, sealed(fixed, 3, &[dir_slot(bucket, 0, 1)]));
        let (s0c0, s0c1) = (physical(start, 2), physical(start, 3));
        pages.insert(s0c0, sealed(s0c0, 6, &[dir_slot(bucket, 1, 1)]));
        pages.insert(s0c1, sealed(s0c1, 8, &[0])); // a crashed checkpoint's
        let read = |page: u64| -> Result<Vec<u8>, crate::DbError> {
            assert!(
                !(physical(start, 4)..=physical(start, 5)).contains(&page),
                "an unused segment is not read"
            );
            Ok(pages
                .get(&page)
                .cloned()
                .unwrap_or_else(|| vec![0; tamer_cache::PAGE_SIZE]))
        };
        let (state, next) = recover(&sb, read).unwrap();
        assert_eq!(next, 9, "above the crashed checkpoint's epoch 8");
        assert_eq!(state.read_from(s0c0), s0c0, "copy 0 (epoch 6) is current");
        assert_eq!(state.bucket_copy(0), 1, "the bucket's copy from its slots");
        assert_eq!(
            state.changed(),
            1,
            "the stale copy is rewritten by the next checkpoint"
        );
        let listed = state.take_changed_pairs();
        assert_eq!(listed, vec![(2, s0c0, true)]);
        assert_eq!(state.read_from(physical(start, 4)), physical(start, 4));
        assert_eq!(state.write_to(physical(start, 4)), None, "an index page");
        assert_eq!(state.write_to(physical(start, 6)), Some(physical(start, 6)));
        // With nothing above the superblock's epoch, the next is still its + 2.
        pages.remove(&s0c1);
        sb.epoch = 20;
        let (_, next) = recover(&sb, |page| {
            Ok(pages
                .get(&page)
                .cloned()
                .unwrap_or_else(|| vec![0; tamer_cache::PAGE_SIZE]))
        })
        .unwrap();
        assert_eq!(next, 22);
    }
}

//! Compaction: closed data pages whose live bytes fell to half a page are queued (the
//! sparse queue) and their live records moved to the open page, which frees them; the
//! cleaner does it under space pressure, `Db::compact` on demand.
//!
//! Invariants: a move switches the key's entry only if it still points at the same place
//! holding the same bytes (a conditional link), so a concurrent writer always wins; a key
//! lock is only tried (the caller holds the checkpoint latch, which a writer holding the key
//! may wait for); a damaged record is never copied under a fresh CRC; the queue holds at most
//! [`SPARSE_QUEUE`] pages (a hint that finds it full is counted and dropped, and the next
//! compaction that finds the queue empty rescans the page map for sparse pages, so no sparse
//! page is lost for good).

use std::sync::atomic::Ordering;

use super::buckets::{Expect, Linked};
use super::commit::{Delta, DeltaOp};
use super::locks::KeyGuard;
use super::records::record_crc_ok;
use super::space::COMPACT_LIVE_BYTES;
use super::{corrupt, Engine, MAX_KEY_BYTES};
use crate::layout::*;
use crate::DbError;

/// Background compaction runs only under space pressure: when the free pages plus the room
/// left below the file's (or device's) end fall under this many pages, or under
/// 1/[`COMPACT_RESERVE_FRACTION`] of the pages in use, whichever is more. Moving live records
/// costs misses and writes, so a store with room to spare does not pay for it.
pub const COMPACT_RESERVE_MIN_PAGES: u64 = 256;
/// An eighth: at the `volatile` TATP's ~11 MB/s of appends, a thirty-second of an 80 MB store
/// lasted ~0.2 s, less than the 1 s between the checkpoints that release deferred frees, and
/// the device filled while compaction started.
pub const COMPACT_RESERVE_FRACTION: u64 = 8;

/// Bound of the queue of pages waiting for compaction (DRAM only; one u64 each). A page that
/// finds it full is counted in [`CompactionStats::hints_dropped`] and stays sparse.
pub const SPARSE_QUEUE: usize = 4096;

/// What compaction has done since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Sparse pages compacted (each had its live records moved; it is then free).
    pub pages_compacted: u64,
    /// Records moved.
    pub records_moved: u64,
    /// Sparse pages not queued because the queue was full.
    pub hints_dropped: u64,
    /// Pages waiting in the queue now.
    pub queued: usize,
}

impl Engine {
    /// Queues a sparse page for compaction (or counts the dropped hint, and has the next
    /// compaction under pressure find it again in the map).
    pub(super) fn note_sparse(&self, page: u64) {
        if self.sparse.push(page).is_err() {
            self.hints_dropped.fetch_add(1, Ordering::Relaxed);
            self.sparse_rescan.store(true, Ordering::Release);
        }
    }

    /// Refills the sparse queue from the page map (each data page's live bytes are there)
    /// when hints were dropped: reads the map pages of the pages in use, one group at a time,
    /// until the queue is full. Returns the pages queued. A page queued twice is compacted
    /// once (the second finds it no longer sparse).
    fn refill_sparse(&self) -> Result<usize, DbError> {
        if !self.sparse_rescan.swap(false, Ordering::AcqRel) {
            return Ok(0);
        }
        let next_page = self.lock_alloc().next_page;
        let mut queued = 0;
        for group in 0..next_page.div_ceil(MAP_ENTRIES) {
            let first = group * MAP_ENTRIES;
            let end = next_page.min(first + MAP_ENTRIES);
            // One read of the group's map page (an unreadable one is skipped, as before a
            // rescan: its pages stay sparse).
            let Ok((r, _)) = self.map_of(first) else {
                continue;
            };
            let sparse: Vec<u64> = r.read(|b| {
                (first..end)
                    .filter(|&l| {
                        let entry = get_u32(b, MAP_HEADER + (l - first) as usize * 4);
                        let live = map_live(entry);
                        MapKind::of(entry) == Some(MapKind::Data)
                            && live > 0
                            && live <= COMPACT_LIVE_BYTES
                    })
                    .collect()
            });
            drop(r);
            for l in sparse {
                if self.sparse.push(self.phys(l)).is_err() {
                    // Full: the rest are found by the next rescan.
                    self.sparse_rescan.store(true, Ordering::Release);
                    return Ok(queued);
                }
                queued += 1;
            }
        }
        Ok(queued)
    }

    /// Compacts up to `max_pages` queued sparse pages; returns how many it took from the queue.
    pub fn compact_some(&self, max_pages: usize) -> Result<usize, DbError> {
        let _op = self.check_open()?;
        if max_pages > 0 && self.sparse.is_empty() {
            self.refill_sparse()?;
        }
        let mut taken = 0;
        while taken < max_pages {
            let Some(page) = self.sparse.pop() else {
                break;
            };
            taken += 1;
            let moved = {
                let _s = self.begin_change()?;
                self.compact_page(page)?
            };
            if moved > 0 {
                self.pages_compacted.fetch_add(1, Ordering::Relaxed);
                self.records_moved.fetch_add(moved, Ordering::Relaxed);
            }
        }
        Ok(taken)
    }

    /// True when background compaction should run (see [`COMPACT_RESERVE_MIN_PAGES`]) and
    /// pages wait for it.
    pub fn space_pressure(&self) -> bool {
        if self.sparse.is_empty() && !self.sparse_rescan.load(Ordering::Acquire) {
            return false;
        }
        let end_pages = self.capacity_pages();
        let alloc = self.lock_alloc();
        let room = alloc.free.pages() + end_pages.saturating_sub(alloc.next_page);
        let reserve = COMPACT_RESERVE_MIN_PAGES.max(alloc.next_page / COMPACT_RESERVE_FRACTION);
        room < reserve
    }

    pub fn compaction_stats(&self) -> CompactionStats {
        CompactionStats {
            pages_compacted: self.pages_compacted.load(Ordering::Relaxed),
            records_moved: self.records_moved.load(Ordering::Relaxed),
            hints_dropped: self.hints_dropped.load(Ordering::Relaxed),
            queued: self.sparse.len(),
        }
    }

    /// Moves the live records of data page `page` to the open page (the last move frees it);
    /// returns how many moved. A page no longer sparse, or no longer a settled data page (freed
    /// and reused since it was queued), is left alone.
    fn compact_page(&self, page: u64) -> Result<u64, DbError> {
        let r = self.cache.get(page)?;
        let snapshot = r.read(|b| -> Result<Option<Vec<u8>>, DbError> {
            let (written, closed) = (get_u32(b, 8), get_u32(b, 12));
            let settled = get_u32(b, 0) == KIND_DATA
                && closed != OPEN
                && written == closed
                && closed as usize <= PAYLOAD;
            if !settled {
                return Ok(None);
            }
            // Freed and reused since it was queued: the map no longer says data.
            let entry = self.map_get(self.logical_of(page)?)?;
            let live = map_live(entry);
            let sparse =
                MapKind::of(entry) == Some(MapKind::Data) && live > 0 && live <= COMPACT_LIVE_BYTES;
            Ok(sparse.then(|| b[..closed as usize].to_vec()))
        })?;
        drop(r);
        let Some(bytes) = snapshot else {
            return Ok(0);
        };
        let mut moved = 0;
        let mut at = DATA_HEADER;
        // Bounded: every record is at least RECORD_HEADER bytes of a page.
        while at + RECORD_HEADER <= bytes.len() {
            let klen = get_u32(&bytes, at) as usize;
            let vlen = get_u32(&bytes, at + 4) as usize;
            let Some(len) = (RECORD_HEADER + klen)
                .checked_add(vlen)
                .filter(|len| at + len <= bytes.len())
            else {
                return Err(corrupt(page, "a record runs past the page's closed end"));
            };
            let record = &bytes[at..at + len];
            let key = &record[RECORD_HEADER..RECORD_HEADER + klen];
            if !key.is_empty() && key.len() <= MAX_KEY_BYTES && self.relocate(page, at, record)? {
                moved += 1;
            }
            at += record_span(at, len);
        }
        Ok(moved)
    }

    /// Rewrites the record at `page`/`offset` (its bytes `record`) to the open page if the
    /// index still points there; true when it moved.
    fn relocate(&self, page: u64, offset: usize, record: &[u8]) -> Result<bool, DbError> {
        // A damaged record must not be copied under a fresh CRC.
        if !record_crc_ok(record) {
            return Err(corrupt(page, "record checksum mismatch (compaction)"));
        }
        let klen = get_u32(record, 0) as usize;
        let key = &record[RECORD_HEADER..RECORD_HEADER + klen];
        let hash = self.hash(key);
        // The caller holds the checkpoint latch: a key lock is only tried (a writer holding it
        // may be waiting for the latch). A busy key's record stays; the page stays sparse.
        // A transaction holds the key's lock over a tree change it may still undo, so an
        // uncommitted tree record is never moved either.
        let Some(_key) = KeyGuard::try_lock(&self.locks, hash) else {
            return Ok(false);
        };
        if get_u32(record, 12) & RECORD_TREE != 0 {
            return self.relocate_tree_record(page, offset, record, hash);
        }
        // Most records of a sparse page are dead: probe before writing a copy.
        let current = self.entry_of(hash, key)?;
        if current.is_none_or(|e| e.page != page || e.is_extent() || e.offset() != offset) {
            return Ok(false);
        }
        let (mut e, pages) = self.write_record(key, &record[RECORD_HEADER + klen..])?;
        e.hash = tag(hash);
        let expect = Expect {
            page,
            offset,
            record,
        };
        match self.link(hash, key, e, Some(&expect)) {
            Ok(Linked::Replaced(old)) => {
                self.release(&old);
                let delta = Delta {
                    op: DeltaOp::Put,
                    hash,
                    entry: e,
                };
                // Made durable by a later write's group commit or the next checkpoint: a
                // move changes no value, so nobody waits for it.
                self.stage(&[delta], &pages);
                Ok(true)
            }
            Ok(Linked::Inserted | Linked::Unchanged) => {
                self.release(&e);
                Ok(false)
            }
            Err(err) => {
                self.release(&e);
                Err(err)
            }
        }
    }

    /// [`Engine::relocate`] of a tree entry's record: moved when the entry (under the tree's
    /// writer lock, only tried) still names it, with its value inline as before.
    fn relocate_tree_record(
        &self,
        page: u64,
        offset: usize,
        record: &[u8],
        hash: u64,
    ) -> Result<bool, DbError> {
        let klen = get_u32(record, 0) as usize;
        let rk = &record[RECORD_HEADER..RECORD_HEADER + klen];
        let Some((tree, key)) = super::tree::split_record_key(rk) else {
            return Err(corrupt(page, "a tree record's key is too short"));
        };
        let Some(_t) = self.tree_try_lock(tree) else {
            return Ok(false);
        };
        let current = self.tree_find(tree, key)?;
        if current.is_none_or(|f| f.page != page || f.slot as usize * RECORD_ALIGN != offset) {
            return Ok(false);
        }
        let value = &record[RECORD_HEADER + klen..];
        let (e, pages) = self.write_record_flagged(rk, value, RECORD_TREE)?;
        let inline = (value.len() <= INLINE_MAX).then_some(value);
        // The entry named this record under the lock held since: the switch replaces it.
        let old = match self.tree_link(tree, key, e.page, e.slot, inline) {
            Ok(old) => old,
            Err(err) => {
                self.release(&e);
                return Err(err);
            }
        };
        let Some(old) = old.filter(|o| o.page == page && o.offset() == offset) else {
            return Err(corrupt(
                page,
                "a moved tree record's entry changed under its lock",
            ));
        };
        self.release(&old);
        let delta = Delta {
            op: DeltaOp::TreePut,
            hash,
            entry: e,
        };
        self.stage(&[delta], &pages);
        Ok(true)
    }
}

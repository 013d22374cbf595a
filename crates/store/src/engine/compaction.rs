//! Compaction: closed data pages whose live bytes fell to a quarter of a page are queued (the
//! sparse queue) and their live records moved to the open page, which frees them; the
//! cleaner does it under space pressure, `Db::compact` on demand.
//!
//! Invariants: a move switches the key's entry only if it still points at the same place
//! holding the same bytes (a conditional link), so a concurrent writer always wins; a key
//! lock is only tried (the caller holds the checkpoint latch, which a writer holding the key
//! may wait for); a damaged record is never copied under a fresh CRC; the queue holds at most
//! [`SPARSE_QUEUE`] pages (a hint that finds it full is counted and dropped).

use std::sync::atomic::Ordering;

use super::buckets::{Expect, Linked};
use super::commit::{Delta, DeltaOp};
use super::locks::KeyGuard;
use super::records::record_crc_ok;
use super::{corrupt, Engine, MAX_KEY_BYTES};
use crate::layout::*;
use crate::DbError;

/// A closed data page with this many live bytes or fewer (and some) is compacted: its live
/// records are rewritten to the open page, so that it is freed. A quarter of a page: space
/// amplification from pages held by a few live records stays below about 4×.
pub const COMPACT_LIVE_BYTES: u32 = (PAYLOAD / 4) as u32;

/// Background compaction runs only under space pressure: when the free pages plus the room
/// left below the file's (or device's) end fall under this many pages, or under
/// 1/[`COMPACT_RESERVE_FRACTION`] of the pages in use, whichever is more. Moving live records
/// costs misses and writes, so a store with room to spare does not pay for it.
pub const COMPACT_RESERVE_MIN_PAGES: u64 = 256;
pub const COMPACT_RESERVE_FRACTION: u64 = 32;

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
    /// Queues a sparse page for compaction (or counts the dropped hint).
    pub(super) fn note_sparse(&self, page: u64) {
        if self.sparse.push(page).is_err() {
            self.hints_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Compacts up to `max_pages` queued sparse pages; returns how many it took from the queue.
    pub fn compact_some(&self, max_pages: usize) -> Result<usize, DbError> {
        let _op = self.check_open()?;
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
        if self.sparse.is_empty() {
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
        let Some(_key) = KeyGuard::try_lock(&self.locks, hash) else {
            return Ok(false);
        };
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
}

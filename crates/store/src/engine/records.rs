//! Records: reading one (its key, its value, its length, its CRC) from a data page or an
//! extent, writing one out of place (a small record appended to the open data page at a
//! 16-byte aligned offset, a large one as an extent of consecutive logical pages), closing the
//! open data page, and releasing a record no entry names any more.
//!
//! Invariants: every record read checks the record's own CRC (data pages are exempt from the
//! page checksum, so a torn append cannot make committed records unreadable); a data page's
//! live bytes change under its latch, so it cannot be freed between a record's write and its
//! count; a record is released only after no index entry points to it (the callers switch the
//! entry first); a data page is freed once it is closed, every reservation in it is written
//! and nothing in it lives; pages never linked are freed, or counted as leaked.

use std::sync::atomic::Ordering;

use tamer_cache::{crc32c, BATCH};

use super::space::COMPACT_LIVE_BYTES;
use super::{corrupt, Engine, MAX_KEY_BYTES};
use crate::alloc::OpenPage;
use crate::layout::*;
use crate::DbError;

/// True when a whole record's (header ‖ key ‖ value) CRC matches its header's.
pub(super) fn record_crc_ok(record: &[u8]) -> bool {
    record.len() >= RECORD_HEADER && crc32c(&record[RECORD_HEADER..]) == get_u32(record, 8)
}

/// The cache's checksum exemption: data pages and queue pages validate their records
/// themselves (both are rewritten as they fill: a torn rewrite keeps the records before).
pub(crate) fn is_data_page(bytes: &[u8]) -> bool {
    let kind = get_u32(bytes, 0);
    kind == KIND_DATA || kind == KIND_QUEUE
}

/// Copies bytes `pos..pos + out.len()` of the concatenation of `parts` into `out`.
fn copy_from_parts(parts: &[&[u8]], mut pos: usize, out: &mut [u8]) {
    let mut written = 0;
    for part in parts {
        if written == out.len() {
            return;
        }
        if pos >= part.len() {
            pos -= part.len();
            continue;
        }
        let n = (part.len() - pos).min(out.len() - written);
        out[written..written + n].copy_from_slice(&part[pos..pos + n]);
        written += n;
        pos = 0;
    }
}

impl Engine {
    /// Reads a record: `None` when its key is not `key`; `Some(None)` when it is and
    /// `want_value` is false; `Some(Some(value))` otherwise (checksum verified).
    pub(super) fn read_record(
        &self,
        e: &Entry,
        key: &[u8],
        want_value: bool,
    ) -> Result<Option<Option<Vec<u8>>>, DbError> {
        let want = if want_value {
            usize::MAX
        } else {
            RECORD_HEADER + key.len()
        };
        let (bytes, len) = self.record_bytes(e, want)?;
        let klen = get_u32(&bytes, 0) as usize;
        if klen != key.len() || bytes.get(RECORD_HEADER..RECORD_HEADER + klen) != Some(key) {
            return Ok(None);
        }
        if !want_value {
            return Ok(Some(None));
        }
        debug_assert_eq!(bytes.len(), len);
        // A small record's CRC was checked in its page; an extent's pages carry checksums,
        // and the record's own is checked here too.
        if e.is_extent() && !record_crc_ok(&bytes) {
            return Err(corrupt(e.page, "record checksum mismatch"));
        }
        Ok(Some(Some(bytes[RECORD_HEADER + klen..].to_vec())))
    }

    /// The key of a record.
    pub(super) fn record_key(&self, e: &Entry) -> Result<Vec<u8>, DbError> {
        let (head, _) = self.record_bytes(e, RECORD_HEADER)?;
        let klen = get_u32(&head, 0) as usize;
        let (bytes, _) = self.record_bytes(e, RECORD_HEADER + klen)?;
        Ok(bytes[RECORD_HEADER..].to_vec())
    }

    /// A record's length from its header (`b` from `at`), checked against what fits `room`
    /// bytes and the store's limits.
    fn record_len(&self, e: &Entry, b: &[u8], at: usize, room: usize) -> Result<usize, DbError> {
        let klen = get_u32(b, at) as usize;
        let vlen = get_u32(b, at + 4) as usize;
        if klen == 0 || klen > MAX_KEY_BYTES || vlen > self.max_value {
            return Err(corrupt(e.page, "record header out of range"));
        }
        let len = RECORD_HEADER + klen + vlen;
        if len > room {
            return Err(corrupt(e.page, "record runs past its page"));
        }
        Ok(len)
    }

    /// The first `want` bytes of a record (at least its header, at most all of it) and its
    /// whole length. A record in a data page costs one page access; an extent its first page
    /// (which holds the header), then as many more as `want` reaches, [`BATCH`] at a time.
    pub(super) fn record_bytes(&self, e: &Entry, want: usize) -> Result<(Vec<u8>, usize), DbError> {
        if !e.is_extent() {
            let off = e.offset();
            if off < DATA_HEADER || off + RECORD_HEADER > PAYLOAD {
                return Err(corrupt(e.page, "record offset out of range"));
            }
            let page = self.cache.get(e.page)?;
            return page.read(|b| {
                if get_u32(b, 0) != KIND_DATA {
                    return Err(corrupt(e.page, "index points to a page that is not data"));
                }
                let len = self.record_len(e, b, off, PAYLOAD - off)?;
                // Data pages are exempt from the page checksum (a torn append must not make
                // the committed records unreadable): every record read checks its own CRC.
                if !record_crc_ok(&b[off..off + len]) {
                    return Err(corrupt(e.page, "record checksum mismatch"));
                }
                let take = want.max(RECORD_HEADER).min(len);
                Ok((b[off..off + take].to_vec(), len))
            });
        }
        let first = self.cache.get(e.page)?;
        let (mut out, len) = first.read(|b| -> Result<(Vec<u8>, usize), DbError> {
            if get_u32(b, 0) != KIND_EXTENT {
                return Err(corrupt(e.page, "index points to a page that is no extent"));
            }
            let len = self.record_len(e, b, EXTENT_HEADER, usize::MAX)?;
            let take = want.max(RECORD_HEADER).min(len);
            let here = take.min(PAYLOAD - EXTENT_HEADER);
            let mut out = Vec::with_capacity(take);
            out.extend_from_slice(&b[EXTENT_HEADER..EXTENT_HEADER + here]);
            Ok((out, len))
        })?;
        drop(first);
        let take = want.max(RECORD_HEADER).min(len);
        // The stream of the extent's payloads: bytes EXTENT_HEADER.. are the record.
        let end = EXTENT_HEADER + take;
        let pages: Vec<u64> = (1..end.div_ceil(PAYLOAD) as u64)
            .map(|i| self.extent_page(e.page, i))
            .collect::<Result<_, _>>()?;
        for (c, chunk) in pages.chunks(BATCH).enumerate() {
            for (j, r) in self.cache.get_many(chunk)?.into_iter().enumerate() {
                debug_assert_eq!(r.page(), chunk[j]);
                let from = (1 + c * BATCH + j) * PAYLOAD;
                r.read(|b| out.extend_from_slice(&b[..(end - from).min(PAYLOAD)]));
            }
        }
        debug_assert_eq!(out.len(), take);
        Ok((out, len))
    }

    /// Writes a record out of place and returns its entry (hash 0) and the pages it is in
    /// (for the group commit that makes it durable).
    pub(super) fn write_record(
        &self,
        key: &[u8],
        value: &[u8],
    ) -> Result<(Entry, Vec<u64>), DbError> {
        self.write_record_flagged(key, value, 0)
    }

    /// [`Engine::write_record`] with header `flags` ([`RECORD_TREE`]).
    pub(super) fn write_record_flagged(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<(Entry, Vec<u64>), DbError> {
        let len = RECORD_HEADER + key.len() + value.len();
        let mut header = [0u8; RECORD_HEADER];
        put_u32(&mut header, 12, flags);
        put_u32(&mut header, 0, key.len() as u32);
        put_u32(&mut header, 4, value.len() as u32);
        put_u32(
            &mut header,
            8,
            tamer_cache::checksum::crc32c_update(crc32c(key), value),
        );
        if len <= MAX_SMALL_RECORD {
            let (page, offset) = self.reserve_small(len)?;
            let span = record_span(offset, len) as u32;
            let r = self.cache.get(page)?;
            r.write(|b| {
                let mut at = offset;
                for part in [&header[..], key, value] {
                    b[at..at + part.len()].copy_from_slice(part);
                    at += part.len();
                }
                put_u32(b, 8, get_u32(b, 8) + span);
                // Counted under the page's latch: the page cannot be freed in between.
                self.add_live(page, i64::from(span))
            })?;
            return Ok((Entry::new(0, page, offset), vec![page]));
        }
        let n = extent_pages(len);
        let first = self.alloc_pages(n, MapKind::ExtentHead)?;
        let mut kind = [0u8; EXTENT_HEADER];
        put_u32(&mut kind, 0, KIND_EXTENT);
        let parts = [&kind[..], &header[..], key, value];
        let mut pages = Vec::with_capacity(n as usize);
        for i in 0..n {
            let written = self.extent_page(first, i).and_then(|page| {
                pages.push(page);
                let r = self.cache.get_for_overwrite(page)?;
                r.write(|b| {
                    b[..PAYLOAD].fill(0);
                    copy_from_parts(&parts, i as usize * PAYLOAD, &mut b[..PAYLOAD]);
                });
                Ok(())
            });
            if let Err(err) = written {
                self.free_or_leak(first, n);
                return Err(err);
            }
        }
        Ok((Entry::new(0, first, 0), pages))
    }

    /// Space for a small record of `len` bytes: in the open data page, or in a new one.
    /// Returns (page, offset); the offset is a multiple of [`RECORD_ALIGN`].
    fn reserve_small(&self, len: usize) -> Result<(u64, usize), DbError> {
        {
            let mut alloc = self.lock_alloc();
            if let Some(open) = alloc.open.as_mut() {
                let offset = open.reserved as usize;
                if offset + len <= PAYLOAD {
                    open.reserved = (offset + record_span(offset, len)) as u32;
                    return Ok((open.page, offset));
                }
            }
        }
        let page = self.alloc_pages(1, MapKind::Data)?;
        let init = self.cache.get_for_overwrite(page).map(|r| {
            r.write(|b| {
                b[..PAYLOAD].fill(0);
                put_u32(b, 0, KIND_DATA);
                // `written` counts the header too, as `reserved` does, so that a page whose
                // reservations are all written and dead can be freed.
                put_u32(b, 8, DATA_HEADER as u32);
                put_u32(b, 12, OPEN);
            })
        });
        if let Err(err) = init {
            self.free_or_leak(page, 1);
            return Err(err.into());
        }
        let old = self.lock_alloc().open.replace(OpenPage {
            page,
            reserved: (DATA_HEADER + record_span(DATA_HEADER, len)) as u32,
        });
        if let Some(old) = old {
            if let Err(err) = self.close_page(old) {
                // The old page stays allocated (leaked) until it is rebuilt; the new record
                // is unaffected.
                self.leaked_pages.fetch_add(1, Ordering::Relaxed);
                let _ = err;
            }
        }
        Ok((page, DATA_HEADER))
    }

    /// Marks a data page closed for appends at `reserved` bytes; frees it if nothing lives in
    /// it once every reserved record has been written.
    pub(super) fn close_page(&self, open: OpenPage) -> Result<(), DbError> {
        let r = self.cache.get(open.page)?;
        let (free, sparse) = r.write(|b| -> Result<(bool, bool), DbError> {
            put_u32(b, 12, open.reserved);
            let all_written = get_u32(b, 8) == open.reserved;
            let live = self.live_bytes(open.page)?;
            Ok((
                all_written && live == 0,
                all_written && live > 0 && live <= COMPACT_LIVE_BYTES,
            ))
        })?;
        drop(r);
        if free {
            self.free_pages(open.page, 1)?;
        } else if sparse {
            self.note_sparse(open.page);
        }
        Ok(())
    }

    /// Releases a record no index entry points to any more.
    fn free_record(&self, e: &Entry) -> Result<(), DbError> {
        if e.is_extent() {
            let (_, len) = self.record_bytes(e, RECORD_HEADER)?;
            return self.free_pages(e.page, extent_pages(len));
        }
        let off = e.offset();
        if off < DATA_HEADER || off + RECORD_HEADER > PAYLOAD {
            return Err(corrupt(e.page, "record offset out of range"));
        }
        let r = self.cache.get(e.page)?;
        let (free, sparse) = r.write(|b| -> Result<(bool, bool), DbError> {
            if get_u32(b, 0) != KIND_DATA {
                return Err(corrupt(e.page, "released record is not in a data page"));
            }
            let span = record_span(off, self.record_len(e, b, off, PAYLOAD - off)?) as u32;
            let live = self.add_live(e.page, -i64::from(span))?;
            let before = live + span;
            let closed = get_u32(b, 12);
            let settled = closed != OPEN && get_u32(b, 8) == closed;
            Ok((
                settled && live == 0,
                // Queued once: when the page crosses the threshold.
                settled && live > 0 && live <= COMPACT_LIVE_BYTES && before > COMPACT_LIVE_BYTES,
            ))
        })?;
        drop(r);
        if free {
            self.free_pages(e.page, 1)?;
        } else if sparse {
            self.note_sparse(e.page);
        }
        Ok(())
    }

    /// Frees pages that were never linked (a failed write's); counts them as leaked when even
    /// that fails.
    pub(super) fn free_or_leak(&self, start: u64, n: u64) {
        if self.free_pages(start, n).is_err() {
            self.leaked_pages.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(super) fn release(&self, e: &Entry) {
        if self.free_record(e).is_err() {
            // At least its page (an extent whose header could not be read: its first page).
            self.leaked_pages.fetch_add(1, Ordering::Relaxed);
        }
    }
}

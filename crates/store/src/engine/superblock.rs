//! The superblock's two copies (pages 0 and 1): each write goes to the copy not holding the
//! newest, with the next sequence number, so a torn write leaves the other one whole.
//!
//! Invariants: superblock writes are serialized (`sb_lock`, held across the cache write: it
//! may park); the copy written is never the one holding the newest superblock; the caller (a
//! checkpoint, under the exclusive checkpoint latch) writes it only after every page of its
//! checkpoint is flushed, so the commit timestamp it records has every smaller one applied.

use std::sync::atomic::Ordering;

use super::Engine;
use crate::layout::*;
use crate::DbError;

impl Engine {
    /// Writes the superblock to the copy not holding the newest, with the next sequence.
    pub(super) fn write_superblock(&self, clean: bool) -> Result<(), DbError> {
        let _sb = self.sb_lock.lock();
        let page = SUPERBLOCK_COPIES - 1 - self.sb_page.load(Ordering::Relaxed);
        let sequence = self.sb_sequence.load(Ordering::Relaxed) + 1;
        let sb = Superblock {
            sequence,
            hash_key: self.hash_key,
            max_depth: self.max_depth,
            global_depth: self.global_depth.load(Ordering::Acquire),
            fixed_depth: self.fixed_depth,
            dir_segments: self
                .dir_segments
                .iter()
                .map(|s| s.load(Ordering::Acquire))
                .take_while(|&first| first != 0)
                .collect(),
            stripe_parts: self.stripe.0,
            stripe_unit: self.stripe.1,
            clean,
            epoch: self.epoch.load(Ordering::Acquire),
            next_page: self.lock_alloc().next_page,
            key_count: self.key_count.load(Ordering::Relaxed),
            max_value_bytes: self.max_value as u64,
            // Under the exclusive checkpoint latch: every smaller `ts` is applied.
            commit_ts: self.commit.next_ts.load(Ordering::SeqCst) - 1,
            queue_first: self.commit.first.load(Ordering::Relaxed),
            queues: self.commit.queues(),
            queue_pages: self.commit.pages() as u32,
            catalog: self.catalog_durable.load(Ordering::Acquire),
        };
        let copy = self.cache.get_for_overwrite(page)?;
        copy.write(|b| sb.encode(b));
        self.sb_page.store(page, Ordering::Relaxed);
        self.sb_sequence.store(sequence, Ordering::Relaxed);
        Ok(())
    }
}

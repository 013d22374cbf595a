//! Prefetch: the index and record pages of several keys read into the cache with their
//! misses overlapped, before the operations on those keys run one by one (NeBuLa's
//! "prefetch on dispatch": a server job of pipelined requests pays about one device latency
//! for its misses instead of one per request).
//!
//! Best effort: a page that cannot be fetched now (no frame free without waiting, a device
//! error) is skipped; the operation that reads it later meets the same condition and reports
//! it. At most [`BATCH`] reads are unwaited at a time (the cache's bound per thread).

use tamer_cache::{PageClass, BATCH};

use super::Engine;
use crate::layout::*;
use crate::DbError;

/// Keys one call prefetches at most (a server job holds at most a few hundred).
pub const PREFETCH_KEYS_MAX: usize = 1024;

impl Engine {
    /// Reads the buckets of `keys`, then the pages of the records their entries point to, into
    /// the cache; returns how many pages it asked for. Only the first [`PREFETCH_KEYS_MAX`]
    /// keys count.
    pub fn prefetch(&self, keys: &[&[u8]]) -> Result<u64, DbError> {
        let _op = self.check_open()?;
        let keys = &keys[..keys.len().min(PREFETCH_KEYS_MAX)];
        let mut buckets = Vec::with_capacity(keys.len());
        let mut hashes = Vec::with_capacity(keys.len());
        for key in keys {
            let hash = self.hash(key);
            hashes.push(hash);
            if let Ok(bucket) = self.bucket_for(hash) {
                buckets.push(bucket);
            }
        }
        buckets.sort_unstable();
        buckets.dedup();
        let classed: Vec<(u64, PageClass)> = buckets
            .iter()
            .map(|&(page, pattern)| (page, PageClass::Index { set_key: pattern }))
            .collect();
        self.prefetch_pages(&classed);
        let mut records = Vec::with_capacity(keys.len());
        for &hash in &hashes {
            let found = self.read_bucket_of(hash, |bytes, count| {
                let mut pages = Vec::new();
                let mut from = 0;
                while let Some(i) = next_hash_match(bytes, count, hash, from) {
                    pages.push(Entry::read(bytes, i).page);
                    from = i + 1;
                }
                Ok(pages)
            });
            records.extend(found.unwrap_or_default());
        }
        records.sort_unstable();
        records.dedup();
        let classed: Vec<(u64, PageClass)> =
            records.iter().map(|&p| (p, PageClass::Data)).collect();
        self.prefetch_pages(&classed);
        Ok((buckets.len() + records.len()) as u64)
    }

    /// Fetches `pages`, [`BATCH`] in flight, every prefetch waited before the next chunk.
    fn prefetch_pages(&self, pages: &[(u64, PageClass)]) {
        for chunk in pages.chunks(BATCH) {
            let fetches: Vec<_> = chunk
                .iter()
                .filter_map(|&(page, class)| self.cache.prefetch_as(page, class).ok())
                .collect();
            debug_assert!(fetches.len() <= BATCH, "the cache's bound per thread");
            for fetch in fetches {
                let _ = fetch.wait();
            }
        }
    }
}

//! Cache counters and the miss-latency histogram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;

/// A snapshot of the cache's counters, summed over every core.
#[derive(Clone, Debug)]
pub struct CacheStats {
    /// `get`/`prefetch` calls that found the page installed.
    pub hits: u64,
    /// Misses that issued a device read (one per miss-status entry).
    pub misses: u64,
    /// Of `hits`, those of index pages ([`crate::PageClass::Index`]).
    pub index_hits: u64,
    /// Of `misses`, those of index pages.
    pub index_misses: u64,
    /// Cached copies dropped unwritten because their page was overwritten as an index page
    /// (a freed data page reused for the index).
    pub discarded: u64,
    /// Data misses that took the set's probationary frame instead of CLOCK's victim, which
    /// was asked for at least as often lately (TinyLFU admission refused them the victim).
    pub admissions_refused: u64,
    /// Misses that found a read of the same page in flight and waited for it instead.
    pub merged_misses: u64,
    /// Installed pages dropped to make room for another.
    pub evictions: u64,
    /// Dirty frames written to the device (victims, the cleaner and `flush`).
    pub write_backs: u64,
    /// Of those, victims a miss had to write back before its read (on the miss's path).
    pub victim_write_backs: u64,
    /// Of those, written ahead of eviction by [`crate::PageCache::clean_some`].
    pub cleaner_write_backs: u64,
    /// Misses in flight now (miss-status-table entries in use).
    pub misses_in_flight: u64,
    /// Most misses ever in flight at once.
    pub max_misses_in_flight: u64,
    /// From the submit of a miss's read to the page being installed, in ns (1 ns .. 10 s).
    pub miss_latency_ns: Histogram<u64>,
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("static histogram bounds are valid")
}

/// Shards of the latency histogram: a miss records into its core's shard.
pub(crate) const HISTOGRAM_SHARDS: usize = 16;

#[derive(Default)]
pub(crate) struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub index_hits: AtomicU64,
    pub index_misses: AtomicU64,
    pub discarded: AtomicU64,
    pub admissions_refused: AtomicU64,
    pub merged_misses: AtomicU64,
    pub evictions: AtomicU64,
    pub write_backs: AtomicU64,
    pub victim_write_backs: AtomicU64,
    pub cleaner_write_backs: AtomicU64,
    pub max_misses_in_flight: AtomicU64,
}

impl Counters {
    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct Histograms {
    shards: Box<[Mutex<Histogram<u64>>]>,
}

impl Histograms {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..HISTOGRAM_SHARDS)
                .map(|_| Mutex::new(new_histogram()))
                .collect(),
        }
    }

    pub(crate) fn record(&self, latency_ns: u64) {
        let shard = tamer_runtime::thread::core_id().unwrap_or(0) % HISTOGRAM_SHARDS;
        let mut histogram = self.shards[shard]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        histogram.saturating_record(latency_ns.max(1));
    }

    pub(crate) fn merged(&self) -> Histogram<u64> {
        let mut total = new_histogram();
        for shard in self.shards.iter() {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // Same bounds, so adding cannot fail.
            let _ = total.add(&*shard);
        }
        total
    }
}

//! Checkpoints: the index pages (buckets, directory pages, map pages) changed since the last
//! checkpoint are written to their other copy, then the superblock names the new epoch
//! (`docs/durability.md`). Until that superblock write is durable, the previous checkpoint is
//! intact on the device whatever a crash tears; after it, the new one is complete. A store
//! reopened after a crash is the store as of its last checkpoint.
//!
//! Every change to an index page happens under the checkpoint latch held shared (a put, a
//! delete, a compaction move, a split, from start to end); a checkpoint holds it exclusive,
//! so it sees whole operations only. Pages freed since the last checkpoint return to the
//! allocator only once the next checkpoint is durable: the last checkpoint's pages are never
//! overwritten while it is the one a crash returns to.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tamer_cache::PageClass;
use tamer_runtime::thread;

use super::directory::mask;
use super::Engine;
use crate::layout::*;
use crate::DbError;

/// Pages freed since the last checkpoint that make the next change run one first (or a
/// quarter of the pages in use, whichever is more): the space deferred frees hold back.
/// Checkpoints every second bound it too, and an allocation that finds no space runs one
/// at once (`frees_pending`), so this bound only spreads checkpoints: at 256 pages (and a
/// sixteenth) a SET load of 100,000 keys ran ten a second, a fifth of its CPU.
pub const FREED_PAGES_MIN: u64 = 4096;

/// The share of the pages in use that deferred frees may hold back (see
/// [`FREED_PAGES_MIN`]), as a divisor.
const FREED_PAGES_DIVISOR: u64 = 4;

/// Cores the checkpoint latch keeps a count for (more share counts).
const LATCH_CORES: usize = 64;

/// One core's count of shared holders, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct CoreCount(AtomicUsize);

/// A latch for user-level threads, shared or exclusive; waiting yields the core. Shared
/// holders count on their own core's line (a put touches no line another core writes); an
/// exclusive holder raises a flag, which stops new shared holders (checkpoints are not
/// starved by a stream of puts), then waits for every count to reach zero.
pub(crate) struct CheckpointLatch {
    exclusive: AtomicBool,
    shared: Box<[CoreCount]>,
    /// How long shared holders (writers) waited for an exclusive holder.
    pub(super) waits: WriterWaits,
}

/// Buckets of the writer-wait distribution: bucket `i` counts waits shorter than `2^i` µs
/// (bucket 0: under 1 µs), the last one every longer wait.
pub const WRITER_WAIT_BUCKETS: usize = 24;

/// The bucket of a wait of `ns` nanoseconds (see [`WRITER_WAIT_BUCKETS`]).
pub fn writer_wait_bucket(ns: u64) -> usize {
    let us = ns / 1000;
    let bucket = (u64::BITS - us.leading_zeros()) as usize;
    bucket.min(WRITER_WAIT_BUCKETS - 1)
}

/// The distribution of writers' waits for checkpoints: lock-free counters, written only
/// by a writer that waited (the common path, no checkpoint running, records nothing).
#[derive(Default)]
pub(crate) struct WriterWaits {
    count: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
    buckets: [AtomicU64; WRITER_WAIT_BUCKETS],
}

impl WriterWaits {
    pub(super) fn record(&self, ns: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
        self.buckets[writer_wait_bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// Copies the counters into `stats`.
    pub(super) fn fill(&self, stats: &mut CheckpointStats) {
        stats.writer_waits = self.count.load(Ordering::Relaxed);
        stats.writer_wait_ns_total = self.total_ns.load(Ordering::Relaxed);
        stats.writer_wait_ns_max = self.max_ns.load(Ordering::Relaxed);
        for (out, bucket) in stats.writer_wait_buckets.iter_mut().zip(&self.buckets) {
            *out = bucket.load(Ordering::Relaxed);
        }
    }
}

pub(crate) struct SharedGuard<'a>(&'a CheckpointLatch, usize);
pub(crate) struct ExclusiveGuard<'a>(&'a CheckpointLatch);

impl CheckpointLatch {
    pub fn new() -> Self {
        Self {
            exclusive: AtomicBool::new(false),
            shared: (0..LATCH_CORES).map(|_| CoreCount::default()).collect(),
            waits: WriterWaits::default(),
        }
    }

    pub fn shared(&self) -> SharedGuard<'_> {
        let core = thread::core_id().unwrap_or(0) % LATCH_CORES;
        if let Some(guard) = self.try_shared(core) {
            return guard;
        }
        // This holder waits for a checkpoint: counted in the latch's distribution and as
        // the caller's request's checkpoint wait.
        thread::account_as(thread::WaitKind::Checkpoint, || {
            let since = tamer_device::now_ns();
            // Bounded by the checkpoint's run (the flag drops when it ends).
            let guard = loop {
                while self.exclusive.load(Ordering::SeqCst) {
                    thread::yield_now();
                }
                if let Some(guard) = self.try_shared(core) {
                    break guard;
                }
            };
            self.waits
                .record(tamer_device::now_ns().saturating_sub(since));
            guard
        })
    }

    /// The latch shared on `core`'s count, unless an exclusive holder is in or coming.
    fn try_shared(&self, core: usize) -> Option<SharedGuard<'_>> {
        let count = &self.shared[core].0;
        // SeqCst on both sides: a sharer that sees no flag after counting itself, and a
        // checkpoint that sees no count after raising the flag, cannot both go on.
        count.fetch_add(1, Ordering::SeqCst);
        if !self.exclusive.load(Ordering::SeqCst) {
            return Some(SharedGuard(self, core));
        }
        count.fetch_sub(1, Ordering::SeqCst);
        None
    }

    pub fn exclusive(&self) -> ExclusiveGuard<'_> {
        while self
            .exclusive
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            thread::yield_now();
        }
        while self.shared.iter().any(|c| c.0.load(Ordering::SeqCst) > 0) {
            thread::yield_now();
        }
        ExclusiveGuard(self)
    }
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        let before = self.0.shared[self.1].0.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before >= 1, "shared checkpoint latch released twice");
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        let was = self.0.exclusive.swap(false, Ordering::SeqCst);
        debug_assert!(was, "exclusive checkpoint latch released twice");
    }
}

/// What checkpoints have done since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Index pages written (each to its other copy).
    pub index_pages_written: u64,
    /// Time writers waited for checkpoints in all, and the longest one (ns): a checkpoint
    /// holds the checkpoint latch for its whole run.
    pub total_ns: u64,
    /// See `total_ns`.
    pub max_ns: u64,
    /// When the last checkpoint since open ended (Unix time in ms; 0: none yet), as the
    /// server's `LASTSAVE` reports it.
    pub last_unix_ms: u64,
    /// Writers that waited for a checkpoint: for the checkpoint latch, or running the
    /// checkpoint a bound made due before their change.
    pub writer_waits: u64,
    /// Their waits in all (ns).
    pub writer_wait_ns_total: u64,
    /// The longest (ns): `checkpoint_writer_wait_us_max`.
    pub writer_wait_ns_max: u64,
    /// Their distribution (see [`WRITER_WAIT_BUCKETS`]).
    pub writer_wait_buckets: [u64; WRITER_WAIT_BUCKETS],
}

impl CheckpointStats {
    /// The wait (µs, a bucket's upper bound) that a `fraction` of writer waits stay under;
    /// 0 with no waits.
    pub fn writer_wait_us_quantile(&self, fraction: f64) -> u64 {
        let want = (self.writer_waits as f64 * fraction).ceil() as u64;
        let mut seen = 0;
        for (i, &n) in self.writer_wait_buckets.iter().enumerate() {
            seen += n;
            if n > 0 && seen >= want {
                return 1 << i;
            }
        }
        0
    }
}

/// Pages freed since the last checkpoint (which index pages changed is in `CopyState`).
#[derive(Default)]
pub(crate) struct Dirty {
    /// Logical extents freed: (first, pages).
    pub freed: Vec<(u64, u64)>,
    /// Their pages in all.
    pub freed_pages: u64,
}

impl Engine {
    /// Runs a checkpoint when more index pages changed than the bound, before an operation
    /// that changes more (the caller holds no latch).
    pub(super) fn checkpoint_if_over(&self) -> Result<(), DbError> {
        // Freed pages wait for the next checkpoint: bound the space they hold back. Read
        // without a lock (every change comes here): only past the minimum are the exact
        // bound's locks taken.
        if !self.over_bounds() {
            return Ok(());
        }
        // The writer runs (or waits for) the checkpoint: its change waits that long.
        let start = tamer_device::now_ns();
        let result = thread::account_as(thread::WaitKind::Checkpoint, || {
            self.checkpoint_if(false, Self::over_bounds)
        });
        self.ckpt
            .waits
            .record(tamer_device::now_ns().saturating_sub(start));
        result
    }

    /// Whether the index pages changed since the last checkpoint reach `times` the bound
    /// that runs a checkpoint.
    pub(super) fn index_pages_changed_over(&self, times: usize) -> bool {
        self.copies.changed() >= self.dirty_index_pages_max * times
    }

    /// Whether some cache set is nearly full of dirty index pages (a checkpoint is due).
    pub(super) fn set_pressure(&self) -> bool {
        self.set_pressure.load(Ordering::Acquire)
    }

    /// Notes the set of index page `page` (of `class`) as it is first marked changed (before
    /// its frame is dirty): counting it, two ways short of full of dirty index pages, a
    /// checkpoint is due before the next change. The two spare ways cover writers marking
    /// pages of one set at once and a transaction's changes until its next step.
    pub(super) fn watch_set(&self, page: u64, class: tamer_cache::PageClass) {
        if self.cache.dirty_index_frames_in_set(page, class) + 3 >= self.cache.ways() {
            self.set_pressure.store(true, Ordering::Release);
        }
    }

    /// Whether the changes since the last checkpoint passed a bound: index pages changed, a
    /// staging queue half full, or freed pages held back.
    pub(crate) fn over_bounds(&self) -> bool {
        let freed = self.freed_pages.load(Ordering::Relaxed);
        self.copies.changed() >= self.dirty_index_pages_max
            || self.set_pressure.load(Ordering::Acquire)
            || self.commit.half_full.load(Ordering::Acquire)
            || (freed >= FREED_PAGES_MIN
                && freed >= self.lock_alloc().next_page / FREED_PAGES_DIVISOR)
    }

    /// A checkpoint, if anything changed since the last one.
    pub fn checkpoint_if_dirty(&self) -> Result<(), DbError> {
        self.checkpoint_if(false, |e| {
            e.copies.changed() > 0 || e.freed_pages.load(Ordering::Relaxed) > 0
        })
    }

    /// Makes everything done so far durable and the store's crash point: data pages written
    /// and flushed, then every changed index page to its other copy, a flush, the superblock
    /// with the next epoch (`clean` at close), a flush. Frees since the last checkpoint are
    /// then reusable. An error leaves the previous checkpoint as the crash point and fails the
    /// store (later writes fail; reopen it to recover).
    pub fn checkpoint(&self, clean: bool) -> Result<(), DbError> {
        self.checkpoint_if(clean, |_| true)
    }

    /// A checkpoint if `needed`, asked before and again once writers are stopped: of the
    /// writers that see a bound passed at once, the first runs the checkpoint and the others
    /// find it done (else each would run one in turn).
    pub(super) fn checkpoint_if(
        &self,
        clean: bool,
        needed: impl Fn(&Self) -> bool,
    ) -> Result<(), DbError> {
        if !needed(self) {
            return Ok(());
        }
        // Most dirty data pages are written before writers are stopped; under the latch only
        // those dirtied meanwhile remain. (An error here is seen again under the latch.)
        let _ = self.cache.flush();
        let _x = self.ckpt.exclusive();
        // No group commit runs meanwhile: the queues restart when this one is durable.
        let _leader = self.commit.leader.lock();
        self.check_failed()?;
        if !needed(self) {
            return Ok(());
        }
        let start = tamer_device::now_ns();
        let result = self.checkpoint_locked(clean);
        match &result {
            Ok(pages) => {
                let took = tamer_device::now_ns().saturating_sub(start);
                let mut stats = self.lock_checkpoint_stats();
                stats.checkpoints += 1;
                stats.index_pages_written += *pages as u64;
                stats.total_ns += took;
                stats.max_ns = stats.max_ns.max(took);
                stats.last_unix_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
            }
            Err(err) => self.fail(format!("a checkpoint failed: {err}")),
        }
        result.map(|_| ())
    }

    /// The checkpoint proper; returns the index pages it wrote.
    fn checkpoint_locked(&self, clean: bool) -> Result<usize, DbError> {
        // No change runs meanwhile (the latch is exclusive): the count restarts with the list.
        let dirty = std::mem::take(&mut *self.lock_dirty());
        // Every dirty index page is written below: no set stays full of them.
        self.set_pressure.store(false, Ordering::Release);
        self.freed_pages.store(0, Ordering::Relaxed);
        // Every change with a smaller timestamp is applied (the latch is exclusive).
        let commit_ts = self.commit.next_ts.load(Ordering::SeqCst) - 1;
        // Records first: the index about to be made durable names them.
        self.cache.flush()?;
        let epoch = self.next_epoch.load(Ordering::Acquire);
        let (buckets, mut segment_pages): (Vec<_>, Vec<_>) = self
            .copies
            .take_changed_pairs()
            .into_iter()
            .partition(|&(_, _, dir)| !dir);
        self.checkpoint_buckets(&buckets)?;
        let bucket_pages = buckets.len();
        // Switching bucket copies changed directory slots: those pages go too.
        let after = self.copies.take_changed_pairs();
        assert!(
            after.iter().all(|&(_, _, dir)| dir),
            "only slots changed meanwhile"
        );
        segment_pages.extend(after);
        segment_pages.sort_unstable();
        segment_pages.dedup();
        let writes = self.switch_index_copies(epoch, &segment_pages)?;
        let written = self.cache.write_back_many(&writes)?;
        if written != writes.len() {
            return Err(super::corrupt(
                0,
                "a changed index page was not in the cache",
            ));
        }
        tamer_runtime::io::flush().map_err(|err| DbError::Cache(err.into()))?;
        self.epoch.store(epoch, Ordering::Release);
        self.next_epoch.store(epoch + 1, Ordering::Release);
        self.write_superblock(clean)?;
        let sb_page = self.sb_page.load(Ordering::Acquire);
        self.cache
            .write_back_to(sb_page, PageClass::Data, sb_page)?;
        tamer_runtime::io::flush().map_err(|err| DbError::Cache(err.into()))?;
        self.queues_checkpointed(commit_ts);
        let mut alloc = self.lock_alloc();
        for (l, n) in dirty.freed {
            alloc.free.give(l, n);
        }
        drop(alloc);
        Ok(bucket_pages + writes.len())
    }

    /// Stamps `epoch` in every changed directory page (fixed region, and `segment_pages`),
    /// tree node and map page, and names its other copy current (a tree node's in its map
    /// entry). Returns the writes that put each one in its new copy: (page, class, address).
    fn switch_index_copies(
        &self,
        epoch: u64,
        segment_pages: &[(u64, u64, bool)],
    ) -> Result<Vec<(u64, PageClass, u64)>, DbError> {
        let dir = self.copies.take_changed_dir_pages();
        let mut writes = Vec::with_capacity(dir.len() + segment_pages.len());
        for &i in &dir {
            let tag = dir_page(self.dir_pages, i, 0);
            self.cache.get(tag)?.write(|b| put_u64(b, 0, epoch));
            let new = 1 - self.copies.dir_copy(i);
            self.copies.set_dir_copy(i, new);
            writes.push((tag, PageClass::Data, dir_page(self.dir_pages, i, new)));
        }
        for &(l, set_key, _) in segment_pages {
            let tag = self.phys(l);
            let class = PageClass::Index { set_key };
            self.cache
                .get_as(tag, class)?
                .write(|b| put_u64(b, 0, epoch));
            // Named before its write, while dirty (so not evictable), as a bucket's copy.
            let new = 1 - self.copies.bucket_copy(l);
            self.copies.set_dir_segment_page(l, new);
            writes.push((tag, class, self.phys(l + new)));
        }
        // Tree nodes: the current copy is in the map, so their map pages follow them.
        for l in self.copies.take_changed_trees() {
            let tag = self.phys(l);
            let new = 1 - self.copies.bucket_copy(l);
            self.copies.set_tree(l, new);
            self.map_update(l, |_| Ok(tree_map_entry(new)))?;
            writes.push((tag, super::tree::node_class(tag), self.phys(l + new)));
        }
        for group in self.copies.take_changed_groups() {
            let tag = map_page(self.space_start, group, 0);
            self.cache.get(tag)?.write(|b| {
                if get_u32(b, 0) == 0 {
                    put_u32(b, 0, KIND_MAP);
                    put_u32(b, 4, group as u32);
                }
                put_u64(b, 8, epoch);
            });
            let new = 1 - self.copies.map_copy(group);
            self.copies.set_map_copy(group, new);
            writes.push((tag, PageClass::Data, map_page(self.space_start, group, new)));
        }
        Ok(writes)
    }

    /// Writes the changed buckets to their other copies and names those copies in their
    /// directory slots. Each copy is named before its write, while the page is dirty and so
    /// cannot be evicted: once written it is clean, and a miss then reads the copy written.
    fn checkpoint_buckets(&self, buckets: &[(u64, u64, bool)]) -> Result<(), DbError> {
        let mut writes = Vec::with_capacity(buckets.len());
        for &(l, pattern, _) in buckets {
            let page = self.phys(l);
            let new = 1 - self.copies.bucket_copy(l);
            self.copies.set_bucket(l, new);
            writes.push((
                page,
                PageClass::Index { set_key: pattern },
                self.phys(l + new),
            ));
        }
        let written = self.cache.write_back_many(&writes)?;
        if written != writes.len() {
            return Err(super::corrupt(0, "a changed bucket was not in the cache"));
        }
        let global = self.global_depth.load(Ordering::Acquire);
        for &(l, pattern, _) in buckets {
            let page = self.phys(l);
            let depth = self.bucket(page, pattern)?.read(bucket_depth).min(global);
            let mut index = pattern & mask(depth);
            while index < 1u64 << global {
                self.dir_set(index, page, depth)?;
                index += 1u64 << depth;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations caught: a wait put one bucket off (µs rounded up, or nanoseconds taken for
    /// µs), the last bucket overflowed, the quantile taken from an empty bucket or past the
    /// count, the maximum kept as the last wait.
    #[test]
    fn writer_waits_fall_in_power_of_two_buckets() {
        assert_eq!(writer_wait_bucket(0), 0);
        assert_eq!(writer_wait_bucket(999), 0, "under 1 µs");
        assert_eq!(writer_wait_bucket(1_000), 1, "1 µs: under 2 µs");
        assert_eq!(writer_wait_bucket(1_999), 1);
        assert_eq!(writer_wait_bucket(2_000), 2);
        assert_eq!(writer_wait_bucket(100_000), 7, "100 µs: under 128 µs");
        assert_eq!(writer_wait_bucket(u64::MAX), WRITER_WAIT_BUCKETS - 1);
        let waits = WriterWaits::default();
        for ns in [500, 700, 3_000, 90_000_000, 1_500] {
            waits.record(ns);
        }
        let mut stats = CheckpointStats::default();
        waits.fill(&mut stats);
        assert_eq!(stats.writer_waits, 5);
        assert_eq!(stats.writer_wait_ns_max, 90_000_000);
        assert_eq!(stats.writer_wait_ns_total, 90_005_700);
        assert_eq!(
            stats.writer_wait_us_quantile(0.4),
            1,
            "two of five under 1 µs"
        );
        assert_eq!(stats.writer_wait_us_quantile(0.6), 2);
        assert_eq!(stats.writer_wait_us_quantile(0.8), 4);
        assert_eq!(
            stats.writer_wait_us_quantile(1.0),
            1 << 17,
            "90 ms: under 131 ms"
        );
        assert_eq!(CheckpointStats::default().writer_wait_us_quantile(0.99), 0);
    }
}

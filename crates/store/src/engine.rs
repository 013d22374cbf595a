//! The engine proper: every method runs on a tamer user-level thread (it may park on a miss).
//!
//! This module holds the [`Engine`] struct and its construction, open (`load`) and close,
//! the admission of operations (`check_open`, which `close` waits on), the failure state
//! (a failed checkpoint stops writes) and the entry of a change (`begin_change`). Each other
//! job has its module:
//!
//! - `kv`: get, contains, put, delete and the key scan;
//! - `buckets`: a key's entry in its bucket (find, link, unlink);
//! - `directory`: the directory's slots and the bucket pages they name;
//! - `split`: bucket splits and directory doubling;
//! - `records`: record reads and writes in data pages and extents, their release;
//! - `compaction`: the sparse-page queue and the moves that empty its pages;
//! - `space`: the page map and the allocator;
//! - `superblock`: the superblock's two copies;
//! - `checkpoint`, `commit`, `recover`, `locks`, `txn`: crash safety, group commit,
//!   recovery, key locks and transactions;
//! - `check`: `tamer check`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tamer_cache::{PageCache, PageClass};
use tamer_runtime::thread;

use crate::alloc::{Alloc, FreeExtents};
use crate::copies::CopyState;

mod buckets;
mod check;
mod checkpoint;
mod commit;
mod compaction;
mod directory;
mod kv;
mod ledger;
mod locks;
mod prefetch;
mod records;
mod recover;
mod small;
mod space;
mod split;
mod superblock;
mod tree;
mod txn;

use checkpoint::{CheckpointLatch, Dirty};
use commit::Commit;
use locks::KeyLocks;

use crate::layout::*;
use crate::DbError;
pub use check::{CheckReport, Problem, MAX_PROBLEMS_LISTED};
pub use checkpoint::{CheckpointStats, FREED_PAGES_MIN};
pub use commit::{CommitStats, Durability};
pub use compaction::{
    CompactionStats, COMPACT_RESERVE_FRACTION, COMPACT_RESERVE_MIN_PAGES, SPARSE_QUEUE,
};
pub(crate) use records::is_data_page;
pub use recover::{RecoveryObserver, RecoveryPhase, RecoveryProgress, RecoveryStats};
pub use small::{SMALL_KEY_MAX, SMALL_VALUE_MAX};
pub(crate) use space::Space;
pub use space::COMPACT_LIVE_BYTES;
pub use tree::{Direction, TreeId, RECLAIM_BATCH};
pub use txn::{Tx, WriteBatch, MAX_TX_ATTEMPTS, MAX_TX_BYTES};

const PAGE_SIZE_BYTES: u64 = tamer_cache::PAGE_SIZE as u64;

/// Largest key, bytes.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// A lock for user-level threads: waiting yields the core (never blocks the OS thread), so it
/// may be held across a park.
struct YieldLock(AtomicBool);

struct YieldGuard<'a>(&'a YieldLock);

impl YieldLock {
    fn try_lock(&self) -> Option<YieldGuard<'_>> {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            // `then`, not `then_some`: a guard built eagerly would release the holder's lock.
            .then(|| YieldGuard(self))
    }

    fn lock(&self) -> YieldGuard<'_> {
        while self
            .0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            thread::yield_now();
        }
        YieldGuard(self)
    }
}

impl Drop for YieldGuard<'_> {
    fn drop(&mut self) {
        self.0 .0.store(false, Ordering::Release);
    }
}

pub(crate) struct Engine {
    pub cache: Arc<PageCache>,
    /// The index hash's key (from the superblock, or random for a new store).
    hash_key: [u64; 2],
    /// The superblock read at open (taken by `load`), with the copy (page) it came from.
    opened_from: Mutex<Option<(Superblock, u64)>>,
    /// Serializes superblock writes (held across the cache write: it may park).
    sb_lock: YieldLock,
    /// The copy holding the newest superblock, and its sequence number.
    sb_page: AtomicU64,
    sb_sequence: AtomicU64,
    pub max_value: usize,
    pub max_depth: u32,
    /// Depth of the directory's fixed region (2^fixed_depth slots, pinned).
    fixed_depth: u32,
    /// The directory segments past the fixed region: first logical page each, 0 until
    /// allocated (`layout::dir_place`).
    dir_segments: Box<[AtomicU64]>,
    /// Parts the store is striped over and the unit in pages (recorded in the superblock).
    stripe: (u32, u64),
    /// Pages of each staging queue if this open creates the store (`None`: from its size).
    new_queue_pages: Option<u64>,
    /// First page past the superblocks and the directory: the first group's map page.
    space_start: u64,
    /// Pages of one copy of the directory's fixed region.
    dir_pages: u64,
    /// Which copy of each index page is current (shared with the cache's addresses).
    copies: Arc<CopyState>,
    /// Held shared by every change to an index page, exclusive by a checkpoint.
    ckpt: CheckpointLatch,
    /// The last checkpoint's epoch, and the next one's.
    epoch: AtomicU64,
    next_epoch: AtomicU64,
    /// What changed since the last checkpoint.
    dirty: Mutex<Dirty>,
    /// `dirty.freed_pages`, readable without the lock (every change checks it).
    freed_pages: AtomicU64,
    /// A change that finds this many index pages dirty runs a checkpoint first.
    dirty_index_pages_max: usize,
    /// What checkpoints did since open.
    checkpoint_stats: Mutex<checkpoint::CheckpointStats>,
    /// Why the store stopped taking writes (a checkpoint failed).
    failed: Mutex<Option<String>>,
    /// Staging queues, commit timestamps, group commit.
    commit: Commit,
    /// Key locks held by every change.
    locks: KeyLocks,
    /// What recovery at open redid.
    recovery: Mutex<RecoveryStats>,
    /// Told of recovery's progress at open (`DbOptions::on_recovery_progress`).
    recovery_observer: Option<RecoveryObserver>,
    global_depth: AtomicU32,
    split_lock: YieldLock,
    /// Writer locks of the trees (`tree`), a tree's by its root page.
    tree_locks: Box<[YieldLock]>,
    /// The catalog tree's root (named trees; 0: none yet), published once a checkpoint
    /// names it; and the root the superblock names (set just before that checkpoint).
    catalog: AtomicU64,
    catalog_durable: AtomicU64,
    /// Held while the catalog is made.
    catalog_lock: YieldLock,
    /// Dropped trees may wait in the catalog for the reclaimer (set at open and by drops).
    trees_dropped: AtomicBool,
    /// Small values read by transactions (`Tx::get_cached`).
    small: small::SmallValues,
    /// Some cache set holds nearly as many dirty index pages as it has ways: the next change
    /// runs a checkpoint first (dirty index pages are never evicted, so a full set would
    /// leave a miss there no victim).
    set_pressure: AtomicBool,
    alloc: Mutex<Alloc>,
    key_count: AtomicU64,
    leaked_pages: AtomicU64,
    space: Space,
    closed: AtomicBool,
    /// Operations admitted by `check_open` and not yet finished.
    active_ops: std::sync::atomic::AtomicUsize,
    /// Opened read-only: nothing is ever written.
    read_only: bool,
    /// Closed data pages that fell to `COMPACT_LIVE_BYTES` live bytes or fewer.
    sparse: crossbeam_queue::ArrayQueue<u64>,
    /// A sparse hint was dropped since the last map rescan (`compaction::refill_sparse`).
    sparse_rescan: AtomicBool,
    pages_compacted: AtomicU64,
    records_moved: AtomicU64,
    hints_dropped: AtomicU64,
}

/// What [`Engine::new`] starts from.
pub(crate) struct EngineSetup {
    pub cache: Arc<PageCache>,
    pub space: Space,
    pub max_value: usize,
    pub max_depth: u32,
    /// Depth of a new store's fixed directory region (an existing store keeps its own).
    pub fixed_depth: u32,
    /// The superblock found at open and its page (`None`: a new store).
    pub existing: Option<(Superblock, u64)>,
    /// The hash key of a new store (random when `None`).
    pub new_hash_key: Option<[u64; 2]>,
    /// Which copy of each index page is current (recovery's choice at open).
    pub copies: Arc<CopyState>,
    /// The next checkpoint's epoch: above any found on the device.
    pub next_epoch: u64,
    /// When writes are acknowledged.
    pub durability: Durability,
    /// Staging queues of a new store (one per core; an existing store keeps its own).
    pub queues: u32,
    /// Pages of each staging queue of a new store (`None`: from the device's size).
    pub queue_pages: Option<u64>,
    pub recovery_observer: Option<RecoveryObserver>,
    /// How long an operation waits for key locks in all (`DbOptions::lock_timeout`).
    pub lock_timeout_ns: u64,
    /// Parts the store is striped over and the unit in pages.
    pub stripe: (u32, u64),
}

/// What an engine starts from that an existing store's superblock decides (for a new store,
/// its setup).
struct Origin {
    /// Staging queues.
    queues: u32,
    /// The last commit timestamp.
    last_ts: u64,
    /// The last checkpoint's epoch (0: none yet).
    epoch: u64,
    /// Depth of the directory's fixed region.
    fixed_depth: u32,
    /// First page of each directory segment (0: not allocated).
    dir_segments: Box<[AtomicU64]>,
    hash_key: [u64; 2],
    /// The current superblock's page and sequence (a new store's first write goes to page 0
    /// with sequence 1).
    sb_page: u64,
    sb_sequence: u64,
}

impl EngineSetup {
    /// Where the engine starts: from the superblock found, or anew.
    fn origin(&self) -> Origin {
        let existing = self.existing.as_ref();
        let (queues, last_ts) = existing
            .map_or((self.queues.clamp(1, MAX_QUEUES as u32), 0), |(sb, _)| {
                (sb.queues, sb.commit_ts)
            });
        let dir_segments = directory::no_segments();
        let fixed_depth = match existing {
            Some((sb, _)) => {
                for (slot, &first) in dir_segments.iter().zip(&sb.dir_segments) {
                    slot.store(first, Ordering::Relaxed);
                }
                sb.fixed_depth
            }
            None => self.fixed_depth.min(self.max_depth),
        };
        let hash_key = match existing {
            Some((sb, _)) => sb.hash_key,
            None => self.new_hash_key.unwrap_or_else(rand::random),
        };
        let (sb_page, sb_sequence) = existing.map_or((1, 0), |(sb, page)| (*page, sb.sequence));
        Origin {
            queues,
            last_ts,
            epoch: existing.map_or(0, |(sb, _)| sb.epoch),
            fixed_depth,
            dir_segments,
            hash_key,
            sb_page,
            sb_sequence,
        }
    }
}

fn corrupt(page: u64, detail: impl Into<String>) -> DbError {
    DbError::Corrupt {
        page,
        detail: detail.into(),
    }
}

/// The size limits of a key and (for a put) its value: checked before anything is copied or
/// written.
pub(crate) fn check_sizes(
    key: &[u8],
    value: Option<&[u8]>,
    max_value: usize,
) -> Result<(), DbError> {
    if key.is_empty() {
        return Err(DbError::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(DbError::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_BYTES,
        });
    }
    if let Some(value) = value.filter(|v| v.len() > max_value) {
        return Err(DbError::ValueTooLarge {
            len: value.len(),
            max: max_value,
        });
    }
    Ok(())
}

/// The size limits of a tree key and (for a put) its value.
pub(crate) fn check_sizes_tree(
    key: &[u8],
    value: Option<&[u8]>,
    max_value: usize,
) -> Result<(), DbError> {
    if key.len() > MAX_TREE_KEY {
        return Err(DbError::KeyTooLarge {
            len: key.len(),
            max: MAX_TREE_KEY,
        });
    }
    if let Some(value) = value.filter(|v| v.len() > max_value) {
        return Err(DbError::ValueTooLarge {
            len: value.len(),
            max: max_value,
        });
    }
    Ok(())
}

/// How long `close` waits for operations already in progress.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// One admitted operation; `close` waits until every guard has dropped.
pub(crate) struct OpGuard<'a>(&'a Engine);

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        let before = self.0.active_ops.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "operation count underflow");
    }
}

impl Engine {
    /// An engine as `setup` says.
    pub fn new(setup: EngineSetup) -> Self {
        let origin = setup.origin();
        debug_assert!(setup.next_epoch > origin.epoch);
        // Dirty index pages cannot be evicted: a checkpoint runs well before they could fill
        // the sets (a quarter of the frames, at least 16 pages; index pages take at most
        // `ways - 1` of a set's frames, so data pages always keep one to be evicted). At half
        // the frames, an index taking ~60 % of a 26-32 MiB cache (the tier bench's TATP) let
        // sets fill with dirty index pages and misses stall 10 s (`MissTimeout`).
        let dirty_index_pages_max = (setup.cache.data_frames() as usize / 4).max(16);
        Self {
            cache: setup.cache,
            hash_key: origin.hash_key,
            opened_from: Mutex::new(setup.existing),
            sb_lock: YieldLock(AtomicBool::new(false)),
            sb_page: AtomicU64::new(origin.sb_page),
            sb_sequence: AtomicU64::new(origin.sb_sequence),
            max_value: setup.max_value,
            max_depth: setup.max_depth,
            fixed_depth: origin.fixed_depth,
            dir_segments: origin.dir_segments,
            stripe: setup.stripe,
            new_queue_pages: setup.queue_pages,
            space_start: space_start(dir_pages(origin.fixed_depth)),
            dir_pages: dir_pages(origin.fixed_depth),
            copies: setup.copies,
            ckpt: CheckpointLatch::new(),
            epoch: AtomicU64::new(origin.epoch),
            next_epoch: AtomicU64::new(setup.next_epoch),
            dirty: Mutex::new(Dirty::default()),
            freed_pages: AtomicU64::new(0),
            dirty_index_pages_max,
            checkpoint_stats: Mutex::new(checkpoint::CheckpointStats::default()),
            failed: Mutex::new(None),
            commit: Commit::new(setup.durability, origin.queues, origin.last_ts),
            locks: KeyLocks::new(setup.lock_timeout_ns),
            recovery: Mutex::new(RecoveryStats::default()),
            recovery_observer: setup.recovery_observer,
            global_depth: AtomicU32::new(0),
            split_lock: YieldLock(AtomicBool::new(false)),
            tree_locks: tree::tree_locks(),
            catalog: AtomicU64::new(0),
            catalog_durable: AtomicU64::new(0),
            catalog_lock: YieldLock(AtomicBool::new(false)),
            trees_dropped: AtomicBool::new(true),
            small: small::SmallValues::default(),
            set_pressure: AtomicBool::new(false),
            alloc: Mutex::new(Alloc {
                next_page: 0,
                free: FreeExtents::default(),
                open: None,
            }),
            key_count: AtomicU64::new(0),
            leaked_pages: AtomicU64::new(0),
            space: setup.space,
            closed: AtomicBool::new(false),
            active_ops: std::sync::atomic::AtomicUsize::new(0),
            read_only: false,
            sparse: crossbeam_queue::ArrayQueue::new(SPARSE_QUEUE),
            // The queue starts empty: the sparse pages a reopened store has are in its map.
            sparse_rescan: AtomicBool::new(true),
            pages_compacted: AtomicU64::new(0),
            records_moved: AtomicU64::new(0),
            hints_dropped: AtomicU64::new(0),
        }
    }

    /// Opens without writing anything (before [`Engine::load`]): no open mark, no flush at
    /// close; `put`/`delete` fail with [`DbError::ReadOnly`].
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    fn lock_dirty(&self) -> MutexGuard<'_, Dirty> {
        self.dirty.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops taking writes: the last checkpoint stays the store's crash point.
    fn fail(&self, why: String) {
        tracing::error!("{why}; the store takes no more writes: reopen it to recover");
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        // Wakes every write waiting for a group commit: it finds the store failed.
        self.commit.wake_waiters();
    }

    fn check_failed(&self) -> Result<(), DbError> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(why) => Err(DbError::Runtime(format!(
                "{why}; the store takes no more writes: reopen it to recover"
            ))),
        }
    }

    /// Enters a change of the index (a put, a delete, a compaction move): a checkpoint first
    /// if too many index pages are dirty, then the checkpoint latch, shared, until the guard
    /// drops, so that a checkpoint sees whole changes only.
    fn begin_change(&self) -> Result<checkpoint::SharedGuard<'_>, DbError> {
        self.checkpoint_if_over()?;
        let guard = self.ckpt.shared();
        self.check_failed()?;
        Ok(guard)
    }

    /// True when pages were freed since the last checkpoint (reusable after the next one).
    fn frees_pending(&self) -> bool {
        self.freed_pages.load(Ordering::Relaxed) > 0
    }

    fn lock_checkpoint_stats(&self) -> MutexGuard<'_, checkpoint::CheckpointStats> {
        self.checkpoint_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// What checkpoints did since open.
    pub fn checkpoint_stats(&self) -> checkpoint::CheckpointStats {
        let mut stats = *self.lock_checkpoint_stats();
        self.ckpt.waits.fill(&mut stats);
        stats
    }

    // --- open and close ---

    /// Creates or loads the store; marks it open (not clean) on the device.
    pub fn load(&self) -> Result<(), DbError> {
        let dir_pages = self.dir_pages;
        let existing = self
            .opened_from
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .map(|(sb, _)| sb);
        for i in 0..dir_pages {
            // The cache reads the current copy (`CopyState`).
            self.cache.pin_permanent(dir_page(dir_pages, i, 0))?;
        }
        if self.read_only && existing.is_none() {
            return Err(DbError::Config(
                "read-only open of a store that does not exist yet".into(),
            ));
        }
        match existing {
            None => self.create()?,
            Some(sb) => self.reopen(&sb)?,
        }
        if self.read_only {
            return Ok(());
        }
        // Marked open (not clean) from here on.
        self.checkpoint(false)
    }

    /// A new store's first pages: its first bucket (the first managed page), its staging
    /// queues after it, and the directory naming the bucket.
    fn create(&self) -> Result<(), DbError> {
        let bucket = self.alloc_bucket()?;
        let queues = u64::from(self.commit.queues());
        let limit_pages = match &self.space {
            Space::Fixed { capacity_bytes } => capacity_bytes / PAGE_SIZE_BYTES,
            Space::File { max_bytes, .. } => {
                max_bytes.map_or(u64::MAX, |bytes| bytes / PAGE_SIZE_BYTES)
            }
        };
        let per_queue = self
            .new_queue_pages
            .unwrap_or_else(|| (limit_pages / 64 / queues).clamp(QUEUE_PAGES_MIN, QUEUE_PAGES_MAX));
        assert!((QUEUE_PAGES_MIN..=QUEUE_PAGES_MAX).contains(&per_queue));
        self.commit.pages.store(per_queue, Ordering::Relaxed);
        let first = self.alloc_marked(queues * per_queue, MapKind::Queue, MapKind::Queue)?;
        self.commit
            .first
            .store(self.logical_of(first)?, Ordering::Relaxed);
        let b = self
            .cache
            .get_for_overwrite_as(bucket, PageClass::Index { set_key: 0 })?;
        self.dirty_bucket(bucket, 0);
        b.write(|bytes| init_bucket(bytes, 0, 0));
        drop(b);
        self.dir_set(0, bucket, 0)
    }

    /// An existing store, as of its last checkpoint `sb` (whether it was closed or crashed),
    /// with what its staging queues hold beyond it redone (unless read-only).
    fn reopen(&self, sb: &Superblock) -> Result<(), DbError> {
        if sb.max_depth != self.max_depth {
            return Err(DbError::Config(format!(
                "store created with max_directory_depth {}",
                sb.max_depth
            )));
        }
        if sb.global_depth > self.max_depth {
            return Err(corrupt(0, "directory depth beyond its maximum"));
        }
        self.global_depth.store(sb.global_depth, Ordering::Release);
        self.key_count.store(sb.key_count, Ordering::Relaxed);
        self.catalog.store(sb.catalog, Ordering::Release);
        self.catalog_durable.store(sb.catalog, Ordering::Release);
        // The last checkpoint, whether the store was closed or crashed: its map, high-water
        // mark and index are consistent (recovery is choosing the copies).
        self.lock_alloc().next_page = sb.next_page;
        self.load_free_extents(sb.next_page)?;
        self.commit.first.store(sb.queue_first, Ordering::Relaxed);
        self.commit
            .pages
            .store(u64::from(sb.queue_pages), Ordering::Relaxed);
        if !self.read_only {
            // Redo what the queues hold beyond the checkpoint; the checkpoint at the end of
            // `load` makes it the new crash point.
            let stats = self.recover_queues(sb)?;
            *self.recovery.lock().unwrap_or_else(|p| p.into_inner()) = stats;
            let asked = self.new_queue_pages;
            if let Some(pages) = asked.filter(|&p| p != u64::from(sb.queue_pages)) {
                self.resize_queues(pages)?;
            }
        }
        if !sb.clean && !self.read_only {
            tracing::warn!(
                "the store was not closed cleanly: opened at its last checkpoint (epoch {})",
                sb.epoch
            );
        }
        Ok(())
    }

    /// Moves the staging queues to a new region of `pages` pages each (an open that asks for
    /// another size). Only between recovery and the open's checkpoint: the queues hold nothing
    /// the store needs, and until that checkpoint is durable the last one still names the old
    /// region, whose pages are freed only after it (`free_pages`).
    fn resize_queues(&self, pages: u64) -> Result<(), DbError> {
        assert!((QUEUE_PAGES_MIN..=QUEUE_PAGES_MAX).contains(&pages));
        let queues = u64::from(self.commit.queues());
        let old_first = self.commit.first.load(Ordering::Relaxed);
        let old_pages = self.commit.pages();
        let new = self.alloc_marked(queues * pages, MapKind::Queue, MapKind::Queue)?;
        self.free_pages(self.phys(old_first), queues * old_pages)?;
        self.commit
            .first
            .store(self.logical_of(new)?, Ordering::Relaxed);
        self.commit.pages.store(pages, Ordering::Relaxed);
        tracing::info!("staging queues resized from {old_pages} to {pages} pages each");
        Ok(())
    }

    /// A checkpoint: everything done so far is durable, and is what the store reopens with
    /// after a crash. Another (read-only) opener then sees it.
    pub fn flush(&self) -> Result<(), DbError> {
        let _op = self.check_open()?;
        if self.read_only {
            return Ok(());
        }
        self.checkpoint(false)
    }

    /// Clean close: seals the open data page, writes back every dirty page (the map with
    /// them) and the superblock marked clean, and syncs. Later calls fail with [`DbError::Closed`].
    pub fn close(&self) -> Result<(), DbError> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Err(DbError::Closed);
        }
        // Operations that got past `enter` before the flag was set finish first: an allocation
        // after the final flush would not be on the device.
        let deadline = std::time::Instant::now() + CLOSE_WAIT;
        while self.active_ops.load(Ordering::SeqCst) > 0 {
            if std::time::Instant::now() > deadline {
                return Err(DbError::Runtime(format!(
                    "close: {} operations still running after {CLOSE_WAIT:?}",
                    self.active_ops.load(Ordering::SeqCst)
                )));
            }
            thread::yield_now();
        }
        if self.read_only {
            return Ok(());
        }
        let open = self.lock_alloc().open.take();
        if let Some(open) = open {
            let _s = self.ckpt.shared();
            self.close_page(open)?;
        }
        // The last checkpoint, marked clean.
        self.checkpoint(true)
    }

    /// [`Engine::check_open`] for the crate's other modules.
    pub(crate) fn check_open_pub(&self) -> Result<OpGuard<'_>, DbError> {
        self.check_open()
    }

    /// When writes are acknowledged.
    pub fn durability(&self) -> Durability {
        self.commit.mode
    }

    /// What recovery from the staging queues redid at open.
    pub fn recovery_stats(&self) -> RecoveryStats {
        *self.recovery.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one operation: counted until the guard drops, so that `close` can wait for it.
    fn check_open(&self) -> Result<OpGuard<'_>, DbError> {
        if !thread::in_user_thread() {
            return Err(DbError::NotInUserThread);
        }
        self.active_ops.fetch_add(1, Ordering::SeqCst);
        let guard = OpGuard(self);
        if self.closed.load(Ordering::SeqCst) {
            return Err(DbError::Closed);
        }
        Ok(guard)
    }

    fn check_key(&self, key: &[u8]) -> Result<OpGuard<'_>, DbError> {
        let guard = self.check_open()?;
        check_sizes(key, None, self.max_value)?;
        Ok(guard)
    }

    pub fn len(&self) -> u64 {
        self.key_count.load(Ordering::Relaxed)
    }
}

//! The public face: [`Db`] (owns a runtime; blocking calls for ordinary threads) and
//! [`DbHandle`] (calls from tamer user-level threads).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tamer_cache::{CacheConfig, CacheStats, PageCache, BATCH, PAGE_SIZE};
use tamer_device::EmulatorModel;
use tamer_runtime::io::WaitMode;
use tamer_runtime::{thread, IdleMode, Job, Policy, Runtime, RuntimeConfig, SpawnError};

use crate::copies::CopyState;
use crate::device::{DeviceKind, Layout, RawPages};
use crate::engine::{
    check_sizes, is_data_page, CheckReport, CheckpointStats, CommitStats, CompactionStats,
    Durability, Engine, EngineSetup, RecoveryObserver, RecoveryProgress, RecoveryStats, Tx,
    WriteBatch, SPARSE_QUEUE,
};
use crate::layout::{dir_pages, Superblock, DIR_START, SUPERBLOCK_COPIES};
use crate::layout::{QUEUE_PAGES_MAX, QUEUE_PAGES_MIN};
use crate::{DbError, MAX_DIRECTORY_DEPTH};

/// Default largest value: 16 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 16 << 20;
/// Default directory depth bound: the largest, 2^30 slots (nothing is reserved for it: the
/// directory grows in segments past its fixed region).
pub const DEFAULT_DIRECTORY_DEPTH: u32 = MAX_DIRECTORY_DEPTH;
/// Default depth of the directory's fixed, pinned region: 2^16 slots (512 KiB, 129 pages
/// per copy).
pub const DEFAULT_PINNED_DIRECTORY_DEPTH: u32 = 16;

/// How to open a [`Db`].
#[derive(Clone, Debug)]
pub struct DbOptions {
    /// The store's whole DRAM budget for pages, in bytes (a multiple of 4096): the pinned
    /// superblock and directory first, the rest in evictable frames (whole 8-way sets of 32
    /// KiB) that the store shares between index pages (hash buckets, kept ahead of data
    /// pages while they fit) and data pages. See [`Db::index_stats`] for the split.
    pub cache_bytes: u64,
    /// What the store lives on (default [`DeviceKind::Uring`] on the file at the path).
    pub device: DeviceKind,
    /// Executors (OS threads).
    pub cores: usize,
    /// User-level threads per core.
    pub threads_per_core: usize,
    /// Pin each executor to a CPU.
    pub pin: bool,
    /// Largest value (default 16 MiB); at most 1 GiB.
    pub max_value_bytes: usize,
    /// File size at creation (file devices); the file grows on demand from there.
    pub initial_file_bytes: u64,
    /// Largest the file may grow to (`None`: until the disk or RLIMIT_FSIZE says no).
    pub max_file_bytes: Option<u64>,
    /// The directory holds up to 2^depth bucket pointers (8 bytes each): the index's limit,
    /// about 2^depth × 255 keys. Fixed when the store is created; 4..=30, default 30.
    pub max_directory_depth: u32,
    /// The directory's first 2^depth slots live in a fixed region pinned in DRAM (8 bytes
    /// each, reserved on the device at creation); past it the directory grows in segments
    /// allocated from the store's space and cached as index pages. Fixed when the store is
    /// created; 0..=30 (at most `max_directory_depth`), default 16.
    pub pinned_directory_depth: u32,
    /// Pages (4 KiB) of each core's staging queue: [`QUEUE_PAGES_MIN`]..=[`QUEUE_PAGES_MAX`].
    /// `None` (default): a new store's are 1/64 of the device's (or `max_file_bytes`') pages
    /// shared by the queues, clamped to that range; an existing store keeps its own. A size
    /// that differs from an existing store's moves its queues to a new region at open (after
    /// recovery, before the open's checkpoint). A queue restarts at every checkpoint; half
    /// full, it asks for one; a transaction that finds it full is not staged (an overflow:
    /// durable with the next checkpoint).
    pub staging_queue_pages: Option<u64>,
    /// Told of recovery's progress at open, at every queue page and every 64 commit records
    /// (`None`, the default: only log lines, every second past the first). `tamer recover`
    /// draws a progress bar with it once recovery has taken a second.
    pub recovery_progress: Option<RecoveryObserver>,
    /// The runtime's scheduling policy (default [`Policy::PriorityAging`], AstriFlash).
    pub policy: Policy,
    /// How a thread waits for its own miss: [`WaitMode::Park`] (default, switch-on-miss) or
    /// [`WaitMode::Spin`] (a miss blocks the core: the `flash-sync` baseline).
    pub miss_wait: WaitMode,
    /// How an idle core waits for the device (default [`IdleMode::Block`]).
    pub idle: IdleMode,
    /// How long an idle core spins before it parks its OS thread, and a core waiting only for
    /// the device polls before it blocks in the kernel (`RuntimeConfig::idle_spin_ns`; default
    /// 200 µs). Longer trades idle CPU for fewer slow OS wake-ups at low load.
    pub idle_spin: Duration,
    /// One background cleaner per core (default on): a user-level thread that writes back
    /// dirty pages the CLOCK would evict next, so that misses find clean victims and do not
    /// wait for a write-back before their read. It takes one of each core's threads.
    pub cleaner: bool,
    /// Open an existing store without writing anything to it (no open mark, no flush at close,
    /// no cleaner); `put` and `delete` fail with [`DbError::ReadOnly`]. Default off.
    pub read_only: bool,
    /// Read every bucket page into the cache at open when the index fits its share
    /// ([`IndexStats::fits`]), so that the first lookups already cost one device read each
    /// (default on). Off, buckets come in on their first use.
    pub warm_index: bool,
    /// The index hash's key for a *new* store (an existing store keeps its own). `None`
    /// (default): 128 random bits, which is what a server must use, or clients could craft
    /// keys that share a bucket. A fixed key gives reproducible bucket layouts, for tests and
    /// benchmarks that compare configurations on identical indexes.
    pub hash_key: Option<[u64; 2]>,
    /// When a write returns: once durable ([`Durability::Commit`], the default), or before
    /// (`Periodic`, `None`; a crash then loses the last writes but keeps a prefix).
    pub durability: Durability,
    /// How long an operation waits for key locks that other transactions hold, over all its
    /// retries, before it fails (a transaction or batch with [`DbError::Conflict`], a single
    /// put or delete with [`DbError::Runtime`]); default 10 s. As SQLite's `busy_timeout` or
    /// InnoDB's `innodb_lock_wait_timeout`: it bounds the wait on a transaction that does not
    /// finish.
    pub lock_timeout: Duration,
}

/// The index (hash buckets) and how the DRAM budget is split, from [`Db::index_stats`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexStats {
    /// Keys stored.
    pub keys: u64,
    /// Bucket pages.
    pub buckets: u64,
    /// The pinned partition: the directory (never evicted), bytes.
    pub pinned_bytes: u64,
    /// Bucket pages + directory, bytes: what a DRAM-resident index costs.
    pub index_bytes: u64,
    /// Evictable frames (index + data), bytes: `cache_bytes - pinned_bytes`, whole sets.
    pub frames_bytes: u64,
    /// Most bucket pages the cache keeps ahead of data pages (`index_ways_max` per set).
    pub index_capacity_pages: u64,
    /// Sets holding more bucket pages than their `index_ways_max` (a bucket's set is its
    /// pattern modulo the sets; buckets of different depths load sets unevenly).
    pub index_sets_over: u64,
    /// Bucket pages that can be resident together: per set, its bucket pages up to its
    /// `index_ways_max` (all of them when the index [`fits`](Self::fits)). What the warm-up at
    /// open reads.
    pub placeable_index_pages: u64,
    /// Bucket pages resident now.
    pub resident_index_pages: u64,
}

impl IndexStats {
    /// Index bytes per key stored (bucket pages and directory; 0 for an empty store).
    pub fn bytes_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.index_bytes as f64 / self.keys as f64
        }
    }

    /// True when every bucket page can stay resident ahead of data pages: no set holds more
    /// bucket pages than its index ways.
    pub fn fits(&self) -> bool {
        self.buckets <= self.index_capacity_pages && self.index_sets_over == 0
    }

    /// Bytes of resident data pages' frames: the evictable frames not holding index pages.
    pub fn data_frames_bytes(&self) -> u64 {
        self.frames_bytes
            .saturating_sub(self.resident_index_pages * PAGE_SIZE as u64)
    }
}

impl DbOptions {
    /// `cache_bytes` of cache on an io_uring file; 1 core, 64 threads, defaults otherwise.
    pub fn new(cache_bytes: u64) -> Self {
        Self {
            cache_bytes,
            device: DeviceKind::Uring,
            cores: 1,
            threads_per_core: 64,
            pin: false,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            initial_file_bytes: 16 << 20,
            max_file_bytes: None,
            max_directory_depth: DEFAULT_DIRECTORY_DEPTH,
            pinned_directory_depth: DEFAULT_PINNED_DIRECTORY_DEPTH,
            staging_queue_pages: None,
            recovery_progress: None,
            policy: Policy::PriorityAging,
            miss_wait: WaitMode::Park,
            idle: IdleMode::Block,
            idle_spin: Duration::from_nanos(RuntimeConfig::default().idle_spin_ns),
            cleaner: true,
            read_only: false,
            warm_index: true,
            hash_key: None,
            durability: Durability::Commit,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }

    /// Sets `DbOptions::device`.
    pub fn device(mut self, device: DeviceKind) -> Self {
        self.device = device;
        self
    }
    /// Sets `DbOptions::cores`.
    pub fn cores(mut self, cores: usize) -> Self {
        self.cores = cores;
        self
    }
    /// Sets `DbOptions::threads_per_core`.
    pub fn threads_per_core(mut self, threads: usize) -> Self {
        self.threads_per_core = threads;
        self
    }
    /// Sets `DbOptions::pin`.
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }
    /// Sets `DbOptions::max_value_bytes`.
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes;
        self
    }
    /// Sets `DbOptions::initial_file_bytes`.
    pub fn initial_file_bytes(mut self, bytes: u64) -> Self {
        self.initial_file_bytes = bytes;
        self
    }
    /// Sets `DbOptions::max_file_bytes`.
    pub fn max_file_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_file_bytes = bytes;
        self
    }
    /// Sets `DbOptions::max_directory_depth`.
    pub fn max_directory_depth(mut self, depth: u32) -> Self {
        self.max_directory_depth = depth;
        self
    }
    /// Sets `DbOptions::pinned_directory_depth`.
    pub fn pinned_directory_depth(mut self, depth: u32) -> Self {
        self.pinned_directory_depth = depth;
        self
    }
    /// Sets `DbOptions::staging_queue_pages`.
    pub fn staging_queue_pages(mut self, pages: Option<u64>) -> Self {
        self.staging_queue_pages = pages;
        self
    }
    /// Calls `f` as recovery at open progresses (see [`DbOptions::recovery_progress`]).
    ///
    /// ```
    /// use tamer_store::{DbOptions, RecoveryPhase};
    /// let options = DbOptions::new(8 << 20).on_recovery_progress(|p| {
    ///     if p.phase == RecoveryPhase::Redoing {
    ///         eprintln!("redone {} of {} commit records", p.done, p.total);
    ///     }
    /// });
    /// assert!(options.recovery_progress.is_some());
    /// ```
    pub fn on_recovery_progress(
        mut self,
        f: impl Fn(&RecoveryProgress) + Send + Sync + 'static,
    ) -> Self {
        self.recovery_progress = Some(RecoveryObserver(Arc::new(f)));
        self
    }
    /// Sets `DbOptions::policy`.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// Sets `DbOptions::miss_wait`.
    pub fn miss_wait(mut self, mode: WaitMode) -> Self {
        self.miss_wait = mode;
        self
    }
    /// Sets `DbOptions::idle`.
    pub fn idle(mut self, idle: IdleMode) -> Self {
        self.idle = idle;
        self
    }
    /// Sets `DbOptions::idle_spin`.
    pub fn idle_spin(mut self, spin: Duration) -> Self {
        self.idle_spin = spin;
        self
    }
    /// Sets `DbOptions::cleaner`.
    pub fn cleaner(mut self, on: bool) -> Self {
        self.cleaner = on;
        self
    }
    /// Sets `DbOptions::read_only`.
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }
    /// Sets `DbOptions::warm_index`.
    pub fn warm_index(mut self, on: bool) -> Self {
        self.warm_index = on;
        self
    }
    /// See [`DbOptions::hash_key`].
    pub fn hash_key(mut self, key: [u64; 2]) -> Self {
        self.hash_key = Some(key);
        self
    }
    /// See [`DbOptions::durability`].
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
    /// See [`DbOptions::lock_timeout`].
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }
}

impl DbOptions {
    /// Refuses out-of-range options before anything is opened.
    fn validate(&self) -> Result<(), DbError> {
        if self.max_value_bytes > 1 << 30 {
            return Err(DbError::Config("max_value_bytes: at most 1 GiB".into()));
        }
        for (name, depth, min) in [
            ("max_directory_depth", self.max_directory_depth, 4),
            ("pinned_directory_depth", self.pinned_directory_depth, 0),
        ] {
            if !(min..=MAX_DIRECTORY_DEPTH).contains(&depth) {
                return Err(DbError::Config(format!(
                    "{name} {depth}: must be {min}..={MAX_DIRECTORY_DEPTH}"
                )));
            }
        }
        if let Some(pages) = self.staging_queue_pages {
            if !(QUEUE_PAGES_MIN..=QUEUE_PAGES_MAX).contains(&pages) {
                return Err(DbError::Config(format!(
                    "staging_queue_pages {pages}: must be {QUEUE_PAGES_MIN}..={QUEUE_PAGES_MAX}"
                )));
            }
        }
        Ok(())
    }

    /// The runtime the store runs on.
    fn runtime_config(&self) -> RuntimeConfig {
        RuntimeConfig {
            cores: self.cores,
            pin: self.pin,
            policy: self.policy,
            idle: self.idle,
            idle_spin_ns: self.idle_spin.as_nanos().min(u128::from(u64::MAX)) as u64,
            ..RuntimeConfig::with_threads(self.threads_per_core)
        }
    }
}

/// Default [`DbOptions::lock_timeout`].
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest time between checkpoints while the store changes (with the cleaner on): what a
/// crash loses at most, besides the writes of the checkpoint in progress.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// Sets one cleaner pass scans (of the sets its core takes).
const CLEAN_SETS_PER_PASS: usize = 64;
/// Pause of a cleaner whose pass found nothing to write.
const CLEAN_IDLE_PAUSE: Duration = Duration::from_micros(200);
/// Longest pause of a cleaner that keeps finding nothing to write (an idle or read-only store).
const CLEAN_IDLE_MAX_PAUSE: Duration = Duration::from_millis(10);

/// The pause after the `empty`-th empty pass in a row, when `sweep` passes cover the core's
/// sets: `CLEAN_IDLE_PAUSE` for the first sweep, then doubling up to `CLEAN_IDLE_MAX_PAUSE`.
fn idle_pause(empty: usize, sweep: usize) -> Duration {
    let doublings = empty.saturating_sub(sweep).min(16) as u32;
    CLEAN_IDLE_PAUSE
        .saturating_mul(1 << doublings)
        .min(CLEAN_IDLE_MAX_PAUSE)
}

/// Sparse data pages one cleaner pass compacts at most (each moves ≤ 1 KiB of live records).
const COMPACT_PAGES_PER_PASS: usize = 4;

/// Pause of a cleaner whose pass wrote less than a full batch (candidates are scarce: let
/// them accumulate rather than rescan).
const CLEAN_BUSY_PAUSE: Duration = Duration::from_micros(50);
/// Pause of a cleaner after a failed write-back (the page stays dirty; flush reports it).
const CLEAN_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// The background cleaners of one Db: a stop flag and how many still run.
struct Cleaners {
    stop: Arc<AtomicBool>,
    running: Arc<AtomicUsize>,
}

impl Cleaners {
    /// Starts one cleaner per core on `runtime`.
    fn start(runtime: &Runtime, engine: &Arc<Engine>, cores: usize) -> Result<Self, DbError> {
        let cleaners = Cleaners {
            stop: Arc::new(AtomicBool::new(false)),
            running: Arc::new(AtomicUsize::new(0)),
        };
        for core in 0..cores {
            let (engine, stop, running) = (
                engine.clone(),
                cleaners.stop.clone(),
                cleaners.running.clone(),
            );
            running.fetch_add(1, Ordering::AcqRel);
            let spawned = runtime.spawn_on(core, move || {
                Cleaner::new(core, cores, engine).run(&stop);
                running.fetch_sub(1, Ordering::AcqRel);
            });
            if let Err(err) = spawned {
                cleaners.running.fetch_sub(1, Ordering::AcqRel);
                cleaners.stop_and_wait();
                return Err(DbError::Runtime(format!("starting the cleaner: {err}")));
            }
        }
        Ok(cleaners)
    }

    /// Stops the cleaners and waits (at most 10 s) until none runs.
    fn stop_and_wait(&self) {
        self.stop.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.running.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// One core's cleaner, a job on that core: each pass compacts sparse pages under space
/// pressure, keeps a crash's loss bounded (core 0: periodic group commit and checkpoints) and
/// writes back dirty frames the CLOCK would evict next, then pauses.
struct Cleaner {
    core: usize,
    cores: usize,
    engine: Arc<Engine>,
    cache: Arc<PageCache>,
    /// Passes that cover this core's share of the sets once.
    sweep: usize,
    /// Where the next pass's scan of the sets starts.
    cursor: usize,
    /// Empty passes in a row: after a whole empty sweep the pause doubles per pass up to
    /// `CLEAN_IDLE_MAX_PAUSE`, so an idle store's core can sleep.
    empty: usize,
    last_checkpoint: Instant,
    last_sync: Instant,
}

impl Cleaner {
    /// The cleaner of core `core` of `cores`.
    fn new(core: usize, cores: usize, engine: Arc<Engine>) -> Self {
        let cache = engine.cache.clone();
        Self {
            core,
            cores,
            sweep: (cache.sets() as usize).div_ceil(cores * CLEAN_SETS_PER_PASS),
            engine,
            cache,
            cursor: core,
            empty: 0,
            last_checkpoint: Instant::now(),
            last_sync: Instant::now(),
        }
    }

    /// Runs passes until `stop` is set.
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            let compacted = self.compact();
            self.bound_loss();
            self.write_back(compacted);
        }
    }

    /// Under space pressure, sparse data pages first (their moves dirty the open page, which
    /// this pass or a later one writes back); on core 0, a batch of dropped trees reclaimed.
    /// After close begins, nothing is taken. Returns the pages compacted and reclaimed.
    fn compact(&self) -> usize {
        let engine = &self.engine;
        let budget = if engine.space_pressure() {
            COMPACT_PAGES_PER_PASS
        } else {
            0
        };
        let mut compacted = match engine.compact_some(budget) {
            Ok(n) => n,
            Err(DbError::Closed) => 0,
            Err(err) => {
                tracing::warn!(core = self.core, "compaction failed: {err}");
                0
            }
        };
        if self.core == 0 {
            compacted += match engine.reclaim_trees() {
                Ok(n) => n as usize,
                Err(DbError::Closed) => 0,
                Err(err) => {
                    tracing::warn!("reclaiming dropped trees failed: {err}");
                    0
                }
            };
        }
        compacted
    }

    /// Core 0's cleaner bounds what a crash loses: with `Durability::Periodic`, staged writes
    /// made durable at least that often; a checkpoint at least every `CHECKPOINT_INTERVAL`
    /// while anything changed, and at once past a bound (a cache set nearly full of dirty
    /// index pages, which a reader may be waiting on).
    fn bound_loss(&mut self) {
        let engine = &self.engine;
        if let Durability::Periodic(every) = engine.durability() {
            if self.core == 0 && self.last_sync.elapsed() >= every {
                match engine.sync() {
                    Ok(()) | Err(DbError::Closed) => {}
                    Err(err) => tracing::warn!("periodic group commit failed: {err}"),
                }
                self.last_sync = Instant::now();
            }
        }
        let due = self.last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL;
        if self.core == 0 && (due || engine.over_bounds()) {
            match engine.checkpoint_if_dirty() {
                Ok(()) | Err(DbError::Closed) => {}
                Err(err) => tracing::warn!("periodic checkpoint failed: {err}"),
            }
            self.last_checkpoint = Instant::now();
        }
    }

    /// Writes back a batch of likely victims, then pauses by how much the pass found to do
    /// (`compacted` pages counted as work done).
    fn write_back(&mut self, compacted: usize) {
        let result = self
            .cache
            .clean_some(&mut self.cursor, self.cores, CLEAN_SETS_PER_PASS, BATCH)
            .map(|written| written + compacted);
        self.empty = if matches!(result, Ok(0)) {
            self.empty + 1
        } else {
            0
        };
        match result {
            Ok(0) => thread::sleep(idle_pause(self.empty, self.sweep)),
            Ok(n) if n < BATCH => thread::sleep(CLEAN_BUSY_PAUSE),
            Ok(_) => thread::yield_now(),
            Err(err) => {
                tracing::warn!(core = self.core, "background write-back failed: {err}");
                thread::sleep(CLEAN_ERROR_PAUSE);
            }
        }
    }
}

/// A store bound to its runtime. Blocking calls run as jobs on the runtime and wait for them;
/// code already on a tamer user-level thread uses [`Db::handle`].
pub struct Db {
    engine: Arc<Engine>,
    runtime: Option<Runtime>,
    cleaners: Option<Cleaners>,
    model: Option<Arc<EmulatorModel>>,
    path: PathBuf,
}

/// The store as seen from tamer user-level threads (jobs on [`Db::runtime`]): every method
/// may park the calling thread on a cache miss. Outside a user-level thread they fail with
/// [`DbError::NotInUserThread`]. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct DbHandle {
    engine: Arc<Engine>,
}

/// What the superblock copies say at open.
enum Found {
    /// The current superblock (the valid copy with the higher sequence) and its page.
    Store(Superblock, u64),
    /// Nothing written yet: a new store.
    Nothing,
    /// One copy torn and the other never written: the store's very first checkpoint did not
    /// complete (a crash while creating it), so nothing was ever durable: a new store, whose
    /// epochs must start above those the torn attempt left on the device.
    FirstCheckpointTorn,
}

/// The current superblock and its page, from the copies read at open: the valid copy with the
/// higher sequence. A copy whose checksum fails (a torn write) is passed over; a copy with a
/// valid checksum that is not a superblock of this version refuses the open (another format
/// or another program's file).
fn choose_superblock(pages: &[Option<Vec<u8>>]) -> Result<Found, DbError> {
    let mut best: Option<(Superblock, u64)> = None;
    let mut torn = Vec::new();
    let mut written = 0;
    for (copy, page) in pages.iter().enumerate() {
        let copy = copy as u64;
        let Some(page) = page else { continue };
        if page.iter().any(|&b| b != 0) {
            written += 1;
        }
        if !tamer_cache::checksum::verify_page(copy, page) {
            torn.push(copy);
            continue;
        }
        if let Some(sb) = Superblock::decode(page).map_err(DbError::Config)? {
            if best.as_ref().is_none_or(|(b, _)| sb.sequence > b.sequence) {
                best = Some((sb, copy));
            }
        }
    }
    match (best, torn.as_slice()) {
        (Some((sb, copy)), torn) => {
            if !torn.is_empty() {
                tracing::warn!(
                    "superblock copy {torn:?} fails its checksum (a torn write?): using copy \
                     {copy}, sequence {}",
                    sb.sequence
                );
            }
            Ok(Found::Store(sb, copy))
        }
        (None, []) => Ok(Found::Nothing),
        (None, torn) if torn.len() == 1 && written == 1 => {
            tracing::warn!(
                "the store's first checkpoint did not complete (superblock copy {} torn, the \
                 other never written): nothing in it was durable; starting it anew",
                torn[0]
            );
            Ok(Found::FirstCheckpointTorn)
        }
        (None, torn) => Err(DbError::Corrupt {
            page: torn[0],
            detail: "no valid superblock copy: every copy fails its checksum".into(),
        }),
    }
}

/// Reads the superblock copies: the current superblock and its page, if a store is there,
/// and whether its very first checkpoint was torn (a new store then).
fn find_store(raw: &RawPages) -> Result<(Option<(Superblock, u64)>, bool), DbError> {
    let superblocks = (0..SUPERBLOCK_COPIES)
        .map(|copy| raw.read(copy).map(Some))
        .collect::<Result<Vec<_>, _>>()?;
    let found = choose_superblock(&superblocks)?;
    let first_torn = matches!(found, Found::FirstCheckpointTorn);
    let existing = match found {
        Found::Store(sb, page) => Some((sb, page)),
        Found::Nothing | Found::FirstCheckpointTorn => None,
    };
    Ok((existing, first_torn))
}

/// Recovery's first step: which copy of each index page the last checkpoint wrote (for a new
/// store, copy 0 of the `fixed_depth` directory), and the next checkpoint's epoch.
fn recover_copies(
    existing: Option<&(Superblock, u64)>,
    layout: &Layout,
    raw: &RawPages,
    fixed_depth: u32,
    first_torn: bool,
) -> Result<(CopyState, u64), DbError> {
    if let Some((sb, _)) = existing {
        if (sb.stripe_parts, sb.stripe_unit) != (layout.parts(), layout.unit_blocks()) {
            return Err(DbError::Config(format!(
                "the store is striped over {} parts in units of {} pages; opened with {} parts \
                 in units of {}",
                sb.stripe_parts,
                sb.stripe_unit,
                layout.parts(),
                layout.unit_blocks()
            )));
        }
        return crate::copies::recover(sb, |page| raw.read(page));
    }
    let state = CopyState::new(
        fixed_depth,
        vec![0; dir_pages(fixed_depth) as usize],
        vec![],
    );
    let next_epoch = if first_torn {
        1 + crate::copies::max_epoch_written(fixed_depth, |page| raw.read(page))?
    } else {
        1
    };
    Ok((state, next_epoch))
}

/// The store's page cache: the `fixed_depth` directory pinned, the rest of `cache_bytes` in
/// evictable frames, page addresses from `copies`.
fn open_cache(
    options: &DbOptions,
    fixed_depth: u32,
    copies: &Arc<CopyState>,
) -> Result<Arc<PageCache>, DbError> {
    let pinned_bytes = dir_pages(fixed_depth) * PAGE_SIZE as u64;
    let frames_bytes = options
        .cache_bytes
        .checked_sub(pinned_bytes)
        .filter(|&rest| rest >= 8 * PAGE_SIZE as u64)
        .ok_or_else(|| {
            DbError::Config(format!(
                "cache_bytes = {}: must hold the pinned directory ({pinned_bytes} bytes at \
                 pinned_directory_depth {fixed_depth}) and one 8-way set (32 KiB)",
                options.cache_bytes
            ))
        })?;
    let cache = PageCache::new(
        CacheConfig::new(frames_bytes)
            .pinned_bytes(pinned_bytes)
            .cores(options.cores)
            .checksum(true)
            .checksum_exempt(is_data_page)
            .addresses(copies.clone())
            .miss_wait(options.miss_wait),
    )
    .map_err(DbError::from)
    .map_err(|err| match err {
        DbError::Cache(tamer_cache::CacheError::Config(msg)) => DbError::Config(msg),
        other => other,
    })?;
    Ok(Arc::new(cache))
}

impl Db {
    /// Opens (creating if needed) the store at `path` (ignored for emulated devices).
    pub fn open(path: impl AsRef<Path>, options: DbOptions) -> Result<Db, DbError> {
        let path = path.as_ref().to_path_buf();
        options.validate()?;
        let layout = Layout::of(&path, &options.device)?;
        let model = layout.single_model();
        let raw = RawPages::open(&layout)?;
        let (existing, first_torn) = find_store(&raw)?;
        if options.read_only && existing.is_none() {
            return Err(DbError::Config(format!(
                "read-only open of {}: no tamer store there yet",
                path.display()
            )));
        }
        let (max_depth, fixed_depth) = existing.as_ref().map_or(
            (
                options.max_directory_depth,
                options
                    .pinned_directory_depth
                    .min(options.max_directory_depth),
            ),
            |(sb, _)| (sb.max_depth, sb.fixed_depth),
        );
        // The directory's fixed region; the superblock copies are written through evictable
        // frames.
        let pinned_pages = dir_pages(fixed_depth);
        let (copies, next_epoch) =
            recover_copies(existing.as_ref(), &layout, &raw, fixed_depth, first_torn)?;
        let copies = Arc::new(copies);
        let cache = open_cache(&options, fixed_depth, &copies)?;
        // Read-only: the files as they are, never grown.
        let initial_bytes = options
            .initial_file_bytes
            .max(PAGE_SIZE as u64 * (DIR_START + 2 * pinned_pages + 4));
        let (spec, space) =
            layout.open(initial_bytes, options.max_file_bytes, options.read_only)?;
        let runtime = Runtime::start(options.runtime_config(), spec, cache.arena())
            .map_err(DbError::Runtime)?;
        let mut engine = Engine::new(EngineSetup {
            cache,
            space,
            max_value: options.max_value_bytes,
            max_depth,
            fixed_depth,
            existing,
            new_hash_key: options.hash_key,
            copies,
            next_epoch,
            durability: options.durability,
            queues: options.cores as u32,
            queue_pages: options.staging_queue_pages,
            recovery_observer: options.recovery_progress.clone(),
            lock_timeout_ns: options.lock_timeout.as_nanos().min(u64::MAX as u128) as u64,
            stripe: (layout.parts(), layout.unit_blocks()),
        });
        if options.read_only {
            engine = engine.read_only();
        }
        let db = Db {
            engine: Arc::new(engine),
            runtime: Some(runtime),
            cleaners: None,
            model,
            path,
        };
        db.finish_open(&options)
    }

    /// The open's last steps on the running store: load (recover) it, read the index in, start
    /// the cleaners. A failure closes the store again.
    fn finish_open(mut self, options: &DbOptions) -> Result<Db, DbError> {
        if let Err(err) = self.run(|h| h.engine.load()).and_then(|loaded| loaded) {
            // The close fails for the open's reason (the store never opened): the open's
            // error says it, without a second warning from `Drop`.
            let _ = self.close_inner();
            return Err(err);
        }
        if options.warm_index {
            // Only a head start: a bucket it cannot read (corrupt, a device error) reports
            // that error to the operations that need it.
            if let Err(err) = self.warm_index(options.threads_per_core * options.cores) {
                tracing::warn!("reading the index in at open failed: {err}");
            }
        }
        if options.cleaner && !options.read_only {
            match Cleaners::start(self.runtime(), &self.engine, options.cores) {
                Ok(cleaners) => self.cleaners = Some(cleaners),
                Err(err) => {
                    let _ = self.close_inner();
                    return Err(err);
                }
            }
        }
        Ok(self)
    }

    /// Reads the bucket pages into the cache, every one when the index fits its share, else
    /// per set the first `index_ways_max` of its bucket pages (the others are paged in on
    /// use, in turn with them), with up to `threads / 2` jobs (at most 32) of [`BATCH`]
    /// overlapped reads each. Returns the pages read.
    fn warm_index(&self, threads: usize) -> Result<u64, DbError> {
        let all = self.run(|h| h.engine.buckets())??;
        let cache = &self.engine.cache;
        let buckets = Arc::new(placeable(&all, cache.sets(), cache.index_ways_max()));
        let jobs = (threads / 2).clamp(1, 32);
        let (tx, rx) = std::sync::mpsc::channel();
        for job in 0..jobs {
            let (buckets, tx, handle) = (buckets.clone(), tx.clone(), self.handle());
            let work = Job::new(move || {
                let stripe: Vec<(u64, u64)> =
                    buckets.iter().skip(job).step_by(jobs).copied().collect();
                let _ = tx.send(handle.engine.warm_buckets(&stripe));
            });
            spawn_retrying(self.runtime(), work)?;
        }
        drop(tx);
        let mut read = 0;
        for _ in 0..jobs {
            read += rx
                .recv()
                .map_err(|_| DbError::Runtime("an index warm-up job panicked".into()))??;
        }
        Ok(read)
    }

    /// The index's size and how the DRAM budget is split between the pinned directory, index
    /// pages and data pages.
    pub fn index_stats(&self) -> Result<IndexStats, DbError> {
        self.run(|h| h.index_stats())?
    }

    /// A handle for code on tamer user-level threads (jobs spawned on [`Db::runtime`]).
    pub fn handle(&self) -> DbHandle {
        DbHandle {
            engine: self.engine.clone(),
        }
    }

    /// The runtime the store's operations run on: spawn jobs that use [`Db::handle`].
    pub fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("open until close")
    }

    /// The emulator model under the store (to reopen it after `close`), if emulated.
    pub fn emulator_model(&self) -> Option<Arc<EmulatorModel>> {
        self.model.clone()
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The page cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.engine.cache.stats()
    }

    /// Keys stored.
    pub fn len(&self) -> u64 {
        self.engine.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on a user-level thread of the runtime and waits for its result. Retries while
    /// the runtime's job queue is full (up to 10 s).
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&DbHandle) -> R + Send + 'static,
    ) -> Result<R, DbError> {
        let runtime = self.runtime.as_ref().ok_or(DbError::Closed)?;
        let handle = self.handle();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let job = Job::new(move || {
            let _ = tx.send(f(&handle));
        });
        spawn_retrying(runtime, job)?;
        rx.recv()
            .map_err(|_| DbError::Runtime("the job ended without a result (it panicked?)".into()))
    }

    /// Verifies every checksum and structure of the store and reports what is wrong: the
    /// superblock's counts, every directory slot, every bucket (header, entries in the bucket's
    /// hash range), every record (where its entry says, its CRC, its key hashing to its entry,
    /// named once, its key stored once) and every map entry against what the index references
    /// (kinds, a data page's live bytes; pages in use that nothing references are counted as
    /// leaked). Reads the whole store; run it while nothing writes (`tamer check PATH` opens
    /// the store read-only). An error only when the check cannot go on (a device error).
    pub fn check(&self) -> Result<CheckReport, DbError> {
        self.run(|h| h.check())?
    }

    /// What checkpoints did since open: how many, the index pages they wrote, how long
    /// writers waited for them (see [`Db::flush`]).
    pub fn checkpoint_stats(&self) -> CheckpointStats {
        self.engine.checkpoint_stats()
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        let key = key.to_vec();
        self.run(move |h| h.get(&key))?
    }

    /// Stores `value` under `key` (replacing any value).
    /// An oversized key or value is refused before it is copied.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        check_sizes(key, Some(value), self.engine.max_value)?;
        let (key, value) = (key.to_vec(), value.to_vec());
        self.run(move |h| h.put(&key, &value))?
    }

    /// Removes `key`; true when it was there.
    pub fn delete(&self, key: &[u8]) -> Result<bool, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        let key = key.to_vec();
        self.run(move |h| h.delete(&key))?
    }

    /// True when `key` is stored (reads the key, not the value).
    pub fn contains(&self, key: &[u8]) -> Result<bool, DbError> {
        check_sizes(key, None, self.engine.max_value)?;
        let key = key.to_vec();
        self.run(move |h| h.contains(&key))?
    }

    /// Every (key, value), each key exactly once when no writes run concurrently, in hash
    /// order (unspecified to the caller). With concurrent writes a key written meanwhile may be
    /// missed or seen twice (a split moves keys between buckets); a key deleted meanwhile is
    /// skipped. Memory: the keys of one bucket (≤ 169) at a time.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            db: self,
            next: Some(0),
            keys: VecDeque::new(),
        }
    }

    /// A checkpoint: when it returns, every write made before the call is durable, and a
    /// crash from then on reopens the store with them (or with a later checkpoint's state);
    /// a read-only [`Db`] opened on the device sees them too. It writes the changed data pages,
    /// then each changed index page to its other copy, then the superblock, with a device
    /// flush after each step; writers wait for it (readers do not).
    pub fn flush(&self) -> Result<(), DbError> {
        self.run(|h| h.engine.flush())?
    }

    /// Runs `f` as a serializable transaction: reads and writes through `tx` see and change
    /// the store as if no other change ran meanwhile, and its writes are applied atomically
    /// (all or none, after a crash too). Each key is locked when first touched; when another
    /// transaction holds one, the attempt stops with [`DbError::Conflict`] (return it, with
    /// `?`, from `f`) and `f` runs again, up to [`crate::MAX_TX_ATTEMPTS`] times, so `f` must
    /// not have effects outside `tx`. Another error returned by `f` aborts it (nothing
    /// written). In [`Durability::Commit`] mode it returns once the transaction is durable.
    ///
    /// ```no_run
    /// # use tamer_store::{Db, DbOptions, DbError};
    /// # let db = Db::open("bank.tamer", DbOptions::new(64 << 20))?;
    /// db.transaction(|tx| {
    ///     let a: u64 = tx.get(b"alice")?.map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
    ///     tx.put(b"alice", &(a + 10).to_le_bytes())?;
    ///     Ok(())
    /// })?;
    /// # Ok::<(), DbError>(())
    /// ```
    pub fn transaction<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut Tx<'_>) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        self.run(move |h| h.transaction(f))?
    }

    /// Applies a batch of puts and deletes atomically (durable on return in `Commit` mode).
    pub fn write(&self, batch: WriteBatch) -> Result<(), DbError> {
        self.run(move |h| h.write(batch))?
    }

    /// Puts every (key, value) atomically: a [`WriteBatch`] of puts.
    pub fn put_many(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), DbError> {
        let mut batch = WriteBatch::new();
        for (k, v) in pairs {
            check_sizes(k, Some(v), self.engine.max_value)?;
            batch.put(k, v);
        }
        self.write(batch)
    }

    /// Makes every write so far durable (a group commit; in `None` mode a checkpoint), so a
    /// crash keeps them. Cheaper than [`Db::flush`], which also writes the index.
    pub fn sync(&self) -> Result<(), DbError> {
        self.run(|h| h.sync())?
    }

    /// What the staging queues and group commits did since open.
    pub fn commit_stats(&self) -> CommitStats {
        self.engine.commit_stats()
    }

    /// What recovery from the staging queues redid at open.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.engine.recovery_stats()
    }

    /// Compacts every data page queued as sparse (live bytes ≤ [`crate::COMPACT_LIVE_BYTES`]): their
    /// live records move to the open page and the pages are freed. The background cleaner does
    /// this a few pages per pass when space runs short (free pages and room below the end of the
    /// file under [`crate::COMPACT_RESERVE_MIN_PAGES`] or 1/8 of the pages in use); this call
    /// does it now, whatever the room (at most 4 × [`SPARSE_QUEUE`] pages).
    /// Returns the pages taken from the queue.
    pub fn compact(&self) -> Result<usize, DbError> {
        self.run(|h| h.engine.compact_some(4 * SPARSE_QUEUE))?
    }

    /// What compaction has done since open.
    pub fn compaction_stats(&self) -> CompactionStats {
        self.engine.compaction_stats()
    }

    /// Clean close: a last checkpoint marked clean, then the runtime stops.
    pub fn close(mut self) -> Result<(), DbError> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<(), DbError> {
        if self.runtime.is_none() {
            return Ok(());
        }
        if let Some(cleaners) = self.cleaners.take() {
            cleaners.stop_and_wait();
        }
        let result = self.run(|h| h.engine.close());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown();
        }
        match result {
            Ok(Err(DbError::Closed)) => Ok(()),
            Ok(other) => other,
            Err(err) => Err(err),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(err) = self.close_inner() {
            eprintln!("warning: closing the tamer store failed: {err}");
        }
    }
}

impl DbHandle {
    /// The largest value the store takes (`DbOptions::max_value_bytes`).
    pub fn max_value_bytes(&self) -> usize {
        self.engine.max_value
    }

    /// A checkpoint (see [`Db::flush`]), from a user-level thread.
    pub fn flush(&self) -> Result<(), DbError> {
        self.engine.flush()
    }

    /// The engine (the crate's own tests drive its internals through this).
    #[cfg(test)]
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
    /// See [`Db::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.engine.get(key)
    }
    /// Reads the index and record pages of `keys` into the cache with their misses
    /// overlapped ([`tamer_cache::BATCH`] at a time) and waits for them, so that operations
    /// on those keys run next without a miss each in turn. Best effort: a page that cannot be
    /// fetched is skipped (the operation reading it reports the cause). Returns the pages
    /// asked for; at most the first 1,024 keys count.
    pub fn prefetch(&self, keys: &[&[u8]]) -> Result<u64, DbError> {
        self.engine.prefetch(keys)
    }
    /// See [`Db::put`].
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.engine.put(key, value)
    }
    /// See [`Db::delete`].
    pub fn delete(&self, key: &[u8]) -> Result<bool, DbError> {
        self.engine.delete(key)
    }
    /// See [`Db::contains`].
    pub fn contains(&self, key: &[u8]) -> Result<bool, DbError> {
        self.engine.contains(key)
    }
    /// See [`Db::transaction`].
    pub fn transaction<T>(
        &self,
        f: impl FnMut(&mut Tx<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.engine.transaction(f)
    }
    /// See [`Db::write`].
    pub fn write(&self, batch: WriteBatch) -> Result<(), DbError> {
        self.engine.write_batch(batch)
    }
    /// See [`Db::sync`].
    pub fn sync(&self) -> Result<(), DbError> {
        let _op = self.engine.check_open_pub()?;
        self.engine.sync()
    }
    /// See [`Db::commit_stats`].
    pub fn commit_stats(&self) -> CommitStats {
        self.engine.commit_stats()
    }
    /// Keys stored.
    pub fn len(&self) -> u64 {
        self.engine.len()
    }
    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The keys of the next non-empty bucket at or after directory slot `start` (begin at 0)
    /// and the slot to continue from (`None`: done). See [`Db::cursor`] for the guarantees.
    pub fn scan_keys_from(&self, start: u64) -> Result<(Vec<Vec<u8>>, Option<u64>), DbError> {
        self.engine.scan_keys_from(start)
    }
    /// Verifies the whole store (see [`Db::check`]).
    pub fn check(&self) -> Result<CheckReport, DbError> {
        self.engine.check()
    }
    /// What checkpoints did since open (see [`Db::flush`]).
    pub fn checkpoint_stats(&self) -> CheckpointStats {
        self.engine.checkpoint_stats()
    }
    /// (high-water mark in pages, free pages, free extents, pages leaked by failed frees).
    pub fn space_stats(&self) -> (u64, u64, usize, u64) {
        let (next, free, extents) = self.engine.space_stats();
        (next, free, extents, self.engine.leaked_pages())
    }
    /// The page cache.
    pub fn cache(&self) -> &Arc<PageCache> {
        &self.engine.cache
    }
    /// See [`Db::index_stats`].
    pub fn index_stats(&self) -> Result<IndexStats, DbError> {
        let cache = &self.engine.cache;
        let patterns = self.engine.buckets()?;
        let buckets = patterns.len() as u64;
        let sets = cache.sets().max(1);
        let mut per_set = vec![0u32; sets as usize];
        for &(_, pattern) in &patterns {
            per_set[(pattern % u64::from(sets)) as usize] += 1;
        }
        let ways = cache.index_ways_max();
        let index_sets_over = per_set.iter().filter(|&&n| n > ways).count() as u64;
        let placeable_index_pages = per_set.iter().map(|&n| u64::from(n.min(ways))).sum();
        let pinned_bytes = u64::from(cache.pinned_frames()) * PAGE_SIZE as u64;
        let directory_bytes = pinned_bytes;
        Ok(IndexStats {
            keys: self.engine.len(),
            buckets,
            pinned_bytes,
            index_bytes: buckets * PAGE_SIZE as u64 + directory_bytes,
            frames_bytes: u64::from(cache.data_frames()) * PAGE_SIZE as u64,
            index_capacity_pages: u64::from(sets) * u64::from(ways),
            index_sets_over,
            placeable_index_pages,
            resident_index_pages: u64::from(cache.resident_index_frames()),
        })
    }
    /// Compacts up to `max_pages` queued sparse pages (see [`Db::compact`]); returns the pages
    /// taken from the queue.
    pub fn compact_some(&self, max_pages: usize) -> Result<usize, DbError> {
        self.engine.compact_some(max_pages)
    }
    /// What compaction has done since open.
    pub fn compaction_stats(&self) -> CompactionStats {
        self.engine.compaction_stats()
    }
}

/// Iterator of [`Db::cursor`].
pub struct Cursor<'a> {
    db: &'a Db,
    next: Option<u64>,
    keys: VecDeque<Vec<u8>>,
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), DbError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(key) = self.keys.pop_front() {
                match self.db.get(&key) {
                    Ok(Some(value)) => return Some(Ok((key, value))),
                    Ok(None) => continue,
                    Err(err) => {
                        self.next = None;
                        self.keys.clear();
                        return Some(Err(err));
                    }
                }
            }
            let start = self.next?;
            match self.db.run(move |h| h.scan_keys_from(start)) {
                Ok(Ok((keys, next))) => {
                    self.keys = keys.into();
                    self.next = next;
                }
                Ok(Err(err)) | Err(err) => {
                    self.next = None;
                    return Some(Err(err));
                }
            }
        }
    }
}

mod ordered;
pub use ordered::{prefix_end, TreeRange};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_pause_backs_off_after_one_empty_sweep() {
        for empty in 0..=32 {
            assert_eq!(idle_pause(empty, 32), CLEAN_IDLE_PAUSE, "pass {empty}");
        }
        assert_eq!(idle_pause(33, 32), CLEAN_IDLE_PAUSE * 2);
        assert_eq!(idle_pause(35, 32), CLEAN_IDLE_PAUSE * 8);
        assert_eq!(idle_pause(40, 32), CLEAN_IDLE_MAX_PAUSE);
        assert_eq!(idle_pause(usize::MAX, 1), CLEAN_IDLE_MAX_PAUSE);
    }
}

/// Spawns `job` on `runtime`, retrying every 50 µs while its queue is full, for up to 10 s.
fn spawn_retrying(runtime: &Runtime, mut job: Job) -> Result<(), DbError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match runtime.spawn_job(job) {
            Ok(()) => return Ok(()),
            Err(SpawnError::Full(back)) if Instant::now() < deadline => {
                job = back;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(err) => return Err(DbError::Runtime(err.to_string())),
        }
    }
}

/// Of `buckets` ((page, pattern) pairs, a bucket's set being its pattern modulo `sets`), the
/// first `ways` of each set's, in the given order: the bucket pages that can be resident
/// together.
fn placeable(buckets: &[(u64, u64)], sets: u32, ways: u32) -> Vec<(u64, u64)> {
    let sets = u64::from(sets.max(1));
    let mut per_set = vec![0u32; sets as usize];
    let mut out = Vec::with_capacity(buckets.len());
    for &(page, pattern) in buckets {
        let n = &mut per_set[(pattern % sets) as usize];
        if *n < ways {
            *n += 1;
            out.push((page, pattern));
        }
    }
    debug_assert!(out.len() as u64 <= sets * u64::from(ways));
    out
}

#[cfg(test)]
mod placeable_tests {
    use super::placeable;

    /// Catches: a set given more than its ways, a set that has room left out, or the set
    /// taken from the page number instead of the pattern.
    #[test]
    fn each_set_gets_at_most_its_ways_in_order() {
        // 2 sets, 2 ways: patterns 0, 2, 4 go to set 0; 1, 3 to set 1.
        let buckets = [(10, 0), (11, 1), (12, 2), (13, 3), (14, 4)];
        assert_eq!(
            placeable(&buckets, 2, 2),
            vec![(10, 0), (11, 1), (12, 2), (13, 3)]
        );
        assert_eq!(placeable(&buckets, 2, 3), buckets.to_vec());
        assert_eq!(placeable(&buckets, 1, 2), vec![(10, 0), (11, 1)]);
        assert!(placeable(&buckets, 2, 0).is_empty());
    }
}

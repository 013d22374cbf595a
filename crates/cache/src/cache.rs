//! The page cache: lookup, misses, eviction, the pinned partition, flush.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tamer_device::{now_ns, Arena, DeviceError, IoRequest, BLOCK_SIZE};
use tamer_runtime::io::WaitMode;
use tamer_runtime::{io, thread, Ticket};

use crate::evict::{self, Kind};
use crate::frame::{control, state_of, Frame, EMPTY, LOADING, NO_PAGE, READY, WRITEBACK};
use crate::sketch::FrequencySketch;
use crate::stats::{CacheStats, Counters, Histograms};
use crate::{CacheConfig, CacheError};

/// Device accesses one call (`get_many`, `flush`) keeps in flight at once. The runtime allows a
/// user-level thread 16 ([`tamer_runtime::MAX_OUTSTANDING_PER_THREAD`]); 8 leaves room for the
/// caller's own unwaited [`Prefetch`]es.
pub const BATCH: usize = 8;
/// Writes in flight at a time in [`PageCache::write_back_many`] (a user-level thread holds at
/// most 16 accesses).
pub const WRITE_BACK_BATCH: usize = 16;

/// Clean unreferenced frames per set the background cleaner keeps ready for misses
/// ([`PageCache::clean_some`]).
pub const CLEAN_VICTIMS_WANTED: usize = 2;
/// The most a dirty data page may have been asked for lately (the admission sketch's estimate)
/// for the cleaner to write it back ahead of its eviction.
pub const CLEAN_FREQUENCY_MAX: u8 = 2;

/// Largest page number: its byte offset must fit in a `u64`.
const MAX_PAGE: u64 = u64::MAX / BLOCK_SIZE as u64 - 1;

/// Per-set state guarded by the set lock (taken on the miss path only).
struct SetState {
    /// CLOCK hand: the next way to examine.
    hand: u32,
    /// The way of the data page installed last (`NO_WAY`: none): it is *probationary* until
    /// its first hit (its reference bit), and a data page that misses but is asked for no more
    /// often than the CLOCK's victim replaces it instead of that victim (TinyLFU admission).
    probation: u32,
}

/// No probationary way.
const NO_WAY: u32 = u32::MAX;

/// The pinned partition's directory: page → frame, insert-only, read without a lock.
struct PinnedDir {
    /// Frames handed out so far (the next free pinned frame is `data_frames + next`).
    next: Mutex<u32>,
    /// Open addressing: 0 = empty slot, else page + 1.
    keys: Box<[AtomicU64]>,
    frames: Box<[AtomicU32]>,
    used: AtomicU32,
}

impl PinnedDir {
    fn new(pinned_frames: u32) -> Self {
        let slots = if pinned_frames == 0 {
            0
        } else {
            (pinned_frames as usize * 2).next_power_of_two()
        };
        Self {
            next: Mutex::new(0),
            keys: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            frames: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            used: AtomicU32::new(0),
        }
    }

    #[inline]
    fn lookup(&self, page: u64) -> Option<u32> {
        if self.used.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mask = self.keys.len() - 1;
        let mut slot = mix(page) as usize & mask;
        loop {
            let key = self.keys[slot].load(Ordering::Acquire);
            if key == 0 {
                return None;
            }
            if key == page + 1 {
                return Some(self.frames[slot].load(Ordering::Relaxed));
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Inserts under the `next` lock; the table has twice as many slots as entries, so a free
    /// slot always exists.
    fn insert(&self, page: u64, frame: u32) {
        let mask = self.keys.len() - 1;
        let mut slot = mix(page) as usize & mask;
        while self.keys[slot].load(Ordering::Relaxed) != 0 {
            slot = (slot + 1) & mask;
        }
        self.frames[slot].store(frame, Ordering::Relaxed);
        self.keys[slot].store(page + 1, Ordering::Release);
        self.used.fetch_add(1, Ordering::Release);
    }
}

/// A 64-bit mixer (the multiplicative step of SplitMix64 plus a shift) so that strided page
/// numbers spread over the sets.
#[inline]
fn mix(page: u64) -> u64 {
    let x = page.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

/// How a page is placed in the cache and kept there.
///
/// A page must be used with one class from the moment it is (re)initialized with
/// `get_for_overwrite_as` until it is freed: the class decides which set holds it, and a page
/// looked up with another class than it was installed with is not found there (a second copy
/// would be read). Overwriting a page as an index page drops any copy cached as data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageClass {
    /// An ordinary page: its set is a hash of its page number; evicted by CLOCK.
    Data,
    /// An index page (a hash bucket): its set is `set_key % sets`, so a caller that numbers
    /// its index pages densely (a bucket's hash pattern) spreads them evenly over the sets;
    /// and a set evicts its index frames only when it holds more than
    /// [`CacheConfig::index_ways_max`] of them or has no data frame to give up
    /// (`crate::evict`). Every lookup of the page must pass the same `set_key`.
    Index {
        /// Chooses the page's set (`set_key % sets`).
        set_key: u64,
    },
}

impl PageClass {
    fn kind(self) -> Kind {
        match self {
            PageClass::Data => Kind::Data,
            PageClass::Index { .. } => Kind::Index,
        }
    }
}

/// How a lookup ended.
enum Start<'a> {
    /// Installed and pinned.
    Ready(PageRef<'a>),
    /// Another thread's read of the page is in flight (the frame is its miss-status entry).
    Merged { frame: u32 },
    /// This thread owns the miss: its read is in flight.
    Loading(Load),
    /// A non-blocking start found no free miss-status entry or no victim: nothing is held,
    /// retry with a blocking start.
    Deferred,
}

/// How [`PageCache::start`] looks a page up.
#[derive(Clone, Copy, Debug)]
struct Begin {
    /// Count a hit or a merged miss (false on the retries of one lookup).
    count_hit: bool,
    /// Wait (bounded) for a free miss-status entry or victim; otherwise return
    /// [`Start::Deferred`] holding nothing.
    blocking: bool,
    /// On a miss, install the frame zeroed without reading the device (an overwrite).
    zeroed: bool,
    /// Count the access in the frequency sketch (a data page's first pass only).
    touch: bool,
}

impl Begin {
    /// The first pass of a blocking lookup, counted (hit or miss, and in the sketch).
    fn counted(zeroed: bool) -> Self {
        Self {
            count_hit: true,
            blocking: true,
            zeroed,
            touch: true,
        }
    }

    /// The first pass of a blocking lookup whose hit path ([`PageCache::try_hit`]) already
    /// missed: counted, but already in the sketch.
    fn after_hit_missed() -> Self {
        Self {
            touch: false,
            ..Self::counted(false)
        }
    }
}

/// What [`PageCache::move_to_pinned`] did with the page's frame in the data partition.
enum ToPinned {
    /// No frame of the set holds the page.
    Absent,
    /// The page moved to the pinned frame; its data frame is empty.
    Moved,
    /// The frame holding it is claimed by another thread (a load, a write-back).
    Busy,
}

/// A miss owned by the calling thread.
struct Load {
    frame: u32,
    page: u64,
    /// The device page read (the page itself unless `CacheConfig::addresses` says otherwise).
    address: u64,
    ticket: Ticket,
    started_ns: u64,
}

enum Victim {
    /// Claimed as `LOADING|1`; `true` when it held a page (an eviction).
    Clean(u32, bool),
    /// Claimed as `WRITEBACK|0`: write it back, then retry.
    Dirty(u32),
    /// Every way is pinned or busy.
    None,
}

/// A DRAM page cache of 4 KiB frames over a block device, for tamer's user-level threads.
///
/// See the crate documentation for the design and the memory footprint. Share it between cores
/// with an `Arc`; every method takes `&self`.
pub struct PageCache {
    config: CacheConfig,
    arena: Arc<Arena>,
    /// Data frames (`0..data_frames`), then the pinned partition.
    frames: Box<[Frame]>,
    sets: Box<[Mutex<SetState>]>,
    set_count: u32,
    ways: u32,
    data_frames: u32,
    pinned_frames: u32,
    max_misses: usize,
    /// Index frames a set keeps ahead of its data frames ([`crate::evict`]).
    index_ways_max: u32,
    misses_in_flight: AtomicUsize,
    pinned: PinnedDir,
    /// How often each data page was asked for recently (admission, see `admit`).
    sketch: FrequencySketch,
    counters: Counters,
    histograms: Histograms,
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("sets", &self.set_count)
            .field("ways", &self.ways)
            .field("data_frames", &self.data_frames)
            .field("pinned_frames", &self.pinned_frames)
            .field("max_misses", &self.max_misses)
            .finish()
    }
}

impl PageCache {
    /// Validates `config` and allocates the arena (data frames, then the pinned partition) and
    /// the metadata.
    pub fn new(config: CacheConfig) -> Result<Self, CacheError> {
        let (sets, data_frames, pinned_frames) = config.validate()?;
        let arena = Arc::new(Arena::new(data_frames + pinned_frames)?);
        let total = data_frames + pinned_frames;
        let max_misses = config.max_misses.min(total as usize);
        Ok(Self {
            arena,
            frames: (0..total).map(|_| Frame::new()).collect(),
            sets: (0..sets)
                .map(|_| {
                    Mutex::new(SetState {
                        hand: 0,
                        probation: NO_WAY,
                    })
                })
                .collect(),
            set_count: sets,
            ways: config.ways as u32,
            data_frames,
            pinned_frames,
            max_misses,
            index_ways_max: config.effective_index_ways_max() as u32,
            misses_in_flight: AtomicUsize::new(0),
            pinned: PinnedDir::new(pinned_frames),
            sketch: FrequencySketch::new(data_frames),
            counters: Counters::default(),
            histograms: Histograms::new(),
            config,
        })
    }

    /// The arena holding every frame: open each core's device on it
    /// (`tamer_device::open_device(&spec, cache.arena(), core)`, or pass it to
    /// `Runtime::start`).
    pub fn arena(&self) -> Arc<Arena> {
        self.arena.clone()
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Evictable frames (capacity rounded down to whole sets).
    pub fn data_frames(&self) -> u32 {
        self.data_frames
    }

    /// Frames of the pinned partition.
    pub fn pinned_frames(&self) -> u32 {
        self.pinned_frames
    }

    /// Number of sets.
    pub fn sets(&self) -> u32 {
        self.set_count
    }

    /// Misses since open (every class; merged misses not counted): one load, for a caller
    /// that asks on every request whether anything missed lately.
    pub fn misses_total(&self) -> u64 {
        self.counters.misses.load(Ordering::Relaxed)
    }

    /// The effective bound of the miss-status table: `max_misses`, at most the frame count.
    pub fn max_misses(&self) -> usize {
        self.max_misses
    }

    /// Bytes of metadata the cache keeps besides the arena (frames, sets, pinned directory; the
    /// latency histograms are a fixed extra).
    pub fn metadata_bytes(&self) -> usize {
        let frames = self.frames.len() * (std::mem::size_of::<Frame>() + 1); // + arena in-I/O flag
        let sets = self.sets.len() * std::mem::size_of::<Mutex<SetState>>();
        let dir = self.pinned.keys.len() * (8 + 4);
        frames + sets + dir + self.sketch.bytes()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            index_hits: c.index_hits.load(Ordering::Relaxed),
            index_misses: c.index_misses.load(Ordering::Relaxed),
            discarded: c.discarded.load(Ordering::Relaxed),
            admissions_refused: c.admissions_refused.load(Ordering::Relaxed),
            merged_misses: c.merged_misses.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            write_backs: c.write_backs.load(Ordering::Relaxed),
            victim_write_backs: c.victim_write_backs.load(Ordering::Relaxed),
            cleaner_write_backs: c.cleaner_write_backs.load(Ordering::Relaxed),
            misses_in_flight: self.misses_in_flight.load(Ordering::Relaxed) as u64,
            max_misses_in_flight: c.max_misses_in_flight.load(Ordering::Relaxed),
            miss_latency_ns: self.histograms.merged(),
        }
    }

    /// The page, pinned until the returned guard drops. On a miss the calling user-level
    /// thread submits the read and parks (other threads run); concurrent misses on the page,
    /// from any core, share that one read.
    pub fn get(&self, page: u64) -> Result<PageRef<'_>, CacheError> {
        self.get_as(page, PageClass::Data)
    }

    /// As [`PageCache::get`], for a page of `class` (see [`PageClass`]).
    pub fn get_as(&self, page: u64, class: PageClass) -> Result<PageRef<'_>, CacheError> {
        self.check(page)?;
        // The hit path reads no clock: a deadline only bounds the waits of a miss.
        if let Some(page_ref) = self.try_hit(page, class) {
            return Ok(page_ref);
        }
        self.get_until_with(page, class, self.deadline(), Begin::after_hit_missed())
    }

    /// The hit path of [`PageCache::start`] alone: the page pinned and counted as a hit if
    /// it is installed now (its use counted in the frequency sketch either way).
    #[inline]
    fn try_hit(&self, page: u64, class: PageClass) -> Option<PageRef<'_>> {
        let kind = class.kind();
        if kind == Kind::Data {
            self.sketch.touch(page);
        }
        let frame = self.lookup_pin(page, class)?;
        Counters::bump(&self.counters.hits);
        if kind == Kind::Index {
            Counters::bump(&self.counters.index_hits);
        }
        Some(PageRef::new(self, frame, page))
    }

    /// Index frames resident now (installed pages of [`PageClass::Index`]); counts every
    /// frame, so it costs O(frames): for reports, not for a hot path.
    pub fn resident_index_frames(&self) -> u32 {
        self.frames[..self.data_frames as usize]
            .iter()
            .filter(|f| f.index.load(Ordering::Relaxed) && f.state() == READY)
            .count() as u32
    }

    /// Dirty index frames in the set `page` of `class` lives in (they can be neither evicted
    /// nor written back until their owner writes them): a caller that dirties index pages
    /// asks, to write them before a set has no victim left.
    pub fn dirty_index_frames_in_set(&self, page: u64, class: PageClass) -> u32 {
        let (_, base) = self.place(page, class);
        (base..base + self.ways)
            .filter(|&i| {
                let f = &self.frames[i as usize];
                f.index.load(Ordering::Relaxed) && f.dirty.load(Ordering::Relaxed)
            })
            .count() as u32
    }

    /// Ways of each set.
    pub fn ways(&self) -> u32 {
        self.ways
    }

    /// The most index frames one set keeps ahead of its data frames.
    pub fn index_ways_max(&self) -> u32 {
        self.index_ways_max
    }

    /// Starts fetching `page` without waiting: call [`Prefetch::wait`] later, so that one job
    /// overlaps several misses. A thread may hold at most 16 device accesses (the runtime's
    /// bound), so keep at most [`BATCH`] prefetches unwaited; and do not `get` a page this
    /// thread holds an unwaited prefetch of (it would wait for itself until the timeout).
    pub fn prefetch(&self, page: u64) -> Result<Prefetch<'_>, CacheError> {
        self.prefetch_as(page, PageClass::Data)
    }

    /// As [`PageCache::prefetch`], for a page of `class`.
    pub fn prefetch_as(&self, page: u64, class: PageClass) -> Result<Prefetch<'_>, CacheError> {
        self.check(page)?;
        let deadline = self.deadline();
        // Non-blocking on shared resources: a thread holding unwaited reads (miss-status
        // entries) must not wait for entries or frames held by others, or two such threads
        // could wait for each other.
        let start = Begin {
            blocking: false,
            ..Begin::counted(false)
        };
        let state = match self.start(page, class, deadline, start)? {
            Start::Ready(page_ref) => PrefetchState::Ready(page_ref),
            Start::Merged { .. } | Start::Deferred => PrefetchState::Merged,
            Start::Loading(load) => PrefetchState::Loading(load),
        };
        Ok(Prefetch {
            cache: self,
            page,
            class,
            deadline,
            state,
            _not_send: PhantomData,
        })
    }

    /// Every page in `pages`, in order, with up to [`BATCH`] misses overlapped at a time.
    /// Repeated pages are fetched once (and pinned once per occurrence).
    pub fn get_many(&self, pages: &[u64]) -> Result<Vec<PageRef<'_>>, CacheError> {
        for &page in pages {
            self.check(page)?;
        }
        let mut out: Vec<PageRef<'_>> = Vec::with_capacity(pages.len());
        for chunk in pages.chunks(BATCH) {
            let base = out.len();
            // First occurrence of each page in this chunk (or in the earlier output).
            let mut prefetches: Vec<Option<Prefetch<'_>>> = Vec::with_capacity(chunk.len());
            let mut source: Vec<Option<usize>> = Vec::with_capacity(chunk.len());
            for (i, &page) in chunk.iter().enumerate() {
                let earlier_out = out.iter().position(|r| r.page == page);
                let earlier_chunk = chunk[..i].iter().position(|&p| p == page);
                match (earlier_out, earlier_chunk) {
                    (Some(j), _) => {
                        source.push(Some(j));
                        prefetches.push(None);
                    }
                    (None, Some(k)) => {
                        source.push(Some(base + k));
                        prefetches.push(None);
                    }
                    (None, None) => {
                        source.push(None);
                        // On error the earlier prefetches drop, which completes their reads.
                        prefetches.push(Some(self.prefetch(page)?));
                    }
                }
            }
            // Own reads first: then this thread holds no miss-status entry while it waits for
            // other threads' reads (which they, in turn, complete first).
            let mut done: Vec<Option<Result<PageRef<'_>, CacheError>>> =
                (0..chunk.len()).map(|_| None).collect();
            for (slot, prefetch) in prefetches.iter_mut().enumerate() {
                if prefetch.as_ref().is_some_and(Prefetch::issued_read) {
                    done[slot] = prefetch.take().map(Prefetch::wait);
                }
            }
            for (slot, prefetch) in prefetches.into_iter().enumerate() {
                if let Some(prefetch) = prefetch {
                    done[slot] = Some(prefetch.wait());
                }
            }
            for (slot, from) in source.into_iter().enumerate() {
                let page_ref = match (done[slot].take(), from) {
                    (Some(result), _) => result?,
                    (None, Some(j)) => out[j].clone(),
                    (None, None) => unreachable!("every entry has a prefetch or a source"),
                };
                out.push(page_ref);
            }
        }
        Ok(out)
    }

    /// Loads `page` into the pinned partition, where it is never evicted (metadata), and
    /// returns it pinned. Idempotent; a page already in the data partition moves over (dirty
    /// or not). Fails with [`CacheError::PinnedFull`] when the partition has no free frame.
    pub fn pin_permanent(&self, page: u64) -> Result<PageRef<'_>, CacheError> {
        self.check(page)?;
        let deadline = self.deadline();
        if self.pinned_frames == 0 {
            return Err(CacheError::PinnedFull { pinned_frames: 0 });
        }
        loop {
            if self.pinned.lookup(page).is_some() {
                return self.get_until(page, PageClass::Data, deadline);
            }
            if !self.reserve_miss() {
                self.wait_step(deadline, || self.table_full())?;
                continue;
            }
            let mut next = lock(&self.pinned.next);
            if self.pinned.lookup(page).is_some() {
                drop(next);
                self.release_miss();
                continue;
            }
            if *next >= self.pinned_frames {
                drop(next);
                self.release_miss();
                return Err(CacheError::PinnedFull {
                    pinned_frames: self.pinned_frames,
                });
            }
            let pinned_frame = self.data_frames + *next;
            let target = &self.frames[pinned_frame as usize];
            let (set, base) = self.data_set_of(page);
            let set_guard = lock(&self.sets[set]);
            let moved = match self.move_to_pinned(page, base, pinned_frame) {
                ToPinned::Moved => true,
                ToPinned::Absent => false,
                ToPinned::Busy => {
                    drop(set_guard);
                    drop(next);
                    self.release_miss();
                    self.wait_step(deadline, || CacheError::MissTimeout {
                        page,
                        waited_ms: self.waited_ms(),
                    })?;
                    continue;
                }
            };
            if !moved {
                target.tag.store(page, Ordering::Release);
                target.dirty.store(false, Ordering::Release);
                target.control.store(control(LOADING, 1), Ordering::Release);
            }
            self.pinned.insert(page, pinned_frame);
            *next += 1;
            drop(set_guard);
            drop(next);
            if moved {
                self.release_miss();
                return self.get_until(page, PageClass::Data, deadline);
            }
            let load = self.submit_load(pinned_frame, page, Kind::Data)?;
            return self.finish_load(load);
        }
    }

    /// Moves `page`, if a frame of its data set (at `base`) holds it, into the unpublished
    /// pinned frame `pinned_frame`, leaving the data frame empty. Called with the set locked.
    fn move_to_pinned(&self, page: u64, base: u32, pinned_frame: u32) -> ToPinned {
        let target = &self.frames[pinned_frame as usize];
        for frame_index in base..base + self.ways {
            let frame = &self.frames[frame_index as usize];
            if frame.tag.load(Ordering::Acquire) != page {
                continue;
            }
            if !frame.try_claim(WRITEBACK, 0) {
                return ToPinned::Busy;
            }
            // We own the unpinned data frame: move the page over.
            // SAFETY: both frames are owned by this thread (the data frame is claimed, the
            // pinned frame is not yet published), neither is in an I/O.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.arena.frame_ptr(frame_index),
                    self.arena.frame_ptr(pinned_frame),
                    BLOCK_SIZE,
                );
            }
            let dirty = frame.dirty.swap(false, Ordering::AcqRel);
            target.dirty.store(dirty, Ordering::Release);
            target.tag.store(page, Ordering::Release);
            target.control.store(control(READY, 0), Ordering::Release);
            frame.tag.store(NO_PAGE, Ordering::Release);
            frame.referenced.store(false, Ordering::Relaxed);
            frame.index.store(false, Ordering::Relaxed);
            frame.control.store(control(EMPTY, 0), Ordering::Release);
            return ToPinned::Moved;
        }
        ToPinned::Absent
    }

    /// Writes back every dirty frame (in batches of [`BATCH`]) and then calls the device's
    /// durability barrier (`io::flush`). A frame being written keeps its shared latch: readers
    /// go on, writers of that page wait for the write.
    pub fn flush(&self) -> Result<(), CacheError> {
        if !thread::in_user_thread() {
            return Err(CacheError::NotInUserThread);
        }
        let deadline = self.deadline();
        // (frame, ticket, exclusive latch version when checksums are on).
        let mut batch: Vec<(u32, Ticket, Option<u64>)> = Vec::with_capacity(BATCH);
        let mut first_error: Option<CacheError> = None;
        // Hold-and-wait is never allowed: before any wait, the batch is drained, which releases
        // every latch and pin this flush holds (a reader holding a bucket latch may be waiting
        // for a data page in the batch). Waits are bounded by the deadline; an error stops the
        // pass after the batch is drained, so nothing is left latched, pinned or in flight.
        'frames: for index in 0..self.frames.len() as u32 {
            let frame = &self.frames[index as usize];
            // A victim being written back (or claimed) by its evictor: wait for that write, so
            // the barrier below covers it.
            if let Err(err) = self.wait_for_evictor(frame, deadline, &mut batch, &mut first_error) {
                first_error.get_or_insert(err);
                break 'frames;
            }
            if !frame.dirty.load(Ordering::Acquire) {
                continue;
            }
            let page = frame.tag.load(Ordering::Acquire);
            if page == NO_PAGE {
                continue;
            }
            // Held back by its user (a checkpoint writes it with `write_back_to`).
            let Some(target) = self.write_address(page) else {
                continue;
            };
            if !frame.try_pin(page, false) {
                // Claimed by an evictor between the checks above: its write-back makes the page
                // durable before the barrier only if we wait for it.
                if let Err(err) =
                    self.wait_for_evictor(frame, deadline, &mut batch, &mut first_error)
                {
                    first_error.get_or_insert(err);
                    break 'frames;
                }
                continue;
            }
            let submitted =
                self.submit_write_back(index, page, target, deadline, &mut batch, &mut first_error);
            if let Err(err) = submitted {
                first_error.get_or_insert(err);
                break 'frames;
            }
            if batch.len() == BATCH {
                self.drain_writes(&mut batch, &mut first_error);
            }
        }
        self.drain_writes(&mut batch, &mut first_error);
        if let Some(err) = first_error {
            return Err(err);
        }
        io::flush()?;
        Ok(())
    }

    /// [`PageCache::write_back_to`] for many pages, [`WRITE_BACK_BATCH`] writes in flight at a
    /// time (a checkpoint's thousands of pages would otherwise take one device round trip
    /// each). Each write holds its page's latch until it completes (exclusive with checksums,
    /// as [`PageCache::flush`] does); before waiting
    /// for any latch the writes in flight are drained, so it never holds latches while it
    /// waits for one. Returns how many pages it wrote (resident and dirty ones).
    pub fn write_back_many(&self, pages: &[(u64, PageClass, u64)]) -> Result<usize, CacheError> {
        if !thread::in_user_thread() {
            return Err(CacheError::NotInUserThread);
        }
        let deadline = self.deadline();
        let mut batch: Vec<(u32, Ticket, Option<u64>)> = Vec::with_capacity(WRITE_BACK_BATCH);
        let mut first_error: Option<CacheError> = None;
        let mut written = 0;
        for &(page, class, target) in pages {
            if let Err(err) = self.check(target) {
                first_error.get_or_insert(err);
                break;
            }
            let Some(index) = self.lookup_pin(page, class) else {
                continue;
            };
            match self.submit_write_back(
                index,
                page,
                target,
                deadline,
                &mut batch,
                &mut first_error,
            ) {
                Ok(true) => written += 1,
                Ok(false) => {}
                Err(err) => {
                    first_error.get_or_insert(err);
                    break;
                }
            }
            if batch.len() == WRITE_BACK_BATCH {
                self.drain_writes(&mut batch, &mut first_error);
            }
        }
        self.drain_writes(&mut batch, &mut first_error);
        match first_error {
            Some(err) => Err(err),
            None => Ok(written),
        }
    }

    /// Makes the device hold what data pages `pages` hold now, up to a durability barrier the
    /// caller pushes after it returns: each resident dirty page is written back (to its own
    /// address), and a write of one already in flight by an evictor or the cleaner is waited
    /// for, so that its completion is reaped before the caller's barrier (a barrier covers only
    /// completed writes). A page not resident was written (or never changed): nothing to do.
    /// [`WRITE_BACK_BATCH`] writes in flight at a time; returns how many it wrote. How a group
    /// commit makes its records durable.
    pub fn write_back_settled(&self, pages: &[u64]) -> Result<usize, CacheError> {
        if !thread::in_user_thread() {
            return Err(CacheError::NotInUserThread);
        }
        let deadline = self.deadline();
        let mut batch: Vec<(u32, Ticket, Option<u64>)> = Vec::with_capacity(WRITE_BACK_BATCH);
        let mut first_error: Option<CacheError> = None;
        let mut written = 0;
        'pages: for &page in pages {
            // Bounded by the deadline: each turn waits for a write or load of the page.
            loop {
                let Some(index) = self.resident_frame(page) else {
                    continue 'pages;
                };
                let frame = &self.frames[index as usize];
                let state = frame.state();
                let claimed =
                    state == WRITEBACK || (state == LOADING && frame.dirty.load(Ordering::Acquire));
                if claimed {
                    if let Err(err) =
                        self.wait_for_evictor(frame, deadline, &mut batch, &mut first_error)
                    {
                        first_error.get_or_insert(err);
                        break 'pages;
                    }
                    continue;
                }
                if state != READY {
                    // Being loaded (clean): the device already holds it.
                    continue 'pages;
                }
                if !frame.try_pin(page, false) {
                    // Claimed between the checks: look again (latches drained before a wait).
                    self.drain_writes(&mut batch, &mut first_error);
                    let waited = self.wait_step(deadline, || CacheError::MissTimeout {
                        page,
                        waited_ms: self.waited_ms(),
                    });
                    if let Err(err) = waited {
                        first_error.get_or_insert(err);
                        break 'pages;
                    }
                    continue;
                }
                let Some(target) = self.write_address(page) else {
                    frame.unpin();
                    continue 'pages;
                };
                match self.submit_write_back(
                    index,
                    page,
                    target,
                    deadline,
                    &mut batch,
                    &mut first_error,
                ) {
                    Ok(true) => written += 1,
                    Ok(false) => {}
                    Err(err) => {
                        first_error.get_or_insert(err);
                        break 'pages;
                    }
                }
                if batch.len() == WRITE_BACK_BATCH {
                    self.drain_writes(&mut batch, &mut first_error);
                }
                continue 'pages;
            }
        }
        self.drain_writes(&mut batch, &mut first_error);
        match first_error {
            Some(err) => Err(err),
            None => Ok(written),
        }
    }

    /// The frame whose tag is data page `page` (pinned partition first, then its set), in any
    /// state; no pin taken.
    fn resident_frame(&self, page: u64) -> Option<u32> {
        if let Some(frame) = self.pinned.lookup(page) {
            return Some(frame);
        }
        let (_, base) = self.place(page, PageClass::Data);
        (base..base + self.ways)
            .find(|&index| self.frames[index as usize].tag.load(Ordering::Acquire) == page)
    }

    /// Writes `page`, if it is resident (placed as `class`) and dirty, to device page `target`
    /// (sealed with that number) and marks it clean: how a checkpoint writes a page its
    /// [`crate::PageAddresses`] holds back, to the copy it chooses. Returns whether it wrote.
    /// The write holds the page's latch (writers of this page wait for it; readers too with
    /// checksums); the caller orders it with changes to other pages. No durability barrier: the
    /// caller flushes the device when its writes are all done.
    pub fn write_back_to(
        &self,
        page: u64,
        class: PageClass,
        target: u64,
    ) -> Result<bool, CacheError> {
        self.write_back_many(&[(page, class, target)])
            .map(|written| written == 1)
    }

    /// Background cleaning, off the misses' path: writes back up to `max_frames` (at most
    /// [`BATCH`]) dirty frames that the CLOCK would evict next (unreferenced, unpinned),
    /// scanning at most `max_sets` sets from set `*cursor` in steps of `stride` (a cleaner per
    /// core takes every `stride`-th set; `*cursor` moves on). The writes are submitted
    /// together and waited for by parking; a frame being written is `WRITEBACK` (a lookup of
    /// that page waits for it; other pages are untouched). Returns how many were written
    /// clean; an error leaves its page dirty (a later pass or `flush` retries).
    ///
    /// Misses then find clean victims, so they do not wait for a victim's write-back first.
    /// A set that already holds [`CLEAN_VICTIMS_WANTED`] clean unreferenced frames is left
    /// alone, and no set is brought beyond that: writing back earlier than a miss needs it
    /// only costs device writes of pages that are dirtied again (a cleaner that ran as often
    /// as the core let it wrote back 2.5× as many pages per TATP transaction).
    pub fn clean_some(
        &self,
        cursor: &mut usize,
        stride: usize,
        max_sets: usize,
        max_frames: usize,
    ) -> Result<usize, CacheError> {
        if !thread::in_user_thread() {
            return Err(CacheError::NotInUserThread);
        }
        let sets = self.sets.len();
        if sets == 0 {
            return Ok(0);
        }
        let stride = stride.max(1);
        let max_frames = max_frames.min(BATCH);
        let mut claimed: Vec<(u32, u64, Ticket)> = Vec::with_capacity(max_frames);
        let mut first_error: Option<CacheError> = None;
        'sets: for _ in 0..max_sets.min(sets) {
            let set = *cursor % sets;
            *cursor = (set + stride) % sets;
            let base = set as u32 * self.ways;
            let mut wanted = CLEAN_VICTIMS_WANTED.saturating_sub(self.clean_victims(base));
            for index in base..base + self.ways {
                if claimed.len() == max_frames {
                    break 'sets;
                }
                if wanted == 0 {
                    break;
                }
                let frame = &self.frames[index as usize];
                if !frame.dirty.load(Ordering::Acquire)
                    || frame.referenced.load(Ordering::Relaxed)
                    || !self.likely_victim(frame)
                    || !frame.try_claim(WRITEBACK, 0)
                {
                    continue;
                }
                // Claimed unpinned: nobody holds or can take a reference to its bytes, and the
                // tag cannot change until it is handed back.
                let page = frame.tag.load(Ordering::Acquire);
                let target = self.write_address(page);
                let Some(target) = target.filter(|_| frame.dirty.load(Ordering::Acquire)) else {
                    frame.control.store(control(READY, 0), Ordering::Release);
                    continue;
                };
                if self.config.checksum {
                    self.seal(index, target);
                }
                match io::submit(IoRequest::write(target * BLOCK_SIZE as u64, index, 1, 0)) {
                    Ok(ticket) => {
                        claimed.push((index, page, ticket));
                        wanted -= 1;
                    }
                    Err(err) => {
                        frame.control.store(control(READY, 0), Ordering::Release);
                        first_error = Some(self.device_error(err, page));
                        break 'sets;
                    }
                }
            }
        }
        self.finish_cleaning(claimed, first_error)
    }

    /// Waits (parking) for the cleaner's writes `claimed` (frame, page, ticket), marks the
    /// frames written clean and hands every frame back. Returns how many were written, or
    /// `first_error` or the first write's error.
    #[inline]
    fn finish_cleaning(
        &self,
        claimed: Vec<(u32, u64, Ticket)>,
        mut first_error: Option<CacheError>,
    ) -> Result<usize, CacheError> {
        let mut written = 0;
        for (index, page, ticket) in claimed {
            let frame = &self.frames[index as usize];
            match io::wait_all_with(&[ticket], WaitMode::Park) {
                Ok(()) => {
                    frame.dirty.store(false, Ordering::Release);
                    Counters::bump(&self.counters.write_backs);
                    Counters::bump(&self.counters.cleaner_write_backs);
                    written += 1;
                }
                Err(err) => {
                    first_error.get_or_insert(self.device_error(err, page));
                }
            }
            // Nobody could pin it meanwhile (it was not READY): hand it back.
            frame.control.store(control(READY, 0), Ordering::Release);
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(written),
        }
    }

    /// True when `frame` is likely to be evicted soon, so that writing it back ahead pays: a
    /// data page asked for at most [`CLEAN_FREQUENCY_MAX`] times lately (a more frequent one
    /// keeps its frame under admission, and cleaning it only wrote it again and again: under
    /// new-job priority the cleaner ran often enough to write back twice the pages per TATP
    /// transaction that FIFO did, hot pages dirtied again), or an index page beyond its set's
    /// share (rare: index pages are written back at eviction or flush).
    fn likely_victim(&self, frame: &Frame) -> bool {
        let index = frame.index.load(Ordering::Relaxed);
        let page = frame.tag.load(Ordering::Relaxed);
        evict::worth_cleaning(index, self.sketch.estimate(page), CLEAN_FREQUENCY_MAX)
    }

    /// Frames of the set at `base` a miss could take at once: unpinned, clean, unreferenced
    /// (a racy count: a hint for the cleaner).
    fn clean_victims(&self, base: u32) -> usize {
        (base..base + self.ways)
            .filter(|&index| {
                let frame = &self.frames[index as usize];
                frame.control.load(Ordering::Relaxed) == control(READY, 0)
                    && !frame.dirty.load(Ordering::Relaxed)
                    && !frame.referenced.load(Ordering::Relaxed)
            })
            .count()
    }

    /// Waits while an evictor holds `frame` for its write-back (`WRITEBACK`, or `LOADING` with
    /// the dirty bit still set), draining `batch` first so that no latch is held while waiting.
    fn wait_for_evictor(
        &self,
        frame: &Frame,
        deadline: u64,
        batch: &mut Vec<(u32, Ticket, Option<u64>)>,
        first_error: &mut Option<CacheError>,
    ) -> Result<(), CacheError> {
        loop {
            let state = frame.state();
            let claimed =
                state == WRITEBACK || (state == LOADING && frame.dirty.load(Ordering::Acquire));
            if !claimed {
                return Ok(());
            }
            self.drain_writes(batch, first_error);
            self.wait_step(deadline, || CacheError::MissTimeout {
                page: frame.tag.load(Ordering::Relaxed),
                waited_ms: self.waited_ms(),
            })?;
        }
    }

    fn drain_writes(
        &self,
        batch: &mut Vec<(u32, Ticket, Option<u64>)>,
        first_error: &mut Option<CacheError>,
    ) {
        for (index, ticket, held) in batch.drain(..) {
            let frame = &self.frames[index as usize];
            match io::wait(ticket) {
                Ok(()) => Counters::bump(&self.counters.write_backs),
                Err(err) => {
                    frame.dirty.store(true, Ordering::Release);
                    let page = frame.tag.load(Ordering::Relaxed);
                    first_error.get_or_insert(self.device_error(err, page));
                }
            }
            match held {
                Some(held) => frame.unlock_exclusive(held),
                None => frame.unlock_shared(),
            }
            frame.unpin();
        }
    }

    /// Latches the pinned frame `index` (holding `page`) for its write-back (the exclusive
    /// latch with checksums, since the trailer is written into the frame, so readers of the
    /// page wait; the shared one without), seals it for device page `target` and submits the
    /// write into `batch`. Before waiting for the latch it drains `batch`, so it never holds
    /// latches while it waits for one. `Ok(false)`: the page was clean, nothing submitted. On
    /// `Ok(false)` or an error the latch and the pin are released; after `Ok(true)`,
    /// `drain_writes` releases them when the write completes.
    fn submit_write_back(
        &self,
        index: u32,
        page: u64,
        target: u64,
        deadline: u64,
        batch: &mut Vec<(u32, Ticket, Option<u64>)>,
        first_error: &mut Option<CacheError>,
    ) -> Result<bool, CacheError> {
        let frame = &self.frames[index as usize];
        let mut exclusive = None;
        let held = loop {
            if self.config.checksum {
                if exclusive.is_none() {
                    exclusive = frame.try_lock_exclusive();
                }
                if exclusive.is_some() && frame.readers_drained() {
                    break Ok(exclusive);
                }
            } else if frame.try_lock_shared() {
                break Ok(None);
            }
            self.drain_writes(batch, first_error);
            let waited = self.wait_step(deadline, || CacheError::MissTimeout {
                page,
                waited_ms: self.waited_ms(),
            });
            if let Err(err) = waited {
                break Err(err);
            }
        };
        let held = match held {
            Ok(held) => held,
            Err(err) => {
                if let Some(version) = exclusive {
                    frame.unlock_exclusive(version);
                }
                frame.unpin();
                return Err(err);
            }
        };
        let unlatch = |frame: &Frame| match held {
            Some(held) => frame.unlock_exclusive(held),
            None => frame.unlock_shared(),
        };
        if !frame.dirty.swap(false, Ordering::AcqRel) {
            unlatch(frame);
            frame.unpin();
            return Ok(false);
        }
        if self.config.checksum {
            self.seal(index, target);
        }
        match io::submit(IoRequest::write(target * BLOCK_SIZE as u64, index, 1, 0)) {
            Ok(ticket) => {
                batch.push((index, ticket, held));
                Ok(true)
            }
            Err(err) => {
                frame.dirty.store(true, Ordering::Release);
                unlatch(frame);
                frame.unpin();
                Err(self.device_error(err, page))
            }
        }
    }

    /// The device page a miss on `page` reads.
    fn read_address(&self, page: u64) -> u64 {
        self.config
            .addresses
            .as_ref()
            .map_or(page, |a| a.0.read_from(page))
    }

    /// The device page a write-back of `page` goes to; `None`: held back.
    fn write_address(&self, page: u64) -> Option<u64> {
        match &self.config.addresses {
            None => Some(page),
            Some(a) => a.0.write_to(page),
        }
    }

    /// Writes the checksum trailer of frame `index` holding `page`. The caller owns the frame's
    /// bytes (exclusive latch, or a claimed unpinned victim).
    fn seal(&self, index: u32, page: u64) {
        // SAFETY: per the caller's ownership; the frame is not in an I/O yet.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(self.arena.frame_ptr(index), BLOCK_SIZE) };
        crate::checksum::seal_page(page, bytes);
    }

    /// Checks the trailer of a frame just read (still `LOADING`, owned by the loader), unless
    /// the configuration exempts the page.
    fn verify(&self, index: u32, page: u64) -> bool {
        // SAFETY: the loader owns the LOADING frame and its read has completed.
        let bytes = unsafe { std::slice::from_raw_parts(self.arena.frame_ptr(index), BLOCK_SIZE) };
        self.config
            .checksum_exempt
            .is_some_and(|exempt| exempt(bytes))
            || crate::checksum::verify_page(page, bytes)
    }

    // --- internals ---

    fn check(&self, page: u64) -> Result<(), CacheError> {
        if !thread::in_user_thread() {
            return Err(CacheError::NotInUserThread);
        }
        let capacity_bytes = self.config.device_capacity_bytes.unwrap_or(u64::MAX);
        if page > MAX_PAGE || (page + 1) * BLOCK_SIZE as u64 > capacity_bytes {
            return Err(CacheError::PageOutOfRange {
                page,
                capacity_bytes,
            });
        }
        Ok(())
    }

    fn deadline(&self) -> u64 {
        now_ns().saturating_add(self.config.wait_timeout.as_nanos() as u64)
    }

    fn waited_ms(&self) -> u64 {
        self.config.wait_timeout.as_millis() as u64
    }

    fn table_full(&self) -> CacheError {
        CacheError::MissTableFull {
            max_misses: self.max_misses,
            waited_ms: self.waited_ms(),
        }
    }

    /// One step of a bounded wait for another thread: yield, or fail past the deadline.
    fn wait_step(
        &self,
        deadline: u64,
        error: impl FnOnce() -> CacheError,
    ) -> Result<(), CacheError> {
        if now_ns() > deadline {
            return Err(error());
        }
        thread::yield_now();
        Ok(())
    }

    fn device_error(&self, err: DeviceError, page: u64) -> CacheError {
        match err {
            DeviceError::OutOfRange { capacity_bytes, .. } => CacheError::PageOutOfRange {
                page,
                capacity_bytes,
            },
            other => CacheError::Device(other),
        }
    }

    /// The set of a data page: a hash of its number. Returns (set, its first frame).
    #[inline]
    fn data_set_of(&self, page: u64) -> (usize, u32) {
        let set = (mix(page) % u64::from(self.set_count)) as u32;
        (set as usize, set * self.ways)
    }

    /// The set `page` of `class` lives in: (set, its first frame).
    #[inline]
    fn place(&self, page: u64, class: PageClass) -> (usize, u32) {
        match class {
            PageClass::Data => self.data_set_of(page),
            PageClass::Index { set_key } => {
                let set = (set_key % u64::from(self.set_count)) as u32;
                (set as usize, set * self.ways)
            }
        }
    }

    /// Pins the page if it is installed (pinned partition first, then its set); no lock.
    #[inline]
    fn lookup_pin(&self, page: u64, class: PageClass) -> Option<u32> {
        if let Some(frame) = self.pinned.lookup(page) {
            return self.frames[frame as usize]
                .try_pin(page, true)
                .then_some(frame);
        }
        let (_, base) = self.place(page, class);
        let found = (base..base + self.ways).find(|&index| {
            let frame = &self.frames[index as usize];
            frame.tag.load(Ordering::Acquire) == page && frame.try_pin(page, true)
        })?;
        let frame = &self.frames[found as usize];
        if class.kind() == Kind::Index && !frame.index.load(Ordering::Relaxed) {
            // Installed as data in the set its index placement also maps to: from now on it
            // is kept as an index page (a hint for the eviction policy only).
            frame.index.store(true, Ordering::Relaxed);
        }
        Some(found)
    }

    /// Takes a miss-status entry if one is free.
    fn reserve_miss(&self) -> bool {
        let mut current = self.misses_in_flight.load(Ordering::Relaxed);
        loop {
            if current >= self.max_misses {
                return false;
            }
            match self.misses_in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
        debug_assert!(
            current < self.max_misses,
            "miss-status table over its bound"
        );
        self.counters
            .max_misses_in_flight
            .fetch_max(current as u64 + 1, Ordering::Relaxed);
        true
    }

    fn release_miss(&self) {
        let before = self.misses_in_flight.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "miss-status entry released twice");
    }

    /// The page for a caller that will overwrite all of it: on a miss the frame is installed
    /// zeroed, without reading the device (a page that is cached, or being read by another
    /// thread, is returned as it is). For freshly allocated pages.
    pub fn get_for_overwrite(&self, page: u64) -> Result<PageRef<'_>, CacheError> {
        self.get_for_overwrite_as(page, PageClass::Data)
    }

    /// As [`PageCache::get_for_overwrite`], for a page of `class`. An index page drops any
    /// copy of the page cached as data first, unwritten: a freed data page reused as an index
    /// page must not be written back over it later.
    pub fn get_for_overwrite_as(
        &self,
        page: u64,
        class: PageClass,
    ) -> Result<PageRef<'_>, CacheError> {
        self.check(page)?;
        let deadline = self.deadline();
        if class.kind() == Kind::Index && self.place(page, class) != self.data_set_of(page) {
            self.discard_data_copy(page, deadline)?;
        }
        self.get_until_with(page, class, deadline, Begin::counted(true))
    }

    /// Drops `page`, cached as `class`, without writing it back: the caller freed it (a tree
    /// node merged away), and a stale frame must never be written over the page once it is
    /// reused. Waits (bounded) while it is pinned, loading or written; a timeout leaves it.
    pub fn discard(&self, page: u64, class: PageClass) -> Result<(), CacheError> {
        self.check(page)?;
        let deadline = self.deadline();
        self.discard_in(page, self.place(page, class), deadline)
    }

    /// Drops the copy of `page` cached as a data page, if any, without writing it back (the
    /// caller overwrites the page). Waits (bounded) while it is pinned, loading or written.
    fn discard_data_copy(&self, page: u64, deadline: u64) -> Result<(), CacheError> {
        self.discard_in(page, self.data_set_of(page), deadline)
    }

    /// Drops `page` from set `(set, base)` unwritten, waiting (bounded) while it is busy.
    fn discard_in(
        &self,
        page: u64,
        (set, base): (usize, u32),
        deadline: u64,
    ) -> Result<(), CacheError> {
        loop {
            let guard = lock(&self.sets[set]);
            let found = (base..base + self.ways)
                .find(|&index| self.frames[index as usize].tag.load(Ordering::Acquire) == page);
            let Some(index) = found else {
                return Ok(());
            };
            let frame = &self.frames[index as usize];
            if frame.try_claim(LOADING, 1) {
                // Claimed unpinned under the set lock: nobody holds or can take its bytes.
                frame.tag.store(NO_PAGE, Ordering::Release);
                frame.dirty.store(false, Ordering::Release);
                frame.referenced.store(false, Ordering::Relaxed);
                frame.index.store(false, Ordering::Relaxed);
                frame.control.store(control(EMPTY, 0), Ordering::Release);
                Counters::bump(&self.counters.discarded);
                return Ok(());
            }
            drop(guard);
            self.wait_frame(index, page, deadline)?;
        }
    }

    /// Waits (bounded by `deadline`) until frame `index`'s control word changes: its
    /// write-back ends, a pin is dropped, its state moves on. A user-level thread parks on
    /// the word (a write-back takes a device write: polling it by yields would spin);
    /// elsewhere it yields once.
    fn wait_frame(&self, index: u32, page: u64, deadline: u64) -> Result<(), CacheError> {
        let word = self.frames[index as usize].control.load(Ordering::Acquire);
        if now_ns() > deadline {
            return Err(CacheError::MissTimeout {
                page,
                waited_ms: self.waited_ms(),
            });
        }
        if thread::in_user_thread() {
            thread::wait_while_eq(&self.frames[index as usize].control, word, deadline);
        } else {
            std::thread::yield_now();
        }
        Ok(())
    }

    fn get_until(
        &self,
        page: u64,
        class: PageClass,
        deadline: u64,
    ) -> Result<PageRef<'_>, CacheError> {
        self.get_until_with(page, class, deadline, Begin::counted(false))
    }

    /// A blocking lookup: `first` for its first pass, uncounted retries after a merged miss.
    fn get_until_with(
        &self,
        page: u64,
        class: PageClass,
        deadline: u64,
        first: Begin,
    ) -> Result<PageRef<'_>, CacheError> {
        debug_assert!(first.blocking, "a blocking lookup");
        let mut begin = first;
        loop {
            match self.start(page, class, deadline, begin)? {
                Start::Ready(page_ref) => return Ok(page_ref),
                Start::Loading(load) => return self.finish_load(load),
                Start::Merged { frame } => self.wait_merged(frame, page, deadline)?,
                Start::Deferred => unreachable!("a blocking start does not defer"),
            }
            begin = Begin {
                count_hit: false,
                touch: false,
                ..begin
            };
        }
    }

    /// Waits until the read of `page` into `frame` (issued by another thread, on any core)
    /// is over: the thread parks on the frame's control word, which the loader changes when it
    /// installs the page (or empties the frame after a failed read), and the executor resumes
    /// it then (a user-level futex: no message crosses cores).
    fn wait_merged(&self, frame: u32, page: u64, deadline: u64) -> Result<(), CacheError> {
        let frame = &self.frames[frame as usize];
        loop {
            let word = frame.control.load(Ordering::Acquire);
            if frame.tag.load(Ordering::Acquire) != page || state_of(word) != LOADING {
                return Ok(());
            }
            if now_ns() > deadline {
                return Err(CacheError::MissTimeout {
                    page,
                    waited_ms: self.waited_ms(),
                });
            }
            thread::wait_while_eq(&frame.control, word, deadline);
        }
    }

    /// The hit path, then the miss path: merge with a read in flight, or take a miss-status
    /// entry and a victim and submit the read (see [`Begin`] for the options).
    fn start(
        &self,
        page: u64,
        class: PageClass,
        deadline: u64,
        begin: Begin,
    ) -> Result<Start<'_>, CacheError> {
        let kind = class.kind();
        if begin.touch && kind == Kind::Data {
            self.sketch.touch(page);
        }
        loop {
            if let Some(frame) = self.lookup_pin(page, class) {
                if begin.count_hit {
                    Counters::bump(&self.counters.hits);
                    if kind == Kind::Index {
                        Counters::bump(&self.counters.index_hits);
                    }
                }
                return Ok(Start::Ready(PageRef::new(self, frame, page)));
            }
            if let Some(start) = self.start_miss(page, class, deadline, begin)? {
                return Ok(start);
            }
        }
    }

    /// One pass of the miss path of [`PageCache::start`]: merge with a read in flight, or
    /// take a miss-status entry and a victim and submit the read. `None`: look the page up
    /// again (it was installed or moved meanwhile, or a wait for a frame or an entry ended).
    #[inline]
    fn start_miss(
        &self,
        page: u64,
        class: PageClass,
        deadline: u64,
        begin: Begin,
    ) -> Result<Option<Start<'_>>, CacheError> {
        // A pinned-partition page whose load is in flight or failed.
        if let Some(index) = self.pinned.lookup(page) {
            return self.start_pinned(page, index, deadline, begin);
        }
        let kind = class.kind();
        let (set, base) = self.place(page, class);
        let mut guard = lock(&self.sets[set]);
        if self.pinned.lookup(page).is_some() {
            return Ok(None); // moved to the pinned partition meanwhile
        }
        let found = (base..base + self.ways).find_map(|index| {
            let frame = &self.frames[index as usize];
            (frame.tag.load(Ordering::Acquire) == page).then(|| (index, frame.state()))
        });
        match found {
            Some((_, READY)) => return Ok(None), // installed meanwhile: pin it
            Some((index, LOADING)) => {
                drop(guard);
                if begin.count_hit {
                    Counters::bump(&self.counters.merged_misses);
                }
                return Ok(Some(Start::Merged { frame: index }));
            }
            Some((index, _)) => {
                // Being written back (or moved): the device copy is not current yet.
                drop(guard);
                self.wait_frame(index, page, deadline)?;
                return Ok(None);
            }
            None => {}
        }
        if !self.reserve_miss() {
            drop(guard);
            if !begin.blocking {
                return Ok(Some(Start::Deferred));
            }
            self.wait_step(deadline, || self.table_full())?;
            return Ok(None);
        }
        match self.choose_victim(&mut guard, base, kind, page) {
            Victim::Clean(index, evicted) => {
                self.take_victim(&mut guard, base, index, page, kind);
                drop(guard);
                if evicted {
                    Counters::bump(&self.counters.evictions);
                }
                self.install(index, page, kind, begin).map(Some)
            }
            Victim::Dirty(index) => {
                drop(guard);
                self.release_miss();
                // Only this set's victim page waits for the write; other pages and sets go
                // on. Then retry: the frame is clean now.
                self.write_back_victim(index)?;
                Ok(None)
            }
            Victim::None => {
                drop(guard);
                self.release_miss();
                if !begin.blocking {
                    return Ok(Some(Start::Deferred));
                }
                self.wait_step(deadline, || CacheError::SetPinned {
                    page,
                    ways: self.ways as usize,
                    waited_ms: self.waited_ms(),
                })?;
                Ok(None)
            }
        }
    }

    /// Gives clean victim frame `index` (a way of the set at `base`, whose state `set` is,
    /// locked) to `page` of class `kind`, not yet loaded.
    #[inline]
    fn take_victim(&self, set: &mut SetState, base: u32, index: u32, page: u64, kind: Kind) {
        let frame = &self.frames[index as usize];
        frame.tag.store(page, Ordering::Release);
        frame.dirty.store(false, Ordering::Release);
        // A data page enters unreferenced and probationary: it keeps its frame past the next
        // sweep only if it is asked for again. An index page is kept by its class.
        frame
            .referenced
            .store(kind == Kind::Index, Ordering::Relaxed);
        frame.index.store(kind == Kind::Index, Ordering::Relaxed);
        frame.probation.store(kind == Kind::Data, Ordering::Relaxed);
        set.probation = if kind == Kind::Data {
            index - base
        } else {
            NO_WAY
        };
    }

    /// The miss path of a pinned-partition page found in the pinned directory but not
    /// installed: merge with its load, or load it again after a failed read. `None`: retry
    /// the lookup.
    fn start_pinned(
        &self,
        page: u64,
        index: u32,
        deadline: u64,
        begin: Begin,
    ) -> Result<Option<Start<'_>>, CacheError> {
        let frame = &self.frames[index as usize];
        match frame.state() {
            LOADING => {
                if begin.count_hit {
                    Counters::bump(&self.counters.merged_misses);
                }
                Ok(Some(Start::Merged { frame: index }))
            }
            EMPTY => {
                if !self.reserve_miss() {
                    if !begin.blocking {
                        return Ok(Some(Start::Deferred));
                    }
                    self.wait_step(deadline, || self.table_full())?;
                    return Ok(None);
                }
                if !frame.try_claim_empty() {
                    self.release_miss();
                    return Ok(None);
                }
                self.submit_load(index, page, Kind::Data)
                    .map(|load| Some(Start::Loading(load)))
            }
            _ => Ok(None),
        }
    }

    /// A claimed `LOADING|1` frame (miss-status entry taken) for `page`: zeroed and installed
    /// at once for an overwrite, or its read submitted.
    fn install(
        &self,
        index: u32,
        page: u64,
        kind: Kind,
        begin: Begin,
    ) -> Result<Start<'_>, CacheError> {
        if begin.zeroed {
            // SAFETY: the frame is claimed LOADING|1 by this thread, in no I/O.
            unsafe {
                std::ptr::write_bytes(self.arena.frame_ptr(index), 0, BLOCK_SIZE);
            }
            let before = self.frames[index as usize].set_state(READY);
            debug_assert_eq!(state_of(before), LOADING);
            self.release_miss();
            return Ok(Start::Ready(PageRef::new(self, index, page)));
        }
        self.submit_load(index, page, kind).map(Start::Loading)
    }

    /// A victim in a full set: an empty way first; otherwise the class [`evict::evict_from`]
    /// picks for `incoming` (by the set's index frames), falling back to the other class when
    /// that one has no evictable frame.
    fn choose_victim(
        &self,
        set: &mut MutexGuard<'_, SetState>,
        base: u32,
        incoming: Kind,
        page: u64,
    ) -> Victim {
        let mut index_frames = 0;
        for index in base..base + self.ways {
            let frame = &self.frames[index as usize];
            if frame.try_claim_empty() {
                debug_assert_eq!(frame.tag.load(Ordering::Relaxed), NO_PAGE);
                return Victim::Clean(index, false);
            }
            index_frames += u32::from(frame.index.load(Ordering::Relaxed));
        }
        debug_assert!(index_frames <= self.ways);
        let first = evict::evict_from(incoming, index_frames, self.index_ways_max);
        for kind in [first, evict::other(first)] {
            match self.clock_sweep(set, base, kind) {
                Victim::None => continue,
                // Admission weighs data pages against data pages only: a set over its index
                // share gives up an index frame whatever the incoming page's frequency.
                victim if incoming == Kind::Data && kind == Kind::Data => {
                    return self.admit(set, base, page, victim)
                }
                victim => return victim,
            }
        }
        Victim::None
    }

    /// TinyLFU admission of a data page that missed: when CLOCK's victim (clean, claimed) was
    /// asked for at least as often as `page` lately ([`FrequencySketch`]), the set's
    /// probationary frame (the data page installed last, not asked for since) is evicted
    /// instead and the victim handed back. A page seen once does not push out a hot one; a
    /// page asked for more often than the victim replaces it.
    fn admit(
        &self,
        set: &mut MutexGuard<'_, SetState>,
        base: u32,
        page: u64,
        victim: Victim,
    ) -> Victim {
        let Victim::Clean(index, true) = victim else {
            return victim;
        };
        let way = set.probation;
        if way == NO_WAY || way >= self.ways || base + way == index {
            return victim;
        }
        let candidate = base + way;
        let frame = &self.frames[candidate as usize];
        let probationary = frame.probation.load(Ordering::Relaxed)
            && !frame.index.load(Ordering::Relaxed)
            && !frame.dirty.load(Ordering::Acquire);
        if !probationary {
            set.probation = NO_WAY; // asked for since (or dirtied): a full member now
            return victim;
        }
        let victim_page = self.frames[index as usize].tag.load(Ordering::Acquire);
        if evict::admits(
            self.sketch.estimate(page),
            self.sketch.estimate(victim_page),
        ) {
            return victim;
        }
        if !frame.try_claim(LOADING, 1) {
            return victim;
        }
        if frame.dirty.load(Ordering::Acquire)
            || !frame.probation.load(Ordering::Relaxed)
            || frame.referenced.load(Ordering::Relaxed)
        {
            // Dirtied or asked for between the check and the claim (the claim synchronizes
            // with that pin's release): keep it, evict CLOCK's victim.
            frame.control.store(control(READY, 0), Ordering::Release);
            return victim;
        }
        // Hand CLOCK's clean victim back (claimed by this thread under the set lock).
        self.frames[index as usize]
            .control
            .store(control(READY, 0), Ordering::Release);
        Counters::bump(&self.counters.admissions_refused);
        Victim::Clean(candidate, true)
    }

    /// CLOCK over the set's frames of `kind`, preferring a clean victim: up to two sweeps of
    /// the hand, clearing reference bits, taking the first unreferenced clean frame; failing
    /// that, the first unreferenced dirty one seen. Pinned and busy frames are skipped.
    fn clock_sweep(&self, set: &mut MutexGuard<'_, SetState>, base: u32, kind: Kind) -> Victim {
        let mut dirty = None;
        for _ in 0..2 * self.ways {
            let index = base + set.hand;
            set.hand = (set.hand + 1) % self.ways;
            let frame = &self.frames[index as usize];
            let word = frame.control.load(Ordering::Acquire);
            if word != control(READY, 0) {
                continue;
            }
            let frame_kind = if frame.index.load(Ordering::Relaxed) {
                Kind::Index
            } else {
                Kind::Data
            };
            if frame_kind != kind {
                continue;
            }
            if frame.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            if frame.dirty.load(Ordering::Acquire) {
                // A held dirty page is no victim until its user releases it.
                if self
                    .write_address(frame.tag.load(Ordering::Acquire))
                    .is_some()
                {
                    dirty.get_or_insert(index);
                }
                continue;
            }
            if frame.try_claim(LOADING, 1) {
                // A writer may have pinned, dirtied and unpinned it since we looked: the claim
                // synchronizes with its unpin, so this check sees its dirty mark.
                if frame.dirty.load(Ordering::Acquire) {
                    frame
                        .control
                        .store(control(WRITEBACK, 0), Ordering::Release);
                    return Victim::Dirty(index);
                }
                return Victim::Clean(index, true);
            }
        }
        if let Some(index) = dirty {
            if self.frames[index as usize].try_claim(WRITEBACK, 0) {
                return Victim::Dirty(index);
            }
        }
        Victim::None
    }

    /// Writes a claimed dirty victim (`WRITEBACK|0`) back and makes it a clean `READY` frame.
    fn write_back_victim(&self, index: u32) -> Result<(), CacheError> {
        let frame = &self.frames[index as usize];
        let page = frame.tag.load(Ordering::Acquire);
        debug_assert_eq!(frame.control.load(Ordering::Relaxed), control(WRITEBACK, 0));
        let Some(target) = self.write_address(page) else {
            // Held back since it was chosen: hand it back dirty; the miss picks again.
            frame.control.store(control(READY, 0), Ordering::Release);
            return Ok(());
        };
        if self.config.checksum {
            // Unpinned and claimed: nobody else holds or can take a reference to its bytes.
            self.seal(index, target);
        }
        let result = io::submit(IoRequest::write(target * BLOCK_SIZE as u64, index, 1, 0))
            .and_then(|ticket| io::wait_all_with(&[ticket], self.config.miss_wait));
        if result.is_ok() {
            frame.dirty.store(false, Ordering::Release);
            Counters::bump(&self.counters.write_backs);
            Counters::bump(&self.counters.victim_write_backs);
        }
        // Nobody could pin it meanwhile (it was not READY): hand it back, clean or still dirty.
        frame.control.store(control(READY, 0), Ordering::Release);
        result.map_err(|err| self.device_error(err, page))
    }

    /// Submits the read of a frame claimed as `LOADING|1` (with a miss-status entry taken).
    fn submit_load(&self, frame: u32, page: u64, kind: Kind) -> Result<Load, CacheError> {
        Counters::bump(&self.counters.misses);
        if kind == Kind::Index {
            Counters::bump(&self.counters.index_misses);
        }
        let started_ns = now_ns();
        let address = self.read_address(page);
        match io::submit(IoRequest::read(address * BLOCK_SIZE as u64, frame, 1, 0)) {
            Ok(ticket) => Ok(Load {
                frame,
                page,
                address,
                ticket,
                started_ns,
            }),
            Err(err) => {
                self.fail_load(frame);
                self.release_miss();
                Err(self.device_error(err, page))
            }
        }
    }

    /// Parks until the read completes, installs the page and frees the miss-status entry.
    fn finish_load(&self, load: Load) -> Result<PageRef<'_>, CacheError> {
        let result = io::wait_all_with(&[load.ticket], self.config.miss_wait);
        self.histograms
            .record(now_ns().saturating_sub(load.started_ns));
        let frame = &self.frames[load.frame as usize];
        let result = match result {
            Ok(()) if self.config.checksum && !self.verify(load.frame, load.address) => {
                Err(CacheError::Corrupt { page: load.page })
            }
            Ok(()) => Ok(()),
            Err(err) => Err(self.device_error(err, load.page)),
        };
        let outcome = match result {
            Ok(()) => {
                debug_assert!(
                    !self.arena.is_in_io(load.frame),
                    "a frame in I/O is never handed out"
                );
                let before = frame.set_state(READY);
                debug_assert_eq!(state_of(before), LOADING);
                debug_assert!(before & 0xffff_ffff >= 1, "the loader holds a pin");
                Ok(PageRef::new(self, load.frame, load.page))
            }
            Err(err) => {
                self.fail_load(load.frame);
                Err(err)
            }
        };
        self.release_miss();
        outcome
    }

    /// Empties a frame whose read failed (a pinned-partition frame keeps its page, to retry).
    fn fail_load(&self, index: u32) {
        let frame = &self.frames[index as usize];
        if index < self.data_frames {
            // A data frame's set is its index divided by the ways, whatever its class.
            let set = (index / self.ways) as usize;
            let _guard = lock(&self.sets[set]);
            frame.tag.store(NO_PAGE, Ordering::Release);
            frame.dirty.store(false, Ordering::Release);
            frame.index.store(false, Ordering::Relaxed);
            frame.control.store(control(EMPTY, 0), Ordering::Release);
        } else {
            frame.control.store(control(EMPTY, 0), Ordering::Release);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while a set lock is held; recover the data if something did.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits for a latch held by another thread: yield to it if it runs on this core.
/// Longest a thread waits for a page latch. Latches are held for a page access, at most
/// across one device read (a reader of a bucket holds it while it reads the record), so a
/// wait this long is a deadlock (a bug): it panics with the page rather than hang silently.
const LATCH_WAIT_LIMIT_NS: u64 = 30_000_000_000;

/// Attempts a latch wait yields before it parks: most latches are held for a copy of at
/// most a page, and a yield comes back sooner than a park (whose word is checked once per
/// scheduling pass); a holder that is itself waiting for the device (a bucket's readers hold
/// it across their record's miss) is waited for parked, not by spinning through yields.
const LATCH_YIELDS: u64 = 4;

/// A bounded latch wait: yields for the first few attempts, then parks the user-level thread
/// on the latch word until it changes (an OS thread keeps yielding); checks the clock every
/// 1024 attempts.
struct LatchWait {
    page: u64,
    attempts: u64,
    /// Set at the first check: when the wait becomes a deadlock.
    deadline_ns: Option<u64>,
}

impl LatchWait {
    fn new(page: u64) -> Self {
        Self {
            page,
            attempts: 0,
            deadline_ns: None,
        }
    }

    /// Counts an attempt; panics past the deadlock limit. Returns the limit.
    fn check(&mut self) -> u64 {
        self.attempts += 1;
        match self.deadline_ns {
            Some(deadline) if self.attempts % 1024 != 1 => deadline,
            known => {
                let now = now_ns();
                let deadline = known.unwrap_or(now.saturating_add(LATCH_WAIT_LIMIT_NS));
                self.deadline_ns = Some(deadline);
                assert!(
                    now < deadline,
                    "waited {} s for the latch of page {}: a latch deadlock",
                    LATCH_WAIT_LIMIT_NS / 1_000_000_000,
                    self.page
                );
                deadline
            }
        }
    }

    /// One step of waiting for `word` to leave `seen` (a writer's odd version).
    fn step_on(&mut self, word: &AtomicU64, seen: u64) {
        let deadline = self.check();
        if self.attempts <= LATCH_YIELDS || !thread::in_user_thread() {
            backoff();
        } else {
            thread::wait_while_eq(word, seen, deadline);
        }
    }

    /// One step of waiting for `word` to leave `seen` (a reader count).
    fn step_on_u32(&mut self, word: &AtomicU32, seen: u32) {
        let deadline = self.check();
        if self.attempts <= LATCH_YIELDS || !thread::in_user_thread() {
            backoff();
        } else {
            thread::wait_while_eq_u32(word, seen, deadline);
        }
    }
}

fn backoff() {
    if thread::in_user_thread() {
        thread::yield_now();
    } else {
        std::thread::yield_now();
    }
}

/// A pinned page. While it lives the frame is not evicted; it unpins on drop.
///
/// Access goes through the frame's version latch: [`PageRef::read`] (shared),
/// [`PageRef::write`] (exclusive, marks the page dirty) and [`PageRef::read_optimistic`]
/// (no latch; the result is discarded if a writer intervened). Do not call `write` inside
/// `read` (or either inside `write`) on the same page: the latch is not reentrant.
pub struct PageRef<'a> {
    cache: &'a PageCache,
    frame: u32,
    page: u64,
}

impl<'a> PageRef<'a> {
    fn new(cache: &'a PageCache, frame: u32, page: u64) -> Self {
        debug_assert_eq!(cache.frames[frame as usize].state(), READY);
        Self { cache, frame, page }
    }

    fn meta(&self) -> &Frame {
        &self.cache.frames[self.frame as usize]
    }

    /// The page number.
    pub fn page(&self) -> u64 {
        self.page
    }

    /// The arena frame holding the page (stable while pinned).
    pub fn frame_index(&self) -> u32 {
        self.frame
    }

    /// True when the frame is in the pinned partition.
    pub fn is_permanent(&self) -> bool {
        self.frame >= self.cache.data_frames
    }

    /// The latch version now (even: unlocked; odd: a writer holds it).
    pub fn version(&self) -> u64 {
        self.meta().version.load(Ordering::Acquire)
    }

    /// Runs `f` on the page under the shared latch (writers wait; other readers do not).
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let meta = self.meta();
        let mut wait = LatchWait::new(self.page);
        while !meta.try_lock_shared() {
            let version = meta.version.load(Ordering::Acquire);
            if version & 1 == 1 {
                wait.step_on(&meta.version, version);
            }
        }
        let _unlock = UnlockShared(meta);
        // SAFETY: pinned (the frame is READY, no read I/O into it) and the shared latch
        // excludes writers. A flush may be writing the frame to the device: that only reads it.
        let data = unsafe {
            std::slice::from_raw_parts(self.cache.arena.frame_ptr(self.frame), BLOCK_SIZE)
        };
        f(data)
    }

    /// Runs `f` on the page under the exclusive latch and marks it dirty.
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let meta = self.meta();
        let mut wait = LatchWait::new(self.page);
        let held = loop {
            if let Some(held) = meta.try_lock_exclusive() {
                break held;
            }
            let version = meta.version.load(Ordering::Acquire);
            if version & 1 == 1 {
                wait.step_on(&meta.version, version);
            }
        };
        let unlock = UnlockExclusive(meta, held);
        let mut wait = LatchWait::new(self.page);
        loop {
            let readers = meta.readers.load(Ordering::SeqCst);
            if readers == 0 {
                break;
            }
            wait.step_on_u32(&meta.readers, readers);
        }
        debug_assert!(
            !self.cache.arena.is_in_io(self.frame),
            "a frame in I/O is never written"
        );
        meta.dirty.store(true, Ordering::Release);
        // SAFETY: pinned, and the exclusive latch with no readers left gives this thread the
        // only reference; flushes hold the shared latch while the frame is in I/O.
        let data = unsafe {
            std::slice::from_raw_parts_mut(self.cache.arena.frame_ptr(self.frame), BLOCK_SIZE)
        };
        let result = f(data);
        drop(unlock);
        result
    }

    /// The little-endian u64 at byte `at` (8-aligned), read without a latch as one atomic
    /// load; `None` if a writer held the latch before or during it (retry, or use `read`).
    /// Race-free when writers of that word use [`PageRef::store_u64`], unlike
    /// [`PageRef::read_optimistic`] whose byte reads race with a writer's plain stores (the
    /// version check discards them, but Rust's memory model calls it a data race).
    pub fn load_u64_optimistic(&self, at: usize) -> Option<u64> {
        assert!(
            at.is_multiple_of(8) && at + 8 <= BLOCK_SIZE,
            "u64 at {at}: 8-aligned, in the page"
        );
        let meta = self.meta();
        let version = meta.optimistic_begin()?;
        // SAFETY: pinned (the frame holds this page, no read I/O targets it); the word is
        // 8-aligned inside the 4 KiB-aligned frame; concurrent writers of this word store it
        // atomically (`store_u64`).
        let word = unsafe {
            std::sync::atomic::AtomicU64::from_ptr(
                self.cache.arena.frame_ptr(self.frame).add(at).cast::<u64>(),
            )
        };
        let value = u64::from_le(word.load(Ordering::Relaxed));
        meta.optimistic_validate(version).then_some(value)
    }

    /// Stores the little-endian u64 at byte `at` (8-aligned) under the exclusive latch, as one
    /// atomic store (see [`PageRef::load_u64_optimistic`]); marks the page dirty.
    pub fn store_u64(&self, at: usize, value: u64) {
        assert!(
            at.is_multiple_of(8) && at + 8 <= BLOCK_SIZE,
            "u64 at {at}: 8-aligned, in the page"
        );
        self.write(|data| {
            // SAFETY: `data` is this frame, exclusively latched; the word is 8-aligned and in
            // bounds (asserted).
            let word = unsafe {
                std::sync::atomic::AtomicU64::from_ptr(data.as_mut_ptr().add(at).cast::<u64>())
            };
            word.store(value.to_le(), Ordering::Relaxed);
        });
    }

    /// Runs `f` on the page without a latch and returns its result only if no writer held the
    /// latch before or during the call; `None` otherwise (retry, or use [`PageRef::read`]).
    /// Its byte reads race with a writer's plain stores: the version check discards what they
    /// saw, but Rust's memory model calls the race undefined; for one word prefer
    /// [`PageRef::load_u64_optimistic`] (the store's directory lookups use it).
    ///
    /// `f` may see a page being modified (torn): it must not act on what it reads (no
    /// indexing by values read, no side effects) beyond computing a result that is discarded
    /// when validation fails. This is the seqlock pattern of optimistic latch coupling.
    pub fn read_optimistic<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let meta = self.meta();
        let version = meta.optimistic_begin()?;
        // SAFETY: pinned, so the frame holds this page and no read I/O targets it; concurrent
        // writes are possible and detected by the version check below.
        let data = unsafe {
            std::slice::from_raw_parts(self.cache.arena.frame_ptr(self.frame), BLOCK_SIZE)
        };
        let result = f(data);
        meta.optimistic_validate(version).then_some(result)
    }
}

impl Clone for PageRef<'_> {
    fn clone(&self) -> Self {
        self.meta().add_pin();
        Self {
            cache: self.cache,
            frame: self.frame,
            page: self.page,
        }
    }
}

impl Drop for PageRef<'_> {
    fn drop(&mut self) {
        self.meta().unpin();
    }
}

impl std::fmt::Debug for PageRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageRef")
            .field("page", &self.page)
            .field("frame", &self.frame)
            .finish()
    }
}

struct UnlockShared<'a>(&'a Frame);

impl Drop for UnlockShared<'_> {
    fn drop(&mut self) {
        self.0.unlock_shared();
    }
}

struct UnlockExclusive<'a>(&'a Frame, u64);

impl Drop for UnlockExclusive<'_> {
    fn drop(&mut self) {
        let before = self.0.version.load(Ordering::Relaxed);
        self.0.unlock_exclusive(self.1);
        debug_assert!(self.0.version.load(Ordering::Relaxed) > before, "monotonic");
    }
}

enum PrefetchState<'a> {
    Ready(PageRef<'a>),
    Merged,
    Loading(Load),
    Taken,
}

/// A fetch started by [`PageCache::prefetch`]. [`Prefetch::wait`] returns the pinned page.
/// Dropping it unwaited still completes the read (parking the thread if it must). It belongs
/// to the user-level thread that made it (the device ticket does), hence not `Send`.
pub struct Prefetch<'a> {
    cache: &'a PageCache,
    page: u64,
    class: PageClass,
    deadline: u64,
    state: PrefetchState<'a>,
    _not_send: PhantomData<*const ()>,
}

impl<'a> Prefetch<'a> {
    /// The page being fetched.
    pub fn page(&self) -> u64 {
        self.page
    }

    /// True when this prefetch issued the device read itself (not a hit, not merged).
    pub fn issued_read(&self) -> bool {
        matches!(self.state, PrefetchState::Loading(_))
    }

    /// Waits for the page (parking if this thread's read is in flight, polling if another
    /// thread's is) and returns it pinned.
    pub fn wait(mut self) -> Result<PageRef<'a>, CacheError> {
        match std::mem::replace(&mut self.state, PrefetchState::Taken) {
            PrefetchState::Ready(page_ref) => Ok(page_ref),
            PrefetchState::Loading(load) => self.cache.finish_load(load),
            PrefetchState::Merged => self.cache.get_until(self.page, self.class, self.deadline),
            PrefetchState::Taken => unreachable!("wait consumes the prefetch"),
        }
    }
}

impl Drop for Prefetch<'_> {
    fn drop(&mut self) {
        if let PrefetchState::Loading(load) =
            std::mem::replace(&mut self.state, PrefetchState::Taken)
        {
            // The ticket must be claimed by its owner and the frame installed (or emptied).
            let _ = self.cache.finish_load(load);
        }
    }
}

impl std::fmt::Debug for Prefetch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetch")
            .field("page", &self.page)
            .field("issued_read", &self.issued_read())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "a latch deadlock")]
    fn a_latch_wait_past_its_limit_panics_naming_the_page() {
        let mut wait = LatchWait::new(7);
        wait.check(); // the first check sets the deadline; no panic
        wait.deadline_ns = Some(0);
        for _ in 0..1024 {
            wait.check(); // the next clock check is at attempt 1025
        }
    }

    #[test]
    fn footprint_matches_the_documented_figures() {
        assert_eq!(std::mem::size_of::<Frame>(), 32);
        assert!(std::mem::size_of::<Mutex<SetState>>() <= 16);
        let cache = PageCache::new(CacheConfig::new(1024 * 4096)).unwrap();
        // 1024 data frames: 33 bytes each + 128 set locks + the frequency sketch (4 bytes a
        // frame).
        let per_frame = cache.metadata_bytes() as f64 / 1024.0;
        assert!(
            (37.0..=39.5).contains(&per_frame),
            "{per_frame} bytes per frame"
        );
    }

    #[test]
    fn pages_spread_over_sets() {
        let cache = PageCache::new(CacheConfig::new(64 * 4096)).unwrap();
        let mut counts = vec![0u32; cache.sets() as usize];
        for page in (0..8000u64).map(|p| p * 8) {
            counts[cache.data_set_of(page).0] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 800 && *max < 1200, "{counts:?}");
    }
}

//! tamer's DRAM page cache: serve a data set far larger than DRAM from a microsecond device,
//! keeping a small set of 4 KiB pages in memory (AstriFlash, AstriFlash, done in software).
//!
//! Pages are numbered `u64`; page `p` lives at device offset `p × 4096`. Code running on tamer
//! user-level threads (any core) asks for a page with [`PageCache::get`]; on a miss the thread
//! submits the device read and *parks* (switch-on-miss) while the core runs other threads.
//!
//! # Design
//!
//! - **Frames.** One [`tamer_device::Arena`] holds the evictable data frames followed by the
//!   pinned partition; every core's device handle is opened on it ([`PageCache::arena`]), so a
//!   read lands directly in its frame (io_uring fixed buffers).
//! - **Lookup** (AstriFlash's frontside controller). `set = mix(page) % sets`, `ways` frames per
//!   set (default 8, as the seed's 64-byte tag column holds 8 tags). The hit path takes no lock:
//!   it compares tags and pins with one compare-and-swap on the frame's state word.
//! - **Version latch** per frame: an `AtomicU64` (even = unlocked, odd = held exclusively,
//!   +1 on acquire and on release, so it only grows) plus a reader count: optimistic reads
//!   (read version, read data, validate), shared and exclusive modes. Pins (in the state word)
//!   keep a frame from eviction; the latch orders access to its bytes.
//! - **Miss-status table** (the seed's Miss Status Row, set-associative as there): a frame in
//!   state `LOADING` is the entry for its page, found by the same tag scan under the set lock.
//!   A second miss on the page waits for that read instead of issuing another, parked on the
//!   frame's control word (`thread::wait_while_eq_u32`: the executor checks the word once per
//!   pass, so a reader on another core wakes it without a message). The table is bounded by `max_misses` (default 256 per
//!   core × cores, e.g. 1024 on 4 cores, and never above the frame count); a miss that finds it
//!   full yields until an entry frees.
//! - **Eviction** per set: CLOCK with a reference bit per frame, preferring a clean victim.
//!   Why CLOCK is enough: with 8 ways a set's history is 8 entries; CLOCK's second chance
//!   separates "touched since the hand passed" from "not", which at this associativity is
//!   nearly all the recency information LRU has (the two differ only in the order among the
//!   ≤ 8 recently touched frames), while LRU would need a write to shared per-set state on every
//!   hit, i.e. a contended cache line or a lock on the hit path. The hit path of CLOCK is one
//!   relaxed store to the frame's own bit, and only when it is not already set.
//!   A frame that is pinned, loading or being written back is never a victim. A dirty victim is
//!   written back first (only when no clean victim exists in the set), while only that page
//!   waits: the set lock is not held during the write, so readers of other pages and sets go on.
//! - **Pinned partition**: [`PageCache::pin_permanent`] loads a page into frames that are never
//!   evicted (index directory, allocator state), as AstriFlash keeps page tables in DRAM.
//! - **Checksums** (optional, [`CacheConfig::checksum`]): every page's last 8 bytes are a
//!   CRC-32C trailer ([`checksum`]), sealed just before a write-back and verified just after a
//!   read; a mismatch fails the read with [`CacheError::Corrupt`] and never installs the page.
//! - **Prefetch**: [`PageCache::prefetch`] starts a miss without waiting, so one job overlaps
//!   several misses (the killer-microsecond study); [`PageCache::get_many`] does it for a list.
//!
//! # Memory footprint
//!
//! The arena: `(data frames + pinned frames) × 4096` bytes. Metadata: 32 bytes per frame (tag,
//! state + pins, latch version, readers, CLOCK and dirty bits) + 1 byte (the arena's in-I/O
//! flag) + one set lock (16 bytes) per `ways` frames (2 bytes per frame at 8 ways) + the
//! admission sketch's 4 bytes per data frame, i.e. about 39 bytes per 4 KiB data frame
//! (0.95 %), plus 24 bytes of directory per pinned frame
//! and 16 fixed latency histograms (about 30 KiB each). [`PageCache::metadata_bytes`] reports
//! the exact figure.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use tamer_cache::{CacheConfig, PageCache};
//! use tamer_device::{EmulatedDevice, EmulatorConfig};
//! use tamer_runtime::{Executor, RuntimeConfig};
//!
//! // 16 frames of cache over a 1 MiB emulated device with 5 µs latency.
//! let cache = Arc::new(PageCache::new(CacheConfig::new(16 * 4096)).unwrap());
//! let model = EmulatorConfig::with_latency_ns(5_000).capacity_bytes(1 << 20).build().unwrap();
//! let device = Box::new(EmulatedDevice::new(model, cache.arena()));
//! let mut executor =
//!     Executor::new(0, RuntimeConfig::with_threads(4), device, cache.arena()).unwrap();
//! let job_cache = cache.clone();
//! executor
//!     .spawn(move || {
//!         let page = job_cache.get(3).unwrap(); // a miss: the thread parks on the read
//!         page.write(|bytes| bytes[0] = 42);
//!         assert_eq!(page.read(|bytes| bytes[0]), 42);
//!         drop(page);
//!         job_cache.flush().unwrap(); // write back dirty pages + durability barrier
//!     })
//!     .unwrap();
//! executor.run_until_idle();
//! assert_eq!(cache.stats().misses, 1);
//! assert_eq!(cache.stats().write_backs, 1);
//! ```

mod cache;
pub mod checksum;
mod config;
mod error;
mod evict;
mod frame;
mod sketch;
mod stats;

pub use cache::{
    PageCache, PageClass, PageRef, Prefetch, BATCH, CLEAN_VICTIMS_WANTED, WRITE_BACK_BATCH,
};
pub use checksum::{crc32c, PAGE_PAYLOAD};
pub use config::{
    Addresses, CacheConfig, PageAddresses, DEFAULT_MISSES_PER_CORE, DEFAULT_WAIT_TIMEOUT,
    DEFAULT_WAYS, MAX_FRAMES, MAX_WAYS,
};
pub use error::CacheError;
pub use stats::CacheStats;

/// Bytes per page (and per frame).
pub const PAGE_SIZE: usize = tamer_device::BLOCK_SIZE;

//! tamer's embedded key-value engine over the page cache ([`tamer_cache`]).
//!
//! ```no_run
//! use tamer_store::{Db, DbOptions, DeviceKind};
//! let options = DbOptions::new(32 << 20).cores(2);
//! let db = Db::open("/var/tmp/my.store", options).unwrap();
//! db.put(b"k", b"v").unwrap();
//! assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
//! // From tamer user-level threads (e.g. a benchmark's many jobs):
//! let h = db.handle();
//! db.runtime().spawn(move || { h.put(b"x", b"y").unwrap(); }).unwrap();
//! db.close().unwrap();
//! ```
//!
//! # API
//!
//! [`Db::open`] starts a [`tamer_runtime::Runtime`] (cores × user-level threads) on the chosen
//! device with a [`tamer_cache::PageCache`] of `cache_bytes` (checksums on). Blocking calls
//! (`get`, `put`, `delete`, `contains`, `cursor`) run as jobs and wait for their result; code
//! already running on the runtime's user-level threads calls the same operations on a
//! [`DbHandle`], where a miss parks only the calling thread. Keys are 1..=64 KiB; values
//! 0..=`max_value_bytes` (default 16 MiB); larger ones fail with [`DbError::KeyTooLarge`] /
//! [`DbError::ValueTooLarge`] naming the limit. The cursor's order is unspecified (hash order).
//!
//! **Ordered trees** beside the hash index: B+-trees in the same cache and durability
//! protocol. [`Db::tree`] (named, in the store's catalog) or [`Db::create_tree`] gives a
//! [`TreeId`]; `tree_put`, `tree_get`, `tree_delete`, [`Db::range`] and [`Db::prefix`] in
//! either [`Direction`], positions (`tree_position`, [`DbHandle::tree_key_at`], O(log n)),
//! the same inside a [`Tx`] (`Tx::tree_*`, atomic with the hash index's changes), and
//! [`Db::drop_tree`] (reclaimed in the background). Tree keys are 0..=[`MAX_TREE_KEY`] bytes.
//!
//! **One runtime per store**, for now: a runtime's per-core device handles are opened on one
//! device (file) and one arena, the store's cache frames, registered with each io_uring as
//! fixed buffers, and its executors run that store's cleaners. Two stores in one process
//! therefore start two runtimes, each with its own cores' threads: on a machine with few
//! cores, give each store fewer `cores` (or open one store). Serving several stores from one
//! runtime needs handles per (core, device) and an arena shared by the caches; not built.
//!
//! # On the device
//!
//! Pages of 4 KiB; bytes 4088..4096 of every page are the cache's CRC-32C trailer
//! ([`tamer_cache::checksum`]: CRC-32C of page number ‖ payload + magic), verified on every read
//! from the device (a mismatch is [`DbError::Corrupt`]) and sealed on every write-back. An
//! all-zero page (never written) reads as valid-empty. Data pages are the exception: they are
//! rewritten in place as records are appended, and a torn rewrite (a crash) must not make
//! their committed records unreadable, so the cache does not verify them
//! (`CacheConfig::checksum_exempt`) and every read of a record checks the record's own CRC
//! instead (a mismatch is `Corrupt` too, for `contains` as for `get`).
//!
//! ```text
//! pages 0, 1        superblock, two copies written alternately: magic "TAMERKV\0", version (6),
//!                   page size, max/global directory depth, directory pages, clean flag,
//!                   high-water mark (next never-used logical page), 0 (was the free-list
//!                   head), key count, max value size, sequence number, hash key (2 × u64),
//!                   the last checkpoint's epoch, its commit timestamp, the staging queues,
//!                   the fixed directory depth and the directory segments, the catalog
//!                   tree's root; the valid copy
//!                   (checksum) with the higher sequence is current, so a torn write loses
//!                   nothing
//! pages 2..2+2D     directory, two copies of D pages: [epoch u64] then 510 u64 slots each
//!                   [bucket's first page: low 55 bits][its current copy: bit 55]
//!                   [bucket's local depth: top 8 bits]
//!                   (D = ceil(2^fixed_depth / 510): 129 pages for the default depth 16);
//!                   the current copy of each page is loaded into the cache's pinned
//!                   partition. Deeper slots live in segments: segment s (slots
//!                   2^(fixed+s)..2^(fixed+s+1)) is ceil(2^(fixed+s) / 510) pages of the
//!                   same format, two consecutive logical pages each, in the space
//! pages 2+2D..      groups of 2 + 1018 pages: [map copy 0][map copy 1] then 1018 managed
//!                   pages, numbered *logically* by the allocator and extents (map pages
//!                   skipped) and physically everywhere else: buckets (two pages: its two
//!                   copies), data pages, extents, free pages, mixed:
//!
//!  map      [kind "PMAP" u32][group u32][epoch u64]
//!           1018 × [kind: top 4 bits (0 free, 1 bucket, 2 data, 3 extent head, 4 extent
//!                   tail, 5 bucket copy, 6 queue, 7 directory, 8 tree node (its current
//!                   copy: bit 0), 9 tree node copy)][a data page's live bytes: low 16
//!                   bits]  (u32 each)
//!  bucket   [kind "BUCK" u32][local depth u16][count u16][pattern u64]
//!           370 × [tag high u32]             (the key hash's bits 16..48)
//!           370 × [tag low u16]              (its bits 0..16)
//!           370 × [page u32][slot u8]        (record offset / 16; slot 0: an extent)
//!           (11 bytes an entry; the first `count` of each array are in use)
//!  data     [kind "DATA" u32][0 u32][written bytes u32][closed-at u32]
//!           records at 16-byte aligned offsets: [key len u32][value len u32]
//!           [crc32c(key‖value) u32][flags u32: 1 a tree entry's][key][value]
//!           (records of ≤ 4072 bytes; a tree entry's key is [tree u64 BE][its key])
//!  tree     [kind "TREE" u32][level u8][0 u8][count u16][tree u64][heap u16][garbage u16]
//!           [0 u32][0 u64], count × [offset u16] in key order, entries at the end:
//!           leaf [key len u16][inline len u16][record page u32][slot u8][key][value ≤ 128]
//!           inner [key len u16][child page u32][entries below u64][key]  (docs/format.md)
//!  extent   n consecutive pages whose payloads form one stream:
//!           [kind "EXTN" u32][0 u32][record header][key][value]  (larger records)
//!  every page: [... payload 4088 bytes ...][crc32c u32][magic "TMCK" u32]
//! ```
//!
//! Stores of versions 1 to 4 are refused at open with a message naming both versions;
//! `docs/format.md` has the details.
//!
//! **Index**: extendible hashing on the low bits of a 64-bit key hash ([`key_hash`]:
//! SipHash-1-3 keyed by 128 random bits chosen when the store is created, so that nobody
//! without the key can craft keys that share a bucket and fill it). The directory has
//! 2^global_depth live slots, at most 2^max_directory_depth (default and largest 2^30); its
//! first 2^pinned_directory_depth (default 2^16 = 65 536 slots, 512 KiB) are pinned, deeper
//! ones live in segments cached as index pages. A full bucket splits (doubling the directory
//! when needed) instead of chaining, so there are no overflow chains at all. An entry keeps
//! the hash's low 48 bits, so a split redistributes entries without reading their records.
//! When a bucket at the maximum depth is full, the put fails with [`DbError::IndexFull`];
//! capacity at depth 30 is 2^30 × 370 entries (≈ 2.7 × 10^11 keys at extendible hashing's
//! typical 69 % fill; 10^9 keys need depth ≈ 24). A store file holds at most 2^32 pages
//! (16 TiB): entries name pages in 32 bits.
//!
//! **The index stays in DRAM** within the one budget the user gives (`cache_bytes`): bucket
//! pages are the cache's *index pages* ([`tamer_cache::PageClass::Index`]), placed in the set
//! their hash pattern names (so they spread evenly over the sets) and kept ahead of data
//! pages: a set gives up a data frame while it holds at most `ways - 1` index frames. At open
//! every bucket page is read in when they fit, else each set's first `ways - 1`
//! ([`DbOptions::warm_index`], [`IndexStats::placeable_index_pages`]). So a point lookup of
//! a record not in DRAM costs exactly one device read, its own page; at 11 bytes an entry and
//! ~70-85 % bucket fill the index costs ≈ 13-16 bytes per key (the tier bench reports it). An
//! index larger than its share is paged like anything else (CLOCK among a set's index frames),
//! never refused; [`Db::index_stats`] reports the split.
//!
//! **Point lookup** = directory slot (pinned, no I/O; a segment page past 2^16 slots is an
//! index page, resident as buckets are) → 1 bucket page (resident when the index fits) → the
//! record's page(s). Worst case: 1 record page for a record ≤ 4072 bytes, or its extent's
//! first page (the header) and then the rest, read 8 at a time overlapped. Each entry whose
//! 48-bit tag equals the key's costs one more record read: with ≤ 370 entries a bucket at
//! depth d, about 370 × 2^-(48-d) per lookup (≈ 10^-8 at depth 24). Splits can make a lookup retry: it re-reads the directory slot and
//! the bucket.
//!
//! **Writes are out of place**: a put writes the new record to fresh space (the open data
//! page's tail, or a new extent), then switches the one bucket entry under the bucket's
//! exclusive latch, then releases the old record. A split writes the new bucket before any
//! directory slot points to it; directory doubling writes the upper half before publishing the
//! new depth.
//!
//! # Space reuse
//!
//! Page-granular. The page map counts a data page's live bytes (changed under the data page's
//! latch, so a page cannot be freed between a record's write and its count); once closed for
//! appends (the allocator moved on) and with every reserved record written, a data page is
//! free again when its live bytes reach zero. An extent frees all its pages when its record
//! dies. A free page is marked in the map first, then handed to the in-DRAM free extents
//! (coalesced, best fit by size), which a clean open rebuilds from the map.
//! **Compaction** reclaims the dead bytes of data pages that still hold live records: a
//! settled page whose live bytes fall to [`COMPACT_LIVE_BYTES`] (half a page) or fewer
//! is queued (in DRAM, at most [`SPARSE_QUEUE`] pages; a full queue drops the hint), and the
//! background cleaner (under space pressure: when the free pages plus the room below the
//! file's end fall under [`COMPACT_RESERVE_MIN_PAGES`] or 1/8 of the pages in use) or
//! [`Db::compact`] (at once) moves its live records to the open page: each move
//! is an ordinary out-of-place write whose entry switch is conditional (it happens only if the
//! key's entry still points at the same record bytes, under the bucket's exclusive latch), so
//! a concurrent put or delete of the key wins and the copy is released. The last move frees the
//! page. Under pressure, pages in use thus stay within about 4× the live data of small
//! records; with room to spare the store does not pay the moves' misses and writes. The queue is
//! not persisted: pages already sparse at close are not compacted after reopening (a scan at
//! open, or recovery's scan, could refill it), nor is a page whose last
//! reserved record is still being written when it crosses the threshold.
//! **Not reused**: bucket pages (buckets never merge); the directory region (fixed). The file
//! grows on demand (`posix_fallocate`, by ≥ 1/4 or 16 MiB) up to `max_file_bytes`; a full
//! disk, a file-size limit or a full emulated device fails the operation with
//! [`DbError::NoSpace`], and data already stored is unchanged.
//!
//! # Concurrency
//!
//! Every core's user-level threads share one cache and one index. Readers take the bucket's
//! shared latch and hold it while reading a small record (so the record cannot be released
//! under them); a record in an extent (over 4072 bytes) is only found under the latch and
//! read after it is released, with the checkpoint epoch seen under the latch: freed pages are
//! reused only after a checkpoint, so an unchanged epoch after the read proves the bytes were
//! the record's (else the lookup is tried again, 4 times, then done under the latch). A writer
//! of the bucket never waits for a large read. Updates take the bucket's exclusive latch for
//! the entry switch only. Splits are
//! serialized by a yield lock (waiters yield their core, never block it) and hold the bucket's
//! exclusive latch. The allocator is a `std::sync::Mutex` held for in-memory updates only,
//! never across a park or a syscall (the file grows outside it, and the space is then claimed
//! under it; after 8 lost races it grows under it, to guarantee progress). Lock order: split
//! lock → bucket → data/extent pages → directory pages → allocator.
//!
//! **Background cleaning** ([`DbOptions::cleaner`], on by default): one user-level thread per
//! core writes back dirty pages that the cache's CLOCK would evict next
//! ([`tamer_cache::PageCache::clean_some`]), so a miss finds a clean victim and reads at once
//! instead of first writing a victim back; under space pressure each pass also compacts up
//! to 4 queued sparse data pages. It sleeps 200 µs when a pass finds nothing, backing off to 10 ms after a whole
//! empty sweep of its sets (so an idle store's cores sleep), and is stopped (and waited for)
//! at close.
//!
//! # Memory
//!
//! Resident: `cache_bytes` (the pinned partition of (1 + D) × 4 KiB, 520 KiB at depth 16,
//! included; the rest index and data frames) + cache metadata (≈ 39 bytes per frame, the admission sketch's 4 included) + per
//! core: `threads_per_core` × 64 KiB stacks (the
//! runtime's default; only touched stack pages are resident) and the device ring, plus the
//! free-extent map (≈ 100 bytes per free extent) and transient per-operation buffers (a value
//! being read or written). An emulated device adds its whole capacity in DRAM.
//!
//! # Crash safety
//!
//! The store is **crash-consistent at checkpoints** (`docs/durability.md`): after a crash at
//! any instant, including torn 512-byte sector writes, [`Db::open`] finds the store exactly
//! as of its last completed checkpoint (`Db::check` clean, nothing half done). A checkpoint
//! runs at [`Db::flush`] (so a `flush` that returned is durable), at close, every
//! [`CHECKPOINT_INTERVAL`] (1 s) while the store changes (with the cleaner on), and when too many
//! index pages or freed pages wait. Index pages (buckets, directory pages, page map) have two
//! copies; between checkpoints they change only in DRAM (the cache holds them back), and a
//! checkpoint writes each changed one to the copy that does not hold the last checkpoint's
//! image, then the superblock with the new epoch. Freed pages are reused only after the
//! checkpoint that records them free. Records are written out of place and flushed before
//! the index that names them. What a crash loses: the changes since the last checkpoint
//! (less with the staging queues: see [`Durability`]).

mod alloc;
mod copies;
mod db;
mod device;
mod engine;
mod error;
mod layout;

pub use db::{
    prefix_end, Cursor, Db, DbHandle, DbOptions, IndexStats, TreeRange, CHECKPOINT_INTERVAL,
    DEFAULT_DIRECTORY_DEPTH, DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_PINNED_DIRECTORY_DEPTH,
};
pub use device::{DeviceKind, StripePart, MAX_STRIPE_PARTS};
pub use engine::{
    CheckReport, CheckpointStats, CommitStats, CompactionStats, Direction, Durability, Problem,
    RecoveryObserver, RecoveryPhase, RecoveryProgress, RecoveryStats, TreeId, Tx, WriteBatch,
    COMPACT_LIVE_BYTES, COMPACT_RESERVE_FRACTION, COMPACT_RESERVE_MIN_PAGES, FREED_PAGES_MIN,
    MAX_KEY_BYTES, MAX_PROBLEMS_LISTED, MAX_TX_ATTEMPTS, MAX_TX_BYTES, RECLAIM_BATCH,
    SMALL_KEY_MAX, SMALL_VALUE_MAX, SPARSE_QUEUE,
};
pub use error::DbError;
pub use layout::{
    key_hash, BUCKET_CAP, INLINE_MAX, MAX_DELTAS, MAX_SMALL_RECORD, MAX_TREE_KEY, QUEUE_PAGES_MAX,
    QUEUE_PAGES_MIN,
};

/// Largest `max_directory_depth`: 2^30 slots (an 8 GiB directory, ≈ 2.7 × 10^11 keys at
/// extendible hashing's typical fill); entry tags keep 48 bits, so 18 bits past the deepest
/// directory still tell keys apart.
pub const MAX_DIRECTORY_DEPTH: u32 = 30;

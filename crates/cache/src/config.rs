//! Cache configuration with stated bounds.

use std::sync::Arc;
use std::time::Duration;

use tamer_device::BLOCK_SIZE;
use tamer_runtime::io::WaitMode;

use crate::CacheError;

/// Default associativity: 8 ways, as AstriFlash's 64-byte tag column holds 8 tags of 8 bytes.
pub const DEFAULT_WAYS: usize = 8;
/// Most ways per set.
pub const MAX_WAYS: usize = 64;
/// Default miss-status-table entries per core.
pub const DEFAULT_MISSES_PER_CORE: usize = 256;
/// Most frames in the arena (data + pinned): the arena's limit, 2^20 frames (4 GiB).
pub const MAX_FRAMES: u64 = 1 << 20;
/// Default bound on every wait for another thread (a merged miss, a full miss-status table, a
/// fully pinned set).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the device holds a page (see [`CacheConfig::addresses`]). Called on misses and
/// write-backs (under a set's lock, so an implementation must not call into the cache).
pub trait PageAddresses: Send + Sync {
    /// The device page a miss on `page` reads (its checksum is verified against that number).
    fn read_from(&self, page: u64) -> u64;
    /// The device page a write-back of `page` goes to (sealed with that number), or `None` to
    /// hold the dirty page back: it is then neither written back (by a victim's eviction, the
    /// cleaner or [`crate::PageCache::flush`]) nor evicted until this says where, or the page
    /// is written with [`crate::PageCache::write_back_to`].
    fn write_to(&self, page: u64) -> Option<u64>;
}

/// A shared [`PageAddresses`].
#[derive(Clone)]
pub struct Addresses(pub Arc<dyn PageAddresses>);

impl std::fmt::Debug for Addresses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Addresses(..)")
    }
}

/// What a [`crate::PageCache`] is sized by.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Bytes of evictable data frames: a multiple of 4096, at least `ways` frames. Rounded down
    /// to whole sets (`ways` frames each).
    pub capacity_bytes: u64,
    /// Frames per set, 1..=64 (default 8).
    pub ways: usize,
    /// Bytes of the pinned partition (never evicted; metadata), a multiple of 4096, may be 0.
    pub pinned_bytes: u64,
    /// Bound of the miss-status table: misses in flight over all cores, at least 1. Default
    /// 256 × the machine's cores ([`CacheConfig::new`]) or 256 × `cores` ([`CacheConfig::cores`]).
    /// The effective bound is at most the number of frames (each miss holds one).
    pub max_misses: usize,
    /// Device size in bytes when known: pages past it fail with
    /// [`CacheError::PageOutOfRange`] before any I/O. When `None`, the device's own range check
    /// reports the same error.
    pub device_capacity_bytes: Option<u64>,
    /// Bound on every wait for another thread (default 10 s).
    pub wait_timeout: Duration,
    /// Seal every page with a CRC-32C trailer (its last 8 bytes, see [`crate::checksum`])
    /// before it is written back and verify it after it is read; a bad page fails with
    /// [`CacheError::Corrupt`]. Default off (the page is then entirely the user's).
    pub checksum: bool,
    /// With `checksum`: pages whose bytes, as read, make this return true are not verified
    /// (they are still sealed on write-back). For pages that validate themselves and are
    /// rewritten in place by appending, where a torn rewrite must not make the whole page
    /// unreadable: the store's data pages, whose records carry their own CRC. Default `None`.
    pub checksum_exempt: Option<fn(&[u8]) -> bool>,
    /// Where the device holds each page, for a user that keeps some pages in two copies and
    /// decides which copy a read or a write-back uses, or holds a dirty page back (a
    /// checkpoint protocol). `None` (default): page `p` is at device page `p`.
    pub addresses: Option<Addresses>,
    /// How the thread that issued a miss's read (or a victim's write-back) waits for it:
    /// [`WaitMode::Park`] (default: switch-on-miss, other threads run) or [`WaitMode::Spin`]
    /// (the core waits: a miss blocks the core, the `flash-sync` baseline of AstriFlash).
    /// Waits for *other* threads' reads (merged misses, a full table) always yield.
    pub miss_wait: WaitMode,
    /// Most index frames ([`crate::PageClass::Index`]) a set keeps ahead of its data frames
    /// (see the crate's `evict` module); `None` (default): `ways - 1`, so at least one way
    /// of every set stays available to data pages. At most `ways`.
    pub index_ways_max: Option<usize>,
}

impl CacheConfig {
    /// `capacity_bytes` of data frames, 8 ways, no pinned partition, 256 misses per core of
    /// the host, 10 s wait bound.
    pub fn new(capacity_bytes: u64) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            capacity_bytes,
            ways: DEFAULT_WAYS,
            pinned_bytes: 0,
            max_misses: DEFAULT_MISSES_PER_CORE * cores,
            device_capacity_bytes: None,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            checksum: false,
            checksum_exempt: None,
            addresses: None,
            miss_wait: WaitMode::Park,
            index_ways_max: None,
        }
    }

    /// Sets `index_ways_max`.
    pub fn index_ways_max(mut self, max: usize) -> Self {
        self.index_ways_max = Some(max);
        self
    }

    /// `index_ways_max`, or its default `ways - 1`.
    pub fn effective_index_ways_max(&self) -> usize {
        self.index_ways_max
            .unwrap_or(self.ways.saturating_sub(1))
            .min(self.ways)
    }

    /// Sets `miss_wait`.
    pub fn miss_wait(mut self, mode: WaitMode) -> Self {
        self.miss_wait = mode;
        self
    }

    /// Sets `ways`.
    pub fn ways(mut self, ways: usize) -> Self {
        self.ways = ways;
        self
    }

    /// Sets `pinned_bytes`.
    pub fn pinned_bytes(mut self, pinned_bytes: u64) -> Self {
        self.pinned_bytes = pinned_bytes;
        self
    }

    /// Sets `max_misses`.
    pub fn max_misses(mut self, max_misses: usize) -> Self {
        self.max_misses = max_misses;
        self
    }

    /// Sets `max_misses` to 256 × `cores`.
    pub fn cores(mut self, cores: usize) -> Self {
        self.max_misses = DEFAULT_MISSES_PER_CORE * cores;
        self
    }

    /// Sets `device_capacity_bytes`.
    pub fn device_capacity_bytes(mut self, bytes: u64) -> Self {
        self.device_capacity_bytes = Some(bytes);
        self
    }

    /// Sets `checksum`.
    pub fn checksum(mut self, on: bool) -> Self {
        self.checksum = on;
        self
    }

    /// Sets `addresses`.
    pub fn addresses(mut self, addresses: Arc<dyn PageAddresses>) -> Self {
        self.addresses = Some(Addresses(addresses));
        self
    }

    /// Sets `checksum_exempt`.
    pub fn checksum_exempt(mut self, exempt: fn(&[u8]) -> bool) -> Self {
        self.checksum_exempt = Some(exempt);
        self
    }

    /// Sets `wait_timeout`.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Checks every bound and returns (sets, data frames, pinned frames).
    pub(crate) fn validate(&self) -> Result<(u32, u32, u32), CacheError> {
        let fail = |msg: String| Err(CacheError::Config(msg));
        let block = BLOCK_SIZE as u64;
        if !(1..=MAX_WAYS).contains(&self.ways) {
            return fail(format!("ways = {}: must be 1..={MAX_WAYS}", self.ways));
        }
        if !self.capacity_bytes.is_multiple_of(block) {
            return fail(format!(
                "capacity_bytes = {}: must be a multiple of 4096",
                self.capacity_bytes
            ));
        }
        if !self.pinned_bytes.is_multiple_of(block) {
            return fail(format!(
                "pinned_bytes = {}: must be a multiple of 4096",
                self.pinned_bytes
            ));
        }
        let frames = self.capacity_bytes / block;
        let sets = frames / self.ways as u64;
        if sets == 0 {
            return fail(format!(
                "capacity_bytes = {}: must hold at least one set of {} frames ({} bytes)",
                self.capacity_bytes,
                self.ways,
                self.ways as u64 * block
            ));
        }
        let data_frames = sets * self.ways as u64;
        let pinned_frames = self.pinned_bytes / block;
        if data_frames + pinned_frames > MAX_FRAMES {
            return fail(format!(
                "capacity_bytes + pinned_bytes = {} bytes: at most {} bytes (the arena's limit)",
                self.capacity_bytes + self.pinned_bytes,
                MAX_FRAMES * block
            ));
        }
        if self.max_misses == 0 {
            return fail("max_misses = 0: must be at least 1".into());
        }
        if let Some(bytes) = self.device_capacity_bytes {
            if bytes < block {
                return fail(format!(
                    "device_capacity_bytes = {bytes}: must be at least one 4096-byte page"
                ));
            }
        }
        if self.index_ways_max.is_some_and(|max| max > self.ways) {
            return fail(format!(
                "index_ways_max = {:?}: at most ways = {}",
                self.index_ways_max, self.ways
            ));
        }
        if self.wait_timeout.is_zero() {
            return fail("wait_timeout = 0: must be positive".into());
        }
        Ok((sets as u32, data_frames as u32, pinned_frames as u32))
    }
}

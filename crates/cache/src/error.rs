//! Every way a cache operation can fail.

use std::fmt;

use tamer_device::DeviceError;

/// Errors of [`crate::PageCache`]. Messages name the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// A bad [`crate::CacheConfig`] value.
    Config(String),
    /// The device failed a read or a write (or refused it).
    Device(DeviceError),
    /// The page lies past the end of the device.
    PageOutOfRange {
        /// The page asked for.
        page: u64,
        /// The device's size, bytes.
        capacity_bytes: u64,
    },
    /// The call needs a tamer user-level thread (it may park on a device access).
    NotInUserThread,
    /// The miss-status table stayed full for the whole wait bound.
    MissTableFull {
        /// The table's size ([`crate::CacheConfig::max_misses`]).
        max_misses: usize,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// Every way of the page's set stayed pinned or busy for the whole wait bound.
    SetPinned {
        /// The page asked for.
        page: u64,
        /// Ways per set.
        ways: usize,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// Another thread's miss on this page did not finish within the wait bound (or this very
    /// thread holds an unwaited [`crate::Prefetch`] of it).
    MissTimeout {
        /// The page asked for.
        page: u64,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The pinned partition has no free frame.
    PinnedFull {
        /// The partition's size, frames.
        pinned_frames: u32,
    },
    /// The page read from the device failed its checksum (it is not installed).
    Corrupt {
        /// The page read.
        page: u64,
    },
}

impl From<DeviceError> for CacheError {
    fn from(err: DeviceError) -> Self {
        CacheError::Device(err)
    }
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Config(msg) => write!(f, "bad cache configuration: {msg}"),
            CacheError::Device(err) => write!(f, "device error: {err}"),
            CacheError::PageOutOfRange {
                page,
                capacity_bytes,
            } => write!(
                f,
                "page {page} lies past the end of the device ({capacity_bytes} bytes, {} pages)",
                capacity_bytes / tamer_device::BLOCK_SIZE as u64
            ),
            CacheError::NotInUserThread => write!(
                f,
                "page-cache access outside a tamer user-level thread: run it in a job spawned on \
                 an Executor or a Runtime"
            ),
            CacheError::MissTableFull {
                max_misses,
                waited_ms,
            } => write!(
                f,
                "the miss-status table stayed full ({max_misses} misses in flight) for \
                 {waited_ms} ms: raise max_misses or lower the load"
            ),
            CacheError::SetPinned {
                page,
                ways,
                waited_ms,
            } => write!(
                f,
                "all {ways} ways of the set of page {page} stayed pinned for {waited_ms} ms: \
                 drop PageRefs sooner, or raise ways or the capacity"
            ),
            CacheError::MissTimeout { page, waited_ms } => write!(
                f,
                "the miss on page {page} did not complete within {waited_ms} ms (does this \
                 thread hold an unwaited Prefetch of it?)"
            ),
            CacheError::PinnedFull { pinned_frames } => write!(
                f,
                "the pinned partition is full ({pinned_frames} frames): raise pinned_bytes"
            ),
            CacheError::Corrupt { page } => write!(
                f,
                "page {page} failed its checksum when read from the device: the stored data is \
                 damaged (restore it from a copy)"
            ),
        }
    }
}

impl std::error::Error for CacheError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CacheError::Device(err) => Some(err),
            _ => None,
        }
    }
}

//! The `mmap` device: the data file mapped into memory, so that the kernel's demand paging does
//! the I/O. This is the `os-paging` baseline of the tier benchmark (AstriFlash's comparison with
//! OS swapping/paging), not a fast path: a page fault blocks the whole OS thread, and with it
//! every user-level thread of its core, for the length of a device read.
//!
//! Each request copies between the mapping and an arena frame on the submitting core, at the
//! doorbell (as [`crate::SyncDevice`] does with `pread`/`pwrite`). The mapping is advised
//! `MADV_RANDOM`, as mmap-based stores do for point lookups, so a fault reads its own page and
//! no read-ahead cluster: the kernel's page cache holds what was touched, within whatever
//! memory limit the process runs under (a cgroup, in the benchmark). [`Device::flush`] is
//! `msync(MS_SYNC)` over the file.

use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::sync::DoorbellQueue;
use crate::{Arena, Completion, Device, DeviceError, DeviceFile, DeviceStats, IoKind, IoRequest};

/// Address space reserved for a mapping: the file may grow up to this many bytes without being
/// remapped (64 GiB; address space only, nothing is resident until touched).
pub const MMAP_RESERVE_BYTES: u64 = 64 << 30;

/// A shared, writable mapping of a [`DeviceFile`], reserved up to [`MMAP_RESERVE_BYTES`].
/// Only the file's current capacity may be touched: a page past the end of the file faults
/// with `SIGBUS`, so every access is validated against [`DeviceFile::capacity_bytes`].
#[derive(Debug)]
pub struct FileMap {
    file: Arc<DeviceFile>,
    base: NonNull<u8>,
    reserved_bytes: usize,
}

// SAFETY: the mapping is shared memory owned by this value until drop; concurrent access to
// one page from two cores is ruled out by the callers (the page cache never has a read and a
// write of one page in flight at once), as for the file devices.
unsafe impl Send for FileMap {}
// SAFETY: as above.
unsafe impl Sync for FileMap {}

impl FileMap {
    /// Maps `file` (shared, read-write) and advises random access.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use tamer_device::{DeviceFile, FileMap};
    ///
    /// let file = Arc::new(DeviceFile::open("/var/tmp/data".as_ref(), 1 << 20).unwrap());
    /// let map = FileMap::new(file).unwrap();
    /// assert_eq!(map.capacity_bytes(), 1 << 20);
    /// ```
    pub fn new(file: Arc<DeviceFile>) -> Result<Self, DeviceError> {
        let reserved_bytes = MMAP_RESERVE_BYTES as usize;
        if file.capacity_bytes() > MMAP_RESERVE_BYTES {
            return Err(DeviceError::Config(format!(
                "{} holds {} bytes: the mmap device maps at most {MMAP_RESERVE_BYTES}",
                file.path().display(),
                file.capacity_bytes()
            )));
        }
        // SAFETY: a fresh mapping chosen by the kernel over a valid descriptor; nothing else
        // refers to that address range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                file.raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(DeviceError::os(
                format!("mmap of {}", file.path().display()),
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: advice on the range just mapped.
        unsafe { libc::madvise(ptr, reserved_bytes, libc::MADV_RANDOM) };
        Ok(Self {
            file,
            base: NonNull::new(ptr.cast()).expect("mmap returned a non-null address"),
            reserved_bytes,
        })
    }

    /// The file's usable size now, at most the reserved range (a file grown past it is
    /// refused beyond it with an out-of-range error, never touched).
    pub fn capacity_bytes(&self) -> u64 {
        self.file.capacity_bytes().min(self.reserved_bytes as u64)
    }

    /// The mapped file.
    pub fn file(&self) -> &Arc<DeviceFile> {
        &self.file
    }

    /// `msync(MS_SYNC)` of the file's current extent, then `fdatasync` for its metadata.
    pub fn sync(&self) -> Result<(), DeviceError> {
        let len = self.capacity_bytes() as usize;
        // SAFETY: the range lies inside the mapping (capacity ≤ reserve, checked at map time
        // and by `validate` on every request that could have dirtied it).
        let rc = unsafe { libc::msync(self.base.as_ptr().cast(), len, libc::MS_SYNC) };
        if rc != 0 {
            return Err(DeviceError::os(
                format!("msync of {}", self.file.path().display()),
                std::io::Error::last_os_error(),
            ));
        }
        self.file.sync_data()
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mapped in `new`; no reference into it outlives self.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.reserved_bytes) };
    }
}

/// A per-core handle on a [`FileMap`]: every doorbell performs its requests with copies that
/// may fault (blocking the core), then completions wait to be polled.
pub struct MmapDevice {
    map: Arc<FileMap>,
    arena: Arc<Arena>,
    queue: DoorbellQueue,
}

impl MmapDevice {
    /// A handle on `map` moving data to and from `arena`; at most `queue_depth` requests pushed
    /// and not yet reaped.
    pub fn new(map: Arc<FileMap>, arena: Arc<Arena>, queue_depth: usize) -> Self {
        Self {
            map,
            arena,
            queue: DoorbellQueue::new(queue_depth),
        }
    }
}

impl FileMap {
    /// Copies one validated request between the mapping and its frames (a fault blocks).
    fn perform(&self, arena: &Arena, request: &IoRequest) -> Result<(), DeviceError> {
        if request.kind == IoKind::Flush {
            return self.sync();
        }
        let len = request.len_bytes() as usize;
        let frame = arena.frame_ptr(request.frame);
        // SAFETY: `validate` on push checked offset + len ≤ the file's capacity (which only
        // grows) ≤ the reserved mapping, so the range is mapped and backed by the file; the
        // frames are inside the arena and marked in I/O, so only this request touches them.
        unsafe {
            let mapped = self.base.as_ptr().add(request.offset_bytes as usize);
            match request.kind {
                IoKind::Read => std::ptr::copy_nonoverlapping(mapped, frame, len),
                IoKind::Write => std::ptr::copy_nonoverlapping(frame, mapped, len),
                IoKind::Flush => unreachable!("handled above"),
            }
        }
        Ok(())
    }
}

impl Device for MmapDevice {
    fn name(&self) -> &'static str {
        "mmap"
    }

    fn capacity_bytes(&self) -> u64 {
        self.map.capacity_bytes()
    }

    fn queue_depth(&self) -> usize {
        self.queue.queue_depth()
    }

    fn in_flight(&self) -> usize {
        self.queue.in_flight()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        let capacity_bytes = self.map.capacity_bytes();
        self.queue.push(request, capacity_bytes, &self.arena)
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        let (map, arena) = (&self.map, &self.arena);
        Ok(self
            .queue
            .submit(arena, |request| map.perform(arena, request)))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        self.queue.poll(out)
    }

    fn wait(
        &mut self,
        _timeout: Duration,
        out: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.submit()?;
        Ok(self.poll(out))
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.map.sync()
    }

    fn stats(&self) -> &DeviceStats {
        &self.queue.stats
    }

    fn doorbell_is_cheap(&self) -> bool {
        // No syscall: the copies run at the doorbell, so ring it at every submit (a miss then
        // faults right away, as a load from a mapped page would).
        true
    }
}

//! Block devices for tamer: the bottom layer every page access goes through.
//!
//! A [`Device`] is a per-core handle to a block store addressed in 4 KiB blocks. It works like an
//! NVMe queue pair that the application manages itself (the killer-microsecond study's "application-managed queues",
//! the Moneta study's "no scheduler hop, each thread issues its own requests, poll for completions"):
//!
//! 1. [`Device::push`] writes a request descriptor into the submission queue (no syscall);
//! 2. [`Device::submit`] rings the doorbell for everything pushed so far (at most one syscall);
//! 3. [`Device::poll`] reaps completions from the completion queue (no syscall; io_uring makes
//!    one only when its ring flags completions queued for this thread, see [`UringDevice`]);
//! 4. [`Device::wait`] blocks an idle core in the kernel until a completion or a timeout.
//!
//! Data moves between the device and an [`Arena`]: one preallocated, 4 KiB-aligned region of
//! frames, registered with io_uring as a fixed buffer, shared by every core's handle. Requests name
//! frames by index, so a buffer is aligned by construction.
//!
//! Implementations:
//! - [`UringDevice`]: io_uring over a preallocated file opened with `O_DIRECT` (one ring per core);
//! - [`EmulatedDevice`]: the killer-microsecond study's microsecond-latency device emulator, DRAM-backed, with latency
//!   in nanoseconds, seeded jitter, a queue-depth cap and an IOPS/bandwidth cap;
//! - [`SyncDevice`]: blocking `pread`/`pwrite`, the baseline where the core waits for the device;
//! - [`StripedDevice`]: several devices (one per drive) as one, striped in units of blocks;
//! - [`FaultyDevice`]: the emulator with power loss (unflushed writes kept, dropped or torn at
//!   512-byte sectors), read errors and a full device injected, for crash tests.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use tamer_device::{Arena, Device, EmulatedDevice, EmulatorConfig, IoRequest};
//!
//! let arena = Arc::new(Arena::new(2).unwrap());
//! let model = EmulatorConfig::with_latency_ns(1_000).capacity_bytes(1 << 20).build().unwrap();
//! let mut device = EmulatedDevice::new(model, arena.clone());
//! // SAFETY: nothing else uses frame 0 and it is not in an I/O.
//! unsafe { arena.frame_mut(0).fill(7) };
//! device.push(IoRequest::write(8192, 0, 1, 1)).unwrap();
//! device.submit().unwrap();
//! let mut done = Vec::new();
//! while device.poll(&mut done) == 0 {}
//! assert!(done[0].result.is_ok());
//! ```

mod arena;
mod emulated;
mod error;
mod fault;
mod file;
mod mmap;
mod open;
mod stats;
mod striped;
mod sync;
mod uring;

pub use arena::Arena;
pub use emulated::{EmulatedDevice, EmulatorConfig, EmulatorModel};
pub use error::DeviceError;
pub use fault::{
    CrashPoint, Fate, FaultCounts, FaultPlan, FaultState, FaultyDevice, IMAGE_CHUNK_BYTES,
    SECTOR_BYTES,
};
pub use file::{fill_with_data, DeviceFile};
pub use mmap::{FileMap, MmapDevice, MMAP_RESERVE_BYTES};
pub use open::{open_device, DeviceSpec};
pub use stats::DeviceStats;
pub use striped::{stripe_place, FileSet, StripedDevice, STRIPE_UNIT_BLOCKS};
pub use sync::SyncDevice;
pub use uring::{uring_available, UringConfig, UringDevice, UringSetup};

use std::time::Duration;

/// The unit of every device access: 4 KiB, the page size of the cache above.
pub const BLOCK_SIZE: usize = 4096;

/// Most frames in one request (16 MiB): larger transfers are split by the caller.
pub const MAX_REQUEST_FRAMES: u32 = 4096;

/// Direction of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IoKind {
    /// Device to arena.
    Read,
    /// Arena to device.
    Write,
    /// Durability barrier, asynchronous: when it completes, every write whose completion was
    /// reaped (on any handle of the device) before it was pushed is durable. It moves no data
    /// (`frames` 0) and does not order writes still in flight: a write pushed in the same batch
    /// may or may not be covered. io_uring: `IORING_OP_FSYNC` with `DATASYNC`; the emulator:
    /// [`EmulatorConfig::flush_latency_ns`]; sync and mmap: `fdatasync` / `msync` at the
    /// doorbell.
    Flush,
}

/// One block request: `frames` consecutive arena frames starting at `frame`, moved to or from
/// `frames` consecutive blocks starting at byte `offset_bytes` of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// Read, write or flush.
    pub kind: IoKind,
    /// Byte offset on the device; must be a multiple of [`BLOCK_SIZE`].
    pub offset_bytes: u64,
    /// First arena frame.
    pub frame: u32,
    /// Number of frames (and blocks); at least 1.
    pub frames: u32,
    /// Returned unchanged in the [`Completion`].
    pub tag: u64,
}

impl IoRequest {
    /// A read of `frames` blocks at `offset_bytes` into arena frames starting at `frame`.
    pub fn read(offset_bytes: u64, frame: u32, frames: u32, tag: u64) -> Self {
        Self {
            kind: IoKind::Read,
            offset_bytes,
            frame,
            frames,
            tag,
        }
    }

    /// A write of `frames` arena frames starting at `frame` to the device at `offset_bytes`.
    pub fn write(offset_bytes: u64, frame: u32, frames: u32, tag: u64) -> Self {
        Self {
            kind: IoKind::Write,
            offset_bytes,
            frame,
            frames,
            tag,
        }
    }

    /// A durability barrier (see [`IoKind::Flush`]): no frames, no offset.
    pub fn flush(tag: u64) -> Self {
        Self {
            kind: IoKind::Flush,
            offset_bytes: 0,
            frame: 0,
            frames: 0,
            tag,
        }
    }

    /// Length of the transfer in bytes.
    pub fn len_bytes(&self) -> u64 {
        u64::from(self.frames) * BLOCK_SIZE as u64
    }
}

/// The outcome of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's [`IoRequest::tag`], handed back.
    pub tag: u64,
    /// Whether the request succeeded.
    pub result: Result<(), DeviceError>,
    /// From the doorbell that made the request visible to the completion being reaped.
    pub latency_ns: u64,
}

/// A per-core handle to a block device. Not `Sync`: each core owns its handle (its own ring).
pub trait Device: Send {
    /// A short name for reports: `uring`, `emulated`, `sync`.
    fn name(&self) -> &'static str;

    /// Usable size in bytes, a multiple of [`BLOCK_SIZE`].
    fn capacity_bytes(&self) -> u64;

    /// Most requests this handle keeps in flight (pushed and not yet reaped); a push beyond it
    /// fails with [`DeviceError::QueueFull`].
    fn queue_depth(&self) -> usize;

    /// Requests pushed and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Queue one request without making it visible to the device. Validates alignment, range and
    /// frame indices; the frames are marked as in I/O until the completion is reaped.
    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError>;

    /// Ring the doorbell for every request pushed since the last call: at most one syscall, none
    /// when nothing is new. Returns how many requests were made visible.
    fn submit(&mut self) -> Result<usize, DeviceError>;

    /// As [`Device::submit`], with the caller's reading of [`now_ns`] taken just before: a
    /// device that timestamps its doorbell (the emulator) uses it instead of reading the clock
    /// again, so a scheduler step reads the clock once. Others ignore it.
    fn submit_at(&mut self, now_ns: u64) -> Result<usize, DeviceError> {
        let _ = now_ns;
        self.submit()
    }

    /// Append every completion that is ready to `out` without blocking (and, for io_uring,
    /// without a syscall unless the ring says completions are waiting to be flushed: with
    /// cooperative task-run the kernel posts them at the thread's next kernel entry instead of
    /// interrupting the core, and `poll` is that entry). Returns how many were appended.
    fn poll(&mut self, out: &mut Vec<Completion>) -> usize;

    /// As [`Device::poll`], with the caller's reading of [`now_ns`] taken just before (see
    /// [`Device::submit_at`]). A reading from the past can only make a completion later, never
    /// earlier.
    fn poll_at(&mut self, now_ns: u64, out: &mut Vec<Completion>) -> usize {
        let _ = now_ns;
        self.poll(out)
    }

    /// Block the calling OS thread until at least one completion is ready or `timeout` passes.
    /// For an idle core only; returns what [`Device::poll`] would.
    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError>;

    /// Durability barrier, blocking: every write completed before this call is durable when it
    /// returns. For tools and close; a core that must not block pushes [`IoRequest::flush`].
    fn flush(&mut self) -> Result<(), DeviceError>;

    /// Counters and the latency histogram of this handle.
    fn stats(&self) -> &DeviceStats;

    /// True when [`Device::submit`] costs no syscall, so a scheduler may ring it after every
    /// request instead of batching per loop iteration.
    fn doorbell_is_cheap(&self) -> bool;
}

/// Checks what every implementation checks before accepting a request.
pub(crate) fn validate(
    request: &IoRequest,
    capacity_bytes: u64,
    arena: &Arena,
) -> Result<(), DeviceError> {
    if request.kind == IoKind::Flush {
        if request.frames != 0 || request.offset_bytes != 0 || request.frame != 0 {
            return Err(DeviceError::Config(format!(
                "a flush moves no data: frames, frame and offset must be 0, got {request:?}"
            )));
        }
        return Ok(());
    }
    if request.frames == 0 {
        return Err(DeviceError::EmptyRequest);
    }
    if !request.offset_bytes.is_multiple_of(BLOCK_SIZE as u64) {
        return Err(DeviceError::MisalignedOffset {
            offset_bytes: request.offset_bytes,
        });
    }
    let end = request.offset_bytes.checked_add(request.len_bytes());
    if end.is_none_or(|end| end > capacity_bytes) {
        return Err(DeviceError::OutOfRange {
            offset_bytes: request.offset_bytes,
            len_bytes: request.len_bytes(),
            capacity_bytes,
        });
    }
    let frame_end = u64::from(request.frame) + u64::from(request.frames);
    let crosses_chunk = arena.buffer_index(request.frame)
        != arena.buffer_index((frame_end - 1).min(u64::from(u32::MAX)) as u32);
    if frame_end > u64::from(arena.frame_count())
        || request.frames > MAX_REQUEST_FRAMES
        || crosses_chunk
    {
        return Err(DeviceError::BadFrame {
            frame: request.frame,
            frames: request.frames,
            arena_frames: arena.frame_count(),
        });
    }
    Ok(())
}

pub use clock::now_ns;

mod clock {
    //! The clock of the data path. On x86-64 with an invariant TSC (constant and non-stop, as
    //! /proc/cpuinfo reports) it reads the TSC (a few ns) scaled by a rate calibrated against
    //! `Instant` over 20 ms at first use; elsewhere it is `Instant` (a vDSO clock read, several
    //! times slower under virtualization). Both are monotonic and comparable across cores.

    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    struct Calibration {
        origin: Instant,
        #[cfg(target_arch = "x86_64")]
        tsc: Option<(u64, f64)>,
    }

    fn calibration() -> &'static Calibration {
        static CALIBRATION: OnceLock<Calibration> = OnceLock::new();
        CALIBRATION.get_or_init(|| {
            let origin = Instant::now();
            #[cfg(target_arch = "x86_64")]
            {
                let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
                let invariant =
                    cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc");
                let tsc = invariant.then(|| {
                    // Each end of the window is a (TSC, Instant) pair read back to back; of 32
                    // tries the one with the smallest TSC gap is kept, so a preemption between
                    // the two reads (a loaded machine) cannot skew the rate.
                    let paired = || {
                        let mut best: Option<(u64, u64, Instant)> = None;
                        for _ in 0..32 {
                            let before = rdtsc();
                            let instant = Instant::now();
                            let after = rdtsc();
                            let gap = after.wrapping_sub(before);
                            if best.is_none_or(|(g, _, _)| gap < g) {
                                best = Some((gap, before + gap / 2, instant));
                            }
                        }
                        let (_, tsc, instant) = best.expect("32 tries");
                        (tsc, instant)
                    };
                    let (tsc0, start) = paired();
                    while start.elapsed() < Duration::from_millis(20) {
                        std::hint::spin_loop();
                    }
                    let (tsc1, end) = paired();
                    let elapsed_ns = (end - start).as_nanos() as f64;
                    let ns_per_tick = elapsed_ns / (tsc1 - tsc0).max(1) as f64;
                    // Express the TSC origin as the moment `origin` was taken.
                    let origin_tsc =
                        tsc0 - ((start - origin).as_nanos() as f64 / ns_per_tick) as u64;
                    (origin_tsc, ns_per_tick)
                });
                Calibration { origin, tsc }
            }
            #[cfg(not(target_arch = "x86_64"))]
            Calibration { origin }
        })
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn rdtsc() -> u64 {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Nanoseconds since a process-wide origin; monotonic and comparable across cores.
    #[inline]
    pub fn now_ns() -> u64 {
        let calibration = calibration();
        #[cfg(target_arch = "x86_64")]
        if let Some((origin_tsc, ns_per_tick)) = calibration.tsc {
            return (rdtsc().saturating_sub(origin_tsc) as f64 * ns_per_tick) as u64;
        }
        calibration.origin.elapsed().as_nanos() as u64
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn tracks_instant_within_a_tenth_of_a_percent() {
            // A preemption between the paired reads can only widen one attempt's gap, so the
            // best of five attempts is compared: a miscalibrated rate fails all of them.
            let mut worst_case = Vec::new();
            for _ in 0..5 {
                let (a, start) = (now_ns(), Instant::now());
                std::thread::sleep(Duration::from_millis(30));
                let (b, real) = (now_ns(), start.elapsed().as_nanos() as u64);
                let measured = b - a;
                let slack = real / 1000 + 20_000;
                if measured.abs_diff(real) < slack {
                    return;
                }
                worst_case.push((measured, real));
            }
            panic!("clock vs Instant (ns), every attempt off by more than 0.1 %: {worst_case:?}");
        }

        #[test]
        fn is_monotonic() {
            let mut last = now_ns();
            for _ in 0..100_000 {
                let now = now_ns();
                assert!(now >= last);
                last = now;
            }
        }
    }
}

//! io_uring over an `O_DIRECT` file: one ring per core, the arena registered as fixed buffers,
//! the file registered as a fixed file, doorbells batched by the caller, completions reaped from
//! the CQ ring without a syscall.

use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

use crate::{
    now_ns, validate, Arena, Completion, Device, DeviceError, DeviceFile, DeviceStats, IoKind,
    IoRequest,
};

/// Ring parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringConfig {
    /// Submission-queue entries, a power of two in 1..=4096; also the bound on requests in flight.
    pub entries: u32,
}

impl Default for UringConfig {
    fn default() -> Self {
        Self { entries: 256 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    request: IoRequest,
    doorbell_ns: u64,
}

/// A per-core io_uring handle.
pub struct UringDevice {
    ring: IoUring,
    file: Arc<DeviceFile>,
    arena: Arc<Arena>,
    /// In-flight requests by slot index (the SQE's user_data); `None` when free.
    slots: Vec<Option<Slot>>,
    free_slots: Vec<u32>,
    /// Slots pushed since the last doorbell.
    unsubmitted: Vec<u32>,
    fixed_buffers: bool,
    stats: DeviceStats,
}

impl UringDevice {
    /// Sets up a ring over `file` and registers `arena` and the file with it.
    pub fn open(
        file: Arc<DeviceFile>,
        arena: Arc<Arena>,
        config: UringConfig,
    ) -> Result<Self, DeviceError> {
        if !config.entries.is_power_of_two() || config.entries > 4096 {
            return Err(DeviceError::Config(format!(
                "ring of {} entries: must be a power of two in 1..=4096",
                config.entries
            )));
        }
        if std::env::var_os(crate::open::DISABLE_URING_ENV).is_some() {
            return Err(DeviceError::UringUnavailable {
                reason: format!("disabled by {}", crate::open::DISABLE_URING_ENV),
            });
        }
        let ring = IoUring::builder()
            .setup_cqsize(config.entries * 2)
            .build(config.entries)
            .map_err(|err| DeviceError::UringUnavailable {
                reason: err.to_string(),
            })?;
        ring.submitter()
            .register_files(&[file.raw_fd()])
            .map_err(|err| DeviceError::os("registering the data file with io_uring", err))?;
        let iovecs = arena.iovecs();
        // SAFETY: the iovecs cover the arena, which `self.arena` keeps alive as long as the ring.
        let fixed_buffers = match unsafe { ring.submitter().register_buffers(&iovecs) } {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(
                    "io_uring could not register the {}-byte arena as fixed buffers ({err}); \
                     using plain reads and writes (raise RLIMIT_MEMLOCK to fix)",
                    arena.size_bytes()
                );
                false
            }
        };
        let entries = config.entries as usize;
        Ok(Self {
            ring,
            file,
            arena,
            slots: vec![None; entries],
            free_slots: (0..config.entries).rev().collect(),
            unsubmitted: Vec::with_capacity(entries),
            fixed_buffers,
            stats: DeviceStats::default(),
        })
    }

    /// True when the arena is registered as fixed buffers.
    pub fn uses_fixed_buffers(&self) -> bool {
        self.fixed_buffers
    }

    fn entry_for(&self, request: &IoRequest, slot: u32) -> io_uring::squeue::Entry {
        let ptr = self.arena.frame_ptr(request.frame);
        let len = request.len_bytes() as u32;
        let fd = types::Fixed(0);
        let entry = match (request.kind, self.fixed_buffers) {
            (IoKind::Read, true) => {
                let index = self.arena.buffer_index(request.frame);
                opcode::ReadFixed::new(fd, ptr, len, index)
                    .offset(request.offset_bytes)
                    .build()
            }
            (IoKind::Write, true) => {
                let index = self.arena.buffer_index(request.frame);
                opcode::WriteFixed::new(fd, ptr, len, index)
                    .offset(request.offset_bytes)
                    .build()
            }
            (IoKind::Read, false) => opcode::Read::new(fd, ptr, len)
                .offset(request.offset_bytes)
                .build(),
            (IoKind::Write, false) => opcode::Write::new(fd, ptr, len)
                .offset(request.offset_bytes)
                .build(),
        };
        entry.user_data(u64::from(slot))
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        let now = now_ns();
        let mut reaped = 0;
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let slot_index = cqe.user_data() as usize;
            let slot = self.slots[slot_index]
                .take()
                .expect("completion for a free io_uring slot");
            self.free_slots.push(slot_index as u32);
            let request = slot.request;
            let expected = request.len_bytes();
            let result = match cqe.result() {
                res if res < 0 => Err(DeviceError::Os {
                    what: format!(
                        "{:?} of {expected} bytes at {} of {}",
                        request.kind,
                        request.offset_bytes,
                        self.file.path().display()
                    ),
                    errno: -res,
                }),
                res if res as u64 != expected => Err(DeviceError::ShortTransfer {
                    expected_bytes: expected,
                    actual_bytes: res as u64,
                }),
                _ => Ok(()),
            };
            self.arena.end_io(request.frame, request.frames);
            let latency_ns = now.saturating_sub(slot.doorbell_ns);
            self.stats.record_completion(latency_ns, result.is_ok());
            out.push(Completion {
                tag: request.tag,
                result,
                latency_ns,
            });
            reaped += 1;
        }
        reaped
    }
}

impl Device for UringDevice {
    fn name(&self) -> &'static str {
        "uring"
    }

    fn capacity_bytes(&self) -> u64 {
        self.file.capacity_bytes()
    }

    fn queue_depth(&self) -> usize {
        self.slots.len()
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        validate(&request, self.capacity_bytes(), &self.arena)?;
        let Some(&slot) = self.free_slots.last() else {
            return Err(DeviceError::QueueFull {
                queue_depth: self.slots.len(),
            });
        };
        self.arena.begin_io(request.frame, request.frames)?;
        let entry = self.entry_for(&request, slot);
        // SAFETY: the buffer (arena frames) stays valid and untouched until the completion is
        // reaped: the arena outlives the ring and the frames are marked in I/O.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        // Slots never exceed the SQ size, and every doorbell empties the SQ, so it has room.
        assert!(
            pushed.is_ok(),
            "io_uring submission queue full with a free slot"
        );
        self.free_slots.pop();
        self.slots[slot as usize] = Some(Slot {
            request,
            doorbell_ns: 0,
        });
        self.unsubmitted.push(slot);
        self.stats.pushed += 1;
        Ok(())
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        if self.unsubmitted.is_empty() {
            return Ok(0);
        }
        let doorbell_ns = now_ns();
        for &slot in &self.unsubmitted {
            if let Some(entry) = self.slots[slot as usize].as_mut() {
                entry.doorbell_ns = doorbell_ns;
            }
        }
        self.stats.doorbells += 1;
        // Bounded retry of interrupted syscalls; after that the next doorbell tries again.
        const MAX_EINTR_RETRIES: usize = 16;
        let mut retries = 0;
        let consumed = loop {
            match self.ring.submit() {
                Ok(consumed) => break consumed,
                Err(err)
                    if err.raw_os_error() == Some(libc::EINTR) && retries < MAX_EINTR_RETRIES =>
                {
                    retries += 1;
                    continue;
                }
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {
                    // The CQ is backed up; the caller reaps and the next doorbell retries.
                    return Err(DeviceError::os(
                        "io_uring_enter (reap completions first)",
                        err,
                    ));
                }
                Err(err) => return Err(DeviceError::os("io_uring_enter", err)),
            }
        };
        // The kernel consumes SQEs in order; any it did not take stay queued for the next doorbell.
        let count = consumed.min(self.unsubmitted.len());
        self.unsubmitted.drain(..count);
        self.stats.submitted += count as u64;
        Ok(count)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        self.reap(out)
    }

    fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        let reaped = self.reap(out);
        if reaped > 0 || self.in_flight() == 0 {
            self.submit()?;
            return Ok(reaped);
        }
        // One io_uring_enter both rings the doorbell for anything pushed and waits.
        let doorbell_ns = now_ns();
        for &slot in &self.unsubmitted {
            if let Some(entry) = self.slots[slot as usize].as_mut() {
                entry.doorbell_ns = doorbell_ns;
            }
        }
        if !self.unsubmitted.is_empty() {
            self.stats.doorbells += 1;
        }
        let timespec = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&timespec);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(consumed) => {
                let count = consumed.min(self.unsubmitted.len());
                self.unsubmitted.drain(..count);
                self.stats.submitted += count as u64;
            }
            Err(err) if matches!(err.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {
                // On a timeout the SQEs were still consumed; the SQ is empty when the kernel
                // took them all.
                let left = self.ring.submission().len();
                let taken = self.unsubmitted.len().saturating_sub(left);
                self.unsubmitted.drain(..taken);
                self.stats.submitted += taken as u64;
            }
            Err(err) => return Err(DeviceError::os("io_uring_enter (wait)", err)),
        }
        Ok(self.reap(out))
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.file.sync_data()
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    fn doorbell_is_cheap(&self) -> bool {
        false
    }
}

impl Drop for UringDevice {
    fn drop(&mut self) {
        // The kernel may still write into arena frames: wait for every request in flight before
        // the ring (and possibly the arena) goes away. Bounded: each wait gives up after 1 s and
        // at most `entries` requests are in flight.
        let mut sink = Vec::new();
        let _ = self.submit();
        for _ in 0..self.slots.len() {
            if self.in_flight() == 0 {
                break;
            }
            let _ = self.wait(Duration::from_secs(1), &mut sink);
        }
    }
}

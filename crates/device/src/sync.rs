//! The synchronous baseline: every doorbell performs its requests with blocking `pread`/`pwrite`,
//! so the core waits for the device (the killer-microsecond study's "demand access" cost on a real disk).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::{
    now_ns, validate, Arena, Completion, Device, DeviceError, DeviceFile, DeviceStats, IoKind,
    IoRequest,
};

/// The queues of a device whose doorbell performs its requests on the calling core (sync,
/// mmap): pushed requests wait for the doorbell, performed ones for the poll.
pub(crate) struct DoorbellQueue {
    queue_depth: usize,
    /// Pushed, not yet performed. Bounded by `queue_depth` together with `done`.
    queued: VecDeque<IoRequest>,
    /// Performed, not yet reaped.
    done: VecDeque<Completion>,
    pub(crate) stats: DeviceStats,
}

impl DoorbellQueue {
    /// At most `queue_depth` requests pushed and not yet reaped.
    pub(crate) fn new(queue_depth: usize) -> Self {
        assert!(queue_depth > 0, "queue depth must be positive");
        Self {
            queue_depth,
            queued: VecDeque::with_capacity(queue_depth),
            done: VecDeque::with_capacity(queue_depth),
            stats: DeviceStats::default(),
        }
    }

    pub(crate) fn queue_depth(&self) -> usize {
        self.queue_depth
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.queued.len() + self.done.len()
    }

    /// Validates `request` against `capacity_bytes` and `arena`, marks its frames in I/O and
    /// queues it.
    pub(crate) fn push(
        &mut self,
        request: IoRequest,
        capacity_bytes: u64,
        arena: &Arena,
    ) -> Result<(), DeviceError> {
        validate(&request, capacity_bytes, arena)?;
        if self.in_flight() >= self.queue_depth {
            return Err(DeviceError::QueueFull {
                queue_depth: self.queue_depth,
            });
        }
        arena.begin_io(request.frame, request.frames)?;
        self.queued.push_back(request);
        self.stats.pushed += 1;
        Ok(())
    }

    /// The doorbell: performs every queued request in order with `perform`, then releases its
    /// frames. Latency runs from the doorbell, as for the other devices: a request waits for
    /// the ones performed before it in the same batch.
    pub(crate) fn submit(
        &mut self,
        arena: &Arena,
        mut perform: impl FnMut(&IoRequest) -> Result<(), DeviceError>,
    ) -> usize {
        let count = self.queued.len();
        if count > 0 {
            self.stats.doorbells += 1;
        }
        let start_ns = now_ns();
        while let Some(request) = self.queued.pop_front() {
            let result = perform(&request);
            self.stats.submitted += 1;
            self.done.push_back(Completion {
                tag: request.tag,
                result,
                latency_ns: now_ns() - start_ns,
            });
            arena.end_io(request.frame, request.frames);
        }
        count
    }

    /// Hands every performed request's completion to `out`.
    pub(crate) fn poll(&mut self, out: &mut Vec<Completion>) -> usize {
        let count = self.done.len();
        for completion in self.done.drain(..) {
            self.stats
                .record_completion(completion.latency_ns, completion.result.is_ok());
            out.push(completion);
        }
        count
    }
}

/// Blocking `pread`/`pwrite` on an `O_DIRECT` file.
pub struct SyncDevice {
    file: Arc<DeviceFile>,
    arena: Arc<Arena>,
    queue: DoorbellQueue,
}

impl SyncDevice {
    /// A handle over `file`, moving data to and from `arena`; at most `queue_depth` requests
    /// pushed and not yet reaped.
    pub fn new(file: Arc<DeviceFile>, arena: Arc<Arena>, queue_depth: usize) -> Self {
        Self {
            file,
            arena,
            queue: DoorbellQueue::new(queue_depth),
        }
    }
}

/// One request with blocking `pread`/`pwrite` on `file`.
fn perform(file: &DeviceFile, arena: &Arena, request: &IoRequest) -> Result<(), DeviceError> {
    if request.kind == IoKind::Flush {
        return file.sync_data();
    }
    let ptr = arena.frame_ptr(request.frame);
    let len = request.len_bytes() as usize;
    let fd = file.raw_fd();
    // SAFETY: the frames are inside the arena (validated on push) and marked in I/O, so no
    // one else touches them; the fd is open for the life of `file`.
    let rc = unsafe {
        match request.kind {
            IoKind::Read => libc::pread(fd, ptr.cast(), len, request.offset_bytes as i64),
            IoKind::Write => libc::pwrite(fd, ptr.cast(), len, request.offset_bytes as i64),
            IoKind::Flush => unreachable!("handled above"),
        }
    };
    if rc < 0 {
        let what = format!(
            "{:?} at {} of {}",
            request.kind,
            request.offset_bytes,
            file.path().display()
        );
        return Err(DeviceError::os(what, std::io::Error::last_os_error()));
    }
    if rc as usize != len {
        return Err(DeviceError::ShortTransfer {
            expected_bytes: len as u64,
            actual_bytes: rc as u64,
        });
    }
    Ok(())
}

impl Device for SyncDevice {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn capacity_bytes(&self) -> u64 {
        self.file.capacity_bytes()
    }

    fn queue_depth(&self) -> usize {
        self.queue.queue_depth()
    }

    fn in_flight(&self) -> usize {
        self.queue.in_flight()
    }

    fn push(&mut self, request: IoRequest) -> Result<(), DeviceError> {
        let capacity_bytes = self.file.capacity_bytes();
        self.queue.push(request, capacity_bytes, &self.arena)
    }

    fn submit(&mut self) -> Result<usize, DeviceError> {
        let (file, arena) = (&self.file, &self.arena);
        Ok(self
            .queue
            .submit(arena, |request| perform(file, arena, request)))
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
        self.file.sync_data()
    }

    fn stats(&self) -> &DeviceStats {
        &self.queue.stats
    }

    fn doorbell_is_cheap(&self) -> bool {
        // The doorbell *is* the I/O here; batching it would only delay it.
        true
    }
}

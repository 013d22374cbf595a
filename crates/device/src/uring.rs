//! io_uring over an `O_DIRECT` file: one ring per core, the arena registered as fixed buffers,
//! the file registered as a fixed file, doorbells batched by the caller, completions reaped from
//! the CQ ring without a syscall.
//!
//! # Syscalls
//!
//! - [`Device::submit`]: one `io_uring_enter` when something was pushed since the last doorbell,
//!   none otherwise.
//! - [`Device::wait`]: one `io_uring_enter` that rings the doorbell for everything pushed *and*
//!   waits (a caller that is about to wait should push without [`Device::submit`] and let the
//!   wait ring: one syscall instead of two, as `measure_uring` in the device bench does).
//! - [`Device::poll`]: none, except when the ring says completions are waiting to be flushed.
//!   With [`UringSetup::coop_taskrun`] (the default) the kernel does not interrupt the core (no
//!   IPI) to post a completion: it queues it as task work and sets `IORING_SQ_TASKRUN` in the SQ
//!   ring's flags; the completion reaches the CQ ring at the thread's next kernel entry. A core
//!   that only polls never enters the kernel, so `poll` checks that flag (one atomic load) and,
//!   when it is set, makes one `io_uring_enter(0, 0, GETEVENTS)` that submits nothing and runs
//!   the queued completions. When the flag is clear (or the ring was set up without it), `poll`
//!   makes no syscall. [`DeviceStats::enters`] counts every `io_uring_enter`,
//!   [`DeviceStats::task_work_flushes`] the ones `poll` made.
//!
//! # Threads
//!
//! Completions are queued as task work on the thread that *submitted* the request. A handle
//! is used by one thread at a time (its core); a wait from another thread (`Drop` after the
//! core's thread moved on) still returns, because the submitter runs its task work at its next
//! kernel entry or timer tick, and every wait here is bounded by a timeout.

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use io_uring::{opcode, types, EnterFlags, IoUring};

use crate::{
    now_ns, validate, Arena, Completion, Device, DeviceError, DeviceFile, DeviceStats, IoKind,
    IoRequest,
};

/// Set this environment variable to make tamer behave as if io_uring were unavailable.
const DISABLE_URING_ENV: &str = "TAMER_DISABLE_URING";

/// Whether io_uring can be set up in this process (probed once).
pub fn uring_available() -> Result<(), DeviceError> {
    static PROBE: OnceLock<Result<(), DeviceError>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            if std::env::var_os(DISABLE_URING_ENV).is_some() {
                return Err(DeviceError::UringUnavailable {
                    reason: format!("disabled by {DISABLE_URING_ENV}"),
                });
            }
            io_uring::IoUring::new(2)
                .map(|_| ())
                .map_err(|err| DeviceError::UringUnavailable {
                    reason: err.to_string(),
                })
        })
        .clone()
}

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

/// io_uring setup flags that change the kernel's work per I/O. Kept apart from [`UringConfig`]
/// so that the `UringConfig { entries }` literals of other crates keep compiling; pass it with
/// [`UringDevice::open_with`] ([`UringDevice::open`] and [`crate::open_device`] use the
/// default).
///
/// `coop_taskrun` removes the rescheduling IPI a completion sends to a core that polls (one
/// cheaper flush `io_uring_enter` instead), which lowers latency and raises IOPS at low queue
/// depths through the runtime. Not kept: `IORING_SETUP_SQPOLL` (its kernel thread spins a whole
/// CPU, costing more CPU per I/O than the submitting thread saves) and
/// `IORING_SETUP_DEFER_TASKRUN` (no faster than `coop_taskrun`, and a wait from any thread but
/// the ring's creator fails with `EEXIST`, which `Drop` on another thread needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringSetup {
    /// `IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG`: a completion never interrupts
    /// the core with an IPI; it is posted at the thread's next kernel entry, and
    /// [`Device::poll`] enters the kernel when the ring flags completions waiting (see the
    /// module documentation). Default on; a kernel that refuses it (before 5.19) gets a warning
    /// and a ring without it.
    pub coop_taskrun: bool,
}

impl Default for UringSetup {
    fn default() -> Self {
        Self { coop_taskrun: true }
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
    /// The ring has `IORING_SETUP_TASKRUN_FLAG`: `poll` must flush when `IORING_SQ_TASKRUN` is set.
    taskrun_flag: bool,
    stats: DeviceStats,
}

/// Builds a ring of `entries` SQEs (CQ twice that), with the cooperative task-run flags when
/// `coop` is set.
fn build_ring(entries: u32, coop: bool) -> io::Result<IoUring> {
    let mut builder = IoUring::builder();
    builder.setup_cqsize(entries * 2);
    if coop {
        builder.setup_coop_taskrun().setup_taskrun_flag();
    }
    builder.build(entries)
}

/// Sets a ring up with `build(entries, coop)`. When `coop` is asked for and the kernel refuses
/// the flags (`EINVAL`), warns and sets up a ring without them. Returns the ring and whether it
/// has them.
fn setup_ring(
    entries: u32,
    coop: bool,
    build: impl Fn(u32, bool) -> io::Result<IoUring>,
) -> io::Result<(IoUring, bool)> {
    if coop {
        match build(entries, true) {
            Ok(ring) => return Ok((ring, true)),
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                tracing::warn!(
                    "io_uring refused IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG \
                     ({err}; they need Linux 5.19); using a ring without them: completions \
                     may interrupt the core with an IPI"
                );
            }
            Err(err) => return Err(err),
        }
    }
    build(entries, false).map(|ring| (ring, false))
}

impl UringDevice {
    /// Sets up a ring over `file` and registers `arena` and the file with it, with the default
    /// [`UringSetup`].
    pub fn open(
        file: Arc<DeviceFile>,
        arena: Arc<Arena>,
        config: UringConfig,
    ) -> Result<Self, DeviceError> {
        Self::open_with(file, arena, config, UringSetup::default())
    }

    /// As [`UringDevice::open`], with the ring's setup flags chosen by `setup`.
    pub fn open_with(
        file: Arc<DeviceFile>,
        arena: Arc<Arena>,
        config: UringConfig,
        setup: UringSetup,
    ) -> Result<Self, DeviceError> {
        Self::open_inner(file, arena, config, setup, build_ring)
    }

    fn open_inner(
        file: Arc<DeviceFile>,
        arena: Arc<Arena>,
        config: UringConfig,
        setup: UringSetup,
        build: impl Fn(u32, bool) -> io::Result<IoUring>,
    ) -> Result<Self, DeviceError> {
        if !config.entries.is_power_of_two() || config.entries > 4096 {
            return Err(DeviceError::Config(format!(
                "ring of {} entries: must be a power of two in 1..=4096",
                config.entries
            )));
        }
        if std::env::var_os(DISABLE_URING_ENV).is_some() {
            return Err(DeviceError::UringUnavailable {
                reason: format!("disabled by {DISABLE_URING_ENV}"),
            });
        }
        let (ring, taskrun_flag) =
            setup_ring(config.entries, setup.coop_taskrun, build).map_err(|err| {
                DeviceError::UringUnavailable {
                    reason: err.to_string(),
                }
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
            taskrun_flag,
            stats: DeviceStats::default(),
        })
    }

    /// True when the arena is registered as fixed buffers.
    pub fn uses_fixed_buffers(&self) -> bool {
        self.fixed_buffers
    }

    /// True when the ring runs completions cooperatively (`IORING_SETUP_COOP_TASKRUN` with
    /// `IORING_SETUP_TASKRUN_FLAG`): asked for by [`UringSetup::coop_taskrun`] and accepted by
    /// the kernel.
    pub fn coop_taskrun(&self) -> bool {
        self.taskrun_flag
    }

    /// With the task-run flag, runs the completions the kernel queued for this thread when the
    /// ring says some are waiting (`IORING_SQ_TASKRUN`): one `io_uring_enter(0, 0, GETEVENTS)`
    /// that submits nothing. No syscall otherwise.
    fn flush_task_work(&mut self) {
        if !self.taskrun_flag || !self.ring.submission().taskrun() {
            return;
        }
        self.stats.enters += 1;
        self.stats.task_work_flushes += 1;
        // SAFETY: no argument (a null pointer of size 0) and nothing to submit: the kernel
        // consumes no SQE, so the pushed-but-unsubmitted entries stay queued for the next
        // doorbell. An error (EINTR) leaves the completions for the next kernel entry.
        let _ = unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(0, 0, EnterFlags::GETEVENTS.bits(), None)
        };
    }

    fn entry_for(&self, request: &IoRequest, slot: u32) -> io_uring::squeue::Entry {
        let ptr = self.arena.frame_ptr(request.frame);
        let len = request.len_bytes() as u32;
        let fd = types::Fixed(0);
        let entry = match (request.kind, self.fixed_buffers) {
            (IoKind::Flush, _) => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
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
        let mut reaped = 0;
        let mut cq = self.ring.completion();
        if cq.is_empty() {
            // Nothing to reap: no clock read.
            return 0;
        }
        let now = now_ns();
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

#[cfg(test)]
impl UringDevice {
    /// Test only: queues an io_uring TIMEOUT of `after` (it completes with `-ETIME`) in a slot
    /// of its own, standing for a read of frame 0 tagged `tag`, and rings the doorbell. The
    /// timer fires on the CPU that rang, so a test that then moves to another CPU gets its
    /// completion from a remote CPU, deterministically.
    fn submit_timeout(&mut self, after: Duration, tag: u64) {
        let slot = self.free_slots.pop().expect("a free slot");
        let request = IoRequest::read(0, 0, 1, tag);
        self.arena.begin_io(0, 1).expect("frame 0 free");
        self.slots[slot as usize] = Some(Slot {
            request,
            doorbell_ns: now_ns(),
        });
        let timespec = Box::new(types::Timespec::from(after));
        let entry = opcode::Timeout::new(&*timespec)
            .build()
            .user_data(u64::from(slot));
        // SAFETY: the timespec is read by the kernel during the submit below, while the box is
        // alive; the slot's frame is marked in I/O until the completion is reaped.
        unsafe { self.ring.submission().push(&entry).expect("SQ room") };
        self.stats.enters += 1;
        self.ring.submit().expect("submit");
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
            self.stats.enters += 1;
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
        // The only syscall `poll` may make, and only when the ring flags queued completions.
        self.flush_task_work();
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
        self.stats.enters += 1;
        // GETEVENTS also runs the completions queued as task work (cooperative task-run).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IoRequest;

    /// A fresh directory under the temp dir, removed when dropped.
    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new(test: &str) -> Self {
            let path = std::env::temp_dir()
                .join(format!("tamer-device-unit-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("test directory");
            Self(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn set_affinity(cpus: &[usize]) {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls only read and write it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }

    fn allowed_cpus() -> Vec<usize> {
        // SAFETY: as in `set_affinity`; the kernel fills the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect()
        }
    }

    /// With cooperative task-run, a completion that arrives from another CPU while the core
    /// spins in user space is not delivered by an IPI: the kernel only sets `IORING_SQ_TASKRUN`.
    /// `poll` alone must notice the flag and enter the kernel, so the completion is reaped at
    /// once (not at the next timer tick) and `task_work_flushes` counts the enter.
    /// The completion comes from a TIMEOUT armed on one CPU while the test polls on another.
    /// Catches: `poll` without the flush (the completion arrives at a tick and no flush is
    /// counted), a flush that ignores the flag's absence (covered by the device tests), and a
    /// ring set up without the flags.
    #[test]
    fn poll_flushes_completions_flagged_from_another_cpu() {
        if crate::uring_available().is_err() {
            eprintln!("io_uring unavailable: skipped");
            return;
        }
        let cpus = allowed_cpus();
        if cpus.len() < 2 {
            eprintln!("one CPU allowed: no remote completion to test");
            return;
        }
        let dir = Dir::new("coop-flush");
        let file = Arc::new(DeviceFile::open(&dir.0.join("data"), 8 * 4096).unwrap());
        let arena = Arc::new(Arena::new(1).unwrap());
        let mut device = UringDevice::open(file, arena, UringConfig { entries: 8 }).unwrap();
        assert!(device.coop_taskrun(), "the default setup has the flags");
        const ROUNDS_MAX: u64 = 64;
        let mut flushed_rounds = 0;
        // Up to 64 rounds, until one flushes: under load (a build on the other CPU) a timer
        // tick often lands first.
        for round in 0..ROUNDS_MAX {
            set_affinity(&cpus[..1]);
            let flushes = device.stats().task_work_flushes;
            device.submit_timeout(Duration::from_millis(20), round);
            set_affinity(&cpus[1..2]);
            let mut out = Vec::new();
            let start = std::time::Instant::now();
            while device.poll(&mut out) == 0 {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "round {round}: poll never reaped the timeout"
                );
            }
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].tag, round);
            assert!(
                matches!(&out[0].result, Err(DeviceError::Os { errno, .. }) if *errno == libc::ETIME),
                "{:?}",
                out[0].result
            );
            if device.stats().task_work_flushes > flushes {
                flushed_rounds += 1;
                break;
            }
        }
        set_affinity(&cpus);
        // A timer tick landing between the remote completion and the next flag check could run
        // the completion first; not in all 64 rounds.
        assert!(
            flushed_rounds > 0,
            "{ROUNDS_MAX} remote completions reaped and poll never flushed"
        );
    }

    /// A kernel that refuses the cooperative task-run flags (as before Linux 5.19) gets a ring
    /// without them, and the device still reaps by polling and waiting without ever flushing.
    /// Catches: no fallback (an EINVAL for the flags fails `open`), a fallback that still
    /// believes it has the flag (`coop_taskrun()` true), and a fallback taken for errors other
    /// than EINVAL.
    #[test]
    fn refused_coop_flags_fall_back_to_a_plain_ring() {
        if crate::uring_available().is_err() {
            eprintln!("io_uring unavailable: skipped");
            return;
        }
        let dir = Dir::new("refused-coop");
        let file = Arc::new(DeviceFile::open(&dir.0.join("data"), 64 * 4096).unwrap());
        crate::fill_with_data(&file, 7).unwrap();
        let arena = Arc::new(Arena::new(4).unwrap());
        let refusing = |entries: u32, coop: bool| {
            if coop {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                build_ring(entries, false)
            }
        };
        let mut device = UringDevice::open_inner(
            file.clone(),
            arena.clone(),
            UringConfig { entries: 8 },
            UringSetup { coop_taskrun: true },
            refusing,
        )
        .expect("a refused flag must fall back, not fail");
        assert!(!device.coop_taskrun());

        // Polling alone reaps (the kernel interrupts the core for each completion).
        for frame in 0..4u32 {
            device
                .push(IoRequest::read(u64::from(frame) * 8 * 4096, frame, 1, 1))
                .unwrap();
        }
        device.submit().unwrap();
        let mut out = Vec::new();
        let start = std::time::Instant::now();
        while out.len() < 4 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "poll never reaped"
            );
            device.poll(&mut out);
        }
        // Waiting reaps too.
        device.push(IoRequest::read(0, 0, 1, 2)).unwrap();
        out.clear();
        while out.is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "wait never reaped"
            );
            device.wait(Duration::from_secs(1), &mut out).unwrap();
        }
        assert!(out.iter().all(|c| c.result.is_ok()));
        assert_eq!(device.stats().task_work_flushes, 0);

        // Errors other than EINVAL are not a refused flag: they fail `open`.
        let broken = |_: u32, _: bool| Err(io::Error::from_raw_os_error(libc::ENOMEM));
        let err = UringDevice::open_inner(
            file,
            arena,
            UringConfig { entries: 8 },
            UringSetup { coop_taskrun: true },
            broken,
        )
        .err()
        .expect("ENOMEM must fail the open");
        assert!(
            matches!(err, DeviceError::UringUnavailable { .. }),
            "{err:?}"
        );
    }
}

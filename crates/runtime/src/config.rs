//! Runtime configuration with stated bounds.

use crate::Policy;

/// Most user-level threads per core.
pub const MAX_THREADS_PER_CORE: usize = 16_384;
/// Most device accesses one user-level thread has outstanding (its memory-level parallelism).
pub const MAX_OUTSTANDING_PER_THREAD: usize = 16;

/// How an idle core (nothing runnable, accesses in flight) waits for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleMode {
    /// Block in the kernel (io_uring_enter with a timeout) until a completion arrives.
    Block,
    /// Spin on the completion queue; never sleep (`--poll`).
    Poll,
}

/// Everything an executor (one core) or a runtime (all cores) is sized by.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Executors, one OS thread pinned per core (used by [`crate::Runtime`]).
    pub cores: usize,
    /// User-level threads per core, each with its own stack, allocated at start.
    pub threads_per_core: usize,
    /// Stack size of each user-level thread.
    pub stack_bytes: usize,
    /// How the core picks the next thread to run.
    pub policy: Policy,
    /// Most jobs parked on device accesses per core; default: all threads.
    pub max_pending: usize,
    /// Per-core queue of new jobs, refilled from the shared queue.
    pub local_queue: usize,
    /// The single shared job queue feeding all cores.
    pub global_queue: usize,
    /// Per-core inbox for jobs sent to one core.
    pub inbox_queue: usize,
    /// Threads run between two doorbells when the doorbell costs a syscall (io_uring). Default
    /// 1: a doorbell after every run that pushed an access (several accesses pushed in one run
    /// still share one). Batching doorbells over several runs makes the replacements reach the
    /// device together and lets its queue drain between refills, which lost IOPS against fio
    /// at QD 16 (docs/benchmarks.md). Raise it for a device that keeps up with batches, to
    /// amortize the syscall.
    pub runs_per_iteration: usize,
    /// How an idle core waits for its device: block in the kernel or spin.
    pub idle: IdleMode,
    /// How long a core with nothing at all to do keeps checking its queues before it parks its
    /// OS thread (at most 1 s; [`IdleMode::Poll`] never parks). Waking a parked thread costs a
    /// futex wake and, when virtualized, waking a halted CPU, enough to put the p99 of a lightly
    /// loaded server in the milliseconds. Default 200 µs. In [`IdleMode::Block`] it
    /// also bounds how long a core whose threads all wait for the device polls the completion
    /// queue before it blocks in the kernel for a completion.
    pub idle_spin_ns: u64,
    /// Cap on device accesses in flight per core, like a CPU's line-fill buffers (the killer-microsecond study):
    /// an access beyond it stalls the core until one completes. `None`: bounded by the device
    /// queue only.
    pub max_in_flight: Option<usize>,
    /// Pin each executor's OS thread to its core.
    pub pin: bool,
    /// Initial average device latency used by aging before the first completion.
    pub initial_latency_ns: u64,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads_per_core: 64,
            stack_bytes: 64 * 1024,
            policy: Policy::PriorityAging,
            max_pending: 64,
            local_queue: 16,
            global_queue: 4096,
            inbox_queue: 256,
            runs_per_iteration: 1,
            idle: IdleMode::Block,
            idle_spin_ns: 200_000,
            max_in_flight: None,
            pin: true,
            initial_latency_ns: 50_000,
        }
    }
}

impl RuntimeConfig {
    /// A configuration with `threads` user-level threads per core and a pending bound of all of
    /// them.
    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads_per_core: threads,
            max_pending: threads,
            ..Self::default()
        }
    }

    /// Checks every bound; the message names the field and its range.
    pub fn validate(&self) -> Result<(), String> {
        let check = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        check((1..=1024).contains(&self.cores), "cores must be 1..=1024")?;
        check(
            (1..=MAX_THREADS_PER_CORE).contains(&self.threads_per_core),
            "threads_per_core must be 1..=16384",
        )?;
        check(
            self.stack_bytes >= 16 * 1024,
            "stack_bytes must be at least 16 KiB",
        )?;
        check(self.max_pending >= 1, "max_pending must be at least 1")?;
        check(self.local_queue >= 1, "local_queue must be at least 1")?;
        check(self.global_queue >= 1, "global_queue must be at least 1")?;
        check(self.inbox_queue >= 1, "inbox_queue must be at least 1")?;
        check(
            self.runs_per_iteration >= 1,
            "runs_per_iteration must be at least 1",
        )?;
        check(
            self.idle_spin_ns <= 1_000_000_000,
            "idle_spin_ns must be at most 1 s",
        )?;
        check(
            self.max_in_flight != Some(0),
            "max_in_flight must be positive",
        )?;
        Ok(())
    }
}

use hdrhistogram::Histogram;

/// Counters of one device handle. `in_flight` is derived: pushed - completed.
#[derive(Clone, Debug)]
pub struct DeviceStats {
    /// Requests pushed.
    pub pushed: u64,
    /// Requests made visible to the device by a doorbell.
    pub submitted: u64,
    /// Requests reaped (successfully or not).
    pub completed: u64,
    /// Requests that completed with an error.
    pub errors: u64,
    /// Doorbells that cost a syscall (io_uring_enter); for the emulator, doorbells rung.
    pub doorbells: u64,
    /// io_uring only: every `io_uring_enter` (doorbells, waits, and the completion flushes
    /// below); 0 for the other devices.
    pub enters: u64,
    /// io_uring only: the `io_uring_enter` calls `poll` made because the ring flagged
    /// completions queued as task work (`IORING_SQ_TASKRUN`); a subset of `enters`.
    pub task_work_flushes: u64,
    /// Doorbell-to-reap latency of every completion, in nanoseconds (1 ns .. 10 s, 3 digits).
    pub latency_ns: Histogram<u64>,
}

impl Default for DeviceStats {
    fn default() -> Self {
        Self {
            pushed: 0,
            submitted: 0,
            completed: 0,
            errors: 0,
            doorbells: 0,
            enters: 0,
            task_work_flushes: 0,
            latency_ns: Histogram::new_with_bounds(1, 10_000_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl DeviceStats {
    /// Requests pushed and not yet reaped.
    pub fn in_flight(&self) -> u64 {
        self.pushed - self.completed
    }

    pub(crate) fn record_completion(&mut self, latency_ns: u64, ok: bool) {
        self.completed += 1;
        if !ok {
            self.errors += 1;
        }
        // Saturate instead of failing: a latency beyond 10 s is recorded as 10 s.
        self.latency_ns.saturating_record(latency_ns.max(1));
    }

    /// Adds another handle's counters into this one (for per-device totals across cores).
    pub fn merge(&mut self, other: &DeviceStats) {
        self.pushed += other.pushed;
        self.submitted += other.submitted;
        self.completed += other.completed;
        self.errors += other.errors;
        self.doorbells += other.doorbells;
        self.enters += other.enters;
        self.task_work_flushes += other.task_work_flushes;
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency_ns.add(&other.latency_ns);
    }
}

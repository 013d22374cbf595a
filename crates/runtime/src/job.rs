//! A unit of work for a user-level thread.

use tamer_device::now_ns;

/// A boxed closure plus its arrival time (for FIFO order and job latency).
pub struct Job {
    pub(crate) run: Box<dyn FnOnce() + Send + 'static>,
    pub(crate) enqueued_ns: u64,
}

impl Job {
    /// Wraps `f`, stamped with the current time as its arrival.
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Self {
            run: Box::new(f),
            enqueued_ns: now_ns(),
        }
    }

    /// When the job arrived, on the [`tamer_device::now_ns`] clock.
    pub fn enqueued_ns(&self) -> u64 {
        self.enqueued_ns
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("enqueued_ns", &self.enqueued_ns)
            .finish()
    }
}

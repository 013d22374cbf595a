//! What a user-level thread's job waited for: the accounting a server reports per request
//! ([`crate::thread::waits`], [`crate::thread::account_as`]). Kept apart so that the core's
//! state can hold it without naming the thread module.

/// What a user-level thread's current job waited for, in nanoseconds: the per-request
/// accounting a server reports (its time queued and running it measures itself). Zero
/// outside a user-level thread; reset when a thread starts a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    /// Parked (or spinning) on device accesses, outside the spans below.
    pub device_ns: u64,
    /// Waiting for a group commit to make a change durable (its device time included).
    pub commit_ns: u64,
    /// Waiting for a checkpoint: for its latch, or running one a bound made due.
    pub checkpoint_ns: u64,
}

/// A span [`crate::thread::account_as`] counts whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// See [`Waits::commit_ns`].
    Commit,
    /// See [`Waits::checkpoint_ns`].
    Checkpoint,
}

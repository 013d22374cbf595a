//! What each core publishes for observers on other threads: the runtime's gauges and
//! snapshots read this while the core's executor writes it once per loop pass.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize};
use std::sync::Mutex;

use crate::core::CoreStats;

/// What a core publishes for observers on other threads (one cache line per core).
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct CoreGauge {
    /// Device accesses in flight on the core's handle, as of its last loop pass.
    pub(crate) device_in_flight: AtomicUsize,
    /// The core's user-level threads by state, as of its last loop pass: parked on the
    /// device (accesses in flight), ready (accesses done, waiting for the core), runnable
    /// (yielded, timer- or watch-woken), idle (no job); and new jobs in its local queue.
    pub(crate) threads: [AtomicUsize; 5],
    /// An observer asks for a snapshot of the core's counters: the core copies them into
    /// `stats` at its next loop pass and clears the flag (one relaxed load per pass otherwise).
    pub(crate) stats_wanted: AtomicBool,
    pub(crate) stats: Mutex<Option<CoreStats>>,
    /// The scheduling policy the core applies from its next pass on ([`crate::Policy::code`]).
    pub(crate) policy: AtomicU8,
}

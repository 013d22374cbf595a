//! Event sources besides the device that the cores themselves poll (NeBuLa: the network's
//! completions are reaped by the cores that serve the requests, not by a thread of their own).
//!
//! A [`Runtime`](crate::Runtime) holds at most one [`Poller`] ([`Runtime::set_poller`]
//! (crate::Runtime::set_poller)). Every core calls [`Poller::poll`] at every scheduling
//! decision, from its scheduler (never from a user-level thread), and counts what it handled
//! as work. A
//! core with nothing at all to do blocks in [`Poller::wait`] instead of parking its OS thread,
//! so that an event wakes it; at most one core waits there, the others park as before.
//! Spawning a job calls [`Poller::wake`], which ends such a wait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// An event source the cores poll.
pub trait Poller: Send + Sync {
    /// Handles what is ready without blocking and returns how many events it handled (0:
    /// nothing was ready, or another core is polling). Called by every core at every decision, so
    /// it must be cheap when nothing is ready (a try-lock and a few loads, no syscall).
    fn poll(&self) -> usize;

    /// Blocks the calling core for at most `timeout_ns`, until an event arrives or
    /// [`Poller::wake`] is called. `still_idle` is called once the poller counts the core as
    /// waiting and before it blocks: when it returns `false` (a job arrived in between) the
    /// wait returns at once. Returns `false` without waiting when another core already waits
    /// (the caller parks its thread as usual).
    fn wait(&self, timeout_ns: u64, still_idle: &dyn Fn() -> bool) -> bool;

    /// Ends a wait in progress; no syscall when no core waits.
    fn wake(&self);
}

/// The runtime's poller, and an epoch that changes with it, so that each core re-reads the
/// slot only after a change (one atomic load per pass otherwise).
#[derive(Default)]
pub(crate) struct PollerSlot {
    poller: Mutex<Option<Arc<dyn Poller>>>,
    epoch: AtomicU64,
}

impl PollerSlot {
    /// Sets `poller` if none is set; else hands it back.
    pub(crate) fn install(&self, poller: Arc<dyn Poller>) -> Result<(), Arc<dyn Poller>> {
        let mut slot = self.poller.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(poller);
        }
        *slot = Some(poller);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Removes `poller` if it is the one set.
    pub(crate) fn remove(&self, poller: &Arc<dyn Poller>) {
        let mut slot = self.poller.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.as_ref().is_some_and(|p| Arc::ptr_eq(p, poller)) {
            return;
        }
        let old = slot.take();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        drop(slot);
        // A core waiting in the old poller stops waiting and sees the change.
        if let Some(old) = old {
            old.wake();
        }
    }

    pub(crate) fn get(&self) -> Option<Arc<dyn Poller>> {
        self.poller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Every spawn comes here: the poller is woken under the slot's lock rather than cloned
    /// out of it (`Poller::wake` never touches the slot).
    pub(crate) fn wake(&self) {
        let slot = self.poller.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(poller) = slot.as_ref() {
            poller.wake();
        }
    }
}
